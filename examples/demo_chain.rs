//! Fills a local dev node with demo contracts and ERC20 transfers (the same workload the
//! integration tests use), then turns automine on so that the chain keeps moving as you use it.
//!
//! `cargo run --example demo_chain -- http://127.0.0.1:8545` against an
//! `anvil --accounts 30 --no-mining` node; `scripts/demo.sh` does all of it for you.

// The tests' workload, shared: its `pub` items are for whoever includes it.
#[allow(unreachable_pub)]
#[path = "../tests/common/workload.rs"]
mod workload;

use alloy::{
    primitives::{Address, Bytes, U256},
    providers::{DynProvider, Provider, ProviderBuilder},
    sol,
    sol_types::SolCall,
};

sol! {
    function all(address to) external payable;
    function make() external returns (address made);
    function mint(address to, uint256 id) external;
    function transferFrom(address from, address to, uint256 id) external;
}

/// An ERC721 with three ids minted to one account and one of them passed on, for the NFT pages.
async fn nft(url: &str, accounts: &[Address]) {
    let mut chain = workload::Chain::connect(url);
    let (minter, holder, next) = (accounts[0], accounts[2], accounts[3]);
    let deployed = chain.deploy_artifact(minter, "DemoNft").await;
    chain.mine().await;
    let nft: Address = serde_json::from_value(chain.receipt_of(deployed).await["contractAddress"].clone())
        .expect("a deployed contract");
    for id in 1..=3u64 {
        chain.send_call(minter, nft, mintCall { to: holder, id: U256::from(id) }.abi_encode()).await;
    }
    chain.mine().await;
    chain
        .send_call(holder, nft, transferFromCall { from: holder, to: next, id: U256::from(2) }.abi_encode())
        .await;
    chain.mine().await;
    println!("  ERC721 {nft}");
}

/// Ether moved and contracts made inside calls, for the internal-transaction pages: a factory's
/// CREATE, and a call that pays out by CALL, CREATE, CREATE2 and SELFDESTRUCT.
async fn internal_operations(url: &str, accounts: &[Address]) {
    let mut chain = workload::Chain::connect(url);
    let (from, to) = (accounts[0], accounts[1]);
    let factory = chain.deploy_artifact(from, "Factory").await;
    let ops = chain.deploy_artifact(from, "InternalOps").await;
    chain.mine().await;
    let address_of = |receipt: serde_json::Value| -> Address {
        serde_json::from_value(receipt["contractAddress"].clone()).expect("a deployed contract")
    };
    let factory = address_of(chain.receipt_of(factory).await);
    let ops = address_of(chain.receipt_of(ops).await);
    chain.send_call(from, factory, makeCall {}.abi_encode()).await;
    chain.mine().await;
    let pay = Bytes::from(allCall { to }.abi_encode());
    let _: serde_json::Value = chain
        .call(
            "eth_sendTransaction",
            serde_json::json!([{"from": from, "to": ops, "value": "0x4000", "data": pay}]),
        )
        .await;
    chain.mine().await;
    println!("  factory {factory}, internal operations {ops}");
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = std::env::args().nth(1).unwrap_or_else(|| "http://127.0.0.1:8545".to_owned());
    let work = workload::run(&url).await;
    let transfers: usize = work.sent.iter().filter(|s| s.should_succeed).map(|s| s.transfers.len()).sum();
    println!(
        "deployed {} ERC20 tokens and {} other contracts; sent {} transactions with {transfers} transfers",
        work.tokens.len(),
        work.others.len(),
        work.sent.len()
    );
    for t in &work.tokens {
        println!("  token {} (block {})", t.address, t.block);
    }
    println!(
        "  busiest account {} ({} transfer transactions)",
        work.accounts[0],
        work.expected_transfer_txs()[&work.accounts[0]].len()
    );
    internal_operations(&url, &work.accounts).await;
    nft(&url, &work.accounts).await;
    let provider: DynProvider = ProviderBuilder::default().connect_http(url.parse()?).erased();
    let _: serde_json::Value = provider.raw_request("evm_setAutomine".into(), [true]).await?;
    Ok(())
}
