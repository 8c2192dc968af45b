//! `trace_replayTransaction [hash, ["stateDiff"]]`, the Otterscan UI's State Diff tab, on nodes
//! without the `trace_` namespace: the node's answer where it has the method, else the state
//! diff rebuilt from `debug_traceTransaction` with `prestateTracer` in diff mode
//! (`prestate_diff`), else from struct logs and the state around the block (`block_state_diff`;
//! docs/api.md).

use alloy_primitives::B256;
use jsonrpsee::{core::RpcResult, proc_macros::rpc};
use serde_json::{json, Value};

use super::{block_state_diff, prestate_diff::state_diff};
use crate::rpc::{
    context::TxFrames,
    errors::{invalid_params, lacks_tracer, node_error, not_supported, server_error},
    RpcContext,
};

/// `trace_` methods served where the node lacks them.
#[rpc(server, namespace = "trace")]
pub trait TraceReplayApi {
    /// Replays transaction `hash`: its `output` and, when `modes` holds `stateDiff`, the state it
    /// changed. `trace` and `vmTrace` need the node's own `trace_` namespace.
    #[method(name = "replayTransaction")]
    async fn replay_transaction(&self, hash: B256, modes: Vec<String>) -> RpcResult<Value>;
}

/// Implementation of [`TraceReplayApiServer`].
#[derive(Debug, Clone)]
pub struct TraceReplay {
    ctx: RpcContext,
}

impl TraceReplay {
    /// Serves from `ctx`'s node.
    pub const fn new(ctx: RpcContext) -> Self {
        Self { ctx }
    }
}

#[jsonrpsee::core::async_trait]
impl TraceReplayApiServer for TraceReplay {
    async fn replay_transaction(&self, hash: B256, modes: Vec<String>) -> RpcResult<Value> {
        if let Some(bad) = modes.iter().find(|m| !matches!(m.as_str(), "stateDiff" | "trace" | "vmTrace")) {
            return Err(invalid_params(format!(
                "unknown trace mode {bad:?}: use stateDiff, trace or vmTrace"
            )));
        }
        match self.ctx.node.raw::<_, Value>("trace_replayTransaction", json!([hash, modes])).await {
            Ok(answer) => return Ok(answer),
            Err(e) if e.is_method_missing() => {}
            Err(e) => return Err(node_error(&e)),
        }
        if modes.iter().any(|m| m != "stateDiff") {
            return Err(not_supported(
                "trace_replayTransaction",
                "this node has none for modes other than stateDiff (only stateDiff is rebuilt here, from the node's prestate tracer or struct logs)",
            ));
        }
        let calls = [
            (
                "debug_traceTransaction",
                json!([hash, {"tracer": "prestateTracer", "tracerConfig": {"diffMode": true}}]),
            ),
            (
                "debug_traceTransaction",
                json!([hash, {"tracer": "callTracer", "tracerConfig": {"onlyTopCall": true}}]),
            ),
        ];
        if self.ctx.tx_frames == TxFrames::StructLogs {
            return block_state_diff::replay_from_struct_logs(&self.ctx, hash).await;
        }
        let answers = match self.ctx.node.batch(&calls).await {
            Ok(answers) => answers,
            Err(e) if lacks_tracer(&e) => {
                return block_state_diff::replay_from_struct_logs(&self.ctx, hash).await;
            }
            Err(e) => return Err(node_error(&e)),
        };
        if answers[0].is_null() {
            return Ok(Value::Null);
        }
        let diff = state_diff(&answers[0]).map_err(server_error)?;
        let output = answers[1].get("output").cloned().unwrap_or_else(|| json!("0x"));
        Ok(json!({"output": output, "stateDiff": diff, "trace": [], "vmTrace": null}))
    }
}
