//! The parity `stateDiff` of a prestate tracer's diff-mode answer.
//!
//! The prestate tracer's diff mode gives, for every account the transaction changed, its state
//! before (`pre`, whole) and the fields that changed (`post`): an account missing from `post`
//! was deleted, one whose `pre` is empty was created, a storage slot missing from one side is
//! zero there. The parity `stateDiff` marks each field `"="` (unchanged), `{"*": {from, to}}`,
//! `{"+": new}` (born) or `{"-": old}` (died).

use serde_json::{json, Map, Value};

const ZERO_WORD: &str = "0x0000000000000000000000000000000000000000000000000000000000000000";

/// A field of an account in the tracer's answer, or its value for an account that lacks it.
fn field(account: &Value, name: &str) -> Value {
    match (account.get(name), name) {
        (Some(v), "nonce") if v.is_u64() => json!(format!("{:#x}", v.as_u64().unwrap_or_default())),
        (Some(v), _) if !v.is_null() => v.clone(),
        (_, "code") => json!("0x"),
        _ => json!("0x0"),
    }
}

/// Whether the tracer's `pre` of an account says it did not exist.
fn absent(pre: &Value) -> bool {
    let zero = |name| matches!(field(pre, name).as_str(), Some("0x0" | "0x"));
    zero("balance")
        && zero("nonce")
        && zero("code")
        && pre.get("storage").and_then(Value::as_object).is_none_or(Map::is_empty)
}

fn slots(account: &Value) -> Map<String, Value> {
    account.get("storage").and_then(Value::as_object).cloned().unwrap_or_default()
}

/// The parity diff of one account.
fn account_diff(pre: Option<&Value>, post: Option<&Value>) -> Value {
    let pre = pre.filter(|p| !absent(p));
    let mut out = Map::new();
    let mut storage = Map::new();
    match (pre, post) {
        (None, Some(post)) => {
            for name in ["balance", "nonce", "code"] {
                out.insert(name.into(), json!({"+": field(post, name)}));
            }
            for (slot, value) in slots(post) {
                storage.insert(slot, json!({"+": value}));
            }
        }
        (Some(pre), None) => {
            for name in ["balance", "nonce", "code"] {
                out.insert(name.into(), json!({"-": field(pre, name)}));
            }
            for (slot, value) in slots(pre) {
                storage.insert(slot, json!({"-": value}));
            }
        }
        (Some(pre), Some(post)) => {
            for name in ["balance", "nonce", "code"] {
                let (from, to) = (field(pre, name), post.get(name).map(|_| field(post, name)));
                out.insert(
                    name.into(),
                    match to {
                        Some(to) if to != from => json!({"*": {"from": from, "to": to}}),
                        _ => json!("="),
                    },
                );
            }
            let (before, after) = (slots(pre), slots(post));
            let mut keys: Vec<&String> = before.keys().chain(after.keys()).collect();
            keys.sort();
            keys.dedup();
            for slot in keys {
                let from = before.get(slot).cloned().unwrap_or_else(|| json!(ZERO_WORD));
                let to = after.get(slot).cloned().unwrap_or_else(|| json!(ZERO_WORD));
                if from != to {
                    storage.insert(slot.clone(), json!({"*": {"from": from, "to": to}}));
                }
            }
        }
        (None, None) => {}
    }
    out.insert("storage".into(), Value::Object(storage));
    Value::Object(out)
}

/// The parity `stateDiff` of a prestate-tracer diff (`{pre, post}`).
pub(super) fn state_diff(prestate: &Value) -> Result<Value, String> {
    let (Some(pre), Some(post)) = (prestate.get("pre"), prestate.get("post")) else {
        return Err("the prestate tracer's answer has no pre and post".into());
    };
    let (pre, post) =
        (pre.as_object().cloned().unwrap_or_default(), post.as_object().cloned().unwrap_or_default());
    let mut addresses: Vec<&String> = pre.keys().chain(post.keys()).collect();
    addresses.sort();
    addresses.dedup();
    let mut out = Map::new();
    for address in addresses {
        out.insert(address.to_lowercase(), account_diff(pre.get(address), post.get(address)));
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transfer_to_a_new_account() {
        let diff = state_diff(&json!({
            "pre": {
                "0xAA": {"balance": "0x10", "nonce": 1},
                "0xbb": {"balance": "0x0"},
                "0xcc": {"balance": "0x5", "nonce": 0, "code": "0x60", "storage": {"0x01": "0x02", "0x03": "0x04"}}
            },
            "post": {
                "0xAA": {"balance": "0x8", "nonce": 2},
                "0xbb": {"balance": "0x7"},
                "0xcc": {"storage": {"0x01": "0x09", "0x05": "0x06"}}
            }
        }))
        .expect("diff");
        assert_eq!(diff["0xaa"]["balance"], json!({"*": {"from": "0x10", "to": "0x8"}}));
        assert_eq!(diff["0xaa"]["nonce"], json!({"*": {"from": "0x1", "to": "0x2"}}));
        assert_eq!(diff["0xaa"]["code"], json!("="));
        assert_eq!(diff["0xbb"]["balance"], json!({"+": "0x7"}), "an account that did not exist is born");
        assert_eq!(diff["0xbb"]["code"], json!({"+": "0x"}));
        assert_eq!(diff["0xcc"]["balance"], json!("="));
        let storage = &diff["0xcc"]["storage"];
        assert_eq!(storage["0x01"], json!({"*": {"from": "0x02", "to": "0x09"}}));
        assert_eq!(storage["0x03"], json!({"*": {"from": "0x04", "to": ZERO_WORD}}), "missing after: zeroed");
        assert_eq!(
            storage["0x05"],
            json!({"*": {"from": ZERO_WORD, "to": "0x06"}}),
            "missing before: was zero"
        );
    }

    #[test]
    fn a_deleted_account_dies() {
        let diff = state_diff(
            &json!({"pre": {"0xdd": {"balance": "0x3", "nonce": 1, "code": "0x6001"}}, "post": {}}),
        )
        .expect("diff");
        assert_eq!(diff["0xdd"]["balance"], json!({"-": "0x3"}));
        assert_eq!(diff["0xdd"]["code"], json!({"-": "0x6001"}));
        assert!(state_diff(&json!({"pre": {}})).is_err());
    }
}
