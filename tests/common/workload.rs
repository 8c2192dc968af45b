//! Deploys real OpenZeppelin tokens (plus a non-token, a junk-fallback contract and a batch
//! sender) on a node with unlocked dev accounts, sends a planned set of ERC20 transfers, and
//! records what it sent, so that tests can compare the index with it.
//!
//! Shared by the integration tests and the demo (`examples/demo_chain.rs`).

#![allow(dead_code)]

use std::{collections::BTreeMap, path::Path};

use alloy::{
    primitives::{Address, Bytes, B256, U256},
    providers::{DynProvider, Provider, ProviderBuilder},
    sol,
    sol_types::{SolCall, SolValue},
};
use serde_json::{json, Value};

#[path = "local_keys.rs"]
pub mod local_keys;
use local_keys::{LegacyTx, LocalKey};

sol! {
    function transfer(address to, uint256 value) returns (bool);
    function approve(address spender, uint256 value) returns (bool);
    function batchTransfer(address token, address[] to, uint256[] amounts);
}

/// `(token, from, to)` of one Transfer log.
pub type Transfer = (Address, Address, Address);

/// A deployed contract.
#[derive(Debug, Clone)]
pub struct Deployed {
    /// Artifact name.
    pub kind: String,
    /// Address.
    pub address: Address,
    /// Deployment block.
    pub block: u64,
    /// Creation transaction.
    pub tx: B256,
    /// Deployer.
    pub deployer: Address,
}

/// A transaction the workload sent and what transfers it was meant to make.
#[derive(Debug, Clone)]
pub struct Sent {
    /// Hash.
    pub hash: B256,
    /// `(token, from, to)` of every Transfer it should emit if it succeeds.
    pub transfers: Vec<(Address, Address, Address)>,
    /// Whether the plan expects it to succeed.
    pub should_succeed: bool,
    /// Block and index, known after mining.
    pub block: u64,
    /// Index in the block.
    pub index: u64,
}

/// Everything the workload did.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Dev accounts, in the node's order.
    pub accounts: Vec<Address>,
    /// ERC20 tokens deployed (OpenZeppelin), oldest first.
    pub tokens: Vec<Deployed>,
    /// Contracts that are not tokens.
    pub others: Vec<Deployed>,
    /// Every transaction, in sending order.
    pub sent: Vec<Sent>,
}

impl Workload {
    /// For each address, the hashes of the successful transactions in which it was `from` or
    /// `to` of a Transfer, in chain order (what `ots2_getERC20TransferList` must return).
    pub fn expected_transfer_txs(&self) -> BTreeMap<Address, Vec<B256>> {
        let mut by_address: BTreeMap<Address, Vec<(u64, u64, B256)>> = BTreeMap::new();
        for s in self.sent.iter().filter(|s| s.should_succeed) {
            for &(_, from, to) in &s.transfers {
                for a in [from, to] {
                    let list = by_address.entry(a).or_default();
                    if !list.iter().any(|(_, _, h)| *h == s.hash) {
                        list.push((s.block, s.index, s.hash));
                    }
                }
            }
        }
        by_address
            .into_iter()
            .map(|(a, mut list)| {
                list.sort_unstable();
                (a, list.into_iter().map(|(_, _, h)| h).collect())
            })
            .collect()
    }

    /// For each address, every token it sent or received with the `TxId` (`block << 20 | index`)
    /// of the first such transaction, by token (what `ots2_getERC20Holdings` must return).
    pub fn expected_holdings(&self) -> BTreeMap<Address, Vec<(Address, u64)>> {
        let mut first: BTreeMap<(Address, Address), u64> = BTreeMap::new();
        for s in self.sent.iter().filter(|s| s.should_succeed) {
            let id = (s.block << 20) | s.index;
            for &(token, from, to) in &s.transfers {
                for holder in [from, to] {
                    let slot = first.entry((holder, token)).or_insert(id);
                    *slot = (*slot).min(id);
                }
            }
        }
        let mut out: BTreeMap<Address, Vec<(Address, u64)>> = BTreeMap::new();
        for ((holder, token), id) in first {
            out.entry(holder).or_default().push((token, id));
        }
        out
    }

    /// All contracts in deployment order (block, then address bytes), as the match tables
    /// order them.
    pub fn contracts_in_index_order(&self) -> Vec<Deployed> {
        let mut all: Vec<Deployed> = self.tokens.iter().chain(&self.others).cloned().collect();
        all.sort_by_key(|d| (d.block, d.address));
        all
    }
}

/// A node client for the workload: raw JSON-RPC. The node's dev accounts sign node-side;
/// with local keys ([`Chain::with_local_keys`]) the workload signs itself.
#[derive(Debug, Clone)]
pub struct Chain {
    provider: DynProvider,
    nonces: BTreeMap<Address, u64>,
    pending: Vec<(B256, Vec<Transfer>, bool)>,
    /// Transactions per mined block.
    pub per_block: usize,
    local: Option<LocalAccounts>,
}

/// The accounts a chain signs for itself, and how its node mines.
#[derive(Debug, Clone)]
struct LocalAccounts {
    chain_id: u64,
    keys: Vec<LocalKey>,
    /// A node that seals a block as each transaction arrives (`geth --dev --dev.period 0`)
    /// has no `evm_mine`.
    seals_itself: bool,
}

/// The fee of every locally signed transaction: above any dev chain's base fee, and fixed, so
/// that a transaction's bytes (and hash) do not depend on the node.
const LOCAL_GAS_PRICE: u128 = 10_000_000_000;

fn artifact(name: &str) -> Bytes {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("testbed/build/artifacts.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {} (run testbed/setup.sh): {e}", path.display()));
    let all: Value = serde_json::from_str(&text).expect("artifacts.json is JSON");
    let hex = all[name]["bytecode"].as_str().unwrap_or_else(|| panic!("no artifact {name}"));
    hex.parse().expect("bytecode is hex")
}

impl Chain {
    /// Connects to `url`.
    pub fn connect(url: &str) -> Self {
        let provider = ProviderBuilder::default().connect_http(url.parse().expect("valid URL")).erased();
        Self { provider, nonces: BTreeMap::new(), pending: Vec::new(), per_block: 100, local: None }
    }

    /// Connects to `url`, signing for `keys` itself on chain `chain_id`; `seals_itself` for a
    /// node that mines each transaction as it comes. There each transaction is mined before the
    /// next is sent (`per_block` 1): a block the node packs from several senders may order them
    /// otherwise than they were sent.
    pub fn with_local_keys(url: &str, chain_id: u64, keys: Vec<LocalKey>, seals_itself: bool) -> Self {
        let per_block = if seals_itself { 1 } else { 100 };
        Self { local: Some(LocalAccounts { chain_id, keys, seals_itself }), per_block, ..Self::connect(url) }
    }

    async fn rpc<R: serde::de::DeserializeOwned>(&self, method: &'static str, params: Value) -> R {
        let answer: Value = self
            .provider
            .raw_request(method.into(), params)
            .await
            .unwrap_or_else(|e| panic!("{method} failed: {e}"));
        serde_json::from_value(answer).unwrap_or_else(|e| panic!("{method} answered unexpectedly: {e}"))
    }

    /// Sends a signed transaction. geth's pool checks the sender's balance against its own view
    /// of the state, which it brings to a new block a moment after the block is sealed: a sender
    /// funded in the block just sealed may still read as empty there, so that refusal is tried
    /// again for a while.
    async fn send_raw(&self, raw: impl serde::Serialize) -> B256 {
        let params = json!([raw]);
        for _ in 0..50 {
            match self.provider.raw_request::<_, B256>("eth_sendRawTransaction".into(), params.clone()).await
            {
                Ok(hash) => return hash,
                Err(e) if e.to_string().contains("insufficient funds") => {
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                Err(e) => panic!("eth_sendRawTransaction failed: {e}"),
            }
        }
        self.rpc("eth_sendRawTransaction", params).await
    }

    /// The accounts the workload sends from: the local keys' if any, else the node's unlocked ones.
    pub async fn accounts(&self) -> Vec<Address> {
        match &self.local {
            Some(local) => local.keys.iter().map(|k| k.address).collect(),
            None => self.rpc("eth_accounts", json!([])).await,
        }
    }

    async fn send(
        &mut self,
        from: Address,
        to: Option<Address>,
        data: Bytes,
        transfers: Vec<(Address, Address, Address)>,
        ok: bool,
    ) -> B256 {
        self.send_with_value(from, to, U256::ZERO, data, transfers, ok).await
    }

    /// Sends a call (or a creation, `to` none) carrying `value` wei, expected to emit
    /// `transfers` and to succeed if `ok` (mined by the next `mine`).
    pub async fn send_with_value(
        &mut self,
        from: Address,
        to: Option<Address>,
        value: U256,
        data: Bytes,
        transfers: Vec<(Address, Address, Address)>,
        ok: bool,
    ) -> B256 {
        let nonce = match self.nonces.get(&from) {
            Some(n) => *n,
            None => {
                let n: U256 = self.rpc("eth_getTransactionCount", json!([from, "pending"])).await;
                n.to::<u64>()
            }
        };
        self.nonces.insert(from, nonce + 1);
        let local =
            self.local.as_ref().and_then(|l| Some((l.chain_id, l.keys.iter().find(|k| k.address == from)?)));
        let hash: B256 = match local {
            Some((chain_id, key)) => {
                let tx = LegacyTx { nonce, gas_price: LOCAL_GAS_PRICE, gas: 3_000_000, to, value, data };
                self.send_raw(key.sign(&tx, chain_id)).await
            }
            None => {
                let mut tx = json!({
                    "from": from, "data": data, "value": value, "gas": "0x2dc6c0", "nonce": format!("{nonce:#x}"),
                });
                if let Some(to) = to {
                    tx["to"] = json!(to);
                }
                self.rpc("eth_sendTransaction", json!([tx])).await
            }
        };
        self.pending.push((hash, transfers, ok));
        if self.pending.len().is_multiple_of(self.per_block) {
            self.mine().await;
        }
        hash
    }

    /// Sends `amount` base units of `token` from `from` to `to` (mined by the next `mine`).
    pub async fn transfer(&mut self, token: Address, from: Address, to: Address, amount: u64) -> B256 {
        let data = transferCall { to, value: U256::from(amount) }.abi_encode();
        self.send(from, Some(token), data.into(), vec![(token, from, to)], true).await
    }

    /// Deploys artifact `name` (no constructor arguments) from `from` (mined by the next `mine`).
    pub async fn deploy_artifact(&mut self, from: Address, name: &str) -> B256 {
        self.deploy(from, name, Vec::new()).await
    }

    /// Sends a call with `data` to `to` (mined by the next `mine`).
    pub async fn send_call(&mut self, from: Address, to: Address, data: Vec<u8>) -> B256 {
        self.send(from, Some(to), data.into(), Vec::new(), true).await
    }

    /// The receipt of a mined transaction.
    pub async fn receipt_of(&self, hash: B256) -> Value {
        self.receipt(hash).await
    }

    /// Deploys a new OpenZeppelin ERC20 from `from` (mined by the next `mine`).
    pub async fn deploy_token(&mut self, from: Address, name: &str, symbol: &str) -> B256 {
        let args = (name.to_owned(), symbol.to_owned(), units(1_000_000)).abi_encode_params();
        self.deploy(from, "DemoToken", args).await
    }

    /// A transaction request for a token transfer, as `anvil_reorg` takes them.
    pub fn transfer_request(token: Address, from: Address, to: Address, amount: u64) -> Value {
        let data: Bytes = transferCall { to, value: U256::from(amount) }.abi_encode().into();
        json!({ "from": from, "to": token, "data": data, "gas": "0x2dc6c0" })
    }

    /// Any JSON-RPC call to the node.
    pub async fn call(&self, method: &'static str, params: Value) -> Value {
        self.rpc(method, params).await
    }

    /// Forgets locally tracked nonces (after a reorg rewrote history).
    pub fn reset_nonces(&mut self) {
        self.nonces.clear();
        self.pending.clear();
    }

    /// Sends `value` wei from `from` to `to` (mined by the next `mine`).
    pub async fn send_value(&mut self, from: Address, to: Address, value: U256) -> B256 {
        self.send_with_value(from, Some(to), value, Bytes::new(), Vec::new(), true).await
    }

    /// Mines what is pending into one block; on a node that seals by itself, waits until the
    /// last sent transaction is mined.
    pub async fn mine(&self) {
        if self.local.as_ref().is_some_and(|l| l.seals_itself) {
            if let Some((hash, _, _)) = self.pending.last() {
                self.receipt(*hash).await;
            }
            return;
        }
        let _: Value = self.rpc("evm_mine", json!([])).await;
    }

    /// Deploys artifact `name` with ABI-encoded constructor arguments (mined by the next `mine`).
    pub async fn deploy(&mut self, from: Address, name: &str, args: Vec<u8>) -> B256 {
        let mut code = artifact(name).to_vec();
        code.extend(args);
        self.send(from, None, code.into(), Vec::new(), true).await
    }

    async fn receipt(&self, hash: B256) -> Value {
        // A node that seals by itself may still be sealing it.
        for _ in 0..3000 {
            let answer: Result<Value, _> =
                self.provider.raw_request("eth_getTransactionReceipt".into(), json!([hash])).await;
            match answer {
                Ok(r) if !r.is_null() => return r,
                Ok(_) => {}
                // A fresh geth says so for a moment after it starts.
                Err(e) if e.to_string().contains("indexing is in progress") => {}
                Err(e) => panic!("eth_getTransactionReceipt failed: {e}"),
            }
            if !self.local.as_ref().is_some_and(|l| l.seals_itself) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("transaction {hash} was not mined")
    }

    /// Mines the rest and resolves every sent transaction's block, index and status.
    async fn settle(&mut self) -> Vec<(Sent, Value)> {
        self.mine().await;
        let mut out = Vec::new();
        for (hash, transfers, ok) in std::mem::take(&mut self.pending) {
            let r = self.receipt(hash).await;
            let num = |f: &str| {
                u64::from_str_radix(r[f].as_str().expect("hex field").trim_start_matches("0x"), 16)
                    .expect("hex")
            };
            let status = num("status") == 1;
            assert_eq!(status, ok, "transaction {hash} status {status}, planned {ok}");
            out.push((
                Sent {
                    hash,
                    transfers,
                    should_succeed: ok,
                    block: num("blockNumber"),
                    index: num("transactionIndex"),
                },
                r,
            ));
        }
        out
    }
}

fn units(n: u64) -> U256 {
    U256::from(n) * U256::from(10u64).pow(U256::from(18))
}

/// A small deterministic generator, so every run sends the same plan.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, bound: usize) -> usize {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 33) % bound as u64) as usize
    }
}

/// Runs the standard workload against the node at `url` (which must mine only on `evm_mine`):
/// account 2 ends with exactly 1 transfer, account 3 with 256, account 4 with 257, account 0
/// with more than 600; accounts 5–24 trade among themselves in two tokens, including
/// self-transfers, a transaction with several Transfer logs and a failing transfer.
pub async fn run(url: &str) -> Workload {
    run_on(Chain::connect(url)).await
}

/// Where the workload's local accounts get their ether.
#[derive(Debug, Clone, Copy)]
pub enum Faucet {
    /// The node's one unlocked account (`geth --dev`) pays.
    Unlocked(Address),
    /// `anvil_setBalance`.
    SetBalance,
}

/// The standard workload from 25 accounts whose keys the test holds, on chain `chain_id`:
/// a faucet account (also local) is given ether by `faucet` and pays each of them, then the
/// workload runs. On two nodes with the same chain id every transaction but the faucet's own
/// funding has the same hash.
pub async fn run_with_local_keys(url: &str, chain_id: u64, seals_itself: bool, faucet: Faucet) -> Workload {
    let funder = LocalKey::derive("faucet", 0);
    let keys = workload_keys();
    let accounts: Vec<Address> = keys.iter().map(|k| k.address).collect();
    let mut all_keys = keys.clone();
    all_keys.push(funder.clone());
    let mut chain = Chain::with_local_keys(url, chain_id, all_keys, seals_itself);
    let plenty = units(10_000_000);
    match faucet {
        Faucet::Unlocked(rich) => {
            let tx = json!({ "from": rich, "to": funder.address, "value": plenty });
            let hash: B256 = chain.rpc("eth_sendTransaction", json!([tx])).await;
            chain.mine().await;
            chain.receipt(hash).await;
        }
        Faucet::SetBalance => {
            let _: Value = chain.rpc("anvil_setBalance", json!([funder.address, plenty])).await;
        }
    }
    for &a in &accounts {
        chain.send_value(funder.address, a, units(10_000)).await;
    }
    chain.settle().await;
    chain.local = Some(LocalAccounts { keys, ..chain.local.expect("local keys") });
    run_on(chain).await
}

/// The keys of [`run_with_local_keys`]'s 25 accounts.
pub fn workload_keys() -> Vec<LocalKey> {
    (0..25).map(|i| LocalKey::derive("workload", i)).collect()
}

/// The standard workload on `chain` (see [`run`]).
pub async fn run_on(mut chain: Chain) -> Workload {
    let accounts = chain.accounts().await;
    assert!(accounts.len() >= 25, "the workload needs 25 dev accounts (anvil --accounts 30)");
    let (a0, a1) = (accounts[0], accounts[1]);

    let supply = units(1_000_000_000);
    let demo_args = ("Demo Token".to_owned(), "DEMO".to_owned(), supply).abi_encode_params();
    let second_args = ("Second Token".to_owned(), "SCND".to_owned(), supply).abi_encode_params();
    let mut deploys = vec![
        ("DemoToken", a0, chain.deploy(a0, "DemoToken", demo_args).await),
        ("Counter", a0, chain.deploy(a0, "Counter", Vec::new()).await),
        ("JunkFallback", a0, chain.deploy(a0, "JunkFallback", Vec::new()).await),
        ("Batcher", a0, chain.deploy(a0, "Batcher", Vec::new()).await),
    ];
    chain.mine().await;
    deploys.push(("DemoToken", a1, chain.deploy(a1, "DemoToken", second_args).await));

    let mut sent = chain.settle().await;
    let mut tokens = Vec::new();
    let mut others = Vec::new();
    for ((kind, deployer, hash), (s, receipt)) in deploys.into_iter().zip(sent.iter_mut()) {
        assert_eq!(s.hash, hash);
        let address: Address =
            serde_json::from_value(receipt["contractAddress"].clone()).expect("contract address");
        let d = Deployed { kind: kind.to_owned(), address, block: s.block, tx: hash, deployer };
        if kind == "DemoToken" {
            // The constructor mints the supply: a Transfer from the zero address.
            s.transfers.push((address, Address::ZERO, deployer));
            tokens.push(d);
        } else {
            others.push(d);
        }
    }
    let mut all_sent: Vec<Sent> = sent.into_iter().map(|(s, _)| s).collect();
    let (demo, second, batcher) = (tokens[0].address, tokens[1].address, others[2].address);

    let mut plan: Vec<(Address, Address, Address, U256, bool)> = Vec::new(); // token, from, to, amount, ok
    plan.push((demo, a0, accounts[2], units(5), true));
    plan.extend((0..256).map(|i| (demo, a0, accounts[3], U256::from(i + 1), true)));
    plan.extend((0..257).map(|i| (demo, a0, accounts[4], U256::from(i + 1), true)));
    let traders = &accounts[5..25];
    for round in 0..5 {
        plan.extend(traders.iter().map(|&t| (demo, a0, t, units(1_000 + round), true)));
    }
    plan.extend(traders.iter().take(10).map(|&t| (second, a1, t, units(50), true)));
    let mut rng = Lcg(42);
    for i in 0..200 {
        let from = traders[rng.next(traders.len())];
        let to = if i % 37 == 0 { from } else { traders[rng.next(traders.len())] };
        plan.push((demo, from, to, U256::from(1 + rng.next(1000)), true));
    }
    for &t in traders.iter().take(10) {
        plan.push((second, t, a0, units(1), true));
    }
    // More than account 2 holds: mined, reverted, no Transfer log.
    plan.push((demo, accounts[2], accounts[5], units(6), false));

    for (token, from, to, amount, ok) in plan {
        let data = transferCall { to, value: amount }.abi_encode();
        let transfers = if ok { vec![(token, from, to)] } else { Vec::new() };
        chain.send(from, Some(token), data.into(), transfers, ok).await;
    }
    // One transaction with three Transfer logs, two of them to the same account.
    let (payer, r1, r2) = (traders[0], traders[1], traders[2]);
    chain
        .send(
            payer,
            Some(demo),
            approveCall { spender: batcher, value: U256::MAX }.abi_encode().into(),
            Vec::new(),
            true,
        )
        .await;
    chain.mine().await;
    let batch = batchTransferCall { token: demo, to: vec![r1, r2, r1], amounts: vec![U256::from(1); 3] };
    chain
        .send(
            payer,
            Some(batcher),
            batch.abi_encode().into(),
            vec![(demo, payer, r1), (demo, payer, r2), (demo, payer, r1)],
            true,
        )
        .await;
    all_sent.extend(chain.settle().await.into_iter().map(|(s, _)| s));
    Workload { accounts, tokens, others, sent: all_sent }
}

/// Runs the workload at `url`, then mines `blocks` more blocks of `per_block` ERC20 transfers
/// each (from the first account to the traders): the chains of the sync benchmarks.
pub async fn run_with_transfer_blocks(url: &str, blocks: u64, per_block: u64) -> Workload {
    let work = run(url).await;
    add_transfer_blocks(Chain::connect(url), &work, blocks, per_block).await;
    work
}

/// Sends `blocks` × `per_block` ERC20 transfers from the workload's first account to its
/// traders on `chain`, mining after each `per_block` (a node that seals by itself packs them as
/// they come), and waits until the last is mined.
pub async fn add_transfer_blocks(mut chain: Chain, work: &Workload, blocks: u64, per_block: u64) {
    chain.per_block = usize::MAX;
    let (acc, demo) = (&work.accounts, work.tokens[0].address);
    let mut last = None;
    for b in 0..blocks as usize {
        for t in 0..per_block as usize {
            last = Some(chain.transfer(demo, acc[0], acc[(b + t) % 20 + 5], 1 + t as u64).await);
        }
        chain.mine().await;
    }
    if let Some(hash) = last {
        chain.receipt(hash).await;
    }
}
