//! Etherscan's answer envelope: `{"status", "message", "result"}`, every field a string but the
//! result. Errors keep the envelope (and HTTP 200, as Etherscan does): status "0", message
//! "NOTOK", the reason in `result`.

use serde_json::{json, Value};

/// What an action answers.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// Status "1", message "OK".
    Ok(Value),
    /// A list with no rows: status "0", Etherscan's message for it, an empty array.
    NoRows(&'static str),
    /// A refusal: status "0", message "NOTOK", the reason as the result.
    NotOk(String),
    /// An answer outside the envelope: the `proxy` module's JSON-RPC response objects.
    Bare(Value),
}

impl Answer {
    /// A refusal with `reason`.
    pub fn refuse(reason: impl Into<String>) -> Self {
        Self::NotOk(reason.into())
    }

    /// The envelope.
    pub fn to_json(&self) -> Value {
        match self {
            Self::Ok(result) => json!({"status": "1", "message": "OK", "result": result}),
            Self::NoRows(message) => json!({"status": "0", "message": message, "result": []}),
            Self::NotOk(reason) => json!({"status": "0", "message": "NOTOK", "result": reason}),
            Self::Bare(answer) => answer.clone(),
        }
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
    use super::*;

    #[test]
    fn the_three_envelopes_carry_strings_and_a_result() {
        assert_eq!(
            Answer::Ok(json!("12")).to_json().to_string(),
            r#"{"message":"OK","result":"12","status":"1"}"#
        );
        assert_eq!(
            Answer::NoRows("No transactions found").to_json(),
            json!({"status": "0", "message": "No transactions found", "result": []})
        );
        assert_eq!(
            Answer::refuse(reasons::ADDRESS).to_json(),
            json!({"status": "0", "message": "NOTOK", "result": "Error! Invalid address format"})
        );
    }
}
