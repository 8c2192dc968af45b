//! The `token` module: a token's holders, ranked by balance, their count and what the index
//! knows of the token — from the index (the supply from the node); and `account`'s token
//! balances of one holder.

use alloy_primitives::{Address, U256};
use serde::Serialize;
use serde_json::{json, Value};

use super::{envelope::Answer, params::Params, Etherscan};
use crate::{
    db::{codec::AttributeBit, DbError},
    decode::TokenKind,
    index::families::{
        attributes::attributes,
        balances::{balance, owned_ids},
        contract_info::contract_info,
        holdings,
    },
};

/// Rows of a holder list when `offset` is not given: Etherscan's default for this action.
const HOLDERS_PER_PAGE: u64 = 100;

/// `tokenholdercount`: the number of holders with a balance, as a decimal string.
pub(super) fn holder_count_of(api: &Etherscan, params: &Params) -> Answer {
    let token = match params.address("contractaddress") {
        Ok(token) => token,
        Err(refusal) => return refusal,
    };
    api.read(|txn| api.ctx.window_holders.count(txn, &token))
        .map_or_else(|e| e, |count| Answer::Ok(json!(count.to_string())))
}

/// A row of `tokenholderlist`.
#[derive(Serialize)]
struct HolderRow {
    #[serde(rename = "TokenHolderAddress")]
    address: String,
    /// Decimal.
    #[serde(rename = "TokenHolderQuantity")]
    quantity: String,
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
    let page = api.read(|txn| api.ctx.window_holders.page(txn, &token, window.skip, window.rows));
    match page {
        Err(refusal) => refusal,
        Ok(rows) if rows.is_empty() => Answer::NoRows("No token holder found"),
        Ok(rows) => Answer::rows(
            &rows
                .into_iter()
                .map(|(holder, balance)| HolderRow {
                    address: lower_hex(&holder),
                    quantity: balance.to_string(),
                })
                .collect::<Vec<_>>(),
        ),
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

/// The token's `totalSupply()` from the node.
async fn total_supply(api: &Etherscan, token: Address) -> Result<U256, Answer> {
    // totalSupply()
    let call = json!([{"to": token, "data": "0x18160ddd"}, "latest"]);
    match api.ctx.node.raw::<_, alloy_primitives::Bytes>("eth_call", call).await {
        Ok(word) if word.len() == 32 => Ok(U256::from_be_slice(&word)),
        Ok(_) => Err(Answer::refuse("Error! The contract answered totalSupply() with no number")),
        Err(e) => Err(Answer::refuse(format!("Error! The node did not answer totalSupply(): {e}"))),
    }
}

/// `tokensupply`: the token's `totalSupply()` from the node, as a decimal string.
pub(super) async fn supply(api: &Etherscan, params: &Params) -> Answer {
    let token: Address = match params.address("contractaddress") {
        Ok(token) => token,
        Err(refusal) => return refusal,
    };
    total_supply(api, token).await.map_or_else(|r| r, |s| Answer::Ok(json!(s.to_string())))
}

/// `tokeninfo`: what the index knows of a token — its kind, name, symbol, decimals and holder
/// count — and its supply from the node. Etherscan's project fields (website, social links,
/// price) are empty: nothing here knows them.
pub(super) async fn info(api: &Etherscan, params: &Params) -> Answer {
    let token: Address = match params.address("contractaddress") {
        Ok(token) => token,
        Err(refusal) => return refusal,
    };
    let known = api.read(|t| {
        let kinds = attributes(t, &token)?;
        let kind = if kinds.has(AttributeBit::Erc1155) {
            "ERC1155"
        } else if kinds.has(AttributeBit::Erc721) {
            "ERC721"
        } else if kinds.has(AttributeBit::Erc20) {
            "ERC20"
        } else {
            return Ok(None);
        };
        Ok(Some((
            kind,
            contract_info(t, &token)?.unwrap_or_default(),
            api.ctx.window_holders.count(t, &token)?,
        )))
    });
    let (kind, described, holders) = match known {
        Ok(Some(known)) => known,
        Ok(None) => return Answer::NoRows("No data found"),
        Err(refusal) => return refusal,
    };
    let supply = total_supply(api, token).await.map(|s| s.to_string()).unwrap_or_default();
    let mut row = json!({
        "contractAddress": lower_hex(&token),
        "tokenName": described.name.unwrap_or_default(),
        "symbol": described.symbol.unwrap_or_default(),
        "divisor": described.decimals.map(|d| d.to_string()).unwrap_or_default(),
        "tokenType": kind,
        "totalSupply": supply,
        "holdersCount": holders.to_string(),
        "blueCheckmark": "false",
        "tokenPriceUSD": "",
    });
    if let Value::Object(map) = &mut row {
        for field in [
            "description",
            "website",
            "email",
            "blog",
            "reddit",
            "slack",
            "facebook",
            "twitter",
            "bitcointalk",
            "github",
            "telegram",
            "wechat",
            "linkedin",
            "discord",
            "whitepaper",
        ] {
            map.insert(field.to_owned(), json!(""));
        }
    }
    Answer::Ok(json!([row]))
}

/// `addresstokenbalance`: a page of the ERC20 tokens the address holds a balance of, in token
/// order, with each token's stored name, symbol and decimals — from the index.
pub(super) fn address_token_balances(api: &Etherscan, params: &Params) -> Answer {
    let holder = match params.address("address") {
        Ok(holder) => holder,
        Err(refusal) => return refusal,
    };
    let window = match params.window(HOLDERS_PER_PAGE, api.max_offset) {
        Ok(window) => window,
        Err(refusal) => return refusal,
    };
    let rows = api.read(|t| {
        // Holdings list every token ever held; a page counts those held now.
        let mut rows = Vec::new();
        let mut skipped = 0;
        for held in holdings::of(t, TokenKind::Erc20, &holder)? {
            let amount = balance(t, held.token, holder)?;
            if amount.is_zero() {
                continue;
            }
            if skipped < window.skip {
                skipped += 1;
                continue;
            }
            let described = contract_info(t, &held.token)?.unwrap_or_default();
            rows.push(json!({
                "TokenAddress": lower_hex(&held.token),
                "TokenName": described.name.unwrap_or_default(),
                "TokenSymbol": described.symbol.unwrap_or_default(),
                "TokenQuantity": amount.to_string(),
                "TokenDivisor": described.decimals.map(|d| d.to_string()).unwrap_or_default(),
            }));
            if rows.len() as u64 >= window.rows {
                break;
            }
        }
        Ok::<_, DbError>(rows)
    });
    match rows {
        Ok(rows) if rows.is_empty() => Answer::NoRows("No tokens found"),
        Ok(rows) => Answer::Ok(Value::Array(rows)),
        Err(refusal) => refusal,
    }
}

/// An address as Etherscan writes it in results: lower-case hex.
pub(super) fn lower_hex(address: &alloy_primitives::Address) -> String {
    format!("{address:#x}")
}

/// `addresstokennftinventory`: a page of the ids of the ERC721 `contractaddress` that `address`
/// owns, ascending — from the index (one walk over the token's owners).
pub(super) fn nft_inventory(api: &Etherscan, params: &Params) -> Answer {
    let (holder, token) = match (params.address("address"), params.address("contractaddress")) {
        (Ok(holder), Ok(token)) => (holder, token),
        (Err(refusal), _) | (_, Err(refusal)) => return refusal,
    };
    let window = match params.window(HOLDERS_PER_PAGE, api.max_offset) {
        Ok(window) => window,
        Err(refusal) => return refusal,
    };
    let ids = api.read(|t| owned_ids(t, token, holder));
    let skip = usize::try_from(window.skip).unwrap_or(usize::MAX);
    let rows = usize::try_from(window.rows).unwrap_or(usize::MAX);
    match ids {
        Err(refusal) => refusal,
        Ok(ids) => {
            let page: Vec<Value> = ids
                .into_iter()
                .skip(skip)
                .take(rows)
                .map(|id| json!({"TokenAddress": lower_hex(&token), "TokenId": id.to_string()}))
                .collect();
            if page.is_empty() {
                Answer::NoRows("No tokens found")
            } else {
                Answer::Ok(Value::Array(page))
            }
        }
    }
}
