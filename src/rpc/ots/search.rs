//! The address pages of the `ots_` namespace, answered from the appearance index: an address's
//! transactions paged by block (`ots_searchTransactionsBefore/After`), a sender's transaction by
//! nonce, and a contract's creator (docs/api.md). The index says which transactions; their
//! bodies and receipts come from the node's `eth_` methods.
//!
//! Paging follows Erigon: block 0 means "from the head" (before) or "from genesis" (after),
//! results are newest first, a page ends on a whole block (so it may hold more than asked), and
//! `firstPage`/`lastPage` say whether newer/older transactions exist.

use alloy::rpc::types::trace::otterscan::ContractCreator;
use alloy_primitives::{Address, B256};
use jsonrpsee::{core::RpcResult, proc_macros::rpc};
use serde_json::{json, Value};

use crate::rpc::{
    errors::{db_error, invalid_params, node_error, server_error},
    materialize::{hex, hex_field},
    ots::shapes::{search_page, ReceiptLogs, Receipts},
    page_timing::PageTimer,
    tx_cache::{standings, CachedTx, IndexedBlock},
    RpcContext,
};
use crate::{db::ReadTxn, index::appearances, txid::TxId};

/// `ots_` address methods.
#[rpc(server, namespace = "ots")]
pub trait OtsSearchApi {
    /// Transactions `address` appears in, in blocks before `block` (0: up to the head), newest
    /// first, at least `page_size` of them when there are, in whole blocks.
    #[method(name = "searchTransactionsBefore")]
    async fn search_transactions_before(
        &self,
        address: Address,
        block: u64,
        page_size: u64,
    ) -> RpcResult<Value>;

    /// Transactions `address` appears in, in blocks after `block` (0: from genesis), newest first,
    /// the `page_size` (or more, to end on a whole block) oldest of them.
    #[method(name = "searchTransactionsAfter")]
    async fn search_transactions_after(
        &self,
        address: Address,
        block: u64,
        page_size: u64,
    ) -> RpcResult<Value>;

    /// The hash of the transaction `sender` sent with `nonce`, or null.
    #[method(name = "getTransactionBySenderAndNonce")]
    async fn get_transaction_by_sender_and_nonce(
        &self,
        sender: Address,
        nonce: u64,
    ) -> RpcResult<Option<B256>>;

    /// `{hash, creator}` of the transaction and frame that created `address`, or null when it
    /// has no code at the head.
    #[method(name = "getContractCreator")]
    async fn get_contract_creator(&self, address: Address) -> RpcResult<Option<ContractCreator>>;
}

/// Implementation of [`OtsSearchApiServer`].
#[derive(Debug, Clone)]
pub struct OtsSearch {
    ctx: RpcContext,
}

/// Which way a search reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Before,
    After,
}

/// Parts a page's node requests are cut into, fetched at once.
const PARALLEL_PARTS: usize = 4;

impl OtsSearch {
    /// Serves from `ctx`.
    pub const fn new(ctx: RpcContext) -> Self {
        Self { ctx }
    }

    fn read<T>(&self, f: impl FnOnce(&ReadTxn) -> Result<T, crate::db::DbError>) -> RpcResult<T> {
        let txn = self.ctx.db.begin_read().map_err(|e| db_error(&e))?;
        f(&txn).map_err(|e| db_error(&e))
    }

    /// The hash of the transaction at `id`, from the node.
    async fn hash_of(&self, id: TxId) -> RpcResult<Option<B256>> {
        let tx: Value = self
            .ctx
            .node
            .raw("eth_getTransactionByBlockNumberAndIndex", json!([hex(id.block()), hex(id.index())]))
            .await
            .map_err(|e| node_error(&e))?;
        match tx.get("hash") {
            None => Ok(None),
            Some(h) => serde_json::from_value(h.clone())
                .map(Some)
                .map_err(|e| server_error(format!("the node gave a malformed transaction hash: {e}"))),
        }
    }

    /// The transactions and receipts of `ids` (newest first), each receipt with its block's
    /// `timestamp` as Erigon adds it: from the cache where it holds them for the indexed block
    /// (`blocks`: each id's block as the index stood), the rest from the node.
    ///
    /// The node's part is cut into a few parts fetched at once, so that a node serving requests
    /// on several threads answers them side by side and one part's receipts are asked for while
    /// another's transactions are still coming.
    async fn materialize(&self, ids: &[TxId], blocks: &[IndexedBlock]) -> RpcResult<(Vec<Value>, Receipts)> {
        let cache = &self.ctx.tx_cache;
        let mut found = cache.lookup(ids, blocks);
        let missing: Vec<TxId> =
            ids.iter().zip(&found).filter(|(_, f)| f.is_none()).map(|(&id, _)| id).collect();
        if !missing.is_empty() {
            let size = missing.len().div_ceil(PARALLEL_PARTS).max(1);
            let parts =
                futures::future::try_join_all(missing.chunks(size).map(|part| self.materialize_part(part)))
                    .await?;
            if !cache.fill(&mut found, ids, blocks, parts.into_iter().flatten()) {
                return Err(server_error("the node answered fewer transactions than asked"));
            }
        }
        let mut txs = Vec::with_capacity(ids.len());
        let (mut receipts, mut timestamps) = (Vec::with_capacity(ids.len()), Vec::with_capacity(ids.len()));
        for tx in found.into_iter().flatten() {
            txs.push(tx.tx.clone());
            receipts.push(tx.receipt.clone());
            timestamps.push(tx.timestamp);
        }
        Ok((txs, Receipts::new(receipts, &timestamps, ReceiptLogs::Kept)))
    }

    /// One part of [`Self::materialize`]: the transactions and their blocks' headers in one
    /// round trip, their receipts in a second. (Fetching a busy block whole with
    /// `eth_getBlockReceipts` measured slower: docs/benchmarks-history.md.)
    async fn materialize_part(&self, ids: &[TxId]) -> RpcResult<Vec<CachedTx>> {
        let groups: Vec<&[TxId]> = ids.chunk_by(|a, b| a.block() == b.block()).collect();
        let mut calls: Vec<(&'static str, Value)> = Vec::with_capacity(ids.len() + groups.len());
        for group in &groups {
            let block = hex(group[0].block());
            calls.push(("eth_getBlockByNumber", json!([block, false])));
            calls.extend(
                group
                    .iter()
                    .map(|id| ("eth_getTransactionByBlockNumberAndIndex", json!([block, hex(id.index())]))),
            );
        }
        let answers = self.ctx.node.batch(&calls).await.map_err(|e| node_error(&e))?;
        let (mut txs, mut timestamps) = (Vec::with_capacity(ids.len()), Vec::with_capacity(ids.len()));
        let mut at = 0;
        for group in &groups {
            let header = &answers[at];
            at += 1;
            for id in *group {
                let tx = &answers[at];
                at += 1;
                if !tx.is_object() || !header.is_object() {
                    return Err(server_error(format!(
                        "the node has no transaction {id} (block {}, index {}) the index holds: is it still syncing, or the index from another chain?",
                        id.block(),
                        id.index()
                    )));
                }
                txs.push(tx.clone());
                timestamps.push(hex_field(header, "timestamp"));
            }
        }
        let calls: Vec<(&'static str, Value)> =
            txs.iter().map(|tx| ("eth_getTransactionReceipt", json!([tx["hash"]]))).collect();
        let receipts = self.ctx.node.batch(&calls).await.map_err(|e| node_error(&e))?;
        Ok(txs
            .into_iter()
            .zip(receipts)
            .zip(timestamps)
            .map(|((tx, receipt), timestamp)| CachedTx { tx, receipt, timestamp })
            .collect())
    }

    async fn search(
        &self,
        direction: Direction,
        address: Address,
        block: u64,
        page_size: u64,
    ) -> RpcResult<Value> {
        if page_size > self.ctx.max_search_page {
            return Err(server_error(format!(
                "max allowed page size: {} (asked for {page_size}; see --max-search-page-size)",
                self.ctx.max_search_page
            )));
        }
        if page_size == 0 {
            return Err(invalid_params("page size must be at least 1"));
        }
        let want = page_size as usize;
        let mut timer = PageTimer::start(match direction {
            Direction::Before => "ots_searchTransactionsBefore",
            Direction::After => "ots_searchTransactionsAfter",
        });
        let (page, ids, blocks) = self.read(move |txn| {
            let page = match direction {
                Direction::Before => {
                    let cut = if block == 0 { u64::MAX } else { TxId::first_of_block(block).0 };
                    appearances::before(txn, &address, cut, want)?
                }
                Direction::After => {
                    let from = if block == 0 { 0 } else { TxId::first_of_block(block.saturating_add(1)).0 };
                    let mut page = appearances::after(txn, &address, from, want)?;
                    page.ids.reverse();
                    page
                }
            };
            let ids: Vec<TxId> = page.ids.iter().map(|&id| TxId(id)).collect();
            let blocks = standings(txn, &ids)?;
            Ok((page, ids, blocks))
        })?;
        timer.index_done(ids.len());
        let (txs, receipts) = self.materialize(&ids, &blocks).await?;
        let (first_page, last_page) = match direction {
            Direction::Before => (block == 0, !page.more),
            Direction::After => (!page.more, block == 0),
        };
        search_page(txs, receipts, first_page, last_page)
    }
}

#[jsonrpsee::core::async_trait]
impl OtsSearchApiServer for OtsSearch {
    async fn search_transactions_before(
        &self,
        address: Address,
        block: u64,
        page_size: u64,
    ) -> RpcResult<Value> {
        self.search(Direction::Before, address, block, page_size).await
    }

    async fn search_transactions_after(
        &self,
        address: Address,
        block: u64,
        page_size: u64,
    ) -> RpcResult<Value> {
        self.search(Direction::After, address, block, page_size).await
    }

    async fn get_transaction_by_sender_and_nonce(
        &self,
        sender: Address,
        nonce: u64,
    ) -> RpcResult<Option<B256>> {
        let Some(id) = self.read(move |txn| appearances::sent_with_nonce(txn, &sender, nonce))? else {
            return Ok(None);
        };
        self.hash_of(id).await
    }

    async fn get_contract_creator(&self, address: Address) -> RpcResult<Option<ContractCreator>> {
        let code: String =
            self.ctx.node.raw("eth_getCode", json!([address, "latest"])).await.map_err(|e| node_error(&e))?;
        if code.trim_start_matches("0x").is_empty() {
            return Ok(None);
        }
        let Some(creation) = self.read(move |txn| appearances::creation(txn, &address))? else {
            return Ok(None);
        };
        let Some(hash) = self.hash_of(creation.tx).await? else {
            return Err(server_error(format!(
                "the node has no transaction {} the index holds; is it still syncing?",
                creation.tx
            )));
        };
        Ok(Some(ContractCreator { hash, creator: creation.creator }))
    }
}
