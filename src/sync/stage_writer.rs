//! The thread that owns a bulk stage. MDBX ties a write transaction to the thread that began
//! it, and a stage's transaction lives across many batches, so one thread begins it, adds each
//! batch, answers the lookups that must see the stage's own writes, and merges and commits it.
//! The sync loop meanwhile fetches and classifies the next batch: at most one batch is being
//! written while the next is fetched, and one more may wait in the queue.

use std::{collections::HashMap, time::Instant};

use alloy_primitives::Address;
use ots_classifiers::Fact;
use tokio::sync::{mpsc, oneshot};
use tracing::{info, warn};

use super::SyncError;
use crate::{
    classify::known::{known, Known},
    db::{Db, DbError, WriteTxn},
    index::{ClassifiedBlock, Stage, StageOptions, StageSummary, WriteError, WrittenBatch},
    status::SharedProgress,
};

type Reply<T> = oneshot::Sender<Result<T, SyncError>>;

enum Command {
    Add { blocks: Vec<ClassifiedBlock>, activity: bool, reply: Reply<WrittenBatch> },
    Lookup { addresses: Vec<Address>, reply: Reply<HashMap<Address, Known>> },
    Commit { rate: Option<f64>, reply: Reply<Option<StageSummary>> },
}

/// A stage on its own thread. Dropped without [`StageWriter::commit`], the stage is discarded.
#[derive(Debug)]
pub(super) struct StageWriter {
    commands: mpsc::Sender<Command>,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Add { .. } => "Add",
            Self::Lookup { .. } => "Lookup",
            Self::Commit { .. } => "Commit",
        })
    }
}

/// A batch handed to the writer; its result arrives once written.
pub(super) type PendingAdd = oneshot::Receiver<Result<WrittenBatch, SyncError>>;

fn gone() -> SyncError {
    SyncError::Writer("the stage writer thread stopped".into())
}

impl StageWriter {
    /// Starts the thread, which begins the stage on the indexed tip.
    pub(super) async fn begin(
        db: Db,
        options: StageOptions,
        progress: SharedProgress,
    ) -> Result<Self, SyncError> {
        let (commands, receiver) = mpsc::channel(1);
        let (started, begun) = oneshot::channel();
        std::thread::Builder::new()
            .name("ots-stage-writer".into())
            .spawn(move || serve(&db, options, &progress, receiver, started))
            .map_err(|e| SyncError::Writer(e.to_string()))?;
        begun.await.map_err(|_| gone())??;
        Ok(Self { commands })
    }

    async fn send<T>(
        &self,
        command: impl FnOnce(Reply<T>) -> Command,
    ) -> Result<oneshot::Receiver<Result<T, SyncError>>, SyncError> {
        let (reply, answer) = oneshot::channel();
        self.commands.send(command(reply)).await.map_err(|_| gone())?;
        Ok(answer)
    }

    /// Queues `blocks`; the answer arrives once they are written into the stage.
    pub(super) async fn add(
        &self,
        blocks: Vec<ClassifiedBlock>,
        activity: bool,
    ) -> Result<PendingAdd, SyncError> {
        self.send(|reply| Command::Add { blocks, activity, reply }).await
    }

    /// What the stage's transaction holds of `addresses` (after every batch queued before).
    pub(super) async fn lookup(&self, addresses: Vec<Address>) -> Result<HashMap<Address, Known>, SyncError> {
        self.send(|reply| Command::Lookup { addresses, reply }).await?.await.map_err(|_| gone())?
    }

    /// Merges and commits the stage.
    pub(super) async fn commit(self, rate: Option<f64>) -> Result<Option<StageSummary>, SyncError> {
        self.send(|reply| Command::Commit { rate, reply }).await?.await.map_err(|_| gone())?
    }
}

/// Waits for a queued batch's result.
pub(super) async fn written(pending: PendingAdd) -> Result<WrittenBatch, SyncError> {
    pending.await.map_err(|_| gone())?
}

/// What the stage knows of Transfer emitters, kept across its batches. Every batch asks about
/// the same busy tokens, and each look-up walks the stage's own transaction, which grows (and
/// slows) for as long as the stage gathers. An answer changes only through a batch's facts (a
/// match, metadata) or its probe misses, so a batch forgets the answers for those addresses.
#[derive(Debug, Default)]
struct KnownEmitters(foldhash::HashMap<Address, Known>);

impl KnownEmitters {
    /// Answers kept at most; past that they are all forgotten (a mainnet stage sees millions of
    /// emitters once each).
    const MOST: usize = 1 << 20;

    fn forget_written(&mut self, blocks: &[ClassifiedBlock]) {
        for block in blocks {
            for fact in &block.facts {
                let (Fact::Matched { address, .. }
                | Fact::Flagged { address, .. }
                | Fact::Labeled { address, .. }
                | Fact::Described { address, .. }) = fact;
                self.0.remove(address);
            }
            for address in &block.probe_misses {
                self.0.remove(address);
            }
        }
    }

    fn lookup(&mut self, txn: &WriteTxn, addresses: &[Address]) -> Result<HashMap<Address, Known>, DbError> {
        if self.0.len() > Self::MOST {
            self.0.clear();
        }
        let unknown: Vec<Address> = addresses.iter().filter(|a| !self.0.contains_key(*a)).copied().collect();
        self.0.extend(known(txn, &unknown)?);
        Ok(addresses.iter().map(|a| (*a, self.0.get(a).copied().unwrap_or_default())).collect())
    }
}

fn serve(
    db: &Db,
    options: StageOptions,
    progress: &SharedProgress,
    mut commands: mpsc::Receiver<Command>,
    started: oneshot::Sender<Result<(), SyncError>>,
) {
    let mut stage = match Stage::begin(db, options) {
        Ok(stage) => stage,
        Err(e) => {
            let _ = started.send(Err(e.into()));
            return;
        }
    };
    if started.send(Ok(())).is_err() {
        return;
    }
    let mut emitters = KnownEmitters::default();
    while let Some(command) = commands.blocking_recv() {
        match command {
            Command::Add { blocks, activity, reply } => {
                let started = Instant::now();
                let result = stage.add(&blocks, activity);
                emitters.forget_written(&blocks);
                drop(blocks);
                let secs = started.elapsed().as_secs_f64();
                let failed = result.is_err();
                let run_bytes = stage.run_bytes();
                progress.update(|p| {
                    p.stage.run_bytes = run_bytes;
                    p.stage.gathered_to = stage.tip().map(|t| t.number);
                    p.write_seconds_total += secs;
                    p.write_seconds_last = secs;
                });
                let _ = reply.send(result.map_err(SyncError::from));
                if failed {
                    // The transaction may hold half a batch: nothing more goes into it.
                    warn!(target: "ots::sync", "a batch failed inside a bulk stage; the stage is discarded");
                    return;
                }
            }
            Command::Lookup { addresses, reply } => {
                let _ = reply.send(emitters.lookup(stage.txn(), &addresses).map_err(SyncError::Db));
            }
            Command::Commit { rate, reply } => {
                progress.update(|p| p.stage.phase = crate::status::StagePhase::Merging);
                info!(target: "ots::sync", from = stage.first(), to = stage.tip().map(|t| t.number), run_bytes = stage.run_bytes(), "bulk stage merging its runs into the tables");
                let result = stage.commit(rate).map_err(|e: WriteError| SyncError::Write(e));
                if let Ok(Some(summary)) = &result {
                    progress.update(|p| {
                        p.write_seconds_total += summary.merge_seconds;
                        p.write_seconds_last = summary.merge_seconds;
                    });
                }
                let _ = reply.send(result);
                return;
            }
        }
    }
}
