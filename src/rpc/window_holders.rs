//! The holders each token's reorg window changed, kept for the index's newest snapshot: a busy
//! token's holder page passes over every stored holder the window changed, and checking each in
//! memory costs a fraction of seeking the window for it. Every read of one snapshot sees the
//! same window, so the set is built once per token and snapshot and dropped when a newer one is
//! read (a block committed).
//!
//! Beside each set, the token's holder count (the large table's plus every window block's
//! change: a busy token's adds one per block) and the marks its pages left in the token's
//! ranking (`RankingMark`, one every [`MARK_EVERY`] holders): MDBX cannot seek a key's dups by
//! position, so a page far down a ranking would walk from the top; later pages start from the
//! nearest mark. Marks outlive their snapshot: when a block commits, a token's marks are
//! carried into the new snapshot the first time one of its pages is read there, each moved by
//! the holders the new blocks moved across it (read from the window's rows of those blocks), so
//! a deep page after a block costs the block's changes, not the holders before it. A reorg
//! below the marks' block, or blocks that left the window since, drop them.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use alloy_primitives::{Address, U256};
use tracing::debug;

use crate::{
    db::{
        state::{self, Checkpoint},
        DbResult, ReadTxn,
    },
    index::families::balances::{
        holder_count, holders_page_marked, rank_moves_since, RankingMark, WindowHolders,
    },
};

/// Holders kept at most, over every token (about 24 bytes each in their sets).
const BUDGET_HOLDERS: usize = 1 << 20;

/// Holders a ranking walk passes between two marks: a page costs at most this many before its
/// rows once a mark stands before it.
pub const MARK_EVERY: u64 = 256;

/// Marks kept at most, over every token (about 120 bytes each).
const BUDGET_MARKS: usize = 1 << 18;

/// Tokens whose holder count is kept at most (about 40 bytes each).
const BUDGET_COUNTS: usize = 1 << 16;

#[derive(Debug, Default)]
struct Sets {
    snapshot: u64,
    /// The indexed tip of `snapshot`, read when it was first seen.
    tip: Option<Checkpoint>,
    by_token: HashMap<Address, Arc<WindowHolders>>,
    holders: usize,
    marks: HashMap<Address, Vec<RankingMark>>,
    mark_count: usize,
    /// Marks of older snapshots not yet carried into this one, by token, with the tip they
    /// were valid at.
    earlier: HashMap<Address, (Checkpoint, Vec<RankingMark>)>,
    /// Holder counts by token (the large table's count plus every window block's change).
    counts: HashMap<Address, u64>,
    /// Tokens whose marks were carried into a newer snapshot, and dropped, since the start.
    carried: u64,
    dropped: u64,
}

impl Sets {
    /// The sets of a newer `snapshot` whose tip is `tip`: the marks kept so far wait to be
    /// carried into it.
    fn renewed(&mut self, snapshot: u64, tip: Option<Checkpoint>) {
        let old = std::mem::take(self);
        let mut earlier = old.earlier;
        if let Some(old_tip) = old.tip {
            for (token, marks) in old.marks {
                earlier.insert(token, (old_tip, marks));
            }
        }
        if earlier.values().map(|(_, m)| m.len()).sum::<usize>() > BUDGET_MARKS {
            earlier.clear();
        }
        let (carried, dropped) = (old.carried, old.dropped);
        *self = Self { snapshot, tip, earlier, carried, dropped, ..Self::default() };
    }
}

/// What [`WindowHoldersCache::marks`] reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MarksKept {
    /// Marks kept for the newest snapshot.
    pub newest: usize,
    /// Marks of earlier snapshots waiting to be carried into it.
    pub waiting: usize,
    /// Tokens whose marks were carried into a newer snapshot, since the start.
    pub carried: u64,
    /// Tokens whose marks could not be (a reorg below them, or blocks since left the window).
    pub dropped: u64,
}

/// The window's changed holders by token, for one snapshot; shared by the handlers.
#[derive(Debug, Clone, Default)]
pub struct WindowHoldersCache {
    sets: Arc<Mutex<Sets>>,
}

impl WindowHoldersCache {
    /// The holders of `token` the window changed, as `txn` sees them: kept when `txn` reads the
    /// newest snapshot seen, built afresh otherwise.
    pub fn of(&self, txn: &ReadTxn, token: &Address) -> DbResult<Arc<WindowHolders>> {
        let snapshot = txn.snapshot_id()?;
        if let Ok(sets) = self.sets.lock() {
            if sets.snapshot == snapshot {
                if let Some(set) = sets.by_token.get(token) {
                    return Ok(Arc::clone(set));
                }
            }
        }
        // Built outside the lock: other tokens' pages go on meanwhile.
        let set = Arc::new(WindowHolders::of(txn, token)?);
        if let Ok(mut sets) = self.sets.lock() {
            renew(&mut sets, txn, snapshot)?;
            if snapshot == sets.snapshot && set.len() <= BUDGET_HOLDERS {
                if sets.holders + set.len() > BUDGET_HOLDERS {
                    sets.by_token.clear();
                    sets.holders = 0;
                }
                sets.holders += set.len();
                if let Some(old) = sets.by_token.insert(*token, Arc::clone(&set)) {
                    sets.holders -= old.len();
                }
            }
        }
        Ok(set)
    }

    /// The number of holders of `token`, as `txn` sees them: kept when `txn` reads the newest
    /// snapshot seen, counted afresh otherwise (a busy token's count adds a change for each
    /// window block).
    pub fn count(&self, txn: &ReadTxn, token: &Address) -> DbResult<u64> {
        let snapshot = txn.snapshot_id()?;
        if let Ok(sets) = self.sets.lock() {
            if sets.snapshot == snapshot {
                if let Some(count) = sets.counts.get(token) {
                    return Ok(*count);
                }
            }
        }
        let count = holder_count(txn, token)?;
        if let Ok(mut sets) = self.sets.lock() {
            renew(&mut sets, txn, snapshot)?;
            if snapshot == sets.snapshot {
                if sets.counts.len() >= BUDGET_COUNTS {
                    sets.counts.clear();
                }
                sets.counts.insert(*token, count);
            }
        }
        Ok(count)
    }

    /// Holders `idx..idx + count` of `token`, largest balance first, as `txn` sees them: from
    /// the newest mark at or before `idx` that pages of the same snapshot left, leaving marks
    /// past the last one kept.
    pub fn page(
        &self,
        txn: &ReadTxn,
        token: &Address,
        idx: u64,
        count: u64,
    ) -> DbResult<Vec<(Address, U256)>> {
        let changed = self.of(txn, token)?;
        let snapshot = txn.snapshot_id()?;
        self.carry_marks(txn, snapshot, token)?;
        let (from, after) = match self.sets.lock() {
            Ok(sets) if sets.snapshot == snapshot => {
                let marks = sets.marks.get(token).map_or(&[][..], Vec::as_slice);
                let before = marks.partition_point(|m| m.position <= idx);
                (before.checked_sub(1).map(|i| marks[i]), marks.last().map_or(0, |m| m.position))
            }
            // Another snapshot's reader keeps nothing: it walks from the top, leaving no marks.
            _ => (None, u64::MAX),
        };
        let (page, left) = holders_page_marked(txn, token, idx, count, &changed, from, after, MARK_EVERY)?;
        if left.is_empty() {
            return Ok(page);
        }
        if let Ok(mut sets) = self.sets.lock() {
            if sets.snapshot == snapshot && sets.mark_count + left.len() <= BUDGET_MARKS {
                let marks = sets.marks.entry(*token).or_default();
                // Another page may have marked further meanwhile: keep the list in order.
                let after = marks.last().map_or(0, |m| m.position);
                let before = marks.len();
                marks.extend(left.into_iter().filter(|m| m.position > after));
                let added = marks.len() - before;
                sets.mark_count += added;
            }
        }
        Ok(page)
    }

    /// Brings `token`'s marks of an earlier snapshot into `snapshot` (`txn`'s, the newest seen),
    /// moved by what the blocks since did to its ranking, or drops them when that cannot be told.
    fn carry_marks(&self, txn: &ReadTxn, snapshot: u64, token: &Address) -> DbResult<()> {
        let (since, marks) = match self.sets.lock() {
            Ok(mut sets) if sets.snapshot == snapshot && !sets.marks.contains_key(token) => {
                match sets.earlier.remove(token) {
                    Some(earlier) => earlier,
                    None => return Ok(()),
                }
            }
            _ => return Ok(()),
        };
        // Read outside the lock: other tokens' pages go on meanwhile.
        let tokens = std::iter::once(*token).collect();
        let carried = rank_moves_since(txn, since, &tokens)?.and_then(|mut moves| {
            let moves = moves.remove(token).unwrap_or_default();
            marks.into_iter().map(|m| m.moved(&moves)).collect::<Option<Vec<_>>>()
        });
        if let Ok(mut sets) = self.sets.lock() {
            match carried {
                Some(carried)
                    if sets.snapshot == snapshot
                        && !sets.marks.contains_key(token)
                        && sets.mark_count + carried.len() <= BUDGET_MARKS =>
                {
                    sets.carried += 1;
                    sets.mark_count += carried.len();
                    sets.marks.insert(*token, carried);
                }
                Some(_) => {}
                None => {
                    sets.dropped += 1;
                    debug!(target: "ots::rpc", %token, since = since.number, "holder ranking marks dropped");
                }
            }
        }
        Ok(())
    }

    /// The marks kept, and how often they outlived their snapshot.
    pub fn marks(&self) -> MarksKept {
        self.sets.lock().map_or(MarksKept::default(), |s| MarksKept {
            newest: s.mark_count,
            waiting: s.earlier.values().map(|(_, m)| m.len()).sum(),
            carried: s.carried,
            dropped: s.dropped,
        })
    }

    /// Tokens and holders kept now.
    pub fn usage(&self) -> (usize, usize) {
        self.sets.lock().map_or((0, 0), |s| (s.by_token.len(), s.holders))
    }
}

/// Moves `sets` to `snapshot` when it is newer than theirs, reading its tip from `txn`.
fn renew(sets: &mut Sets, txn: &ReadTxn, snapshot: u64) -> DbResult<()> {
    if snapshot > sets.snapshot {
        let tip = state::read_checkpoint(txn)?;
        sets.renewed(snapshot, tip);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use alloy_primitives::U256;

    use super::*;
    use crate::db::{
        codec::{PairKey, WindowValue},
        tables::OtsRecentBalances,
        AccessMode, Db,
    };

    fn change(db: &Db, token: Address, holder: Address, block: u64) {
        let txn = db.begin_write().expect("write");
        txn.put::<OtsRecentBalances>(
            &PairKey { token, holder },
            &WindowValue { block, value: U256::from(block) },
        )
        .expect("put");
        txn.commit().expect("commit");
    }

    #[test]
    fn a_set_serves_its_own_snapshot_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
        let (token, other) = (Address::repeat_byte(0x70), Address::repeat_byte(0x71));
        let (a, b, c) = (Address::repeat_byte(1), Address::repeat_byte(2), Address::repeat_byte(3));
        change(&db, token, a, 10);
        change(&db, other, c, 10);
        let cache = WindowHoldersCache::default();

        let before = db.begin_read().expect("read");
        let set = cache.of(&before, &token).expect("set");
        assert!(set.contains(&a) && !set.contains(&c), "one token's holders");
        assert!(Arc::ptr_eq(&set, &cache.of(&before, &token).expect("again")), "kept for its snapshot");

        change(&db, token, b, 11);
        let after = db.begin_read().expect("read");
        let newer = cache.of(&after, &token).expect("set");
        assert!(newer.contains(&a) && newer.contains(&b), "a committed block is seen");
        // A read that began before the commit still gets the holders of its own snapshot.
        let older = cache.of(&before, &token).expect("set");
        assert!(older.contains(&a) && !older.contains(&b), "{older:?}");
        assert_eq!(cache.usage(), (1, 2), "only the newest snapshot's sets are kept");
    }

    /// A count is kept for its snapshot: a read of the same snapshot gets it even after the
    /// tables moved on, a read of a newer one counts again, an older one counts its own.
    #[test]
    fn a_count_serves_its_own_snapshot_only() {
        use crate::db::{
            codec::Count,
            tables::{OtsRecentHolderCounts, OtsTokenHolderCounts},
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
        let token = Address::repeat_byte(0x70);
        let txn = db.begin_write().expect("write");
        txn.put::<OtsTokenHolderCounts>(&token, &Count(40)).expect("put");
        txn.put::<OtsRecentHolderCounts>(&token, &WindowValue { block: 9, value: 3i64 }).expect("put");
        txn.commit().expect("commit");
        let cache = WindowHoldersCache::default();

        let before = db.begin_read().expect("read");
        assert_eq!(cache.count(&before, &token).expect("count"), 43);
        let txn = db.begin_write().expect("write");
        txn.put::<OtsRecentHolderCounts>(&token, &WindowValue { block: 10, value: -5i64 }).expect("put");
        txn.commit().expect("commit");
        assert_eq!(cache.count(&before, &token).expect("count"), 43, "its own snapshot's count");
        let after = db.begin_read().expect("read");
        assert_eq!(cache.count(&after, &token).expect("count"), 38, "a committed block is seen");
        assert_eq!(cache.count(&before, &token).expect("count"), 43, "an older reader counts its own");
        assert_eq!(cache.count(&after, &token).expect("count"), 38);
        assert_eq!(cache.count(&after, &Address::ZERO).expect("count"), 0, "a token nobody holds");
    }

    /// A deep page walks the ranking once per snapshot, leaving marks; later pages of that
    /// snapshot start from them and read as the plain walk does; a commit starts afresh.
    #[test]
    fn pages_start_from_the_marks_of_their_snapshot() {
        use crate::{db::codec::Rank, index::families::balances::holders_page};
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
        let token = Address::repeat_byte(0x70);
        let txn = db.begin_write().expect("write");
        for i in 1..=700u64 {
            let rank = Rank {
                balance: U256::from(1_000 + i % 97),
                holder: Address::left_padding_from(&i.to_be_bytes()),
            };
            txn.put::<crate::db::tables::OtsTokenHolderRanks>(&token, &rank).expect("put");
        }
        txn.commit().expect("commit");
        let cache = WindowHoldersCache::default();
        let marks = |cache: &WindowHoldersCache| {
            cache.sets.lock().map(|s| s.marks.get(&token).map_or(0, Vec::len)).unwrap_or_default()
        };

        let read = db.begin_read().expect("read");
        let plain = |txn: &ReadTxn, idx, count| holders_page(txn, &token, idx, count).expect("plain");
        assert_eq!(cache.page(&read, &token, 600, 5).expect("deep"), plain(&read, 600, 5));
        assert_eq!(marks(&cache), 2, "marks at 256 and 512");
        for (idx, count) in [(0, 3), (255, 2), (256, 1), (300, 25), (511, 3), (512, 1), (690, 25), (700, 1)] {
            assert_eq!(
                cache.page(&read, &token, idx, count).expect("page"),
                plain(&read, idx, count),
                "{idx}"
            );
        }
        assert_eq!(marks(&cache), 2, "no page went past 768");

        // A balance moved in the window: the next snapshot's pages see it, from new marks.
        let moved = Address::left_padding_from(&650u64.to_be_bytes());
        let txn = db.begin_write().expect("write");
        txn.put::<OtsRecentBalances>(
            &PairKey { token, holder: moved },
            &WindowValue { block: 5, value: U256::from(5_000) },
        )
        .expect("put");
        txn.put::<crate::db::tables::OtsRecentHolderRanks>(
            &token,
            &Rank { balance: U256::from(5_000), holder: moved },
        )
        .expect("put");
        txn.commit().expect("commit");
        let newer = db.begin_read().expect("read");
        let first = cache.page(&newer, &token, 0, 1).expect("top");
        assert_eq!(first, vec![(moved, U256::from(5_000))], "the window's holder ranks first");
        assert_eq!(marks(&cache), 0, "the older snapshot's marks are dropped");
        for idx in [600, 300, 0, 699] {
            assert_eq!(cache.page(&newer, &token, idx, 7).expect("page"), plain(&newer, idx, 7), "{idx}");
        }
        // A reader of the older snapshot walks its own ranking and keeps nothing.
        assert_eq!(cache.page(&read, &token, 600, 5).expect("older"), plain(&read, 600, 5));
    }
}
