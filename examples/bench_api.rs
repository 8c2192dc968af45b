//! API load benchmark: keep-alive HTTP/1.1 clients on loopback send one request over and over
//! for a fixed time; prints requests per second, p50 and p99 latency for each (request,
//! concurrency). The client is a few lines over raw TCP so that it costs the shared cores as
//! little as possible. Run by `scripts/bench-api.sh`, which builds the chain and starts the server.
//!
//! Usage: bench_api HOST:PORT ADDRESS [SECONDS] [ROUNDS]

#[path = "common/http_load.rs"]
mod http_load;

use http_load::{load, median, percentile, Figures};

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(addr), Some(address)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: bench_api HOST:PORT ADDRESS [SECONDS] [ROUNDS]");
        std::process::exit(2);
    };
    let seconds: f64 = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(3.0);
    let rounds: usize = args.get(4).map(|s| s.parse()).transpose()?.unwrap_or(5);
    let count =
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"ots2_getERC20TransferCount","params":["{address}"]}}"#);
    let page = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ots2_getERC20TransferList","params":["{address}",0,25]}}"#
    );
    let cases = [
        ("ots2_getERC20TransferCount", &count, 1),
        ("ots2_getERC20TransferCount", &count, 32),
        ("ots2_getERC20TransferList (25)", &page, 1),
        ("ots2_getERC20TransferList (25)", &page, 32),
    ];
    // Rounds interleave the cases, so that a noisy moment of a shared machine hits them alike;
    // each figure is the median over the rounds.
    let mut results: Vec<Vec<Figures>> = cases.iter().map(|_| Vec::new()).collect();
    for round in 1..=rounds {
        eprintln!("round {round}/{rounds}");
        for (i, (_, body, clients)) in cases.iter().enumerate() {
            results[i].push(load(addr, body, *clients, seconds).await?);
        }
    }
    println!(
        "{:<34} {:>8} {:>10} {:>9} {:>9} {:>7}   (median of {rounds} rounds of {seconds} s)",
        "request", "clients", "req/s", "p50 ms", "p99 ms", "errors"
    );
    for ((name, _, clients), figures) in cases.iter().zip(&results) {
        println!(
            "{:<34} {:>8} {:>10.0} {:>9.3} {:>9.3} {:>7}",
            name,
            clients,
            median(figures.iter().map(|f| f.requests as f64 / f.seconds).collect()),
            median(figures.iter().map(|f| percentile(&f.latencies_us, 0.5)).collect()),
            median(figures.iter().map(|f| percentile(&f.latencies_us, 0.99)).collect()),
            figures.iter().map(|f| f.errors).sum::<usize>()
        );
    }
    Ok(())
}
