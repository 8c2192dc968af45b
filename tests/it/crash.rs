//! kill -9 during catch-up, again and again, while a `serve` process reads the same database:
//! after each restart the index continues, `check` passes, and the final database equals a
//! clean index of the chain. Rounds: `OTS_CRASH_ROUNDS` (default 20; the stress script runs more).

use crate::common;

use std::{
    net::TcpListener,
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use common::{
    anvil::Anvil,
    workload::{self, Chain},
    Client,
};
use ots_classifiers::Erc20Classifier;
use ots_indexer::{
    db::{state, AccessMode, Db},
    index::check::dump,
    source::{NodeClient, TraceChoice},
    sync::{Indexer, SyncConfig},
};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_ots-indexer");

fn sync_process(url: &str, datadir: &Path, extra: &[&str]) -> Child {
    Command::new(BIN)
        .args([
            "sync",
            "--rpc-url",
            url,
            "--batch-blocks",
            "1",
            "--fetch-concurrency",
            "1",
            "--poll-interval-ms",
            "50",
            "--log",
            "warn",
        ])
        .arg("--datadir")
        .arg(datadir)
        .args(extra)
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn sync")
}

struct Lcg(u64);

impl Lcg {
    fn next(&mut self, bound: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % bound
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_catch_up_loses_nothing() {
    let rounds: u64 = std::env::var("OTS_CRASH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
    let anvil = Anvil::start(&[]);
    let work = workload::run(&anvil.url).await;
    let acc = work.accounts.clone();
    let demo = work.tokens[0].address;
    let mut chain = Chain::connect(&anvil.url);
    for i in 0..300 {
        chain.transfer(demo, acc[0], acc[5 + i % 20], 1).await;
        chain.transfer(demo, acc[5 + i % 20], acc[5 + (i * 7) % 20], 1).await;
        chain.mine().await;
    }
    // The clean index takes call frames from the same tracer the command picks.
    let node = NodeClient::connect(&anvil.url, Duration::from_secs(10))
        .expect("node")
        .with_traces(TraceChoice::Auto)
        .await
        .expect("tracer");
    let head = node.head().await.expect("head");

    let dir = tempfile::tempdir().expect("tempdir");
    // A first short run creates and binds the database, so that `serve` can open it.
    let mut first = sync_process(&anvil.url, dir.path(), &[]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while Db::open(dir.path(), AccessMode::ReadOnly)
        .ok()
        .and_then(|db| state::read_state(&db.begin_read().ok()?).ok()?.checkpoint)
        .is_none()
    {
        assert!(Instant::now() < deadline, "sync never committed a batch");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    first.kill().expect("kill -9");
    first.wait().expect("reap");

    let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("port").port();
    let mut serve = Command::new(BIN)
        .args([
            "serve",
            "--rpc-url",
            &anvil.url,
            "--http-addr",
            &format!("127.0.0.1:{port}"),
            "--log",
            "warn",
        ])
        .arg("--datadir")
        .arg(dir.path())
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn serve");
    let client = Client::new(&format!("http://127.0.0.1:{port}"));

    let mut rng = Lcg(7);
    let mut last_seen = 0u64;
    let mut killed_mid_catch_up = 0;
    for _ in 0..rounds {
        let mut child = sync_process(&anvil.url, dir.path(), &[]);
        tokio::time::sleep(Duration::from_millis(20 + rng.next(300))).await;
        child.kill().expect("kill -9");
        child.wait().expect("reap");
        let db = Db::open(dir.path(), AccessMode::ReadOnly).expect("reopen after kill -9");
        let tip = state::read_state(&db.begin_read().expect("read"))
            .expect("state")
            .checkpoint
            .map_or(0, |c| c.number);
        if tip < head {
            killed_mid_catch_up += 1;
        }
        ots_indexer::index::check::check(&db.begin_read().expect("read"))
            .unwrap_or_else(|e| panic!("check failed after kill -9 at block {tip}: {e}"));
        // The reader keeps answering, and never sees the index go backwards.
        if let Ok(v) = client.try_call("ots2_getERC20TransferCount", json!([acc[0]])).await {
            let n = v.as_u64().expect("number");
            assert!(n >= last_seen, "the served count went back from {last_seen} to {n}");
            last_seen = n;
        }
    }
    assert!(killed_mid_catch_up > 0, "no kill landed during catch-up");

    let status = sync_process(&anvil.url, dir.path(), &["--exit-at-head"]).wait().expect("final sync");
    assert!(status.success(), "final sync failed: {status}");
    let out = Command::new(BIN).arg("check").arg("--datadir").arg(dir.path()).output().expect("check");
    assert!(out.status.success(), "check failed: {}", String::from_utf8_lossy(&out.stderr));

    let clean_dir = tempfile::tempdir().expect("tempdir");
    let clean = Db::open(clean_dir.path(), AccessMode::ReadWrite).expect("open");
    let config = SyncConfig { batch_blocks: 50, concurrency: 8, ..Default::default() };
    let indexer =
        Indexer::open(clean.clone(), node, vec![Box::new(Erc20Classifier)], config).await.expect("indexer");
    indexer.sync_to(head).await.expect("clean sync");
    // Read-write: `dump` reads the reorg window as moved into the tables, in a transaction it
    // drops.
    let crashed = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
    assert!(
        dump(&crashed).expect("dump") == dump(&clean).expect("dump"),
        "after {rounds} kills the index differs from a clean one"
    );
    let served = client.call("ots2_getERC20TransferCount", json!([acc[0]])).await;
    let want = clean.begin_read().map(|t| {
        use ots_indexer::index::address_index::{count, IdList};
        count(&t, IdList::Erc20Transfers, &acc[0])
    });
    assert_eq!(served, json!(want.expect("read").expect("count")));
    let _ = serve.kill();
    let _ = serve.wait();
    eprintln!("{rounds} kill -9 rounds, {killed_mid_catch_up} during catch-up");
}
