//! The transactions a token list of one token walks: for the token's own lists (`contractaddress`
//! alone) those that move it, from `OtsTokenTransfersIndex`; for an address's list of that token
//! alone (`address` and `contractaddress`) those in which the address moved it, from
//! `OtsPartyTokenIndex`. Their ids also say how many rows each makes (docs/format.md, "Address
//! indexes"). A database upgraded from an older format holds such a list only from the state's
//! `token_transfers_from` (or `party_token_from`) on; below it the walk reads what it read
//! before — the token's appearances, every transaction that called it, or the address's transfer
//! index, every transaction in which it moved a token of the kind. Positions are in the two
//! joined at that id.

use alloy_primitives::Address;

use crate::{
    db::{state, DbResult, ReadTxn},
    decode::TokenKind,
    index::families::{
        address_index::{ids_below, ids_from, rank, settled, sum_row_ids, transfer_rows, IdList},
        appearances,
    },
};

/// A list of transactions that move a token, with the rows each makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Moves {
    /// A token's own lists: `OtsTokenTransfersIndex`, its appearances below
    /// `token_transfers_from`.
    Token(Address),
    /// A party's lists of one token: `OtsPartyTokenIndex`, the party's transfer index of the
    /// list's kind below `party_token_from`.
    PartyToken {
        /// The list's kind.
        kind: TokenKind,
        /// The address whose list it is.
        party: Address,
        /// The token.
        token: Address,
    },
}

impl Moves {
    fn list(self) -> IdList {
        match self {
            Self::Token(_) => IdList::TokenTransfers,
            Self::PartyToken { .. } => IdList::PartyToken,
        }
    }

    fn key(self) -> Address {
        match self {
            Self::Token(token) => token,
            Self::PartyToken { party, token, .. } => transfer_rows::party_token_key(&party, &token),
        }
    }

    /// The first TxId the list holds every transaction from.
    pub(super) fn from(self, t: &ReadTxn) -> DbResult<u64> {
        match self {
            Self::Token(_) => state::read_token_transfers_from(t),
            Self::PartyToken { .. } => state::read_party_token_from(t),
        }
    }

    /// Up to `want` ids of the list standing in below [`Self::from`], from `bound` on (more
    /// where the appearances end in a block with more), and whether more follow.
    fn older_after(self, t: &ReadTxn, bound: u64, want: usize) -> DbResult<(Vec<u64>, bool)> {
        match self {
            Self::Token(token) => {
                let older = appearances::after(t, &token, bound, want)?;
                Ok((older.ids, older.more))
            }
            Self::PartyToken { kind, party, .. } => {
                ids_from(t, IdList::of_transfers(kind), &party, bound, want as u64)
            }
        }
    }

    /// Up to `want` ids of the list standing in, below `bound`, newest first, and whether more
    /// precede them.
    fn older_before(self, t: &ReadTxn, bound: u64, want: usize) -> DbResult<(Vec<u64>, bool)> {
        match self {
            Self::Token(token) => {
                let older = appearances::before(t, &token, bound, want)?;
                Ok((older.ids, older.more))
            }
            Self::PartyToken { kind, party, .. } => {
                ids_below(t, IdList::of_transfers(kind), &party, bound, want as u64)
            }
        }
    }

    /// How many ids of the list standing in lie below `id`.
    fn older_rank(self, t: &ReadTxn, id: u64) -> DbResult<u64> {
        match self {
            Self::Token(token) => appearances::rank(t, &token, id),
            Self::PartyToken { kind, party, .. } => rank(t, IdList::of_transfers(kind), &party, id),
        }
    }

    /// How many ids of the list standing in are older than the reorg window.
    fn older_settled(self, t: &ReadTxn) -> DbResult<u64> {
        match self {
            Self::Token(token) => appearances::settled(t, &token),
            Self::PartyToken { kind, party, .. } => settled(t, IdList::of_transfers(kind), &party),
        }
    }
}

/// The first row id of TxId `id`, or past every row id when `id` is past every block.
fn row_bound(id: u64) -> u64 {
    transfer_rows::first_of(id).unwrap_or(u64::MAX)
}

/// The TxId of row id `row`.
const fn tx_of(row: u64) -> u64 {
    row >> transfer_rows::SHIFT
}

/// Up to `want` ids from `bound` on (ascending; more where the appearances end in a block with
/// more), and whether more follow.
pub(super) fn after(t: &ReadTxn, moves: Moves, bound: u64, want: usize) -> DbResult<(Vec<u64>, bool)> {
    let from = moves.from(t)?;
    let mut ids = Vec::new();
    if bound < from {
        let (older, more) = moves.older_after(t, bound, want)?;
        ids.extend(older.iter().copied().filter(|&id| id < from));
        let below_done = !more || ids.len() < older.len();
        if !below_done || ids.len() >= want {
            return Ok((ids, true));
        }
    }
    let want = (want - ids.len()) as u64;
    let (rows, more) = ids_from(t, moves.list(), &moves.key(), row_bound(bound.max(from)), want)?;
    ids.extend(rows.into_iter().map(tx_of));
    Ok((ids, more))
}

/// Up to `want` ids below `bound`, newest first (more where the appearances start in a block
/// with more), and whether more precede them.
pub(super) fn before(t: &ReadTxn, moves: Moves, bound: u64, want: usize) -> DbResult<(Vec<u64>, bool)> {
    let from = moves.from(t)?;
    let mut ids = Vec::new();
    if bound > from {
        let (rows, more) = ids_below(t, moves.list(), &moves.key(), row_bound(bound), want as u64)?;
        ids.extend(rows.into_iter().map(tx_of));
        if more || from == 0 || ids.len() >= want {
            return Ok((ids, more || from > 0));
        }
    }
    let (older, more) = moves.older_before(t, bound.min(from), want - ids.len())?;
    ids.extend(older);
    Ok((ids, more))
}

/// How many of the ids lie below `id`.
pub(super) fn rank_of(t: &ReadTxn, moves: Moves, id: u64) -> DbResult<u64> {
    let from = moves.from(t)?;
    let older = if from > 0 { moves.older_rank(t, id.min(from))? } else { 0 };
    Ok(older + rank(t, moves.list(), &moves.key(), row_bound(id))?)
}

/// How many of the ids are older than the reorg window.
pub(super) fn settled_of(t: &ReadTxn, moves: Moves) -> DbResult<u64> {
    let from = moves.from(t)?;
    let older = match from {
        0 => 0,
        from => moves.older_settled(t)?.min(moves.older_rank(t, from)?),
    };
    Ok(older + settled(t, moves.list(), &moves.key())?)
}

/// How many rows of the `kind` list its transactions `first..=last` make, if the index says: the
/// rows each of its ids there codes. `None` below the list's start or where a transaction's rows
/// are not counted (more than the codes reach, or two kinds of the token).
pub(super) fn rows_within(
    t: &ReadTxn,
    moves: Moves,
    kind: TokenKind,
    (first, last): (u64, u64),
) -> DbResult<Option<u64>> {
    if first < moves.from(t)? {
        return Ok(None);
    }
    sum_row_ids(t, moves.list(), &moves.key(), (first, last), |id| transfer_rows::token_rows(id, kind))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::{
        codec::Role,
        tables::{
            OtsAppearances, OtsERC20TransferCounter, OtsERC20TransferIndex, OtsPartyTokenCounter,
            OtsPartyTokenIndex, OtsTokenTransfersCounter, OtsTokenTransfersIndex,
        },
        AccessMode, Db,
    };
    use crate::index::families::address_index::append_ids;
    use crate::txid::TxId;

    fn id(block: u64) -> u64 {
        TxId::new(block, 1).expect("id").0
    }

    /// A row id of block `block`'s transaction making `rows` ERC20 rows.
    fn row(block: u64, rows: u64) -> u64 {
        transfer_rows::first_of(id(block)).expect("shifts") | rows
    }

    /// A token's list holds blocks 5 (two rows) and 9 (one); below `token_transfers_from`
    /// (block 4) its appearances (blocks 2 and 3) stand in.
    #[test]
    fn the_list_takes_over_from_the_appearances_at_its_start() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
        let token = Address::repeat_byte(7);
        let txn = db.begin_write().expect("write");
        append_ids::<OtsTokenTransfersIndex, OtsTokenTransfersCounter>(&txn, &token, &[row(5, 2), row(9, 1)])
            .expect("list");
        txn.commit().expect("commit");

        let t = db.begin_read().expect("read");
        assert_eq!(after(&t, Moves::Token(token), 0, 10).expect("after"), (vec![id(5), id(9)], false));
        assert_eq!(before(&t, Moves::Token(token), u64::MAX, 1).expect("before"), (vec![id(9)], true));
        assert_eq!(
            [0, id(6), u64::MAX].map(|i| rank_of(&t, Moves::Token(token), i).expect("rank")),
            [0, 1, 2]
        );
        assert_eq!(settled_of(&t, Moves::Token(token)).expect("settled"), 2);
        assert_eq!(
            rows_within(&t, Moves::Token(token), TokenKind::Erc20, (id(5), id(9))).expect("rows"),
            Some(3)
        );
        assert_eq!(
            rows_within(&t, Moves::Token(token), TokenKind::Erc721, (id(5), id(9))).expect("rows"),
            Some(0)
        );
        drop(t);

        let txn = db.begin_write().expect("write");
        appearances::lists::append::<OtsAppearances>(&txn, &token, &[id(2), id(3)], &[Role::Other; 2])
            .expect("appearances");
        state::set_token_transfers_from(&txn, TxId::first_of_block(4).0).expect("state");
        txn.commit().expect("commit");
        let t = db.begin_read().expect("read");
        assert_eq!(
            after(&t, Moves::Token(token), 0, 10).expect("after"),
            (vec![id(2), id(3), id(5), id(9)], false)
        );
        assert_eq!(after(&t, Moves::Token(token), 0, 1).expect("after"), (vec![id(2)], true));
        assert_eq!(after(&t, Moves::Token(token), id(4), 10).expect("after"), (vec![id(5), id(9)], false));
        assert_eq!(
            before(&t, Moves::Token(token), u64::MAX, 10).expect("before"),
            (vec![id(9), id(5), id(3), id(2)], false)
        );
        assert_eq!(before(&t, Moves::Token(token), id(9), 2).expect("before"), (vec![id(5), id(3)], true));
        assert_eq!(before(&t, Moves::Token(token), id(3), 2).expect("before"), (vec![id(2)], false));
        assert_eq!(
            [0, id(3), id(4), id(6), u64::MAX].map(|i| rank_of(&t, Moves::Token(token), i).expect("rank")),
            [0, 1, 2, 3, 4]
        );
        assert_eq!(settled_of(&t, Moves::Token(token)).expect("settled"), 4);
        assert_eq!(
            rows_within(&t, Moves::Token(token), TokenKind::Erc20, (id(3), id(9))).expect("rows"),
            None
        );
        assert_eq!(
            rows_within(&t, Moves::Token(token), TokenKind::Erc20, (id(5), id(5))).expect("rows"),
            Some(2)
        );
    }

    /// A party's list of one token holds blocks 6 (three rows) and 8 (one); below
    /// `party_token_from` (block 4) the party's ERC20 transfer index (blocks 1 and 3, of any
    /// token) stands in. Another token's pair list of the same party is not read.
    #[test]
    fn a_party_list_of_one_token_takes_over_from_the_transfer_index() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
        let (party, token, other) =
            (Address::repeat_byte(1), Address::repeat_byte(2), Address::repeat_byte(3));
        let moves = Moves::PartyToken { kind: TokenKind::Erc20, party, token };
        let key = |t: &Address| transfer_rows::party_token_key(&party, t);
        let txn = db.begin_write().expect("write");
        append_ids::<OtsPartyTokenIndex, OtsPartyTokenCounter>(&txn, &key(&token), &[row(6, 3), row(8, 1)])
            .expect("list");
        append_ids::<OtsPartyTokenIndex, OtsPartyTokenCounter>(&txn, &key(&other), &[row(7, 1)])
            .expect("list");
        append_ids::<OtsERC20TransferIndex, OtsERC20TransferCounter>(
            &txn,
            &party,
            &[id(1), id(3), id(6), id(7), id(8)],
        )
        .expect("transfers");
        txn.commit().expect("commit");

        let t = db.begin_read().expect("read");
        assert_eq!(after(&t, moves, 0, 10).expect("after"), (vec![id(6), id(8)], false));
        assert_eq!(rows_within(&t, moves, TokenKind::Erc20, (id(6), id(8))).expect("rows"), Some(4));
        assert_eq!(settled_of(&t, moves).expect("settled"), 2);
        drop(t);

        let txn = db.begin_write().expect("write");
        state::set_party_token_from(&txn, TxId::first_of_block(4).0).expect("state");
        txn.commit().expect("commit");
        let t = db.begin_read().expect("read");
        assert_eq!(after(&t, moves, 0, 10).expect("after"), (vec![id(1), id(3), id(6), id(8)], false));
        assert_eq!(after(&t, moves, 0, 2).expect("after"), (vec![id(1), id(3)], true));
        assert_eq!(before(&t, moves, u64::MAX, 3).expect("before"), (vec![id(8), id(6), id(3)], true));
        assert_eq!(before(&t, moves, id(6), 5).expect("before"), (vec![id(3), id(1)], false));
        assert_eq!(
            [0, id(2), id(5), id(7), u64::MAX].map(|i| rank_of(&t, moves, i).expect("rank")),
            [0, 1, 2, 3, 4]
        );
        assert_eq!(settled_of(&t, moves).expect("settled"), 4);
        assert_eq!(rows_within(&t, moves, TokenKind::Erc20, (id(3), id(8))).expect("rows"), None);
        assert_eq!(rows_within(&t, moves, TokenKind::Erc20, (id(6), id(8))).expect("rows"), Some(4));
    }
}
