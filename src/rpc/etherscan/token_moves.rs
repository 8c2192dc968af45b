//! A token's transactions as its own token lists (`contractaddress` alone) walk them: those that
//! move it, from `OtsTokenTransfersIndex`, whose ids also say how many rows each makes
//! (docs/format.md, "Address indexes"). A database upgraded from format 13 holds that list only
//! from the state's `token_transfers_from` on; below it the walk reads the token's appearances,
//! every transaction that called it, as before. Positions are in the two joined at that id.

use alloy_primitives::Address;

use crate::{
    db::{state, DbResult, ReadTxn},
    decode::TokenKind,
    index::families::{
        address_index::{count, page, rank, settled, sum_row_ids, transfer_rows, IdList},
        appearances,
    },
};

const LIST: IdList = IdList::TokenTransfers;

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
pub(super) fn after(t: &ReadTxn, token: &Address, bound: u64, want: usize) -> DbResult<(Vec<u64>, bool)> {
    let from = state::read_token_transfers_from(t)?;
    let mut ids = Vec::new();
    if bound < from {
        let older = appearances::after(t, token, bound, want)?;
        ids.extend(older.ids.iter().copied().filter(|&id| id < from));
        let below_done = !older.more || ids.len() < older.ids.len();
        if !below_done || ids.len() >= want {
            return Ok((ids, true));
        }
    }
    let at = rank(t, LIST, token, row_bound(bound.max(from)))?;
    let rows = page(t, LIST, token, at, (want - ids.len()) as u64)?;
    let more = at + (rows.len() as u64) < count(t, LIST, token)?;
    ids.extend(rows.into_iter().map(tx_of));
    Ok((ids, more))
}

/// Up to `want` ids below `bound`, newest first (more where the appearances start in a block
/// with more), and whether more precede them.
pub(super) fn before(t: &ReadTxn, token: &Address, bound: u64, want: usize) -> DbResult<(Vec<u64>, bool)> {
    let from = state::read_token_transfers_from(t)?;
    let mut ids = Vec::new();
    if bound > from {
        let end = rank(t, LIST, token, row_bound(bound))?;
        let start = end.saturating_sub(want as u64);
        ids.extend(page(t, LIST, token, start, end - start)?.into_iter().rev().map(tx_of));
        if start > 0 || from == 0 || ids.len() >= want {
            return Ok((ids, start > 0 || from > 0));
        }
    }
    let older = appearances::before(t, token, bound.min(from), want - ids.len())?;
    ids.extend(older.ids);
    Ok((ids, older.more))
}

/// How many of the ids lie below `id`.
pub(super) fn rank_of(t: &ReadTxn, token: &Address, id: u64) -> DbResult<u64> {
    let from = state::read_token_transfers_from(t)?;
    let older = if from > 0 { appearances::rank(t, token, id.min(from))? } else { 0 };
    Ok(older + rank(t, LIST, token, row_bound(id))?)
}

/// How many of the ids are older than the reorg window.
pub(super) fn settled_of(t: &ReadTxn, token: &Address) -> DbResult<u64> {
    let from = state::read_token_transfers_from(t)?;
    let older = match from {
        0 => 0,
        from => appearances::settled(t, token)?.min(appearances::rank(t, token, from)?),
    };
    Ok(older + settled(t, LIST, token)?)
}

/// How many rows of `token`'s own `kind` list its transactions `first..=last` make, if the index
/// says: the rows each of its ids there codes. `None` below `token_transfers_from` or where a
/// transaction's rows are not counted (more than the codes reach, or two kinds of the token).
pub(super) fn rows_within(
    t: &ReadTxn,
    token: &Address,
    kind: TokenKind,
    (first, last): (u64, u64),
) -> DbResult<Option<u64>> {
    if first < state::read_token_transfers_from(t)? {
        return Ok(None);
    }
    sum_row_ids(t, LIST, token, (first, last), |id| transfer_rows::token_rows(id, kind))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::{
        codec::Role,
        tables::{OtsAppearances, OtsTokenTransfersCounter, OtsTokenTransfersIndex},
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
        assert_eq!(after(&t, &token, 0, 10).expect("after"), (vec![id(5), id(9)], false));
        assert_eq!(before(&t, &token, u64::MAX, 1).expect("before"), (vec![id(9)], true));
        assert_eq!([0, id(6), u64::MAX].map(|i| rank_of(&t, &token, i).expect("rank")), [0, 1, 2]);
        assert_eq!(settled_of(&t, &token).expect("settled"), 2);
        assert_eq!(rows_within(&t, &token, TokenKind::Erc20, (id(5), id(9))).expect("rows"), Some(3));
        assert_eq!(rows_within(&t, &token, TokenKind::Erc721, (id(5), id(9))).expect("rows"), Some(0));
        drop(t);

        let txn = db.begin_write().expect("write");
        appearances::lists::append::<OtsAppearances>(&txn, &token, &[id(2), id(3)], &[Role::Other; 2])
            .expect("appearances");
        state::set_token_transfers_from(&txn, TxId::first_of_block(4).0).expect("state");
        txn.commit().expect("commit");
        let t = db.begin_read().expect("read");
        assert_eq!(after(&t, &token, 0, 10).expect("after"), (vec![id(2), id(3), id(5), id(9)], false));
        assert_eq!(after(&t, &token, 0, 1).expect("after"), (vec![id(2)], true));
        assert_eq!(after(&t, &token, id(4), 10).expect("after"), (vec![id(5), id(9)], false));
        assert_eq!(
            before(&t, &token, u64::MAX, 10).expect("before"),
            (vec![id(9), id(5), id(3), id(2)], false)
        );
        assert_eq!(before(&t, &token, id(9), 2).expect("before"), (vec![id(5), id(3)], true));
        assert_eq!(before(&t, &token, id(3), 2).expect("before"), (vec![id(2)], false));
        assert_eq!(
            [0, id(3), id(4), id(6), u64::MAX].map(|i| rank_of(&t, &token, i).expect("rank")),
            [0, 1, 2, 3, 4]
        );
        assert_eq!(settled_of(&t, &token).expect("settled"), 4);
        assert_eq!(rows_within(&t, &token, TokenKind::Erc20, (id(3), id(9))).expect("rows"), None);
        assert_eq!(rows_within(&t, &token, TokenKind::Erc20, (id(5), id(5))).expect("rows"), Some(2));
    }
}
