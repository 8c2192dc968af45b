//! The rows of an address's token lists (`tokentx`, `tokennfttx`, `token1155tx`) that its
//! transfer indexes do not count: those list a transaction once, a list shows a row per movement
//! — a swap sends one token and receives another, a mint of ten NFTs is ten rows, an ERC1155
//! batch a row per id. `OtsTransferRowsIndex` holds one id for each transaction of an address's
//! transfer index that makes other than one row (docs/format.md, "Address indexes"), so a walk
//! counts the rows of a settled stretch of the list from two lists alone (docs/etherscan.md,
//! "Paging").
//!
//! An id is the transaction's TxId shifted left by [`SHIFT`] bits, the kind in the next two and
//! a code in the low ten: the rows beyond the first (1 to [`MAX_EXTRA`]), or [`UNCOUNTED`] when
//! the transaction makes none (an ERC1155 log whose ids and amounts do not decode) or more than
//! that. Ids sort by transaction, so a stretch of the transfer index is a stretch of these.
//!
//! A token's own lists (`contractaddress` alone) have no transfer index to count from: a token
//! appears in every transaction that calls it, most of which move nothing. So
//! `OtsTokenTransfersIndex` holds, for each token, one id of the same shape for every transaction
//! with a transfer log of it ([`token_row_ids`]) — the code there is the rows themselves (1 to
//! [`MAX_EXTRA`]), the kind the one its logs had ([`MIXED`] when they had two, uncounted) — and is
//! the list such a walk reads.

use alloy_primitives::Address;

use crate::{
    decode::{TokenKind, TokenLog},
    txid::TxId,
};

/// Bits below the TxId: two for the kind, ten for the code.
pub const SHIFT: u32 = 12;

/// The code of a transaction whose rows the index does not count: a walk asks the node.
pub const UNCOUNTED: u64 = (1 << 10) - 1;

/// The most rows beyond the first a code counts.
pub const MAX_EXTRA: u64 = UNCOUNTED - 1;

/// The kind bits of a token's row id whose transaction moved it as two kinds of token (a contract
/// both ERC721 and ERC1155): its code is [`UNCOUNTED`].
pub const MIXED: u64 = 3;

/// The first row id of transaction `tx` (its kinds and codes sort after it); `None` for a TxId
/// too large to shift (a block past 2^32), which the index never holds.
pub const fn first_of(tx: u64) -> Option<u64> {
    if tx >> (64 - SHIFT) == 0 {
        Some(tx << SHIFT)
    } else {
        None
    }
}

/// The row id of transaction `tx` making `rows` rows of `kind`'s list, if it is not one.
pub fn row_id(tx: TxId, kind: TokenKind, rows: u64) -> Option<u64> {
    if rows == 1 {
        return None;
    }
    let code = if rows == 0 || rows - 1 > MAX_EXTRA { UNCOUNTED } else { rows - 1 };
    Some(first_of(tx.0)? | (kind_bits(kind) << 10) | code)
}

/// The token row id of transaction `tx` making `rows` rows (not zero) of the token's `kind`
/// list, or of two kinds (`kind` `None`).
fn token_row_id(tx: TxId, kind: Option<TokenKind>, rows: u64) -> Option<u64> {
    let (kind, code) = match kind {
        Some(kind) if rows <= MAX_EXTRA => (kind_bits(kind), rows),
        Some(kind) => (kind_bits(kind), UNCOUNTED),
        None => (MIXED, UNCOUNTED),
    };
    Some(first_of(tx.0)? | (kind << 10) | code)
}

/// What a row id says: its transaction, its kind and its code.
pub fn decode_row_id(id: u64) -> (TxId, Option<TokenKind>, u64) {
    let kind = match (id >> 10) & 3 {
        0 => Some(TokenKind::Erc20),
        1 => Some(TokenKind::Erc721),
        2 => Some(TokenKind::Erc1155),
        _ => None,
    };
    (TxId(id >> SHIFT), kind, id & UNCOUNTED)
}

const fn kind_bits(kind: TokenKind) -> u64 {
    match kind {
        TokenKind::Erc20 => 0,
        TokenKind::Erc721 => 1,
        TokenKind::Erc1155 => 2,
    }
}

/// The rows `log` makes in its parties' lists: one for an ERC20 or ERC721 transfer, one per id
/// for an ERC1155 log (none when its ids and amounts do not decode) — what the list's rows are
/// made by (`rpc::transfer_detail::movements`).
fn rows_of(log: &TokenLog<'_>) -> u64 {
    match log.kind {
        TokenKind::Erc20 | TokenKind::Erc721 => 1,
        TokenKind::Erc1155 => log.units().map_or(0, |units| units.len() as u64),
    }
}

/// Row ids of `logs` (in log order), gathered a transaction at a time: `count` adds a log to the
/// transaction's tallies, `id` makes a tally's row id once its transaction is done.
fn by_transaction<T>(
    logs: &[(TxId, TokenLog<'_>)],
    mut count: impl FnMut(&mut Vec<T>, &TokenLog<'_>),
    mut id: impl FnMut(TxId, T) -> Option<(Address, u64)>,
) -> Vec<(Address, u64)> {
    let mut out = Vec::new();
    let mut tallies: Vec<T> = Vec::new();
    let mut current = None;
    for (tx, log) in logs {
        if current != Some(*tx) {
            if let Some(done) = current {
                out.extend(tallies.drain(..).filter_map(|tally| id(done, tally)));
            }
            current = Some(*tx);
        }
        count(&mut tallies, log);
    }
    if let Some(done) = current {
        out.extend(tallies.drain(..).filter_map(|tally| id(done, tally)));
    }
    out
}

/// The row ids of a block's transfer logs (`logs`, in log order), as `(party, id)`: each
/// transaction's rows per party and kind, a log counted once for a party that both sent and
/// received it.
pub fn row_ids(logs: &[(TxId, TokenLog<'_>)]) -> Vec<(Address, u64)> {
    by_transaction(
        logs,
        |tallies: &mut Vec<(TokenKind, Address, u64)>, log| {
            let rows = rows_of(log);
            let parties: &[Address] = if log.from == log.to { &[log.from] } else { &[log.from, log.to] };
            for &party in parties {
                match tallies.iter_mut().find(|(k, p, _)| *k == log.kind && *p == party) {
                    Some((_, _, counted)) => *counted += rows,
                    None => tallies.push((log.kind, party, rows)),
                }
            }
        },
        |tx, (kind, party, rows)| row_id(tx, kind, rows).map(|id| (party, id)),
    )
}

/// The token row ids of a block's transfer logs (`logs`, in log order), as `(token, id)`: one
/// for each transaction and token it has a transfer log of, coding the rows the token's own list
/// shows for it (a log once; an ERC1155 log a row per id).
pub fn token_row_ids(logs: &[(TxId, TokenLog<'_>)]) -> Vec<(Address, u64)> {
    by_transaction(
        logs,
        // (token, kind — `None` once two —, rows) of the transaction at hand.
        |tallies: &mut Vec<(Address, Option<TokenKind>, u64)>, log| {
            let rows = rows_of(log);
            match tallies.iter_mut().find(|(t, ..)| *t == log.token) {
                Some((_, kind, counted)) => {
                    if *kind != Some(log.kind) {
                        *kind = None;
                    }
                    *counted += rows;
                }
                None => tallies.push((log.token, Some(log.kind), rows)),
            }
        },
        |tx, (token, kind, rows)| token_row_id(tx, kind, rows).map(|id| (token, id)),
    )
}

/// The key of `party`'s list of `token` alone in `OtsPartyTokenIndex`: the last 20 bytes of
/// keccak256(party ‖ token). The address indexes are keyed by 20 bytes; a collision of two pairs
/// would take finding a 160-bit collision of keccak256.
pub fn party_token_key(party: &Address, token: &Address) -> Address {
    let mut both = [0u8; 40];
    both[..20].copy_from_slice(party.as_slice());
    both[20..].copy_from_slice(token.as_slice());
    Address::from_slice(&alloy_primitives::keccak256(both)[12..])
}

/// The party–token row ids of a block's transfer logs (`logs`, in log order), as `(pair key,
/// id)`: one for each transaction, party and token the party sent or received, coding the rows
/// the party's list of that token alone shows for it — [`token_row_ids`]' rule restricted to the
/// party's logs, a log counted once for a party that both sent and received it.
pub fn party_token_row_ids(logs: &[(TxId, TokenLog<'_>)]) -> Vec<(Address, u64)> {
    by_transaction(
        logs,
        // (party, token, kind — `None` once two —, rows) of the transaction at hand.
        |tallies: &mut Vec<(Address, Address, Option<TokenKind>, u64)>, log| {
            let rows = rows_of(log);
            let parties: &[Address] = if log.from == log.to { &[log.from] } else { &[log.from, log.to] };
            for &party in parties {
                match tallies.iter_mut().find(|(p, t, ..)| *p == party && *t == log.token) {
                    Some((_, _, kind, counted)) => {
                        if *kind != Some(log.kind) {
                            *kind = None;
                        }
                        *counted += rows;
                    }
                    None => tallies.push((party, log.token, Some(log.kind), rows)),
                }
            }
        },
        |tx, (party, token, kind, rows)| {
            token_row_id(tx, kind, rows).map(|id| (party_token_key(&party, &token), id))
        },
    )
}

/// The rows a token row id (or a party–token row id) says its transaction makes in the token's
/// `kind` list: its code when it is of that kind, none when of another, `None` when it does not
/// count them.
pub fn token_rows(id: u64, kind: TokenKind) -> Option<u64> {
    match decode_row_id(id) {
        (_, _, UNCOUNTED) | (_, None, _) => None,
        (_, Some(k), rows) if k == kind => Some(rows),
        _ => Some(0),
    }
}

#[cfg(test)]
mod tests {
    use alloy_primitives::{B256, U256};

    use super::*;
    use crate::decode::{TokenKinds, TRANSFER_BATCH_TOPIC, TRANSFER_TOPIC};

    #[test]
    fn a_row_id_is_the_txid_then_the_kind_then_the_code() {
        let tx = TxId::new(0x1234_5678, 0x9_abcd).expect("id");
        assert_eq!(row_id(tx, TokenKind::Erc20, 1), None);
        // TxId 0x12345678_9abcd → shifted 12 bits, kind 1 (ERC721), 2 rows beyond the first.
        assert_eq!(row_id(tx, TokenKind::Erc721, 3), Some(0x1234_5678_9abc_d402));
        assert_eq!(row_id(tx, TokenKind::Erc1155, 0), Some(0x1234_5678_9abc_dbff));
        assert_eq!(row_id(tx, TokenKind::Erc20, 1_023), Some(0x1234_5678_9abc_d3fe));
        assert_eq!(row_id(tx, TokenKind::Erc20, 1_024), Some(0x1234_5678_9abc_d3ff));
        assert_eq!(decode_row_id(0x1234_5678_9abc_d402), (tx, Some(TokenKind::Erc721), 2));
        assert_eq!(first_of(tx.0), Some(0x1234_5678_9abc_d000));
        // A block past 2^32 does not shift.
        let far = TxId::new(1 << 32, 0).expect("id");
        assert_eq!((first_of(far.0), row_id(far, TokenKind::Erc20, 2)), (None, None));
    }

    fn word(a: Address) -> B256 {
        a.into_word()
    }

    /// Transaction `i` of block 9.
    fn tx(i: u64) -> TxId {
        TxId::new(9, i).expect("id")
    }

    /// An ERC20 log's data: 5 units.
    fn amount() -> Vec<u8> {
        U256::from(5).to_be_bytes::<32>().to_vec()
    }

    /// A `TransferBatch` log's data: two ids (7, 8), two amounts (1, 1).
    fn two_ids() -> Vec<u8> {
        [64u64, 160, 2, 7, 8, 2, 1, 1].iter().flat_map(|n| U256::from(*n).to_be_bytes::<32>()).collect()
    }

    /// A log of `token`, an ERC1155 when it is `multi`, else an ERC20.
    fn log<'a>(token: Address, multi: Address, topics: &'a [B256], data: &'a [u8]) -> TokenLog<'a> {
        let kinds = |t: &Address| {
            Ok::<_, std::convert::Infallible>(if *t == multi {
                TokenKinds { transfer: None, multi: true }
            } else {
                TokenKinds { transfer: Some(TokenKind::Erc20), multi: false }
            })
        };
        TokenLog::decode(token, topics, data, kinds).expect("kinds").expect("a token log")
    }

    #[test]
    fn each_party_counts_its_rows_per_transaction_and_kind() {
        let [token, multi, a, b, c] = [1, 2, 3, 4, 5].map(Address::repeat_byte);
        let erc20 = [TRANSFER_TOPIC, word(a), word(b)];
        let to_self = [TRANSFER_TOPIC, word(c), word(c)];
        let batch = [TRANSFER_BATCH_TOPIC, word(a), word(a), word(c)];
        let (amount, two) = (amount(), two_ids());
        let logs = vec![
            // Transaction 0: a sends to b twice; c to itself once.
            (tx(0), log(token, multi, &erc20, &amount)),
            (tx(0), log(token, multi, &erc20, &amount)),
            (tx(0), log(token, multi, &to_self, &amount)),
            // Transaction 1: a sends to b once, and a batch of two ids from a to c.
            (tx(1), log(token, multi, &erc20, &amount)),
            (tx(1), log(multi, multi, &batch, &two)),
            // Transaction 2: a batch whose amounts do not decode.
            (tx(2), log(multi, multi, &batch, &amount)),
        ];
        let mut ids = row_ids(&logs);
        ids.sort_unstable();
        let id = |i, kind, rows| row_id(tx(i), kind, rows).expect("not one row");
        let mut want = vec![
            (a, id(0, TokenKind::Erc20, 2)),
            (b, id(0, TokenKind::Erc20, 2)),
            (a, id(1, TokenKind::Erc1155, 2)),
            (c, id(1, TokenKind::Erc1155, 2)),
            (a, id(2, TokenKind::Erc1155, 0)),
            (c, id(2, TokenKind::Erc1155, 0)),
        ];
        want.sort_unstable();
        assert_eq!(ids, want);
    }

    #[test]
    fn a_token_counts_its_own_rows_per_transaction() {
        let [token, multi, a, b, c] = [1, 2, 3, 4, 5].map(Address::repeat_byte);
        let erc20 = [TRANSFER_TOPIC, word(a), word(b)];
        let to_self = [TRANSFER_TOPIC, word(c), word(c)];
        let batch = [TRANSFER_BATCH_TOPIC, word(a), word(a), word(c)];
        let (amount, two) = (amount(), two_ids());
        let logs = vec![
            // Transaction 0: three transfers of `token`, one of them to itself — three rows.
            (tx(0), log(token, multi, &erc20, &amount)),
            (tx(0), log(token, multi, &erc20, &amount)),
            (tx(0), log(token, multi, &to_self, &amount)),
            // Transaction 1: one of `token`, a batch of two ids of `multi`.
            (tx(1), log(token, multi, &erc20, &amount)),
            (tx(1), log(multi, multi, &batch, &two)),
            // Transaction 2: a batch that does not decode — no rows, counted as none.
            (tx(2), log(multi, multi, &batch, &amount)),
        ];
        let mut ids = token_row_ids(&logs);
        ids.sort_unstable();
        let first = |i| first_of(tx(i).0).expect("shifts");
        let mut want = vec![
            (token, first(0) | 3),
            (token, first(1) | 1),
            (multi, first(1) | (2 << 10) | 2),
            (multi, first(2) | (2 << 10)),
        ];
        want.sort_unstable();
        assert_eq!(ids, want);
        assert_eq!(token_rows(first(0) | 3, TokenKind::Erc20), Some(3));
        assert_eq!(token_rows(first(0) | 3, TokenKind::Erc721), Some(0));
        assert_eq!(token_rows(first(1) | (2 << 10) | 2, TokenKind::Erc1155), Some(2));
        assert_eq!(token_rows(first(1) | (MIXED << 10) | UNCOUNTED, TokenKind::Erc1155), None);
        assert_eq!(token_rows(first(1) | UNCOUNTED, TokenKind::Erc20), None);
        // A contract moved as two kinds in one transaction is not counted.
        let nft = [TRANSFER_TOPIC, word(a), word(b), B256::with_last_byte(7)];
        let single_kinds = |t: &Address| {
            Ok::<_, std::convert::Infallible>(if *t == multi {
                TokenKinds { transfer: Some(TokenKind::Erc721), multi: true }
            } else {
                TokenKinds::default()
            })
        };
        let as_nft = TokenLog::decode(multi, &nft, &[], single_kinds).expect("kinds").expect("a token log");
        let mixed = token_row_ids(&[(tx(3), as_nft), (tx(3), log(multi, multi, &batch, &two))]);
        assert_eq!(mixed, vec![(multi, first(3) | (MIXED << 10) | UNCOUNTED)]);
    }

    #[test]
    fn a_party_counts_its_rows_of_each_token_per_transaction() {
        let [token, other, multi, a, b, c] = [1, 6, 2, 3, 4, 5].map(Address::repeat_byte);
        let a_to_b = [TRANSFER_TOPIC, word(a), word(b)];
        let c_to_c = [TRANSFER_TOPIC, word(c), word(c)];
        let batch = [TRANSFER_BATCH_TOPIC, word(a), word(a), word(c)];
        let (amount, two) = (amount(), two_ids());
        let logs = vec![
            // Transaction 0: a sends `token` to b twice and `other` once; c sends `token` to
            // itself.
            (tx(0), log(token, multi, &a_to_b, &amount)),
            (tx(0), log(token, multi, &a_to_b, &amount)),
            (tx(0), log(other, multi, &a_to_b, &amount)),
            (tx(0), log(token, multi, &c_to_c, &amount)),
            // Transaction 1: a batch of two ids of `multi` from a to c.
            (tx(1), log(multi, multi, &batch, &two)),
        ];
        let mut ids = party_token_row_ids(&logs);
        ids.sort_unstable();
        let first = |i| first_of(tx(i).0).expect("shifts");
        let key = party_token_key;
        let mut want = vec![
            (key(&a, &token), first(0) | 2),
            (key(&b, &token), first(0) | 2),
            (key(&a, &other), first(0) | 1),
            (key(&b, &other), first(0) | 1),
            (key(&c, &token), first(0) | 1),
            (key(&a, &multi), first(1) | (2 << 10) | 2),
            (key(&c, &multi), first(1) | (2 << 10) | 2),
        ];
        want.sort_unstable();
        assert_eq!(ids, want);
        // The pair's key: keccak256(party ‖ token), its last 20 bytes; the order matters.
        assert_eq!(
            key(&Address::repeat_byte(0x11), &Address::repeat_byte(0x22)),
            "0xc73d2cd9e6b24d5e789a4106eca975c86ec900e1".parse::<Address>().expect("hex")
        );
        assert_ne!(key(&a, &token), key(&token, &a));
    }
}
