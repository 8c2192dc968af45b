//! Recorded chains: `capture` writes a node's blocks (with receipts and call frames) and the
//! answers to every probe the classifiers made, and [`Fixture`] replays them with no node.
//!
//! File: gzip-compressed JSON lines. The first line is the header; then, per block, the block
//! and the `eth_call`/`eth_getCode` answers its classification needed, sorted.

use std::{
    collections::{BTreeMap, HashMap},
    fs::File,
    io::{BufRead, BufReader, BufWriter, Write},
    path::{Path, PathBuf},
};

use alloy_primitives::{Address, Bytes, B256};
use flate2::{read::GzDecoder, write::GzEncoder, Compression};
use ots_classifiers::{BlockData, BoxFuture, CallOutcome, ChainError, ChainView};
use serde::{Deserialize, Serialize};

use super::{BlockSource, SourceError};
use crate::db::state::ChainIdentity;

/// Version of the recording format.
pub const FIXTURE_FORMAT: u32 = 1;

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Record {
    Header { format: u32, chain_id: u64, genesis_hash: B256, from: u64, to: u64, tracer: String },
    Block { block: Box<BlockData> },
    Call { to: Address, input: Bytes, block: u64, outcome: CallOutcome },
    Code { address: Address, block: u64, code: Bytes },
}

type CallKey = (Address, Bytes, u64);

/// A recorded chain, held in memory.
#[derive(Debug)]
pub struct Fixture {
    path: String,
    chain: ChainIdentity,
    to: u64,
    tracer: &'static str,
    blocks: BTreeMap<u64, BlockData>,
    calls: HashMap<CallKey, CallOutcome>,
    codes: HashMap<(Address, u64), Bytes>,
}

fn fixture_err(path: &Path, reason: impl Into<String>) -> SourceError {
    SourceError::Fixture { path: path.display().to_string(), reason: reason.into() }
}

fn tracer_name(name: &str) -> &'static str {
    match name {
        "trace_block" => "trace_block",
        "debug_traceBlockByNumber" => "debug_traceBlockByNumber",
        _ => "none",
    }
}

impl Fixture {
    /// Loads a recording.
    pub fn load(path: &Path) -> Result<Self, SourceError> {
        let file = File::open(path).map_err(|e| fixture_err(path, e.to_string()))?;
        let mut lines = BufReader::new(GzDecoder::new(file)).lines();
        let first = lines
            .next()
            .ok_or_else(|| fixture_err(path, "empty file"))?
            .map_err(|e| fixture_err(path, e.to_string()))?;
        let Ok(Record::Header { format, chain_id, genesis_hash, to, tracer, .. }) =
            serde_json::from_str(&first)
        else {
            return Err(fixture_err(path, "not an ots-indexer recording (no header line)"));
        };
        if format != FIXTURE_FORMAT {
            return Err(fixture_err(
                path,
                format!("recording format {format}, this build reads {FIXTURE_FORMAT}"),
            ));
        }
        let mut fixture = Self {
            path: path.display().to_string(),
            chain: ChainIdentity { chain_id, genesis_hash },
            to,
            tracer: tracer_name(&tracer),
            blocks: BTreeMap::new(),
            calls: HashMap::new(),
            codes: HashMap::new(),
        };
        for (n, line) in lines.enumerate() {
            let line = line.map_err(|e| fixture_err(path, format!("line {}: {e}", n + 2)))?;
            match serde_json::from_str(&line)
                .map_err(|e| fixture_err(path, format!("line {}: {e}", n + 2)))?
            {
                Record::Header { .. } => {
                    return Err(fixture_err(path, format!("line {}: a second header", n + 2)))
                }
                Record::Block { block } => {
                    fixture.blocks.insert(block.number, *block);
                }
                Record::Call { to, input, block, outcome } => {
                    fixture.calls.insert((to, input, block), outcome);
                }
                Record::Code { address, block, code } => {
                    fixture.codes.insert((address, block), code);
                }
            }
        }
        Ok(fixture)
    }

    /// Blocks in the recording.
    pub fn block_count(&self) -> usize {
        self.blocks.len()
    }

    /// Logs in the recording.
    pub fn log_count(&self) -> usize {
        self.blocks.values().flat_map(|b| &b.receipts).map(|r| r.logs.len()).sum()
    }
}

impl ChainView for Fixture {
    fn call_at(
        &self,
        to: Address,
        input: Bytes,
        block: u64,
    ) -> BoxFuture<'_, Result<CallOutcome, ChainError>> {
        let answer = self.calls.get(&(to, input, block)).cloned().ok_or_else(|| ChainError {
            method: "eth_call",
            block,
            message: format!("not in recording {} (captured with other classifiers?)", self.path),
        });
        Box::pin(async move { answer })
    }

    fn code_at(&self, address: Address, block: u64) -> BoxFuture<'_, Result<Bytes, ChainError>> {
        let answer = self.codes.get(&(address, block)).cloned().ok_or_else(|| ChainError {
            method: "eth_getCode",
            block,
            message: format!("not in recording {}", self.path),
        });
        Box::pin(async move { answer })
    }
}

impl BlockSource for Fixture {
    fn chain_identity(&self) -> BoxFuture<'_, Result<ChainIdentity, SourceError>> {
        let chain = self.chain;
        Box::pin(async move { Ok(chain) })
    }
    fn head(&self) -> BoxFuture<'_, Result<u64, SourceError>> {
        let to = self.to;
        Box::pin(async move { Ok(to) })
    }
    fn block(&self, number: u64) -> BoxFuture<'_, Result<BlockData, SourceError>> {
        let block = self
            .blocks
            .get(&number)
            .cloned()
            .ok_or(SourceError::Missing { what: "recorded block", block: number });
        Box::pin(async move { block })
    }
    fn block_hash(&self, number: u64) -> BoxFuture<'_, Result<Option<B256>, SourceError>> {
        let hash = self.blocks.get(&number).map(|b| b.hash);
        Box::pin(async move { Ok(hash) })
    }
    fn tracer(&self) -> &'static str {
        self.tracer
    }
}

/// Capturing failed; the output file was not created.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The node failed.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// A probe failed at the node.
    #[error("a classifier probe failed: {0}")]
    Chain(#[from] ChainError),
    /// Writing failed.
    #[error("writing {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Writes a recording: a header, then blocks and the probe answers met while classifying them
/// (to a temporary name, renamed when [`RecordingWriter::finish`]ed, so a cut-short capture
/// leaves no file that looks complete).
#[derive(Debug)]
pub struct RecordingWriter {
    out: PathBuf,
    tmp: PathBuf,
    w: GzEncoder<BufWriter<File>>,
}

impl RecordingWriter {
    /// Starts a recording of blocks `from..=to` of `chain`, whose call frames came from
    /// `tracer`.
    pub fn create(
        out: &Path,
        chain: ChainIdentity,
        (from, to): (u64, u64),
        tracer: &str,
        compression: Compression,
    ) -> Result<Self, CaptureError> {
        let tmp = out.with_extension("partial");
        let file =
            File::create(&tmp).map_err(|source| CaptureError::Io { path: out.to_path_buf(), source })?;
        let mut writer =
            Self { out: out.to_path_buf(), tmp, w: GzEncoder::new(BufWriter::new(file), compression) };
        writer.write(&Record::Header {
            format: FIXTURE_FORMAT,
            chain_id: chain.chain_id,
            genesis_hash: chain.genesis_hash,
            from,
            to,
            tracer: tracer.to_owned(),
        })?;
        Ok(writer)
    }

    fn write(&mut self, record: &Record) -> Result<(), CaptureError> {
        let out = self.out.clone();
        let io = |source| CaptureError::Io { path: out.clone(), source };
        serde_json::to_writer(&mut self.w, record).map_err(|e| io(e.into()))?;
        self.w.write_all(b"\n").map_err(io)
    }

    /// Adds a block.
    pub fn block(&mut self, block: &BlockData) -> Result<(), CaptureError> {
        self.write(&Record::Block { block: Box::new(block.clone()) })
    }

    /// Adds the answer of `eth_call` to `to` with `input` at `block`.
    pub fn call(
        &mut self,
        to: Address,
        input: Bytes,
        block: u64,
        outcome: CallOutcome,
    ) -> Result<(), CaptureError> {
        self.write(&Record::Call { to, input, block, outcome })
    }

    /// Adds the code of `address` at `block`.
    pub fn code(&mut self, address: Address, block: u64, code: Bytes) -> Result<(), CaptureError> {
        self.write(&Record::Code { address, block, code })
    }

    /// Completes the file and puts it in place; returns its size in bytes.
    pub fn finish(self) -> Result<u64, CaptureError> {
        let out = self.out.clone();
        let io = |source| CaptureError::Io { path: out.clone(), source };
        let inner = self.w.finish().map_err(io)?;
        inner.into_inner().map_err(|e| io(e.into_error()))?.sync_all().map_err(io)?;
        std::fs::rename(&self.tmp, &self.out).map_err(io)?;
        std::fs::metadata(&self.out).map(|m| m.len()).map_err(io)
    }
}

/// Writes `blocks` as a recording with no probe answers: a generated chain (tests and
/// benchmarks make chains with what Anvil cannot produce, such as withdrawals). The classifiers
/// that replay it must not need `eth_call`s.
pub fn write_recording(out: &Path, chain: ChainIdentity, blocks: &[BlockData]) -> Result<u64, CaptureError> {
    let (Some(first), Some(last)) = (blocks.first(), blocks.last()) else {
        let error = std::io::Error::new(std::io::ErrorKind::InvalidInput, "no blocks to record");
        return Err(CaptureError::Io { path: out.to_path_buf(), source: error });
    };
    let mut writer =
        RecordingWriter::create(out, chain, (first.number, last.number), "none", Compression::fast())?;
    for block in blocks {
        writer.block(block)?;
    }
    writer.finish()
}
