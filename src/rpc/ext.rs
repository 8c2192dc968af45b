//! Our additions to the `ots2_` namespace.

use jsonrpsee::{core::RpcResult, proc_macros::rpc};

use super::{errors::db_error, RpcContext};
use crate::status::{read_status, IndexerStatus};

/// Methods beyond Erigon's ots2.
#[rpc(server, namespace = "ots2")]
pub trait Ots2ExtApi {
    /// Indexed block, node head, lag, speed and table sizes.
    #[method(name = "getIndexerStatus")]
    async fn get_indexer_status(&self) -> RpcResult<IndexerStatus>;
}

/// Implementation of [`Ots2ExtApiServer`].
#[derive(Debug, Clone)]
pub struct Ots2Ext {
    ctx: RpcContext,
}

impl Ots2Ext {
    /// Serves from `ctx`.
    pub const fn new(ctx: RpcContext) -> Self {
        Self { ctx }
    }
}

#[jsonrpsee::core::async_trait]
impl Ots2ExtApiServer for Ots2Ext {
    async fn get_indexer_status(&self) -> RpcResult<IndexerStatus> {
        let head = self.ctx.node.head().await.ok();
        let progress = self.ctx.progress.as_ref().map(|p| p.get());
        read_status(&self.ctx.db, head, progress).map_err(|e| db_error(&e))
    }
}
