//! A classifier of your own, registered without editing ots-indexer: Uniswap-V2-style pairs.
//!
//! A pair is a contract created in the block in which a `PairCreated(token0, token1, pair, n)`
//! log names it, whose `token0()` answers the log's `token0`. Each one gets the label
//! `uniswap-v2-pair` (table `OtsLabels`, method `ots2_getAddressLabels`). Built against the
//! public `Classifier` trait only; this file is the whole of it.
//!
//! ```text
//! cargo run --release --example uniswap_v2_pairs -- run --rpc-url http://127.0.0.1:8545 \
//!     --datadir ./pairs-db --classifiers erc20,erc165,erc721,erc1155,erc1167,erc4626,uniswap-v2-pairs
//! ```

use alloy_primitives::{b256, Address, Bytes, B256};
use ots_classifiers::{
    selector, BoxFuture, CallOutcome, ChainError, ChainView, Classifier, ClassifyInput, Fact,
};

/// topic0 of `PairCreated(address,address,address,uint256)`.
const PAIR_CREATED: B256 = b256!("0d3648bd0f6ba80134a33ba9275ac585d9d315f0ad8355cddefde31afa28d0e9");

/// Finds Uniswap-V2-style pairs by their factory's `PairCreated` log.
#[derive(Debug, Clone, Copy, Default)]
pub struct UniswapV2Pairs;

impl UniswapV2Pairs {
    /// Name on the command line and in the database state.
    pub const NAME: &'static str = "uniswap-v2-pairs";
    /// The label its pairs get.
    pub const LABEL: &'static str = "uniswap-v2-pair";
}

/// `(token0, pair)` of every well-formed `PairCreated` log of the block's successful transactions.
fn announced(input: &ClassifyInput<'_>) -> Vec<(Address, Address)> {
    input
        .block
        .successful_logs()
        .filter(|l| l.topics.len() == 3 && l.topics[0] == PAIR_CREATED && l.data.len() == 64)
        .map(|l| (Address::from_word(l.topics[1]), Address::from_slice(&l.data[12..32])))
        .collect()
}

impl Classifier for UniswapV2Pairs {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn classify<'a>(
        &'a self,
        input: ClassifyInput<'a>,
        chain: &'a dyn ChainView,
    ) -> BoxFuture<'a, Result<Vec<Fact>, ChainError>> {
        Box::pin(async move {
            let mut facts = Vec::new();
            for (token0, pair) in announced(&input) {
                // Anyone can emit the event: believe it only for a contract this block created
                // that agrees about its first token.
                if !input.contracts.contains(&pair) {
                    continue;
                }
                let data = Bytes::copy_from_slice(&selector("token0()"));
                let agrees = match chain.call_at(pair, data, input.block.number).await? {
                    CallOutcome::Returned(word) => ots_classifiers::decode_address(&word) == Some(token0),
                    CallOutcome::Reverted => false,
                };
                if agrees {
                    facts.push(Fact::Labeled { label: Self::LABEL.to_owned(), address: pair });
                }
            }
            Ok(facts)
        })
    }
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let registry =
        ots_classifiers::Registry::builtin().with(UniswapV2Pairs::NAME, || Box::new(UniswapV2Pairs));
    ots_indexer::cli::main_with(registry).await
}

#[cfg(test)]
#[path = "../tests/common/mod.rs"]
mod common;

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use alloy::{sol, sol_types::SolCall};
    use alloy_primitives::{keccak256, Address};
    use ots_classifiers::Registry;
    use ots_indexer::{
        db::{AccessMode, Db},
        index::{check::dump, journal::unwind_to},
        rpc::{self, RpcContext},
        source::{NodeClient, TraceChoice},
        sync::{Indexer, SyncConfig},
    };
    use serde_json::json;

    use super::{
        common::{anvil::Anvil, workload::Chain, Client},
        UniswapV2Pairs, PAIR_CREATED,
    };

    sol! {
        interface Factory { function createPair(address tokenA, address tokenB) external returns (address); }
        interface Impostor { function lie(address token0, address token1, address pair) external; }
    }

    #[test]
    fn the_event_topic_is_right() {
        assert_eq!(keccak256("PairCreated(address,address,address,uint256)"), PAIR_CREATED);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn pairs_are_labelled_and_unwind() {
        let anvil = Anvil::start(&[]);
        let mut chain = Chain::connect(&anvil.url);
        let a0 = chain.accounts().await[0];
        let factory = chain.deploy_artifact(a0, "PairFactory").await;
        let impostor = chain.deploy_artifact(a0, "PairImpostor").await;
        chain.mine().await;
        let address = |v: serde_json::Value| -> Address { serde_json::from_value(v).expect("address") };
        let factory = address(chain.receipt_of(factory).await["contractAddress"].clone());
        let impostor = address(chain.receipt_of(impostor).await["contractAddress"].clone());
        let (t0, t1) = (Address::repeat_byte(0x11), Address::repeat_byte(0x22));
        let made = chain
            .send_call(a0, factory, Factory::createPairCall { tokenA: t1, tokenB: t0 }.abi_encode())
            .await;
        chain.mine().await;
        let receipt = chain.receipt_of(made).await;
        let log = receipt["logs"].as_array().expect("logs").last().expect("PairCreated").clone();
        let data: alloy_primitives::Bytes = serde_json::from_value(log["data"].clone()).expect("data");
        let pair = Address::from_slice(&data[12..32]);
        let pair_block =
            u64::from_str_radix(receipt["blockNumber"].as_str().expect("hex").trim_start_matches("0x"), 16)
                .expect("block");
        // An impostor announces the factory itself as a pair.
        chain
            .send_call(a0, impostor, Impostor::lieCall { token0: t0, token1: t1, pair: factory }.abi_encode())
            .await;
        chain.mine().await;

        // Chosen by name, as `--classifiers` does, from a registry the program extended.
        let registry = Registry::builtin().with(UniswapV2Pairs::NAME, || Box::new(UniswapV2Pairs));
        let classifiers = registry.resolve(&["erc20", UniswapV2Pairs::NAME]).expect("registered");
        let node = NodeClient::connect(&anvil.url, Duration::from_secs(30))
            .expect("node")
            .with_traces(TraceChoice::Auto)
            .await
            .expect("traces");
        let head = node.head().await.expect("head");
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("db");
        let config = SyncConfig { batch_blocks: 1, ..SyncConfig::default() };
        let indexer = Indexer::open(db.clone(), node.clone(), classifiers, config).await.expect("open");
        indexer.sync_to(head).await.expect("sync");
        let clean = dump(&db).expect("dump");

        let ctx = RpcContext::new(db.clone(), node);
        let (addr, server) =
            rpc::serve("127.0.0.1:0".parse().expect("addr"), ctx, &rpc::ServerOptions::default())
                .await
                .expect("serve");
        let client = Client::new(&format!("http://{addr}"));
        let labels = |a: Address| client.call("ots2_getAddressLabels", json!([a]));
        assert_eq!(
            labels(pair).await,
            json!([{"label": "uniswap-v2-pair", "blockNumber": format!("{pair_block:#x}")}])
        );
        assert_eq!(labels(factory).await, json!([]), "the impostor's claim is not believed");
        assert_eq!(labels(impostor).await, json!([]));

        let txn = db.begin_write().expect("write");
        unwind_to(&txn, pair_block - 1).expect("unwind");
        txn.commit().expect("commit");
        assert_eq!(labels(pair).await, json!([]), "the label goes with its block");
        indexer.sync_to(head).await.expect("re-index");
        assert!(dump(&db).expect("dump") == clean, "re-index differs");
        server.stop().ok();
    }
}
