//! The JSON-RPC server: `ots_` and `ots2_` over HTTP and WebSocket (jsonrpsee) from read-only
//! MDBX snapshots and the node's standard methods; every other method except `ots_` ones
//! forwarded to the node.

pub mod errors;
pub mod ext;
mod gateway;
pub mod holders;
pub mod issuance;
mod materialize;
pub mod ots;
pub mod ots2;
pub mod ots_blocks;
pub mod ots_search;
mod ots_shapes;
pub mod ots_tx;
mod oversized;
mod page_timing;
pub mod proxy;
mod server;
pub mod state_diff;
pub mod subscriptions;
pub mod transfer_detail;
pub mod tx_cache;

use std::net::SocketAddr;

use jsonrpsee::RpcModule;

use crate::{db::Db, source::NodeClient};
pub use materialize::{BlockSummary, Materializer, TransactionWithReceipt, FINAL_DEPTH};
pub use proxy::ProxyPolicy;
pub use server::{serve, server_defaults, Cors, ServerOptions};

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
    /// Transactions and receipts already fetched for pages, shared by the handlers.
    pub tx_cache: tx_cache::TxCache,
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
            tx_cache: tx_cache::TxCache::default(),
        }
    }
}

/// Starting the server failed.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// A flag's value is not usable.
    #[error("server configuration: {0}")]
    Config(String),
    /// Two methods share a name (a bug).
    #[error("method registration failed: {0}")]
    Register(String),
}

/// Every method we serve.
pub fn module(ctx: RpcContext) -> Result<RpcModule<()>, ServeError> {
    use ext::Ots2ExtApiServer;
    use holders::Ots2HoldersApiServer;
    use ots::OtsApiServer;
    use ots2::Ots2ApiServer;
    let mut module = RpcModule::new(());
    module.merge(ots::Ots.into_rpc()).map_err(|e| ServeError::Register(e.to_string()))?;
    let blocks = ots_blocks::OtsBlocks::new(ctx.clone());
    module
        .merge(ots_blocks::OtsBlocksApiServer::into_rpc(blocks.clone()))
        .map_err(|e| ServeError::Register(e.to_string()))?;
    module
        .merge(ots_blocks::ErigonApiServer::into_rpc(blocks))
        .map_err(|e| ServeError::Register(e.to_string()))?;
    module
        .merge(ots_tx::OtsTxApiServer::into_rpc(ots_tx::OtsTx::new(ctx.clone())))
        .map_err(|e| ServeError::Register(e.to_string()))?;
    module
        .merge(ots_search::OtsSearchApiServer::into_rpc(ots_search::OtsSearch::new(ctx.clone())))
        .map_err(|e| ServeError::Register(e.to_string()))?;
    module
        .merge(state_diff::TraceReplayApiServer::into_rpc(state_diff::TraceReplay::new(ctx.clone())))
        .map_err(|e| ServeError::Register(e.to_string()))?;
    module
        .merge(ext::Ots2Ext::new(ctx.clone()).into_rpc())
        .map_err(|e| ServeError::Register(e.to_string()))?;
    module
        .merge(holders::Ots2Holders::new(ctx.clone()).into_rpc())
        .map_err(|e| ServeError::Register(e.to_string()))?;
    if let Some(events) = ctx.events.clone() {
        use subscriptions::Ots2SubscriptionApiServer;
        module
            .merge(subscriptions::Ots2Subscriptions::new(events).into_rpc())
            .map_err(|e| ServeError::Register(e.to_string()))?;
    }
    module.merge(ots2::Ots2::new(ctx).into_rpc()).map_err(|e| ServeError::Register(e.to_string()))?;
    Ok(module)
}
