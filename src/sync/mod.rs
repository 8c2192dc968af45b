//! The sync loop: fetch a batch of blocks, classify them, write them in one transaction,
//! repeat; then follow the head by polling. Far behind the head, batches go into bulk stages
//! instead ([`WritePath`], `stage_writer`).

pub mod run_budget;
pub mod stage_journal;
mod stage_writer;

use std::time::{Duration, Instant};

use std::sync::Arc;

use alloy_primitives::B256;
use futures::{stream, StreamExt, TryStreamExt};
use ots_classifiers::{
    check_dependencies, classify_block, BlockData, ChainError, Classifier, DependencyError,
};
use tokio::sync::watch;
use tracing::{debug, error, info, warn};

use std::collections::HashMap;

use alloy_primitives::Address;

pub use run_budget::RunBudget;
use stage_journal::{JournalWriter, Journalled, StageJournal};
use stage_writer::StageWriter;

use crate::{
    classify::{
        known::{distinct, emitters_per_block, known, Known},
        late_metadata::{describe, tokens_to_describe, Stored},
        reprobe::{emitters_to_reprobe, reprobe},
    },
    db::{
        codec::BlockNumber,
        state::{self, ChainIdentity, Checkpoint, DbState, StateError},
        tables::OtsUndoJournal,
        Db, DbError,
    },
    events::{EventBus, IndexEvent},
    index::{
        families::address_index::party_token,
        journal::{unwind_to, UnwindError},
        pack_caught_up, write_batch, BatchOptions, BatchStats, ClassifiedBlock, StageOptions, WriteError,
        WrittenBatch,
    },
    source::{BlockSource, SourceError},
    status::{SharedProgress, StagePhase, StageProgress},
};

/// How the loop batches and polls.
#[derive(Debug, Clone)]
pub struct SyncConfig {
    /// Most blocks per write transaction of the incremental path (a bulk stage fetches at most
    /// [`STAGE_BATCH_BLOCKS`] at a time: its transaction is the stage's).
    pub batch_blocks: u64,
    /// Blocks fetched and classified concurrently.
    pub concurrency: usize,
    /// Wait between head polls once caught up.
    pub poll_interval: Duration,
    /// Newest blocks whose undo records are kept: the deepest reorg that can be followed.
    pub reorg_window: u64,
    /// A batch ends once its blocks hold this many logs.
    pub batch_max_logs: usize,
    /// A batch ends once fetching it took this long.
    pub batch_max_time: Duration,
    /// Which write path takes blocks older than the reorg window.
    pub write_path: WritePath,
    /// How large a bulk stage grows.
    pub stage: StageLimits,
    /// How long the loop, stopped on an answer that asking again at once cannot change (a
    /// block it cannot read, state the node no longer has), waits before it looks again.
    pub stopped_recheck: Duration,
    /// How long the node may give the same answer about a block that it lacks or that does not
    /// add up before the loop stops on it as on an answer retrying cannot change.
    pub same_answer_stops: Duration,
    /// Whether to keep the party-token index (`OtsPartyTokenIndex`): `None` as the database has
    /// it (a new database without it); `Some(true)` keeps it from the next block on where it was
    /// not kept; `Some(false)` drops it.
    pub party_token_index: Option<bool>,
}

/// Which write path indexes blocks older than the reorg window (docs/architecture.md, "Two write
/// paths"). Blocks inside the window always go batch by batch, with undo rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum WritePath {
    /// Bulk stages while at least [`AUTO_BULK_BLOCKS`] blocks older than the window are left to
    /// index; batch by batch otherwise.
    #[default]
    Auto,
    /// Every block older than the reorg window goes through bulk stages.
    Bulk,
    /// Every block batch by batch.
    Incremental,
}

/// `auto` takes the bulk path when at least this many blocks older than the reorg window are
/// left: fewer are a few incremental batches, not worth a stage.
pub const AUTO_BULK_BLOCKS: u64 = 10_000;

/// When a bulk stage ends and commits (whichever comes first), besides reaching the blocks the
/// bulk path may index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StageLimits {
    /// Bytes of rows buffered in memory before the largest buffers spill to run files.
    pub buffer_bytes: usize,
    /// The stage ends once its run files hold this many bytes (taken as each stage begins).
    pub max_run_bytes: RunBudget,
    /// The stage ends once it has gathered for this long (`Duration::MAX`: no bound of its own;
    /// without a journal, what a crash can lose).
    pub max_time: Duration,
    /// The stage ends once it holds this many blocks (`u64::MAX`: no bound of its own).
    pub max_blocks: u64,
    /// Whether the stage keeps what it fetched in a journal beside the database
    /// ([`stage_journal`]), so that a crash loses none of the node's work.
    pub journal: bool,
    /// When a stage writes its run files compressed.
    pub compress_runs: RunCompression,
    /// Tables of fewer bytes than this are not repacked when the stages' merges swell them, by
    /// a stage or at the catch-up's end ([`crate::index::stage::REPACK_FROM_BYTES`] by default;
    /// the tests lower it to reach the repack on small chains).
    pub repack_from_bytes: u64,
}

/// When a bulk stage writes its run files compressed (zstd): about 48 % of their bytes, so a
/// stage bounded by its run files holds about twice the blocks, for about a tenth more time per
/// stage (docs/operations.md, "Bulk stages").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RunCompression {
    /// Once a stage of this process has ended on its run files' bound: the catch-up is longer
    /// than the disk holds at once, and fewer stages save more than compressing costs.
    #[default]
    Auto,
    /// Every stage.
    Always,
    /// No stage.
    Never,
}

impl Default for StageLimits {
    fn default() -> Self {
        Self {
            buffer_bytes: 192 << 20,
            max_run_bytes: RunBudget::default(),
            max_time: Duration::from_secs(20 * 60),
            max_blocks: u64::MAX,
            journal: false,
            compress_runs: RunCompression::Auto,
            repack_from_bytes: crate::index::stage::REPACK_FROM_BYTES,
        }
    }
}

impl Default for SyncConfig {
    fn default() -> Self {
        Self {
            batch_blocks: 1000,
            concurrency: 16,
            poll_interval: Duration::from_secs(1),
            reorg_window: DEFAULT_REORG_WINDOW,
            batch_max_logs: 500_000,
            batch_max_time: Duration::from_secs(10),
            write_path: WritePath::Auto,
            stage: StageLimits::default(),
            stopped_recheck: DEFAULT_STOPPED_RECHECK,
            same_answer_stops: DEFAULT_SAME_ANSWER_STOPS,
            party_token_index: None,
        }
    }
}

/// How one stage gathers: its blocks, its batches, its run files' bound, when it began.
#[derive(Debug, Clone, Copy)]
struct Gathering {
    range: (u64, u64),
    batch: u64,
    run_budget: u64,
    started: Instant,
}

/// Most blocks a bulk stage fetches and gathers at a time. A stage commits once, at its end, so
/// its batches only bound what is in flight: two of them (one gathered, one fetched) and what the
/// source keeps around them. Against 1,000-block batches, 250 took the peak resident memory of a
/// catch-up of the 2 M-transaction benchmark chain from about 1,030 to 760 MiB at the same speed
/// (docs/benchmarks-history.md, "Allocator and memory in flight").
pub const STAGE_BATCH_BLOCKS: u64 = 250;

/// Least time between two info-level batch lines while catching up.
const BATCH_LOG_INTERVAL: Duration = Duration::from_secs(5);

/// How long a stopped loop waits by default before it looks once more (the node may have been
/// fixed, or pointed elsewhere).
pub const DEFAULT_STOPPED_RECHECK: Duration = Duration::from_secs(300);

/// How long the same answer about a missing or inconsistent block is retried by default before
/// the loop stops on it: longer than a lagging replica behind a load balancer takes to catch up
/// (seconds), short enough that an operator sees the reason in `status` rather than in a WARN
/// every 30 s for ever (a node still syncing its old blocks, one that answers a chain's blocks in
/// a shape that does not add up).
pub const DEFAULT_SAME_ANSWER_STOPS: Duration = Duration::from_secs(120);

/// Default reorg window, in blocks.
pub const DEFAULT_REORG_WINDOW: u64 = 128;

/// Syncing stopped.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// The node failed.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// A classifier's probe failed at the node.
    #[error("classifying failed: {0}")]
    Chain(#[from] ChainError),
    /// Writing failed; the batch was not committed.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// The database state forbids going on.
    #[error(transparent)]
    State(#[from] StateError),
    /// Storage failed.
    #[error(transparent)]
    Db(#[from] DbError),
    /// The node's chain changed while a batch was fetched; it is fetched again.
    #[error("block {number} does not follow block {parent_number} as fetched: the node's chain moved during the fetch")]
    Moved {
        /// The block whose parent did not match.
        number: u64,
        /// The block before it.
        parent_number: u64,
    },
    /// The chain was reorganised deeper than the journal reaches, or unwinding failed.
    #[error(transparent)]
    Unwind(#[from] UnwindError),
    /// The node's chain forked below the reorg window.
    #[error("the node's chain differs from the index at every block of the reorg window (blocks {oldest}..={tip}): the reorg is deeper than --reorg-window; re-index into a new --datadir")]
    ReorgTooDeep {
        /// Oldest block compared.
        oldest: u64,
        /// Indexed tip.
        tip: u64,
    },
    /// The classifiers are not in an order that satisfies their dependencies.
    #[error(transparent)]
    Classifiers(#[from] DependencyError),
    /// The stage journal could not be written.
    #[error(transparent)]
    Journal(#[from] stage_journal::JournalError),
    /// The writer thread died.
    #[error("the database writer thread failed: {0}")]
    Writer(String),
}

impl SyncError {
    /// Why the node could not be reached, when that is what failed.
    pub fn unreachable_cause(&self) -> Option<String> {
        match self {
            Self::Source(e) => e.unreachable_cause(),
            _ => None,
        }
    }

    /// Why the sync loop stops and waits rather than retrying at once: an answer of the node
    /// that asking again will not change (docs/operations.md, "When the indexer stops").
    pub fn stop_reason(&self) -> Option<String> {
        match self {
            Self::Source(e @ (SourceError::Unreadable { .. } | SourceError::ForeignHeader { .. })) => {
                Some(e.to_string())
            }
            Self::Source(e) if e.is_pruned_history() => Some(format!(
                "{e}: the node no longer keeps this block's history (EIP-4444); point --rpc-url at a node that keeps the whole chain (geth: --history.chain all)"
            )),
            Self::Chain(e) if crate::source::needs_archive(&e.message) => Some(format!(
                "{e}: classifying contracts needs the state of past blocks, which this node no longer keeps; point --rpc-url at an archive node"
            )),
            _ => None,
        }
    }

    /// Whether waiting and trying again may help (the node is down or misbehaving).
    pub fn is_transient(&self) -> bool {
        if self.stop_reason().is_some() {
            return false;
        }
        match self {
            // A URL that cannot work now never will, nor will a recording read again: waiting
            // would hide the mistake.
            Self::Source(SourceError::BadUrl { .. } | SourceError::Fixture { .. }) => false,
            Self::Source(_) | Self::Chain(_) | Self::Moved { .. } => true,
            _ => false,
        }
    }
}

/// The answer about a missing or inconsistent block that the loop has met on every try since a
/// moment, if any.
#[derive(Debug, Default)]
struct SameAnswer {
    seen: Option<(String, Instant)>,
}

impl SameAnswer {
    /// Notes `e`; whether it is such an answer, met on every try for at least `limit`. An error
    /// object the node answers with counts too (its tracer timing out on one heavy block, "header
    /// not found" for a block below its head): the node is there and says the same every time;
    /// but not one asking to slow down (a rate limit), which waiting serves.
    fn for_too_long(&mut self, e: &SyncError, limit: Duration) -> bool {
        let about_a_block = match e {
            SyncError::Source(SourceError::Missing { .. } | SourceError::Inconsistent { .. }) => true,
            SyncError::Source(e) => e.is_node_verdict(),
            _ => false,
        };
        if !about_a_block {
            self.seen = None;
            return false;
        }
        let said = e.to_string();
        match &self.seen {
            Some((before, since)) if *before == said => since.elapsed() >= limit,
            _ => {
                self.seen = Some((said, Instant::now()));
                limit.is_zero()
            }
        }
    }
}

/// Indexes one chain into one database.
#[derive(Debug)]
pub struct Indexer {
    db: Db,
    source: Arc<dyn BlockSource>,
    classifiers: Vec<Box<dyn Classifier>>,
    config: SyncConfig,
    progress: SharedProgress,
    events: EventBus,
    last_batch_log: std::sync::Mutex<Option<Instant>>,
    /// Tokens whose metadata needs no second read in this process (named, or read again).
    settled: std::sync::Mutex<std::collections::HashSet<alloy_primitives::Address>>,
    /// Turns true when a stop is asked for: a bulk stage then commits what it gathered.
    stop: Option<watch::Receiver<bool>>,
    /// Set once a stage ends on its run files' bound (see [`RunCompression::Auto`]).
    run_bound_reached: std::sync::atomic::AtomicBool,
}

/// Where the loop reads what the index knows of a batch's addresses.
#[derive(Clone, Copy)]
enum Lookups<'a> {
    /// The committed state.
    Committed,
    /// A bulk stage's own transaction.
    Stage(&'a StageWriter),
}

impl Indexer {
    /// Binds `db` to the node's chain and the classifier set (refusing a database made for
    /// others) and marks it open.
    pub async fn open(
        db: Db,
        source: impl BlockSource + 'static,
        classifiers: Vec<Box<dyn Classifier>>,
        config: SyncConfig,
    ) -> Result<Self, SyncError> {
        check_dependencies(&classifiers)?;
        let source: Arc<dyn BlockSource> = Arc::new(source);
        let chain = source.chain_identity().await?;
        let names: Vec<String> = classifiers.iter().map(|c| c.name().to_owned()).collect();
        let db2 = db.clone();
        let keep_party_tokens = config.party_token_index;
        blocking(move || bind(&db2, chain, &names, keep_party_tokens)).await??;
        // Run files of a stage that never committed are worthless.
        crate::etl::RunDir::clean(&crate::index::stage::run_dir(&db)).map_err(DbError::from)?;
        // A stage journal is kept only for the stage it can resume.
        let tip = state::read_state(&db.begin_read()?)?.checkpoint;
        stage_journal::discard_unless_resumable(db.dir(), tip, config.stage.journal)?;
        let progress = source.notices().map_or_else(SharedProgress::default, SharedProgress::with_notices);
        progress.notices().load(&db)?;
        let tracer = source.tracer();
        progress.update(|p| p.tracer = tracer);
        let indexer = Self {
            db,
            source,
            classifiers,
            config,
            progress,
            events: EventBus::default(),
            last_batch_log: Default::default(),
            settled: Default::default(),
            stop: None,
            run_bound_reached: std::sync::atomic::AtomicBool::new(false),
        };
        let indexed = indexer.checkpoint()?.map_or(0, |c| c.number);
        indexer.progress.update(|p| p.indexed = indexed);
        Ok(indexer)
    }

    /// Makes a bulk stage end and commit early once `stop` turns true (a stage otherwise runs to
    /// its limits before the loop looks at a stop request again).
    pub fn stop_on(&mut self, stop: watch::Receiver<bool>) {
        self.stop = Some(stop);
    }

    fn stopping(&self) -> bool {
        self.stop.as_ref().is_some_and(|s| *s.borrow())
    }

    /// `work`'s output, or `None` if a stop is asked for first (`work` is then dropped: what a
    /// blocking write under it began still finishes, whole or not at all).
    async fn unless_stopped<T>(&self, work: impl std::future::Future<Output = T>) -> Option<T> {
        let Some(mut stop) = self.stop.clone() else { return Some(work.await) };
        tokio::select! {
            out = work => Some(out),
            _ = stop.wait_for(|stopping| *stopping) => None,
        }
    }

    /// The database.
    pub const fn db(&self) -> &Db {
        &self.db
    }

    /// The source's newest block.
    pub async fn head(&self) -> Result<u64, SyncError> {
        Ok(self.source.head().await?)
    }

    /// The loop's latest figures, for a status API in the same process.
    pub fn progress(&self) -> SharedProgress {
        self.progress.clone()
    }

    /// What the loop commits and unwinds, for live subscribers in the same process.
    pub fn events(&self) -> EventBus {
        self.events.clone()
    }

    /// The next block to index.
    pub fn next_block(&self) -> Result<u64, SyncError> {
        Ok(self.checkpoint()?.map_or(0, |c| c.number + 1))
    }

    async fn classify(&self, block: BlockData) -> Result<ClassifiedBlock, SyncError> {
        let created = block.created_contracts();
        let facts = classify_block(&self.classifiers, &block, &created, &[], self.source.as_ref()).await?;
        Ok(ClassifiedBlock { block, facts, probe_misses: Vec::new() })
    }

    /// What the index knows of the batch's Transfer emitters.
    async fn known(
        &self,
        emitters: &[Vec<Address>],
        lookups: Lookups<'_>,
    ) -> Result<HashMap<Address, Known>, SyncError> {
        let emitters = distinct(emitters);
        match lookups {
            Lookups::Committed => {
                let txn = self.db.begin_read()?;
                Ok(known(&txn, &emitters)?)
            }
            Lookups::Stage(writer) => writer.lookup(emitters).await,
        }
    }

    /// Reads the metadata of the batch's nameless tokens again at their first transfer.
    async fn describe_late(
        &self,
        blocks: &mut [ClassifiedBlock],
        emitters: &[Vec<Address>],
        known: &HashMap<Address, Known>,
    ) -> Result<(), SyncError> {
        let found = {
            // The set only ever gains addresses: what a panicking holder left in it is usable.
            let settled = self.settled.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            tokens_to_describe(blocks, emitters, &settled, |address| -> Result<Stored, SyncError> {
                Ok(known.get(address).copied().unwrap_or_default().stored())
            })?
        };
        if found.todo.iter().any(|t| !t.is_empty()) {
            describe(blocks, &found.todo, self.source.as_ref()).await?;
        }
        let mut settled = self.settled.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        settled.extend(found.named);
        settled.extend(found.todo.into_iter().flatten());
        Ok(())
    }

    /// Gives unclassified Transfer emitters of the batch their one re-probe.
    async fn reprobe(
        &self,
        blocks: &mut [ClassifiedBlock],
        emitters: &[Vec<Address>],
        known: &HashMap<Address, Known>,
    ) -> Result<(), SyncError> {
        let todo = emitters_to_reprobe(blocks, emitters, |address| -> Result<bool, SyncError> {
            Ok(known.get(address).is_some_and(|k| k.settled_as_emitter()))
        })?;
        if todo.iter().any(|t| !t.is_empty()) {
            reprobe(&self.classifiers, blocks, &todo, self.source.as_ref()).await?;
        }
        Ok(())
    }

    /// Fetches and classifies blocks `from..=to` (fewer once the batch holds enough logs or
    /// took long enough), with their second probes and late metadata.
    async fn fetch_batch(
        &self,
        from: u64,
        to: u64,
        lookups: Lookups<'_>,
    ) -> Result<Vec<ClassifiedBlock>, SyncError> {
        let concurrency = self.config.concurrency.max(1);
        let started = Instant::now();
        let mut fetched = stream::iter(from..=to)
            .map(|n| self.source.block(n))
            .buffered(concurrency)
            .map_err(SyncError::from)
            .map_ok(|block| self.classify(block))
            .try_buffered(concurrency);
        // The batch also ends early once it holds enough logs or has taken long enough, so that
        // memory and commit latency stay bounded on busy chains.
        let mut blocks: Vec<ClassifiedBlock> = Vec::new();
        let mut logs = 0usize;
        while let Some(block) = fetched.try_next().await? {
            logs += block.block.receipts.iter().map(|r| r.logs.len()).sum::<usize>();
            blocks.push(block);
            if logs >= self.config.batch_max_logs || started.elapsed() >= self.config.batch_max_time {
                break;
            }
        }
        drop(fetched);
        let emitters = emitters_per_block(&blocks);
        let known = self.known(&emitters, lookups).await?;
        self.reprobe(&mut blocks, &emitters, &known).await?;
        self.describe_late(&mut blocks, &emitters, &known).await?;
        for pair in blocks.windows(2) {
            if pair[1].block.parent_hash != pair[0].block.hash {
                return Err(SyncError::Moved {
                    number: pair[1].block.number,
                    parent_number: pair[0].block.number,
                });
            }
        }
        Ok(blocks)
    }

    /// Indexes blocks `from..=until` (all older than the reorg window) in one bulk stage, which
    /// ends early at its limits, on a stop request, or when the node fails (committing what it
    /// gathered).
    async fn run_stage(&self, from: u64, until: u64) -> Result<(), SyncError> {
        // A committed tip the node no longer has is unwound as a batch would, before the stage
        // takes the writer lock.
        if let Some(tip) = self.checkpoint()? {
            if self.source.block_hash(tip.number).await? != Some(tip.hash) {
                self.handle_reorg(tip).await?;
                return Ok(());
            }
        }
        let limits = self.config.stage;
        let compress_runs = match limits.compress_runs {
            RunCompression::Always => true,
            RunCompression::Never => false,
            RunCompression::Auto => self.run_bound_reached.load(std::sync::atomic::Ordering::Relaxed),
        };
        let options = StageOptions {
            buffer_bytes: limits.buffer_bytes,
            appearances: true,
            compress_runs,
            repack_from_bytes: limits.repack_from_bytes,
        };
        let run_budget = limits.max_run_bytes.bytes_for(self.db.dir());
        let (journal, journalled) = self.open_journal(limits.journal).await?;
        let writer = StageWriter::begin(self.db.clone(), options, self.progress.clone()).await?;
        let started = Instant::now();
        self.progress.update(|p| {
            p.stage = StageProgress {
                phase: StagePhase::Collecting,
                from: Some(from),
                until: Some(until),
                run_budget,
                ..Default::default()
            }
        });
        info!(target: "ots::sync", from, until, run_budget, compress_runs, "bulk stage started");
        let stage_batch = self.config.batch_blocks.clamp(1, STAGE_BATCH_BLOCKS);
        self.source.batches_of(stage_batch);
        let gathering = Gathering { range: (from, until), batch: stage_batch, run_budget, started };
        let gathered = self.gather_stage(&writer, gathering, journal, journalled).await;
        self.source.batches_of(self.config.batch_blocks);
        // The node failing mid-stage does not waste what was gathered: it is committed, and the
        // failure retried from there. A writer failure leaves nothing to commit.
        let result = if gathered.as_ref().is_ok() || gathered.as_ref().is_err_and(SyncError::is_transient) {
            let rate = self
                .progress
                .get()
                .stage
                .gathered_to
                .map(|to| (to + 1 - from) as f64 / started.elapsed().as_secs_f64().max(1e-9));
            writer.commit(rate).await
        } else {
            Ok(None)
        };
        self.progress.update(|p| p.stage = StageProgress::default());
        let summary = result?;
        // Committed (or nothing gathered): the journal's blocks are the tables' now. A stage that
        // failed in the writer keeps it, for the start after the failure is mended.
        let settled = summary.is_some() || gathered.as_ref().map_or_else(SyncError::is_transient, |()| true);
        if limits.journal && settled {
            let dir = self.db.dir().to_path_buf();
            blocking(move || stage_journal::remove_journal(&dir)).await??;
        }
        gathered?;
        let Some(summary) = summary else { return Ok(()) };
        let secs = started.elapsed().as_secs_f64().max(1e-9);
        self.progress.update(|p| {
            p.batches += 1;
            p.stages += 1;
            p.compressed_stages += u64::from(summary.compressed_runs);
            p.run_bytes_peak = p.run_bytes_peak.max(summary.run_bytes_peak);
            p.written.add(&summary.stats);
            p.indexed = summary.to;
            p.blocks_per_second = (summary.to + 1 - summary.from) as f64 / secs;
        });
        info!(
            target: "ots::sync",
            from = summary.from,
            to = summary.to,
            blocks_per_sec = ((summary.to + 1 - summary.from) as f64 / secs).round(),
            transfer_logs = summary.stats.transfer_logs,
            run_bytes_peak = summary.run_bytes_peak,
            compressed_runs = summary.compressed_runs,
            merge_seconds = summary.merge_seconds,
            "bulk stage committed"
        );
        if summary.to == until {
            // The catch-up's last stage: what its stages left swollen is packed once, here,
            // rather than by every stage (`index::packing`).
            let (db, smallest) = (self.db.clone(), limits.repack_from_bytes);
            let started = Instant::now();
            self.progress
                .update(|p| p.stage = StageProgress { phase: StagePhase::Packing, ..Default::default() });
            let packed = blocking(move || pack_caught_up(&db, smallest)).await;
            self.progress.update(|p| p.stage = StageProgress::default());
            let packed = packed??;
            info!(
                target: "ots::sync",
                tables = packed.tables,
                bytes_before = packed.bytes_before,
                bytes_after = packed.bytes_after,
                rankings = packed.ranked,
                staged_totals = packed.staged,
                staged_chunks = packed.staged_chunks,
                staged_holdings = packed.staged_holdings,
                staged_owners = packed.staged_owners,
                seconds = started.elapsed().as_secs_f64(),
                "catch-up packed"
            );
        }
        Ok(())
    }

    /// The journal of a stage beginning at the committed tip, with what an earlier process
    /// journalled for it; without journalling, none (and any journal left is removed).
    async fn open_journal(&self, on: bool) -> Result<(Option<StageJournal>, Journalled), SyncError> {
        let dir = self.db.dir().to_path_buf();
        if !on {
            blocking(move || stage_journal::remove_journal(&dir)).await??;
            return Ok((None, Journalled::default()));
        }
        let tip = self.checkpoint()?;
        let (journal, journalled) = blocking(move || StageJournal::open(&dir, tip)).await??;
        if journalled.blocks() > 0 {
            info!(target: "ots::sync", blocks = journalled.blocks(), batches = journalled.batches.len(), "bulk stage resumed from its journal: these blocks are gathered again from disk, not from the node");
        }
        Ok((Some(journal), journalled))
    }

    /// Fetches batches into the stage until `until`, its limits, or a stop — first those its
    /// journal already holds, then from the node, journalling each; one batch is written while
    /// the next is fetched.
    async fn gather_stage(
        &self,
        writer: &StageWriter,
        Gathering { range: (from, until), batch, run_budget, started }: Gathering,
        mut journal: Option<StageJournal>,
        journalled: Journalled,
    ) -> Result<(), SyncError> {
        let limits = self.config.stage;
        let stage_last = until.min(from.saturating_add(limits.max_blocks.max(1) - 1));
        let mut tip = self.checkpoint()?;
        let mut next = from;
        let mut pending: Option<(stage_writer::PendingAdd, u64)> = None;
        let activity = self.events.has_subscribers();
        let mut last_written = Instant::now();
        // The journal's batches that fit in this stage, then the node's.
        let replay = journalled
            .batches
            .iter()
            .take_while(|b| b.last().is_some_and(|b| b.block.number <= stage_last))
            .count();
        if let Some(journal) = journal.as_mut() {
            let dropped = (journalled.batches.len() > replay).then(|| journalled.batches.len() - replay);
            journal.keep_first(&journalled, replay)?;
            if let Some(batches) = dropped {
                debug!(target: "ots::sync", batches, "journalled batches past this stage's end dropped");
            }
        }
        let mut journal = journal.map(JournalWriter::new);
        let mut replayed = journalled.batches.into_iter().take(replay);
        while next <= until {
            let to = until.min(next + batch - 1).min(stage_last);
            let (blocks, fetched) = if let Some(blocks) = replayed.next() {
                (blocks, false)
            } else {
                let Some(blocks) =
                    self.unless_stopped(self.fetch_batch(next, to, Lookups::Stage(writer))).await
                else {
                    break;
                };
                (blocks?, true)
            };
            let (Some(first), Some(last)) = (blocks.first(), blocks.last()) else { break };
            if let Some(t) = tip.filter(|t| t.hash != first.block.parent_hash) {
                // The tip was checked against the node as the stage began: the node's chain moved.
                return Err(SyncError::Moved { number: first.block.number, parent_number: t.number });
            }
            if let Some(journal) = journal.as_mut().filter(|_| fetched) {
                journal.append(&blocks).await?;
                let bytes = journal.bytes();
                self.progress.update(|p| p.stage.journal_bytes = bytes);
            }
            tip = Some(Checkpoint { number: last.block.number, hash: last.block.hash });
            next = last.block.number + 1;
            if let Some((previous, first)) = pending.take() {
                self.stage_batch_written(stage_writer::written(previous).await?, first, &mut last_written);
            }
            let first = first.block.number;
            pending = Some((writer.add(blocks, activity).await?, first));
            let run_bytes =
                self.progress.get().stage.run_bytes + journal.as_ref().map_or(0, JournalWriter::bytes);
            if run_bytes >= run_budget {
                self.run_bound_reached.store(true, std::sync::atomic::Ordering::Relaxed);
                break;
            }
            if next - from >= limits.max_blocks || started.elapsed() >= limits.max_time || self.stopping() {
                break;
            }
        }
        if let Some((previous, first)) = pending {
            self.stage_batch_written(stage_writer::written(previous).await?, first, &mut last_written);
        }
        if let Some(journal) = journal {
            let bytes = journal.finish().await?;
            debug!(target: "ots::sync", bytes, "stage journal on disk");
        }
        Ok(())
    }

    /// Reports a batch written into the stage (`from` its first block; `last` when the one
    /// before was).
    fn stage_batch_written(&self, written: WrittenBatch, from: u64, last: &mut Instant) {
        let secs = last.elapsed().as_secs_f64();
        *last = Instant::now();
        if !written.blocks.is_empty() {
            // Gathered, not committed: subscribers hear of a stage's blocks as they are indexed
            // all the same (a stage far below the head has no live readers to mislead).
            self.events.publish(IndexEvent::Indexed(written.blocks));
        }
        let to = from + written.stats.blocks.max(1) - 1;
        self.progress.update(|p| p.blocks_per_second = written.stats.blocks as f64 / secs.max(1e-9));
        self.log_batch(from, to, written.stats, secs);
    }

    /// The last block the bulk path may index given the node's `head`, if the index is far
    /// enough behind for a stage.
    fn bulk_until(&self, next: u64, head: u64) -> Option<u64> {
        let until = head.checked_sub(self.config.reorg_window)?;
        let behind = (until + 1).checked_sub(next)?;
        match self.config.write_path {
            WritePath::Incremental => None,
            WritePath::Bulk => (behind > 0).then_some(until),
            WritePath::Auto => (behind >= AUTO_BULK_BLOCKS).then_some(until),
        }
    }

    async fn index_batch(&self, from: u64, to: u64) -> Result<Option<BatchStats>, SyncError> {
        let started = Instant::now();
        let blocks = self.fetch_batch(from, to, Lookups::Committed).await?;
        let tip = self.checkpoint()?;
        if let (Some(tip), Some(first)) = (tip, blocks.first()) {
            if first.block.parent_hash != tip.hash {
                self.handle_reorg(tip).await?;
                return Ok(None);
            }
        }
        let db = self.db.clone();
        let rate = blocks.len() as f64 / started.elapsed().as_secs_f64().max(1e-9);
        let write_started = Instant::now();
        let options = BatchOptions {
            window: self.config.reorg_window,
            blocks_per_second: Some(rate),
            activity: self.events.has_subscribers(),
            appearances: true,
        };
        let written = blocking(move || write_batch(&db, &blocks, options)).await??;
        if options.activity {
            self.events.publish(IndexEvent::Indexed(written.blocks));
        }
        let secs = write_started.elapsed().as_secs_f64();
        self.progress.update(|p| {
            p.batches += 1;
            p.write_seconds_total += secs;
            p.write_seconds_last = secs;
            p.written.add(&written.stats);
        });
        Ok(Some(written.stats))
    }

    fn checkpoint(&self) -> Result<Option<Checkpoint>, SyncError> {
        let txn = self.db.begin_read()?;
        Ok(state::read_state(&txn)?.checkpoint)
    }

    /// Finds the newest indexed block the node still has, and unwinds to it.
    async fn handle_reorg(&self, tip: Checkpoint) -> Result<(), SyncError> {
        let txn = self.db.begin_read()?;
        let mut journal = Vec::new();
        let mut cursor = txn.cursor::<OtsUndoJournal>()?;
        let mut next = cursor.last()?;
        while let Some((BlockNumber(b), record)) = next {
            journal.push((b, record.hash));
            next = cursor.prev_entry()?;
        }
        drop(cursor);
        drop(txn);
        let oldest = journal.last().map_or(tip.number, |(b, _)| *b);
        let mut fork = None;
        for (number, hash) in &journal {
            if self.source.block_hash(*number).await? == Some(*hash) {
                fork = Some(*number);
                break;
            }
        }
        let Some(fork) = fork else { return Err(SyncError::ReorgTooDeep { oldest, tip: tip.number }) };
        let db = self.db.clone();
        let checkpoint = blocking(move || -> Result<Checkpoint, SyncError> {
            let txn = db.begin_write()?;
            let c = unwind_to(&txn, fork)?;
            txn.commit()?;
            Ok(c)
        })
        .await??;
        self.progress.update(|p| p.indexed = checkpoint.number);
        let removed: Vec<(u64, B256)> = journal.into_iter().filter(|(n, _)| *n > checkpoint.number).collect();
        self.events.publish(IndexEvent::Removed(removed));
        warn!(target: "ots::sync", from = tip.number, to = checkpoint.number, depth = tip.number - checkpoint.number, "chain reorganisation: unwound to the fork point");
        Ok(())
    }

    /// Indexes every block up to `target` (taken as the node's head), in bulk stages while far
    /// enough behind it, then batch by batch. Returns early once a stop is asked for.
    pub async fn sync_to(&self, target: u64) -> Result<(), SyncError> {
        let mut next = self.next_block()?;
        self.progress.update(|p| p.head = p.head.max(target));
        while next <= target && !self.stopping() {
            if let Some(until) = self.bulk_until(next, target) {
                self.run_stage(next, until).await?;
                next = self.next_block()?;
                continue;
            }
            let to = target.min(next + self.config.batch_blocks.max(1) - 1);
            let started = Instant::now();
            let Some(batch) = self.unless_stopped(self.index_batch(next, to)).await else { break };
            let Some(stats) = batch? else {
                next = self.next_block()?;
                continue;
            };
            let to = next + stats.blocks.max(1) - 1;
            let secs = started.elapsed().as_secs_f64().max(1e-9);
            self.progress.update(|p| {
                p.blocks_per_second = stats.blocks as f64 / secs;
                p.head = p.head.max(target);
                p.indexed = to;
            });
            self.log_batch(next, to, stats, secs);
            next = to + 1;
        }
        self.save_notices().await
    }

    /// [`Indexer::sync_to`], retrying what the follow loop retries (a node down or failing for a
    /// while: pauses that double up to 30 s, a WARN each) until `target` is indexed or a stop is
    /// asked for. An answer retrying cannot change, or the same answer about a block for
    /// `same_answer_stops`, ends it with that error: what `sync --exit-at-head` does, where one
    /// failed request of a catch-up of hours ended the command.
    pub async fn sync_to_retrying(&self, target: u64) -> Result<(), SyncError> {
        let mut backoff = self.config.poll_interval;
        let mut same = SameAnswer::default();
        let mut from = self.next_block()?;
        loop {
            let e = match self.sync_to(target).await {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            if e.stop_reason().is_some()
                || !e.is_transient()
                || same.for_too_long(&e, self.config.same_answer_stops)
            {
                return Err(e);
            }
            let now = self.next_block()?;
            if now > from {
                backoff = self.config.poll_interval;
                from = now;
            }
            warn!(target: "ots::sync", error = %e, retry_in_ms = backoff.as_millis() as u64, "node request failed; will retry");
            if self.unless_stopped(tokio::time::sleep(backoff)).await.is_none() {
                return Ok(());
            }
            backoff = (backoff * 2).min(Duration::from_secs(30));
        }
    }

    /// One info line per batch once at the head; while catching up, one every few seconds at
    /// most (each batch still logs at debug). `secs` is what the batch took.
    fn log_batch(&self, from: u64, to: u64, stats: BatchStats, secs: f64) {
        let target = self.progress.get().head;
        let due = self.last_batch_log.lock().map_or(true, |mut last| {
            let due = to >= target || last.is_none_or(|t| t.elapsed() >= BATCH_LOG_INTERVAL);
            if due {
                *last = Some(Instant::now());
            }
            due
        });
        let rate = (stats.blocks as f64 / secs.max(1e-9)).round();
        macro_rules! batch_event {
            ($level:ident) => {
                $level!(
                    target: "ots::sync",
                    from,
                    to,
                    target_block = target,
                    blocks_per_sec = rate,
                    contracts = stats.contracts,
                    matches = stats.matches,
                    transfer_logs = stats.transfer_logs,
                    "indexed batch"
                )
            };
        }
        if due {
            batch_event!(info);
        } else {
            batch_event!(debug);
        }
    }

    /// Follows the node's head until `stop` turns true. Node failures are logged and retried
    /// with growing pauses; storage failures end the loop.
    pub async fn follow(&self, mut stop: watch::Receiver<bool>) -> Result<(), SyncError> {
        let mut backoff = self.config.poll_interval;
        let mut heads = self.source.new_heads().await;
        if heads.is_some() {
            info!(target: "ots::sync", "following the head by newHeads subscription");
        }
        let mut same = SameAnswer::default();
        loop {
            if *stop.borrow() {
                return Ok(());
            }
            let stepped = self.step().await;
            if stepped.is_ok() {
                same = SameAnswer::default();
                self.resume().await?;
            }
            self.save_notices().await?;
            let pause = match stepped {
                Ok(true) => {
                    backoff = self.config.poll_interval;
                    continue;
                }
                Err(e) if e.stop_reason().is_some() => {
                    self.stopped(e.stop_reason().unwrap_or_default()).await?;
                    self.config.stopped_recheck
                }
                Err(e) if same.for_too_long(&e, self.config.same_answer_stops) => {
                    let reason = format!(
                        "{e} (the same answer for {:?}: a node still syncing its old blocks, or one whose answers for this block do not add up)",
                        self.config.same_answer_stops
                    );
                    self.stopped(reason).await?;
                    self.config.stopped_recheck
                }
                // With a subscription, polling is only the fallback for a lost notification.
                Ok(false) if heads.is_some() => self.config.poll_interval * 10,
                Ok(false) => self.config.poll_interval,
                Err(e) if e.is_transient() => {
                    let kind = match &e {
                        SyncError::Source(SourceError::Request { .. }) => 0,
                        SyncError::Source(SourceError::Missing { .. }) => 1,
                        SyncError::Chain(_) => 3,
                        _ => 2,
                    };
                    self.progress.update(|p| p.errors[kind] += 1);
                    let retry_in_ms = backoff.as_millis() as u64;
                    match e.unreachable_cause() {
                        Some(cause) => {
                            warn!(target: "ots::sync", %cause, retry_in_ms, "the node cannot be reached; will retry")
                        }
                        None => {
                            warn!(target: "ots::sync", error = %e, retry_in_ms, "node request failed; will retry")
                        }
                    }
                    let pause = backoff;
                    backoff = (backoff * 2).min(Duration::from_secs(30));
                    pause
                }
                Err(e) => return Err(e),
            };
            let announced = async {
                match heads.as_mut() {
                    Some(stream) => stream.next().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = stop.changed() => {}
                head = announced => {
                    if head.is_none() {
                        warn!(target: "ots::sync", "the newHeads subscription ended; polling instead");
                        heads = None;
                    }
                }
            }
        }
    }

    /// Records that the loop stopped and waits, and why: in this process's status at once, in
    /// the database for `status` elsewhere, and in one log line (not one per look).
    async fn stopped(&self, reason: String) -> Result<(), SyncError> {
        let next = self.next_block()?;
        let why = format!("stopped at block {next}: {reason}");
        let notices = self.progress.notices();
        if notices.get().stopped.as_deref() == Some(why.as_str()) {
            return Ok(());
        }
        error!(target: "ots::sync", block = next, reason = %reason, recheck_in_s = self.config.stopped_recheck.as_secs(), "indexing stopped; the API keeps serving what is indexed");
        let db = self.db.clone();
        let stored = why.clone();
        blocking(move || -> Result<(), SyncError> {
            let txn = db.begin_write()?;
            state::set_stopped(&txn, Some(&stored))?;
            txn.commit()?;
            Ok(())
        })
        .await??;
        notices.update(|n| n.stopped = Some(why));
        Ok(())
    }

    /// Stores the refused probes the node client counted, if it counted more.
    async fn save_notices(&self) -> Result<(), SyncError> {
        let (notices, db) = (self.progress.notices().clone(), self.db.clone());
        blocking(move || notices.save(&db)).await?.map_err(SyncError::from)
    }

    /// Clears a stop once a step went through again.
    async fn resume(&self) -> Result<(), SyncError> {
        let notices = self.progress.notices();
        if notices.get().stopped.is_none() {
            return Ok(());
        }
        let db = self.db.clone();
        blocking(move || -> Result<(), SyncError> {
            let txn = db.begin_write()?;
            state::set_stopped(&txn, None)?;
            txn.commit()?;
            Ok(())
        })
        .await??;
        notices.update(|n| n.stopped = None);
        info!(target: "ots::sync", "indexing resumed");
        Ok(())
    }

    /// Indexes one batch towards the head; `false` when already there.
    async fn step(&self) -> Result<bool, SyncError> {
        let head = self.source.head().await?;
        self.progress.update(|p| p.head = head);
        let tip = self.checkpoint()?;
        let next = tip.map_or(0, |t| t.number + 1);
        if let Some(until) = self.bulk_until(next, head) {
            self.run_stage(next, until).await?;
            return Ok(true);
        }
        if next > head {
            // Nothing new: make sure the indexed tip is still on the node's chain (a reorg to a
            // shorter or equally long chain brings no new block to notice it by).
            if let Some(tip) = tip {
                if self.source.block_hash(tip.number).await? != Some(tip.hash) {
                    self.handle_reorg(tip).await?;
                    return Ok(true);
                }
            }
            return Ok(false);
        }
        let to = head.min(next + self.config.batch_blocks.max(1) - 1);
        self.sync_to(to).await?;
        Ok(true)
    }

    /// Marks the database cleanly closed.
    pub async fn close(self) -> Result<(), SyncError> {
        let db = self.db.clone();
        blocking(move || -> Result<(), SyncError> {
            let txn = db.begin_write()?;
            state::set_db_state(&txn, DbState::Closed)?;
            txn.commit()?;
            Ok(())
        })
        .await?
    }
}

fn bind(
    db: &Db,
    chain: ChainIdentity,
    names: &[String],
    keep_party_tokens: Option<bool>,
) -> Result<(), SyncError> {
    let txn = db.begin_write()?;
    let before = state::read_state(&txn)?;
    state::bind(&txn, chain, names)?;
    party_token::choose(&txn, before.chain.is_none(), keep_party_tokens)?;
    if before.db_state == Some(DbState::Open) {
        warn!(target: "ots::sync", "the previous writer did not stop cleanly; every batch commits atomically, so the index is intact at its last checkpoint");
    }
    state::set_db_state(&txn, DbState::Open)?;
    // A stop is the running loop's: this one has not met it (yet).
    state::set_stopped(&txn, None)?;
    txn.commit()?;
    Ok(())
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, SyncError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| SyncError::Writer(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn missing(block: u64) -> SyncError {
        SyncError::Source(SourceError::Missing { what: "block", block })
    }

    #[test]
    fn only_the_same_answer_about_a_block_counts_and_anything_else_starts_again() {
        let limit = Duration::from_millis(30);
        let mut same = SameAnswer::default();
        assert!(!same.for_too_long(&missing(7), limit), "first seen");
        std::thread::sleep(limit);
        assert!(same.for_too_long(&missing(7), limit), "the same for the whole limit");
        assert!(!same.for_too_long(&missing(8), limit), "another block starts again");
        std::thread::sleep(limit);
        let other = SyncError::Source(SourceError::BadUrl { url: "x".into(), reason: "y".into() });
        assert!(!same.for_too_long(&other, limit), "not an answer about a block");
        assert!(!same.for_too_long(&missing(8), limit), "counted again from here");
        assert!(SameAnswer::default().for_too_long(&missing(1), Duration::ZERO), "no patience at all");
        let answered = |message: &str| {
            let payload = serde_json::from_value(serde_json::json!({"code": -32000, "message": message}))
                .expect("an error object");
            SyncError::Source(SourceError::Request {
                method: "debug_traceBlockByNumber",
                source: alloy::transports::RpcError::ErrorResp(payload),
            })
        };
        let mut same = SameAnswer::default();
        assert!(!same.for_too_long(&answered("execution timeout"), limit));
        std::thread::sleep(limit);
        assert!(same.for_too_long(&answered("execution timeout"), limit), "the node's own error, every time");
        let mut same = SameAnswer::default();
        assert!(!same.for_too_long(&answered("rate limit exceeded"), limit));
        std::thread::sleep(limit);
        assert!(
            !same.for_too_long(&answered("rate limit exceeded"), limit),
            "asked to slow down: waited for"
        );
    }
}
