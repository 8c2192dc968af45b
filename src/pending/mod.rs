//! Pending transactions: the node's pool followed live, kept in memory only (bounded, rebuilt
//! from the pool after a restart), found by address, and their fate — mined once the index has
//! the block, replaced, dropped — told to `pendingActivity` subscribers (docs/api.md).

pub mod calldata;
pub mod feed;
pub mod pool;
mod tracker;

use std::{
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use serde::Serialize;
use tokio::sync::broadcast;

pub use feed::FeedKind;
pub use pool::{Notice, NoticeKind, PendingTx, Pool};

use crate::{db::Db, source::NodeClient};

/// Default bound on the transactions kept.
pub const DEFAULT_MAX_PENDING: usize = 10_000;
/// Default interval between looks at the node's pool.
pub const DEFAULT_POLL: Duration = Duration::from_secs(1);
/// Notices buffered per subscriber before it counts as too slow.
pub const NOTICE_BUFFER: usize = 4096;

/// How the pool is kept.
#[derive(Debug, Clone, Copy)]
pub struct PendingConfig {
    /// Most transactions kept.
    pub max: usize,
    /// How often the node's pool is looked at.
    pub poll: Duration,
    /// How often a node that could not be reached at start-up is asked again for a source.
    pub redetect: Duration,
}

impl Default for PendingConfig {
    fn default() -> Self {
        Self { max: DEFAULT_MAX_PENDING, poll: DEFAULT_POLL, redetect: DEFAULT_REDETECT }
    }
}

/// What `status` and `ots2_getIndexerStatus` say of the pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingStatus {
    /// Where pending transactions come from; null when the node offers none.
    pub source: Option<String>,
    /// Why there is no source, when there is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    /// Transactions kept now (null from `status`, which runs in another process).
    pub transactions: Option<usize>,
    /// Bytes they take, estimated.
    pub bytes: Option<usize>,
    /// The bound.
    pub max: Option<usize>,
}

/// Default interval between attempts to reach a node that was down at start-up.
pub const DEFAULT_REDETECT: Duration = Duration::from_secs(10);

/// A lock that a panic elsewhere does not poison for good: the worst a panic while holding one
/// leaves is a stale entry.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What the tracker and the handlers share.
#[derive(Debug)]
struct Shared {
    pool: Mutex<Pool>,
    notices: broadcast::Sender<Arc<Notice>>,
    source: Mutex<Option<FeedKind>>,
    unavailable: Mutex<Option<String>>,
}

impl Shared {
    fn pool(&self) -> MutexGuard<'_, Pool> {
        lock(&self.pool)
    }

    fn publish(&self, notices: Vec<Notice>) {
        for notice in notices {
            // No receiver is not an error: nobody listens.
            let _ = self.notices.send(Arc::new(notice));
        }
    }

    fn set_unavailable(&self, why: String) {
        *lock(&self.unavailable) = Some(why);
    }

    fn set_ended(&self, why: &str) {
        *lock(&self.source) = None;
        self.set_unavailable(why.to_owned());
    }

    fn found(&self, kind: FeedKind, max: usize) {
        tracing::info!(target: "ots::pending", source = kind.name(), max, "following the node's pending transactions");
        *lock(&self.source) = Some(kind);
        *lock(&self.unavailable) = None;
    }

    fn none_offered(&self) {
        tracing::warn!(target: "ots::pending", "the node offers no pending transactions (no newPendingTransactions subscription, txpool_content or eth_pendingTransactions): ots2_getPendingTransactions and pendingActivity will answer that; enable the txpool namespace (geth: --http.api eth,net,web3,debug,txpool) or pass --max-pending-transactions 0");
        self.set_unavailable(NO_SOURCE.to_owned());
    }
}

/// The pending pool of a server: a handle shared by the handlers; the tracker stops when the
/// last handle is dropped.
#[derive(Debug, Clone)]
pub struct PendingPool {
    shared: Arc<Shared>,
}

impl PendingPool {
    /// Finds the node's best source of pending transactions and starts following it. A node
    /// with none gives a pool that stays empty and says why.
    pub async fn start(node: NodeClient, db: Db, config: PendingConfig) -> Self {
        let detection = feed::detect(&node).await;
        let shared = Arc::new(Shared {
            pool: Mutex::new(Pool::new(config.max)),
            notices: broadcast::channel(NOTICE_BUFFER).0,
            source: Mutex::new(None),
            unavailable: Mutex::new(None),
        });
        let weak = Arc::downgrade(&shared);
        match detection {
            feed::Detection::Found(feed) => {
                shared.found(feed.kind(), config.max);
                tokio::spawn(tracker::run(weak, node, db, feed, config.poll));
            }
            feed::Detection::NoneOffered => shared.none_offered(),
            feed::Detection::Unreachable(e) => {
                tracing::warn!(target: "ots::pending", error = %e, "cannot ask the node for its pending transactions; asking again");
                shared.set_unavailable(format!(
                    "the node could not be reached to follow its pending transactions ({e}); trying again every {} s",
                    config.redetect.as_secs_f64()
                ));
                tokio::spawn(async move {
                    loop {
                        tokio::time::sleep(config.redetect).await;
                        let Some(shared) = weak.upgrade() else { return };
                        match feed::detect(&node).await {
                            feed::Detection::Found(feed) => {
                                shared.found(feed.kind(), config.max);
                                drop(shared);
                                return tracker::run(weak, node, db, feed, config.poll).await;
                            }
                            feed::Detection::NoneOffered => return shared.none_offered(),
                            feed::Detection::Unreachable(_) => {}
                        }
                    }
                });
            }
        }
        Self { shared }
    }

    /// Why pending transactions cannot be served, if they cannot.
    pub fn unavailable(&self) -> Option<String> {
        lock(&self.shared.unavailable).clone()
    }

    /// Up to `n` transactions in the pool concerning `address`, newest first seen first.
    pub fn of_address(&self, address: &alloy_primitives::Address, n: usize) -> Vec<Arc<PendingTx>> {
        self.shared.pool().of_address(address, n)
    }

    /// A receiver of every later notice.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Notice>> {
        self.shared.notices.subscribe()
    }

    /// Where it stands.
    pub fn status(&self) -> PendingStatus {
        let pool = self.shared.pool();
        PendingStatus {
            source: lock(&self.shared.source).map(|s| s.name().to_owned()),
            unavailable: self.unavailable(),
            transactions: Some(pool.len()),
            bytes: Some(pool.bytes()),
            max: Some(pool.max()),
        }
    }
}

/// What a node offers, for `status` in another process than the server's.
pub async fn probe(node: &NodeClient) -> PendingStatus {
    let (source, unavailable) = match feed::detect(node).await {
        feed::Detection::Found(feed) => (Some(feed.kind().name().to_owned()), None),
        feed::Detection::NoneOffered => (None, Some(NO_SOURCE.to_owned())),
        feed::Detection::Unreachable(e) => (None, Some(format!("the node could not be asked: {e}"))),
    };
    PendingStatus { source, unavailable, transactions: None, bytes: None, max: None }
}

/// What the methods answer on a node with no source.
pub const NO_SOURCE: &str = "the node offers no pending transactions: it answers neither eth_subscribe newPendingTransactions (over ws://), txpool_content nor eth_pendingTransactions";
