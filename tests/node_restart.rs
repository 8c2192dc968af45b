//! A node stopped and restarted mid-sync (same chain, same port): the follower waits for it and
//! resumes. In a test binary of its own, so that no other test can take the port meanwhile.

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
async fn a_node_restarted_mid_sync_is_waited_for_and_followed_again() {
    use ots_indexer::index::check::dump;

    let dir = tempfile::tempdir().expect("tempdir");
    let dump_file = dir.path().join("anvil-state.json");
    let dump_arg = dump_file.to_str().expect("utf-8 path").to_owned();
    let mut anvil = Anvil::start(&["--dump-state", &dump_arg, "--preserve-historical-states"]);
    workload::run(&anvil.url).await;
    let port = anvil.port();
    let node = NodeClient::connect(&anvil.url, Duration::from_secs(2)).expect("node");
    let head = node.head().await.expect("head");
    let db = Db::open(&dir.path().join("db"), AccessMode::ReadWrite).expect("open");
    let indexer = Indexer::open(db.clone(), node.clone(), vec![Box::new(Erc20Classifier)], config())
        .await
        .expect("open");
    indexer.sync_to(3).await.expect("first blocks");

    anvil.terminate();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let follower = tokio::spawn(async move {
        let r = indexer.follow(stop_rx).await;
        (indexer, r)
    });
    tokio::time::sleep(Duration::from_millis(500)).await; // the follower retries meanwhile
    let anvil = Anvil::start_on(Some(port), &["--load-state", &dump_arg]);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let tip = state::read_state(&db.begin_read().expect("read")).expect("state").checkpoint;
        if tip.map(|t| t.number) == Some(head) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "sync did not resume after the restart (at {tip:?})");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop_tx.send(true).expect("stop");
    let (indexer, result) = follower.await.expect("task");
    result.expect("follow survived the restart");
    indexer.close().await.expect("close");

    let clean = Db::open(&dir.path().join("clean"), AccessMode::ReadWrite).expect("open");
    let node = NodeClient::connect(&anvil.url, Duration::from_secs(10)).expect("node");
    let fresh =
        Indexer::open(clean.clone(), node, vec![Box::new(Erc20Classifier)], config()).await.expect("open");
    fresh.sync_to(head).await.expect("clean sync");
    assert!(dump(&db).expect("dump") == dump(&clean).expect("dump"));
}
