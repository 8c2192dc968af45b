//! A node that is down, or dies mid-sync, stops progress with a clear error and never changes
//! the database.

use crate::common;

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
    let follower = common::follower::Follower::start(indexer);
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
    follower.stop().await;
    ots_indexer::index::check::check(&db.begin_read().expect("read")).expect("check");
}

/// Waits until the follow loop says it stopped; returns why.
async fn stopped_with(progress: &ots_indexer::status::SharedProgress) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(stopped) = progress.notices().get().stopped {
            return stopped;
        }
        assert!(std::time::Instant::now() < deadline, "the loop did not say it stopped");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the follow loop indexed up to `head` and no longer says it is stopped.
async fn resumed_to(db: &Db, progress: &ots_indexer::status::SharedProgress, head: u64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let tip = state::read_state(&db.begin_read().expect("read")).expect("state").checkpoint;
        if tip.map(|t| t.number) == Some(head) && progress.notices().get().stopped.is_none() {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "sync did not resume");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A database of its own in front of `proxy`, with frames from nowhere (the proxy's tampering
/// is the subject, not the tracer).
async fn indexer_behind(
    proxy: &common::fault_proxy::FaultProxy,
    config: SyncConfig,
) -> (tempfile::TempDir, Db, Indexer, NodeClient) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
    let node = NodeClient::connect(&proxy.url, Duration::from_secs(5)).expect("node");
    let classifiers =
        ots_classifiers::BUILTIN_NAMES.iter().filter_map(|n| ots_classifiers::builtin(n)).collect();
    let indexer = Indexer::open(db.clone(), node.clone(), classifiers, config).await.expect("open");
    (dir, db, indexer, node)
}

/// Hardhat's node answered a probe of one contract with "Contract with code hash … does not
/// exist." on every retry, and the batch never committed. Now an error answer that comes back
/// the same is the node's verdict: the probe says no, the batch commits, and the operator can
/// see which probes were refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_the_node_refuses_twice_is_a_no_and_the_index_reaches_the_head() {
    use common::fault_proxy::{Fault, FaultProxy};
    use ots_indexer::status::read_status;

    let anvil = Anvil::start(&[]);
    let work = workload::run(&anvil.url).await;
    let proxy = FaultProxy::start(&anvil.url).await;
    proxy.set(Fault::RefusedCall);
    let (_dir, db, indexer, node) = indexer_behind(&proxy, config()).await;
    let head = node.head().await.expect("head");
    indexer.sync_to(head).await.expect("refused probes do not stall the index");
    let tip = state::read_state(&db.begin_read().expect("read")).expect("state").checkpoint;
    assert_eq!(tip.map(|t| t.number), Some(head));

    let status = read_status(&db, Some(head), Some(&indexer.progress())).expect("status");
    let notices = serde_json::to_value(&status).expect("json")["notices"].clone();
    let refused = notices["refusedProbes"].as_u64().expect("count");
    assert!(refused >= work.tokens.len() as u64, "every token's probes were refused: {notices}");
    let recent = notices["recentRefusedProbes"].as_array().expect("listed");
    assert!(
        work.tokens.iter().any(|t| recent.iter().any(|r| r["address"] == serde_json::json!(t.address))),
        "the refused probes name their contracts: {notices}"
    );
    assert!(recent[0]["message"].as_str().is_some_and(|m| m.contains("does not exist")), "{notices}");
    let metrics = ots_indexer::metrics::render(&indexer.progress());
    assert!(metrics.contains(&format!("ots_refused_probes_total {refused}")), "{metrics}");
    // Kept in the database: `status` in another process lists them too.
    let elsewhere = read_status(&db, None, None).expect("status");
    assert_eq!(elsewhere.notices.refused_probes, refused);
    assert_eq!(elsewhere.notices.recent_refused_probes.len(), recent.len());
    indexer.close().await.expect("close");
    ots_indexer::index::check::check(&db.begin_read().expect("read")).expect("check");
}

/// Answers that asking again at once cannot change: state a pruned node no longer has, a
/// block whose transactions cannot be read even as any chain's, a block whose hash is not its
/// header's, and a block whose history the node pruned (EIP-4444). The loop stops with the reason
/// (in `status` here and from another process, and the metrics) instead of retrying for ever,
/// writes nothing, looks again after `stopped_recheck`, and resumes once the node is fixed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_retrying_cannot_change_stops_the_loop_with_its_reason() {
    use common::fault_proxy::{Fault, FaultProxy};
    use ots_indexer::{index::check::dump, status::read_status};

    let anvil = Anvil::start(&[]);
    workload::run(&anvil.url).await;
    let proxy = FaultProxy::start(&anvil.url).await;
    let config = SyncConfig { stopped_recheck: Duration::from_millis(500), ..config() };
    let (_dir, db, indexer, node) = indexer_behind(&proxy, config).await;
    let head = node.head().await.expect("head");
    indexer.sync_to(1).await.expect("healthy start");
    let before = dump(&db).expect("dump");

    for (fault, says) in [
        (Fault::PrunedState, vec!["missing trie node", "archive node"]),
        (
            Fault::UnreadableSender,
            vec!["block 2 cannot be read", "transaction 0", "`from`", "0xnot-an-address"],
        ),
        (
            Fault::ForgedHash,
            vec!["block 2: its hash 0xabab", "is not the hash of its header", "--no-header-check"],
        ),
        (Fault::PrunedHistory, vec!["pruned history unavailable", "EIP-4444", "--history.chain all"]),
    ] {
        proxy.set(fault);
        let err = indexer.sync_to(head).await.expect_err("stops");
        assert!(!err.is_transient(), "{fault:?}: {err}");
        let reason = err.stop_reason().unwrap_or_else(|| panic!("{fault:?} is a stop: {err}"));
        for needle in &says {
            assert!(reason.contains(needle), "{fault:?}: {needle:?} in {reason}");
        }
        assert_eq!(dump(&db).expect("dump"), before, "{fault:?} changed the index");
    }

    // The follow loop: stopped, said so, and no retry storm.
    proxy.set(Fault::UnreadableSender);
    let progress = indexer.progress();
    let follower = common::follower::Follower::start(indexer);
    let stopped = stopped_with(&progress).await;
    assert!(stopped.starts_with("stopped at block 2: block 2 cannot be read"), "{stopped}");
    // Another process sees it too.
    let elsewhere = read_status(&db, None, None).expect("status");
    assert_eq!(elsewhere.notices.stopped.as_deref(), Some(stopped.as_str()));
    assert!(ots_indexer::metrics::render(&progress).contains("ots_sync_stopped 1"));
    let asked = proxy.requests.load(std::sync::atomic::Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let asked_meanwhile = proxy.requests.load(std::sync::atomic::Ordering::SeqCst) - asked;
    assert!(asked_meanwhile <= 4, "a stopped loop waits: {asked_meanwhile} requests in 300 ms");

    // Fixed: the next look resumes, and the stop is cleared everywhere.
    proxy.set(Fault::Healthy);
    resumed_to(&db, &progress, head).await;
    assert_eq!(read_status(&db, None, None).expect("status").notices.stopped, None);
    follower.stop().await;
    ots_indexer::index::check::check(&db.begin_read().expect("read")).expect("check");
}

/// Blocks whose transactions and receipts are of a type the indexer does not know (Arbitrum's
/// retry transactions, as its node gives them) are indexed from the fields every transaction
/// has: the same tables as the same chain served as Ethereum's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_of_another_chains_type_index_as_their_common_fields() {
    use common::fault_proxy::{Fault, FaultProxy};
    use ots_indexer::index::check::dump_hash;

    let anvil = Anvil::start(&[]);
    workload::run(&anvil.url).await;
    let plain = FaultProxy::start(&anvil.url).await;
    let arbitrum = FaultProxy::start(&anvil.url).await;
    arbitrum.set(Fault::ArbitrumShapes);
    let mut hashes = Vec::new();
    for proxy in [&plain, &arbitrum] {
        let (_dir, db, indexer, node) = indexer_behind(proxy, config()).await;
        indexer.sync_to(node.head().await.expect("head")).await.expect("indexed");
        indexer.close().await.expect("close");
        hashes.push(dump_hash(&db).expect("hash"));
    }
    assert_eq!(hashes[0], hashes[1], "every table equals the plain chain's");
}

/// A node (or a gateway in front of it) that takes no JSON-RPC batches answers each one with an
/// error object: the client sends plain requests from then on, and the index, traces included,
/// is the one a node that takes batches gives. Before, each block's batch was refused and asked
/// again for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_takes_no_batches_is_sent_plain_requests() {
    use common::fault_proxy::{Fault, FaultProxy};
    use ots_indexer::{index::check::dump_hash, source::TraceChoice};

    let anvil = Anvil::start(&[]);
    workload::run(&anvil.url).await;
    let batches = FaultProxy::start(&anvil.url).await;
    let plain = FaultProxy::start(&anvil.url).await;
    plain.set(Fault::NoBatches);
    let mut hashes = Vec::new();
    for proxy in [&batches, &plain] {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
        let node = NodeClient::connect(&proxy.url, Duration::from_secs(5))
            .expect("node")
            .with_traces(TraceChoice::Auto)
            .await
            .expect("tracer");
        assert_eq!(node.trace_mode().name(), "trace_block");
        let indexer = Indexer::open(db.clone(), node.clone(), vec![Box::new(Erc20Classifier)], config())
            .await
            .expect("open");
        let head = node.head().await.expect("head");
        tokio::time::timeout(Duration::from_secs(120), indexer.sync_to(head))
            .await
            .expect("no endless retry")
            .expect("indexed");
        indexer.close().await.expect("close");
        ots_indexer::index::check::check(&db.begin_read().expect("read")).expect("check");
        hashes.push(dump_hash(&db).expect("hash"));

        // A list of calls comes back whole and in order either way.
        let calls: Vec<(&'static str, serde_json::Value)> = (0..=head)
            .map(|n| ("eth_getBlockByNumber", serde_json::json!([format!("{n:#x}"), false])))
            .collect();
        let answers = node.batch(&calls).await.expect("answered");
        for (n, answer) in (0..=head).zip(&answers) {
            assert_eq!(answer["number"], serde_json::json!(format!("{n:#x}")), "block {n}");
        }
    }
    assert_eq!(hashes[0], hashes[1], "plain requests index what batches do");
}

/// A node that gives the same answer about a block that does not add up (here another block's
/// number in its place) on every try was retried every 30 s for ever, with only a WARN to show
/// for it. After `same_answer_stops` of the same answer the loop stops on it with the reason, as
/// on an answer retrying cannot change, looks again after `stopped_recheck`, and resumes once the
/// node answers well; a different failure in between starts the count again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_inconsistent_answer_for_too_long_stops_the_loop_with_its_reason() {
    use common::fault_proxy::{Fault, FaultProxy};

    let anvil = Anvil::start(&[]);
    workload::run(&anvil.url).await;
    let proxy = FaultProxy::start(&anvil.url).await;
    let config = SyncConfig {
        stopped_recheck: Duration::from_millis(500),
        same_answer_stops: Duration::from_millis(300),
        ..config()
    };
    let (_dir, db, indexer, node) = indexer_behind(&proxy, config).await;
    let head = node.head().await.expect("head");
    indexer.sync_to(1).await.expect("healthy start");

    proxy.set(Fault::WrongBlockNumber);
    let progress = indexer.progress();
    let follower = common::follower::Follower::start(indexer);
    let stopped = stopped_with(&progress).await;
    assert!(stopped.starts_with("stopped at block 2:"), "{stopped}");
    for needle in ["asked for block 2, got block 30583", "the same answer for 300ms"] {
        assert!(stopped.contains(needle), "{needle:?} in {stopped}");
    }
    assert_eq!(
        state::read_state(&db.begin_read().expect("read")).expect("state").checkpoint.map(|c| c.number),
        Some(1)
    );

    proxy.set(Fault::Healthy);
    resumed_to(&db, &progress, head).await;
    follower.stop().await;
    ots_indexer::index::check::check(&db.begin_read().expect("read")).expect("check");
}

/// `sync --exit-at-head` (`Indexer::sync_to_retrying`) waits out a node that fails for a while,
/// as the follow loop does, where one failed request ended a catch-up of hours; an answer
/// retrying cannot change still ends it, with its reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catch_up_to_the_head_waits_out_a_failing_node_and_stops_on_a_verdict() {
    use common::fault_proxy::{Fault, FaultProxy};

    let anvil = Anvil::start(&[]);
    workload::run(&anvil.url).await;
    let proxy = FaultProxy::start(&anvil.url).await;
    let (_dir, db, indexer, node) = indexer_behind(&proxy, config()).await;
    let head = node.head().await.expect("head");
    indexer.sync_to(1).await.expect("healthy start");

    proxy.set(Fault::UnreadableSender);
    let err = indexer.sync_to_retrying(head).await.expect_err("a verdict ends it");
    assert!(err.stop_reason().is_some_and(|r| r.contains("block 2 cannot be read")), "{err}");

    proxy.set(Fault::ServerError);
    let healer = proxy.clone();
    let healed = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(600)).await;
        healer.set(Fault::Healthy);
    });
    tokio::time::timeout(Duration::from_secs(60), indexer.sync_to_retrying(head))
        .await
        .expect("caught up once the node answers")
        .expect("no error left");
    healed.await.expect("healer");
    let tip = state::read_state(&db.begin_read().expect("read")).expect("state").checkpoint;
    assert_eq!(tip.map(|t| t.number), Some(head));
    ots_indexer::index::check::check(&db.begin_read().expect("read")).expect("check");
}
