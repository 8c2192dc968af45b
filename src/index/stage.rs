//! The bulk write path: a stage indexes a run of blocks far behind the head in one write
//! transaction. The block-keyed families write as blocks come, as on the incremental path; the
//! address-keyed families (address indexes, holdings, appearances, balances) only gather their
//! rows, spilling sorted runs to disk under the datadir, and merge them into their tables in one
//! ordered pass when the stage commits (docs/architecture.md, "Two write paths").
//!
//! Until then nothing of the stage is visible: readers see the last committed state, and a crash
//! loses the stage (its run files are removed when the next one begins) and nothing before it.

use std::sync::Arc;

use tracing::{debug, info};

use super::{
    address_index, appearances, balances,
    batch::write_blocks,
    gather::{Buffering, Gathering},
    holdings, journal,
    packing::{self, repack_swollen, Packed},
    rows::Rows,
    staged_totals,
    undo::UndoLog,
    window::WindowStart,
    BatchStats, ClassifiedBlock, WriteError, WrittenBatch,
};
use crate::{
    db::{
        page_heap::trim_heap,
        state::{self, Checkpoint},
        Db, DeferredSync, WriteTxn,
    },
    etl::{RunDir, RUN_DIR_NAME},
};

/// How a stage gathers its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StageOptions {
    /// Bytes of rows the stage buffers in memory before it spills the largest buffers to runs.
    pub buffer_bytes: usize,
    /// Whether to write the appearance family (see [`super::BatchOptions::appearances`]).
    pub appearances: bool,
    /// Whether the stage's run files are written compressed ([`RunDir::compressing`]).
    pub compress_runs: bool,
    /// Tables smaller than this stay as the merge leaves them (see [`REPACK_FROM_BYTES`]).
    pub repack_from_bytes: u64,
}

/// Tables smaller than this are not repacked by default when the stages' merges swell them
/// (`index::packing`): their split pages cost less than a copy's fixed costs.
pub const REPACK_FROM_BYTES: u64 = 4 << 20;

/// What a committed stage wrote.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StageSummary {
    /// The first block of the stage.
    pub from: u64,
    /// Its last block, now the checkpoint.
    pub to: u64,
    /// Counts over the whole stage.
    pub stats: BatchStats,
    /// The most bytes its run files held at once.
    pub run_bytes_peak: u64,
    /// Whether its run files were compressed.
    pub compressed_runs: bool,
    /// Seconds the merge and commit took.
    pub merge_seconds: f64,
}

/// A stage being gathered: its write transaction, the rows gathered so far, its tip.
#[derive(Debug)]
pub struct Stage {
    db: Db,
    txn: WriteTxn,
    /// The stage's commits do not wait for the disk (`db::durability`): a later stage rewrites
    /// many of its pages, and the catch-up's end syncs.
    deferred_sync: DeferredSync,
    runs: Arc<RunDir>,
    rows: Rows,
    from: Option<u64>,
    tip: Option<Checkpoint>,
    stats: BatchStats,
    options: StageOptions,
}

/// The directory of a database's run files.
pub fn run_dir(db: &Db) -> std::path::PathBuf {
    db.dir().join(RUN_DIR_NAME)
}

/// Folds the address indexes' staged segments (a transaction each), then builds the holder
/// rankings a catch-up's stages deferred, sums the staged totals in and packs the tables the
/// stages left swollen (`index::packing`), in a transaction of its own: what the sync loop does
/// once a stage that reached the catch-up's end has committed. Tables smaller than `smallest`
/// bytes stay as they are. A crash before a commit loses nothing: the next write of a batch
/// folds and builds what is left (readers read the segments, and sort a deferred ranking's
/// balances, meanwhile), the next catch-up's end packs. Its commits, like the stages', do not
/// wait for the disk; it returns once all of them, and the stages', are there.
pub fn pack_caught_up(db: &Db, smallest: u64) -> Result<Packed, WriteError> {
    let deferred_sync = db.deferring_sync()?;
    // Each address index folds its segments in a transaction of its own: the pages its old
    // tables held are free for the next one's new tables, so the file grows by the largest
    // list's copy rather than by all of them.
    let mut staged_chunks = 0;
    for list in address_index::ID_LISTS {
        let txn = db.begin_write()?;
        // The writer lock is held: the snapshot is as `txn` found it.
        let before = db.begin_read()?;
        let folded = address_index::levels::fold_list_beside(db, &txn, &before, list)?;
        drop(before);
        if let Some(chunks) = folded {
            txn.commit()?;
            staged_chunks += chunks;
        }
    }
    // The appearance lists fold their young level and segments the same way.
    {
        let txn = db.begin_write()?;
        // The writer lock is held: the snapshot is as `txn` found it.
        let before = db.begin_read()?;
        if appearances::levels::any_older(&txn)? {
            appearances::levels::fold_older_beside(db, &txn, &before)?;
            drop(before);
            txn.commit()?;
        }
    }
    let txn = db.begin_write()?;
    // The writer lock is held and nothing written: the snapshot is as `txn` found the holdings.
    let staged_holdings = holdings::fold_staged(&txn, Some(&db.begin_read()?))?;
    // The writer lock is held and no owner written yet: the snapshot is as `txn` found them.
    let staged_owners = balances::staged_owners::fold(&txn, Some(&db.begin_read()?))?;
    let ranked = balances::rank_deferred(&txn)?;
    // The writer lock is held and the totals not written yet: the snapshot is as `txn` found them.
    let staged = staged_totals::fold_staged(&txn, Some(&db.begin_read()?))?;
    // The writer lock is held: no stage is using the run directory.
    let spill = RunDir::create(&run_dir(db)).map_err(crate::db::DbError::from)?;
    let packed = Packed {
        ranked,
        staged,
        staged_chunks,
        staged_holdings,
        staged_owners,
        ..packing::pack_caught_up(&txn, spill.path(), smallest)?
    };
    txn.commit()?;
    drop(deferred_sync);
    db.sync_to_disk()?;
    db.release_mapped_pages();
    trim_heap();
    Ok(packed)
}

/// The stage journal's file name, in the database directory (written by the sync loop's
/// `stage_journal`; named here, beside the run files, for whatever reports on a stage).
pub const STAGE_JOURNAL_FILE: &str = "stage-journal.bin";

/// The stage journal's path in the database directory `dir`.
pub fn journal_path(dir: &std::path::Path) -> std::path::PathBuf {
    dir.join(STAGE_JOURNAL_FILE)
}

/// The least a stage holds in memory before it spills (see [`held_rows`]).
const HELD_FLOOR: usize = 16 << 20;

/// Bytes of rows a stage keeps in memory, having spilled `spilled` bytes of runs: a quarter of
/// that, at least [`HELD_FLOOR`], at most `buffer_bytes`. The rows still in memory are sorted
/// and spilled when the stage commits, on the merge's clock; spilling early while the stage
/// gathers moves that sort into the gathering, where it overlaps fetching, and a stage that
/// has spilled much keeps more in memory so that its runs stay few. `spilled` is what the run
/// files hold (an atomic counter, cheap after every batch); compressed runs count their
/// compressed bytes, so such a stage holds somewhat less. Measured on 1 % stages of
/// the 21 M chain: docs/benchmarks-history.md, 2026-12-04.
fn held_rows(buffer_bytes: usize, spilled: u64) -> usize {
    let quarter = usize::try_from(spilled / 4).unwrap_or(usize::MAX);
    buffer_bytes.min(HELD_FLOOR.max(quarter))
}

impl Stage {
    /// Begins a stage on the indexed tip: takes the writer lock and empties the run directory.
    pub fn begin(db: &Db, options: StageOptions) -> Result<Self, WriteError> {
        let runs =
            RunDir::compressing(&run_dir(db), options.compress_runs).map_err(crate::db::DbError::from)?;
        let deferred_sync = db.deferring_sync()?;
        let mut txn = db.begin_write()?;
        if journal::journal_start(&txn)?.is_some() {
            // The reorg window's blocks (from an earlier follow of the head) leave it first, in
            // their own commit: the stage's balance books are replayed from committed state,
            // which must hold the window's values settled. The stage's own commit would drop
            // their journal anyway: its blocks are all newer.
            journal::close_window(&txn)?;
            txn.commit()?;
            txn = db.begin_write()?;
        }
        let tip = state::read_state(&txn)?.checkpoint;
        // One buffer may take half the budget: the busiest family fills up first.
        let buffering = Buffering::Spilling { runs: runs.clone(), each: options.buffer_bytes / 2 };
        let party_tokens = state::party_token_kept(&txn)?;
        let rows = Rows::new(&Gathering { buffering, appearances: options.appearances, party_tokens });
        Ok(Self {
            db: db.clone(),
            txn,
            deferred_sync,
            runs,
            rows,
            from: None,
            tip,
            stats: BatchStats::default(),
            options,
        })
    }

    /// The stage's newest block (the indexed tip until a block is added).
    pub const fn tip(&self) -> Option<Checkpoint> {
        self.tip
    }

    /// The stage's first block, once it has one.
    pub const fn first(&self) -> Option<u64> {
        self.from
    }

    /// Bytes the stage's run files hold now.
    pub fn run_bytes(&self) -> u64 {
        self.runs.bytes()
    }

    /// The stage's transaction, for reads that must see what it has written.
    pub const fn txn(&self) -> &WriteTxn {
        &self.txn
    }

    /// Adds `blocks` (consecutive, continuing the stage's tip). On an error the stage is
    /// unusable: drop it, which discards it whole.
    pub fn add(&mut self, blocks: &[ClassifiedBlock], activity: bool) -> Result<WrittenBatch, WriteError> {
        let mut out = WrittenBatch::default();
        // A stage's blocks are older than the reorg window: nothing would ever undo them.
        let mut undo = UndoLog::keeping(WindowStart::Closed);
        write_blocks(&self.txn, blocks, &mut self.tip, &mut self.rows, &mut undo, activity, &mut out)?;
        self.rows.spill_over(held_rows(self.options.buffer_bytes, self.runs.bytes()))?;
        if self.from.is_none() {
            self.from = blocks.first().map(|b| b.block.number);
        }
        self.stats.add(&out.stats);
        Ok(out)
    }

    /// Merges every family's rows into its tables, moves the checkpoint to the stage's tip and
    /// commits; `rate` (blocks per second gathered) is stored for `status`.
    pub fn commit(self, rate: Option<f64>) -> Result<Option<StageSummary>, WriteError> {
        let started = std::time::Instant::now();
        let Self { db, txn, deferred_sync, runs, mut rows, from, tip, mut stats, options } = self;
        let (Some(from), Some(tip)) = (from, tip) else { return Ok(None) };
        // Every row goes to a run first: the merge then holds no buffer, only what it writes.
        rows.spill_over(0)?;
        // The window is empty (`begin` closed it) and stays closed: every row goes to the
        // tables, and the stage's blocks cannot be unwound (no undo rows): nor can anything
        // before them.
        let closed = WindowStart::Closed;
        let written = rows.write(&db, &txn, closed, UndoLog::keeping(closed))?;
        // The committed state is the tables as the stage found them.
        let found = db.begin_read()?.table_stats()?;
        repack_swollen(&txn, &found, runs.path(), options.repack_from_bytes)?;
        (stats.transfer_ids, stats.appearances) = (written.transfer_ids, written.appearances);
        state::set_checkpoint(&txn, tip)?;
        if let Some(rate) = rate {
            state::set_sync_rate(&txn, rate)?;
        }
        info!(target: "ots::index", from, to = tip.number, "bulk stage committing");
        let commit = txn.commit_timed()?;
        drop(deferred_sync);
        db.release_mapped_pages();
        trim_heap();
        let summary = StageSummary {
            from,
            to: tip.number,
            stats,
            run_bytes_peak: runs.peak_bytes(),
            compressed_runs: runs.compresses(),
            merge_seconds: started.elapsed().as_secs_f64(),
        };
        debug!(
            target: "ots::index",
            from,
            to = tip.number,
            run_bytes_peak = summary.run_bytes_peak,
            merge_seconds = summary.merge_seconds,
            commit_seconds = commit.whole,
            commit_gc_seconds = commit.gc,
            commit_write_seconds = commit.write,
            commit_sync_seconds = commit.sync,
            "stage committed"
        );
        Ok(Some(summary))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stage_holds_little_until_it_has_spilled_much() {
        let budget = 192 << 20;
        // Nothing spilled yet: only the floor is held, so the first rows are sorted while the
        // stage gathers.
        assert_eq!(held_rows(budget, 0), HELD_FLOOR);
        assert_eq!(held_rows(budget, 64 << 20), HELD_FLOOR);
        // Then a quarter of the runs, up to the budget.
        assert_eq!(held_rows(budget, 400 << 20), 100 << 20);
        assert_eq!(held_rows(budget, 8 << 30), budget);
        // A budget under the floor is the bound.
        assert_eq!(held_rows(1 << 20, 0), 1 << 20);
    }
}
