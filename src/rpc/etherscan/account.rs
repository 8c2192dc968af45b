//! The `account` module's balances: the node's `eth_getBalance`, at `tag` (default `latest`), as
//! decimal strings.

use alloy_primitives::{Address, U256};
use futures::future::try_join_all;
use serde_json::{json, Value};

use super::{envelope::Answer, params::Params, token::lower_hex, Etherscan};

/// Addresses `balancemulti` takes at most: Etherscan's.
const MOST_ADDRESSES: usize = 20;

/// The block tag: `latest`, `earliest`, `pending`, `safe`, `finalized`, or a block number
/// (decimal or `0x` hex).
fn tag(params: &Params) -> Result<String, Answer> {
    let tag = params.get("tag").unwrap_or("latest");
    match tag {
        "latest" | "earliest" | "pending" | "safe" | "finalized" => Ok(tag.to_owned()),
        _ => {
            let number = match tag.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16).ok(),
                None => tag.parse::<u64>().ok(),
            };
            number.map(|n| format!("{n:#x}")).ok_or_else(|| Answer::refuse("Error! Invalid tag"))
        }
    }
}

async fn balance_of(api: &Etherscan, address: Address, tag: &str) -> Result<U256, Answer> {
    api.ctx
        .node
        .raw::<_, U256>("eth_getBalance", json!([address, tag]))
        .await
        .map_err(|e| Answer::refuse(format!("Error! The node did not answer eth_getBalance: {e}")))
}

/// `balance`: one address's balance in wei.
pub(super) async fn balance(api: &Etherscan, params: &Params) -> Answer {
    let (address, tag) = match (params.address("address"), tag(params)) {
        (Ok(address), Ok(tag)) => (address, tag),
        (Err(refusal), _) | (_, Err(refusal)) => return refusal,
    };
    match balance_of(api, address, &tag).await {
        Ok(wei) => Answer::Ok(json!(wei.to_string())),
        Err(refusal) => refusal,
    }
}

/// `balancemulti`: up to twenty addresses' balances, in the order asked.
pub(super) async fn balance_multi(api: &Etherscan, params: &Params) -> Answer {
    let (addresses, tag) = match (params.addresses("address", MOST_ADDRESSES), tag(params)) {
        (Ok(addresses), Ok(tag)) => (addresses, tag),
        (Err(refusal), _) | (_, Err(refusal)) => return refusal,
    };
    let balances = try_join_all(addresses.iter().map(|&a| balance_of(api, a, &tag))).await;
    match balances {
        Ok(balances) => Answer::Ok(Value::Array(
            addresses
                .iter()
                .zip(balances)
                .map(|(a, wei)| json!({"account": lower_hex(a), "balance": wei.to_string()}))
                .collect(),
        )),
        Err(refusal) => refusal,
    }
}
