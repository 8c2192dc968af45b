//! Etherscan's history actions (PRO there, served here): an account's ether balance, its balance
//! of a token and a token's supply as they were at a block, from the node's state at that block
//! — which only an archive node keeps for every block; another refuses, and so does the answer.

use alloy_primitives::{Address, U256};
use serde_json::json;

use super::{block::block_number, envelope::Answer, params::Params, Etherscan};
use crate::source::SourceError;

/// The refusal for a node error of `method` at `block`: said plainly when the node has pruned
/// that block's state.
fn node_refusal(method: &str, block: u64, e: &SourceError) -> Answer {
    let message = e.to_string();
    if crate::source::needs_archive(&message) {
        return Answer::refuse(format!(
            "Error! The node has no state at block {block} (an archive node keeps every block's): {message}"
        ));
    }
    Answer::refuse(format!("Error! The node did not answer {method}: {message}"))
}

/// A contract's one-word answer to `data` at `block`; zero where no contract was at `to` then
/// (a token's balances and supply before it was created).
async fn word_at(api: &Etherscan, to: Address, data: String, block: u64, what: &str) -> Result<U256, Answer> {
    let tag = format!("{block:#x}");
    let call = json!([{"to": to, "data": data}, tag]);
    match api.ctx.node.raw::<_, alloy_primitives::Bytes>("eth_call", call).await {
        Ok(word) if word.len() == 32 => Ok(U256::from_be_slice(&word)),
        Ok(_) => {
            match api.ctx.node.raw::<_, alloy_primitives::Bytes>("eth_getCode", json!([to, tag])).await {
                Ok(code) if code.is_empty() => Ok(U256::ZERO),
                Ok(_) => Err(Answer::refuse(format!("Error! The contract answered {what} with no number"))),
                Err(e) => Err(node_refusal("eth_getCode", block, &e)),
            }
        }
        Err(e) => Err(node_refusal(what, block, &e)),
    }
}

/// `balancehistory`: `address`'s ether balance at block `blockno`, in wei.
pub(super) async fn balance(api: &Etherscan, params: &Params) -> Answer {
    let (address, block) = match (params.address("address"), block_number(params)) {
        (Ok(address), Ok(block)) => (address, block),
        (Err(refusal), _) | (_, Err(refusal)) => return refusal,
    };
    match api.ctx.node.raw::<_, U256>("eth_getBalance", json!([address, format!("{block:#x}")])).await {
        Ok(wei) => Answer::Ok(json!(wei.to_string())),
        Err(e) => node_refusal("eth_getBalance", block, &e),
    }
}

/// `tokenbalancehistory`: `address`'s balance of the token `contractaddress` at block `blockno`
/// (its `balanceOf` then).
pub(super) async fn token_balance(api: &Etherscan, params: &Params) -> Answer {
    let inputs = (params.address("contractaddress"), params.address("address"), block_number(params));
    let (token, holder, block) = match inputs {
        (Ok(token), Ok(holder), Ok(block)) => (token, holder, block),
        (Err(refusal), ..) | (_, Err(refusal), _) | (.., Err(refusal)) => return refusal,
    };
    // balanceOf(address)
    let data = format!("0x70a08231{:0>64}", alloy_primitives::hex::encode(holder));
    word_at(api, token, data, block, "balanceOf()")
        .await
        .map_or_else(|r| r, |b| Answer::Ok(json!(b.to_string())))
}

/// `tokensupplyhistory`: the token `contractaddress`'s `totalSupply()` at block `blockno`.
pub(super) async fn token_supply(api: &Etherscan, params: &Params) -> Answer {
    let (token, block) = match (params.address("contractaddress"), block_number(params)) {
        (Ok(token), Ok(block)) => (token, block),
        (Err(refusal), _) | (_, Err(refusal)) => return refusal,
    };
    // totalSupply()
    let data = "0x18160ddd".to_owned();
    word_at(api, token, data, block, "totalSupply()")
        .await
        .map_or_else(|r| r, |s| Answer::Ok(json!(s.to_string())))
}
