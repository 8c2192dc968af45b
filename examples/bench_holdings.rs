//! Where a large `ots2_getERC20Holdings` answer's time goes: the index read and the JSON
//! serialisation timed in this process on the same database, beside the whole request over HTTP
//! at 1 and 32 clients, and the paged variant `ots2_getERC20HoldingsPage` (25 rows). Prints one
//! JSON line per figure. Run by `scripts/bench-scale.sh`'s query step or by hand against a
//! `serve` of an indexed chain.
//!
//! Usage: bench_holdings HOST:PORT DATADIR HOLDER [SECONDS]

#[path = "common/http_load.rs"]
mod http_load;

use std::{path::PathBuf, time::Instant};

use alloy_primitives::Address;
use http_load::{load, median, percentile};
use ots_indexer::{
    db::{AccessMode, Db},
    decode::TokenKind,
    index::holdings,
    rpc::ots2::HoldingRow,
};
use serde_json::json;

fn request(method: &str, params: &serde_json::Value) -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(addr), Some(datadir), Some(holder)) = (args.get(1), args.get(2), args.get(3)) else {
        eprintln!("usage: bench_holdings HOST:PORT DATADIR HOLDER [SECONDS]");
        std::process::exit(2);
    };
    let holder: Address = holder.parse()?;
    let seconds: f64 = args.get(4).map(|s| s.parse()).transpose()?.unwrap_or(3.0);

    // The server's own part, in this process: read the dups, serialise the rows as the method does.
    let db = Db::open(&PathBuf::from(datadir), AccessMode::ReadOnly)?;
    let (mut read_us, mut json_us, mut bytes) = (Vec::new(), Vec::new(), 0);
    for _ in 0..200 {
        let started = Instant::now();
        let txn = db.begin_read()?;
        let rows = holdings::of(&txn, TokenKind::Erc20, &holder)?;
        drop(txn);
        read_us.push(started.elapsed().as_secs_f64() * 1e6);
        let started = Instant::now();
        let out: Vec<HoldingRow> =
            rows.iter().map(|h| HoldingRow { address: h.token, eth_tx: h.first.0 }).collect();
        let text = serde_json::to_string(&out)?;
        json_us.push(started.elapsed().as_secs_f64() * 1e6);
        bytes = text.len();
    }
    let rows = holdings::of(&db.begin_read()?, TokenKind::Erc20, &holder)?.len();
    println!(
        "{}",
        json!({"figure": "in process", "holdings": rows, "answer_bytes": bytes,
               "index_read_ms": median(read_us) / 1000.0, "serialise_ms": median(json_us) / 1000.0})
    );
    let cases = [
        ("ots2_getERC20Holdings", json!([holder])),
        ("ots2_getERC20HoldingsPage (25)", json!([holder, 0, 25])),
    ];
    for (name, params) in &cases {
        let method = name.split(' ').next().unwrap_or(name);
        let body = request(method, params);
        for clients in [1usize, 32] {
            let f = load(addr, &body, clients, seconds).await?;
            let per_s = f.requests as f64 / f.seconds;
            println!(
                "{}",
                json!({"figure": "over HTTP", "method": name, "clients": clients, "req_per_s": per_s.round(),
                       "p50_ms": percentile(&f.latencies_us, 0.5), "p99_ms": percentile(&f.latencies_us, 0.99),
                       "errors": f.errors,
                       "answer_mib_per_s": if method == "ots2_getERC20Holdings" { (per_s * bytes as f64 / 1048576.0).round() } else { 0.0 }})
            );
        }
    }
    Ok(())
}
