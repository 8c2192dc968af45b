//! Our additions to the `ots2_` namespace.

use alloy_primitives::{Address, U64};
use jsonrpsee::{core::RpcResult, proc_macros::rpc};
use serde::Serialize;

use std::sync::Arc;

use tokio::sync::Semaphore;

use crate::rpc::{
    errors::{db_error, server_error},
    RpcContext,
};
use crate::{
    db::{tables::OtsLabels, DbError, ReadTxn},
    index::check::{check_holdings_tables, check_transfer_indexes},
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

    /// ots2's debug check of the transfer indexes: `null` when they hold, else an error naming
    /// the first broken table and key (ots2 only logs it).
    #[method(name = "transferIntegrityChecker")]
    async fn transfer_integrity_checker(&self) -> RpcResult<()>;

    /// ots2's debug check of the holdings tables, answered as `transferIntegrityChecker`.
    #[method(name = "holdingsIntegrityChecker")]
    async fn holdings_integrity_checker(&self) -> RpcResult<()>;
}

/// Implementation of [`Ots2ExtApiServer`].
#[derive(Debug, Clone)]
pub struct Ots2Ext {
    ctx: RpcContext,
    /// The checkers read whole tables: one runs at a time, so that a public URL cannot be made
    /// to scan the database many times at once.
    checking: Arc<Semaphore>,
}

impl Ots2Ext {
    /// Serves from `ctx`.
    pub fn new(ctx: RpcContext) -> Self {
        Self { ctx, checking: Arc::new(Semaphore::new(1)) }
    }

    async fn run_check(&self, what: &'static str, f: fn(&ReadTxn) -> Result<(), DbError>) -> RpcResult<()> {
        let Ok(_permit) = self.checking.clone().try_acquire_owned() else {
            return Err(server_error("an integrity check is already running; try again when it is done"));
        };
        let db = self.ctx.db.clone();
        let result = tokio::task::spawn_blocking(move || -> Result<(), DbError> { f(&db.begin_read()?) })
            .await
            .map_err(|e| server_error(format!("the {what} check stopped: {e}")))?;
        result.map_err(|e| {
            tracing::warn!(target: "ots::rpc", check = what, error = %e, "integrity check failed");
            server_error(format!("{what} check failed: {e}"))
        })
    }
}

#[jsonrpsee::core::async_trait]
impl Ots2ExtApiServer for Ots2Ext {
    async fn get_indexer_status(&self) -> RpcResult<IndexerStatus> {
        let head = self.ctx.node.head().await.ok();
        let mut status =
            read_status(&self.ctx.db, head, self.ctx.progress.as_ref()).map_err(|e| db_error(&e))?;
        status.pending = self.ctx.pending.as_ref().map(crate::pending::PendingPool::status);
        Ok(status)
    }

    async fn transfer_integrity_checker(&self) -> RpcResult<()> {
        self.run_check("transfer index", |t| check_transfer_indexes(t).map(|_| ())).await
    }

    async fn holdings_integrity_checker(&self) -> RpcResult<()> {
        self.run_check("holdings", check_holdings_tables).await
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
