//! The appearance lists' two stored levels (docs/format.md, "Young levels"): `OtsAppearances`,
//! and its young level `OtsAppearancesYoung`, which the bulk stages of a catch-up after the
//! first append to, as the address indexes' stages do theirs (`address_index::levels`, where
//! the reasons are): the young level is rewritten at its own size, and folded into the main
//! table in one streamed whole rewrite once it would pass an eighth of it.
//!
//! A young list's chunks count from its own first id: their counts of earlier ids leave out
//! the main list's, so a stage writes the young level without reading the main one (but for a
//! sender's count of sent transactions, which its nonce anchors need), and the reads below add
//! the main list's counts. An address's young ids all follow its main ones, and the reorg
//! window's follow both: a list reads as main ‖ young ‖ window.

use alloy_primitives::Address;
use signet_libmdbx::tx::{Ro, TransactionKind};
use tracing::debug;

use super::lists::{self, unpack, BlockPage, ListCounts};
use crate::{
    db::{
        codec::{ListKey, PackedIds, Role},
        tables::{OtsAppearances, OtsAppearancesYoung, Table},
        DbError, DbResult, ReadTxn, TableCursor, TableStats, Txn, WriteTxn,
    },
    index::rewrite::Rewrite,
};

/// What an appended appearance is taken to add to the young level's bytes: a packed id takes
/// one to three bytes, and a list new to the level a key and a chunk header besides.
const BYTES_PER_APPEARANCE: u64 = 8;

/// The young level is folded into the main table once it would hold more than one byte in this
/// many of the main table's: at a share `1/s` a catch-up of `n` stages copies the main table
/// about `s + 1` times its final size in all, while a stage's write into the young level costs
/// at most what [`Rewrite::begin_if_pays`] lets it, whatever the level holds.
const FOLD_SHARE: u64 = 8;

fn plus(a: ListCounts, b: ListCounts) -> ListCounts {
    ListCounts { all: a.all + b.all, sent: a.sent + b.sent }
}

/// How many ids `address`'s stored list holds (both levels), and how many of them it sent.
pub fn count<K: TransactionKind>(txn: &Txn<K>, address: &Address) -> DbResult<ListCounts> {
    Ok(plus(
        lists::count::<OtsAppearances, K>(txn, address)?,
        lists::count::<OtsAppearancesYoung, K>(txn, address)?,
    ))
}

/// How many stored ids of `address` are below `id`: every young id follows every main one, so
/// the young level adds its rank (0 while `id` is within the main list).
pub fn rank<K: TransactionKind>(txn: &Txn<K>, address: &Address, id: u64) -> DbResult<u64> {
    Ok(lists::rank::<OtsAppearances, K>(txn, address, id)?
        + lists::rank::<OtsAppearancesYoung, K>(txn, address, id)?)
}

/// How many stored ids of `address` below `id` it sent.
pub fn rank_sent<K: TransactionKind>(txn: &Txn<K>, address: &Address, id: u64) -> DbResult<u64> {
    Ok(lists::rank_sent::<OtsAppearances, K>(txn, address, id)?
        + lists::rank_sent::<OtsAppearancesYoung, K>(txn, address, id)?)
}

/// How many stored ids of `address` in `first..=last` it sent or received.
pub fn listed_within<K: TransactionKind>(
    txn: &Txn<K>,
    address: &Address,
    first: u64,
    last: u64,
) -> DbResult<u64> {
    Ok(lists::listed_within::<OtsAppearances, K>(txn, address, first, last)?
        + lists::listed_within::<OtsAppearancesYoung, K>(txn, address, first, last)?)
}

/// `address`'s role in each of `ids` (in a walk's order), `None` for an id neither level holds.
pub fn roles_of_ids<K: TransactionKind>(
    txn: &Txn<K>,
    address: &Address,
    ids: &[u64],
) -> DbResult<Vec<Option<Role>>> {
    let mut roles = lists::roles_of_ids::<OtsAppearances, K>(txn, address, ids)?;
    let missing: Vec<u64> = ids.iter().zip(&roles).filter(|(_, r)| r.is_none()).map(|(&id, _)| id).collect();
    if missing.is_empty() || lists::count::<OtsAppearancesYoung, K>(txn, address)?.all == 0 {
        return Ok(roles);
    }
    let mut young = lists::roles_of_ids::<OtsAppearancesYoung, K>(txn, address, &missing)?.into_iter();
    for role in roles.iter_mut().filter(|r| r.is_none()) {
        *role = young.next().flatten();
    }
    Ok(roles)
}

/// The `position`-th stored id of `address` (0 first), or with `sent` of the ids it sent.
pub fn nth<K: TransactionKind>(
    txn: &Txn<K>,
    address: &Address,
    position: u64,
    sent: bool,
) -> DbResult<Option<u64>> {
    let main = lists::count::<OtsAppearances, K>(txn, address)?;
    let held = if sent { main.sent } else { main.all };
    match position.checked_sub(held) {
        None => lists::nth::<OtsAppearances, K>(txn, address, position, sent),
        Some(young) => lists::nth::<OtsAppearancesYoung, K>(txn, address, young, sent),
    }
}

/// The first and the last stored id of `address`, if it has any.
pub fn ends<K: TransactionKind>(txn: &Txn<K>, address: &Address) -> DbResult<Option<(u64, u64)>> {
    let main = lists::ends::<OtsAppearances, K>(txn, address)?;
    let young = lists::ends::<OtsAppearancesYoung, K>(txn, address)?;
    Ok(match (main, young) {
        (Some((first, _)), Some((_, last))) => Some((first, last)),
        (main, young) => main.or(young),
    })
}

/// Adds `address`'s stored ids below `cut` to `page`, newest first (as [`lists::before`]): the
/// young level's, then the main one's.
pub fn before<K: TransactionKind>(
    txn: &Txn<K>,
    address: &Address,
    cut: u64,
    want: usize,
    page: &mut BlockPage,
) -> DbResult<()> {
    lists::before::<OtsAppearancesYoung, K>(txn, address, cut, want, page)?;
    if !page.more {
        lists::before::<OtsAppearances, K>(txn, address, cut, want, page)?;
    }
    Ok(())
}

/// Adds `address`'s stored ids at or above `from` to `page`, oldest first (as
/// [`lists::after`]): the main level's, then the young one's.
pub fn after<K: TransactionKind>(
    txn: &Txn<K>,
    address: &Address,
    from: u64,
    want: usize,
    page: &mut BlockPage,
) -> DbResult<()> {
    lists::after::<OtsAppearances, K>(txn, address, from, want, page)?;
    if !page.more {
        lists::after::<OtsAppearancesYoung, K>(txn, address, from, want, page)?;
    }
    Ok(())
}

/// Checks both levels as lists ([`lists::check`]; a young list counts from its own first id)
/// and that each young list continues its main one. Returns (addresses, ids), an address held
/// by both levels counted once.
pub fn check<K: TransactionKind>(txn: &Txn<K>, below: u64) -> DbResult<(u64, u64)> {
    let (mut addresses, mut ids) = lists::check::<OtsAppearances, K>(txn, below)?;
    let (_, young_ids) = lists::check::<OtsAppearancesYoung, K>(txn, below)?;
    ids += young_ids;
    let mut cursor = txn.walking_cursor::<OtsAppearancesYoung>()?;
    let mut next = cursor.first()?;
    while let Some((key, packed)) = next {
        match lists::ends::<OtsAppearances, K>(txn, &key.address)? {
            Some((_, last)) => {
                let first = unpack::<OtsAppearancesYoung>(&key, &packed)?.ids.first().copied().unwrap_or(0);
                if first <= last {
                    return Err(DbError::Corrupt {
                        table: OtsAppearancesYoung::ID.name(),
                        key: key.address.to_string(),
                        reason: format!("young id {first:#x} is not past the main list's last id {last:#x}"),
                    });
                }
            }
            None => addresses += 1,
        }
        next = cursor.seek(&ListKey { address: key.address, last: u64::MAX })?;
        if next.as_ref().is_some_and(|(k, _)| k.address == key.address) {
            next = cursor.next_entry()?;
        }
    }
    Ok((addresses, ids))
}

/// Whether a stage's `appearances` new ids go to the young level: the main table holds
/// something (a catch-up's first stage writes it), and the young level would stay within
/// [`FOLD_SHARE`] of it.
pub(super) fn stays_young(txn: &WriteTxn, appearances: u64) -> DbResult<bool> {
    let main = txn.stats::<OtsAppearances>()?;
    let young = txn.stats::<OtsAppearancesYoung>()?.bytes;
    Ok(young_fits(&main, young.saturating_add(appearances.saturating_mul(BYTES_PER_APPEARANCE))))
}

fn young_fits(main: &TableStats, young: u64) -> bool {
    main.entries > 0 && young.saturating_mul(FOLD_SHARE) <= main.bytes
}

/// Whether the young level holds anything.
pub fn any_young<K: TransactionKind>(txn: &Txn<K>) -> DbResult<bool> {
    Ok(txn.stats::<OtsAppearancesYoung>()?.entries > 0)
}

/// The young level read whole from a snapshot, address by address, each list unpacked.
pub(super) struct YoungLists<'a> {
    cursor: TableCursor<'a, Ro, OtsAppearancesYoung>,
    pending: Option<(ListKey, PackedIds)>,
}

/// One address's whole young list: its ids and its roles in them.
type YoungList = (Address, Vec<u64>, Vec<Role>);

impl<'a> YoungLists<'a> {
    pub(super) fn open(before: &'a ReadTxn) -> DbResult<Self> {
        let mut cursor = before.walking_cursor::<OtsAppearancesYoung>()?;
        let pending = cursor.first()?;
        Ok(Self { cursor, pending })
    }

    /// The next list's address.
    fn peek(&self) -> Option<Address> {
        self.pending.as_ref().map(|(key, _)| key.address)
    }

    /// The next list whole.
    fn take(&mut self) -> DbResult<Option<YoungList>> {
        let Some((key, packed)) = self.pending.take() else { return Ok(None) };
        let chunk = unpack::<OtsAppearancesYoung>(&key, &packed)?;
        let (mut ids, mut roles) = (chunk.ids, chunk.roles);
        loop {
            match self.cursor.next_entry()? {
                Some((k, p)) if k.address == key.address => {
                    let chunk = unpack::<OtsAppearancesYoung>(&k, &p)?;
                    ids.extend(chunk.ids);
                    roles.extend(chunk.roles);
                }
                next => {
                    self.pending = next;
                    return Ok(Some((key.address, ids, roles)));
                }
            }
        }
    }
}

/// Where a write's lists go.
pub(super) enum Lists<'a> {
    /// Into the main table, in place.
    InPlace(&'a WriteTxn),
    /// Into the main table, rewritten whole.
    Rewriting(Rewrite<'a, Ro, OtsAppearances>),
    /// Into the young level, in place.
    YoungInPlace(&'a WriteTxn),
    /// Into the young level, rewritten whole.
    YoungRewriting(&'a WriteTxn, Rewrite<'a, Ro, OtsAppearancesYoung>),
    /// Into the main table rewritten whole, each address's young list (read from the snapshot)
    /// folded in before its new ids; the young level is emptied at the end.
    Folding { txn: &'a WriteTxn, rewrite: Rewrite<'a, Ro, OtsAppearances>, young: YoungLists<'a> },
}

impl<'a> Lists<'a> {
    /// The lists of a stage's write of `appearances` ids to `addresses` addresses (`before`
    /// the snapshot the write started from): the young level when [`stays_young`] and `young`
    /// allow it, else the main table, folding a young level that holds anything; each
    /// rewritten whole when one in `share` of its entries or more is appended to.
    pub(super) fn of_stage(
        txn: &'a WriteTxn,
        before: &'a ReadTxn,
        (addresses, appearances): (u64, u64),
        young: bool,
        share: u64,
    ) -> DbResult<(Self, &'static str)> {
        if young && stays_young(txn, appearances)? {
            let lists = match Rewrite::begin_if_pays(txn, before, addresses, share)? {
                Some(rewrite) => Self::YoungRewriting(txn, rewrite),
                None => Self::YoungInPlace(txn),
            };
            return Ok((lists, "young"));
        }
        if any_young(txn)? {
            return Ok((Self::folding(txn, before)?, "folded"));
        }
        Ok(match Rewrite::begin_if_pays(txn, before, addresses, share)? {
            Some(rewrite) => (Self::Rewriting(rewrite), "main"),
            None => (Self::InPlace(txn), "main"),
        })
    }

    fn folding(txn: &'a WriteTxn, before: &'a ReadTxn) -> DbResult<Self> {
        let rewrite = Rewrite::begin_if_pays(txn, before, u64::MAX, 1)?.ok_or_else(|| DbError::Corrupt {
            table: OtsAppearances::ID.name(),
            key: String::new(),
            reason: "a fold of the young level did not rewrite the main table".into(),
        })?;
        Ok(Self::Folding { txn, rewrite, young: YoungLists::open(before)? })
    }

    /// Appends `ids` (ascending, past every stored id of `address`) with the address's `roles`
    /// in them. Returns what the stored list held before — both levels' counts where `counted`
    /// (a sender's nonce anchors need them); without it, the young level's alone may be.
    pub(super) fn append(
        &mut self,
        address: &Address,
        ids: &[u64],
        roles: &[Role],
        counted: bool,
    ) -> DbResult<ListCounts> {
        match self {
            Self::InPlace(txn) => lists::append::<OtsAppearances>(txn, address, ids, roles),
            Self::Rewriting(rewrite) => lists::append_rewriting(rewrite, address, ids, roles),
            Self::YoungInPlace(txn) => {
                let young = lists::append::<OtsAppearancesYoung>(txn, address, ids, roles)?;
                Self::with_main(txn, address, young, counted)
            }
            Self::YoungRewriting(txn, rewrite) => {
                let young = lists::append_rewriting(rewrite, address, ids, roles)?;
                Self::with_main(txn, address, young, counted)
            }
            Self::Folding { rewrite, young, .. } => {
                while young.peek().is_some_and(|a| a < *address) {
                    if let Some((older, older_ids, older_roles)) = young.take()? {
                        lists::append_rewriting(rewrite, &older, &older_ids, &older_roles)?;
                    }
                }
                let (mut all, mut marks) = match young.peek() {
                    Some(a) if a == *address => young.take()?.map(|(_, i, r)| (i, r)).unwrap_or_default(),
                    _ => Default::default(),
                };
                let held = ListCounts {
                    all: all.len() as u64,
                    sent: marks.iter().filter(|&&r| r == Role::Sent).count() as u64,
                };
                all.extend_from_slice(ids);
                marks.extend_from_slice(roles);
                Ok(plus(lists::append_rewriting(rewrite, address, &all, &marks)?, held))
            }
        }
    }

    /// The young level's counts before an append (`young`), with the main list's added where
    /// `counted`.
    fn with_main(
        txn: &WriteTxn,
        address: &Address,
        young: ListCounts,
        counted: bool,
    ) -> DbResult<ListCounts> {
        if !counted {
            return Ok(young);
        }
        Ok(plus(lists::count::<OtsAppearances, _>(txn, address)?, young))
    }

    /// Copies what a rewrite has not reached yet; a fold folds the young lists left and empties
    /// the young level.
    pub(super) fn finish(self) -> DbResult<()> {
        match self {
            Self::InPlace(_) | Self::YoungInPlace(_) => Ok(()),
            Self::Rewriting(rewrite) => rewrite.finish(),
            Self::YoungRewriting(_, rewrite) => rewrite.finish(),
            Self::Folding { txn, mut rewrite, mut young } => {
                while let Some((address, ids, roles)) = young.take()? {
                    lists::append_rewriting(&mut rewrite, &address, &ids, &roles)?;
                }
                rewrite.finish()?;
                drop(young);
                txn.clear::<OtsAppearancesYoung>()
            }
        }
    }
}

/// Folds the young level into the main table (a no-op when it is empty); `before` is a
/// snapshot of the state `txn` started from, and nothing in `txn` may have written either
/// table yet.
pub fn fold_young(txn: &WriteTxn, before: &ReadTxn) -> DbResult<()> {
    if !any_young(txn)? {
        return Ok(());
    }
    let started = std::time::Instant::now();
    Lists::folding(txn, before)?.finish()?;
    debug!(target: "ots::index", list = "appearances", how = "folded", addresses = 0u64, seconds = started.elapsed().as_secs_f64(), "list written");
    Ok(())
}

/// The refusal of a write that would leave a young level behind it without a snapshot to fold
/// it from.
pub(super) fn unfolded() -> DbError {
    DbError::Corrupt {
        table: OtsAppearancesYoung::ID.name(),
        key: String::new(),
        reason: "a young level is left to fold, but the write has no snapshot to fold it from".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        db::{AccessMode, Db},
        txid::TxId,
    };

    fn id(block: u64, index: u64) -> u64 {
        TxId::new(block, index).expect("fits").0
    }

    /// One stage's appends (addresses ascending), written as a bulk stage writes them; returns
    /// where they went.
    fn stage(db: &Db, rows: &[(Address, Vec<u64>, Vec<Role>)]) -> &'static str {
        let before = db.begin_read().expect("snapshot");
        let txn = db.begin_write().expect("write");
        let ids = rows.iter().map(|(_, ids, _)| ids.len() as u64).sum();
        let (mut lists, how) =
            Lists::of_stage(&txn, &before, (rows.len() as u64, ids), true, 4).expect("lists");
        for (address, ids, roles) in rows {
            let counted = lists.append(address, ids, roles, true).expect("append");
            let stored = count(&txn, address).expect("count");
            assert!(counted.all <= stored.all, "counts before the append are absolute");
        }
        lists.finish().expect("finish");
        txn.commit().expect("commit");
        how
    }

    /// Stages of a few addresses' lists, one large and then many small, into a young level
    /// that folds part way and holds ids at the end: at every stage count, rank, the n-th id
    /// and sent id, roles, ends and pages equal those of the same ids appended to one level;
    /// folded, the main table is byte for byte that level.
    #[test]
    fn a_young_level_reads_and_folds_as_one_level() {
        let dir = tempfile::tempdir().expect("tempdir");
        let leveled = Db::open(&dir.path().join("leveled"), AccessMode::ReadWrite).expect("open");
        let flat = Db::open(&dir.path().join("flat"), AccessMode::ReadWrite).expect("open");
        let who: Vec<Address> = (1..=6u8).map(|n| Address::repeat_byte(n * 0x20)).collect();
        let role = |i: u64| match i % 7 {
            0 | 3 => Role::Sent,
            1 => Role::Received,
            _ => Role::Other,
        };
        let mut hows = Vec::new();
        for s in 0..40u64 {
            // The first stage is large (it makes the main table); later ones touch a few lists.
            let per = if s == 0 { 400 } else { 6 };
            let rows: Vec<(Address, Vec<u64>, Vec<Role>)> = who
                .iter()
                .enumerate()
                .filter(|(k, _)| s == 0 || !(s + *k as u64).is_multiple_of(3))
                .map(|(k, &a)| {
                    let ids: Vec<u64> = (0..per).map(|i| id(10 + s * 1_000 + i * 2, k as u64)).collect();
                    let roles = (0..per).map(|i| role(i + k as u64 + s)).collect();
                    (a, ids, roles)
                })
                .collect();
            hows.push(stage(&leveled, &rows));
            let txn = flat.begin_write().expect("write");
            for (a, ids, roles) in &rows {
                lists::append::<OtsAppearances>(&txn, a, ids, roles).expect("append");
            }
            txn.commit().expect("commit");

            let (l, f) = (leveled.begin_read().expect("read"), flat.begin_read().expect("read"));
            for a in &who {
                let expected = lists::count::<OtsAppearances, _>(&f, a).expect("count");
                assert_eq!(count(&l, a).expect("count"), expected, "stage {s}");
                assert_eq!(
                    ends(&l, a).expect("ends"),
                    lists::ends::<OtsAppearances, _>(&f, a).expect("ends")
                );
                let mut all = BlockPage::default();
                lists::after::<OtsAppearances, _>(&f, a, 0, usize::MAX, &mut all).expect("after");
                for (n, &x) in all.ids.iter().enumerate().step_by(37) {
                    for probe in [x, x + 1] {
                        let want = lists::rank::<OtsAppearances, _>(&f, a, probe).expect("rank");
                        assert_eq!(rank(&l, a, probe).expect("rank"), want);
                        let want = lists::rank_sent::<OtsAppearances, _>(&f, a, probe).expect("rank");
                        assert_eq!(rank_sent(&l, a, probe).expect("rank"), want);
                    }
                    assert_eq!(nth(&l, a, n as u64, false).expect("nth"), Some(x));
                    let want = lists::nth::<OtsAppearances, _>(&f, a, n as u64, true).expect("nth");
                    assert_eq!(nth(&l, a, n as u64, true).expect("nth"), want);
                    let want = lists::listed_within::<OtsAppearances, _>(&f, a, x, x + 500).expect("listed");
                    assert_eq!(listed_within(&l, a, x, x + 500).expect("listed"), want);
                }
                let probes: Vec<u64> = all.ids.iter().rev().step_by(5).flat_map(|&x| [x, x - 1]).collect();
                let want = lists::roles_of_ids::<OtsAppearances, _>(&f, a, &probes).expect("roles");
                assert_eq!(roles_of_ids(&l, a, &probes).expect("roles"), want);
                for (cut, want) in [(u64::MAX, 7), (all.ids.last().copied().unwrap_or(0), 500)] {
                    let (mut got, mut expected) = (BlockPage::default(), BlockPage::default());
                    before(&l, a, cut, want, &mut got).expect("before");
                    lists::before::<OtsAppearances, _>(&f, a, cut, want, &mut expected).expect("before");
                    assert_eq!(got, expected, "before {cut}");
                    let from = all.ids.get(all.ids.len().saturating_sub(9)).copied().unwrap_or(0);
                    let (mut got, mut expected) = (BlockPage::default(), BlockPage::default());
                    after(&l, a, from, want, &mut got).expect("after");
                    lists::after::<OtsAppearances, _>(&f, a, from, want, &mut expected).expect("after");
                    assert_eq!(got, expected, "after {from}");
                }
            }
            check(&l, u64::MAX).expect("the levels check");
        }
        assert_eq!(hows[0], "main");
        assert!(hows.contains(&"folded"), "{hows:?}");
        assert_eq!(hows.last(), Some(&"young"), "{hows:?}");
        assert!(any_young(&leveled.begin_read().expect("read")).expect("young"));

        let before = leveled.begin_read().expect("snapshot");
        let txn = leveled.begin_write().expect("write");
        fold_young(&txn, &before).expect("fold");
        drop(before);
        txn.commit().expect("commit");
        let (l, f) = (leveled.begin_read().expect("read"), flat.begin_read().expect("read"));
        assert!(!any_young(&l).expect("young"));
        assert_eq!(
            l.raw_entries(OtsAppearances::ID).expect("entries"),
            f.raw_entries(OtsAppearances::ID).expect("entries"),
            "folded, the main table is the one level"
        );
    }

    /// A write that is not a stage's, with a young level held and no snapshot, is refused
    /// rather than appending ids before the young ones.
    #[test]
    fn a_write_without_a_snapshot_refuses_to_leave_a_young_level_behind() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
        let a = Address::repeat_byte(0x33);
        let ids: Vec<u64> = (0..100).map(|i| id(1 + i, 0)).collect();
        assert_eq!(stage(&db, &[(a, ids, vec![Role::Other; 100])]), "main");
        assert_eq!(stage(&db, &[(a, vec![id(500, 0)], vec![Role::Sent])]), "young");
        let txn = db.begin_write().expect("write");
        let mut leaving = crate::index::recent::WindowRows::default();
        let refused = super::super::Appearances::default().write(
            &txn,
            None,
            crate::index::window::WindowStart::Closed,
            &mut leaving,
        );
        assert!(matches!(refused, Err(DbError::Corrupt { table: "OtsAppearancesYoung", .. })), "{refused:?}");
    }
}
