//! `ots2_getPendingTransactions`: what the node's pool holds for an address, from the pending
//! pool this server keeps (`crate::pending`).

use alloy_primitives::{Address, U64};
use jsonrpsee::{core::RpcResult, proc_macros::rpc};
use serde::Serialize;
use serde_json::value::RawValue;

use crate::{
    pending::{calldata::PendingTransfer, PendingPool, PendingTx},
    rpc::{
        errors::{invalid_params, server_error},
        RpcContext,
    },
};

/// One pending transaction of an address.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingEntry {
    /// The node's transaction object, as it came.
    pub transaction: Box<RawValue>,
    /// When this server first saw it in the pool: Unix time in milliseconds.
    pub first_seen: U64,
    /// The token transfers its calldata asks for, on contracts the index classified.
    pub transfers: Vec<PendingTransfer>,
}

impl PendingEntry {
    /// The answer's shape of `tx`.
    pub fn of(tx: &PendingTx) -> Self {
        Self {
            transaction: RawValue::to_owned(&tx.transaction),
            first_seen: U64::from(tx.first_seen_ms),
            transfers: tx.transfers.clone(),
        }
    }
}

/// The pending methods.
#[rpc(server, namespace = "ots2")]
pub trait Ots2PendingApi {
    /// Up to `pageSize` transactions in the node's pool whose sender, recipient or token transfer
    /// party is `address`, newest first seen first.
    #[method(name = "getPendingTransactions")]
    fn get_pending_transactions(&self, address: Address, page_size: u64) -> RpcResult<Vec<PendingEntry>>;
}

/// Implementation of [`Ots2PendingApiServer`].
#[derive(Debug, Clone)]
pub struct Ots2Pending {
    ctx: RpcContext,
}

impl Ots2Pending {
    /// Serves from `ctx`.
    pub const fn new(ctx: RpcContext) -> Self {
        Self { ctx }
    }
}

/// The pool, or why there is none.
pub fn pool_of(ctx: &RpcContext) -> RpcResult<&PendingPool> {
    let pool = ctx.pending.as_ref().ok_or_else(|| {
        server_error("pending transactions are off on this server (--max-pending-transactions 0)")
    })?;
    match pool.unavailable() {
        Some(why) => Err(server_error(why)),
        None => Ok(pool),
    }
}

impl Ots2PendingApiServer for Ots2Pending {
    fn get_pending_transactions(&self, address: Address, page_size: u64) -> RpcResult<Vec<PendingEntry>> {
        if page_size > self.ctx.max_page_size {
            return Err(invalid_params(format!(
                "pageSize {page_size} is over the maximum page size {} (see --max-page-size)",
                self.ctx.max_page_size
            )));
        }
        let pool = pool_of(&self.ctx)?;
        let n = usize::try_from(page_size).unwrap_or(usize::MAX);
        Ok(pool.of_address(&address, n).iter().map(|tx| PendingEntry::of(tx)).collect())
    }
}
