//! The address pages of `ots_` — `searchTransactionsBefore/After`, `getTransactionBySenderAndNonce`
//! and `getContractCreator` — answered from our appearance index, against Anvil's own `ots_` on
//! the same chain, over HTTP, with `ots_` and `erigon_` never forwarded.
//!
//! Anvil scans its traces per call; its pages and ours hold the same transactions and receipts.
//! Where Anvil departs from Erigon we follow Erigon (docs/api.md): `lastPage`/`firstPage` say
//! whether more transactions exist (Anvil says whether its scan reached the chain's end, so a
//! history that exactly fills a page is "not last" there), and a contract without code at the
//! head has no creator (Anvil names one for a contract destroyed in its creating transaction).

use crate::common;

use std::{collections::BTreeMap, time::Duration};

use alloy_primitives::{keccak256, Address, B256, U256};
use common::{anvil::Anvil, Client};
use k256::ecdsa::SigningKey;
use ots_indexer::{
    db::{AccessMode, Db},
    index::{check::check, check::dump, journal::unwind_to},
    rpc::{self, ProxyPolicy, RpcContext, ServerOptions},
    source::{NodeClient, TraceChoice},
    sync::{Indexer, SyncConfig},
};
use serde_json::{json, Value};

alloy::sol! {
    interface Contracts {
        function all(address to) external payable;
        function make() external returns (address made);
        function makeAndDestroy() external;
        function makeInFailingCall() external;
    }
}
use alloy::sol_types::SolCall;

/// Private keys of Anvil's dev accounts 2 and 3 (its well-known test mnemonic).
const KEY_2: &str = "5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a";
const KEY_3: &str = "7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6";

struct Node {
    rpc: Client,
}

fn hex_u64(v: &Value) -> u64 {
    u64::from_str_radix(v.as_str().expect("hex").trim_start_matches("0x"), 16).expect("hex")
}

impl Node {
    async fn send(&self, tx: Value) -> B256 {
        let hash = self.rpc.call("eth_sendTransaction", json!([tx])).await;
        serde_json::from_value(hash).expect("hash")
    }

    async fn pay(&self, from: Address, to: Address, wei: u64) -> B256 {
        self.send(json!({"from": from, "to": to, "value": format!("{wei:#x}"), "gas": "0x186a0"})).await
    }

    async fn call(&self, from: Address, to: Address, data: Vec<u8>, wei: u64) -> B256 {
        let data = alloy_primitives::hex::encode_prefixed(data);
        self.send(
            json!({"from": from, "to": to, "data": data, "value": format!("{wei:#x}"), "gas": "0x2dc6c0"}),
        )
        .await
    }

    async fn deploy(&self, from: Address, name: &str) -> B256 {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testbed/build/artifacts.json");
        let all: Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("artifacts")).expect("json");
        let code = all[name]["bytecode"].as_str().expect("bytecode").to_owned();
        self.send(json!({"from": from, "data": code, "gas": "0x2dc6c0"})).await
    }

    async fn mine(&self) {
        self.rpc.call("evm_mine", json!([])).await;
    }

    async fn receipt(&self, hash: B256) -> Value {
        let r = self.rpc.call("eth_getTransactionReceipt", json!([hash])).await;
        assert!(!r.is_null(), "{hash} not mined");
        assert_eq!(r["status"], json!("0x1"), "{hash} failed");
        r
    }

    async fn nonce(&self, who: Address) -> u64 {
        hex_u64(&self.rpc.call("eth_getTransactionCount", json!([who, "latest"])).await)
    }
}

/// An EIP-7702 authorization of `key`'s account for `delegate` at `nonce`, as JSON-RPC takes it.
fn authorize(key: &str, chain_id: u64, delegate: Address, nonce: u64) -> (Address, Value) {
    let key = SigningKey::from_slice(&alloy_primitives::hex::decode(key).expect("hex")).expect("key");
    let point = key.verifying_key().to_encoded_point(false);
    let authority = Address::from_slice(&keccak256(&point.as_bytes()[1..])[12..]);
    // keccak(0x05 ‖ rlp([chain_id, address, nonce])): minimal big-endian integers.
    let rlp_int = |v: u64| -> Vec<u8> {
        let bytes: Vec<u8> = v.to_be_bytes().into_iter().skip_while(|b| *b == 0).collect();
        match bytes.as_slice() {
            [] => vec![0x80],
            [b] if *b < 0x80 => vec![*b],
            _ => [vec![0x80 + bytes.len() as u8], bytes].concat(),
        }
    };
    let mut items = rlp_int(chain_id);
    items.push(0x94);
    items.extend_from_slice(delegate.as_slice());
    items.extend(rlp_int(nonce));
    let mut message = vec![0x05, 0xc0 + items.len() as u8];
    message.extend(items);
    let (signature, recovery) = key.sign_prehash_recoverable(keccak256(&message).as_slice()).expect("signs");
    let bytes = signature.to_bytes();
    let auth = json!({
        "chainId": format!("{chain_id:#x}"),
        "address": delegate,
        "nonce": format!("{nonce:#x}"),
        "yParity": format!("{:#x}", u8::from(recovery.is_y_odd())),
        "r": format!("0x{}", alloy_primitives::hex::encode(&bytes[..32])),
        "s": format!("0x{}", alloy_primitives::hex::encode(&bytes[32..])),
    });
    (authority, auth)
}

/// What the chain holds that the assertions name.
struct Built {
    accounts: Vec<Address>,
    x25: Address,
    x26: Address,
    crowded: Address,
    internal_only: Address,
    contracts: Vec<Address>,
    destroyed: Address,
    delegated: Vec<Address>,
}

async fn build(node: &Node) -> Built {
    let accounts: Vec<Address> =
        serde_json::from_value(node.rpc.call("eth_accounts", json!([])).await).expect("accounts");
    let a = |i: usize| accounts[i];
    let factory = node.deploy(a(0), "Factory").await;
    let ops = node.deploy(a(0), "InternalOps").await;
    let counter = node.deploy(a(0), "Counter").await;
    node.mine().await;
    let address_of =
        |r: Value| -> Address { serde_json::from_value(r["contractAddress"].clone()).expect("created") };
    let factory = address_of(node.receipt(factory).await);
    let ops = address_of(node.receipt(ops).await);
    let counter = address_of(node.receipt(counter).await);

    // 25 and 26 appearances over several blocks, sent by two senders.
    let (x25, x26) = (Address::repeat_byte(0x25), Address::repeat_byte(0x26));
    for i in 0..26 {
        node.pay(a(1), x26, 1).await;
        if i < 25 {
            node.pay(a(4), x25, 1).await;
        }
        if i % 3 == 2 {
            node.mine().await;
        }
    }
    node.mine().await;
    // One block of 30 transactions to one address, then two more blocks of it.
    let crowded = Address::repeat_byte(0xcc);
    for _ in 0..30 {
        node.pay(a(5), crowded, 1).await;
    }
    node.mine().await;
    for _ in 0..2 {
        node.pay(a(6), crowded, 1).await;
        node.mine().await;
    }
    // Internal operations: a value call to an address that appears nowhere else, a CREATE that
    // selfdestructs, a CREATE2 that stays; a factory's CREATE; one created and destroyed in one
    // transaction; a CREATE inside a reverted call.
    let internal_only = Address::repeat_byte(0x1e);
    let all = node.call(a(6), ops, Contracts::allCall { to: internal_only }.abi_encode(), 4000).await;
    let made = node.call(a(7), factory, Contracts::makeCall {}.abi_encode(), 0).await;
    let ephemeral = node.call(a(7), factory, Contracts::makeAndDestroyCall {}.abi_encode(), 0).await;
    node.call(a(7), factory, Contracts::makeInFailingCallCall {}.abi_encode(), 0).await;
    node.mine().await;
    let made_log = |r: &Value, at: usize| -> Address {
        let data = r["logs"][at]["data"].as_str().expect("data");
        data[data.len() - 40..].parse().expect("address")
    };
    let made = made_log(&node.receipt(made).await, 0);
    let destroyed = made_log(&node.receipt(ephemeral).await, 0);
    node.receipt(all).await;
    let payer2 = {
        // CREATE2 by InternalOps with salt 1 of Payer's init code.
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testbed/build/artifacts.json");
        let arts: Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("artifacts")).expect("json");
        let code: alloy_primitives::Bytes =
            arts["Payer"]["bytecode"].as_str().expect("payer").parse().expect("hex");
        ops.create2(B256::from(U256::from(1)), keccak256(&code))
    };

    // EIP-7702: account 2's nonce moves by an authorization another account sends, and account
    // 3 authorizes in its own transaction (its nonce moves by two).
    let chain_id = hex_u64(&node.rpc.call("eth_chainId", json!([])).await);
    node.pay(a(2), a(9), 1).await;
    node.mine().await;
    let (authority2, auth2) = authorize(KEY_2, chain_id, counter, node.nonce(a(2)).await);
    assert_eq!(authority2, a(2), "key 2 is dev account 2");
    node.send(json!({"from": a(0), "to": a(9), "gas": "0x186a0", "authorizationList": [auth2]})).await;
    node.mine().await;
    node.pay(a(2), a(9), 1).await;
    node.mine().await;
    let n3 = node.nonce(a(3)).await;
    let (authority3, auth3) = authorize(KEY_3, chain_id, counter, n3 + 1);
    assert_eq!(authority3, a(3), "key 3 is dev account 3");
    node.send(json!({"from": a(3), "to": a(9), "gas": "0x186a0", "authorizationList": [auth3]})).await;
    node.mine().await;
    node.pay(a(3), a(9), 1).await;
    node.mine().await;
    assert_eq!(node.nonce(a(2)).await, 3, "two transactions and one authorization");
    assert_eq!(node.nonce(a(3)).await, n3 + 3, "two transactions and one authorization");

    let delegated = vec![a(2), a(3)];
    Built {
        accounts,
        x25,
        x26,
        crowded,
        internal_only,
        contracts: vec![factory, ops, counter, made, payer2],
        destroyed,
        delegated,
    }
}

/// Every transaction `address` appears in, newest first, as Anvil's scan finds them.
async fn history(anvil: &Client, address: Address) -> Vec<(Value, Value)> {
    let all = anvil.call("ots_searchTransactionsBefore", json!([address, 0, 100_000])).await;
    let txs = all["txs"].as_array().expect("txs").clone();
    let receipts = all["receipts"].as_array().expect("receipts").clone();
    txs.into_iter().zip(receipts).map(|(t, r)| (t, normal_receipt(r))).collect()
}

fn normal_receipt(mut r: Value) -> Value {
    if let Some(fields) = r.as_object_mut() {
        fields.remove("blockTimestamp");
    }
    r
}

fn block_of(tx: &Value) -> u64 {
    hex_u64(&tx["blockNumber"])
}

/// The page Erigon's rules give over `all` (newest first): whole blocks until `size` is reached.
fn erigon_page(
    all: &[(Value, Value)],
    before: bool,
    block: u64,
    size: usize,
) -> (Vec<(Value, Value)>, bool, bool) {
    let mut candidates: Vec<(Value, Value)> = if before {
        all.iter().filter(|(t, _)| block == 0 || block_of(t) < block).cloned().collect()
    } else {
        all.iter().rev().filter(|(t, _)| block_of(t) > block).cloned().collect()
    };
    let mut take = 0;
    while take < candidates.len()
        && (take < size || block_of(&candidates[take].0) == block_of(&candidates[take - 1].0))
    {
        take += 1;
    }
    let more = take < candidates.len();
    candidates.truncate(take);
    if before {
        (candidates, block == 0, !more)
    } else {
        candidates.reverse();
        (candidates, !more, block == 0)
    }
}

/// Pages through `address`'s history both ways as the UI does, comparing each page with
/// Erigon's rules over Anvil's history; returns the number of transactions seen.
async fn page_both_ways(ours: &Client, all: &[(Value, Value)], address: Address) -> usize {
    for before in [true, false] {
        let method = if before { "ots_searchTransactionsBefore" } else { "ots_searchTransactionsAfter" };
        let mut block = 0;
        let mut seen = Vec::new();
        loop {
            let page = ours.call(method, json!([address, block, 25])).await;
            let (want, first, last) = erigon_page(all, before, block, 25);
            let got_txs = page["txs"].as_array().expect("txs");
            let got_receipts: Vec<Value> =
                page["receipts"].as_array().expect("receipts").iter().cloned().map(normal_receipt).collect();
            let want_txs: Vec<Value> = want.iter().map(|(t, _)| t.clone()).collect();
            let want_receipts: Vec<Value> = want.iter().map(|(_, r)| r.clone()).collect();
            assert_eq!(got_txs, &want_txs, "{method} {address} from block {block}: transactions");
            assert_eq!(got_receipts, want_receipts, "{method} {address} from block {block}: receipts");
            assert_eq!(
                (page["firstPage"].clone(), page["lastPage"].clone()),
                (json!(first), json!(last)),
                "{method} {address} from {block}"
            );
            seen.extend(want_txs.iter().map(|t| t["hash"].clone()));
            let done = if before { last } else { first };
            if done || want.is_empty() {
                break;
            }
            block = if before { block_of(&want.last().expect("page").0) } else { block_of(&want[0].0) };
        }
        let mut expected: Vec<Value> = all.iter().map(|(t, _)| t["hash"].clone()).collect();
        if !before {
            // Pages come newest first, each page's block range newer than the last.
            let mut pages_in_order = seen.clone();
            pages_in_order.sort_by_key(|h| expected.iter().position(|e| e == h));
            seen = pages_in_order;
        }
        expected.dedup();
        assert_eq!(seen, expected, "{method} {address}: every transaction once");
    }
    all.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn address_pages_equal_anvils_but_for_erigons_differences() {
    let anvil = Anvil::start(&[]);
    let node = Node { rpc: Client::new(&anvil.url) };
    let built = build(&node).await;

    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("db");
    let source = NodeClient::connect(&anvil.url, Duration::from_secs(30))
        .expect("node")
        .with_traces(TraceChoice::Auto)
        .await
        .expect("tracer");
    let indexer =
        Indexer::open(db.clone(), source.clone(), vec![], SyncConfig::default()).await.expect("indexer");
    let head = source.head().await.expect("head");
    indexer.sync_to(head).await.expect("sync");
    indexer.close().await.expect("close");
    check(&db.begin_read().expect("read")).expect("the index checks");

    let options = ServerOptions {
        proxy: ProxyPolicy::new(&[], &["ots_".to_owned(), "erigon_".to_owned()]),
        ..ServerOptions::default()
    };
    let ctx = RpcContext::new(db.clone(), source);
    let (addr, server) =
        rpc::serve("127.0.0.1:0".parse().expect("addr"), ctx, &options).await.expect("serve");
    let ours = Client::new(&format!("http://{addr}"));
    let theirs = &node.rpc;

    // Address histories, paged both ways, equal Anvil's transactions and receipts.
    let mut addresses: Vec<Address> = built.accounts[..10].to_vec();
    addresses.extend([built.x25, built.x26, built.crowded, built.internal_only, built.destroyed]);
    addresses.extend(&built.contracts);
    let mut sizes = BTreeMap::new();
    for address in &addresses {
        let all = history(theirs, *address).await;
        sizes.insert(*address, page_both_ways(&ours, &all, *address).await);
    }
    assert_eq!(sizes[&built.x25], 25);
    assert_eq!(sizes[&built.x26], 26);
    assert_eq!(sizes[&built.internal_only], 1, "seen only as an internal call's target");
    assert!(sizes[&built.destroyed] >= 1, "a destroyed contract keeps its history");
    let crowded = ours.call("ots_searchTransactionsBefore", json!([built.crowded, 0, 25])).await;
    assert_eq!(
        crowded["txs"].as_array().expect("txs").len(),
        32,
        "two blocks of one each, then the whole block of 30"
    );
    let oldest = ours.call("ots_searchTransactionsAfter", json!([built.crowded, 0, 25])).await;
    assert_eq!(oldest["txs"].as_array().expect("txs").len(), 30, "a block is never split");
    // Exactly 25: one page, and it is the last (Anvil says it is not).
    let x25 = ours.call("ots_searchTransactionsBefore", json!([built.x25, 0, 25])).await;
    assert_eq!((x25["firstPage"].clone(), x25["lastPage"].clone()), (json!(true), json!(true)));
    let anvil_x25 = theirs.call("ots_searchTransactionsBefore", json!([built.x25, 0, 25])).await;
    assert_eq!(anvil_x25["lastPage"], json!(false), "Anvil's documented difference");

    // A page over the cap is refused with Erigon's message.
    let (code, message) =
        ours.try_call("ots_searchTransactionsBefore", json!([built.x25, 0, 26])).await.expect_err("cap");
    assert_eq!((code, message.contains("max allowed page size: 25")), (-32000, true), "{message}");

    // Sender and nonce: every nonce of every sender, one past the end, and the nonces EIP-7702
    // authorizations used up.
    for sender in &built.accounts[..10] {
        let next = node.nonce(*sender).await;
        for nonce in 0..=next {
            let want = theirs.call("ots_getTransactionBySenderAndNonce", json!([sender, nonce])).await;
            let got = ours.call("ots_getTransactionBySenderAndNonce", json!([sender, nonce])).await;
            assert_eq!(got, want, "sender {sender} nonce {nonce}");
        }
    }
    for delegated in &built.delegated {
        let mut found = 0;
        for nonce in 0..node.nonce(*delegated).await {
            found += usize::from(
                !ours.call("ots_getTransactionBySenderAndNonce", json!([delegated, nonce])).await.is_null(),
            );
        }
        assert_eq!(found, 2, "{delegated}: two transactions, one nonce used by an authorization");
    }

    // Creators: equal Anvil's for live contracts, the factory for one made inside a call; null
    // for EOAs, delegated EOAs and a contract destroyed in its creating transaction.
    for contract in &built.contracts {
        let want = theirs.call("ots_getContractCreator", json!([contract])).await;
        assert!(!want.is_null(), "{contract}");
        assert_eq!(
            ours.call("ots_getContractCreator", json!([contract])).await,
            want,
            "creator of {contract}"
        );
    }
    let made = ours.call("ots_getContractCreator", json!([built.contracts[3]])).await;
    assert_eq!(made["creator"], json!(built.contracts[0]), "a factory's CREATE names the factory");
    for nobody in [built.accounts[1], built.delegated[0], built.destroyed] {
        assert_eq!(ours.call("ots_getContractCreator", json!([nobody])).await, Value::Null, "{nobody}");
    }
    assert!(
        !theirs.call("ots_getContractCreator", json!([built.destroyed])).await.is_null(),
        "Anvil's difference"
    );
    let _ = server.stop();

    // Unwinding and indexing the same blocks again gives the same tables.
    let before = dump(&db).expect("dump");
    let txn = db.begin_write().expect("write");
    unwind_to(&txn, head - 8).expect("unwind");
    txn.commit().expect("commit");
    assert_ne!(dump(&db).expect("dump"), before, "the unwind removed something");
    let source = NodeClient::connect(&anvil.url, Duration::from_secs(30))
        .expect("node")
        .with_traces(TraceChoice::Auto)
        .await
        .expect("tracer");
    let indexer = Indexer::open(db.clone(), source, vec![], SyncConfig::default()).await.expect("indexer");
    indexer.sync_to(head).await.expect("sync");
    indexer.close().await.expect("close");
    assert!(dump(&db).expect("dump") == before, "re-indexed tables differ");
    check(&db.begin_read().expect("read")).expect("the index checks");
}
