//! The node over HTTP JSON-RPC, with alloy.

use std::{borrow::Cow, time::Duration};

use alloy::{
    consensus::Transaction as _,
    eips::{BlockId, BlockNumberOrTag},
    network::{Ethereum, TransactionResponse},
    providers::{DynProvider, Provider, ProviderBuilder},
    rpc::types::{Block, BlockTransactions, TransactionReceipt, TransactionRequest},
    transports::{http::reqwest, RpcError, TransportError},
};
use alloy_primitives::{Address, Bytes};
use futures::{stream, Stream, StreamExt};
use ots_classifiers::{
    BlockData, BoxFuture, CallOutcome, ChainError, ChainView, LogData, ReceiptData, TxData,
};
use serde::{de::DeserializeOwned, Serialize};

use crate::db::state::ChainIdentity;

/// The node failed to give usable data. Nothing is written from a failed fetch.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The URL is not usable.
    #[error("invalid node URL {url:?}: {reason}")]
    BadUrl {
        /// The URL given.
        url: String,
        /// Why.
        reason: String,
    },
    /// The request failed (connection, timeout, an error answer, malformed JSON).
    #[error("node request {method} failed: {source}")]
    Request {
        /// The JSON-RPC method.
        method: &'static str,
        /// The transport's error.
        source: TransportError,
    },
    /// The node answered null for something that must exist.
    #[error("the node has no {what} for block {block}")]
    Missing {
        /// What was asked.
        what: &'static str,
        /// The block.
        block: u64,
    },
    /// The node's answer contradicts itself.
    #[error("the node answered inconsistent data for block {block}: {reason}")]
    Inconsistent {
        /// The block.
        block: u64,
        /// What is wrong.
        reason: String,
    },
}

/// A connection to the node.
#[derive(Debug, Clone)]
pub struct NodeClient {
    provider: DynProvider<Ethereum>,
}

fn request_err(method: &'static str) -> impl FnOnce(TransportError) -> SourceError {
    move |source| SourceError::Request { method, source }
}

impl NodeClient {
    /// Connects to `url` (`http://` or `https://`); every request times out after `timeout`.
    pub fn connect(url: &str, timeout: Duration) -> Result<Self, SourceError> {
        let bad = |reason: String| SourceError::BadUrl { url: url.to_owned(), reason };
        let parsed = url.parse::<reqwest::Url>().map_err(|e| bad(e.to_string()))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(bad(format!("scheme {} is not supported; use http:// or https://", parsed.scheme())));
        }
        let client = reqwest::Client::builder().timeout(timeout).build().map_err(|e| bad(e.to_string()))?;
        let provider = ProviderBuilder::default().connect_reqwest(client, parsed).erased();
        Ok(Self { provider })
    }

    /// Sends any JSON-RPC request and returns the raw answer.
    pub async fn raw<P: Serialize, R: DeserializeOwned>(
        &self,
        method: &'static str,
        params: P,
    ) -> Result<R, SourceError> {
        let params = serde_json::to_value(params)
            .map_err(|e| SourceError::Request { method, source: TransportError::ser_err(e) })?;
        let answer: serde_json::Value =
            self.provider.raw_request(Cow::Borrowed(method), params).await.map_err(request_err(method))?;
        serde_json::from_value(answer)
            .map_err(|e| SourceError::Request { method, source: TransportError::deser_err(e, "") })
    }

    /// Chain id and genesis hash.
    pub async fn chain_identity(&self) -> Result<ChainIdentity, SourceError> {
        let chain_id = self.provider.get_chain_id().await.map_err(request_err("eth_chainId"))?;
        let genesis = self
            .provider
            .get_block_by_number(BlockNumberOrTag::Number(0))
            .await
            .map_err(request_err("eth_getBlockByNumber"))?
            .ok_or(SourceError::Missing { what: "header", block: 0 })?;
        Ok(ChainIdentity { chain_id, genesis_hash: genesis.header.hash })
    }

    /// The newest block number.
    pub async fn head(&self) -> Result<u64, SourceError> {
        self.provider.get_block_number().await.map_err(request_err("eth_blockNumber"))
    }

    /// The hash of block `number`, or `None` if the node has no such block.
    pub async fn block_hash(&self, number: u64) -> Result<Option<alloy_primitives::B256>, SourceError> {
        let block = self
            .provider
            .get_block_by_number(BlockNumberOrTag::Number(number))
            .await
            .map_err(request_err("eth_getBlockByNumber"))?;
        Ok(block.map(|b| b.header.hash))
    }

    /// One block with its transactions and receipts, checked for consistency.
    pub async fn block(&self, number: u64) -> Result<BlockData, SourceError> {
        let (block, receipts) = futures::try_join!(
            async {
                self.provider
                    .get_block_by_number(BlockNumberOrTag::Number(number))
                    .full()
                    .await
                    .map_err(request_err("eth_getBlockByNumber"))
            },
            async {
                self.provider
                    .get_block_receipts(BlockId::number(number))
                    .await
                    .map_err(request_err("eth_getBlockReceipts"))
            }
        )?;
        let block = block.ok_or(SourceError::Missing { what: "block", block: number })?;
        let receipts = receipts.ok_or(SourceError::Missing { what: "receipts", block: number })?;
        to_block_data(number, block, &receipts)
    }

    /// Blocks `from..=to` in order, with up to `concurrency` requests in flight.
    pub fn blocks(
        &self,
        from: u64,
        to: u64,
        concurrency: usize,
    ) -> impl Stream<Item = Result<BlockData, SourceError>> + '_ {
        stream::iter(from..=to).map(move |n| self.block(n)).buffered(concurrency.max(1))
    }
}

fn to_block_data(
    number: u64,
    block: Block,
    receipts: &[TransactionReceipt],
) -> Result<BlockData, SourceError> {
    let inconsistent = |reason: String| SourceError::Inconsistent { block: number, reason };
    if block.header.number != number {
        return Err(inconsistent(format!("asked for block {number}, got block {}", block.header.number)));
    }
    let BlockTransactions::Full(txs) = block.transactions else {
        return Err(inconsistent("transactions came without bodies".into()));
    };
    if txs.len() != receipts.len() {
        return Err(inconsistent(format!("{} transactions but {} receipts", txs.len(), receipts.len())));
    }
    let mut transactions = Vec::with_capacity(txs.len());
    let mut receipt_data = Vec::with_capacity(receipts.len());
    for (i, (tx, receipt)) in txs.iter().zip(receipts).enumerate() {
        if receipt.transaction_hash != tx.tx_hash() {
            return Err(inconsistent(format!("receipt {i} is for transaction {}", receipt.transaction_hash)));
        }
        if receipt.block_hash.is_some_and(|h| h != block.header.hash) {
            return Err(inconsistent(format!("receipt {i} belongs to another block")));
        }
        transactions.push(TxData { hash: tx.tx_hash(), from: tx.from(), to: tx.to() });
        receipt_data.push(ReceiptData {
            success: receipt.status(),
            contract_address: receipt.contract_address,
            logs: receipt
                .inner
                .logs()
                .iter()
                .map(|l| LogData {
                    address: l.address(),
                    topics: l.topics().to_vec(),
                    data: l.data().data.clone(),
                })
                .collect(),
        });
    }
    Ok(BlockData {
        number,
        hash: block.header.hash,
        parent_hash: block.header.parent_hash,
        timestamp: block.header.timestamp,
        coinbase: block.header.beneficiary,
        gas_limit: block.header.gas_limit,
        transactions,
        receipts: receipt_data,
    })
}

/// Whether an error answer to `eth_call` is the EVM failing (a verdict on the contract) rather
/// than the node failing. Nodes differ: geth and Anvil use code 3 with "execution reverted";
/// other EVM halts come as -32000/-32015 with messages naming the halt.
fn is_evm_failure(code: i64, message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    code == 3
        || [
            "revert",
            "out of gas",
            "invalid opcode",
            "opcode",
            "stack underflow",
            "stack overflow",
            "invalid jump",
            "execution",
        ]
        .iter()
        .any(|needle| m.contains(needle))
            && !["header not found", "missing trie node", "state", "timeout"].iter().any(|n| m.contains(n))
}

impl ChainView for NodeClient {
    fn call_at(
        &self,
        to: Address,
        input: Bytes,
        block: u64,
    ) -> BoxFuture<'_, Result<CallOutcome, ChainError>> {
        Box::pin(async move {
            let request = TransactionRequest::default().from(Address::ZERO).to(to).input(input.into());
            match self.provider.call(request).block(BlockId::number(block)).await {
                Ok(bytes) => Ok(CallOutcome::Returned(bytes)),
                Err(RpcError::ErrorResp(payload)) if is_evm_failure(payload.code, &payload.message) => {
                    Ok(CallOutcome::Reverted)
                }
                Err(e) => Err(ChainError { method: "eth_call", block, message: e.to_string() }),
            }
        })
    }

    fn code_at(&self, address: Address, block: u64) -> BoxFuture<'_, Result<Bytes, ChainError>> {
        Box::pin(async move {
            self.provider
                .get_code_at(address)
                .block_id(BlockId::number(block))
                .await
                .map_err(|e| ChainError { method: "eth_getCode", block, message: e.to_string() })
        })
    }
}
