//! Recorded chains: `capture` writes a node's blocks (with receipts and call frames) and the
//! answers to every probe the classifiers made, and [`Fixture`] replays them with no node.
//!
//! File: gzip-compressed JSON lines. The first line is the header; then, per block, the block
//! and the `eth_call`/`eth_getCode` answers its classification needed, sorted.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    fs::File,
    io::{BufRead, BufReader, BufWriter, Write},
    path::{Path, PathBuf},
    sync::Mutex,
};

use alloy_primitives::{Address, Bytes, B256};
use flate2::{read::GzDecoder, write::GzEncoder, Compression};
use ots_classifiers::{
    classify_block, BlockData, BoxFuture, CallOutcome, ChainError, ChainView, Classifier, Fact, Standard,
};
use serde::{Deserialize, Serialize};

use super::{BlockSource, NodeClient, SourceError};
use crate::{
    db::state::ChainIdentity,
    index::{
        reprobe::{emitters_to_reprobe, reprobe},
        ClassifiedBlock,
    },
};

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

/// Records every answer a classifier got.
#[derive(Debug)]
struct RecordingView<'a> {
    node: &'a NodeClient,
    calls: Mutex<BTreeMap<CallKey, CallOutcome>>,
    codes: Mutex<BTreeMap<(Address, u64), Bytes>>,
}

impl ChainView for RecordingView<'_> {
    fn call_at(
        &self,
        to: Address,
        input: Bytes,
        block: u64,
    ) -> BoxFuture<'_, Result<CallOutcome, ChainError>> {
        Box::pin(async move {
            let outcome = self.node.call_at(to, input.clone(), block).await?;
            if let Ok(mut calls) = self.calls.lock() {
                calls.insert((to, input, block), outcome.clone());
            }
            Ok(outcome)
        })
    }

    fn code_at(&self, address: Address, block: u64) -> BoxFuture<'_, Result<Bytes, ChainError>> {
        Box::pin(async move {
            let code = self.node.code_at(address, block).await?;
            if let Ok(mut codes) = self.codes.lock() {
                codes.insert((address, block), code.clone());
            }
            Ok(code)
        })
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

/// What a capture wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaptureStats {
    /// Blocks recorded.
    pub blocks: u64,
    /// Probe answers recorded.
    pub probes: u64,
    /// Bytes of the file.
    pub bytes: u64,
}

/// Records blocks `from..=to` of `node`, and every probe `classifiers` make on them, to `out`
/// (written to a temporary name and renamed when complete).
pub async fn capture(
    node: &NodeClient,
    classifiers: &[Box<dyn Classifier>],
    from: u64,
    to: u64,
    out: &Path,
) -> Result<CaptureStats, CaptureError> {
    let io = |source| CaptureError::Io { path: out.to_path_buf(), source };
    let chain = node.chain_identity().await?;
    let tmp = out.with_extension("partial");
    let file = File::create(&tmp).map_err(io)?;
    let mut w = GzEncoder::new(BufWriter::new(file), Compression::default());
    let write = |w: &mut GzEncoder<BufWriter<File>>, r: &Record| -> Result<(), CaptureError> {
        serde_json::to_writer(&mut *w, r).map_err(|e| io(e.into()))?;
        w.write_all(b"\n").map_err(io)
    };
    let header = Record::Header {
        format: FIXTURE_FORMAT,
        chain_id: chain.chain_id,
        genesis_hash: chain.genesis_hash,
        from,
        to,
        tracer: node.trace_mode().name().to_owned(),
    };
    write(&mut w, &header)?;
    let mut stats = CaptureStats { blocks: 0, probes: 0, bytes: 0 };
    // Tokens and failed re-probes seen so far: the indexer, starting from the same block, knows
    // no more than this, so it never asks for a probe this file lacks.
    let mut known: HashSet<Address> = HashSet::new();
    for number in from..=to {
        let block = node.block(number).await?;
        let view = RecordingView { node, calls: Mutex::default(), codes: Mutex::default() };
        let created = block.created_contracts();
        let facts = classify_block(classifiers, &block, &created, &[], &view).await?;
        let mut batch = [ClassifiedBlock { block, facts, probe_misses: Vec::new() }];
        let todo = emitters_to_reprobe(&batch, |a| Ok::<_, std::convert::Infallible>(known.contains(a)))
            .unwrap_or_else(|never| match never {});
        reprobe(classifiers, &mut batch, &todo, &view).await?;
        let [ClassifiedBlock { block, facts, probe_misses }] = batch;
        known.extend(probe_misses);
        known.extend(facts.iter().filter_map(|f| match f {
            Fact::Matched { standard: Standard::Erc20 | Standard::Erc721, address } => Some(*address),
            _ => None,
        }));
        write(&mut w, &Record::Block { block: Box::new(block) })?;
        for ((to, input, block), outcome) in view.calls.into_inner().unwrap_or_default() {
            write(&mut w, &Record::Call { to, input, block, outcome })?;
            stats.probes += 1;
        }
        for ((address, block), code) in view.codes.into_inner().unwrap_or_default() {
            write(&mut w, &Record::Code { address, block, code })?;
            stats.probes += 1;
        }
        stats.blocks += 1;
    }
    let inner = w.finish().map_err(io)?;
    inner.into_inner().map_err(|e| io(e.into_error()))?.sync_all().map_err(io)?;
    std::fs::rename(&tmp, out).map_err(io)?;
    stats.bytes = std::fs::metadata(out).map_err(io)?.len();
    Ok(stats)
}

/// Writes `blocks` as a recording with no probe answers: a generated chain (tests and
/// benchmarks make chains with what Anvil cannot produce, such as withdrawals). The classifiers
/// that replay it must not need `eth_call`s.
pub fn write_recording(out: &Path, chain: ChainIdentity, blocks: &[BlockData]) -> Result<u64, CaptureError> {
    let io = |source| CaptureError::Io { path: out.to_path_buf(), source };
    let (Some(first), Some(last)) = (blocks.first(), blocks.last()) else {
        return Err(io(std::io::Error::new(std::io::ErrorKind::InvalidInput, "no blocks to record")));
    };
    let tmp = out.with_extension("partial");
    let file = File::create(&tmp).map_err(io)?;
    let mut w = GzEncoder::new(BufWriter::new(file), Compression::fast());
    let header = Record::Header {
        format: FIXTURE_FORMAT,
        chain_id: chain.chain_id,
        genesis_hash: chain.genesis_hash,
        from: first.number,
        to: last.number,
        tracer: "none".to_owned(),
    };
    for record in
        std::iter::once(header).chain(blocks.iter().map(|b| Record::Block { block: Box::new(b.clone()) }))
    {
        serde_json::to_writer(&mut w, &record).map_err(|e| io(e.into()))?;
        w.write_all(b"\n").map_err(io)?;
    }
    let inner = w.finish().map_err(io)?;
    inner.into_inner().map_err(|e| io(e.into_error()))?.sync_all().map_err(io)?;
    std::fs::rename(&tmp, out).map_err(io)?;
    std::fs::metadata(out).map(|m| m.len()).map_err(io)
}
