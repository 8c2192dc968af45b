//! Fills a local dev node with demo contracts and ERC20 transfers (the same workload the
//! integration tests use), then turns automine on so that the chain keeps moving as you use it.
//!
//! `cargo run --example demo_chain -- http://127.0.0.1:8545` against an
//! `anvil --accounts 30 --no-mining` node; `scripts/demo.sh` does all of it for you.

// The tests' workload, shared: its `pub` items are for whoever includes it.
#[allow(unreachable_pub)]
#[path = "../tests/common/workload.rs"]
mod workload;

use alloy::providers::{DynProvider, Provider, ProviderBuilder};

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
    let provider: DynProvider = ProviderBuilder::default().connect_http(url.parse()?).erased();
    let _: serde_json::Value = provider.raw_request("evm_setAutomine".into(), [true]).await?;
    Ok(())
}
