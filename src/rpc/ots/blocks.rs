//! The block pages of the `ots_` namespace, and `erigon_getHeaderByNumber`, served from the
//! node's standard `eth_` methods, so that they work on a node without `ots_` (docs/api.md).
//!
//! Where Erigon and Anvil differ, these follow Erigon: `logsBloom` is null in block details and
//! block transaction pages, `transactionCount` is the block's total (not the page's length),
//! receipts in a page carry no logs but their block's `timestamp`, and a listed transaction's
//! input is cut to its 4-byte selector.

use alloy::rpc::types::{trace::otterscan::InternalIssuance, BlockTransactions};
use alloy_primitives::{Address, U256};
use jsonrpsee::{core::RpcResult, proc_macros::rpc};
use serde_json::{json, Value};

use crate::rpc::{
    errors::{invalid_params, node_error},
    ots::issuance::{issuance, Issuance, MAINNET},
    ots::shapes::{block_details, block_transactions_page, node_block, NodeHeader, ReceiptLogs, Receipts},
    RpcContext,
};
/// Keys of an `eth_getBlockByNumber` answer that are not part of a header.
const NOT_HEADER: [&str; 5] = ["transactions", "uncles", "withdrawals", "size", "totalDifficulty"];

/// `ots_` block methods.
#[rpc(server, namespace = "ots")]
pub trait OtsBlocksApi {
    /// The header of block `block` (a number or a tag), or null past the head.
    #[method(name = "getHeaderByNumber")]
    async fn get_header_by_number(&self, block: Value) -> RpcResult<Value>;

    /// A block without its transactions, with `transactionCount`, its issuance and the fees its
    /// transactions paid; null past the head.
    #[method(name = "getBlockDetails")]
    async fn get_block_details(&self, block: Value) -> RpcResult<Value>;

    /// As `getBlockDetails`, by hash.
    #[method(name = "getBlockDetailsByHash")]
    async fn get_block_details_by_hash(&self, hash: alloy_primitives::B256) -> RpcResult<Value>;

    /// Page `page` of `page_size` transactions of block `block`, with their receipts; page 0
    /// holds the block's last transactions (Erigon's order).
    #[method(name = "getBlockTransactions")]
    async fn get_block_transactions(&self, block: Value, page: u64, page_size: u64) -> RpcResult<Value>;

    /// Whether `address` has code at `block`.
    #[method(name = "hasCode")]
    async fn has_code(&self, address: Option<Address>, block: Value) -> RpcResult<bool>;
}

/// `erigon_` methods the Otterscan UI calls.
#[rpc(server, namespace = "erigon")]
pub trait ErigonApi {
    /// The header of block `block` (the UI's connection probe).
    #[method(name = "getHeaderByNumber")]
    async fn get_header_by_number(&self, block: Value) -> RpcResult<Value>;
}

/// Implementation of [`OtsBlocksApiServer`] and [`ErigonApiServer`].
#[derive(Debug, Clone)]
pub struct OtsBlocks {
    ctx: RpcContext,
}

/// A block number or tag as the node takes it: numbers become hex quantities.
fn block_param(block: &Value) -> RpcResult<Value> {
    match block {
        Value::Number(n) => n
            .as_u64()
            .map(|n| json!(format!("{n:#x}")))
            .ok_or_else(|| invalid_params(format!("block {n} is not a block number"))),
        Value::String(s) => Ok(json!(s)),
        other => Err(invalid_params(format!("block must be a number, a hex quantity or a tag, not {other}"))),
    }
}

fn quantity(v: &Value) -> U256 {
    v.as_str().and_then(|s| U256::from_str_radix(s.trim_start_matches("0x"), 16).ok()).unwrap_or_default()
}

impl OtsBlocks {
    /// Serves from `ctx`'s node.
    pub const fn new(ctx: RpcContext) -> Self {
        Self { ctx }
    }

    async fn node<R: serde::de::DeserializeOwned>(
        &self,
        method: &'static str,
        params: Value,
    ) -> RpcResult<R> {
        self.ctx.node.raw(method, params).await.map_err(|e| node_error(&e))
    }

    /// The block's receipts: `eth_getBlockReceipts`, or one `eth_getTransactionReceipt` per
    /// transaction where the node lacks it.
    async fn receipts(&self, header: &NodeHeader, txs: &BlockTransactions<Value>) -> RpcResult<Vec<Value>> {
        let Some(hash) = header.get("hash").cloned() else { return Ok(Vec::new()) };
        match self.ctx.node.raw::<_, Vec<Value>>("eth_getBlockReceipts", json!([hash])).await {
            Ok(receipts) => return Ok(receipts),
            Err(e) if e.is_method_missing() => {}
            Err(e) => return Err(node_error(&e)),
        }
        let calls: Vec<(&'static str, Value)> =
            txs.txns().map(|t| ("eth_getTransactionReceipt", json!([t.get("hash").unwrap_or(t)]))).collect();
        self.ctx.node.batch(&calls).await.map_err(|e| node_error(&e))
    }

    /// Block details from an `eth_getBlockBy*` answer (without full transactions).
    async fn details(&self, answer: Value) -> RpcResult<Value> {
        let Some(mut block) = node_block(answer)? else { return Ok(Value::Null) };
        let receipts = self.receipts(&block.header, &block.transactions).await?;
        let fees = receipts.iter().fold(U256::ZERO, |sum, r| {
            sum.saturating_add(quantity(&r["gasUsed"]).saturating_mul(quantity(&r["effectiveGasPrice"])))
        });
        block.header.insert("logsBloom".into(), Value::Null);
        let issuance = self.issuance(&block.header, block.uncles.len()).await?;
        let issuance = InternalIssuance {
            block_reward: issuance.block_reward,
            uncle_reward: issuance.uncle_reward,
            issuance: issuance.total(),
        };
        block_details(block, issuance, fees)
    }

    /// What the block issued: nothing under proof of stake (difficulty 0, asked of no one), the
    /// ethash rewards on mainnet, whose uncles' numbers the node gives.
    async fn issuance(&self, block: &NodeHeader, uncles: usize) -> RpcResult<Issuance> {
        let difficulty = block.get("difficulty").map(quantity).unwrap_or_default();
        if difficulty.is_zero() {
            return Ok(Issuance::default());
        }
        let chain_id = quantity(&self.node::<Value>("eth_chainId", json!([])).await?);
        if chain_id != U256::from(MAINNET) {
            return Ok(Issuance::default());
        }
        let number = quantity(block.get("number").unwrap_or(&Value::Null)).saturating_to::<u64>();
        let calls: Vec<(&'static str, Value)> = (0..uncles)
            .map(|i| ("eth_getUncleByBlockHashAndIndex", json!([block.get("hash"), format!("{i:#x}")])))
            .collect();
        let answers = self.ctx.node.batch(&calls).await.map_err(|e| node_error(&e))?;
        let numbers: Vec<u64> =
            answers.iter().map(|u| quantity(&u["number"]).saturating_to::<u64>()).collect();
        Ok(issuance(MAINNET, number, difficulty, &numbers))
    }

    async fn header(&self, block: Value) -> RpcResult<Value> {
        let answer: Value = self.node("eth_getBlockByNumber", json!([block_param(&block)?, false])).await?;
        let Value::Object(mut header) = answer else { return Ok(Value::Null) };
        for key in NOT_HEADER {
            header.remove(key);
        }
        Ok(Value::Object(header))
    }
}

#[jsonrpsee::core::async_trait]
impl OtsBlocksApiServer for OtsBlocks {
    async fn get_header_by_number(&self, block: Value) -> RpcResult<Value> {
        self.header(block).await
    }

    async fn get_block_details(&self, block: Value) -> RpcResult<Value> {
        let answer = self.node("eth_getBlockByNumber", json!([block_param(&block)?, false])).await?;
        self.details(answer).await
    }

    async fn get_block_details_by_hash(&self, hash: alloy_primitives::B256) -> RpcResult<Value> {
        let answer = self.node("eth_getBlockByHash", json!([hash, false])).await?;
        self.details(answer).await
    }

    async fn get_block_transactions(&self, block: Value, page: u64, page_size: u64) -> RpcResult<Value> {
        if page_size > self.ctx.max_page_size {
            return Err(invalid_params(format!(
                "page size {page_size} is over the maximum {} (see --max-page-size)",
                self.ctx.max_page_size
            )));
        }
        let answer = self.node("eth_getBlockByNumber", json!([block_param(&block)?, true])).await?;
        let Some(mut full) = node_block(answer)? else { return Ok(Value::Null) };
        let receipts = self.receipts(&full.header, &full.transactions).await?;
        let txs = std::mem::replace(&mut full.transactions, BlockTransactions::Full(Vec::new()));
        let mut txs: Vec<Value> = txs.into_transactions_vec();
        // Erigon pages from the block's end: page p is transactions [n − (p+1)·s, n − p·s), in
        // block order. The UI counts on it to find a transaction's page from its index.
        let total = txs.len();
        let size = usize::try_from(page_size).unwrap_or(usize::MAX);
        let end = total.saturating_sub(usize::try_from(page).unwrap_or(usize::MAX).saturating_mul(size));
        let start = end.saturating_sub(size);
        txs.truncate(end);
        let page_txs = txs.split_off(start);
        let timestamp = full.header.get("timestamp").map(quantity).map(|t| t.saturating_to::<u64>());
        let page_receipts = receipts.get(start..end).unwrap_or_default().to_vec();
        let timestamps = vec![timestamp; page_receipts.len()];
        full.transactions = BlockTransactions::Full(page_txs);
        full.header.insert("logsBloom".into(), Value::Null);
        block_transactions_page(full, total, Receipts::new(page_receipts, &timestamps, ReceiptLogs::Dropped))
    }

    async fn has_code(&self, address: Option<Address>, block: Value) -> RpcResult<bool> {
        // Erigon reads a null address as the zero address; the UI sends one on address pages.
        let address = address.unwrap_or(Address::ZERO);
        let code: String = self.node("eth_getCode", json!([address, block_param(&block)?])).await?;
        Ok(!code.trim_start_matches("0x").is_empty())
    }
}

#[jsonrpsee::core::async_trait]
impl ErigonApiServer for OtsBlocks {
    async fn get_header_by_number(&self, block: Value) -> RpcResult<Value> {
        self.header(block).await
    }
}
