//! The transaction pages of the `ots_` namespace — internal operations, the call trace and the
//! revert output — built from the node's call tracer (`debug_traceTransaction` with
//! `callTracer`), or where it has none from its default struct-log tracer (`source::structlog`),
//! so that they work on a node without `ots_` (docs/api.md).

use alloy::rpc::types::trace::otterscan::{InternalOperation, OperationType, TraceEntry};
use alloy_primitives::{Bytes, B256};
use jsonrpsee::{core::RpcResult, proc_macros::rpc};
use serde_json::{json, Value};

use crate::rpc::{
    call_tree::{self, Frame},
    errors::{node_error, server_error},
    RpcContext,
};

/// `ots_` transaction methods.
#[rpc(server, namespace = "ots")]
pub trait OtsTxApi {
    /// The value transfers, creations and selfdestructs below the transaction's top call.
    #[method(name = "getInternalOperations")]
    async fn get_internal_operations(&self, hash: B256) -> RpcResult<Vec<InternalOperation>>;

    /// Every call of the transaction, in execution order, with its depth.
    #[method(name = "traceTransaction")]
    async fn trace_transaction(&self, hash: B256) -> RpcResult<Vec<TraceEntry>>;

    /// The revert output of a failed transaction (`0x` for one that succeeded).
    #[method(name = "getTransactionError")]
    async fn get_transaction_error(&self, hash: B256) -> RpcResult<Bytes>;
}

/// Implementation of [`OtsTxApiServer`].
#[derive(Debug, Clone)]
pub struct OtsTx {
    ctx: RpcContext,
}

impl OtsTx {
    /// Serves from `ctx`'s node.
    pub const fn new(ctx: RpcContext) -> Self {
        Self { ctx }
    }

    async fn frames(&self, hash: B256, with_memory: bool) -> RpcResult<Frame> {
        call_tree::of(&self.ctx, hash, with_memory).await
    }
}

#[jsonrpsee::core::async_trait]
impl OtsTxApiServer for OtsTx {
    async fn get_internal_operations(&self, hash: B256) -> RpcResult<Vec<InternalOperation>> {
        let mut frames = Vec::new();
        self.frames(hash, false).await?.walk(0, &mut frames);
        let ops = frames
            .into_iter()
            .filter(|(depth, _)| *depth > 0)
            .filter_map(|(_, f)| {
                let value = f.value.unwrap_or_default();
                let kind = match f.kind.as_str() {
                    "CALL" if !value.is_zero() => OperationType::OpTransfer,
                    "SELFDESTRUCT" => OperationType::OpSelfDestruct,
                    "CREATE" => OperationType::OpCreate,
                    "CREATE2" => OperationType::OpCreate2,
                    _ => return None,
                };
                Some(InternalOperation { r#type: kind, from: f.from, to: f.to.unwrap_or_default(), value })
            })
            .collect();
        Ok(ops)
    }

    async fn trace_transaction(&self, hash: B256) -> RpcResult<Vec<TraceEntry>> {
        let mut frames = Vec::new();
        self.frames(hash, true).await?.walk(0, &mut frames);
        Ok(frames
            .into_iter()
            .map(|(depth, f)| {
                let carries_value = !matches!(f.kind.as_str(), "STATICCALL" | "DELEGATECALL");
                TraceEntry {
                    value: carries_value.then(|| f.value.unwrap_or_default()),
                    r#type: f.kind,
                    depth,
                    from: f.from,
                    to: f.to.unwrap_or_default(),
                    input: f.input,
                    output: f.output.unwrap_or_default(),
                }
            })
            .collect())
    }

    async fn get_transaction_error(&self, hash: B256) -> RpcResult<Bytes> {
        // A successful transaction has no error output, whatever tracers the node has.
        let receipt: Option<Value> = self
            .ctx
            .node
            .raw("eth_getTransactionReceipt", json!([hash]))
            .await
            .map_err(|e| node_error(&e))?;
        let Some(receipt) = receipt else {
            return Err(server_error(format!("the node knows no transaction {hash}")));
        };
        if receipt.get("status").and_then(Value::as_str) != Some("0x0") {
            return Ok(Bytes::new());
        }
        let top = self.frames(hash, false).await?;
        Ok(if top.error.is_some() { top.output.unwrap_or_default() } else { Bytes::new() })
    }
}
