//! API load benchmark: keep-alive HTTP/1.1 clients on loopback send one request over and over
//! for a fixed time; prints requests per second, p50 and p99 latency for each (request,
//! concurrency). The client is a few lines over raw TCP so that it costs the shared cores as
//! little as possible. Run by `scripts/bench-api.sh`, which builds the chain and starts the server.
//!
//! Usage: bench_api HOST:PORT ADDRESS [SECONDS] [ROUNDS]

use std::time::{Duration, Instant};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

fn http_request(host: &str, body: &str) -> Vec<u8> {
    format!(
        "POST / HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Reads one response; returns whether it was a JSON-RPC result (not an error).
async fn read_response(stream: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<bool> {
    buf.clear();
    let mut chunk = [0u8; 16384];
    let (head_end, length) = loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "server closed"));
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:").and_then(|v| v.trim().parse::<usize>().ok()))
                .unwrap_or(0);
            break (end + 4, length);
        }
    };
    while buf.len() < head_end + length {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "server closed"));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = &buf[head_end..head_end + length];
    Ok(body.windows(8).any(|w| w == b"\"result\""))
}

struct Figures {
    requests: usize,
    errors: usize,
    seconds: f64,
    latencies_us: Vec<u32>,
}

async fn client(addr: String, request: Vec<u8>, until: Instant) -> std::io::Result<(Vec<u32>, usize)> {
    let mut stream = TcpStream::connect(&addr).await?;
    stream.set_nodelay(true)?;
    let mut buf = Vec::with_capacity(1 << 16);
    let mut latencies = Vec::new();
    let mut errors = 0;
    while Instant::now() < until {
        let started = Instant::now();
        stream.write_all(&request).await?;
        if !read_response(&mut stream, &mut buf).await? {
            errors += 1;
        }
        latencies.push(u32::try_from(started.elapsed().as_micros()).unwrap_or(u32::MAX));
    }
    Ok((latencies, errors))
}

async fn load(addr: &str, body: &str, clients: usize, seconds: f64) -> std::io::Result<Figures> {
    let request = http_request(addr, body);
    // Warm up (connections, caches) before measuring.
    let warm = Instant::now() + Duration::from_millis(300);
    client(addr.to_owned(), request.clone(), warm).await?;
    let started = Instant::now();
    let until = started + Duration::from_secs_f64(seconds);
    let tasks: Vec<_> =
        (0..clients).map(|_| tokio::spawn(client(addr.to_owned(), request.clone(), until))).collect();
    let mut latencies_us = Vec::new();
    let mut errors = 0;
    for t in tasks {
        let (l, e) = t.await.map_err(std::io::Error::other)??;
        latencies_us.extend(l);
        errors += e;
    }
    let seconds = started.elapsed().as_secs_f64();
    latencies_us.sort_unstable();
    Ok(Figures { requests: latencies_us.len(), errors, seconds, latencies_us })
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    f64::from(sorted[i]) / 1000.0
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

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
