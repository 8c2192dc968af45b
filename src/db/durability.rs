//! Commits that do not wait for the disk: a catch-up's bulk stages.
//!
//! A durable MDBX commit writes its pages, waits until the disk holds them, then writes and
//! syncs the meta page that makes them the database. A catch-up of a hundred stages waited so a
//! hundred times, on the merge's clock, for pages a later stage rewrites anyway (on the 21 M
//! chain in 1 % stages, the commits' waits grew from 0.015 to 0.14 s a stage with the tables:
//! docs/benchmarks.md, "Stage commits that do not wait for the disk"). While a [`DeferredSync`]
//! lives, this process's commits write their pages and a *weak* meta page (MDBX's
//! `SAFE_NOSYNC`), and wait for nothing:
//!
//! * a process that is killed loses nothing: the kernel holds every page written, and the next
//!   open in the same boot takes the weak meta (libmdbx stamps it with the boot's id);
//! * a system crash or a power loss takes the database back to its last commit that reached the
//!   disk, whole and consistent, never to a mix: the stages after it are gathered again (a stage
//!   journal that no longer continues the tip is dropped);
//! * before the file would grow, MDBX makes such a steady commit itself, so that the pages freed
//!   since can be reused: the file grows no more than it does with durable commits.
//!
//! The catch-up's end syncs ([`Db::sync_to_disk`]), and so does closing the database.

use signet_libmdbx::{ffi, Environment};
use tracing::warn;

use super::{
    env::{txn_err, Db},
    error::DbResult,
};

/// While it lives, this process's commits do not wait for the disk. Dropping it makes them
/// durable again (what they committed meanwhile reaches the disk with the next durable commit,
/// [`Db::sync_to_disk`], or the database's close).
#[derive(Debug)]
pub struct DeferredSync {
    env: Environment,
}

/// Turns MDBX's `SAFE_NOSYNC` on or off for `env`. On, libmdbx adds `NOMETASYNC` to it; off
/// takes both away, which gives back the durable commits every database is opened with.
#[allow(unsafe_code)]
fn set_safe_nosync(env: &Environment, on: bool) -> DbResult<()> {
    let flags = if on { ffi::MDBX_SAFE_NOSYNC } else { ffi::MDBX_SAFE_NOSYNC | ffi::MDBX_NOMETASYNC };
    // SAFETY: the pointer is the live environment's (`env` holds it open for the call), and
    // `SAFE_NOSYNC` is one of the flags libmdbx lets an open environment change. The call takes
    // the writer lock unless a write transaction of this environment is open; the indexer's one
    // writer never holds it on another thread while it waits here.
    let rc = env.with_raw_env_ptr(|ptr| unsafe { ffi::mdbx_env_set_flags(ptr, flags, on) });
    if rc == 0 {
        return Ok(());
    }
    Err(txn_err("set the sync mode")(signet_libmdbx::MdbxError::from_err_code(rc)))
}

impl Db {
    /// Commits stop waiting for the disk until the returned guard is dropped.
    pub fn deferring_sync(&self) -> DbResult<DeferredSync> {
        set_safe_nosync(self.env(), true)?;
        Ok(DeferredSync { env: self.env().clone() })
    }

    /// Waits until every commit is on the disk. Returns whether any was not yet.
    pub fn sync_to_disk(&self) -> DbResult<bool> {
        // libmdbx answers "nothing to sync" as `true`.
        let nothing = self.env().sync(true).map_err(txn_err("sync"))?;
        Ok(!nothing)
    }
}

impl Drop for DeferredSync {
    fn drop(&mut self) {
        if let Err(error) = set_safe_nosync(&self.env, false) {
            warn!(target: "ots::db", %error, "could not make commits durable again");
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::db::{state, AccessMode, Db};

    #[test]
    fn deferred_commits_wait_for_the_disk_only_when_synced() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("db");
        let commit = |rate: f64| {
            let txn = db.begin_write().expect("write");
            state::set_sync_rate(&txn, rate).expect("write");
            txn.commit().expect("commit");
        };
        commit(1.0);
        assert!(!db.sync_to_disk().expect("sync"), "a durable commit leaves nothing to sync");
        let deferred = db.deferring_sync().expect("defer");
        commit(2.0);
        commit(3.0);
        drop(deferred);
        assert!(db.sync_to_disk().expect("sync"), "deferred commits are synced here");
        assert!(!db.sync_to_disk().expect("sync"), "and only once");
        commit(4.0);
        assert!(!db.sync_to_disk().expect("sync"), "commits are durable again");
    }
}
