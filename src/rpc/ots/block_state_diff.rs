//! The state diff of a transaction on a node with neither `trace_replayTransaction` nor the
//! prestate tracer (Hardhat's node): its struct logs name what it touched — the accounts of its
//! call tree, the block's fee recipient, the storage slots its SSTOREs wrote — and the node's
//! state before and after its block gives their values. That is the transaction's own diff only
//! when nothing else in the block changed state: it is alone in its block, and the block pays no
//! block reward and no withdrawals. Otherwise the answer is an error saying so, never a diff that
//! mixes in other changes.

use std::collections::BTreeSet;

use alloy_primitives::{Address, B256};
use jsonrpsee::core::RpcResult;
use serde_json::{json, Map, Value};

use super::prestate_diff::state_diff;
use crate::{
    rpc::{
        errors::{lacks_tracer, node_error, node_lacks, not_supported, server_error},
        RpcContext,
    },
    source::structlog,
};

/// Every address a call tree names.
fn addresses(frame: &Value, out: &mut BTreeSet<Address>) {
    for key in ["from", "to"] {
        if let Some(a) = frame.get(key).and_then(|a| serde_json::from_value::<Address>(a.clone()).ok()) {
            out.insert(a);
        }
    }
    for call in frame.get("calls").and_then(Value::as_array).into_iter().flatten() {
        addresses(call, out);
    }
}

fn is_zero(v: &Value) -> bool {
    v.as_str().is_some_and(|s| s.trim_start_matches("0x").chars().all(|c| c == '0'))
}

/// The replay answer of transaction `hash` (`null` if the node knows none), its `stateDiff`
/// read from the node's state around its block.
pub(super) async fn replay_from_struct_logs(ctx: &RpcContext, hash: B256) -> RpcResult<Value> {
    let node = &ctx.node;
    let touched = match structlog::touched(node, hash).await {
        Ok(Some(t)) => t,
        Ok(None) => return Ok(Value::Null),
        Err(e) if lacks_tracer(&e) => {
            return Err(node_lacks(
                "trace_replayTransaction",
                "trace_replayTransaction, prestate tracer nor struct logs (debug_traceTransaction)",
                &e,
            ))
        }
        Err(e) => return Err(node_error(&e)),
    };
    let (after, before) =
        (format!("{:#x}", touched.block), format!("{:#x}", touched.block.saturating_sub(1)));
    let block: Value =
        node.raw("eth_getBlockByNumber", json!([after, false])).await.map_err(|e| node_error(&e))?;
    let others = block["transactions"].as_array().map_or(0, |t| t.len().saturating_sub(1));
    let withdrawals = block["withdrawals"].as_array().map_or(0, Vec::len);
    let refuse = |why: String| {
        not_supported(
            "trace_replayTransaction",
            &format!("this node has no prestate tracer, and from struct logs the state diff of a transaction is read from the state before and after its block: {why}, whose changes it would count in"),
        )
    };
    if others > 0 {
        return Err(refuse(format!("block {} holds {others} other transaction(s)", touched.block)));
    }
    if withdrawals > 0 {
        return Err(refuse(format!("block {} pays {withdrawals} withdrawal(s)", touched.block)));
    }
    if !block.get("difficulty").is_none_or(is_zero) {
        return Err(refuse(format!("block {} pays its miner a block reward", touched.block)));
    }

    let mut accounts = BTreeSet::new();
    addresses(&touched.tree, &mut accounts);
    if let Some(miner) = block.get("miner").and_then(|m| serde_json::from_value::<Address>(m.clone()).ok()) {
        accounts.insert(miner);
    }
    accounts.extend(touched.stores.iter().map(|(a, _)| *a));
    let accounts: Vec<Address> = accounts.into_iter().collect();

    let mut calls = Vec::new();
    for at in [&before, &after] {
        for a in &accounts {
            calls.push(("eth_getBalance", json!([a, at])));
            calls.push(("eth_getTransactionCount", json!([a, at])));
            calls.push(("eth_getCode", json!([a, at])));
        }
        for (a, slot) in &touched.stores {
            calls.push(("eth_getStorageAt", json!([a, format!("{slot:#066x}"), at])));
        }
    }
    let answers = node.batch(&calls).await.map_err(|e| node_error(&e))?;
    let per_block = accounts.len() * 3 + touched.stores.len();
    let state = |half: usize| {
        let answers = &answers[half * per_block..(half + 1) * per_block];
        let mut out = Map::new();
        for (i, a) in accounts.iter().enumerate() {
            let storage: Map<String, Value> = touched
                .stores
                .iter()
                .zip(&answers[accounts.len() * 3..])
                .filter(|((owner, _), value)| owner == a && !is_zero(value))
                .map(|((_, slot), value)| (format!("{slot:#066x}"), value.clone()))
                .collect();
            out.insert(
                format!("{a:#x}"),
                json!({
                    "balance": answers[i * 3],
                    "nonce": answers[i * 3 + 1],
                    "code": answers[i * 3 + 2],
                    "storage": storage,
                }),
            );
        }
        out
    };
    let (pre_all, post_all) = (state(0), state(1));
    let empty = |account: &Value| {
        ["balance", "nonce"].iter().all(|f| is_zero(&account[f]))
            && account["code"].as_str().is_none_or(|c| c == "0x")
            && account["storage"].as_object().is_none_or(Map::is_empty)
    };
    let (mut pre, mut post) = (Map::new(), Map::new());
    for (address, then) in pre_all {
        let now = &post_all[&address];
        if &then == now {
            continue;
        }
        if !empty(now) {
            post.insert(address.clone(), now.clone());
        }
        pre.insert(address, then);
    }
    let diff = state_diff(&json!({"pre": pre, "post": post})).map_err(server_error)?;
    let output = touched.tree.get("output").cloned().unwrap_or_else(|| json!("0x"));
    Ok(json!({"output": output, "stateDiff": diff, "trace": [], "vmTrace": null}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_tree_names_every_party() {
        let tree = json!({"from": "0x00000000000000000000000000000000000000aa", "to": "0x00000000000000000000000000000000000000bb",
            "calls": [{"from": "0x00000000000000000000000000000000000000bb", "to": "0x00000000000000000000000000000000000000cc",
                       "calls": [{"from": "0x00000000000000000000000000000000000000cc", "to": "0x00000000000000000000000000000000000000dd"}]}]});
        let mut out = BTreeSet::new();
        addresses(&tree, &mut out);
        let last: Vec<u8> = out.iter().map(|a| a.0[19]).collect();
        assert_eq!(last, vec![0xaa, 0xbb, 0xcc, 0xdd]);
    }

    #[test]
    fn zero_words_in_any_width() {
        assert!(is_zero(&json!("0x0")));
        assert!(is_zero(&json!("0x0000000000000000000000000000000000000000000000000000000000000000")));
        assert!(!is_zero(&json!("0x01")));
    }
}
