//! The `proxy` module: the node's `eth_*` methods by GET, as Etherscan serves them — the
//! parameters by name (`tag`, `txhash`, `address`, …), the answer the node's JSON-RPC response
//! object itself (`{"jsonrpc", "id", "result"}` or its `error`), not the envelope. Each goes
//! through the same proxy policy as a JSON-RPC call forwarded on `/` (docs/api.md).

use serde_json::{json, Map, Value};

use super::{params::Params, Etherscan};
use crate::source::ForwardError;

/// Where each parameter goes: a positional parameter, a field of a call object, or a fixed
/// value.
#[derive(Debug, Clone, Copy)]
enum Arg {
    /// The named parameter, required.
    Named(&'static str),
    /// The named parameter as a boolean (`true`/`false`).
    Flag(&'static str),
    /// The named parameter, `latest` if absent.
    Tag,
    /// A call object from these named parameters (those given).
    Call(&'static [&'static str]),
}

/// The actions served and their parameters, in the node method's order.
const ACTIONS: &[(&str, &[Arg])] = &[
    ("eth_blockNumber", &[]),
    ("eth_getBlockByNumber", &[Arg::Named("tag"), Arg::Flag("boolean")]),
    ("eth_getUncleByBlockNumberAndIndex", &[Arg::Named("tag"), Arg::Named("index")]),
    ("eth_getBlockTransactionCountByNumber", &[Arg::Named("tag")]),
    ("eth_getTransactionByHash", &[Arg::Named("txhash")]),
    ("eth_getTransactionByBlockNumberAndIndex", &[Arg::Named("tag"), Arg::Named("index")]),
    ("eth_getTransactionCount", &[Arg::Named("address"), Arg::Tag]),
    ("eth_sendRawTransaction", &[Arg::Named("hex")]),
    ("eth_getTransactionReceipt", &[Arg::Named("txhash")]),
    ("eth_call", &[Arg::Call(&["to", "data"]), Arg::Tag]),
    ("eth_getCode", &[Arg::Named("address"), Arg::Tag]),
    ("eth_getStorageAt", &[Arg::Named("address"), Arg::Named("position"), Arg::Tag]),
    ("eth_gasPrice", &[]),
    ("eth_estimateGas", &[Arg::Call(&["to", "data", "value", "gas", "gasPrice"])]),
];

/// Whether `action` is one of the proxy's.
pub(super) fn serves(action: &str) -> bool {
    ACTIONS.iter().any(|(name, _)| *name == action)
}

fn error(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// The node's parameters for `args`, or the name of a missing one.
fn node_params(params: &Params, args: &[Arg]) -> Result<Vec<Value>, &'static str> {
    args.iter()
        .map(|arg| match *arg {
            Arg::Named(name) => params.get(name).map(|v| json!(v)).ok_or(name),
            Arg::Flag(name) => Ok(json!(params.get(name).is_some_and(|v| v.eq_ignore_ascii_case("true")))),
            Arg::Tag => Ok(json!(params.get("tag").unwrap_or("latest"))),
            Arg::Call(fields) => {
                let call: Map<String, Value> =
                    fields.iter().filter_map(|&f| params.get(f).map(|v| (f.to_owned(), json!(v)))).collect();
                Ok(Value::Object(call))
            }
        })
        .collect()
}

/// The answer to proxy `action`: the node's response object.
pub(super) async fn answer(api: &Etherscan, action: &str, params: &Params) -> Value {
    let id =
        params.get("id").map_or(json!(1), |id| id.parse::<u64>().map_or_else(|_| json!(id), |n| json!(n)));
    let Some((method, args)) = ACTIONS.iter().find(|(name, _)| *name == action) else {
        return error(&id, -32601, "the method does not exist/is not available");
    };
    if let Some(why) = api.policy.refusal(method) {
        return error(&id, -32601, &why);
    }
    let positional = match node_params(params, args) {
        Ok(positional) => positional,
        Err(missing) => return error(&id, -32602, &format!("missing parameter {missing}")),
    };
    let Ok(raw) = serde_json::value::to_raw_value(&positional) else {
        return error(&id, -32603, "the parameters could not be encoded");
    };
    match api.ctx.node.forward(method, Some(&raw)).await {
        Ok(result) => {
            let result: Value = serde_json::from_str(result.get()).unwrap_or(Value::Null);
            json!({"jsonrpc": "2.0", "id": id, "result": result})
        }
        Err(ForwardError::Answered { code, message, data }) => {
            let mut answer = error(&id, code, &message);
            if let Some(data) = data.and_then(|d| serde_json::from_str::<Value>(d.get()).ok()) {
                answer["error"]["data"] = data;
            }
            answer
        }
        Err(ForwardError::Failed(why)) => error(&id, -32000, &format!("the node did not answer: {why}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_go_where_the_node_method_takes_them() {
        let p = Params::parse([b"to=0xab&data=0x01&tag=0x10&boolean=true&txhash=0xcd".as_slice()]);
        let of = |action: &str| {
            let args = ACTIONS.iter().find(|(name, _)| *name == action).expect("served").1;
            node_params(&p, args)
        };
        assert_eq!(of("eth_call"), Ok(vec![json!({"to": "0xab", "data": "0x01"}), json!("0x10")]));
        assert_eq!(of("eth_getBlockByNumber"), Ok(vec![json!("0x10"), json!(true)]));
        assert_eq!(of("eth_getTransactionReceipt"), Ok(vec![json!("0xcd")]));
        assert_eq!(of("eth_getCode"), Err("address"));
        let untagged = Params::parse([b"address=0xab".as_slice()]);
        let args = ACTIONS.iter().find(|(name, _)| *name == "eth_getTransactionCount").expect("served").1;
        assert_eq!(node_params(&untagged, args), Ok(vec![json!("0xab"), json!("latest")]));
        assert!(serves("eth_gasPrice") && !serves("eth_sign"));
    }
}
