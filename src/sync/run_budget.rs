//! How many bytes of run files a bulk stage may write before it merges: a bound the operator
//! gives, or, by default, what the disk under the datadir can spare as the stage begins.
//!
//! Fewer, larger stages are cheaper (each merge rewrites the pages of every key it touches,
//! however little it adds to them: docs/operations.md, "Bulk stages"), so a stage takes what the
//! disk has rather than a fixed share: two thirds of the free space beyond what is kept free,
//! the last third left for the tables, which grow as the stage merges (by about a third of the
//! runs' peak in a one-stage catch-up, docs/benchmarks.md).

use std::path::Path;

use tracing::warn;

pub use crate::etl::{disk_space, DiskSpace};

/// The least a stage takes from the free disk: on a nearly full disk stages stay small but
/// still move the index on, and a disk that truly fills fails the stage with a message.
pub const MIN_FROM_FREE_DISK: u64 = 256 << 20;

/// What a stage takes when the free disk cannot be read.
pub const WITHOUT_DISK_FIGURES: u64 = 8 << 30;

/// The bound on a bulk stage's run files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunBudget {
    /// At most this many bytes.
    Fixed(u64),
    /// Two thirds of the free disk under the datadir beyond `keep_free` bytes (by default the
    /// larger of 4 GiB and 2 % of the file system), measured as each stage begins.
    FromFreeDisk {
        /// Bytes left free for everything else on the disk (the node, above all).
        keep_free: Option<u64>,
    },
}

impl Default for RunBudget {
    fn default() -> Self {
        Self::FromFreeDisk { keep_free: None }
    }
}

impl RunBudget {
    /// The bytes a stage beginning now may write under `dir`.
    pub fn bytes_for(self, dir: &Path) -> u64 {
        match self {
            Self::Fixed(bytes) => bytes,
            Self::FromFreeDisk { keep_free } => match disk_space(dir) {
                Ok(DiskSpace { available, total }) => {
                    let bytes = spare(available, total, keep_free);
                    if bytes == MIN_FROM_FREE_DISK {
                        let keep_free = keep_free.unwrap_or_else(|| default_keep_free(total));
                        warn!(target: "ots::sync", dir = %dir.display(), available, keep_free, bytes, "the disk under the datadir is nearly full: a bulk stage takes the least run files, so a long catch-up runs in many small stages (slower), and a stage that fills the disk fails; free disk space, or lower --stage-keep-free-mib");
                    }
                    bytes
                }
                Err(error) => {
                    warn!(target: "ots::sync", dir = %dir.display(), %error, bytes = WITHOUT_DISK_FIGURES, "the free disk cannot be read: a bulk stage's run files take a fixed bound");
                    WITHOUT_DISK_FIGURES
                }
            },
        }
    }
}

/// What a stage may take of `available` bytes on a file system of `total` bytes, keeping
/// `keep_free` (or the default share) free.
pub fn spare(available: u64, total: u64, keep_free: Option<u64>) -> u64 {
    let keep = keep_free.unwrap_or_else(|| default_keep_free(total));
    (available.saturating_sub(keep) / 3 * 2).max(MIN_FROM_FREE_DISK)
}

/// The larger of 4 GiB and 2 % of the file system.
pub const fn default_keep_free(total: u64) -> u64 {
    let share = total / 50;
    if share > 4 << 30 {
        share
    } else {
        4 << 30
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn a_stage_takes_two_thirds_of_what_is_free_beyond_the_kept_share() {
        // 2 TB disk, 400 GB free: 40 GB (2 %) kept, two thirds of 360 GB taken.
        let total = 2_000 * GIB;
        assert_eq!(spare(400 * GIB, total, None), 240 * GIB);
        // A small disk keeps 4 GiB.
        assert_eq!(spare(34 * GIB, 100 * GIB, None), 20 * GIB);
        // What the operator keeps free replaces the default.
        assert_eq!(spare(400 * GIB, total, Some(100 * GIB)), 200 * GIB);
    }

    #[test]
    fn a_full_disk_still_gives_the_least_stage() {
        assert_eq!(spare(GIB, 100 * GIB, None), MIN_FROM_FREE_DISK);
        assert_eq!(spare(0, 0, Some(0)), MIN_FROM_FREE_DISK);
    }

    #[test]
    fn a_fixed_bound_is_kept_and_the_free_disk_is_read_from_the_datadir() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(RunBudget::Fixed(123).bytes_for(dir.path()), 123);
        let space = disk_space(dir.path()).expect("statvfs of a temporary directory");
        assert!(space.total > 0 && space.available <= space.total, "{space:?}");
        // Other writers change the free space between two readings: only its bounds are sure.
        let from_disk = RunBudget::default().bytes_for(dir.path());
        assert!(from_disk >= MIN_FROM_FREE_DISK, "{from_disk}");
        assert!(from_disk <= (space.total / 3 * 2).max(MIN_FROM_FREE_DISK), "{from_disk} of {space:?}");
        let everything_kept = RunBudget::FromFreeDisk { keep_free: Some(u64::MAX) };
        assert_eq!(everything_kept.bytes_for(dir.path()), MIN_FROM_FREE_DISK);
        assert!(disk_space(&dir.path().join("missing")).is_err());
        // An unreadable disk gives the fixed fallback rather than no stage.
        assert_eq!(RunBudget::default().bytes_for(&dir.path().join("missing")), WITHOUT_DISK_FIGURES);
    }
}
