//! Where a holder page's time goes inside the server, without HTTP: the token's holder count,
//! the page of holders read from the index (the ranking walk, with the marks and the window's
//! changed holders the server keeps per snapshot) and the answer written as JSON, each timed
//! over many pages read as the server reads them, one snapshot each. Prints one line per round.
//!
//! Usage: bench_holder_page DATADIR TOKEN|busiest [IDX] [ROUNDS]
//! (25 holders a page from position IDX, default 0; 20,000 pages a round, 3 rounds; `busiest`:
//! the token with the most holders, printed)

use std::{path::PathBuf, time::Instant};

use alloy_primitives::Address;
use ots_indexer::{
    db::{codec::Count, tables::OtsTokenHolderCounts, AccessMode, Db},
    rpc::{
        ots2::holders::{Holder, HolderPage},
        serialized::Serialized,
        window_holders::WindowHoldersCache,
    },
};

const PAGES: u32 = 20_000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(datadir), Some(token)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: bench_holder_page DATADIR TOKEN [IDX] [ROUNDS]");
        std::process::exit(2);
    };
    let db = Db::open(&PathBuf::from(datadir), AccessMode::ReadOnly)?;
    let token: Address = if token == "busiest" { busiest(&db)? } else { token.parse()? };
    let idx: u64 = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(0);
    let rounds: u32 = args.get(4).map(|s| s.parse()).transpose()?.unwrap_or(3);
    let cache = WindowHoldersCache::default();
    {
        // The first page of a snapshot no page has marked: the walk from the top.
        let txn = db.begin_read()?;
        let started = Instant::now();
        let page = cache.page(&txn, &token, idx, 25)?;
        println!(
            "first page at {idx} (the walk from the top, leaving marks): {:.3} ms, {} rows",
            started.elapsed().as_secs_f64() * 1e3,
            page.len()
        );
    }
    for round in 1..=rounds {
        let (mut count_s, mut page_s, mut json_s, mut bytes) = (0.0, 0.0, 0.0, 0);
        let started = Instant::now();
        for _ in 0..PAGES {
            let txn = db.begin_read()?;
            let t0 = Instant::now();
            let total = cache.count(&txn, &token)?;
            let t1 = Instant::now();
            let results: Vec<Holder> = cache
                .page(&txn, &token, idx, 25)?
                .into_iter()
                .map(|(holder, balance)| Holder { holder, balance })
                .collect();
            let t2 = Instant::now();
            let answer = Serialized::of(&HolderPage { total, results }).map_err(|e| e.to_string())?;
            let json = serde_json::to_vec(&answer)?;
            let t3 = Instant::now();
            bytes += json.len();
            count_s += (t1 - t0).as_secs_f64();
            page_s += (t2 - t1).as_secs_f64();
            json_s += (t3 - t2).as_secs_f64();
        }
        let per = |s: f64| s / f64::from(PAGES) * 1e6;
        println!(
            "round {round}: {:.2} µs a page in all; count {:.2}, page {:.2}, JSON {:.2} µs; {} bytes",
            per(started.elapsed().as_secs_f64()),
            per(count_s),
            per(page_s),
            per(json_s),
            bytes / PAGES as usize
        );
    }
    Ok(())
}

/// The token with the most holders (printed).
fn busiest(db: &Db) -> Result<Address, Box<dyn std::error::Error>> {
    let txn = db.begin_read()?;
    let mut cursor = txn.walking_cursor::<OtsTokenHolderCounts>()?;
    let (mut best, mut most) = (Address::ZERO, 0);
    let mut next = cursor.first()?;
    while let Some((token, Count(n))) = next {
        if n > most {
            (best, most) = (token, n);
        }
        next = cursor.next_entry()?;
    }
    println!("busiest token {best}: {most} holders before the reorg window");
    Ok(best)
}
