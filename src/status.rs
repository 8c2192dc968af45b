//! What `ots-indexer status` prints and `ots2_getIndexerStatus` returns.

use std::sync::{Arc, Mutex};

use alloy_primitives::B256;
use serde::Serialize;

use crate::{
    db::{state, Db, DbError},
    index::BatchStats,
    notices::{stored_refusals, Notices, SharedNotices},
};

/// The sync loop's latest figures, shared with the API of the same process.
#[derive(Debug, Clone, Default)]
pub struct SharedProgress(Arc<Mutex<Progress>>, SharedNotices);

/// Kinds of node failure counted by the metrics.
pub const ERROR_KINDS: [&str; 4] = ["request", "missing", "inconsistent", "probe"];

/// The sync loop's figures.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Progress {
    /// Blocks per second of the latest batch.
    pub blocks_per_second: f64,
    /// Node head as last seen.
    pub head: u64,
    /// Last indexed block.
    pub indexed: u64,
    /// Where call frames come from.
    pub tracer: &'static str,
    /// Batches committed (a bulk stage counts one).
    pub batches: u64,
    /// Bulk stages committed.
    pub stages: u64,
    /// Of those, the stages whose run files were compressed (`--stage-compress-runs`).
    pub compressed_stages: u64,
    /// The most bytes a stage's run files held at once, over the stages committed.
    pub run_bytes_peak: u64,
    /// Seconds spent in batch writes (the MDBX transaction), in total.
    pub write_seconds_total: f64,
    /// Seconds of the latest batch write.
    pub write_seconds_last: f64,
    /// What the batches committed since start-up wrote, added up.
    pub written: BatchStats,
    /// Node failures, by the kinds of [`ERROR_KINDS`].
    pub errors: [u64; 4],
    /// The bulk stage, while one runs.
    pub stage: StageProgress,
}

/// Which write path the sync loop is on (docs/architecture.md, "Two write paths").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum StagePhase {
    /// Batch by batch, each its own transaction (near the head, or not started).
    #[default]
    Incremental,
    /// A bulk stage gathers blocks and spills their rows to run files.
    Collecting,
    /// A bulk stage merges its runs into the tables and commits.
    Merging,
    /// The catch-up's last stage has committed: the tables its stages left swollen are repacked
    /// (`index::packing`).
    Packing,
    /// Seen from another process: run files are there, so a stage gathers or merges (or one
    /// was killed, and its files wait for the next start to remove them).
    Running,
}

/// A bulk stage's figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StageProgress {
    /// What the loop is doing.
    pub phase: StagePhase,
    /// The stage's first block.
    pub from: Option<u64>,
    /// The newest block the stage has gathered (not yet committed).
    pub gathered_to: Option<u64>,
    /// The last block the stage will gather, at most.
    pub until: Option<u64>,
    /// Bytes its run files hold now.
    pub run_bytes: u64,
    /// Bytes they (with the journal) may hold before the stage merges.
    pub run_budget: u64,
    /// Bytes the stage journal holds.
    pub journal_bytes: u64,
}

impl SharedProgress {
    /// Figures that share `notices` with the node client.
    pub fn with_notices(notices: SharedNotices) -> Self {
        Self(Arc::default(), notices)
    }

    /// The notices shared with the node client.
    pub const fn notices(&self) -> &SharedNotices {
        &self.1
    }

    /// Changes the figures.
    pub fn update(&self, f: impl FnOnce(&mut Progress)) {
        if let Ok(mut p) = self.0.lock() {
            f(&mut p);
        }
    }

    /// The latest figures.
    pub fn get(&self) -> Progress {
        self.0.lock().map(|p| *p).unwrap_or_default()
    }
}

/// One table's size.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct TableStatus {
    /// Table name.
    pub name: &'static str,
    /// Entries (dups count one each).
    pub entries: u64,
    /// Bytes of its pages.
    pub bytes: u64,
}

/// The indexer's state, for people and scripts.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct IndexerStatus {
    /// Chain id the database is bound to.
    pub chain_id: Option<u64>,
    /// Genesis hash of that chain.
    pub genesis_hash: Option<B256>,
    /// On-disk format version.
    pub format_version: Option<u64>,
    /// The first block whose transactions the appearance lists mark as received, in a database
    /// upgraded in place from format 10 (older blocks' `txlist` rows are counted with the node's
    /// help). Absent when every block's are.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub received_marks_from_block: Option<u64>,
    /// The first block from which the internal-transaction index holds every internal
    /// transaction, where it does not hold them all: a database upgraded in place from format
    /// 11, or blocks indexed without call frames (`txlistinternal` of an address reaching older
    /// blocks traces every transaction it appears in). Absent when it holds every block's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub internal_txs_from_block: Option<u64>,
    /// The first block from which the transfer rows index holds every transaction's token-list
    /// rows, where it does not hold them all: a database upgraded in place from format 12 (a deep
    /// page of a token list counts older rows with the node's help). Absent when it holds every
    /// block's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transfer_rows_from_block: Option<u64>,
    /// The first block from which the token transfers index holds every transaction that moves
    /// a token, where it does not hold them all: a database upgraded in place from format 13 (a
    /// token's own list walks its appearances below it). Absent when it holds every block's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_transfers_from_block: Option<u64>,
    /// The first block from which the internal rows index holds every transaction's
    /// `txlistinternal` rows beyond one, where it does not hold them all: a database upgraded in
    /// place from format 13 (a deep page of `txlistinternal` traces older transactions to count
    /// their rows). Absent when it holds every block's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub internal_rows_from_block: Option<u64>,
    /// Whether the party–token index is kept (`--party-token-index`).
    pub party_token_index: bool,
    /// The first block from which the party–token index holds every transaction in which a party
    /// moved a token, where it is kept but does not hold them all: it was turned on for a
    /// database that had indexed blocks (an address's list of one token walks its transfer index
    /// below it). Absent when it holds every block's, or is not kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub party_token_from_block: Option<u64>,
    /// `open`, `closed` or `inconsistent`.
    pub db_state: Option<String>,
    /// Last indexed block.
    pub indexed_block: Option<u64>,
    /// Its hash.
    pub indexed_hash: Option<B256>,
    /// The node's head, when the node answered.
    pub head_block: Option<u64>,
    /// `head_block − indexed_block`.
    pub lag: Option<u64>,
    /// Speed of the latest batch (of this process's sync loop, else as the last writer stored it).
    pub blocks_per_second: Option<f64>,
    /// The tracer call frames come from (`trace_block`, `debug_traceBlockByNumber` or `none`),
    /// when this process is syncing.
    pub tracer: Option<&'static str>,
    /// Bytes of the database file on disk.
    pub file_bytes: u64,
    /// Bytes of that file's pages that hold data (the rest is free pages and growth room).
    pub used_bytes: u64,
    /// The bulk stage of this process's sync loop (its phase, blocks and run files); another
    /// process's stage shows only its run files' bytes, with the phase `running`. Absent when no
    /// stage runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stage: Option<StageProgress>,
    /// The node's pending transactions: where they come from and how many this server keeps
    /// (`status` in another process says only which source the node offers). Absent when
    /// following the pool is off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending: Option<crate::pending::PendingStatus>,
    /// What the indexer has to tell about the node (this process's sync loop): why it stopped,
    /// what the node lacks, refused probes. Another process sees `stopped` and the refused
    /// probes.
    pub notices: Notices,
    /// Every table.
    pub tables: Vec<TableStatus>,
}

/// Reads the status; `head` is the node's head if known, `progress` the local sync loop's.
pub fn read_status(
    db: &Db,
    head: Option<u64>,
    progress: Option<&SharedProgress>,
) -> Result<IndexerStatus, DbError> {
    let notices = progress.map(|p| p.notices().get());
    let progress = progress.map(SharedProgress::get);
    let txn = db.begin_read()?;
    let stopped = state::read_stopped(&txn)?;
    let refusals = stored_refusals(&txn)?;
    let marks_from = state::read_received_marks_from(&txn)?;
    let internal_from = state::read_internal_txs_from(&txn)?;
    let rows_from = state::read_transfer_rows_from(&txn)?;
    let moves_from = state::read_token_transfers_from(&txn)?;
    let internal_rows_from = state::read_internal_rows_from(&txn)?;
    let party_token_from = state::read_party_token_from(&txn)?;
    let s = state::read_state(&txn).map_err(|e| match e {
        state::StateError::Db(e) => e,
        other => DbError::Corrupt { table: "OtsIndexerState", key: String::new(), reason: other.to_string() },
    })?;
    let tables = txn
        .table_stats()?
        .into_iter()
        .map(|t| TableStatus { name: t.table.name(), entries: t.entries, bytes: t.bytes })
        .collect();
    let indexed = s.checkpoint.map(|c| c.number);
    Ok(IndexerStatus {
        chain_id: s.chain.map(|c| c.chain_id),
        genesis_hash: s.chain.map(|c| c.genesis_hash),
        format_version: s.format_version,
        received_marks_from_block: (marks_from > 0).then(|| crate::txid::TxId(marks_from).block()),
        internal_txs_from_block: match internal_from {
            0 => None,
            state::INTERNAL_TXS_NOWHERE => Some(indexed.map_or(0, |tip| tip + 1)),
            from => Some(crate::txid::TxId(from).block()),
        },
        transfer_rows_from_block: (rows_from > 0).then(|| crate::txid::TxId(rows_from).block()),
        token_transfers_from_block: (moves_from > 0).then(|| crate::txid::TxId(moves_from).block()),
        internal_rows_from_block: (internal_rows_from > 0)
            .then(|| crate::txid::TxId(internal_rows_from).block()),
        party_token_index: party_token_from != state::PARTY_TOKEN_NOT_KEPT,
        party_token_from_block: (party_token_from > 0 && party_token_from != state::PARTY_TOKEN_NOT_KEPT)
            .then(|| crate::txid::TxId(party_token_from).block()),
        db_state: s.db_state.map(|d| d.to_string()),
        indexed_block: indexed,
        indexed_hash: s.checkpoint.map(|c| c.hash),
        head_block: head,
        lag: head.map(|h| h.saturating_sub(indexed.unwrap_or(0))),
        blocks_per_second: progress.map(|p| p.blocks_per_second).or(s.sync_rate),
        tracer: progress.map(|p| p.tracer),
        stage: match progress {
            Some(p) if p.stage.phase != StagePhase::Incremental => Some(p.stage),
            Some(_) => None,
            // Run files with no sync loop here: another process's stage (or a dead one's, emptied
            // when the next begins).
            None => {
                let run_bytes = crate::etl::RunDir::bytes_in(&crate::index::stage::run_dir(db));
                let journal_bytes =
                    std::fs::metadata(crate::index::stage::journal_path(db.dir())).map_or(0, |m| m.len());
                (run_bytes > 0 || journal_bytes > 0).then_some(StageProgress {
                    phase: StagePhase::Running,
                    run_bytes,
                    journal_bytes,
                    ..Default::default()
                })
            }
        },
        file_bytes: db.file_size(),
        used_bytes: db.used_bytes(),
        pending: None,
        notices: notices.unwrap_or(Notices {
            stopped,
            refused_probes: refusals.count,
            recent_refused_probes: refusals.recent,
            stored_refused_probes: refusals.count,
            ..Notices::default()
        }),
        tables,
    })
}
