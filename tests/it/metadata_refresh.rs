//! Stored token metadata is refreshed from the node on demand (library and command), only what
//! changed is written, and an unwind below the refresh drops it like anything else of its block.

use crate::common;

use std::{process::Command, time::Duration};

use alloy::{primitives::Address, sol, sol_types::SolCall};
use common::{anvil::Anvil, workload::Chain};
use ots_indexer::{
    classify::refresh::refresh_metadata,
    db::{tables::OtsContractInfo, AccessMode, Db},
    index::{check::dump, contract_info::contract_info, journal::unwind_to},
    source::NodeClient,
    sync::{Indexer, SyncConfig},
};

const BIN: &str = env!("CARGO_BIN_EXE_ots-indexer");

sol! {
    interface Renamable { function rename(string name_, string symbol_) external; }
    interface Lazy {
        function initialize(string name_, string symbol_) external;
        function mint(address to, uint256 value) external;
    }
}

fn names(db: &Db, token: Address) -> (Option<String>, Option<String>, Option<u8>) {
    let info = contract_info(&db.begin_read().expect("read"), &token).expect("info").expect("described");
    (info.name, info.symbol, info.decimals)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renamed_tokens_are_refreshed() {
    let anvil = Anvil::start(&[]);
    let mut chain = Chain::connect(&anvil.url);
    let a0 = chain.accounts().await[0];
    let deploy = chain.deploy_artifact(a0, "NoReturnToken").await;
    chain.mine().await;
    let token: Address =
        serde_json::from_value(chain.receipt_of(deploy).await["contractAddress"].clone()).expect("token");
    chain
        .send_call(
            a0,
            token,
            Renamable::renameCall { name_: "Tether Gold".into(), symbol_: "XAUT".into() }.abi_encode(),
        )
        .await;
    chain.mine().await;

    let node = NodeClient::connect(&anvil.url, Duration::from_secs(30)).expect("node");
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("db");
    let classifiers = ots_classifiers::Registry::builtin().resolve(&["erc20"]).expect("erc20");
    let config = SyncConfig { batch_blocks: 1, ..SyncConfig::default() };
    let indexer = Indexer::open(db.clone(), node.clone(), classifiers, config).await.expect("open");
    // Index the deployment block only: the name as classified.
    indexer.sync_to(1).await.expect("sync");
    assert_eq!(names(&db, token), (Some("Tether USD".into()), Some("USDT".into()), Some(6)));
    let head = node.head().await.expect("head");
    indexer.sync_to(head).await.expect("sync");
    let before_refresh = dump(&db).expect("dump");
    assert_eq!(names(&db, token).0.as_deref(), Some("Tether USD"), "stored, not read per request");

    let stats = refresh_metadata(&db, &node, &[]).await.expect("refresh");
    assert_eq!((stats.block, stats.checked, stats.changed), (head, 1, 1));
    assert_eq!(names(&db, token), (Some("Tether Gold".into()), Some("XAUT".into()), Some(6)));

    // Again, through the command: nothing left to change.
    drop(indexer);
    let out = Command::new(BIN)
        .args(["refresh-metadata", "--rpc-url", &anvil.url, "--datadir"])
        .arg(dir.path())
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        printed.contains("read the metadata of 1 contracts") && printed.contains("0 changed"),
        "{printed}"
    );

    // An unwind below the refresh's block takes it back; re-indexing gives the unrefreshed index.
    let txn = db.begin_write().expect("write");
    unwind_to(&txn, head - 1).expect("unwind");
    txn.commit().expect("commit");
    assert_eq!(names(&db, token).0.as_deref(), Some("Tether USD"));
    let classifiers = ots_classifiers::Registry::builtin().resolve(&["erc20"]).expect("erc20");
    let config = SyncConfig { batch_blocks: 1, ..SyncConfig::default() };
    let indexer = Indexer::open(db.clone(), node, classifiers, config).await.expect("open");
    indexer.sync_to(head).await.expect("re-index");
    assert!(dump(&db).expect("dump") == before_refresh);
}

/// A token initialised after its deployment block is classified nameless; its first transfer
/// has it read again at that block, once, journalled with that block.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_initialised_late_is_named_at_its_first_transfer() {
    let anvil = Anvil::start(&[]);
    let mut chain = Chain::connect(&anvil.url);
    let a = chain.accounts().await;
    let deploy = chain.deploy_artifact(a[0], "LazyToken").await;
    chain.mine().await; // block 1: deployed, nameless
    let token: Address =
        serde_json::from_value(chain.receipt_of(deploy).await["contractAddress"].clone()).expect("token");
    let init = Lazy::initializeCall { name_: "Late Token".into(), symbol_: "LATE".into() }.abi_encode();
    chain.send_call(a[0], token, init).await;
    chain.mine().await; // block 2: initialised, no transfer yet
    chain.mine().await; // block 3: empty
    for i in 0..3u64 {
        chain
            .send_call(
                a[0],
                token,
                Lazy::mintCall { to: a[1 + i as usize], value: alloy::primitives::U256::from(5) }
                    .abi_encode(),
            )
            .await;
        chain.mine().await; // blocks 4, 5, 6: transfers
    }

    let node = NodeClient::connect(&anvil.url, Duration::from_secs(30)).expect("node");
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("db");
    let classifiers = ots_classifiers::Registry::builtin().resolve(&["erc20"]).expect("erc20");
    let config = SyncConfig { batch_blocks: 2, ..SyncConfig::default() };
    let indexer = Indexer::open(db.clone(), node.clone(), classifiers, config.clone()).await.expect("open");
    indexer.sync_to(3).await.expect("sync");
    assert_eq!(
        names(&db, token),
        (Some(String::new()), Some(String::new()), Some(18)),
        "nameless at deployment"
    );

    indexer.sync_to(6).await.expect("sync");
    assert_eq!(names(&db, token), (Some("Late Token".into()), Some("LATE".into()), Some(18)));
    // Read once, at the first transfer's block: one dup of block 4 beside the deployment's.
    let dups = db
        .begin_read()
        .expect("read")
        .cursor::<OtsContractInfo>()
        .expect("cursor")
        .dups(&token)
        .expect("dups");
    assert_eq!(dups.iter().map(|d| d.block).collect::<Vec<_>>(), [1, 4]);

    // Unwound below that block, the name goes with it, and comes back when re-indexed.
    let txn = db.begin_write().expect("write");
    unwind_to(&txn, 3).expect("unwind");
    txn.commit().expect("commit");
    assert_eq!(names(&db, token).0.as_deref(), Some(""));
    drop(indexer);
    let classifiers = ots_classifiers::Registry::builtin().resolve(&["erc20"]).expect("erc20");
    let indexer = Indexer::open(db.clone(), node, classifiers, config).await.expect("open");
    indexer.sync_to(6).await.expect("re-index");
    assert_eq!(names(&db, token).0.as_deref(), Some("Late Token"));
    ots_indexer::index::check::check(&db.begin_read().expect("read")).expect("check");
}
