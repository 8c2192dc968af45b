//! ERC721 owners and holders on a real node: a real OpenZeppelin ERC721 on Anvil is minted,
//! moved between accounts (self-transfers included) over several blocks and indexed in small
//! batches; over HTTP, every id's indexed owner equals the contract's `ownerOf` at the head, the
//! holder count equals the number of accounts whose `balanceOf` is not zero, and every page of the
//! holder list equals the ranking built from `balanceOf`.

use crate::common;

use std::time::Duration;

use alloy::{
    primitives::{Address, Bytes, U256},
    sol,
    sol_types::SolCall,
};
use common::{anvil::Anvil, workload::Chain, Client};
use ots_indexer::{
    db::{AccessMode, Db},
    index::check::check,
    source::NodeClient,
    sync::{Indexer, SyncConfig},
};
use serde_json::{json, Value};

sol! {
    interface Nft {
        function mint(address to, uint256 id) external;
        function transferFrom(address from, address to, uint256 id) external;
        function ownerOf(uint256 id) external view returns (address);
        function balanceOf(address owner) external view returns (uint256);
    }
}

const IDS: u64 = 40;
const HOLDERS: usize = 7;

/// `data` called on `to` at the head.
async fn eth_call(node: &Client, to: Address, data: Vec<u8>) -> Bytes {
    let answer = node.call("eth_call", json!([{"to": to, "data": Bytes::from(data)}, "latest"])).await;
    serde_json::from_value(answer).expect("call result")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn erc721_owners_and_holders_match_the_contract() {
    let anvil = Anvil::start(&[]);
    let mut chain = Chain::connect(&anvil.url);
    let accounts = chain.accounts().await;
    let a0 = accounts[0];
    let deployed = chain.deploy_artifact(a0, "DemoNft").await;
    chain.mine().await;
    let nft: Address =
        serde_json::from_value(chain.receipt_of(deployed).await["contractAddress"].clone()).expect("address");

    // Mints spread over the holders, then three rounds of moves in later blocks: each id moves
    // to a holder picked from the id and the round, which is sometimes its owner already.
    let mut owner: Vec<Address> = Vec::new();
    for id in 1..=IDS {
        let to = accounts[1 + (id as usize % HOLDERS)];
        chain.send_call(a0, nft, Nft::mintCall { to, id: U256::from(id) }.abi_encode()).await;
        owner.push(to);
    }
    chain.mine().await;
    let mut self_transfers = 0;
    for round in 1..=3u64 {
        for id in (1..=IDS).filter(|id| (id + round) % 3 != 0) {
            let from = owner[id as usize - 1];
            let to = accounts[1 + ((id * 5 + round * 3) as usize % HOLDERS)];
            self_transfers += usize::from(from == to);
            let call = Nft::transferFromCall { from, to, id: U256::from(id) };
            chain.send_call(from, nft, call.abi_encode()).await;
            owner[id as usize - 1] = to;
        }
        chain.mine().await;
    }
    assert!(self_transfers > 0, "no self-transfer in the workload");

    let node = NodeClient::connect(&anvil.url, Duration::from_secs(30)).expect("node");
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open db");
    let classifiers =
        ots_classifiers::BUILTIN_NAMES.iter().filter_map(|n| ots_classifiers::builtin(n)).collect();
    let config = SyncConfig {
        batch_blocks: 2,
        concurrency: 4,
        poll_interval: Duration::from_millis(50),
        ..Default::default()
    };
    let indexer = Indexer::open(db.clone(), node.clone(), classifiers, config).await.expect("indexer");
    indexer.sync_to(node.head().await.expect("head")).await.expect("sync");
    check(&db.begin_read().expect("read")).expect("a clean index passes check");

    let (client, server) = common::serve(&db, node).await;
    let node = Client::new(&anvil.url);

    for id in 1..=IDS {
        let answer = eth_call(&node, nft, Nft::ownerOfCall { id: U256::from(id) }.abi_encode()).await;
        let on_chain = Address::from_slice(&answer[12..32]);
        assert_eq!(on_chain, owner[id as usize - 1], "the workload's own record of id {id}");
        let indexed = client.call("ots2_getERC721Owner", json!([nft, format!("{id:#x}")])).await;
        assert_eq!(indexed, json!(on_chain), "owner of id {id}");
    }
    let never_minted = client.call("ots2_getERC721Owner", json!([nft, format!("{:#x}", IDS + 1)])).await;
    assert_eq!(never_minted, Value::Null);

    // The ranking from `balanceOf`: largest first, ties by address.
    let mut holders: Vec<(U256, Address)> = Vec::new();
    for &account in &accounts {
        let answer = eth_call(&node, nft, Nft::balanceOfCall { owner: account }.abi_encode()).await;
        let balance = U256::from_be_slice(&answer);
        if !balance.is_zero() {
            holders.push((balance, account));
        }
    }
    holders.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let want: Vec<Value> = holders.iter().map(|(b, h)| json!({"holder": h, "balance": b})).collect();
    assert!(want.len() >= 4, "only {} holders", want.len());
    let count = client.call("ots2_getTokenHolderCount", json!([nft])).await;
    assert_eq!(count, json!(want.len()));
    for size in [1, 2, 3, want.len()] {
        for idx in (0..=want.len()).step_by(size) {
            let page = client.call("ots2_getTokenHolders", json!([nft, idx, size])).await;
            let end = (idx + size).min(want.len());
            assert_eq!(page, json!({"total": want.len(), "results": want[idx..end]}), "page {idx}+{size}");
        }
    }
    server.stop().expect("stop");
    server.stopped().await;
}
