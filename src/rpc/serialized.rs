//! An answer written to JSON in one buffer before jsonrpsee sends it.
//!
//! jsonrpsee writes a method's result through a writer that checks the response's size limit on
//! every call, and serde makes a call per JSON token: for an answer of many small fields (a page
//! of holders: an address and a balance each) those calls cost more than reading the page from
//! the index. Written first into a plain buffer, the answer reaches jsonrpsee's writer as one
//! string. The limit still holds: jsonrpsee measures the whole response as before.

use std::marker::PhantomData;

use jsonrpsee::core::RpcResult;
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;

use super::errors::server_error;

/// A `T` already written as JSON; it serializes as that JSON, unchanged.
#[derive(Debug)]
pub struct Serialized<T> {
    json: Box<RawValue>,
    _of: PhantomData<T>,
}

impl<T: Serialize> Serialized<T> {
    /// Writes `value`.
    pub fn of(value: &T) -> RpcResult<Self> {
        let json = serde_json::value::to_raw_value(value).map_err(|e| server_error(e.to_string()))?;
        Ok(Self { json, _of: PhantomData })
    }
}

impl<T> Serialize for Serialized<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.json.serialize(serializer)
    }
}

impl<T> Clone for Serialized<T> {
    fn clone(&self) -> Self {
        Self { json: self.json.clone(), _of: PhantomData }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_reads_as_its_value_would() {
        #[derive(Serialize)]
        struct Page {
            total: u64,
            results: Vec<(String, u8)>,
        }
        let page = Page { total: 2, results: vec![("a\"b".into(), 1), ("c".into(), 2)] };
        let written = Serialized::of(&page).expect("serializes");
        let response = serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": written});
        let direct = serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": page});
        assert_eq!(response, direct);
        assert_eq!(
            serde_json::to_string(&written).expect("json"),
            serde_json::to_string(&page).expect("json")
        );
    }
}
