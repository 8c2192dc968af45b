//! What every handler shares: the index, the node, the page caps, the sync loop's progress and
//! events, and the transaction cache. The page modules of each namespace import it from here.

use super::{tx_cache, window_holders::WindowHoldersCache};
use crate::{db::Db, source::NodeClient};

/// Default cap on `count` for address lists.
pub const DEFAULT_MAX_PAGE_SIZE: u64 = 1000;

/// Default cap on the page size of `ots_searchTransactionsBefore/After`: Erigon's.
pub const DEFAULT_MAX_SEARCH_PAGE: u64 = 25;

/// What the handlers share.
#[derive(Debug, Clone)]
pub struct RpcContext {
    /// The index.
    pub db: Db,
    /// The node, for what the index does not hold.
    pub node: NodeClient,
    /// Largest `count` an address list accepts.
    pub max_page_size: u64,
    /// Largest page `ots_searchTransactionsBefore/After` accept.
    pub max_search_page: u64,
    /// The sync loop of this process, if it runs one.
    pub progress: Option<crate::status::SharedProgress>,
    /// What that loop commits, for `ots2_subscribe`; without it the method is absent.
    pub events: Option<crate::events::EventBus>,
    /// The node's pending transactions this server follows; `None` when turned off.
    pub pending: Option<crate::pending::PendingPool>,
    /// Transactions and receipts already fetched for pages, shared by the handlers.
    pub tx_cache: tx_cache::TxCache,
    /// The holders each token's reorg window changed, for holder pages.
    pub window_holders: WindowHoldersCache,
    /// Where a transaction's call frames come from for its pages.
    pub tx_frames: TxFrames,
}

/// Where the transaction pages take a transaction's call frames from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TxFrames {
    /// The node's call tracer, else its default struct-log tracer.
    #[default]
    Auto,
    /// The default struct-log tracer always (a node whose call tracer is wrong or slow).
    StructLogs,
}

impl RpcContext {
    /// Serves `db` in front of `node` with the default page caps and no sync loop of its own.
    pub fn new(db: Db, node: NodeClient) -> Self {
        Self {
            db,
            node,
            max_page_size: DEFAULT_MAX_PAGE_SIZE,
            max_search_page: DEFAULT_MAX_SEARCH_PAGE,
            progress: None,
            events: None,
            pending: None,
            tx_cache: tx_cache::TxCache::default(),
            window_holders: WindowHoldersCache::default(),
            tx_frames: TxFrames::Auto,
        }
    }
}
