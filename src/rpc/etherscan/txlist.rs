//! `account`'s transaction lists: `txlist` (the transactions an address sent, received at top
//! level, or created a contract with) from its appearances, and the token transfer lists
//! (`tokentx`, `tokennfttx`, `token1155tx`: one row per movement) from its transfer index, from
//! the transactions in which it moved the token `contractaddress` when that is given too, or from
//! those that move the token when only `contractaddress` is given. Rows join the index's ids
//! with the node's transactions and receipts (see `walk`).

use std::collections::HashMap;

use alloy_primitives::{Address, U256};
use serde_json::{json, Value};

use super::{
    envelope::Answer,
    lists::LIST_ROWS,
    marks::Stream,
    params::{Params, Sort},
    token::lower_hex,
    token_moves::Moves,
    walk::{walk, Source, Walked},
    Etherscan,
};
use crate::{
    db::{DbResult, ReadTxn},
    decode::{TokenKind, TokenKinds},
    index::families::{address_index::IdList, attributes::attributes, contract_info::contract_info},
    rpc::transfer_detail::movements,
};

/// A hex quantity of `v[field]` as a decimal string (`""` when absent).
fn decimal(v: &Value, field: &str) -> String {
    v.get(field)
        .and_then(|x| serde_json::from_value::<U256>(x.clone()).ok())
        .map(|n| n.to_string())
        .unwrap_or_default()
}

/// An address field of a node answer, lower-case (`""` when absent or null).
fn address_at(v: &Value, field: &str) -> String {
    v.get(field).and_then(Value::as_str).map(str::to_ascii_lowercase).unwrap_or_default()
}

fn party(v: &Value, field: &str) -> Option<Address> {
    v.get(field).and_then(|a| serde_json::from_value(a.clone()).ok())
}

/// The fields every list row shares: the transaction, its block and its cost.
fn common_fields(w: &Walked<'_>) -> serde_json::Map<String, Value> {
    let (t, r) = (&w.tx.transaction, &w.tx.receipt);
    let gas_price = if r.get("effectiveGasPrice").is_some() {
        decimal(r, "effectiveGasPrice")
    } else {
        decimal(t, "gasPrice")
    };
    let fields = json!({
        "blockNumber": w.block.to_string(),
        "timeStamp": w.timestamp.to_string(),
        "hash": w.tx.hash,
        "nonce": decimal(t, "nonce"),
        "blockHash": t.get("blockHash").cloned().unwrap_or(Value::Null),
        "transactionIndex": decimal(t, "transactionIndex"),
        "gas": decimal(t, "gas"),
        "gasPrice": gas_price,
        "gasUsed": decimal(r, "gasUsed"),
        "cumulativeGasUsed": decimal(r, "cumulativeGasUsed"),
        "confirmations": (w.tip.saturating_sub(w.block) + 1).to_string(),
    });
    match fields {
        Value::Object(map) => map,
        _ => serde_json::Map::new(),
    }
}

/// A `txlist` row.
fn tx_row(w: &Walked<'_>) -> Value {
    let (t, r) = (&w.tx.transaction, &w.tx.receipt);
    let mut row = common_fields(w);
    let input = t.get("input").and_then(Value::as_str).unwrap_or("0x");
    let status = match r.get("status").and_then(Value::as_str) {
        Some("0x1") => "1",
        Some("0x0") => "0",
        _ => "",
    };
    row.insert("from".into(), json!(address_at(t, "from")));
    row.insert("to".into(), json!(address_at(t, "to")));
    row.insert("value".into(), json!(decimal(t, "value")));
    row.insert("isError".into(), json!(if status == "0" { "1" } else { "0" }));
    row.insert("txreceipt_status".into(), json!(status));
    row.insert("input".into(), json!(input));
    row.insert("contractAddress".into(), json!(address_at(r, "contractAddress")));
    row.insert("methodId".into(), json!(input.get(..10).unwrap_or("0x")));
    row.insert("functionName".into(), json!(""));
    Value::Object(row)
}

/// `txlist`: the transactions `address` sent, received at top level or created a contract with,
/// in blocks `startblock..=endblock`, oldest first (`sort=desc` for newest).
pub(super) async fn tx_list(api: &Etherscan, params: &Params) -> Answer {
    let address = match params.address("address") {
        Ok(address) => address,
        Err(refusal) => return refusal,
    };
    let (range, window, sort) = match params.list_request(LIST_ROWS, api.max_offset, Sort::Asc) {
        Ok(asked) => asked,
        Err(refusal) => return refusal,
    };
    let walked = (Source::Appearances(address), Stream::Transactions(address));
    let rows = walk(api, walked, range, window, sort, |w, _| {
        let (t, r) = (&w.tx.transaction, &w.tx.receipt);
        let top_level =
            [party(t, "from"), party(t, "to"), party(r, "contractAddress")].contains(&Some(address));
        Ok(if top_level { vec![tx_row(w)] } else { Vec::new() })
    })
    .await;
    match rows {
        Ok(rows) if rows.is_empty() => Answer::NoRows("No transactions found"),
        Ok(rows) => Answer::Ok(Value::Array(rows)),
        Err(refusal) => refusal,
    }
}

/// How a token is indexed and what it is called: kinds, name, symbol, decimals.
type Description = (TokenKinds, Option<String>, Option<String>, Option<u8>);

/// The tokens a walk met, each read from the index once.
#[derive(Default)]
struct Described(HashMap<Address, Description>);

impl Described {
    fn learn(&mut self, t: &ReadTxn, receipt: &Value) -> DbResult<()> {
        for log in receipt.get("logs").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default() {
            let Some(token) = party(log, "address") else { continue };
            if self.0.contains_key(&token) {
                continue;
            }
            let kinds = TokenKinds::of(&attributes(t, &token)?);
            let info = contract_info(t, &token)?.unwrap_or_default();
            self.0.insert(token, (kinds, info.name, info.symbol, info.decimals));
        }
        Ok(())
    }
}

/// `tokentx` (ERC20), `tokennfttx` (ERC721), `token1155tx` (ERC1155): the movements of `kind` of
/// `address` (of token `contractaddress` when given too), or of token `contractaddress` alone,
/// one row each, in blocks `startblock..=endblock`, oldest first (`sort=desc` for newest).
pub(super) async fn token_list(api: &Etherscan, params: &Params, kind: TokenKind) -> Answer {
    let party_asked = params.get("address").map(|_| params.address("address")).transpose();
    let token_asked = params.get("contractaddress").map(|_| params.address("contractaddress")).transpose();
    let (holder, token) = match (party_asked, token_asked) {
        (Ok(None), Ok(None)) => return Answer::refuse("Error! Missing address or contractaddress"),
        (Ok(holder), Ok(token)) => (holder, token),
        (Err(refusal), _) | (_, Err(refusal)) => return refusal,
    };
    let (range, window, sort) = match params.list_request(LIST_ROWS, api.max_offset, Sort::Asc) {
        Ok(asked) => asked,
        Err(refusal) => return refusal,
    };
    let source = match (holder, token) {
        (Some(party), Some(token)) => Source::Moves(Moves::PartyToken { kind, party, token }),
        (Some(holder), None) => Source::Transfers(IdList::of_transfers(kind), holder),
        (None, Some(token)) => Source::Moves(Moves::Token(token)),
        (None, None) => return Answer::refuse("Error! Missing address or contractaddress"),
    };
    let mut described = Described::default();
    let rows = walk(api, (source, Stream::Movements(kind, holder, token)), range, window, sort, |w, t| {
        described.learn(t, &w.tx.receipt)?;
        let kinds_of = |a: &Address| described.0.get(a).map(|d| d.0).unwrap_or_default();
        let moved = movements(&w.tx.receipt, kind, holder, token, kinds_of);
        Ok(moved
            .into_iter()
            .map(|m| {
                let (_, name, symbol, decimals) = described.0.get(&m.token).cloned().unwrap_or_default();
                let mut row = common_fields(w);
                row.insert("from".into(), json!(lower_hex(&m.from)));
                row.insert("to".into(), json!(lower_hex(&m.to)));
                row.insert("contractAddress".into(), json!(lower_hex(&m.token)));
                row.insert("tokenName".into(), json!(name.unwrap_or_default()));
                row.insert("tokenSymbol".into(), json!(symbol.unwrap_or_default()));
                row.insert("input".into(), json!("deprecated"));
                let id = m.token_id.map(|i| i.to_string()).unwrap_or_default();
                let value = m.value.map(|v| v.to_string()).unwrap_or_default();
                match kind {
                    TokenKind::Erc20 => {
                        row.insert("value".into(), json!(value));
                        row.insert(
                            "tokenDecimal".into(),
                            json!(decimals.map(|d| d.to_string()).unwrap_or_default()),
                        );
                    }
                    TokenKind::Erc721 => {
                        row.insert("tokenID".into(), json!(id));
                        row.insert("tokenDecimal".into(), json!("0"));
                    }
                    TokenKind::Erc1155 => {
                        row.insert("tokenID".into(), json!(id));
                        row.insert("tokenValue".into(), json!(value));
                    }
                }
                Value::Object(row)
            })
            .collect())
    })
    .await;
    match rows {
        Ok(rows) if rows.is_empty() => Answer::NoRows("No transactions found"),
        Ok(rows) => Answer::Ok(Value::Array(rows)),
        Err(refusal) => refusal,
    }
}
