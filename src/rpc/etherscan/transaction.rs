//! The `transaction` module: a transaction's receipt status and its execution error, from the
//! node.

use alloy::sol_types::decode_revert_reason;
use alloy_primitives::B256;
use serde_json::{json, Value};

use super::{
    envelope::{reasons, Answer},
    params::Params,
    Etherscan,
};
use crate::rpc::call_tree;

/// `gettxreceiptstatus`: `{"status": "1"}` for a success, `"0"` for a failure, `""` when the
/// receipt has no status (before Byzantium) or the node has no such transaction.
pub(super) async fn receipt_status(api: &Etherscan, params: &Params) -> Answer {
    let Some(hash) = params.get("txhash").and_then(|h| h.parse::<B256>().ok()) else {
        return Answer::refuse(reasons::TX_HASH);
    };
    match api.ctx.node.raw::<_, Value>("eth_getTransactionReceipt", json!([hash])).await {
        Ok(receipt) => {
            let status = match receipt["status"].as_str() {
                Some("0x1") => "1",
                Some("0x0") => "0",
                _ => "",
            };
            Answer::Ok(json!({"status": status}))
        }
        Err(e) => Answer::refuse(format!("Error! The node did not answer eth_getTransactionReceipt: {e}")),
    }
}

/// `getstatus`: `{"isError": "0", "errDescription": ""}` for a transaction that succeeded (or
/// that the node does not know, as Etherscan answers), `"1"` and why for one that failed: the
/// revert reason when the output carries one, else the node's tracer's error (`"Reverted"`
/// without a tracer).
pub(super) async fn status(api: &Etherscan, params: &Params) -> Answer {
    let Some(hash) = params.get("txhash").and_then(|h| h.parse::<B256>().ok()) else {
        return Answer::refuse(reasons::TX_HASH);
    };
    let receipt = match api.ctx.node.raw::<_, Value>("eth_getTransactionReceipt", json!([hash])).await {
        Ok(receipt) => receipt,
        Err(e) => {
            return Answer::refuse(format!("Error! The node did not answer eth_getTransactionReceipt: {e}"))
        }
    };
    if receipt["status"].as_str() != Some("0x0") {
        return Answer::Ok(json!({"isError": "0", "errDescription": ""}));
    }
    let why = match call_tree::of(&api.ctx, hash, true).await {
        Ok(top) => top
            .output
            .as_deref()
            .and_then(|output| decode_revert_reason(output))
            .map(|why| why.strip_prefix("revert: ").map(str::to_owned).unwrap_or(why))
            .or(top.error)
            .unwrap_or_else(|| "Reverted".to_owned()),
        Err(_) => "Reverted".to_owned(),
    };
    Answer::Ok(json!({"isError": "1", "errDescription": why}))
}
