//! A transaction's call tree, as the node's call tracer (`debug_traceTransaction` with
//! `callTracer`) gives it, or, on a node without one, rebuilt from its default struct-log tracer
//! (`source::structlog`). Shared by the `ots_` transaction pages and Etherscan's internal
//! transactions.

use alloy_primitives::{Address, Bytes, B256, U256, U64};
use jsonrpsee::types::ErrorObjectOwned;
use serde::Deserialize;
use serde_json::json;

use super::{
    context::TxFrames,
    errors::{lacks_tracer, node_error, node_lacks, server_error},
    RpcContext,
};
use crate::source::structlog;

/// One frame of the tree.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Frame {
    /// `CALL`, `STATICCALL`, `DELEGATECALL`, `CALLCODE`, `CREATE`, `CREATE2`, `SELFDESTRUCT`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The caller (the contract that selfdestructs, for `SELFDESTRUCT`).
    pub from: Address,
    /// The callee, the created contract, or the selfdestruct's beneficiary.
    #[serde(default)]
    pub to: Option<Address>,
    /// Wei moved.
    #[serde(default)]
    pub value: Option<U256>,
    /// Call data or init code.
    #[serde(default)]
    pub input: Bytes,
    /// Return data, or the revert output.
    #[serde(default)]
    pub output: Option<Bytes>,
    /// Why the frame failed.
    #[serde(default)]
    pub error: Option<String>,
    /// Gas given to the frame (absent in trees rebuilt from struct logs).
    #[serde(default)]
    pub gas: Option<U64>,
    /// Gas the frame used (absent in trees rebuilt from struct logs).
    #[serde(default)]
    pub gas_used: Option<U64>,
    /// The frames it made, in order.
    #[serde(default)]
    pub calls: Vec<Frame>,
}

/// A frame of a walk: where it sits, and whether it or a frame around it failed.
#[derive(Debug, Clone)]
pub struct Placed {
    /// Its position below the top call, child indexes from the top (the top call's is empty).
    pub path: Vec<usize>,
    /// It failed, or a frame around it did (which undoes it).
    pub undone: bool,
    /// The first error on the way from the top to it, its own last.
    pub error: Option<String>,
    /// The frame, without its children.
    pub frame: Frame,
}

impl Frame {
    /// Every frame with its depth (the top call 0), in execution order.
    pub fn walk(&self, depth: u32, out: &mut Vec<(u32, Self)>) {
        out.push((depth, Self { calls: Vec::new(), ..self.clone() }));
        for call in &self.calls {
            call.walk(depth + 1, out);
        }
    }

    /// Every frame with its place in the tree, in execution order.
    pub fn placed(&self) -> Vec<Placed> {
        let mut out = Vec::new();
        self.place(&[], None, &mut out);
        out
    }

    fn place(&self, path: &[usize], outer_error: Option<&str>, out: &mut Vec<Placed>) {
        let error = self.error.as_deref().or(outer_error);
        out.push(Placed {
            path: path.to_vec(),
            undone: error.is_some(),
            error: self.error.clone().or_else(|| outer_error.map(str::to_owned)),
            frame: Self { calls: Vec::new(), ..self.clone() },
        });
        for (i, call) in self.calls.iter().enumerate() {
            let mut inner = path.to_vec();
            inner.push(i);
            call.place(&inner, error, out);
        }
    }
}

/// The call tree of `hash`: from the node's call tracer (unless `ctx` says struct logs), else
/// rebuilt from its default (struct-log) tracer; `with_memory` when frames' inputs and outputs
/// are shown.
pub async fn of(ctx: &RpcContext, hash: B256, with_memory: bool) -> Result<Frame, ErrorObjectOwned> {
    let unknown = || server_error(format!("the node knows no transaction {hash}"));
    if ctx.tx_frames == TxFrames::Auto {
        let params = json!([hash, {"tracer": "callTracer"}]);
        match ctx.node.raw::<_, Option<Frame>>("debug_traceTransaction", params).await {
            Ok(Some(frame)) => return Ok(frame),
            Ok(None) => return Err(unknown()),
            Err(e) if lacks_tracer(&e) => {}
            Err(e) => return Err(node_error(&e)),
        }
    }
    match structlog::call_tree(&ctx.node, hash, with_memory).await {
        Ok(Some(tree)) => serde_json::from_value(tree)
            .map_err(|e| server_error(format!("the call tree rebuilt from struct logs is malformed: {e}"))),
        Ok(None) => Err(unknown()),
        Err(e) if lacks_tracer(&e) => Err(node_lacks(
            "debug_traceTransaction",
            "tracer (debug_traceTransaction: neither callTracer nor the default struct logs)",
            &e,
        )),
        Err(e) => Err(node_error(&e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_carry_paths_and_the_failures_around_them() {
        let tree: Frame = serde_json::from_value(json!({
            "type": "CALL", "from": Address::ZERO, "to": Address::ZERO, "gas": "0x10", "gasUsed": "0x8",
            "calls": [
                {"type": "CALL", "from": Address::ZERO, "error": "execution reverted",
                 "calls": [{"type": "CREATE", "from": Address::ZERO}]},
                {"type": "SELFDESTRUCT", "from": Address::ZERO}
            ]
        }))
        .expect("tree");
        let placed = tree.placed();
        let paths: Vec<_> = placed.iter().map(|p| p.path.clone()).collect();
        assert_eq!(paths, [vec![], vec![0], vec![0, 0], vec![1]]);
        let undone: Vec<_> = placed.iter().map(|p| p.undone).collect();
        assert_eq!(undone, [false, true, true, false]);
        assert_eq!(placed[2].error.as_deref(), Some("execution reverted"));
        assert_eq!(placed[0].frame.gas_used, Some(U64::from(8)));
        assert!(placed[0].frame.calls.is_empty());
    }
}
