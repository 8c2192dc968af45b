//! What the API's reads of an address's ERC20 transfer list cost while a catch-up in bulk stages
//! is under way (its later stages' ids in the staged segments, docs/format.md "Staged segments
//! of the address indexes"): the count, a page of 25 at the list's start, middle and end, and the
//! rank of an id in its middle, for the address with the most staged chunks, each read in a
//! snapshot of its own as the server reads them. Prints one line per read: the median and the
//! slowest of ROUNDS, and the process's peak resident memory at the end.
//!
//! Usage: bench_staged_reads DATADIR [ROUNDS] (default 200)

use std::{collections::HashMap, path::PathBuf, time::Instant};

use alloy_primitives::Address;
use ots_indexer::{
    db::{tables::OtsERC20TransferIndexStaged, AccessMode, Db},
    index::address_index::{count, page, rank, IdList},
};

const LIST: IdList = IdList::Erc20Transfers;

type Outcome<T> = Result<T, Box<dyn std::error::Error>>;
/// One read, in a snapshot: what it answers (a number to show that both builds agree).
type Read<'a> = &'a dyn Fn(&ots_indexer::db::ReadTxn) -> Outcome<u64>;

fn main() -> Outcome<()> {
    let args: Vec<String> = std::env::args().collect();
    let Some(datadir) = args.get(1) else {
        eprintln!("usage: bench_staged_reads DATADIR [ROUNDS]");
        std::process::exit(2);
    };
    let rounds: usize = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(200).max(1);
    // Read-write: a catch-up stopped after an unsynced stage commit is synced on open.
    let db = Db::open(&PathBuf::from(datadir), AccessMode::ReadWrite)?;
    let (busiest, chunks, segments) = busiest(&db)?;
    let txn = db.begin_read()?;
    let total = count(&txn, LIST, &busiest)?;
    let middle_id = page(&txn, LIST, &busiest, total / 2, 1)?.first().copied().unwrap_or(0);
    drop(txn);
    println!("address {busiest}: {total} ids, {chunks} staged chunks in {segments} segments");
    let time = |what: &str, read: Read<'_>| {
        let mut took = Vec::with_capacity(rounds);
        let mut answer = 0;
        for _ in 0..rounds {
            let txn = db.begin_read()?;
            let started = Instant::now();
            answer = read(&txn)?;
            took.push(started.elapsed().as_secs_f64() * 1e3);
        }
        took.sort_by(f64::total_cmp);
        println!(
            "{what}: median {:.3} ms, slowest {:.3} ms (answer {answer})",
            took[rounds / 2],
            took[rounds - 1]
        );
        Ok::<(), Box<dyn std::error::Error>>(())
    };
    time("count", &|txn| Ok(count(txn, LIST, &busiest)?))?;
    for (name, at) in [
        ("page at the start", 0),
        ("page in the middle", total / 2),
        ("page at the end", total.saturating_sub(25)),
    ] {
        time(name, &|txn| Ok(page(txn, LIST, &busiest, at, 25)?.first().copied().unwrap_or(0)))?;
    }
    time("rank of the middle id", &|txn| Ok(rank(txn, LIST, &busiest, middle_id)?))?;
    let peak = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:")).map(str::to_owned))
        .unwrap_or_default();
    println!("peak resident memory {}", peak.trim_start_matches("VmHWM:").trim());
    Ok(())
}

/// The address with the most chunks in the staged segments, its chunks and segments.
fn busiest(db: &Db) -> Outcome<(Address, u64, u64)> {
    let txn = db.begin_read()?;
    let mut cursor = txn.walking_cursor::<OtsERC20TransferIndexStaged>()?;
    let mut chunks: HashMap<Address, (u64, u64)> = HashMap::new();
    let mut last_segment: HashMap<Address, u64> = HashMap::new();
    let mut next = cursor.first()?;
    while let Some((key, _)) = next {
        let entry = chunks.entry(key.address).or_default();
        entry.0 += 1;
        if last_segment.insert(key.address, key.segment) != Some(key.segment) {
            entry.1 += 1;
        }
        next = cursor.next_entry()?;
    }
    let (address, (most, segments)) = chunks
        .into_iter()
        .max_by_key(|(_, (n, _))| *n)
        .ok_or("no staged segments: the catch-up has ended")?;
    Ok((address, most, segments))
}
