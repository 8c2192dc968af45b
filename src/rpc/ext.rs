//! Our additions to the `ots2_` namespace.

use alloy_primitives::{Address, U64};
use jsonrpsee::{core::RpcResult, proc_macros::rpc};
use serde::Serialize;

use super::{errors::db_error, RpcContext};
use crate::{
    db::tables::OtsLabels,
    status::{read_status, IndexerStatus},
};

/// One label of `getAddressLabels`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AddressLabel {
    /// The label, as the classifier gave it.
    pub label: String,
    /// The block it was given in, hex.
    pub block_number: U64,
}

/// Methods beyond Erigon's ots2.
#[rpc(server, namespace = "ots2")]
pub trait Ots2ExtApi {
    /// Indexed block, node head, lag, speed and table sizes.
    #[method(name = "getIndexerStatus")]
    async fn get_indexer_status(&self) -> RpcResult<IndexerStatus>;

    /// The labels classifiers gave `address` (user classifiers, docs/classifiers.md), oldest
    /// first; `[]` when none.
    #[method(name = "getAddressLabels")]
    fn get_address_labels(&self, address: Address) -> RpcResult<Vec<AddressLabel>>;
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

    fn get_address_labels(&self, address: Address) -> RpcResult<Vec<AddressLabel>> {
        let read = || -> Result<Vec<AddressLabel>, crate::db::DbError> {
            let txn = self.ctx.db.begin_read()?;
            let labels = txn.cursor::<OtsLabels>()?.dups(&address)?;
            Ok(labels
                .into_iter()
                .map(|l| AddressLabel { label: l.label, block_number: U64::from(l.block) })
                .collect())
        };
        read().map_err(|e| db_error(&e))
    }
}
