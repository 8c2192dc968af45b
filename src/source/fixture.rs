//! Recorded chains: `capture` writes a node's blocks (with receipts and call frames) and the
//! answers to every probe the classifiers made, and [`Fixture`] replays them with no node.
//!
//! File: zstd-compressed (gzip, what older recordings used, is read too; `compression.rs`). The
//! first line is the JSON header; then, per block, the block and the
//! `eth_call`/`eth_getCode` answers its classification needed, sorted: each a 4-byte
//! little-endian length and the entry in bincode (format 4, which added OP Stack deposits' mint
//! to format 3's transactions; format 3, which added transaction values and fees to format 2's
//! blocks, and format 1, a JSON line per record, are read still). [`Fixture`]
//! reads it as it is indexed, so its length is bounded by disk, not memory.

use std::{
    collections::{BTreeMap, HashMap},
    fs::File,
    io::{BufRead, Read, Write},
    path::{Path, PathBuf},
    sync::{Arc, Condvar, Mutex},
};

use alloy_primitives::{Address, Bytes, B256};
use ots_classifiers::{BlockData, BoxFuture, CallOutcome, ChainError, ChainView};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::{
    compression::{self, Codec, Compressor, Decompressed},
    fixture_entry::Entry,
    BlockSource, SourceError,
};
use crate::db::state::ChainIdentity;

/// Version of the recording format written: 4, a JSON header line and then length-prefixed
/// binary entries (bincode). Formats 3 (the same without deposits' mint) and 1 (every record a
/// JSON line) are still read; format 2 (the same as 3 without transaction values and fees) is
/// not: its entries cannot be told apart.
pub const FIXTURE_FORMAT: u32 = 4;
/// The binary format before deposits' mint.
const BINARY_WITHOUT_MINT_FORMAT: u32 = 3;
/// The binary format before transaction values and fees.
const BINARY_WITHOUT_FEES_FORMAT: u32 = 2;
/// The JSON-lines format, read but no longer written.
const JSON_LINES_FORMAT: u32 = 1;
/// Largest binary entry accepted (a block of a few hundred thousand logs).
const MAX_ENTRY_BYTES: u32 = 1 << 30;

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Record {
    Header { format: u32, chain_id: u64, genesis_hash: B256, from: u64, to: u64, tracer: String },
    Block { block: Box<BlockData> },
    Call { to: Address, input: Bytes, block: u64, outcome: CallOutcome },
    Code { address: Address, block: u64, code: Bytes },
}

type CallKey = (Address, Bytes, u64);
type CodeKey = (Address, u64);

/// The records after the header, in either format.
enum Entries {
    JsonLines { lines: std::io::Lines<Decompressed>, at: usize },
    Binary { reader: Decompressed, at: u64, without_mint: bool },
}

impl Entries {
    fn next_entry(&mut self) -> Option<Result<Entry, String>> {
        match self {
            Self::JsonLines { lines, at } => {
                let line = lines.next()?;
                *at += 1;
                let at = *at;
                let parsed = line.map_err(|e| format!("line {at}: {e}")).and_then(|line| {
                    serde_json::from_str::<Record>(&line).map_err(|e| format!("line {at}: {e}"))
                });
                Some(parsed.and_then(|record| match record {
                    Record::Header { .. } => Err(format!("line {at}: a second header")),
                    Record::Block { block } => Ok(Entry::Block(block)),
                    Record::Call { to, input, block, outcome } => {
                        Ok(Entry::Call { to, input, block, outcome })
                    }
                    Record::Code { address, block, code } => Ok(Entry::Code { address, block, code }),
                }))
            }
            Self::Binary { reader, at, without_mint } => {
                let mut len = [0u8; 4];
                match reader.read(&mut len[..1]) {
                    Ok(0) => return None,
                    Ok(_) => {}
                    Err(e) => return Some(Err(format!("entry {at}: {e}"))),
                }
                *at += 1;
                let at = *at;
                let entry =
                    reader.read_exact(&mut len[1..]).map_err(|e| format!("entry {at}: {e}")).and_then(|()| {
                        let n = u32::from_le_bytes(len);
                        if n > MAX_ENTRY_BYTES {
                            return Err(format!("entry {at}: {n} bytes long, past the limit"));
                        }
                        let mut bytes = vec![0u8; n as usize];
                        reader.read_exact(&mut bytes).map_err(|e| format!("entry {at}: {e}"))?;
                        let entry = if *without_mint {
                            super::fixture_v3::decode(&bytes)
                        } else {
                            bincode::deserialize(&bytes)
                        };
                        entry.map_err(|e| format!("entry {at}: {e}"))
                    });
                Some(entry)
            }
        }
    }
}

/// The probe answers one block's section of the file held.
#[derive(Debug, Default)]
struct Section {
    calls: Vec<CallKey>,
    codes: Vec<CodeKey>,
}

/// Blocks (and their probe answers) kept behind the newest one asked for: the sync loop probes
/// again across its whole batch (at most `--batch-blocks`, 1,000 by default) after fetching it,
/// and a batch retried from its start asks for its blocks again. Large enough for the large
/// batches that make a long catch-up faster (docs/benchmarks-history.md, "Mainnet scale").
const KEPT_BEHIND: u64 = 4096;
/// Largest `--batch-blocks` a replay takes (a batch must fit in what is kept behind).
pub const MAX_REPLAY_BATCH_BLOCKS: u64 = KEPT_BEHIND;
/// Blocks read ahead of the newest one asked for.
const READ_AHEAD: u64 = 256;

/// A recorded chain, read as it is indexed: a reader thread decodes the file in order and keeps
/// only the blocks near the ones asked for (and their probe answers), so a recording of any
/// length replays in bounded memory. Blocks must be asked for roughly in order, as the sync
/// loop does; one asked for long after it was passed is an error.
#[derive(Debug)]
pub struct Fixture {
    path: String,
    chain: ChainIdentity,
    from: u64,
    to: u64,
    tracer: &'static str,
    shared: Arc<Shared>,
    progress: watch::Receiver<ReadProgress>,
}

/// How far the reader got: every record of blocks `< complete` is in the buffer (or was
/// dropped behind); `end` once the file is read, with the error that stopped it if any.
#[derive(Debug, Clone, Default)]
struct ReadProgress {
    complete: u64,
    end: Option<Result<(), String>>,
}

#[derive(Debug, Default)]
struct Buffer {
    blocks: BTreeMap<u64, BlockData>,
    calls: HashMap<CallKey, CallOutcome>,
    codes: HashMap<CodeKey, Bytes>,
    /// Probe answers by the block whose section held them, for dropping them with it.
    sections: BTreeMap<u64, Section>,
    /// Every block's hash (reorg checks ask for any of them), by number − `from`.
    hashes: Vec<B256>,
    /// The newest block asked for.
    wanted: u64,
    /// Set when the `Fixture` is dropped: the reader stops.
    closed: bool,
}

#[derive(Debug)]
struct Shared {
    buffer: Mutex<Buffer>,
    /// Wakes the reader when a newer block is asked for, or the fixture is dropped.
    asked: Condvar,
    /// Blocks kept behind the newest one asked for (at most [`KEPT_BEHIND`]).
    kept_behind: std::sync::atomic::AtomicU64,
}

impl Default for Shared {
    fn default() -> Self {
        Self {
            buffer: Mutex::default(),
            asked: Condvar::new(),
            kept_behind: std::sync::atomic::AtomicU64::new(KEPT_BEHIND),
        }
    }
}

impl Buffer {
    /// Drops blocks and probe answers of blocks before `low`.
    fn drop_before(&mut self, low: u64) {
        while let Some(entry) = self.blocks.first_entry() {
            if *entry.key() >= low {
                break;
            }
            entry.remove();
        }
        while let Some(entry) = self.sections.first_entry() {
            if *entry.key() >= low {
                break;
            }
            let section = entry.remove();
            for key in section.calls {
                self.calls.remove(&key);
            }
            for key in section.codes {
                self.codes.remove(&key);
            }
        }
    }
}

fn fixture_err(path: &Path, reason: impl Into<String>) -> SourceError {
    SourceError::Fixture { path: path.display().to_string(), reason: reason.into() }
}

fn tracer_name(name: &str) -> &'static str {
    match name {
        "trace_block" => "trace_block",
        "debug_traceBlockByNumber" => "debug_traceBlockByNumber",
        "debug_traceTransaction (struct logs)" => "debug_traceTransaction (struct logs)",
        _ => "none",
    }
}

/// The reader thread: decodes records in order into `shared`, publishing progress.
fn read_records(
    mut entries: Entries,
    from: u64,
    shared: &Shared,
    progress: &watch::Sender<ReadProgress>,
) -> Result<(), String> {
    let mut section: Option<u64> = None;
    while let Some(entry) = entries.next_entry() {
        let entry = entry?;
        let mut buffer =
            shared.buffer.lock().map_err(|_| "the recording's buffer was poisoned".to_owned())?;
        match entry {
            Entry::Block(block) => {
                let expected = from + buffer.hashes.len() as u64;
                if block.number != expected {
                    return Err(format!("block {} where block {expected} was expected", block.number));
                }
                // The previous section is whole: its block and probes can be served.
                progress.send_modify(|p| p.complete = block.number);
                while !buffer.closed && block.number > buffer.wanted.saturating_add(READ_AHEAD) {
                    buffer = shared
                        .asked
                        .wait(buffer)
                        .map_err(|_| "the recording's buffer was poisoned".to_owned())?;
                }
                if buffer.closed {
                    return Ok(());
                }
                let low = buffer
                    .wanted
                    .saturating_sub(shared.kept_behind.load(std::sync::atomic::Ordering::Relaxed));
                buffer.drop_before(low);
                buffer.hashes.push(block.hash);
                section = Some(block.number);
                buffer.sections.insert(block.number, Section::default());
                buffer.blocks.insert(block.number, *block);
            }
            Entry::Call { to, input, block, outcome } => {
                let key = (to, input, block);
                if let Some(s) = section.and_then(|s| buffer.sections.get_mut(&s)) {
                    s.calls.push(key.clone());
                }
                buffer.calls.insert(key, outcome);
            }
            Entry::Code { address, block, code } => {
                if let Some(s) = section.and_then(|s| buffer.sections.get_mut(&s)) {
                    s.codes.push((address, block));
                }
                buffer.codes.insert((address, block), code);
            }
        }
    }
    let read = from + shared.buffer.lock().map_or(0, |b| b.hashes.len() as u64);
    progress.send_modify(|p| p.complete = read);
    Ok(())
}

impl Fixture {
    /// Opens a recording and starts reading it in the background.
    pub fn load(path: &Path) -> Result<Self, SourceError> {
        let mut reader = compression::open(path).map_err(|e| fixture_err(path, e))?;
        let mut first = String::new();
        reader.read_line(&mut first).map_err(|e| fixture_err(path, e.to_string()))?;
        if first.is_empty() {
            return Err(fixture_err(path, "empty file"));
        }
        let Ok(Record::Header { format, chain_id, genesis_hash, from, to, tracer }) =
            serde_json::from_str(&first)
        else {
            return Err(fixture_err(path, "not an ots-indexer recording (no header line)"));
        };
        let entries = match format {
            FIXTURE_FORMAT => Entries::Binary { reader, at: 0, without_mint: false },
            BINARY_WITHOUT_MINT_FORMAT => Entries::Binary { reader, at: 0, without_mint: true },
            JSON_LINES_FORMAT => Entries::JsonLines { lines: reader.lines(), at: 1 },
            BINARY_WITHOUT_FEES_FORMAT => {
                return Err(fixture_err(
                    path,
                    "recording format 2 lacks transaction values and fees, which the address totals need: record the chain again with `ots-indexer capture` (or `gen_chain`)",
                ))
            }
            _ => {
                return Err(fixture_err(
                    path,
                    format!(
                    "recording format {format}, this build reads {JSON_LINES_FORMAT}, {BINARY_WITHOUT_MINT_FORMAT} and {FIXTURE_FORMAT}"
                ),
                ))
            }
        };
        let shared = Arc::new(Shared::default());
        shared.buffer.lock().map_err(|_| fixture_err(path, "poisoned"))?.wanted = from;
        let (sender, progress) = watch::channel(ReadProgress { complete: from, end: None });
        let reader = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("ots-recording".into())
            .spawn(move || {
                let result = read_records(entries, from, &reader, &sender);
                sender.send_modify(|p| p.end = Some(result));
            })
            .map_err(|e| fixture_err(path, format!("cannot start its reader: {e}")))?;
        Ok(Self {
            path: path.display().to_string(),
            chain: ChainIdentity { chain_id, genesis_hash },
            from,
            to,
            tracer: tracer_name(&tracer),
            shared,
            progress,
        })
    }

    /// Blocks in the recording, as its header says.
    pub const fn block_count(&self) -> u64 {
        self.to - self.from + 1
    }

    /// Waits until every record of `block` is read (or the file ended); the reader's error if
    /// it stopped on one first.
    async fn read_through(&self, block: u64) -> Result<(), String> {
        if let Ok(mut buffer) = self.shared.buffer.lock() {
            if block > buffer.wanted {
                buffer.wanted = block;
                self.shared.asked.notify_all();
            }
        }
        let mut progress = self.progress.clone();
        let reached = progress.wait_for(|p| p.complete > block || p.end.is_some()).await;
        match reached.as_deref() {
            Ok(ReadProgress { end: Some(Err(e)), .. }) => Err(e.clone()),
            Ok(_) => Ok(()),
            Err(_) => Err("the recording's reader stopped".to_owned()),
        }
    }

    fn err(&self, reason: String) -> SourceError {
        SourceError::Fixture { path: self.path.clone(), reason }
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if let Ok(mut buffer) = self.shared.buffer.lock() {
            buffer.closed = true;
        }
        self.shared.asked.notify_all();
    }
}

impl ChainView for Fixture {
    fn call_at(
        &self,
        to: Address,
        input: Bytes,
        block: u64,
    ) -> BoxFuture<'_, Result<CallOutcome, ChainError>> {
        Box::pin(async move {
            let not_found = |message: String| ChainError { method: "eth_call", block, message };
            self.read_through(block).await.map_err(not_found)?;
            let buffer = self.shared.buffer.lock().map_err(|_| not_found("poisoned".into()))?;
            buffer.calls.get(&(to, input, block)).cloned().ok_or_else(|| {
                not_found(format!("not in recording {} (captured with other classifiers?)", self.path))
            })
        })
    }

    fn code_at(&self, address: Address, block: u64) -> BoxFuture<'_, Result<Bytes, ChainError>> {
        Box::pin(async move {
            let not_found = |message: String| ChainError { method: "eth_getCode", block, message };
            self.read_through(block).await.map_err(not_found)?;
            let buffer = self.shared.buffer.lock().map_err(|_| not_found("poisoned".into()))?;
            buffer
                .codes
                .get(&(address, block))
                .cloned()
                .ok_or_else(|| not_found(format!("not in recording {}", self.path)))
        })
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
        Box::pin(async move {
            if number < self.from || number > self.to {
                return Err(SourceError::Missing { what: "recorded block", block: number });
            }
            self.read_through(number).await.map_err(|e| self.err(e))?;
            let buffer = self.shared.buffer.lock().map_err(|_| self.err("poisoned".into()))?;
            if let Some(block) = buffer.blocks.get(&number) {
                return Ok(block.clone());
            }
            if number >= from_hashes(&buffer, self.from) {
                return Err(SourceError::Missing { what: "recorded block", block: number });
            }
            let kept = self.shared.kept_behind.load(std::sync::atomic::Ordering::Relaxed);
            Err(self.err(format!(
                "block {number} was asked for after the reader had passed it (more than {kept} blocks behind block {}): use a --batch-blocks below {kept}, and start `sync --source` again",
                buffer.wanted
            )))
        })
    }
    /// Keeps `blocks` and 64 more (at most [`MAX_REPLAY_BATCH_BLOCKS`] in all) behind the newest
    /// block asked for instead of the most: a batch is asked for again while it is classified,
    /// and the fewer kept, the less memory the replay takes.
    fn batches_of(&self, blocks: u64) {
        let kept = blocks.saturating_add(64).clamp(1, KEPT_BEHIND);
        self.shared.kept_behind.store(kept, std::sync::atomic::Ordering::Relaxed);
    }
    fn block_hash(&self, number: u64) -> BoxFuture<'_, Result<Option<B256>, SourceError>> {
        Box::pin(async move {
            if number < self.from || number > self.to {
                return Ok(None);
            }
            self.read_through(number).await.map_err(|e| self.err(e))?;
            let buffer = self.shared.buffer.lock().map_err(|_| self.err("poisoned".into()))?;
            Ok(buffer.hashes.get((number - self.from) as usize).copied())
        })
    }
    fn tracer(&self) -> &'static str {
        self.tracer
    }
}

/// The first block number past the blocks the reader has read: a block at or past it is not
/// in the file (it ended early).
fn from_hashes(buffer: &Buffer, from: u64) -> u64 {
    from + buffer.hashes.len() as u64
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
    w: Compressor,
}

impl RecordingWriter {
    /// Starts a recording of blocks `from..=to` of `chain`, whose call frames came from
    /// `tracer`, compressed as `out`'s name says ([`Codec::for_path`]).
    pub fn create(
        out: &Path,
        chain: ChainIdentity,
        (from, to): (u64, u64),
        tracer: &str,
    ) -> Result<Self, CaptureError> {
        let tmp = out.with_extension("partial");
        let io = |source| CaptureError::Io { path: out.to_path_buf(), source };
        let file = File::create(&tmp).map_err(io)?;
        let mut writer =
            Self { out: out.to_path_buf(), tmp, w: Compressor::new(Codec::for_path(out), file).map_err(io)? };
        writer.write_header(&Record::Header {
            format: FIXTURE_FORMAT,
            chain_id: chain.chain_id,
            genesis_hash: chain.genesis_hash,
            from,
            to,
            tracer: tracer.to_owned(),
        })?;
        Ok(writer)
    }

    fn write_header(&mut self, header: &Record) -> Result<(), CaptureError> {
        let out = self.out.clone();
        let io = |source| CaptureError::Io { path: out.clone(), source };
        serde_json::to_writer(&mut self.w, header).map_err(|e| io(e.into()))?;
        self.w.write_all(b"\n").map_err(io)
    }

    fn write(&mut self, entry: &Entry) -> Result<(), CaptureError> {
        let out = self.out.clone();
        let io = |source| CaptureError::Io { path: out.clone(), source };
        let bytes = bincode::serialize(entry).map_err(|e| io(std::io::Error::other(e)))?;
        let len = u32::try_from(bytes.len()).ok().filter(|&n| n <= MAX_ENTRY_BYTES).ok_or_else(|| {
            io(std::io::Error::other(format!("an entry of {} bytes is past the limit", bytes.len())))
        })?;
        self.w.write_all(&len.to_le_bytes()).map_err(io)?;
        self.w.write_all(&bytes).map_err(io)
    }

    /// Adds a block.
    pub fn block(&mut self, block: &BlockData) -> Result<(), CaptureError> {
        self.write(&Entry::Block(Box::new(block.clone())))
    }

    /// Adds the answer of `eth_call` to `to` with `input` at `block`.
    pub fn call(
        &mut self,
        to: Address,
        input: Bytes,
        block: u64,
        outcome: CallOutcome,
    ) -> Result<(), CaptureError> {
        self.write(&Entry::Call { to, input, block, outcome })
    }

    /// Adds the code of `address` at `block`.
    pub fn code(&mut self, address: Address, block: u64, code: Bytes) -> Result<(), CaptureError> {
        self.write(&Entry::Code { address, block, code })
    }

    /// Completes the file and puts it in place; returns its size in bytes.
    pub fn finish(self) -> Result<u64, CaptureError> {
        let out = self.out.clone();
        let io = |source| CaptureError::Io { path: out.clone(), source };
        self.w.finish().map_err(io)?.sync_all().map_err(io)?;
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
    let mut writer = RecordingWriter::create(out, chain, (first.number, last.number), "none")?;
    for block in blocks {
        writer.block(block)?;
    }
    writer.finish()
}

#[cfg(test)]
mod tests {
    use alloy_primitives::keccak256;

    use super::*;

    fn block(n: u64) -> BlockData {
        BlockData {
            number: n,
            hash: keccak256(n.to_be_bytes()),
            parent_hash: keccak256(n.wrapping_sub(1).to_be_bytes()),
            timestamp: n,
            coinbase: Address::ZERO,
            gas_limit: 30_000_000,
            transactions: Vec::new(),
            receipts: Vec::new(),
            frames: None,
            withdrawals: Vec::new(),
            code_removed: Vec::new(),
        }
    }

    /// A recording of blocks `0..blocks` with one `eth_call` answer per block (its number).
    fn recording(dir: &Path, blocks: u64) -> PathBuf {
        let out = dir.join("chain.rec.zst");
        let chain = ChainIdentity { chain_id: 1, genesis_hash: keccak256(0u64.to_be_bytes()) };
        let mut w = RecordingWriter::create(&out, chain, (0, blocks - 1), "none").expect("create");
        for n in 0..blocks {
            w.block(&block(n)).expect("block");
            let answer = CallOutcome::Returned(Bytes::from(n.to_be_bytes().to_vec()));
            w.call(Address::repeat_byte(1), Bytes::from_static(b"probe"), n, answer).expect("call");
        }
        w.finish().expect("finish");
        out
    }

    fn held(fixture: &Fixture) -> (usize, usize) {
        let buffer = fixture.shared.buffer.lock().expect("lock");
        (buffer.blocks.len(), buffer.calls.len())
    }

    #[tokio::test]
    async fn a_long_recording_replays_in_order_holding_a_bounded_window() {
        let dir = tempfile::tempdir().expect("tempdir");
        // Three windows long, so that a window held whole would show.
        let window = usize::try_from(KEPT_BEHIND + READ_AHEAD + 2).expect("small");
        let length = 3 * window as u64;
        let fixture = Fixture::load(&recording(dir.path(), length)).expect("load");
        assert_eq!(fixture.block_count(), length);
        for n in 0..length {
            assert_eq!(fixture.block(n).await.expect("block").hash, keccak256(n.to_be_bytes()));
            let answer = fixture.call_at(Address::repeat_byte(1), Bytes::from_static(b"probe"), n).await;
            assert_eq!(answer.expect("probe"), CallOutcome::Returned(Bytes::from(n.to_be_bytes().to_vec())));
            let (blocks, calls) = held(&fixture);
            assert!(blocks <= window && calls <= window, "block {n}: {blocks} blocks, {calls} answers held");
        }
        // Hashes stay for reorg checks; a block long passed is a clear error.
        assert_eq!(fixture.block_hash(5).await.expect("hash"), Some(keccak256(5u64.to_be_bytes())));
        let passed = fixture.block(5).await.expect_err("passed");
        assert!(passed.to_string().contains("after the reader had passed it"), "{passed}");
        assert!(matches!(fixture.block(length).await, Err(SourceError::Missing { .. })));
    }

    #[tokio::test]
    async fn a_format_1_recording_of_json_lines_still_replays() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("old.jsonl.gz");
        let mut w =
            flate2::write::GzEncoder::new(File::create(&path).expect("create"), flate2::Compression::fast());
        let header = Record::Header {
            format: JSON_LINES_FORMAT,
            chain_id: 1,
            genesis_hash: keccak256(0u64.to_be_bytes()),
            from: 0,
            to: 2,
            tracer: "trace_block".into(),
        };
        let mut records = vec![header];
        for n in 0..3 {
            records.push(Record::Block { block: Box::new(block(n)) });
            let outcome = CallOutcome::Reverted;
            records.push(Record::Call {
                to: Address::repeat_byte(2),
                input: Bytes::from_static(b"x"),
                block: n,
                outcome,
            });
        }
        for record in &records {
            serde_json::to_writer(&mut w, record).expect("json");
            w.write_all(b"\n").expect("newline");
        }
        w.finish().expect("finish");
        let fixture = Fixture::load(&path).expect("load");
        assert_eq!(fixture.tracer(), "trace_block");
        for n in 0..3 {
            assert_eq!(fixture.block(n).await.expect("block").number, n);
            let answer = fixture.call_at(Address::repeat_byte(2), Bytes::from_static(b"x"), n).await;
            assert_eq!(answer.expect("probe"), CallOutcome::Reverted);
        }
    }

    #[tokio::test]
    async fn a_run_resumed_midway_skips_to_its_block() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fixture = Fixture::load(&recording(dir.path(), 2000)).expect("load");
        assert_eq!(fixture.block(1500).await.expect("block").number, 1500);
        assert_eq!(fixture.block(1501).await.expect("block").number, 1501);
    }

    #[tokio::test]
    async fn a_cut_short_file_gives_its_error_and_not_a_hang() {
        let dir = tempfile::tempdir().expect("tempdir");
        // Long enough that its first half holds whole compressed blocks, the header among them.
        let path = recording(dir.path(), 5_000);
        let bytes = std::fs::read(&path).expect("read");
        let cut = dir.path().join("cut.rec.zst");
        std::fs::write(&cut, &bytes[..bytes.len() / 2]).expect("write");
        let fixture = Fixture::load(&cut).expect("the header is whole");
        let err = fixture.block(4_999).await.expect_err("cut short");
        assert!(matches!(err, SourceError::Fixture { .. } | SourceError::Missing { .. }), "{err}");
    }
}
