//! The JSON-RPC server, in three rooms: `ots` (the pages of the Otterscan UI: the `ots_` methods
//! and the `trace_`/`erigon_` ones it sends), `ots2` (Erigon's `ots2_` namespace and our own
//! additions to it), and `gateway` (binding, limits, forwarding to the node, subscriptions);
//! beside them on the same port, `etherscan` (Etherscan's HTTP API on `/api`).
//! Below them, what the pages share: the context, error objects, the node fetches of a page and
//! their caches.

pub mod call_tree;
mod context;
pub mod errors;
pub mod etherscan;
pub mod gateway;
mod materialize;
pub mod ots;
pub mod ots2;
mod page_timing;
pub mod serialized;
pub mod transfer_detail;
pub mod tx_cache;
pub mod window_holders;

use std::net::SocketAddr;

use jsonrpsee::RpcModule;

pub use context::{RpcContext, TxFrames, DEFAULT_MAX_PAGE_SIZE, DEFAULT_MAX_SEARCH_PAGE};
pub use gateway::{
    proxy::{self, ProxyPolicy},
    server::{serve, server_defaults, Cors, ServerOptions},
    subscriptions,
};
pub use materialize::{BlockSummary, Materializer, TransactionWithReceipt, FINAL_DEPTH};

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
    use ots::OtsApiServer;
    use ots2::ext::Ots2ExtApiServer;
    use ots2::holders::Ots2HoldersApiServer;
    use ots2::Ots2ApiServer;
    let mut module = RpcModule::new(());
    module.merge(ots::Ots.into_rpc()).map_err(|e| ServeError::Register(e.to_string()))?;
    let blocks = ots::blocks::OtsBlocks::new(ctx.clone());
    module
        .merge(ots::blocks::OtsBlocksApiServer::into_rpc(blocks.clone()))
        .map_err(|e| ServeError::Register(e.to_string()))?;
    module
        .merge(ots::blocks::ErigonApiServer::into_rpc(blocks))
        .map_err(|e| ServeError::Register(e.to_string()))?;
    module
        .merge(ots::tx::OtsTxApiServer::into_rpc(ots::tx::OtsTx::new(ctx.clone())))
        .map_err(|e| ServeError::Register(e.to_string()))?;
    module
        .merge(ots::search::OtsSearchApiServer::into_rpc(ots::search::OtsSearch::new(ctx.clone())))
        .map_err(|e| ServeError::Register(e.to_string()))?;
    module
        .merge(ots::state_diff::TraceReplayApiServer::into_rpc(ots::state_diff::TraceReplay::new(
            ctx.clone(),
        )))
        .map_err(|e| ServeError::Register(e.to_string()))?;
    module
        .merge(ots2::ext::Ots2Ext::new(ctx.clone()).into_rpc())
        .map_err(|e| ServeError::Register(e.to_string()))?;
    module
        .merge(ots2::holders::Ots2Holders::new(ctx.clone()).into_rpc())
        .map_err(|e| ServeError::Register(e.to_string()))?;
    if ctx.events.is_some() || ctx.pending.is_some() {
        use gateway::subscriptions::Ots2SubscriptionApiServer;
        let subscriptions =
            gateway::subscriptions::Ots2Subscriptions::new(ctx.events.clone(), ctx.pending.clone());
        module.merge(subscriptions.into_rpc()).map_err(|e| ServeError::Register(e.to_string()))?;
    }
    {
        use ots2::summary::Ots2SummaryApiServer;
        module
            .merge(ots2::summary::Ots2Summary::new(ctx.clone()).into_rpc())
            .map_err(|e| ServeError::Register(e.to_string()))?;
    }
    {
        use ots2::pending::Ots2PendingApiServer;
        module
            .merge(ots2::pending::Ots2Pending::new(ctx.clone()).into_rpc())
            .map_err(|e| ServeError::Register(e.to_string()))?;
    }
    module.merge(ots2::Ots2::new(ctx).into_rpc()).map_err(|e| ServeError::Register(e.to_string()))?;
    Ok(module)
}
