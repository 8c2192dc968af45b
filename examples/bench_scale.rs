//! Mainnet-scale benchmark (issue "mainnet scale"): on a generated mainnet-shaped recording, in
//! one run,
//! * end-to-end indexing from the recording (`ots-indexer sync --exit-at-head --source`, the real
//!   binary, default flags), with RSS sampled at 10 %, 50 % and 100 % of the chain, and of its
//!   first tenth alone into another fresh database: their ratio (`scaling_10x`, 10 for a linear
//!   catch-up) and the mainnet projection fitted to the two;
//! * the writer alone (the time the sync spent in its batch writes) beside two yardsticks: a
//!   plain sorted MDBX insert of as many ids, and a plain sorted insert of exactly the entries the
//!   database holds, table by table (the compacting copy, its writes timed apart from its reads);
//! * bytes per transfer log and per appearance for every table, as written and compacted;
//! * query latency over HTTP at 1 and 32 clients against `ots-indexer serve` on that database,
//!   for the methods that need no node, and the index's own part of list and search pages,
//!   Etherscan's `txlist` and `tokentx` among them (the server's `ots::rpc::timing` events: there
//!   is no node behind a recording, so the rest fails) — page 1, and the pages past row 10,000 of
//!   the busiest address, whose settled groups the server counts from the index (the first read
//!   is a whole first walk; `counted_groups` counts them from the recording only to know how deep
//!   the lists go);
//! * unwinding 64 blocks at the tip (the median of three: two fresh copies of the database and the
//!   database itself), then `check`;
//! * the stage regime mainnet's catch-up runs in (about a hundred stages at the defaults): the
//!   same chain (and its first tenth) caught up in bulk stages of 1 % of its blocks each
//!   (`--write-path bulk --stage-max-blocks`, or `OTS_BENCH_STAGE_BLOCKS` blocks), with the
//!   stage count, each stage's merge seconds (first, median, last), bytes per transfer log as
//!   written, its wall time over the one-stage run's, a mainnet projection fitted to the two
//!   staged runs (stages of the same size: 176 times as many for mainnet) and one for mainnet in
//!   as many stages as the whole run, each the same share of it. `OTS_BENCH_STAGE_REGIME=0`
//!   leaves it out, `OTS_BENCH_ONE_PERCENT=0` keeps only the defaults' stages (below);
//!   `OTS_BENCH_RESIDENT_SHARE=0.1` runs
//!   it again with the page cache held to that share of the database file ([`MemoryBound`]);
//! * the regime the defaults give mainnet now that a stage takes its bound from the free disk:
//!   the stage count mainnet's catch-up would run in on a host with `OTS_BENCH_MAINNET_SPARE_GIB`
//!   (default 1,024) GiB to spare ([`mainnet_stages`]), applied to this chain, with the same
//!   figures (`stage_regime_defaults`; with `OTS_BENCH_RESIDENT_SHARE`, again with the page
//!   cache held to that share of the file, under its `bounded`).
//!
//! Its last line is one JSON object with every figure. `scripts/bench-scale.sh` builds the
//! recording and runs it.
//!
//! Usage: bench_scale RECORDING WORKDIR OTS_INDEXER_BINARY [SYNC_FLAG ...] (flags passed to
//! `sync` as they are; none by default: the benchmark measures what a user gets)
//!
//! `bench_scale --queries DATADIR OTS_INDEXER_BINARY [RECORDING]` measures the queries alone, over
//! a database already built (its reorg window as the sync left it): a read path's change is
//! measured without indexing the chain again (with the recording it was built from, the deep
//! Etherscan pages too).

// The figures' one `json!` object is long.
#![recursion_limit = "256"]

#[path = "common/counted_groups.rs"]
mod counted_groups;
#[path = "common/http_load.rs"]
mod http_load;
#[path = "common/mdbx_yardstick.rs"]
mod mdbx_yardstick;

use std::{
    collections::{BTreeMap, HashMap},
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{
        atomic::{AtomicBool, Ordering},
        mpsc, Arc, Mutex,
    },
    time::{Duration, Instant},
};

use alloy_primitives::Address;
use anyhow::{bail, Context};
use http_load::{load, load_get, percentile, Figures};
use mdbx_yardstick::plain_sorted_insert;
use ots_indexer::db::{
    codec::Count,
    compact::compact_into,
    tables::{OtsERC20Holdings, OtsERC20TransferCounter, OtsTokenHolderCounts, TableId},
    AccessMode, Db,
};
use serde_json::{json, Map, Value};

/// Mainnet's transactions at 2026-11, millions (docs/benchmarks-history.md, "Projection for full
/// mainnet").
const MAINNET_MTX: f64 = 3_700.0;

/// Tables of the appearance family: what `bytes_per_appearance` counts.
const APPEARANCE_TABLES: [TableId; 3] =
    [TableId::OtsAppearances, TableId::OtsNonceAnchors, TableId::OtsContractCreators];

/// Tables of the address summary (totals, their undo records, code removals): what
/// `summary_bytes_per_appearance` counts.
const SUMMARY_TABLES: [TableId; 3] =
    [TableId::OtsAddressTotals, TableId::OtsRecentTotals, TableId::OtsCodeRemovals];

/// One field `name=value` of a text log line.
fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let at = line.find(&format!(" {name}="))? + name.len() + 2;
    line[at..].split_whitespace().next()
}

/// A string field's value, as the log prints it: `name="value"`.
fn quoted<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let at = line.find(&format!(" {name}=\""))? + name.len() + 3;
    line[at..].split('"').next()
}

/// `merge_parts`' names for what is not a family: the young levels folded (a part of the
/// address indexes' and appearances' seconds), the repacks, MDBX's commit, and the rest of the
/// merge.
const FOLDS: &str = "young levels folded";
const REPACKS: &str = "repacks";
const COMMIT: &str = "commit";
const REST: &str = "rest (bookkeeping)";

/// Per part of a stage's merge: its seconds over all stages and its mean over the first five
/// stages and the last five.
fn merge_parts(stages: &[BTreeMap<String, f64>]) -> Value {
    let names: std::collections::BTreeSet<&String> = stages.iter().flat_map(BTreeMap::keys).collect();
    let mean = |of: &[BTreeMap<String, f64>], name: &str| {
        of.iter().map(|s| s.get(name).copied().unwrap_or(0.0)).sum::<f64>() / of.len().max(1) as f64
    };
    let five = 5.min(stages.len());
    let parts: Map<String, Value> = names
        .into_iter()
        .map(|name| {
            let all: f64 = stages.iter().map(|s| s.get(name).copied().unwrap_or(0.0)).sum();
            let figures = json!({
                "seconds": round(all, 2),
                "first_five_mean": round(mean(&stages[..five], name), 3),
                "last_five_mean": round(mean(&stages[stages.len() - five..], name), 3),
            });
            (name.clone(), figures)
        })
        .filter(|(_, f)| f["seconds"].as_f64().is_some_and(|s| s > 0.0))
        .collect();
    Value::Object(parts)
}

fn num(line: &str, name: &str) -> anyhow::Result<f64> {
    field(line, name)
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("no {name}= in the log line {line:?}"))
}

/// Resident memory of a process, MiB: (VmRSS, RssAnon, RssFile, VmHWM).
fn rss_of(pid: u32) -> Option<[f64; 4]> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let get = |f: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(f))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(f64::NAN, |kb| kb / 1024.0)
    };
    Some([get("VmRSS:"), get("RssAnon:"), get("RssFile:"), get("VmHWM:")])
}

/// Holds a sync process's page cache — the database file's pages it reads and the run files it
/// writes — near a share of the database file's size, as on a host whose memory is that share of
/// its index: a memory cgroup (v1) whose limit follows the process's own heap plus that share of
/// the file, reset every 50 ms. The kernel then evicts by its own LRU, mapped pages included,
/// which `posix_fadvise(DONTNEED)` from outside cannot do (it skips pages a process maps, and
/// MDBX maps the whole file).
struct MemoryBound {
    dir: PathBuf,
    share: f64,
}

/// Heap the process may grow by between two resets of the limit without the cgroup killing it.
const BOUND_SLACK: u64 = 128 << 20;

impl MemoryBound {
    /// A new cgroup under this process's own memory cgroup, if cgroup v1's memory controller is
    /// there and writable.
    fn create(share: f64) -> anyhow::Result<Self> {
        let own = std::fs::read_to_string("/proc/self/cgroup")?;
        let path = own
            .lines()
            .find_map(|l| l.split_once(":memory:").map(|(_, p)| p.to_owned()))
            .context("no cgroup v1 memory controller")?;
        let dir = PathBuf::from(format!("/sys/fs/cgroup/memory{path}/ots-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(Self { dir, share })
    }

    fn adopt(&self, pid: u32) -> anyhow::Result<()> {
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string()).context("moving sync into the cgroup")
    }
}

/// Resets the limit of the cgroup at `dir` for `pid` writing `datadir` to its heap plus `share`
/// of the database file; returns the page cache the cgroup holds (MiB).
fn hold(dir: &Path, share: f64, pid: u32, datadir: &Path) -> Option<f64> {
    let anon = rss_of(pid)?[1];
    let file = std::fs::metadata(datadir.join("mdbx.dat")).map_or(0, |m| m.len());
    let limit = (anon * 1048576.0) as u64 + BOUND_SLACK + (file as f64 * share) as u64;
    // Refused (EBUSY) when the cache cannot shrink at once: the next reset tries again.
    let _ = std::fs::write(dir.join("memory.limit_in_bytes"), limit.to_string());
    let stat = std::fs::read_to_string(dir.join("memory.stat")).ok()?;
    let cache = stat.lines().find_map(|l| l.strip_prefix("cache "))?.trim().parse::<f64>().ok()?;
    Some(cache / 1048576.0)
}

impl Drop for MemoryBound {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// The child's stdout and stderr, line by line, on one channel.
fn lines_of(child: &mut Child) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    if let Some(out) = child.stdout.take() {
        let tx = tx.clone();
        std::thread::spawn(move || {
            BufReader::new(out).lines().map_while(Result::ok).for_each(|l| drop(tx.send(l)))
        });
    }
    if let Some(err) = child.stderr.take() {
        std::thread::spawn(move || {
            BufReader::new(err).lines().map_while(Result::ok).for_each(|l| drop(tx.send(l)))
        });
    }
    rx
}

/// What one bulk stage held.
#[derive(Debug, Clone, Copy, Default)]
struct StageRows {
    transfer_logs: f64,
    addresses: f64,
}

/// The stages' own rows at the start and the end of a run (means of the first five stages and
/// the last five), and how a stage's merge per address changes between them: a merge that costs
/// what its stage holds keeps that ratio near 1 however its stages' rows grow.
fn stage_rows(rows: &[StageRows], merges: &[f64]) -> Value {
    let five = 5.min(rows.len()).min(merges.len());
    if five == 0 {
        return Value::Null;
    }
    let mean = |of: &[f64]| of.iter().sum::<f64>() / of.len() as f64;
    let (logs, addresses): (Vec<f64>, Vec<f64>) = rows.iter().map(|r| (r.transfer_logs, r.addresses)).unzip();
    let (first, last) = (..five, rows.len() - five..);
    let (merge_first, merge_last) = (mean(&merges[first]), mean(&merges[merges.len() - five..]));
    let per = |merge: f64, of: f64| if of > 0.0 { merge / of } else { f64::NAN };
    let ratio = |of: &[f64]| {
        let r = per(merge_last, mean(&of[last.clone()])) / per(merge_first, mean(&of[first]));
        if r.is_finite() {
            json!(round(r, 2))
        } else {
            Value::Null
        }
    };
    json!({
        "transfer_logs_first_five_mean": round(mean(&logs[first]), 0),
        "transfer_logs_last_five_mean": round(mean(&logs[last.clone()]), 0),
        "addresses_first_five_mean": round(mean(&addresses[first]), 0),
        "addresses_last_five_mean": round(mean(&addresses[last.clone()]), 0),
        "merge_per_log_last_over_first": ratio(&logs),
        "merge_per_address_last_over_first": ratio(&addresses),
    })
}

struct SyncRun {
    summary: String,
    /// Seconds the bulk stages spent merging and committing, added up.
    merge_seconds: f64,
    /// Each bulk stage's merge and commit seconds, in order.
    merges: Vec<f64>,
    /// Each bulk stage's merge by part, in order: the seconds of each family's write, of the
    /// young levels folded (within their families' seconds), of the repacks, and `rest` (the
    /// commit, the window's bookkeeping, the snapshot).
    merge_parts: Vec<BTreeMap<String, f64>>,
    /// Each bulk stage's own rows, in order: its transfer logs and the distinct addresses of its
    /// appearance lists (0 when the run keeps no appearances).
    stage_rows: Vec<StageRows>,
    /// Seconds the catch-up's end spent packing what its stages left swollen (a step of its
    /// own, after the last stage committed: not in `merges`).
    pack_seconds: f64,
    seconds: f64,
    /// (share of the chain, [VmRSS, RssAnon, RssFile, VmHWM]) at 10 %, 50 %, 100 %.
    samples: Vec<(f64, [f64; 4])>,
    /// Highest [VmRSS, RssAnon, RssFile, VmHWM] polled (every 50 ms) over the run.
    peak: [f64; 4],
    /// Highest page cache (MiB) a memory bound let the run hold (NaN without one).
    cache_peak: f64,
}

/// The last block of a recording, from its header line.
fn last_block_of(recording: &Path) -> anyhow::Result<u64> {
    let mut header = String::new();
    ots_indexer::source::compression::open(recording)
        .map_err(|e| anyhow::anyhow!("{}: {e}", recording.display()))?
        .read_line(&mut header)?;
    let header: Value = serde_json::from_str(&header).context("the recording's header line")?;
    header["to"].as_u64().context("no `to` in the recording's header")
}

/// Indexes the recording with the real binary (up to `until`, else whole), sampling its memory
/// as it goes.
fn sync(
    bin: &Path,
    recording: &Path,
    datadir: &Path,
    until: Option<u64>,
    flags: &[String],
    bound: Option<&MemoryBound>,
) -> anyhow::Result<SyncRun> {
    let started = Instant::now();
    let stop = match until {
        Some(block) => vec!["--exit-at-block".to_owned(), block.to_string()],
        None => vec!["--exit-at-head".to_owned()],
    };
    let mut child = Command::new(bin)
        // The index's debug lines say where each stage's merge goes (`merge_parts`).
        .args(["sync", "--log", "ots::sync=debug,ots::index=debug,info"])
        .args(stop)
        .args(flags)
        .arg("--source")
        .arg(recording)
        .arg("--datadir")
        .arg(datadir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting ots-indexer sync")?;
    let pid = child.id();
    if let Some(bound) = bound {
        bound.adopt(pid)?;
    }
    // Polled: the kernel's high-water mark (VmHWM) counts pages of the file read through the
    // map as well as the heap; the heap's own peak (RssAnon) is only seen by polling.
    let peak = Arc::new(Mutex::new([0.0f64; 4]));
    let cache_peak = Arc::new(Mutex::new(f64::NAN));
    let done = Arc::new(AtomicBool::new(false));
    let poller = {
        let (peak, done, cache_peak) = (peak.clone(), done.clone(), cache_peak.clone());
        let bound = bound.map(|b| (b.dir.clone(), b.share));
        let datadir = datadir.to_path_buf();
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                if let (Some(r), Ok(mut p)) = (rss_of(pid), peak.lock()) {
                    for (p, r) in p.iter_mut().zip(r) {
                        *p = p.max(r);
                    }
                }
                if let Some(cache) = bound.as_ref().and_then(|(dir, share)| hold(dir, *share, pid, &datadir))
                {
                    if let Ok(mut c) = cache_peak.lock() {
                        *c = c.max(cache);
                    }
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let lines = lines_of(&mut child);
    let mut samples = Vec::new();
    let mut marks = vec![0.1, 0.5, 1.0];
    let mut summary = String::new();
    let mut merge_seconds = 0.0;
    let mut merges = Vec::new();
    let mut merge_parts = Vec::new();
    let mut stage_rows = Vec::new();
    let mut addresses = 0.0;
    let mut parts = BTreeMap::<String, f64>::new();
    let mut pack_seconds = 0.0;
    let mut last_lines = Vec::new();
    for line in lines {
        if line.contains("indexed batch") {
            let (to, target) = (num(&line, "to")?, num(&line, "target_block")?);
            let share = to / target.max(1.0);
            if marks.first().is_some_and(|m| share >= *m) {
                marks.remove(0);
                if let Some(r) = rss_of(pid) {
                    eprintln!(
                        "  at {:.0} % (block {to}): RSS {:.0} MiB (anonymous {:.0}, mapped file {:.0}), peak {:.0} MiB",
                        share * 100.0,
                        r[0],
                        r[1],
                        r[2],
                        r[3]
                    );
                    samples.push((share, r));
                }
            }
        } else if line.contains("family written") {
            let family = quoted(&line, "family").unwrap_or("?").to_owned();
            *parts.entry(family).or_default() += num(&line, "seconds")?;
        } else if line.contains("list written") && quoted(&line, "how") == Some("folded") {
            *parts.entry(FOLDS.to_owned()).or_default() += num(&line, "seconds")?;
        } else if line.contains("list written") && quoted(&line, "list") == Some("appearances") {
            addresses += num(&line, "addresses")?;
        } else if line.contains("table repacked") {
            *parts.entry(REPACKS.to_owned()).or_default() += num(&line, "seconds")?;
        } else if line.contains("commit_seconds=") {
            parts.insert(COMMIT.to_owned(), num(&line, "commit_seconds")?);
        } else if line.contains("bulk stage committed") {
            let merge = num(&line, "merge_seconds")?;
            merges.push(merge);
            merge_seconds += merge;
            let written: f64 = parts.iter().filter(|(k, _)| k.as_str() != FOLDS).map(|(_, s)| s).sum();
            parts.insert(REST.to_owned(), (merge - written).max(0.0));
            merge_parts.push(std::mem::take(&mut parts));
            let transfer_logs = num(&line, "transfer_logs")?;
            stage_rows.push(StageRows { transfer_logs, addresses: std::mem::take(&mut addresses) });
        } else if line.contains("catch-up packed") {
            pack_seconds += num(&line, "seconds")?;
        } else if line.contains("run summary") {
            summary = line;
        } else if line.contains("ERROR") || line.contains("Error") {
            last_lines.push(line);
        }
    }
    let status = child.wait()?;
    done.store(true, Ordering::Relaxed);
    let _ = poller.join();
    if !status.success() || summary.is_empty() {
        bail!("ots-indexer sync failed ({status}): {}", last_lines.join("\n"));
    }
    let peak = peak.lock().map_or([f64::NAN; 4], |p| *p);
    let cache_peak = cache_peak.lock().map_or(f64::NAN, |c| *c);
    Ok(SyncRun {
        summary,
        merge_seconds,
        merges,
        merge_parts,
        stage_rows,
        pack_seconds,
        seconds: started.elapsed().as_secs_f64(),
        samples,
        peak,
        cache_peak,
    })
}

/// The address that sent the most transactions and appears in no other (an account's own
/// history: what `txlist` skips from the index alone), with that count; else the one that sent
/// the most.
fn busiest_sender(db: &Db) -> anyhow::Result<(Address, u64, u64)> {
    let txn = db.begin_read()?;
    let mut c = txn.walking_cursor::<ots_indexer::db::tables::OtsAppearances>()?;
    let mut next = c.first()?;
    // (only its own, sent, all) of the best so far and of the address being read.
    let mut best = (false, 0u64, 0u64, Address::ZERO);
    let mut current: Option<(Address, u64, u64)> = None;
    let settle = |who: Option<(Address, u64, u64)>, best: &mut (bool, u64, u64, Address)| {
        if let Some((a, sent, all)) = who {
            let candidate = (sent == all, sent, all, a);
            if (candidate.0, candidate.1) > (best.0, best.1) {
                *best = candidate;
            }
        }
    };
    while let Some((key, packed)) = next {
        let counts = packed.counts()?;
        if current.is_some_and(|(a, ..)| a != key.address) {
            settle(current, &mut best);
        }
        current = Some((key.address, counts.sent_base + counts.sent, counts.base + counts.n));
        next = c.next_entry()?;
    }
    settle(current, &mut best);
    Ok((best.3, best.1, best.2))
}

/// Addresses to query: the busiest ERC20 transfer address, the token with most holders, the
/// holder with most ERC20 holdings.
fn busiest(db: &Db) -> anyhow::Result<(Address, Address, Address)> {
    let txn = db.begin_read()?;
    let most_dups = |counts: &mut HashMap<Address, u64>| {
        counts.iter().max_by_key(|(a, n)| (**n, **a)).map(|(a, _)| *a).unwrap_or_default()
    };
    let mut counts = HashMap::new();
    let mut c = txn.walking_cursor::<OtsERC20TransferCounter>()?;
    let mut next = c.first()?;
    while let Some((a, _)) = next {
        *counts.entry(a).or_insert(0u64) += c.dup_count()? as u64;
        next = c.next_key()?;
    }
    let busy = most_dups(&mut counts);
    let mut tokens = HashMap::new();
    let mut c = txn.walking_cursor::<OtsTokenHolderCounts>()?;
    let mut next = c.first()?;
    while let Some((a, Count(n))) = next {
        tokens.insert(a, n);
        next = c.next_entry()?;
    }
    let token = most_dups(&mut tokens);
    let mut holders = HashMap::new();
    let mut c = txn.walking_cursor::<OtsERC20Holdings>()?;
    let mut next = c.first()?;
    while let Some((a, _)) = next {
        // The zero address "holds" every token minted or burnt: not a holder a user asks about.
        if a != Address::ZERO {
            holders.insert(a, c.dup_count()? as u64);
        }
        next = c.next_key()?;
    }
    Ok((busy, token, most_dups(&mut holders)))
}

fn request(method: &str, params: &Value) -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string()
}

fn wait_for_port(addr: &str) -> anyhow::Result<()> {
    for _ in 0..200 {
        if std::net::TcpStream::connect(addr).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    bail!("the server did not open {addr}")
}

/// Query figures: per (method, clients) req/s, p50 and p99; and the index's part of list and
/// search pages from the server's timing events.
fn queries(
    bin: &Path,
    datadir: &Path,
    db: &Db,
    seconds: f64,
    recording: Option<&Path>,
) -> anyhow::Result<(Vec<Value>, Value)> {
    let (busy, token, holder) = busiest(db)?;
    eprintln!(
        "  busiest transfer address {busy}, token with most holders {token}, holder of most tokens {holder}"
    );
    // The busiest address's lists counted from the recording, independently of the index: which
    // deep pages exist.
    let counted = match recording {
        Some(recording) => {
            let started = Instant::now();
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            let counted = runtime.block_on(counted_groups::count_groups(db, recording, busy))?;
            eprintln!(
                "  groups counted from the recording in {:.1} s: txlist {:?}, tokentx {:?}",
                started.elapsed().as_secs_f64(),
                counted.0,
                counted.1
            );
            Some(counted)
        }
        None => None,
    };
    let addr = "127.0.0.1:18961";
    let mut server = Command::new(bin)
        // No node: a recording has none, and these methods need none.
        .args([
            "serve",
            "--rpc-url",
            "http://127.0.0.1:9",
            "--http-addr",
            addr,
            "--log",
            "ots::rpc::timing=debug,warn",
        ])
        .arg("--datadir")
        .arg(datadir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting ots-indexer serve")?;
    let timing_lines = lines_of(&mut server);
    let result = (|| -> anyhow::Result<(Vec<Value>, Value)> {
        wait_for_port(addr)?;
        let cases = [
            ("ots2_getERC20TransferCount", json!([busy])),
            ("ots2_getTokenHolderCount", json!([token])),
            ("ots2_getTokenHolders", json!([token, 0, 25])),
            ("ots2_getERC20Holdings", json!([holder])),
            ("ots2_getERC20HoldingsPage", json!([holder, 0, 25])),
            ("ots2_getAddressAttributes", json!([token])),
            ("ots2_getAllContractsCount", json!([])),
            ("ots2_getERC20Count", json!([])),
        ];
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
        let mut rows = Vec::new();
        for (method, params) in &cases {
            for clients in [1usize, 32] {
                let f = runtime.block_on(load(addr, &request(method, params), clients, seconds))?;
                rows.push(load_row(json!({"method": method, "clients": clients}), &f));
            }
        }
        // Etherscan's holder list of the token with most holders: page 1, and the page that starts
        // at row 10,000 (Etherscan's cap on page × offset) or, for fewer holders, the last.
        let holders = {
            let txn = db.begin_read()?;
            ots_indexer::index::families::balances::holder_count(&txn, &token)?
        };
        let deep = if holders > 10_025 { 10_000 / 25 + 1 } else { holders.div_ceil(25).max(1) };
        for page in [1, deep] {
            let path = format!(
                "/api?module=token&action=tokenholderlist&contractaddress={token}&page={page}&offset=25"
            );
            for clients in [1usize, 32] {
                let f = runtime.block_on(load_get(addr, &path, clients, seconds))?;
                let what = json!({
                    "method": "etherscan tokenholderlist", "page": page, "offset": 25, "holders": holders,
                    "clients": clients,
                });
                rows.push(load_row(what, &f));
            }
        }
        // Etherscan's block by time: a binary search of the block times, a time mid-chain.
        let (blocks, middle_time) = {
            let txn = db.begin_read()?;
            let blocks = txn.entries::<ots_indexer::db::tables::OtsBlockTimes>()?;
            let middle = ots_indexer::db::codec::BlockNumber(blocks / 2);
            let time = txn.get::<ots_indexer::db::tables::OtsBlockTimes>(&middle)?.map_or(0, |t| t.0);
            (blocks, time)
        };
        let path =
            format!("/api?module=block&action=getblocknobytime&timestamp={middle_time}&closest=before");
        for clients in [1usize, 32] {
            let f = runtime.block_on(load_get(addr, &path, clients, seconds))?;
            let what = json!({"method": "etherscan getblocknobytime", "blocks": blocks, "clients": clients});
            rows.push(load_row(what, &f));
        }
        // List and search pages: the node's part fails (there is none); the index's part is timed.
        let pages = [
            ("ots2_getERC20TransferList", json!([busy, 0, 25])),
            ("ots_searchTransactionsBefore", json!([busy, 0, 25])),
            ("ots_searchTransactionsAfter", json!([busy, 0, 25])),
        ];
        let mut index_part = Map::new();
        for (method, params) in &pages {
            let body = request(method, params);
            let _ = runtime.block_on(load(addr, &body, 1, seconds.min(1.0)))?;
        }
        // The events trail the answers a little.
        std::thread::sleep(Duration::from_millis(300));
        let mut by_method: HashMap<String, Vec<u32>> = HashMap::new();
        while let Ok(line) = timing_lines.try_recv() {
            if let (Some(m), Ok(us)) = (field(&line, "method"), num(&line, "index_us")) {
                by_method.entry(m.trim_matches('"').to_owned()).or_default().push(us as u32);
            }
        }
        for (method, _) in &pages {
            let mut us = by_method.remove(*method).unwrap_or_default();
            us.sort_unstable();
            let v = json!({"pages": us.len(), "index_p50_ms": percentile(&us, 0.5), "index_p99_ms": percentile(&us, 0.99)});
            eprintln!("  {method} (25 per page), index part: {v}");
            index_part.insert((*method).to_owned(), v);
        }
        // Etherscan's walked lists: the index's part of a page (ranks, the groups skipped, the
        // page's ids) until the first call to the node, which fails here. The server counts an
        // account's `txlist` groups from the appearances' sent and received marks, and an
        // address's `tokentx` groups from its transfer index and the transfer rows index, by
        // itself: the first read of a deep page (`first_ms`) is its first walk. The recording's
        // counts (above) only say how deep the lists go.
        let (sender, sent, appearances) = busiest_sender(db)?;
        eprintln!("  busiest sender {sender}: sent {sent} of its {appearances} transactions");
        let mut lists = vec![("txlist", busy, 1), ("tokentx", busy, 1)];
        // The token with most holders: its own `tokentx` (`contractaddress` alone), counted from
        // the token transfers index (a row a transaction at least: its pages as deep as those).
        let moves = {
            use ots_indexer::index::families::address_index::{count, IdList};
            count(&db.begin_read()?, IdList::TokenTransfers, &token)?
        };
        eprintln!("  the hot token {token} moved in {moves} transactions");
        let mut token_pages = vec![1];
        token_pages.extend([10_000, 1_000, 10_000 / 25 + 1].into_iter().filter(|p| p * 25 <= moves));
        // The busiest address's list of the token it moved most (`address` and
        // `contractaddress`), counted from the party-token index: a row a transaction at least.
        let (pair_token, pair_moves) = {
            use ots_indexer::index::families::address_index::{
                count, transfer_rows::party_token_key, IdList,
            };
            use ots_indexer::index::families::holdings;
            let t = db.begin_read()?;
            let mut best = (token, 0);
            for held in holdings::of(&t, ots_indexer::decode::TokenKind::Erc20, &busy)? {
                let n = count(&t, IdList::PartyToken, &party_token_key(&busy, &held.token))?;
                if n > best.1 {
                    best = (held.token, n);
                }
            }
            best
        };
        eprintln!("  the busiest transfer address moved {pair_token} in {pair_moves} transactions");
        let mut pair_pages = vec![1];
        pair_pages.extend([10_000, 1_000, 10_000 / 25 + 1].into_iter().filter(|p| p * 25 <= pair_moves));
        // The page that starts at row 10,000 (Etherscan's cap), page 1,000 and page 10,000, as
        // far as the counted groups reach: a page's index part should not grow with its depth.
        if let Some((txlist, tokentx)) = counted {
            for (action, c) in [("txlist", txlist), ("tokentx", tokentx)] {
                if c.rows < 10_025 {
                    eprintln!("  {action} of the busiest transfer address: {} rows counted, no page past row 10,000", c.rows);
                }
                // Deepest first: the first read of the deepest page is a whole first walk.
                for page in [10_000, 1_000, 10_000 / 25 + 1].into_iter().filter(|p| p * 25 <= c.rows) {
                    lists.push((action, busy, page));
                }
            }
        }
        if sent == appearances && sent >= 10_025 {
            lists.extend([("txlist", sender, 1), ("txlist", sender, 401)]);
        } else {
            eprintln!("  no account sent 10,025 transactions and took part in no other: a deep page's skip is not measured here");
        }
        let mut lists: Vec<(&str, Address, u64, &str)> =
            lists.into_iter().map(|(action, address, page)| (action, address, page, "address")).collect();
        lists.extend(token_pages.into_iter().map(|page| ("tokentx", token, page, "contractaddress")));
        let pair = format!("{busy}&contractaddress={pair_token}");
        let pair_param = "address";
        for (action, address, page, param) in lists
            .into_iter()
            .map(|(action, address, page, param)| (action, address.to_string(), page, param))
            .chain(pair_pages.into_iter().map(|page| ("tokentx", pair.clone(), page, pair_param)))
        {
            let who = match (param, address.as_str()) {
                ("contractaddress", _) => "hot token",
                (_, a) if a.contains('&') => "busiest transfer address's most moved token",
                (_, a) if a == sender.to_string() => "busiest sender",
                _ => "busiest transfer address",
            };
            let path = format!("/api?module=account&action={action}&{param}={address}&page={page}&offset=25");
            for clients in [1usize, 32] {
                let _ = runtime.block_on(load_get(addr, &path, clients, seconds.min(1.0)))?;
                std::thread::sleep(Duration::from_millis(300));
                let mut us = Vec::new();
                while let Ok(line) = timing_lines.try_recv() {
                    if let (Some(_), Ok(v)) = (field(&line, "method"), num(&line, "index_us")) {
                        us.push(v as u32);
                    }
                }
                let first_ms = us.first().map_or(0.0, |&f| f64::from(f) / 1000.0);
                us.sort_unstable();
                let mut v = json!({"pages": us.len(), "index_p50_ms": percentile(&us, 0.5), "index_p99_ms": percentile(&us, 0.99)});
                if page > 1 && clients == 1 {
                    v["first_ms"] = json!(first_ms);
                }
                eprintln!("  etherscan {action} of the {who}, page {page} (25 rows), {clients} clients, index part: {v}");
                index_part.insert(format!("etherscan {action} {who} page {page} at {clients}"), v);
            }
        }
        Ok((rows, Value::Object(index_part)))
    })();
    let _ = server.kill();
    let _ = server.wait();
    result
}

/// Seconds of three `unwind --to TO` commands, sorted: two on fresh copies of the database in
/// `scratch`, the last on the database itself (the `check` that follows reads it). One run alone
/// moves by a third with what ran just before it (the server's load, the copies' writeback).
fn unwind_three_times(bin: &Path, datadir: &Path, scratch: &Path, to: u64) -> anyhow::Result<[f64; 3]> {
    let args = ["unwind", "--log", "warn", "--to", &to.to_string()];
    let mut seconds = [0.0; 3];
    for s in seconds.iter_mut().take(2) {
        copy_database(datadir, scratch)?;
        *s = run(bin, &args, scratch)?.0;
        std::fs::remove_dir_all(scratch)?;
    }
    seconds[2] = run(bin, &args, datadir)?.0;
    seconds.sort_by(f64::total_cmp);
    Ok(seconds)
}

/// Copies the files of a database directory into a fresh `to`, on disk.
fn copy_database(from: &Path, to: &Path) -> anyhow::Result<()> {
    let _ = std::fs::remove_dir_all(to);
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            let copy = to.join(entry.file_name());
            std::fs::copy(entry.path(), &copy)
                .with_context(|| format!("copying {}", entry.path().display()))?;
            // Else the unwind's own flush would write the whole copy.
            std::fs::File::open(&copy)?.sync_all()?;
        }
    }
    Ok(())
}

fn run(bin: &Path, args: &[&str], datadir: &Path) -> anyhow::Result<(f64, String)> {
    let started = Instant::now();
    let out = Command::new(bin).args(args).arg("--datadir").arg(datadir).output()?;
    let secs = started.elapsed().as_secs_f64();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        bail!("ots-indexer {} failed: {text}", args.join(" "));
    }
    Ok((secs, text))
}

/// T(n) = a·n + b·n² through two runs of n1 and n2 million transactions (b at least 0): (a, b,
/// mainnet's hours).
fn fit(n1: f64, t1: f64, n2: f64, t2: f64) -> (f64, f64, f64) {
    let b = ((t2 / n2 - t1 / n1) / (n2 - n1)).max(0.0);
    let a = t2 / n2 - b * n2;
    (a, b, (a * MAINNET_MTX + b * MAINNET_MTX * MAINNET_MTX) / 3600.0)
}

/// What one run of a chain and of its first tenth needs to know.
struct Chain<'a> {
    bin: &'a Path,
    recording: &'a Path,
    flags: &'a [String],
    tenth_block: u64,
}

/// How many stages mainnet's catch-up takes at the defaults on a host with `spare_gib` GiB of
/// disk to spare, from this chain's stage bytes (run files at their peak and the journal, which
/// holds about what the recording does) scaled to mainnet's transactions: each stage takes two
/// thirds of the spare disk beyond the share kept free (the larger of 4 GiB and 2 %), as
/// `sync --stage-max-run-mib` left unset does. The tables' growth, which takes from the spare
/// disk as stages commit, is left out: the count is a floor.
fn mainnet_stages(spare_gib: f64, chain_stage_bytes: f64, chain_transactions: f64) -> u64 {
    let gib = f64::from(1u32 << 30);
    let spare = spare_gib * gib;
    let keep = (4.0 * gib).max(0.02 * spare);
    let budget = (2.0 / 3.0 * (spare - keep)).max(256.0 * f64::from(1u32 << 20));
    let mainnet = chain_stage_bytes * MAINNET_MTX * 1e6 / chain_transactions.max(1.0);
    (mainnet / budget).ceil().max(1.0) as u64
}

/// The stage regime: the chain and its first tenth caught up in bulk stages of `stage_blocks`
/// blocks each, into `dir`; compared with the one-stage run of `one_stage_seconds`.
fn stage_regime(
    chain: &Chain<'_>,
    dir: &Path,
    stage_blocks: u64,
    one_stage_seconds: f64,
    bound: Option<&MemoryBound>,
) -> anyhow::Result<Value> {
    let mut flags = chain.flags.to_vec();
    flags
        .extend(["--write-path", "bulk", "--stage-max-blocks", &stage_blocks.to_string()].map(str::to_owned));
    eprintln!(
        "stage regime: ots-indexer sync {} --source {} (first tenth, then whole)",
        flags.join(" "),
        chain.recording.display()
    );
    let tenth = sync(chain.bin, chain.recording, dir, Some(chain.tenth_block), &flags, bound)?;
    std::fs::remove_dir_all(dir)?;
    let whole = sync(chain.bin, chain.recording, dir, None, &flags, bound)?;
    let written: u64 =
        Db::open(dir, AccessMode::ReadOnly)?.begin_read()?.table_stats()?.iter().map(|t| t.bytes).sum();
    let file = std::fs::metadata(dir.join("mdbx.dat")).map_or(0, |m| m.len());
    std::fs::remove_dir_all(dir)?;
    let (n1, n2) = (num(&tenth.summary, "transactions")? / 1e6, num(&whole.summary, "transactions")? / 1e6);
    let logs = num(&whole.summary, "transfer_logs")?;
    let (a, b, hours) = fit(n1, tenth.seconds, n2, whole.seconds);
    // The fit keeps the stage size and so multiplies the stages by 176 for mainnet; at a fixed
    // share of the chain a stage (what a disk bound gives), mainnet runs as many stages as this
    // run, each touching the same share of tables 176 times larger: every stage's cost, and the
    // whole, grows with the chain (in memory; out of it, more).
    let share_hours = whole.seconds * MAINNET_MTX / n2 / 3600.0;
    let mut sorted = whole.merges.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN);
    let (first, last) =
        (whole.merges.first().copied().unwrap_or(f64::NAN), whole.merges.last().copied().unwrap_or(f64::NAN));
    eprintln!(
        "  {} stages in {:.1} s ({:.2}x the one-stage run; first tenth {:.1} s in {} stages: {:.2}x); merges first {first:.2} s, median {median:.2} s, last {last:.2} s ({:.2}x the first), packed at the end in {:.1} s; {:.2} bytes per transfer log as written; T(n) = {a:.3}·n + {b:.5}·n² s: mainnet in {hours:.1} h ({share_hours:.1} h in as many stages as here)",
        whole.merges.len(),
        whole.seconds,
        whole.seconds / one_stage_seconds,
        tenth.seconds,
        tenth.merges.len(),
        whole.seconds / tenth.seconds,
        last / first,
        whole.pack_seconds,
        written as f64 / logs,
    );
    let parts = merge_parts(&whole.merge_parts);
    let rows = stage_rows(&whole.stage_rows, &whole.merges);
    eprintln!("  the stages' own rows and the merge per row, last five over first five: {rows}");
    eprintln!(
        "  the merges by part (seconds in all, mean of the first five stages, of the last five): {parts}"
    );
    Ok(json!({
        "stage_max_blocks": stage_blocks,
        "stages": whole.merges.len(),
        "seconds": round(whole.seconds, 2),
        "vs_one_stage": round(whole.seconds / one_stage_seconds, 3),
        "first_tenth_stages": tenth.merges.len(),
        "first_tenth_seconds": round(tenth.seconds, 2),
        "stages_scaling_10x": round(whole.seconds / tenth.seconds, 2),
        "merge_seconds_first": round(first, 3),
        "merge_seconds_median": round(median, 3),
        "merge_seconds_last": round(last, 3),
        "merge_last_over_first": round(last / first, 2),
        "stage_rows": rows,
        "merge_seconds_total": round(whole.merge_seconds, 2),
        "merge_parts": parts,
        "pack_seconds": round(whole.pack_seconds, 2),
        "bytes_total": written,
        "bytes_per_transfer_log": round(written as f64 / logs, 2),
        "fit_a_seconds_per_mtx": round(a, 4),
        "fit_b_seconds_per_mtx2": round(b, 6),
        "mainnet_projection_hours_staged": round(hours, 1),
        "mainnet_projection_hours_same_stages": round(share_hours, 1),
        "peak_heap_mib": round(whole.peak[1], 0),
        "resident_share": bound.map(|b| b.share),
        "page_cache_peak_mib": round(whole.cache_peak, 0),
        "file_mib": round(file as f64 / 1048576.0, 0),
    }))
}

fn round(v: f64, places: i32) -> f64 {
    let f = 10f64.powi(places);
    (v * f).round() / f
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if let (Some("--queries"), Some(datadir), Some(bin)) =
        (args.get(1).map(String::as_str), args.get(2), args.get(3))
    {
        let datadir = PathBuf::from(datadir);
        let db = Db::open(&datadir, AccessMode::ReadOnly)?;
        let recording = args.get(4).map(PathBuf::from);
        let (rows, index_part) = queries(Path::new(bin), &datadir, &db, 2.0, recording.as_deref())?;
        println!("{}", json!({"queries": rows, "index_part_of_pages": index_part}));
        return Ok(());
    }
    let (Some(recording), Some(work), Some(bin)) = (args.get(1), args.get(2), args.get(3)) else {
        eprintln!("usage: bench_scale RECORDING WORKDIR OTS_INDEXER_BINARY [BATCH_BLOCKS] [BATCH_MAX_LOGS]");
        std::process::exit(2);
    };
    let flags: Vec<String> = args[4..].to_vec();
    let (recording, work, bin) = (PathBuf::from(recording), PathBuf::from(work), PathBuf::from(bin));
    let datadir = work.join("db");
    let tenth_dir = work.join("db-tenth");
    let compacted_dir = work.join("db-compacted");
    let staged_dir = work.join("db-staged");
    for d in [&datadir, &tenth_dir, &compacted_dir, &staged_dir] {
        if d.exists() {
            std::fs::remove_dir_all(d)?;
        }
    }

    let tenth_block = last_block_of(&recording)? / 10;
    eprintln!(
        "first tenth: ots-indexer sync --exit-at-block {tenth_block} {} --source {}",
        flags.join(" "),
        recording.display()
    );
    let tenth = sync(&bin, &recording, &tenth_dir, Some(tenth_block), &flags, None)?;
    std::fs::remove_dir_all(&tenth_dir)?;
    let tenth_transactions = num(&tenth.summary, "transactions")?;
    eprintln!("  {tenth_transactions} transactions in {:.1} s", tenth.seconds);

    eprintln!(
        "end to end: ots-indexer sync --exit-at-head {} --source {}",
        flags.join(" "),
        recording.display()
    );
    let s = sync(&bin, &recording, &datadir, None, &flags, None)?;
    let blocks = num(&s.summary, "blocks")?;
    let transactions = num(&s.summary, "transactions")?;
    let logs = num(&s.summary, "transfer_logs")?;
    let ids = num(&s.summary, "transfer_ids")?;
    let appearances = num(&s.summary, "appearances")?;
    let write_seconds = num(&s.summary, "write_seconds")?;
    let last_block = num(&s.summary, "indexed_block")? as u64;
    let run_files_peak = num(&s.summary, "run_bytes_peak")?;
    let scaling = s.seconds / tenth.seconds;
    // Through both runs, n in millions of transactions.
    let (a, b, projection_hours) =
        fit(tenth_transactions / 1e6, tenth.seconds, transactions / 1e6, s.seconds);
    eprintln!(
        "  whole over first tenth: {scaling:.2}x; T(n) = {a:.3}·n + {b:.5}·n² s (n in M transactions): mainnet ({MAINNET_MTX} M) in {projection_hours:.1} h"
    );
    eprintln!(
        "  {blocks} blocks, {transactions} transactions, {logs} transfer logs, {appearances} appearances in {:.1} s: {:.0} blocks/s, {:.0} tx/s, {:.0} logs/s; peak RSS {:.0} MiB (polled peaks: heap {:.0} MiB, database pages read through the map {:.0} MiB)",
        s.seconds,
        blocks / s.seconds,
        transactions / s.seconds,
        logs / s.seconds,
        s.peak[3],
        s.peak[1],
        s.peak[2]
    );

    let db = Db::open(&datadir, AccessMode::ReadOnly)?;
    let written = db.begin_read()?.table_stats()?;
    let written_total: u64 = written.iter().map(|t| t.bytes).sum();

    eprintln!("writer alone: {write_seconds:.1} s in batch writes; yardsticks:");
    let plain_ids = (ids + appearances) as u64;
    let plain = plain_sorted_insert(plain_ids)?;
    eprintln!("  plain sorted insert of {plain_ids} ids: {plain:.1} s");
    let copies = compact_into(&db, &compacted_dir)?;
    let same_entries: f64 = copies.iter().map(|c| c.insert_seconds).sum();
    let entries: u64 = copies.iter().map(|c| c.entries).sum();
    eprintln!("  plain sorted insert of the {entries} entries the database holds, table by table: {same_entries:.1} s");
    let compacted_total: u64 = copies.iter().map(|c| c.bytes_after).sum();
    std::fs::remove_dir_all(&compacted_dir)?;

    let mut tables = Map::new();
    eprintln!(
        "  {:<26} {:>11} {:>12} {:>9} {:>9} {:>9}",
        "table", "entries", "bytes", "B/log", "B/appear.", "compacted"
    );
    for c in copies.iter().filter(|c| c.bytes_before > 0) {
        let per_log = c.bytes_before as f64 / logs.max(1.0);
        let per_app = c.bytes_before as f64 / appearances.max(1.0);
        let per_log_c = c.bytes_after as f64 / logs.max(1.0);
        eprintln!(
            "  {:<26} {:>11} {:>12} {:>9.2} {:>9.2} {:>9.2}",
            c.table.name(),
            c.entries,
            c.bytes_before,
            per_log,
            per_app,
            per_log_c
        );
        tables.insert(
            c.table.name().to_owned(),
            json!({"entries": c.entries, "bytes": c.bytes_before, "bytes_compacted": c.bytes_after,
                   "bytes_per_transfer_log": round(per_log, 3), "bytes_per_appearance": round(per_app, 3),
                   "insert_seconds": round(c.insert_seconds, 3)}),
        );
    }
    let appearance_bytes: u64 =
        written.iter().filter(|s| APPEARANCE_TABLES.contains(&s.table)).map(|s| s.bytes).sum();
    let summary_bytes: u64 =
        written.iter().filter(|s| SUMMARY_TABLES.contains(&s.table)).map(|s| s.bytes).sum();
    let budget = 50.0 * logs + 5.0 * appearances;

    eprintln!("queries over HTTP ({}):", datadir.display());
    let (query_rows, index_part) = queries(&bin, &datadir, &db, 2.0, Some(&recording))?;
    drop(db);
    let count_p99_32 = query_rows
        .iter()
        .find(|r| r["method"] == "ots2_getERC20TransferCount" && r["clients"] == 32)
        .and_then(|r| r["p99_ms"].as_f64())
        .unwrap_or(f64::NAN);

    let to = last_block.saturating_sub(64);
    let unwinds = unwind_three_times(&bin, &datadir, &work.join("db-unwind"), to)?;
    let unwind = unwinds[1];
    eprintln!(
        "unwind 64 blocks ({last_block} → {to}): median {:.0} ms of {:.0} / {:.0} / {:.0} (the whole command)",
        unwind * 1000.0,
        unwinds[0] * 1000.0,
        unwinds[1] * 1000.0,
        unwinds[2] * 1000.0
    );
    let (check_secs, check) = run(&bin, &["check", "--log", "warn"], &datadir)?;
    let check = check.lines().last().unwrap_or_default().to_owned();
    eprintln!("check after the unwind ({check_secs:.1} s): {check}");

    let (staged, staged_bounded, staged_defaults) = if std::env::var("OTS_BENCH_STAGE_REGIME")
        .is_ok_and(|v| v == "0")
    {
        (Value::Null, Value::Null, Value::Null)
    } else {
        let stage_blocks = match std::env::var("OTS_BENCH_STAGE_BLOCKS") {
            Ok(blocks) => blocks.parse().context("OTS_BENCH_STAGE_BLOCKS: a number of blocks")?,
            Err(_) => (last_block / 100).max(1),
        };
        let chain = Chain { bin: &bin, recording: &recording, flags: &flags, tenth_block };
        // `OTS_BENCH_ONE_PERCENT=0` runs only the defaults' stages (a large chain's 1 % regime,
        // twice with a memory bound, takes an hour).
        let one_percent = !std::env::var("OTS_BENCH_ONE_PERCENT").is_ok_and(|v| v == "0");
        let free = if one_percent {
            stage_regime(&chain, &staged_dir, stage_blocks, s.seconds, None)?
        } else {
            Value::Null
        };
        // The regime the defaults give mainnet on a host with this much disk to spare.
        let spare_gib: f64 = match std::env::var("OTS_BENCH_MAINNET_SPARE_GIB") {
            Ok(gib) => gib.parse().context("OTS_BENCH_MAINNET_SPARE_GIB: a number of GiB")?,
            Err(_) => 1024.0,
        };
        let recording_bytes = std::fs::metadata(&recording).map_or(0.0, |m| m.len() as f64);
        let stages = mainnet_stages(spare_gib, run_files_peak + recording_bytes, transactions);
        let defaults_blocks = last_block.div_ceil(stages).max(1);
        let mut defaults = stage_regime(&chain, &staged_dir, defaults_blocks, s.seconds, None)?;
        defaults["mainnet_spare_gib"] = json!(spare_gib);
        defaults["mainnet_stages"] = json!(stages);
        // The same out of memory: page cache held to a share of the database file.
        let bounded = match std::env::var("OTS_BENCH_RESIDENT_SHARE") {
            Ok(share) => {
                let share: f64 = share.parse().context("OTS_BENCH_RESIDENT_SHARE: a fraction, e.g. 0.1")?;
                let bound = MemoryBound::create(share)?;
                eprintln!(
                    "stage regime again, page cache held to {share} of the database file ({})",
                    bound.dir.display()
                );
                let bounded = if one_percent {
                    stage_regime(&chain, &staged_dir, stage_blocks, s.seconds, Some(&bound))?
                } else {
                    Value::Null
                };
                // What an operator whose memory is that share of the index gets at the defaults.
                eprintln!("the defaults' stages again, page cache held to {share} of the database file");
                defaults["bounded"] =
                    stage_regime(&chain, &staged_dir, defaults_blocks, s.seconds, Some(&bound))?;
                bounded
            }
            Err(_) => Value::Null,
        };
        (free, bounded, defaults)
    };

    let rss = |i: usize| s.samples.get(i).map_or(f64::NAN, |(_, r)| round(r[0], 0));
    let anon = |i: usize| s.samples.get(i).map_or(f64::NAN, |(_, r)| round(r[1], 0));
    let figures = json!({
        "recording": recording.display().to_string(),
        "sync_flags": flags,
        "blocks": blocks,
        "transactions": transactions,
        "transfer_logs": logs,
        "transfer_ids": ids,
        "appearances": appearances,
        "end_to_end_seconds": round(s.seconds, 2),
        "first_tenth_transactions": tenth_transactions,
        "first_tenth_seconds": round(tenth.seconds, 2),
        "scaling_10x": round(scaling, 2),
        "fit_a_seconds_per_mtx": round(a, 4),
        "fit_b_seconds_per_mtx2": round(b, 6),
        "mainnet_projection_hours": round(projection_hours, 1),
        "peak_heap_mib": round(s.peak[1], 0),
        "run_files_peak_bytes": run_files_peak,
        "stages": num(&s.summary, "stages")?,
        "stage_merge_seconds": round(s.merge_seconds, 2),
        "end_to_end_blocks_per_s": round(blocks / s.seconds, 0),
        "end_to_end_transactions_per_s": round(transactions / s.seconds, 0),
        "end_to_end_logs_per_s": round(logs / s.seconds, 0),
        "writer_seconds": round(write_seconds, 2),
        "writer_logs_per_s": round(logs / write_seconds, 0),
        "mdbx_insert_ids": plain_ids,
        "mdbx_insert_seconds": round(plain, 2),
        "writer_vs_mdbx_insert": round(plain / write_seconds, 3),
        "same_entries_insert_entries": entries,
        "same_entries_insert_seconds": round(same_entries, 2),
        "writer_vs_same_entries_insert": round(same_entries / write_seconds, 3),
        "bytes_total": written_total,
        "bytes_total_compacted": compacted_total,
        "bytes_per_transfer_log": round(written_total as f64 / logs, 2),
        "bytes_per_transfer_log_compacted": round(compacted_total as f64 / logs, 2),
        "bytes_per_transfer_log_without_appearances": round((written_total - appearance_bytes) as f64 / logs, 2),
        "bytes_per_appearance": round(appearance_bytes as f64 / appearances, 2),
        "summary_bytes": summary_bytes,
        "summary_bytes_per_appearance": round(summary_bytes as f64 / appearances, 3),
        "bytes_per_transfer_log_without_summary": round((written_total - summary_bytes) as f64 / logs, 2),
        "size_budget_bytes": budget.round(),
        "size_within_budget": (written_total as f64) <= budget,
        "peak_rss_mib": round(s.peak[3], 0),
        "peak_rss_anon_mib": round(s.peak[1], 0),
        "peak_rss_file_mib": round(s.peak[2], 0),
        "rss_mib_at_10_50_100_percent": [rss(0), rss(1), rss(2)],
        "rss_anon_mib_at_10_50_100_percent": [anon(0), anon(1), anon(2)],
        "unwind_64_ms": round(unwind * 1000.0, 1),
        "unwind_64_ms_runs": unwinds.iter().map(|s| round(s * 1000.0, 1)).collect::<Vec<_>>(),
        "count_p99_ms_32_clients": count_p99_32,
        "queries": query_rows,
        "page_index_part": index_part,
        "check": check,
        "stage_regime": staged,
        "stage_regime_bounded": staged_bounded,
        "stage_regime_defaults": staged_defaults,
        "tables": tables,
    });
    println!("{figures}");
    Ok(())
}

/// `what` was measured (a JSON object) with the load's rate and latencies added; printed as it
/// comes.
#[allow(clippy::cast_precision_loss)] // request counts far below 2^52
fn load_row(mut what: Value, f: &Figures) -> Value {
    if let Some(row) = what.as_object_mut() {
        row.insert("req_per_s".into(), json!((f.requests as f64 / f.seconds).round()));
        row.insert("p50_ms".into(), json!(percentile(&f.latencies_us, 0.5)));
        row.insert("p99_ms".into(), json!(percentile(&f.latencies_us, 0.99)));
        row.insert("errors".into(), json!(f.errors));
    }
    eprintln!("  {what}");
    what
}
