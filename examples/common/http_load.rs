//! A keep-alive HTTP/1.1 load client for the benchmarks, of JSON-RPC calls and of Etherscan API
//! GETs: a few lines over raw TCP so that it costs the shared cores as little as possible.
//! Loopback only, bounded in time.

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

/// What a request asks and how its answer says it succeeded.
#[derive(Clone)]
struct Request {
    bytes: Vec<u8>,
    /// An Etherscan answer (success: `"status":"1"`, which the server writes first, and builds
    /// before 2026-11-28 wrote last), else a
    /// JSON-RPC one (success: a `"result"` member, which it writes near the front).
    etherscan: bool,
}

/// Reads one response; returns whether it was a success (a JSON-RPC result, or an Etherscan
/// answer with status "1").
async fn read_response(stream: &mut TcpStream, buf: &mut Vec<u8>, etherscan: bool) -> std::io::Result<bool> {
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
    // jsonrpsee writes `{"jsonrpc":"2.0","id":…,"result":…`: the member sits near the front, and
    // scanning a large answer whole for it cost the client as much as the server's work.
    let body = &buf[head_end..head_end + length];
    if etherscan {
        return Ok(body.starts_with(b"{\"status\":\"1\"") || body.ends_with(b"\"status\":\"1\"}"));
    }
    let front = &body[..body.len().min(64)];
    Ok(front.windows(8).any(|w| w == b"\"result\""))
}

/// What one measurement saw.
pub(crate) struct Figures {
    pub(crate) requests: usize,
    pub(crate) errors: usize,
    pub(crate) seconds: f64,
    pub(crate) latencies_us: Vec<u32>,
}

async fn client(addr: String, request: Request, until: Instant) -> std::io::Result<(Vec<u32>, usize)> {
    let mut stream = TcpStream::connect(&addr).await?;
    stream.set_nodelay(true)?;
    let mut buf = Vec::with_capacity(1 << 16);
    let mut latencies = Vec::new();
    let mut errors = 0;
    while Instant::now() < until {
        let started = Instant::now();
        stream.write_all(&request.bytes).await?;
        if !read_response(&mut stream, &mut buf, request.etherscan).await? {
            errors += 1;
        }
        latencies.push(u32::try_from(started.elapsed().as_micros()).unwrap_or(u32::MAX));
    }
    Ok((latencies, errors))
}

/// `clients` connections send the JSON-RPC `body` over and over for `seconds` (after a short
/// warm-up).
pub(crate) async fn load(addr: &str, body: &str, clients: usize, seconds: f64) -> std::io::Result<Figures> {
    load_request(addr, Request { bytes: http_request(addr, body), etherscan: false }, clients, seconds).await
}

/// As [`load`], with Etherscan API GETs of `path_and_query` (`/api?module=…`).
#[allow(dead_code)] // not every benchmark that includes this file measures the Etherscan API
pub(crate) async fn load_get(
    addr: &str,
    path_and_query: &str,
    clients: usize,
    seconds: f64,
) -> std::io::Result<Figures> {
    let bytes = format!("GET {path_and_query} HTTP/1.1\r\nHost: {addr}\r\n\r\n").into_bytes();
    load_request(addr, Request { bytes, etherscan: true }, clients, seconds).await
}

async fn load_request(
    addr: &str,
    request: Request,
    clients: usize,
    seconds: f64,
) -> std::io::Result<Figures> {
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

/// The `p` quantile of sorted microseconds, in milliseconds.
pub(crate) fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    f64::from(sorted[i]) / 1000.0
}

/// The median of `v`.
#[allow(dead_code, reason = "bench_api and bench_holdings take medians; bench_scale does one round")]
pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}
