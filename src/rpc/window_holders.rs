//! The holders each token's reorg window changed, kept for the index's newest snapshot: a busy
//! token's holder page passes over every stored holder the window changed, and checking each in
//! memory costs a fraction of seeking the window for it. Every read of one snapshot sees the
//! same window, so the set is built once per token and snapshot and dropped when a newer one is
//! read (a block committed).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use alloy_primitives::Address;

use crate::{
    db::{DbResult, ReadTxn},
    index::families::balances::WindowHolders,
};

/// Holders kept at most, over every token (about 24 bytes each in their sets).
const BUDGET_HOLDERS: usize = 1 << 20;

#[derive(Debug, Default)]
struct Sets {
    snapshot: u64,
    by_token: HashMap<Address, Arc<WindowHolders>>,
    holders: usize,
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
            if snapshot > sets.snapshot {
                *sets = Sets { snapshot, ..Sets::default() };
            }
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

    /// Tokens and holders kept now.
    pub fn usage(&self) -> (usize, usize) {
        self.sets.lock().map_or((0, 0), |s| (s.by_token.len(), s.holders))
    }
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
}
