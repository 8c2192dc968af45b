//! The rows of an address's `txlistinternal` that its internal-transaction index does not count:
//! the index lists a transaction once, the list shows a row per frame the address is a party of —
//! a router paid back in two calls, a contract that pays out and selfdestructs to the same
//! beneficiary. `OtsInternalRowsIndex` holds one row id ([`super::transfer_rows`]'s shape, kind
//! `0`) for each transaction where an address's rows are not exactly one, so a walk counts a
//! settled stretch of the list from two lists alone, as it does a token list's (docs/format.md,
//! "Address indexes").
//!
//! The count is what the indexing tracer's frames say; the rows a page shows are made from the
//! node's call tracer at request time. Both list the same frames — the index already relies on
//! that for which transactions an address's list holds — and the tests compare deep pages with
//! rows computed from the node's traces.

use alloy_primitives::Address;
use ots_classifiers::{CallFrame, FrameKind};

use super::{
    lists_internal,
    transfer_rows::{first_of, MAX_EXTRA, UNCOUNTED},
};
use crate::txid::TxId;

/// The parties of a listed frame as the rows name them: its `from`, and its `to` — the callee,
/// the beneficiary, or the created contract — unless a create never had an address.
fn row_parties(frame: &CallFrame) -> impl Iterator<Item = Address> {
    let creates = matches!(frame.kind, FrameKind::Create | FrameKind::Create2);
    let to = (!(creates && frame.to.is_zero()) && frame.to != frame.from).then_some(frame.to);
    std::iter::once(frame.from).chain(to)
}

/// The row id of transaction `tx` making `rows` rows of a party's list, if it is not one.
fn row_id(tx: TxId, rows: u64) -> Option<u64> {
    if rows == 1 {
        return None;
    }
    let code = if rows == 0 || rows - 1 > MAX_EXTRA { UNCOUNTED } else { rows - 1 };
    Some(first_of(tx.0)? | code)
}

/// The row ids of block `block`'s frames (`frames`, in execution order, transaction by
/// transaction), as `(party, id)`: each transaction's listed frames per party, a frame counted
/// once for a party that is both its `from` and its `to`.
pub fn row_ids(block: u64, frames: &[CallFrame]) -> Vec<(Address, u64)> {
    let mut out = Vec::new();
    let mut tx_rows: Vec<(Address, u64)> = Vec::new();
    let mut flush = |tx: Option<TxId>, tx_rows: &mut Vec<(Address, u64)>| {
        for (party, rows) in tx_rows.drain(..) {
            if let Some(id) = tx.and_then(|tx| row_id(tx, rows)) {
                out.push((party, id));
            }
        }
    };
    let mut current = None;
    for frame in frames.iter().filter(|f| lists_internal(f)) {
        if current != Some(frame.tx_index) {
            flush(current.and_then(|i| TxId::new(block, i).ok()), &mut tx_rows);
            current = Some(frame.tx_index);
        }
        for party in row_parties(frame) {
            match tx_rows.iter_mut().find(|(p, _)| *p == party) {
                Some((_, rows)) => *rows += 1,
                None => tx_rows.push((party, 1)),
            }
        }
    }
    flush(current.and_then(|i| TxId::new(block, i).ok()), &mut tx_rows);
    out
}

#[cfg(test)]
mod tests {
    use alloy_primitives::U256;

    use super::*;

    fn frame(
        tx_index: u64,
        depth: u32,
        kind: FrameKind,
        from: Address,
        to: Address,
        value: u64,
    ) -> CallFrame {
        CallFrame { tx_index, depth, kind, from, to, value: U256::from(value), success: true }
    }

    #[test]
    fn each_party_counts_the_frames_it_is_in_per_transaction() {
        let [router, a, b, made] = [1, 2, 3, 4].map(Address::repeat_byte);
        let frames = vec![
            // Transaction 0: the top call (not listed), the router pays `a` twice and `b` once,
            // a value-less call (not listed).
            frame(0, 0, FrameKind::Call, a, router, 5),
            frame(0, 1, FrameKind::Call, router, a, 1),
            frame(0, 1, FrameKind::Call, router, a, 1),
            frame(0, 1, FrameKind::Call, router, b, 1),
            frame(0, 1, FrameKind::Call, router, b, 0),
            // Transaction 3: the router creates `made`, which selfdestructs to itself, and a
            // create that failed before it had an address.
            frame(3, 1, FrameKind::Create, router, made, 0),
            frame(3, 2, FrameKind::SelfDestruct, made, made, 0),
            frame(3, 1, FrameKind::Create2, router, Address::ZERO, 0),
        ];
        let mut ids = row_ids(7, &frames);
        ids.sort_unstable();
        let id = |i, rows| row_id(TxId::new(7, i).expect("id"), rows).expect("not one row");
        let mut want = vec![(router, id(0, 3)), (a, id(0, 2)), (router, id(3, 2)), (made, id(3, 2))];
        want.sort_unstable();
        assert_eq!(ids, want);
        // Two rows beyond the first: the code 2.
        assert_eq!(id(0, 3) & UNCOUNTED, 2);
    }
}
