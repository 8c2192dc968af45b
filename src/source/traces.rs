//! Call frames from the node's tracers: parity-style `trace_block`, geth's
//! `debug_traceBlockByNumber` with `callTracer`, or trees rebuilt from struct logs in
//! `callTracer`'s shape, all turned into [`CallFrame`]s.

use std::collections::HashMap;

use alloy_primitives::{Address, U256};
use ots_classifiers::{CallFrame, FrameKind};
use serde::Deserialize;
use serde_json::Value;

/// Where call frames come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceMode {
    /// `trace_block` (Erigon, reth, Nethermind, Anvil).
    Parity,
    /// `debug_traceBlockByNumber` with `callTracer` (geth and most others).
    Geth,
    /// `debug_traceTransaction` with the default struct-log tracer, transaction by transaction,
    /// frames rebuilt from the steps (Hardhat's node; `source::structlog`).
    StructLog,
    /// The node offers none: blocks carry no frames.
    None,
}

impl TraceMode {
    /// Name for logs and status.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Parity => "trace_block",
            Self::Geth => "debug_traceBlockByNumber",
            Self::StructLog => "debug_traceTransaction (struct logs)",
            Self::None => "none",
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ParityTrace {
    action: Value,
    result: Option<Value>,
    error: Option<String>,
    #[serde(default)]
    trace_address: Vec<usize>,
    transaction_position: Option<u64>,
    #[serde(rename = "type")]
    kind: String,
}

fn address_at(v: &Value, field: &str) -> Result<Address, String> {
    match v.get(field) {
        None | Some(Value::Null) => Ok(Address::ZERO),
        Some(x) => serde_json::from_value(x.clone()).map_err(|e| format!("bad {field}: {e}")),
    }
}

fn value_at(v: &Value, field: &str) -> Result<U256, String> {
    match v.get(field) {
        None | Some(Value::Null) => Ok(U256::ZERO),
        Some(x) => serde_json::from_value(x.clone()).map_err(|e| format!("bad {field}: {e}")),
    }
}

/// Frames of a `trace_block` answer. A frame counts as successful only if it and every frame
/// around it succeeded (a reverted parent undoes its children).
pub fn parse_parity(tx_count: usize, answer: Value) -> Result<Vec<CallFrame>, String> {
    let traces: Vec<ParityTrace> =
        serde_json::from_value(answer).map_err(|e| format!("malformed trace_block answer: {e}"))?;
    let mut out = Vec::with_capacity(traces.len());
    let mut ok_at: HashMap<(u64, Vec<usize>), bool> = HashMap::new();
    for t in traces {
        let Some(tx_index) = t.transaction_position else { continue }; // block and uncle rewards
        if tx_index as usize >= tx_count {
            return Err(format!("a trace names transaction {tx_index} of a block with {tx_count}"));
        }
        let parent_ok = match t.trace_address.split_last() {
            None => true,
            Some((_, parent)) => *ok_at.get(&(tx_index, parent.to_vec())).unwrap_or(&true),
        };
        let success = parent_ok && t.error.is_none();
        let (kind, from, to, value) = match t.kind.as_str() {
            "call" => {
                let kind = match t.action.get("callType").and_then(Value::as_str).unwrap_or("call") {
                    "staticcall" => FrameKind::StaticCall,
                    "delegatecall" => FrameKind::DelegateCall,
                    "callcode" => FrameKind::CallCode,
                    _ => FrameKind::Call,
                };
                (
                    kind,
                    address_at(&t.action, "from")?,
                    address_at(&t.action, "to")?,
                    value_at(&t.action, "value")?,
                )
            }
            "create" => {
                let kind = match t.action.get("creationMethod").and_then(Value::as_str) {
                    Some("create2") => FrameKind::Create2,
                    _ => FrameKind::Create,
                };
                let created =
                    t.result.as_ref().map(|r| address_at(r, "address")).transpose()?.unwrap_or_default();
                (kind, address_at(&t.action, "from")?, created, value_at(&t.action, "value")?)
            }
            "suicide" | "selfdestruct" => (
                FrameKind::SelfDestruct,
                address_at(&t.action, "address")?,
                address_at(&t.action, "refundAddress")?,
                value_at(&t.action, "balance")?,
            ),
            _ => continue,
        };
        let depth = t.trace_address.len() as u32;
        ok_at.insert((tx_index, t.trace_address), success);
        out.push(CallFrame { tx_index, depth, kind, from, to, value, success });
    }
    Ok(out)
}

#[derive(Debug, Deserialize)]
struct GethFrame {
    #[serde(rename = "type")]
    kind: String,
    from: Option<Address>,
    to: Option<Address>,
    value: Option<U256>,
    error: Option<String>,
    #[serde(default)]
    calls: Vec<GethFrame>,
}

#[derive(Debug, Deserialize)]
struct GethTxTrace {
    result: Option<GethFrame>,
    error: Option<String>,
}

fn walk(frame: GethFrame, tx_index: u64, depth: u32, parent_ok: bool, out: &mut Vec<CallFrame>) {
    let success = parent_ok && frame.error.is_none();
    let kind = match frame.kind.to_ascii_uppercase().as_str() {
        "STATICCALL" => Some(FrameKind::StaticCall),
        "DELEGATECALL" => Some(FrameKind::DelegateCall),
        "CALLCODE" => Some(FrameKind::CallCode),
        "CREATE" => Some(FrameKind::Create),
        "CREATE2" => Some(FrameKind::Create2),
        "SELFDESTRUCT" => Some(FrameKind::SelfDestruct),
        "CALL" => Some(FrameKind::Call),
        _ => None,
    };
    if let Some(kind) = kind {
        out.push(CallFrame {
            tx_index,
            depth,
            kind,
            from: frame.from.unwrap_or_default(),
            to: frame.to.unwrap_or_default(),
            value: frame.value.unwrap_or_default(),
            success,
        });
    }
    for child in frame.calls {
        walk(child, tx_index, depth + 1, success, out);
    }
}

/// Frames of a `debug_traceBlockByNumber` (`callTracer`) answer: one tree per transaction.
pub fn parse_geth(tx_count: usize, answer: Value) -> Result<Vec<CallFrame>, String> {
    let traces: Vec<GethTxTrace> = serde_json::from_value(answer)
        .map_err(|e| format!("malformed debug_traceBlockByNumber answer: {e}"))?;
    if traces.len() != tx_count {
        return Err(format!("{} transaction traces for {tx_count} transactions", traces.len()));
    }
    let mut out = Vec::new();
    for (i, t) in traces.into_iter().enumerate() {
        match (t.result, t.error) {
            (Some(root), _) => walk(root, i as u64, 0, true, &mut out),
            (None, e) => return Err(format!("transaction {i} has no trace: {}", e.unwrap_or_default())),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parity_frames_inherit_a_reverted_parent() {
        let answer = json!([
            {"action": {"callType": "call", "from": "0x0000000000000000000000000000000000000001", "to": "0x0000000000000000000000000000000000000002", "value": "0x5"},
             "result": {"output": "0x"}, "traceAddress": [], "transactionPosition": 0, "type": "call"},
            {"action": {"from": "0x0000000000000000000000000000000000000002", "value": "0x0", "init": "0x00"},
             "result": {"address": "0x0000000000000000000000000000000000000003", "code": "0x"}, "traceAddress": [0], "transactionPosition": 0, "type": "create"},
            {"action": {"callType": "call", "from": "0x0000000000000000000000000000000000000001", "to": "0x0000000000000000000000000000000000000004", "value": "0x0"},
             "error": "Reverted", "result": null, "traceAddress": [], "transactionPosition": 1, "type": "call"},
            {"action": {"from": "0x0000000000000000000000000000000000000004", "value": "0x0", "init": "0x00", "creationMethod": "create2"},
             "result": {"address": "0x0000000000000000000000000000000000000005", "code": "0x"}, "traceAddress": [0], "transactionPosition": 1, "type": "create"},
            {"action": {"author": "0x0000000000000000000000000000000000000009", "rewardType": "block", "value": "0x1"}, "result": null, "traceAddress": [], "type": "reward"}
        ]);
        let frames = parse_parity(2, answer).expect("parses");
        assert_eq!(frames.len(), 4);
        assert_eq!(
            (frames[1].kind, frames[1].to, frames[1].success, frames[1].depth),
            (FrameKind::Create, Address::with_last_byte(3), true, 1)
        );
        assert_eq!((frames[3].kind, frames[3].success), (FrameKind::Create2, false));
        assert_eq!(frames[0].value, U256::from(5));
        assert!(parse_parity(
            1,
            json!([{"action": {}, "traceAddress": [], "transactionPosition": 3, "type": "call"}])
        )
        .is_err());
        assert!(parse_parity(1, json!({"not": "a list"})).is_err());
    }

    #[test]
    fn geth_trees_flatten_in_execution_order() {
        let answer = json!([
            {"txHash": "0x00", "result": {"type": "CALL", "from": "0x0000000000000000000000000000000000000001", "to": "0x0000000000000000000000000000000000000002", "value": "0x0",
              "calls": [
                {"type": "CREATE2", "from": "0x0000000000000000000000000000000000000002", "to": "0x0000000000000000000000000000000000000003", "value": "0x0"},
                {"type": "CALL", "from": "0x0000000000000000000000000000000000000002", "to": "0x0000000000000000000000000000000000000004", "error": "execution reverted",
                 "calls": [{"type": "CREATE", "from": "0x0000000000000000000000000000000000000004", "to": "0x0000000000000000000000000000000000000005"}]}
              ]}}
        ]);
        let frames = parse_geth(1, answer).expect("parses");
        let kinds: Vec<_> = frames.iter().map(|f| (f.kind, f.depth, f.success)).collect();
        assert_eq!(
            kinds,
            vec![
                (FrameKind::Call, 0, true),
                (FrameKind::Create2, 1, true),
                (FrameKind::Call, 1, false),
                (FrameKind::Create, 2, false)
            ]
        );
        assert!(parse_geth(2, json!([])).is_err());
    }
}
