//! What the benchmarks that build a chain on a local Anvil share: starting it (and stopping it
//! however the benchmark ends), indexing its chain, and timing JSON-RPC calls over HTTP.

use std::{
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use jsonrpsee::server::ServerHandle;
use ots_indexer::{
    db::{AccessMode, Db},
    rpc::{self, RpcContext},
    source::{NodeClient, TraceChoice},
    sync::{Indexer, SyncConfig},
};
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

/// Starts the test bed's Anvil with `args` (mining on request, FIFO order, a fixed start time, 30
/// accounts) on a free port; the process, its URL and a client once it answers.
pub(crate) async fn start_anvil(args: &[&str]) -> (Killed, String, NodeClient) {
    let testbed = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testbed");
    let port = free_port();
    let anvil = Killed(
        Command::new(testbed.join("node_modules/.bin/anvil"))
            .args(args)
            .args([
                "--port",
                &port.to_string(),
                "--host",
                "127.0.0.1",
                "--accounts",
                "30",
                "--balance",
                "1000000",
            ])
            .args(["--no-mining", "--order", "fifo", "--timestamp", "1700000000", "--silent"])
            .args(["--gas-limit", "1000000000"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("start anvil (run testbed/setup.sh first)"),
    );
    let url = format!("http://127.0.0.1:{port}");
    let node = NodeClient::connect(&url, Duration::from_secs(600)).expect("client");
    let started = Instant::now();
    while node.head().await.is_err() {
        assert!(started.elapsed() < Duration::from_secs(30), "anvil did not start");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (anvil, url, node)
}

/// Indexes the chain at `url` up to `head` with the node's tracer and no classifier, in a
/// temporary directory; prints how long it took.
pub(crate) async fn index_to(url: &str, head: u64) -> (tempfile::TempDir, Db, NodeClient) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("db");
    let source = NodeClient::connect(url, Duration::from_secs(600))
        .expect("client")
        .with_traces(TraceChoice::Auto)
        .await
        .expect("tracer");
    let indexed = Instant::now();
    let indexer =
        Indexer::open(db.clone(), source.clone(), vec![], SyncConfig::default()).await.expect("indexer");
    indexer.sync_to(head).await.expect("sync");
    indexer.close().await.expect("close");
    println!("indexed in {:.1} s (tracer {})", indexed.elapsed().as_secs_f64(), source.trace_mode().name());
    (dir, db, source)
}

/// Serves `db` (forwarding to `node`) on a free loopback port: a client for it, and the server.
pub(crate) async fn serve(db: Db, node: NodeClient) -> (NodeClient, ServerHandle) {
    let ctx = RpcContext::new(db, node);
    let (addr, server) =
        rpc::serve("127.0.0.1:0".parse().expect("addr"), ctx, &rpc::ServerOptions::default())
            .await
            .expect("serve");
    let ours = NodeClient::connect(&format!("http://{addr}"), Duration::from_secs(600)).expect("client");
    (ours, server)
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
