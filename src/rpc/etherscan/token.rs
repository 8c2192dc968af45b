//! The `token` module: a token's holders, ranked by balance, and their count — from the index
//! alone.

use serde_json::{json, Value};

use super::{envelope::Answer, params::Params, Etherscan};
use crate::index::families::balances::{holder_count, holders_page_knowing};

/// Rows of a holder list when `offset` is not given: Etherscan's default for this action.
const HOLDERS_PER_PAGE: u64 = 100;

/// `tokenholdercount`: the number of holders with a balance, as a decimal string.
pub(super) fn holder_count_of(api: &Etherscan, params: &Params) -> Answer {
    let token = match params.address("contractaddress") {
        Ok(token) => token,
        Err(refusal) => return refusal,
    };
    api.read(|txn| holder_count(txn, &token)).map_or_else(|e| e, |count| Answer::Ok(json!(count.to_string())))
}

/// `tokenholderlist`: a page of the token's holders, largest balance first (ties by address).
pub(super) fn holder_list(api: &Etherscan, params: &Params) -> Answer {
    let token = match params.address("contractaddress") {
        Ok(token) => token,
        Err(refusal) => return refusal,
    };
    let window = match params.window(HOLDERS_PER_PAGE, api.max_offset) {
        Ok(window) => window,
        Err(refusal) => return refusal,
    };
    let page = api.read(|txn| {
        let changed = api.ctx.window_holders.of(txn, &token)?;
        holders_page_knowing(txn, &token, window.skip, window.rows, &changed)
    });
    match page {
        Err(refusal) => refusal,
        Ok(rows) if rows.is_empty() => Answer::NoRows("No token holder found"),
        Ok(rows) => Answer::Ok(Value::Array(
            rows.into_iter()
                .map(|(holder, balance)| {
                    json!({"TokenHolderAddress": lower_hex(&holder), "TokenHolderQuantity": balance.to_string()})
                })
                .collect(),
        )),
    }
}

/// An address as Etherscan writes it in results: lower-case hex.
pub(super) fn lower_hex(address: &alloy_primitives::Address) -> String {
    format!("{address:#x}")
}
