//! The `logs` module's `getLogs`: the node's `eth_getLogs` over a block range, with Etherscan's
//! topic operators (`topic0_1_opr=and|or`, …) and paging, each row with its block's timestamp
//! and its transaction's gas price and gas used, in Etherscan's hex fields.

use std::collections::{BTreeMap, BTreeSet};

use alloy_primitives::B256;
use serde_json::{json, Map, Value};

use super::{envelope::Answer, params::Params, Etherscan};
use crate::rpc::materialize::hex_field;

/// Rows of one page at most, and when `offset` is not given: Etherscan's.
const MOST_LOGS: u64 = 1_000;

/// How the given topics combine: `(position, topic)` in order, and the operator before each
/// but the first (`true` for `and`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct TopicFilter {
    topics: Vec<(usize, B256)>,
    and_before: Vec<bool>,
}

impl TopicFilter {
    fn parse(params: &Params) -> Result<Self, Answer> {
        let mut topics = Vec::new();
        for i in 0..4 {
            if let Some(text) = params.get(&format!("topic{i}")) {
                let topic = text
                    .parse::<B256>()
                    .map_err(|_| Answer::refuse(format!("Error! Invalid topic{i}: 32 bytes of hex")))?;
                topics.push((i, topic));
            }
        }
        let mut and_before = Vec::new();
        for pair in topics.windows(2) {
            let name = format!("topic{}_{}_opr", pair[0].0, pair[1].0);
            and_before.push(match params.get(&name) {
                None | Some("and") => true,
                Some("or") => false,
                Some(_) => return Err(Answer::refuse(format!("Error! Invalid {name}: and or or"))),
            });
        }
        Ok(Self { topics, and_before })
    }

    /// Whether the node can apply the filter itself: no `or`.
    fn all_and(&self) -> bool {
        self.and_before.iter().all(|&and| and)
    }

    /// `eth_getLogs`'s positional topics (null for any), when [`Self::all_and`].
    fn positional(&self) -> Vec<Value> {
        let len = self.topics.last().map_or(0, |&(i, _)| i + 1);
        let mut out = vec![Value::Null; len];
        for &(i, topic) in &self.topics {
            out[i] = json!(topic);
        }
        out
    }

    /// Whether a log's topics pass: the given topics' tests combined left to right.
    fn passes(&self, log_topics: &[B256]) -> bool {
        let test = |&(i, topic): &(usize, B256)| log_topics.get(i) == Some(&topic);
        let mut items = self.topics.iter();
        let Some(first) = items.next() else { return true };
        let mut verdict = test(first);
        for (item, &and) in items.zip(&self.and_before) {
            verdict = if and { verdict && test(item) } else { verdict || test(item) };
        }
        verdict
    }
}

/// `fromBlock` / `toBlock`: a block number in decimal or `0x` hex, or `latest`.
fn bound(params: &Params, name: &str, default: &str) -> Result<String, Answer> {
    let text = params.get(name).unwrap_or(default);
    if text == "latest" {
        return Ok(text.to_owned());
    }
    let number = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse::<u64>().ok(),
    };
    number.map(|n| format!("{n:#x}")).ok_or_else(|| Answer::refuse(format!("Error! Invalid {name}")))
}

/// `getLogs`.
pub(super) async fn get_logs(api: &Etherscan, params: &Params) -> Answer {
    if params.get("offset").and_then(|o| o.parse::<u64>().ok()).is_some_and(|o| o > MOST_LOGS) {
        return Answer::refuse(format!("Error! offset: getLogs answers at most {MOST_LOGS} rows per page"));
    }
    let asked = (
        bound(params, "fromBlock", "0"),
        bound(params, "toBlock", "latest"),
        TopicFilter::parse(params),
        params.window(MOST_LOGS, MOST_LOGS.min(api.max_offset)),
    );
    let (from, to, topics, window) = match asked {
        (Ok(from), Ok(to), Ok(topics), Ok(window)) => (from, to, topics, window),
        (Err(r), ..) | (_, Err(r), ..) | (_, _, Err(r), _) | (.., Err(r)) => return r,
    };
    let mut filter = Map::new();
    filter.insert("fromBlock".into(), json!(from));
    filter.insert("toBlock".into(), json!(to));
    if params.get("address").is_some() {
        match params.address("address") {
            Ok(address) => filter.insert("address".into(), json!(address)),
            Err(refusal) => return refusal,
        };
    }
    if topics.all_and() && !topics.topics.is_empty() {
        filter.insert("topics".into(), Value::Array(topics.positional()));
    }
    let logs: Vec<Value> = match api.ctx.node.raw("eth_getLogs", json!([filter])).await {
        Ok(logs) => logs,
        Err(e) => return Answer::refuse(format!("Error! The node did not answer eth_getLogs: {e}")),
    };
    let skip = usize::try_from(window.skip).unwrap_or(usize::MAX);
    let rows = usize::try_from(window.rows).unwrap_or(usize::MAX);
    let page: Vec<Value> = logs
        .into_iter()
        .filter(|log| {
            let log_topics: Vec<B256> =
                log.get("topics").and_then(|t| serde_json::from_value(t.clone()).ok()).unwrap_or_default();
            topics.passes(&log_topics)
        })
        .skip(skip)
        .take(rows)
        .collect();
    if page.is_empty() {
        return Answer::NoRows("No records found");
    }
    match with_blocks_and_receipts(api, page).await {
        Ok(rows) => Answer::Ok(Value::Array(rows)),
        Err(refusal) => refusal,
    }
}

/// The page's logs with `timeStamp`, `gasPrice` and `gasUsed`: one batch for the blocks'
/// headers and the transactions' receipts.
async fn with_blocks_and_receipts(api: &Etherscan, logs: Vec<Value>) -> Result<Vec<Value>, Answer> {
    let blocks: BTreeSet<u64> = logs.iter().filter_map(|l| hex_field(l, "blockNumber")).collect();
    let txs: BTreeSet<String> =
        logs.iter().filter_map(|l| l.get("transactionHash")?.as_str().map(str::to_owned)).collect();
    let mut calls: Vec<_> =
        blocks.iter().map(|n| ("eth_getBlockByNumber", json!([format!("{n:#x}"), false]))).collect();
    calls.extend(txs.iter().map(|h| ("eth_getTransactionReceipt", json!([h]))));
    let answers = api.ctx.node.batch(&calls).await.map_err(|e| {
        Answer::refuse(format!("Error! The node did not answer the logs' blocks and receipts: {e}"))
    })?;
    let (headers, receipts) = answers.split_at(blocks.len());
    let timestamps: BTreeMap<u64, Value> = blocks
        .iter()
        .zip(headers)
        .map(|(&n, h)| (n, h.get("timestamp").cloned().unwrap_or(Value::Null)))
        .collect();
    let receipts: BTreeMap<&str, &Value> = txs.iter().map(String::as_str).zip(receipts).collect();
    Ok(logs
        .into_iter()
        .map(|log| {
            let field = |name: &str| log.get(name).cloned().unwrap_or(Value::Null);
            let receipt = log.get("transactionHash").and_then(Value::as_str).and_then(|h| receipts.get(h));
            let of_receipt = |name: &str| receipt.and_then(|r| r.get(name)).cloned().unwrap_or(Value::Null);
            let timestamp = hex_field(&log, "blockNumber")
                .and_then(|n| timestamps.get(&n))
                .cloned()
                .unwrap_or(Value::Null);
            json!({
                "address": field("address"),
                "topics": field("topics"),
                "data": field("data"),
                "blockNumber": field("blockNumber"),
                "blockHash": field("blockHash"),
                "timeStamp": timestamp,
                "gasPrice": of_receipt("effectiveGasPrice"),
                "gasUsed": of_receipt("gasUsed"),
                "logIndex": field("logIndex"),
                "transactionHash": field("transactionHash"),
                "transactionIndex": field("transactionIndex"),
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(query: &str) -> Result<TopicFilter, Answer> {
        TopicFilter::parse(&Params::parse([query.as_bytes()]))
    }

    #[test]
    fn topics_combine_left_to_right_with_their_operators() {
        let [a, b, c] = [1u8, 2, 3].map(B256::repeat_byte);
        let f = filter(&format!("topic0={a}&topic2={c}")).expect("filter");
        assert!(f.all_and());
        assert_eq!(f.positional(), vec![json!(a), Value::Null, json!(c)]);
        assert!(f.passes(&[a, b, c]));
        assert!(!f.passes(&[a, b, b]));
        let f = filter(&format!("topic0={a}&topic2={c}&topic0_2_opr=or")).expect("filter");
        assert!(!f.all_and());
        assert!(f.passes(&[a]));
        assert!(f.passes(&[b, b, c]));
        assert!(!f.passes(&[b, b, b]));
        assert!(filter("").expect("none").passes(&[]));
        assert!(filter("topic1=0x12").is_err());
        assert!(filter(&format!("topic0={a}&topic1={b}&topic0_1_opr=xor")).is_err());
    }
}
