//! A full disk under the datadir, on both write paths and in `compact`: the command stops with an
//! error that names the full disk as its cause and says what to do, everything committed before
//! stays (`check` passes), and once space is freed the same command goes on to the tables a clean
//! index of the chain has. A small tmpfs stands for the disk: the test mounts one, which takes
//! root (as CI runs); where it cannot, it says so and checks nothing.

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

use alloy::primitives::B256;
use ots_indexer::{
    db::{state, AccessMode, Db},
    index::check::{check, dump_hash},
};

use crate::synthetic::generate;

const BIN: &str = env!("CARGO_BIN_EXE_ots-indexer");

/// A tmpfs of a given size, unmounted when dropped.
struct Disk {
    dir: tempfile::TempDir,
}

impl Disk {
    fn mount(mib: u64) -> Option<Self> {
        let dir = tempfile::tempdir().ok()?;
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(dir.path())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        mounted.then_some(Self { dir })
    }

    fn datadir(&self) -> PathBuf {
        self.dir.path().join("db")
    }

    /// Frees space: the same files on a larger disk.
    fn grow(&self, mib: u64) {
        let status = Command::new("mount")
            .args(["-o", &format!("remount,size={mib}m")])
            .arg(self.dir.path())
            .status()
            .expect("mount");
        assert!(status.success(), "remounting {}", self.dir.path().display());
    }
}

impl Drop for Disk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.dir.path()).status();
    }
}

fn ots(args: &[&str], datadir: &Path) -> Output {
    Command::new(BIN)
        .args(args)
        .args(["--log", "warn", "--datadir"])
        .arg(datadir)
        .output()
        .expect("run ots-indexer")
}

fn sync(recording: &Path, datadir: &Path, flags: &[&str]) -> Output {
    let recording = recording.to_str().expect("utf-8 path");
    ots(&[&["sync", "--exit-at-head", "--source", recording], flags].concat(), datadir)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The database's tip, after `check` passes on it.
fn checked_tip(datadir: &Path) -> Option<u64> {
    let db = Db::open(datadir, AccessMode::ReadOnly).expect("open");
    let txn = db.begin_read().expect("read");
    check(&txn).unwrap_or_else(|e| panic!("check of {}: {e}", datadir.display()));
    state::read_tip(&txn).expect("tip")
}

fn hash_of(datadir: &Path) -> B256 {
    dump_hash(&Db::open(datadir, AccessMode::ReadWrite).expect("open")).expect("hash")
}

/// What a command stopped by the full disk must say: the disk's error and what to do.
fn says_the_disk_is_full(out: &Output, what: &str) {
    let said = stderr(out);
    assert!(!out.status.success(), "{what} succeeded on a full disk: {said}");
    assert!(
        said.contains("No space left on device") || said.contains("Input/output error"),
        "{what}: the cause named: {said}"
    );
    assert!(said.contains("free disk space under the datadir"), "{what}: what to do: {said}");
    assert!(!said.contains("unknown error code"), "{what}: the system's words for the error: {said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_stops_the_writer_with_its_cause_and_loses_nothing() {
    let Some(probe) = Disk::mount(1) else {
        eprintln!("SKIPPED: mounting a tmpfs takes root; this test checks nothing here");
        return;
    };
    drop(probe);
    let dir = tempfile::tempdir().expect("tempdir");
    // About 40 MB of tables once indexed.
    let recording = generate(dir.path(), "chain.rec.zst", 1, 100_000).await;
    let clean = dir.path().join("clean");
    let out = sync(&recording, &clean, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let tables = hash_of(&clean);
    let head = checked_tip(&clean).expect("indexed");

    // Batch by batch, the disk fills after some batches; in bulk, in the stage's run files, and
    // (on the larger disk) in the batches after the stage.
    let incremental: &[&str] = &["--write-path", "incremental", "--batch-blocks", "50"];
    let bulk: &[&str] = &["--write-path", "bulk"];
    for (flags, mib) in [(incremental, 16), (bulk, 8), (bulk, 20)] {
        let what = format!("sync {flags:?} on {mib} MiB");
        let disk = Disk::mount(mib).expect("mount");
        let datadir = disk.datadir();
        let out = sync(&recording, &datadir, flags);
        says_the_disk_is_full(&out, &what);
        // The write that failed is the error, not the close after it on the same full disk.
        assert!(stderr(&out).contains("error: indexing stopped: "), "{what}: {}", stderr(&out));
        if flags == bulk {
            assert!(
                stderr(&out).contains("the disk under the datadir is nearly full"),
                "{what}: {}",
                stderr(&out)
            );
        }
        let kept = checked_tip(&datadir);
        assert!(kept.is_none_or(|tip| tip < head), "{what}: stopped at {kept:?}");
        disk.grow(512);
        let out = sync(&recording, &datadir, flags);
        assert!(out.status.success(), "{what}, once space is freed: {}", stderr(&out));
        assert_eq!(checked_tip(&datadir), Some(head), "{what}");
        assert_eq!(hash_of(&datadir), tables, "{what}: the tables of a clean index");
    }

    // `compact` on a disk with room for the database but not for its copy.
    let disk = Disk::mount(64).expect("mount");
    let datadir = disk.datadir();
    let out = sync(&recording, &datadir, bulk);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = ots(&["compact"], &datadir);
    says_the_disk_is_full(&out, "compact");
    assert!(stderr(&out).contains("the database is unchanged"), "{}", stderr(&out));
    assert_eq!(checked_tip(&datadir), Some(head));
    assert_eq!(hash_of(&datadir), tables, "compact that failed");
    disk.grow(512);
    let out = ots(&["compact"], &datadir);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(hash_of(&datadir), tables, "compacted");
}
