//! An address's internal transactions as `txlistinternal` walks them: its internal-transaction
//! index, and the transactions that created it in a frame below their top call, which the index
//! leaves to `OtsContractCreators` (docs/format.md, "Address indexes"). Positions are in the
//! two merged, by id.

use alloy_primitives::Address;

use crate::{
    db::{
        codec::{BlockNumber, Role},
        state,
        tables::{OtsContractCreators, OtsUndoJournal},
        DbResult, ReadTxn,
    },
    index::families::{
        address_index::{count, page, rank, settled, sum_row_ids, transfer_rows, IdList},
        appearances,
    },
    txid::TxId,
};

const LIST: IdList = IdList::InternalTxs;

/// The transactions that created `address` below their top call and that its list lacks,
/// ascending. A database indexed before creations were left out of the list holds them there
/// too; a top-level creation (the address received its transaction) is none of them.
fn creations(t: &ReadTxn, address: &Address) -> DbResult<Vec<u64>> {
    let mut ids: Vec<u64> =
        t.cursor::<OtsContractCreators>()?.dups(address)?.iter().map(|c| c.tx.0).collect();
    if ids.is_empty() {
        return Ok(ids);
    }
    ids.sort_unstable();
    ids.dedup();
    let roles = appearances::roles_among(t, address, &ids)?;
    let mut out = Vec::with_capacity(ids.len());
    for (&id, role) in ids.iter().zip(roles) {
        if role == Some(Role::Received) || rank(t, LIST, address, id + 1)? > rank(t, LIST, address, id)? {
            continue;
        }
        out.push(id);
    }
    Ok(out)
}

/// How many of `ids` lie below `id`.
fn below(ids: &[u64], id: u64) -> u64 {
    ids.partition_point(|&x| x < id) as u64
}

/// Up to `want` ids from `bound` on (ascending), and whether more follow.
pub(super) fn after(t: &ReadTxn, address: &Address, bound: u64, want: usize) -> DbResult<(Vec<u64>, bool)> {
    let created = creations(t, address)?;
    let at = rank(t, LIST, address, bound)?;
    let mut ids = page(t, LIST, address, at, want as u64)?;
    ids.extend(created.iter().copied().filter(|&id| id >= bound).take(want));
    ids.sort_unstable();
    ids.truncate(want);
    let left = count(t, LIST, address)? + created.len() as u64 - at - below(&created, bound);
    let more = left > ids.len() as u64;
    Ok((ids, more))
}

/// Up to `want` ids below `bound`, newest first, and whether more precede them.
pub(super) fn before(t: &ReadTxn, address: &Address, bound: u64, want: usize) -> DbResult<(Vec<u64>, bool)> {
    let created = creations(t, address)?;
    let end = rank(t, LIST, address, bound)?;
    let start = end.saturating_sub(want as u64);
    let mut ids = page(t, LIST, address, start, end - start)?;
    let earlier = &created[..created.partition_point(|&id| id < bound)];
    ids.extend(&earlier[earlier.len().saturating_sub(want)..]);
    ids.sort_unstable_by(|a, b| b.cmp(a));
    ids.truncate(want);
    let more = end + earlier.len() as u64 > ids.len() as u64;
    Ok((ids, more))
}

/// How many of the ids lie below `id`.
pub(super) fn rank_of(t: &ReadTxn, address: &Address, id: u64) -> DbResult<u64> {
    Ok(rank(t, LIST, address, id)? + below(&creations(t, address)?, id))
}

/// How many of the ids are older than the reorg window.
pub(super) fn settled_of(t: &ReadTxn, address: &Address) -> DbResult<u64> {
    let window = t.cursor::<OtsUndoJournal>()?.first()?.map(|(BlockNumber(b), _)| b);
    let created = creations(t, address)?;
    let old = created.iter().filter(|&&id| window.is_none_or(|w| TxId(id).block() < w)).count();
    Ok(settled(t, LIST, address)? + old as u64)
}

/// How many `txlistinternal` rows of `address` its settled ids `first..=last` (`len` of them)
/// make, if the index alone says: one each, plus those beyond the first that the internal rows
/// index holds for them. `None` below where that index (or the internal-transaction index) holds
/// every transaction, or where a transaction's rows are not counted there.
pub(super) fn rows_within(
    t: &ReadTxn,
    address: &Address,
    (first, last): (u64, u64),
    len: u64,
) -> DbResult<Option<u64>> {
    if first < state::read_internal_rows_from(t)?.max(state::read_internal_txs_from(t)?) {
        return Ok(None);
    }
    let extra = sum_row_ids(t, IdList::InternalRows, address, (first, last), |id| {
        Some(id & transfer_rows::UNCOUNTED).filter(|&code| code != transfer_rows::UNCOUNTED)
    })?;
    Ok(extra.map(|extra| len + extra))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::{codec::Creation, tables::OtsInternalTxIndex, AccessMode, Db};
    use crate::index::families::address_index::append_ids;

    fn id(block: u64) -> u64 {
        TxId::new(block, 1).expect("id").0
    }

    /// A factory's contract whose list holds two later payments: its inner creation comes
    /// first, in place, both ways; a top-level creation is none of its internal transactions.
    #[test]
    fn an_inner_creation_takes_its_place_among_the_listed_ids() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
        let [made, factory] = [1, 2].map(Address::repeat_byte);
        let txn = db.begin_write().expect("write");
        append_ids::<OtsInternalTxIndex, crate::db::tables::OtsInternalTxCounter>(
            &txn,
            &made,
            &[id(5), id(9)],
        )
        .expect("list");
        txn.put::<OtsContractCreators>(&made, &Creation { tx: TxId(id(3)), creator: factory })
            .expect("creation");
        txn.commit().expect("commit");
        let t = db.begin_read().expect("read");
        assert_eq!(after(&t, &made, 0, 10).expect("after"), (vec![id(3), id(5), id(9)], false));
        assert_eq!(after(&t, &made, 0, 2).expect("after"), (vec![id(3), id(5)], true));
        assert_eq!(after(&t, &made, id(4), 1).expect("after"), (vec![id(5)], true));
        assert_eq!(before(&t, &made, u64::MAX, 10).expect("before"), (vec![id(9), id(5), id(3)], false));
        assert_eq!(before(&t, &made, id(9), 1).expect("before"), (vec![id(5)], true));
        assert_eq!(before(&t, &made, id(5), 5).expect("before"), (vec![id(3)], false));
        assert_eq!(
            [id(3), id(4), id(9), u64::MAX].map(|i| rank_of(&t, &made, i).expect("rank")),
            [0, 1, 2, 3]
        );
        assert_eq!(settled_of(&t, &made).expect("settled"), 3);
        // Nothing listed: the creation alone.
        assert_eq!(after(&t, &factory, 0, 10).expect("after"), (vec![], false));
    }
}
