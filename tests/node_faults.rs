//! A node that is down, or dies mid-sync, stops progress with a clear error and never changes
//! the database.

mod common;

use std::time::Duration;

use common::{anvil::Anvil, workload};
use ots_classifiers::Erc20Classifier;
use ots_indexer::{
    db::{state, AccessMode, Db},
    source::NodeClient,
    sync::{Indexer, SyncConfig},
};

fn config() -> SyncConfig {
    SyncConfig {
        batch_blocks: 2,
        concurrency: 2,
        poll_interval: Duration::from_millis(50),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_is_down_is_a_transient_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("port").port();
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
    let node = NodeClient::connect(&format!("http://127.0.0.1:{port}"), Duration::from_secs(2)).expect("url");
    let err = Indexer::open(db.clone(), node, vec![Box::new(Erc20Classifier)], config())
        .await
        .expect_err("nobody listens there");
    assert!(err.is_transient(), "{err}");
    assert!(err.to_string().contains("eth_chainId"), "{err}");
    let s = state::read_state(&db.begin_read().expect("read")).expect("state");
    assert_eq!(s.chain, None, "nothing may be written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_dying_mid_sync_leaves_the_last_batch_intact() {
    let mut anvil = Anvil::start(&[]);
    workload::run(&anvil.url).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
    let node = NodeClient::connect(&anvil.url, Duration::from_secs(2)).expect("node");
    let indexer = Indexer::open(db.clone(), node.clone(), vec![Box::new(Erc20Classifier)], config())
        .await
        .expect("open");
    let head = node.head().await.expect("head");
    indexer.sync_to(3).await.expect("first blocks");
    let before = state::read_state(&db.begin_read().expect("read")).expect("state");
    assert_eq!(before.checkpoint.map(|c| c.number), Some(3));

    anvil.stop();
    let err = indexer.sync_to(head).await.expect_err("the node is gone");
    assert!(err.is_transient(), "{err}");
    let after = state::read_state(&db.begin_read().expect("read")).expect("state");
    assert_eq!(after.checkpoint, before.checkpoint);

    for url in ["ftp://127.0.0.1:1", "https://127.0.0.1:1", "not a url"] {
        let err = NodeClient::connect(url, Duration::from_secs(1)).expect_err("refused up front");
        assert!(err.to_string().contains("invalid node URL"), "{err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misbehaving_node_changes_nothing_and_sync_resumes() {
    use common::fault_proxy::{Fault, FaultProxy};
    use ots_indexer::index::check::dump;

    let anvil = Anvil::start(&[]);
    workload::run(&anvil.url).await;
    let proxy = FaultProxy::start(&anvil.url).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
    let node = NodeClient::connect(&proxy.url, Duration::from_secs(5)).expect("node");
    let indexer = Indexer::open(db.clone(), node.clone(), vec![Box::new(Erc20Classifier)], config())
        .await
        .expect("open");
    let head = node.head().await.expect("head");
    indexer.sync_to(3).await.expect("healthy start");
    let before = dump(&db).expect("dump");
    let tip = state::read_state(&db.begin_read().expect("read")).expect("state").checkpoint;

    for (fault, says) in [
        (Fault::Garbage, "deserialization error"),
        (Fault::TooManyRequests, "429"),
        (Fault::ServerError, "500"),
        (Fault::WrongBlockNumber, "asked for block 4, got block 30583"),
        (Fault::TruncatedReceipts, "transactions but"),
        (Fault::ForgedHash, "is not the hash of its header"),
    ] {
        proxy.set(fault);
        let err = indexer.sync_to(head).await.expect_err("a faulty node must not be indexed");
        assert!(err.is_transient(), "{fault:?}: {err}");
        assert!(err.to_string().contains(says), "{fault:?}: {err}");
        assert_eq!(dump(&db).expect("dump"), before, "{fault:?} changed the index");
        let now = state::read_state(&db.begin_read().expect("read")).expect("state").checkpoint;
        assert_eq!(now, tip, "{fault:?} moved the checkpoint");
    }

    // The follow loop waits out a faulty node and catches up once it is healthy again.
    proxy.set(Fault::ServerError);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let follower = tokio::spawn(async move {
        let r = indexer.follow(stop_rx).await;
        (indexer, r)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.set(Fault::Healthy);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let tip = state::read_state(&db.begin_read().expect("read")).expect("state").checkpoint;
        if tip.map(|t| t.number) == Some(head) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "sync did not resume");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop_tx.send(true).expect("stop");
    let (indexer, result) = follower.await.expect("task");
    result.expect("follow survived the faults");
    indexer.close().await.expect("close");
    ots_indexer::index::check::check(&db.begin_read().expect("read")).expect("check");
}
