//! Where pending transactions come from: the best the node offers, found at start-up.
//!
//! 1. `eth_subscribe ["newPendingTransactions", true]` over WebSocket (geth, reth, Anvil): full
//!    transactions pushed; a node that pushes hashes anyway gets them looked up.
//! 2. `txpool_content` polled and diffed (geth, reth, Nethermind, Erigon, Anvil), as BTCplex
//!    diffs its mempool every second.
//! 3. `eth_pendingTransactions` polled and diffed (Hardhat's node).
//!
//! A snapshot source also tells which transactions left the pool; a subscription does not, so
//! the tracker asks the node about the oldest kept ones now and then.

use std::fmt;

use alloy_primitives::B256;
use futures::{stream::BoxStream, FutureExt, StreamExt};
use serde_json::{json, Value};

use crate::source::{NodeClient, SourceError};

/// The source a pool follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeedKind {
    /// `eth_subscribe newPendingTransactions` over WebSocket.
    Subscription,
    /// `txpool_content`, polled.
    TxpoolContent,
    /// `eth_pendingTransactions`, polled.
    PendingTransactions,
}

impl FeedKind {
    /// The name `status` and the logs use.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Subscription => "eth_subscribe newPendingTransactions",
            Self::TxpoolContent => "txpool_content (polled)",
            Self::PendingTransactions => "eth_pendingTransactions (polled)",
        }
    }
}

impl fmt::Display for FeedKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A live source of pending transactions.
pub enum Feed {
    /// Pushed by the node: objects (full transactions) or hashes.
    Subscription(BoxStream<'static, Value>),
    /// Snapshots polled with this method.
    Snapshot(FeedKind),
}

impl fmt::Debug for Feed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind().name())
    }
}

impl Feed {
    /// Which kind it is.
    pub const fn kind(&self) -> FeedKind {
        match self {
            Self::Subscription(_) => FeedKind::Subscription,
            Self::Snapshot(kind) => *kind,
        }
    }
}

/// What asking the node for a source found.
#[derive(Debug)]
pub enum Detection {
    /// The best source it offers.
    Found(Feed),
    /// It answered, and offers none.
    NoneOffered,
    /// It could not be asked (down, or answering garbage): ask again later.
    Unreachable(SourceError),
}

/// Finds the best source `node` offers.
pub async fn detect(node: &NodeClient) -> Detection {
    if let Some(stream) = node.subscribe_raw(json!(["newPendingTransactions", true])).await {
        return Detection::Found(Feed::Subscription(stream));
    }
    let mut unreachable = None;
    for kind in [FeedKind::TxpoolContent, FeedKind::PendingTransactions] {
        match snapshot(node, kind).await {
            Ok(_) => return Detection::Found(Feed::Snapshot(kind)),
            Err(e) if e.is_method_missing() || e.is_error_answer() => {
                tracing::debug!(target: "ots::pending", source = kind.name(), error = %e, "pending source not offered");
            }
            Err(e) => unreachable = Some(e),
        }
    }
    match unreachable {
        Some(e) => Detection::Unreachable(e),
        None => Detection::NoneOffered,
    }
}

/// The node's pool now: every transaction object of it.
pub async fn snapshot(node: &NodeClient, kind: FeedKind) -> Result<Vec<Value>, SourceError> {
    match kind {
        FeedKind::TxpoolContent => {
            let content: Value = node.raw("txpool_content", json!([])).await?;
            let mut out = Vec::new();
            // {pending: {sender: {nonce: tx}}, queued: {…}}: queued ones wait on a nonce gap,
            // still in the pool.
            for part in ["pending", "queued"] {
                if let Some(senders) = content.get(part).and_then(Value::as_object) {
                    for by_nonce in senders.values().filter_map(Value::as_object) {
                        out.extend(by_nonce.values().cloned());
                    }
                }
            }
            Ok(out)
        }
        FeedKind::PendingTransactions => node.raw("eth_pendingTransactions", json!([])).await,
        FeedKind::Subscription => Ok(Vec::new()),
    }
}

/// Looks up pushed hashes: the transactions still there (a hash gone meanwhile is skipped).
pub async fn lookup(node: &NodeClient, hashes: &[B256]) -> Result<Vec<Value>, SourceError> {
    let calls: Vec<(&'static str, Value)> =
        hashes.iter().map(|h| ("eth_getTransactionByHash", json!([h]))).collect();
    Ok(node.batch(&calls).await?.into_iter().filter(|v| v.is_object()).collect())
}

/// Drains what a subscription has pushed without waiting, up to `max` items.
pub fn drain(stream: &mut BoxStream<'static, Value>, max: usize) -> (Vec<Value>, bool) {
    let mut out = Vec::new();
    while out.len() < max {
        match stream.next().now_or_never() {
            Some(Some(item)) => out.push(item),
            Some(None) => return (out, false),
            None => break,
        }
    }
    (out, true)
}
