//! The `token` module: a token's holders, ranked by balance, and their count — from the index
//! alone.

use alloy_primitives::{Address, U256};
use serde_json::{json, Value};

use super::{envelope::Answer, params::Params, Etherscan};
use crate::index::families::balances::{balance, holder_count, holders_page_knowing};

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

/// `account`'s `tokenbalance`: a holder's balance of a token at the indexed head, from the
/// index (`tag` may only be `latest`, as Etherscan's).
pub(super) fn token_balance(api: &Etherscan, params: &Params) -> Answer {
    let (token, holder) = match (params.address("contractaddress"), params.address("address")) {
        (Ok(token), Ok(holder)) => (token, holder),
        (Err(refusal), _) | (_, Err(refusal)) => return refusal,
    };
    if params.get("tag").is_some_and(|tag| tag != "latest") {
        return Answer::refuse("Error! tag: only latest is served (the index holds balances at its head)");
    }
    api.read(|txn| balance(txn, token, holder)).map_or_else(|e| e, |b| Answer::Ok(json!(b.to_string())))
}

/// `tokensupply`: the token's `totalSupply()` from the node, as a decimal string.
pub(super) async fn supply(api: &Etherscan, params: &Params) -> Answer {
    let token: Address = match params.address("contractaddress") {
        Ok(token) => token,
        Err(refusal) => return refusal,
    };
    // totalSupply()
    let call = json!([{"to": token, "data": "0x18160ddd"}, "latest"]);
    match api.ctx.node.raw::<_, alloy_primitives::Bytes>("eth_call", call).await {
        Ok(word) if word.len() == 32 => Answer::Ok(json!(U256::from_be_slice(&word).to_string())),
        Ok(_) => Answer::refuse("Error! The contract answered totalSupply() with no number"),
        Err(e) => Answer::refuse(format!("Error! The node did not answer totalSupply(): {e}")),
    }
}

/// An address as Etherscan writes it in results: lower-case hex.
pub(super) fn lower_hex(address: &alloy_primitives::Address) -> String {
    format!("{address:#x}")
}
