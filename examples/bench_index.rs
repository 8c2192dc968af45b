//! Index write-path benchmark (issue "address indexes"): generates a chain of ERC20 Transfer
//! logs in memory (batch by batch, so memory stays bounded) and writes it with the indexer's
//! batch writer, then prints
//! * transfer logs/s and indexed ids/s of the batch writer,
//! * bytes of database per indexed id,
//! * peak RSS,
//! * next to the rate of a plain sorted MDBX insert of as many 8-byte-key entries, in the same run,
//! * the same chain written one block per transaction (closer to writing log by log),
//! * and the writer's rate with and without the appearance family, interleaved.
//!
//! `scripts/bench-index.sh` runs it in release mode.
//! Usage: bench_index [LOGS] [ADDRESSES] [LOGS_PER_BLOCK] [BLOCKS_PER_BATCH]

#[path = "common/mdbx_yardstick.rs"]
mod mdbx_yardstick;

use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use alloy_primitives::{keccak256, Address, Bytes, B256, U256};
use mdbx_yardstick::plain_sorted_insert;
use ots_classifiers::{BlockData, Fact, LogData, ReceiptData, Standard, TxData, TRANSFER_TOPIC};
use ots_indexer::{
    db::{compact::compact_into, tables::TableId, AccessMode, Db},
    index::{write_batch, BatchOptions, ClassifiedBlock},
};

fn arg(n: usize, default: u64) -> u64 {
    std::env::args().nth(n).and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// A field of /proc/self/status in MiB (Linux), NaN where there is none.
fn status_mib(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// Peak resident set size since the last `reset_peak_rss`: heap and every page of the
/// memory-mapped database the process had mapped at the time.
fn peak_rss_mib() -> f64 {
    status_mib("VmHWM:")
}

/// Starts a new peak for `peak_rss_mib` (Linux ≥ 4.0), so that it covers the indexing alone.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

struct Gen {
    state: u64,
    addresses: u64,
    /// Each sender's next nonce, so that the appearance family sees a real chain's nonces.
    nonces: std::collections::HashMap<Address, u64>,
}

impl Gen {
    fn next(&mut self) -> u64 {
        self.state =
            self.state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        self.state >> 11
    }

    /// A skewed pick: a few addresses are busy, most are not (as on a real chain).
    fn address(&mut self) -> Address {
        let r = self.next();
        let n = if r.is_multiple_of(4) { r % 64 } else { r % self.addresses };
        let mut bytes = [0u8; 20];
        bytes[12..].copy_from_slice(&(n + 1).to_be_bytes());
        Address::from(bytes)
    }
}

const TOKENS: u64 = 16;

fn token(i: u64) -> Address {
    let mut bytes = [0xeeu8; 20];
    bytes[12..].copy_from_slice(&i.to_be_bytes());
    Address::from(bytes)
}

fn word(a: Address) -> B256 {
    B256::left_padding_from(a.as_slice())
}

fn block(n: u64, logs_per_block: u64, gen: &mut Gen) -> ClassifiedBlock {
    let hash = keccak256(n.to_be_bytes());
    let parent_hash = if n == 0 { B256::ZERO } else { keccak256((n - 1).to_be_bytes()) };
    let mut facts = Vec::new();
    let mut receipts = Vec::new();
    let mut transactions = Vec::new();
    if n == 0 {
        facts.extend((0..TOKENS).map(|i| Fact::Matched { standard: Standard::Erc20, address: token(i) }));
    } else {
        // One log per transaction: every log is its own id for both parties.
        for i in 0..logs_per_block {
            let (from, to) = (gen.address(), gen.address());
            let nonce = gen.nonces.entry(from).or_default();
            let tx_nonce = *nonce;
            *nonce += 1;
            let contract = token(gen.next() % TOKENS);
            let log = LogData {
                address: contract,
                topics: vec![TRANSFER_TOPIC, word(from), word(to)],
                data: Bytes::from(U256::from(gen.next() % 1_000_000).to_be_bytes::<32>().to_vec()),
            };
            receipts.push(ReceiptData {
                success: true,
                contract_address: None,
                logs: vec![log],
                fee: U256::ZERO,
            });
            transactions.push(TxData {
                hash: keccak256([n, i].map(u64::to_be_bytes).concat()),
                from,
                to: Some(contract),
                nonce: tx_nonce,
                value: U256::ZERO,
                mint: None,
            });
        }
    }
    let block = BlockData {
        number: n,
        hash,
        parent_hash,
        timestamp: 1_700_000_000 + n,
        coinbase: Address::ZERO,
        gas_limit: 30_000_000,
        transactions,
        receipts,
        frames: None,
        withdrawals: vec![],
        code_removed: Vec::new(),
    };
    ClassifiedBlock { block, facts, probe_misses: vec![] }
}

/// What one run wrote.
struct Run {
    secs: f64,
    logs: u64,
    /// Pages of the ERC20 transfer index and its counter.
    index_bytes: u64,
    /// Pages of every table.
    all_bytes: u64,
    /// Peak resident set size while indexing (the kernel's high-water mark), MiB.
    rss_peak: f64,
    /// Peak anonymous resident memory (heap: the batch, the writer's maps, MDBX's dirty pages), MiB.
    anon_peak: f64,
    /// Peak file-backed resident memory (the mapped database pages touched), MiB.
    file_peak: f64,
    /// After `compact`: seconds it took, transfer index + counter bytes, every table's bytes.
    compacted: Option<(f64, u64, u64)>,
}

fn erc20_index_bytes(copies: impl Iterator<Item = (TableId, u64)>) -> u64 {
    copies
        .filter(|(t, _)| matches!(t, TableId::OtsERC20TransferIndex | TableId::OtsERC20TransferCounter))
        .map(|(_, bytes)| bytes)
        .sum()
}

/// Samples the resident memory by kind every 10 ms: the kernel keeps a peak only of the total.
struct RssSampler {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<(f64, f64)>,
}

impl RssSampler {
    fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let (mut anon, mut file) = (0f64, 0f64);
            while !flag.load(Ordering::Relaxed) {
                anon = anon.max(status_mib("RssAnon:"));
                file = file.max(status_mib("RssFile:"));
                std::thread::sleep(Duration::from_millis(10));
            }
            (anon, file)
        });
        Self { stop, thread }
    }

    fn stop(self) -> (f64, f64) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or((f64::NAN, f64::NAN))
    }
}

/// Indexes the generated chain.
fn index(
    logs: u64,
    addresses: u64,
    logs_per_block: u64,
    per_batch: u64,
    report: bool,
    appearances: bool,
) -> anyhow::Result<Run> {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), AccessMode::ReadWrite)?;
    let mut gen = Gen { state: 7, addresses, nonces: Default::default() };
    let blocks = logs.div_ceil(logs_per_block);
    // Only the writer is timed: generating the chain is not indexing it.
    let mut writing = Duration::ZERO;
    reset_peak_rss();
    let sampler = RssSampler::start();
    let mut n = 0;
    while n <= blocks {
        let batch: Vec<ClassifiedBlock> =
            (n..=(n + per_batch - 1).min(blocks)).map(|b| block(b, logs_per_block, &mut gen)).collect();
        n += batch.len() as u64;
        let started = Instant::now();
        write_batch(&db, &batch, BatchOptions { appearances, ..BatchOptions::window(128) })?;
        writing += started.elapsed();
    }
    let secs = writing.as_secs_f64();
    let rss_peak = peak_rss_mib();
    let stats = db.begin_read()?.table_stats()?;
    let index_bytes = erc20_index_bytes(stats.iter().map(|t| (t.table, t.bytes)));
    let all_bytes = stats.iter().map(|t| t.bytes).sum();
    let (anon_peak, file_peak) = sampler.stop();
    let mut compacted = None;
    if report {
        let scratch = tempfile::tempdir()?;
        let started = Instant::now();
        let copies = compact_into(&db, &scratch.path().join("copy"))?;
        let took = started.elapsed().as_secs_f64();
        println!("  {:<28} {:>12} {:>13} {:>13}", "table", "entries", "bytes", "compacted");
        for c in copies.iter().filter(|c| c.bytes_before > 0) {
            println!(
                "  {:<28} {:>12} {:>13} {:>13}",
                c.table.name(),
                c.entries,
                c.bytes_before,
                c.bytes_after
            );
        }
        let after_index = erc20_index_bytes(copies.iter().map(|c| (c.table, c.bytes_after)));
        compacted = Some((took, after_index, copies.iter().map(|c| c.bytes_after).sum()));
    }
    Ok(Run {
        secs,
        logs: blocks * logs_per_block,
        index_bytes,
        all_bytes,
        rss_peak,
        anon_peak,
        file_peak,
        compacted,
    })
}

fn main() -> anyhow::Result<()> {
    // As the binary does at start: the write path's figures are the binary's.
    ots_indexer::db::keep_freed_heap();
    let logs = arg(1, 5_000_000);
    let addresses = arg(2, 200_000);
    let logs_per_block = arg(3, 500);
    let per_batch = arg(4, 1000);

    let run = index(logs, addresses, logs_per_block, per_batch, true, true)?;
    let (secs, written) = (run.secs, run.logs);
    // Each log gives an id to its sender and its receiver.
    let ids = written * 2;
    println!(
        "batched writer: {written} transfer logs in {secs:.2} s = {:.0} logs/s ({:.0} ids/s); transfer index + counter {} bytes = {:.2} bytes per indexed id; all tables (holdings, balances, ranks, undo) {} bytes = {:.2} bytes per id; peak RSS {:.0} MiB (peak anonymous {:.0} MiB, peak mapped database {:.0} MiB)",
        written as f64 / secs,
        ids as f64 / secs,
        run.index_bytes,
        run.index_bytes as f64 / ids as f64,
        run.all_bytes,
        run.all_bytes as f64 / ids as f64,
        run.rss_peak,
        run.anon_peak,
        run.file_peak
    );
    if let Some((took, index, all)) = run.compacted {
        println!(
            "after `compact` ({took:.1} s): transfer index + counter {index} bytes = {:.2} bytes per indexed id; all tables {all} bytes = {:.2} bytes per id",
            index as f64 / ids as f64,
            all as f64 / ids as f64
        );
    }

    // The yardstick: a plain sorted insert of as many entries into MDBX, same machine, same run.
    let plain = plain_sorted_insert(ids)?;
    println!(
        "plain sorted MDBX insert: {ids} entries in {plain:.2} s = {:.0} entries/s; the writer indexes ids at {:.2}x that rate",
        ids as f64 / plain,
        (ids as f64 / secs) / (ids as f64 / plain)
    );

    // One block per write transaction on a tenth of the chain: the cost of not batching.
    let small = (logs / 10).max(logs_per_block);
    let one = index(small, addresses, logs_per_block, 1, false, true)?;
    let many = index(small, addresses, logs_per_block, per_batch, false, true)?;
    println!(
        "{} logs, one block per transaction: {:.0} logs/s; {per_batch} blocks per transaction: {:.0} logs/s ({:.2}x)",
        one.logs,
        one.logs as f64 / one.secs,
        many.logs as f64 / many.secs,
        (many.logs as f64 / many.secs) / (one.logs as f64 / one.secs)
    );

    // What the appearance family (sender and recipient of every transaction, senders marked) costs
    // the write path: runs with and without it, interleaved, on a fifth of the chain.
    let part = (logs / 5).max(logs_per_block);
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let on = index(part, addresses, logs_per_block, per_batch, false, true)?;
        with.push(on.logs as f64 / on.secs);
        let off = index(part, addresses, logs_per_block, per_batch, false, false)?;
        without.push(off.logs as f64 / off.secs);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (with, without) = (median(&mut with), median(&mut without));
    println!(
        "{part} logs, 5 interleaved rounds, medians: with the appearance family {with:.0} logs/s, without {without:.0} logs/s ({:.2}x)",
        with / without
    );
    Ok(())
}
