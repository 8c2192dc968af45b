//! Over a ws:// URL the indexer follows the head by `newHeads` subscription: with polling set to
//! a minute, a new block is still indexed within seconds.

use crate::common;

use std::time::{Duration, Instant};

use common::{
    anvil::Anvil,
    workload::{self, Chain},
};
use ots_classifiers::Erc20Classifier;
use ots_indexer::{
    db::{state, AccessMode, Db},
    source::{NodeClient, TraceChoice},
    sync::{Indexer, SyncConfig},
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_heads_wake_the_follower() {
    let anvil = Anvil::start(&[]);
    let work = workload::run(&anvil.url).await;
    let ws = anvil.url.replace("http://", "ws://");
    let node = NodeClient::open(&ws, Duration::from_secs(10))
        .await
        .expect("ws")
        .with_traces(TraceChoice::Auto)
        .await
        .expect("traces");
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
    let config = SyncConfig { poll_interval: Duration::from_secs(60), ..Default::default() };
    let indexer = Indexer::open(db.clone(), node.clone(), vec![Box::new(Erc20Classifier)], config)
        .await
        .expect("indexer");
    let follower = common::follower::Follower::start(indexer);

    let tip =
        || state::read_state(&db.begin_read().expect("read")).expect("state").checkpoint.map(|c| c.number);
    let head = node.head().await.expect("head");
    let deadline = Instant::now() + Duration::from_secs(20);
    while tip() != Some(head) {
        assert!(Instant::now() < deadline, "initial catch-up over ws");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for round in 1..=3 {
        let mut chain = Chain::connect(&anvil.url);
        chain.transfer(work.tokens[0].address, work.accounts[0], work.accounts[2], round).await;
        chain.mine().await;
        let deadline = Instant::now() + Duration::from_secs(10);
        while tip() != Some(head + round) {
            assert!(Instant::now() < deadline, "block {} was not indexed: no newHeads wake-up", head + round);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    follower.stop().await;
}
