//! The `transaction` module: a transaction's receipt status, from the node.

use alloy_primitives::B256;
use serde_json::{json, Value};

use super::{
    envelope::{reasons, Answer},
    params::Params,
    Etherscan,
};

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
