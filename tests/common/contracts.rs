//! A chain of real contracts for the classifier tests and the node comparisons: OpenZeppelin
//! tokens, an NFT, an ERC1155, a vault, EIP-1167 clones made inside a factory (CREATE, CREATE2,
//! initialised at once or later), and the real-world quirks (bytes32 metadata, no-return
//! transfer, an NFT without ERC165, a fake Transfer emitter); and factories that create
//! contracts inside calls.

use alloy::{
    primitives::{Address, B256, U256},
    sol,
    sol_types::{SolCall, SolValue},
};
use serde_json::{json, Value};

use super::workload::Chain;

sol! {
    #[allow(missing_docs)]
    interface Nft { function mint(address to, uint256 id) external; }
    interface Multi {
        function mint(address to, uint256 id, uint256 amount) external;
        function mintBatch(address to, uint256[] ids, uint256[] amounts) external;
        function move(address from, address to, uint256 id, uint256 amount) external;
        function balanceOf(address account, uint256 id) external view returns (uint256);
    }
    interface Factory {
        function clone(address implementation) external returns (address);
        function cloneDeterministic(address implementation, bytes32 salt) external returns (address);
        function cloneAndInitialize(address implementation, string name_, string symbol_) external returns (address);
    }
    interface Cloneable { function initialize(string name_, string symbol_, address to, uint256 amount) external; }
    interface Fake { function emitTransfer(address from, address to, uint256 value) external; }
    interface Token { function transfer(address to, uint256 value) external; }
}

/// What the test deployed, and where.
pub struct Deployed {
    pub blocks: [u64; 4],
    pub asset: Address,
    pub mkr: Address,
    pub usdt: Address,
    pub nft: Address,
    pub multi: Address,
    pub implementation: Address,
    pub factory: Address,
    pub plain_nft: Address,
    pub fake: Address,
    pub vault: Address,
    pub clone: Address,
    pub clone_create2: Address,
    pub clone_initialised: Address,
    pub accounts: Vec<Address>,
}

pub fn hex_u64(v: &Value) -> u64 {
    u64::from_str_radix(v.as_str().expect("hex string").trim_start_matches("0x"), 16).expect("hex")
}

pub async fn mined_block(chain: &Chain, hash: B256) -> u64 {
    let r = chain.receipt_of(hash).await;
    assert_eq!(r["status"], json!("0x1"), "transaction {hash} failed");
    hex_u64(&r["blockNumber"])
}

pub async fn created(chain: &Chain, hash: B256) -> Address {
    serde_json::from_value(chain.receipt_of(hash).await["contractAddress"].clone()).expect("contract address")
}

/// The `Cloned(address)` event of a factory call.
pub async fn cloned(chain: &Chain, hash: B256) -> Address {
    let r = chain.receipt_of(hash).await;
    let log = r["logs"].as_array().expect("logs").last().expect("Cloned log").clone();
    let data: alloy::primitives::Bytes = serde_json::from_value(log["data"].clone()).expect("data");
    Address::from_slice(&data[12..32])
}

pub async fn deploy_everything(url: &str) -> Deployed {
    let mut chain = Chain::connect(url);
    let accounts = chain.accounts().await;
    let a0 = accounts[0];

    // Block 1: the contracts themselves.
    let asset_args = ("Asset Token".to_owned(), "AST".to_owned(), U256::from(10u64).pow(U256::from(24)));
    let asset = chain.deploy(a0, "DemoToken", asset_args.abi_encode_params()).await;
    let mkr = chain.deploy_artifact(a0, "Bytes32MetadataToken").await;
    let usdt = chain.deploy_artifact(a0, "NoReturnToken").await;
    let nft = chain.deploy_artifact(a0, "DemoNft").await;
    let multi = chain.deploy_artifact(a0, "DemoMulti").await;
    let implementation = chain.deploy_artifact(a0, "CloneableToken").await;
    let factory = chain.deploy_artifact(a0, "CloneFactory").await;
    let plain_nft = chain.deploy_artifact(a0, "PlainNft").await;
    let fake = chain.deploy_artifact(a0, "FakeTransferEmitter").await;
    chain.mine().await;
    let b1 = mined_block(&chain, asset).await;
    let (asset, mkr, usdt, nft, multi, implementation, factory, plain_nft, fake) = (
        created(&chain, asset).await,
        created(&chain, mkr).await,
        created(&chain, usdt).await,
        created(&chain, nft).await,
        created(&chain, multi).await,
        created(&chain, implementation).await,
        created(&chain, factory).await,
        created(&chain, plain_nft).await,
        created(&chain, fake).await,
    );

    // Block 2: a vault, and clones made inside the factory (CREATE, CREATE2, initialised at once).
    let vault = chain.deploy(a0, "DemoVault", asset.abi_encode()).await;
    let clone = chain.send_call(a0, factory, Factory::cloneCall { implementation }.abi_encode()).await;
    let salt = B256::repeat_byte(0x5a);
    let clone2 = chain
        .send_call(a0, factory, Factory::cloneDeterministicCall { implementation, salt }.abi_encode())
        .await;
    let init =
        Factory::cloneAndInitializeCall { implementation, name_: "Clone A".into(), symbol_: "CLA".into() };
    let clone_init = chain.send_call(a0, factory, init.abi_encode()).await;
    chain.mine().await;
    let b2 = mined_block(&chain, vault).await;
    let (vault, clone, clone_create2, clone_initialised) = (
        created(&chain, vault).await,
        cloned(&chain, clone).await,
        cloned(&chain, clone2).await,
        cloned(&chain, clone_init).await,
    );

    // Block 3: transfers of the quirky tokens, an NFT without ERC165, fake Transfer logs.
    let t = |to: Address| Token::transferCall { to, value: U256::from(5) }.abi_encode();
    let first = chain.send_call(a0, mkr, t(accounts[1])).await;
    chain.send_call(a0, usdt, t(accounts[2])).await;
    chain.send_call(a0, nft, Nft::mintCall { to: accounts[3], id: U256::from(1) }.abi_encode()).await;
    let mint = Multi::mintCall { to: accounts[4], id: U256::from(7), amount: U256::from(10) };
    chain.send_call(a0, multi, mint.abi_encode()).await;
    let batch = Multi::mintBatchCall {
        to: accounts[9],
        ids: vec![U256::from(1), U256::from(2)],
        amounts: vec![U256::from(3); 2],
    };
    chain.send_call(a0, multi, batch.abi_encode()).await;
    let moved =
        Multi::moveCall { from: accounts[9], to: accounts[4], id: U256::from(2), amount: U256::from(1) };
    chain.send_call(a0, multi, moved.abi_encode()).await;
    let fake_log = Fake::emitTransferCall { from: accounts[5], to: accounts[6], value: U256::from(1) };
    chain.send_call(a0, fake, fake_log.abi_encode()).await;
    chain.send_call(a0, plain_nft, Nft::mintCall { to: accounts[7], id: U256::from(42) }.abi_encode()).await;
    chain.mine().await;
    let b3 = mined_block(&chain, first).await;

    // Block 4: the plain clone is initialised (its first Transfer), the fake logs again.
    let init = Cloneable::initializeCall {
        name_: "Late".into(),
        symbol_: "LATE".into(),
        to: accounts[8],
        amount: U256::from(9),
    };
    let late = chain.send_call(a0, clone, init.abi_encode()).await;
    chain.send_call(a0, fake, fake_log.abi_encode()).await;
    chain.mine().await;
    let b4 = mined_block(&chain, late).await;

    Deployed {
        blocks: [b1, b2, b3, b4],
        asset,
        mkr,
        usdt,
        nft,
        multi,
        implementation,
        factory,
        plain_nft,
        fake,
        vault,
        clone,
        clone_create2,
        clone_initialised,
        accounts,
    }
}

sol! {
    #[allow(missing_docs)]
    interface Makers {
        function make() external returns (address);
        function make2(bytes32 salt) external returns (address);
        function makeToken(string name, string symbol) external returns (address);
        function makeAndDestroy() external;
        function makeInFailingCall() external;
        function createPair(address tokenA, address tokenB) external returns (address);
    }
}

/// Calldata of `Factory`'s ways to create: CREATE, CREATE2, a token inside a call,
/// create-and-destroy, and a creation undone by a reverted call.
pub fn factory_calls() -> Vec<Vec<u8>> {
    vec![
        Makers::makeCall {}.abi_encode(),
        Makers::make2Call { salt: B256::repeat_byte(7) }.abi_encode(),
        Makers::makeTokenCall { name: "Made Token".into(), symbol: "MADE".into() }.abi_encode(),
        Makers::makeAndDestroyCall {}.abi_encode(),
        Makers::makeInFailingCallCall {}.abi_encode(),
    ]
}

/// What [`deploy_factories`] made.
pub struct Factories {
    /// The block of its calls.
    pub block: u64,
    /// `Factory` (contracts made inside calls).
    pub factory: Address,
    /// `PairFactory` (Uniswap-V2-style CREATE2 pairs).
    pub pair_factory: Address,
    /// The transaction of `createPair`.
    pub create_pair: B256,
    /// Every transaction sent to the factories.
    pub calls: Vec<B256>,
}

/// Deploys `Factory` and `PairFactory`, then in one block makes a Counter by CREATE and by
/// CREATE2, a token inside a call, a contract created and destroyed in one transaction, one
/// whose creating call reverted, and a pair of `a` and `b` by CREATE2 inside `createPair`.
pub async fn deploy_factories(url: &str, a: Address, b: Address) -> Factories {
    let mut chain = Chain::connect(url);
    let a0 = chain.accounts().await[0];
    let factory = chain.deploy_artifact(a0, "Factory").await;
    let pair_factory = chain.deploy_artifact(a0, "PairFactory").await;
    chain.mine().await;
    let (factory, pair_factory) = (created(&chain, factory).await, created(&chain, pair_factory).await);
    let mut calls = Vec::new();
    for data in factory_calls() {
        calls.push(chain.send_call(a0, factory, data).await);
    }
    let create_pair =
        chain.send_call(a0, pair_factory, Makers::createPairCall { tokenA: a, tokenB: b }.abi_encode()).await;
    calls.push(create_pair);
    chain.mine().await;
    let block = mined_block(&chain, create_pair).await;
    for c in &calls {
        mined_block(&chain, *c).await;
    }
    Factories { block, factory, pair_factory, create_pair, calls }
}

/// Indexes the chain at `url` with every built-in classifier and no call frames, and checks what
/// [`deploy_everything`]'s clones become: the one initialised blocks after its creation is found
/// at its first Transfer with every class its code shows (ERC20 and EIP-1167), the one created
/// and initialised at once likewise in its block, and every clone's implementation is answered
/// from its code, even the one never indexed.
pub async fn late_clone_classes(url: &str, d: &Deployed) {
    let (_dir, db, node) = super::world::index_with(url, ots_indexer::source::TraceChoice::None, 2).await;
    let (client, server) = super::serve(&db, node).await;
    let attrs = |a: Address| client.call("ots2_getAddressAttributes", json!([a]));
    for clone in [d.clone, d.clone_initialised] {
        assert_eq!(attrs(clone).await, json!({"erc20": true, "erc1167": true}), "classes of {clone}");
    }
    let page = client.call("ots2_getERC1167List", json!([0, 10])).await;
    let rows: Vec<(u64, Value)> = page["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| (hex_u64(&r["blockNumber"]), r["address"].clone()))
        .collect();
    assert_eq!(
        rows,
        vec![(d.blocks[1], json!(d.clone_initialised)), (d.blocks[3], json!(d.clone))],
        "listed where each was found"
    );
    for clone in [d.clone, d.clone_create2, d.clone_initialised] {
        assert_eq!(
            client.call("ots2_getERC1167Impl", json!([clone])).await,
            json!(d.implementation),
            "the code of {clone} is the pattern"
        );
    }
    let (code, message) =
        client.try_call("ots2_getERC1167Impl", json!([d.asset])).await.expect_err("no proxy");
    assert_eq!(code, -32000);
    assert!(message.contains("not an ERC1167 minimal proxy"), "{message}");
    server.stop().ok();
}
