//! Timed JSON-RPC calls for the benchmarks that compare answers over HTTP, a free port for the
//! node they start, and that node stopped however the benchmark ends.

use std::{process::Child, time::Instant};

use ots_indexer::source::NodeClient;
use serde_json::Value;

/// A free loopback port.
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// A node process, killed when dropped (also when the benchmark panics).
pub(crate) struct Killed(pub(crate) Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Median of `rounds` timed calls of `method` at `url`, in milliseconds, and the last answer.
pub(crate) async fn time(
    client: &NodeClient,
    method: &'static str,
    params: Value,
    rounds: u64,
) -> (f64, Value) {
    let mut times = Vec::new();
    let mut answer = Value::Null;
    for _ in 0..rounds.max(1) {
        let started = Instant::now();
        answer = client.raw(method, params.clone()).await.unwrap_or_else(|e| panic!("{method}: {e}"));
        times.push(started.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    (times[times.len() / 2], answer)
}

/// Median of one timed call of `method` per entry of `params` (each a different page), in
/// milliseconds, and the last answer.
pub(crate) async fn time_each(client: &NodeClient, method: &'static str, params: &[Value]) -> (f64, Value) {
    let mut times = Vec::new();
    let mut answer = Value::Null;
    for p in params {
        let started = Instant::now();
        answer = client.raw(method, p.clone()).await.unwrap_or_else(|e| panic!("{method}: {e}"));
        times.push(started.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    (times[times.len() / 2], answer)
}
