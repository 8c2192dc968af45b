//! Etherscan's answer envelope: `{"status", "message", "result"}`, every field a string but the
//! result. Errors keep the envelope (and HTTP 200, as Etherscan does): status "0", message
//! "NOTOK", the reason in `result`.

use serde::Serialize;
use serde_json::{value::RawValue, Value};

/// What an action answers.
#[derive(Debug, Clone)]
pub enum Answer {
    /// Status "1", message "OK".
    Ok(Value),
    /// Status "1", message "OK", a result already written as JSON (a page of many rows costs
    /// less written once from its rows than built as a tree of values first).
    Written(Box<RawValue>),
    /// A list with no rows: status "0", Etherscan's message for it, an empty array.
    NoRows(&'static str),
    /// A refusal: status "0", message "NOTOK", the reason as the result.
    NotOk(String),
    /// An answer outside the envelope: the `proxy` module's JSON-RPC response objects.
    Bare(Value),
}

impl PartialEq for Answer {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Ok(a), Self::Ok(b)) | (Self::Bare(a), Self::Bare(b)) => a == b,
            (Self::Written(a), Self::Written(b)) => a.get() == b.get(),
            (Self::NoRows(a), Self::NoRows(b)) => a == b,
            (Self::NotOk(a), Self::NotOk(b)) => a == b,
            _ => false,
        }
    }
}

impl Answer {
    /// A refusal with `reason`.
    pub fn refuse(reason: impl Into<String>) -> Self {
        Self::NotOk(reason.into())
    }

    /// Status "1" with `rows` written as the result.
    pub fn rows<T: Serialize>(rows: &[T]) -> Self {
        match serde_json::value::to_raw_value(rows) {
            Ok(written) => Self::Written(written),
            Err(e) => Self::refuse(format!("Error! The answer could not be written: {e}")),
        }
    }

    /// The envelope as the response body: its members in Etherscan's order (status, message,
    /// result), the result written once where it stands instead of copied into a new object.
    pub fn into_body(self) -> String {
        let (status, message, result) = match self {
            Self::Ok(result) => ("1", "OK", result.to_string()),
            Self::Written(result) => ("1", "OK", String::from(Box::<str>::from(result))),
            Self::NoRows(message) => ("0", message, "[]".to_owned()),
            Self::NotOk(reason) => ("0", "NOTOK", Value::String(reason).to_string()),
            Self::Bare(answer) => return answer.to_string(),
        };
        let message = Value::String(message.to_owned());
        format!(r#"{{"status":"{status}","message":{message},"result":{result}}}"#)
    }
}

/// Etherscan's words for the refusals this API shares with it.
pub mod reasons {
    /// No module, or one this API does not have.
    pub const MODULE: &str = "Error! Missing Or invalid Module name";
    /// No action, or one the module does not have.
    pub const ACTION: &str = "Error! Missing Or invalid Action name";
    /// An address parameter that is not 20 bytes of hex.
    pub const ADDRESS: &str = "Error! Invalid address format";
    /// A transaction hash parameter that is not 32 bytes of hex.
    pub const TX_HASH: &str = "Error! Invalid transaction hash";
    /// `getabi` of a contract whose source nobody verified (no source is kept here).
    pub const NOT_VERIFIED: &str = "Contract source code not verified";
    /// A `/v2/api` call whose `chainid` is missing or not the node's.
    pub const CHAIN_ID: &str = "Missing or unsupported chainid parameter (required for v2 api), please see https://api.etherscan.io/v2/chainlist for the list of supported chainids";
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parsed(answer: Answer) -> Value {
        let body = answer.into_body();
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"))
    }

    #[test]
    fn a_body_reads_as_the_envelope_in_etherscans_order() {
        let rows = json!([{"a": "1", "b": ["x\"y"]}]);
        assert_eq!(parsed(Answer::Ok(rows.clone())), json!({"status": "1", "message": "OK", "result": rows}));
        #[derive(Serialize)]
        struct Row {
            a: &'static str,
            b: Vec<&'static str>,
        }
        let written = Answer::rows(&[Row { a: "1", b: vec!["x\"y"] }]);
        assert_eq!(parsed(written), json!({"status": "1", "message": "OK", "result": rows}));
        let bare = json!({"jsonrpc": "2.0", "id": 1, "result": "0x1"});
        assert_eq!(parsed(Answer::Bare(bare.clone())), bare, "outside the envelope");
        assert_eq!(
            Answer::Ok(json!("12")).into_body(),
            r#"{"status":"1","message":"OK","result":"12"}"#,
            "Etherscan's order"
        );
    }

    #[test]
    fn the_three_envelopes_carry_strings_and_a_result() {
        assert_eq!(parsed(Answer::Ok(json!("12"))), json!({"status": "1", "message": "OK", "result": "12"}));
        assert_eq!(
            parsed(Answer::NoRows("No transactions found")),
            json!({"status": "0", "message": "No transactions found", "result": []})
        );
        assert_eq!(
            parsed(Answer::refuse(reasons::ADDRESS)),
            json!({"status": "0", "message": "NOTOK", "result": "Error! Invalid address format"})
        );
        assert_eq!(
            parsed(Answer::refuse("Error! \"quoted\" reason")),
            json!({"status": "0", "message": "NOTOK", "result": "Error! \"quoted\" reason"})
        );
    }
}
