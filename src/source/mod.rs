//! Where block data comes from: the node over JSON-RPC, or a recording of it.

mod chain_block;
pub mod compression;
pub mod fixture;
mod fixture_entry;
mod fixture_v3;
mod retry;
mod rpc;
pub mod structlog;
pub mod synthetic;
pub mod traces;

use alloy_primitives::B256;
use ots_classifiers::{BlockData, BoxFuture, ChainView};

use crate::db::state::ChainIdentity;
pub use rpc::{needs_archive, ForwardError, NodeClient, SourceError, TraceChoice};

/// A chain to index: blocks by number, plus the state queries classifiers make.
pub trait BlockSource: ChainView + std::fmt::Debug {
    /// Chain id and genesis hash.
    fn chain_identity(&self) -> BoxFuture<'_, Result<ChainIdentity, SourceError>>;
    /// The newest block number.
    fn head(&self) -> BoxFuture<'_, Result<u64, SourceError>>;
    /// One block with its transactions, receipts and call frames.
    fn block(&self, number: u64) -> BoxFuture<'_, Result<BlockData, SourceError>>;
    /// The hash of block `number`, or `None` if the chain has no such block.
    fn block_hash(&self, number: u64) -> BoxFuture<'_, Result<Option<B256>, SourceError>>;
    /// The timestamps of blocks `from..=to`, in order. By default each block is read whole;
    /// a node gives only its headers, a thousand a request.
    fn block_times(&self, from: u64, to: u64) -> BoxFuture<'_, Result<Vec<u64>, SourceError>> {
        Box::pin(async move {
            let mut times = Vec::new();
            for number in from..=to {
                times.push(self.block(number).await?.timestamp);
            }
            Ok(times)
        })
    }
    /// Where call frames come from, for logs and status.
    fn tracer(&self) -> &'static str;
    /// New head numbers as they are announced, if the source can push them.
    fn new_heads(&self) -> BoxFuture<'_, Option<futures::stream::BoxStream<'static, u64>>> {
        Box::pin(async { None })
    }
    /// The sync loop's batches are at most `blocks` long from now on: a source that keeps blocks
    /// for a batch's second look (a recording) needs to keep no more than that.
    fn batches_of(&self, _blocks: u64) {}
    /// Where the source tells what it met at the node (refused probes, missing methods).
    fn notices(&self) -> Option<crate::notices::SharedNotices> {
        None
    }
}

impl BlockSource for NodeClient {
    fn chain_identity(&self) -> BoxFuture<'_, Result<ChainIdentity, SourceError>> {
        Box::pin(NodeClient::chain_identity(self))
    }
    fn head(&self) -> BoxFuture<'_, Result<u64, SourceError>> {
        Box::pin(NodeClient::head(self))
    }
    fn block(&self, number: u64) -> BoxFuture<'_, Result<BlockData, SourceError>> {
        Box::pin(NodeClient::block(self, number))
    }
    fn block_hash(&self, number: u64) -> BoxFuture<'_, Result<Option<B256>, SourceError>> {
        Box::pin(NodeClient::block_hash(self, number))
    }
    fn block_times(&self, from: u64, to: u64) -> BoxFuture<'_, Result<Vec<u64>, SourceError>> {
        Box::pin(NodeClient::block_times(self, from, to))
    }
    fn tracer(&self) -> &'static str {
        self.trace_mode().name()
    }
    fn new_heads(&self) -> BoxFuture<'_, Option<futures::stream::BoxStream<'static, u64>>> {
        Box::pin(NodeClient::new_heads(self))
    }
    fn notices(&self) -> Option<crate::notices::SharedNotices> {
        Some(NodeClient::notices(self).clone())
    }
}
