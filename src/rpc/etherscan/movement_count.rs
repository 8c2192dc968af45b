//! A token list's rows in a step wholly before its page, counted from the node's logs instead of
//! made from every transaction's receipt: one `eth_getLogs` batch over the blocks of the step and
//! of the steps after it that the page is still short of (at most 8 groups), the listed party as
//! sender and as receiver (its topics), or the listed token's own logs. The logs a transaction's
//! receipt holds that a list can show are exactly those, so a step's logs, grouped by
//! transaction, are read by the same [`movements`] that makes the rows — the count is the rows
//! the step would make. A node that refuses the query (a block range over its limit, too many
//! results) is asked for the step's blocks alone; refusing that too, it leaves the rest of the
//! walk to be read whole.

use std::collections::{hash_map::Entry, BTreeMap, HashMap};

use alloy_primitives::{Address, B256};
use serde_json::{json, Value};

use super::{marks::Stream, Etherscan};
use crate::{
    decode::{TokenKind, TokenKinds, TRANSFER_BATCH_TOPIC, TRANSFER_SINGLE_TOPIC, TRANSFER_TOPIC},
    index::families::attributes::attributes,
    rpc::{
        materialize::{hex, hex_field},
        transfer_detail::{movements, transfer_emitters},
    },
    txid::TxId,
};

/// The rows a step makes, counted without making them, and the contracts whose transfer logs
/// made them (the marks keep their kinds: a group is walked again when one is classified anew;
/// none for a `txlist`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Counted {
    /// Rows of the step.
    pub rows: u64,
    /// The emitters of the step's transfer logs the list could show (token lists only).
    pub emitters: Vec<Address>,
}

/// A token list's logs over a span of blocks (what [`filters`] asks for), gathered by
/// transaction: read once for a step and the steps ahead of it, each step then counted from them
/// without asking the node again.
#[derive(Debug)]
pub(super) struct SpanLogs {
    low: u64,
    high: u64,
    /// Each transaction's logs in the span, as its receipt holds them (`{logs}`).
    by_tx: BTreeMap<u64, Value>,
}

impl SpanLogs {
    /// The logs of blocks `low..=high` that token list `stream` can show, in one `eth_getLogs`
    /// batch; `None` when the node does not answer the query or the stream is not a token list.
    pub(super) async fn read(api: &Etherscan, stream: Stream, (low, high): (u64, u64)) -> Option<Self> {
        let Stream::Movements(kind, party, token) = stream else { return None };
        let answers = api.pages.logs(&filters(kind, party, token, low, high)).await.ok()?;
        Some(Self { low, high, by_tx: receipts_of(answers.into_iter().flatten())? })
    }

    /// Whether every one of `ids` lies in the span's blocks.
    pub(super) fn covers(&self, ids: &[TxId]) -> bool {
        ids.iter().all(|id| (self.low..=self.high).contains(&id.block()))
    }

    /// The logs of those of `ids` that have any, as their receipts hold them.
    fn receipts_of(&self, ids: &[TxId]) -> Vec<&Value> {
        ids.iter().filter_map(|id| self.by_tx.get(&id.0)).collect()
    }

    /// The rows `stream` makes of the transactions `ids` (all inside the span); `None` when the
    /// stream is not a token list or the index cannot be read.
    pub(super) fn count(&self, api: &Etherscan, stream: Stream, ids: &[TxId]) -> Option<Counted> {
        let Stream::Movements(kind, party, token) = stream else { return None };
        let receipts = self.receipts_of(ids);
        let kinds = api
            .read(|t| {
                let mut kinds = HashMap::new();
                for receipt in &receipts {
                    for emitter in transfer_emitters(receipt) {
                        if let Entry::Vacant(slot) = kinds.entry(emitter) {
                            slot.insert(TokenKinds::of(&attributes(t, &emitter)?));
                        }
                    }
                }
                Ok(kinds)
            })
            .ok()?;
        let kinds_of = |a: &Address| kinds.get(a).copied().unwrap_or_default();
        let rows = receipts.iter().map(|r| movements(r, kind, party, token, kinds_of).len() as u64).sum();
        let mut emitters: Vec<Address> = kinds.into_keys().collect();
        emitters.sort_unstable();
        Some(Counted { rows, emitters })
    }
}

/// `eth_getLogs` filters over blocks `low..=high` that together return every log of `kind`'s
/// transfer shape that `party` sent or received (of `token` alone when given), or every such
/// log of `token` when no party is asked for.
fn filters(
    kind: TokenKind,
    party: Option<Address>,
    token: Option<Address>,
    low: u64,
    high: u64,
) -> Vec<Value> {
    let shapes: Vec<B256> = match kind {
        TokenKind::Erc20 | TokenKind::Erc721 => vec![TRANSFER_TOPIC],
        TokenKind::Erc1155 => vec![TRANSFER_SINGLE_TOPIC, TRANSFER_BATCH_TOPIC],
    };
    // Where a log of this shape names its sender; its receiver is the topic after.
    let sender_topic = match kind {
        TokenKind::Erc20 | TokenKind::Erc721 => 1,
        TokenKind::Erc1155 => 2,
    };
    let filter = |topics: Vec<Value>| {
        let mut f = json!({"fromBlock": hex(low), "toBlock": hex(high), "topics": topics});
        if let Some(token) = token {
            f["address"] = json!(token);
        }
        f
    };
    match party {
        None => vec![filter(vec![json!(shapes)])],
        Some(party) => [sender_topic, sender_topic + 1]
            .into_iter()
            .map(|at| {
                let mut topics = vec![Value::Null; at + 1];
                topics[0] = json!(shapes);
                topics[at] = json!(party.into_word());
                filter(topics)
            })
            .collect(),
    }
}

/// `logs` gathered by transaction as each one's receipt holds them (`{logs}`, in log order, each
/// log once though two filters returned it); `None` when a log does not say where it stands.
fn receipts_of(logs: impl IntoIterator<Item = Value>) -> Option<BTreeMap<u64, Value>> {
    let mut by_tx: BTreeMap<u64, BTreeMap<u64, Value>> = BTreeMap::new();
    for log in logs {
        if log.get("removed").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        let block = hex_field(&log, "blockNumber")?;
        let id = TxId::new(block, hex_field(&log, "transactionIndex")?).ok()?;
        by_tx.entry(id.0).or_default().insert(hex_field(&log, "logIndex")?, log);
    }
    Some(
        by_tx
            .into_iter()
            .map(|(id, logs)| (id, json!({"logs": logs.into_values().collect::<Vec<_>>()})))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use alloy_primitives::address;

    use super::*;

    const HOLDER: Address = address!("00000000000000000000000000000000000000aa");
    const TOKEN: Address = address!("00000000000000000000000000000000000000bb");

    #[test]
    fn a_party_is_asked_for_as_sender_and_as_receiver() {
        let word = json!(HOLDER.into_word());
        let erc20 = filters(TokenKind::Erc20, Some(HOLDER), None, 5, 9);
        assert_eq!(
            erc20,
            vec![
                json!({"fromBlock": "0x5", "toBlock": "0x9", "topics": [[TRANSFER_TOPIC], word]}),
                json!({"fromBlock": "0x5", "toBlock": "0x9", "topics": [[TRANSFER_TOPIC], null, word]}),
            ]
        );
        let multi = filters(TokenKind::Erc1155, Some(HOLDER), Some(TOKEN), 5, 5);
        let shapes = json!([TRANSFER_SINGLE_TOPIC, TRANSFER_BATCH_TOPIC]);
        assert_eq!(multi[0]["topics"], json!([shapes, null, word]));
        assert_eq!(multi[1]["topics"], json!([shapes, null, null, word]));
        assert_eq!(multi[1]["address"], json!(TOKEN));
        let token_only = filters(TokenKind::Erc721, None, Some(TOKEN), 1, 2);
        assert_eq!(
            token_only,
            vec![
                json!({"fromBlock": "0x1", "toBlock": "0x2", "topics": [[TRANSFER_TOPIC]], "address": TOKEN})
            ]
        );
    }

    fn log(block: u64, tx: u64, index: u64) -> Value {
        json!({"blockNumber": hex(block), "transactionIndex": hex(tx), "logIndex": hex(index)})
    }

    #[test]
    fn logs_gather_by_transaction_once_each_in_log_order_and_a_step_takes_its_own() {
        let id = |b, i| TxId::new(b, i).expect("id");
        let ids = [id(7, 0), id(7, 2)];
        let mut removed = log(7, 0, 9);
        removed["removed"] = json!(true);
        let logs = vec![log(7, 2, 5), log(7, 0, 3), log(7, 2, 4), log(7, 1, 2), log(7, 2, 5), removed];
        let span = SpanLogs { low: 7, high: 8, by_tx: receipts_of(logs).expect("every log placed") };
        assert_eq!(span.by_tx.len(), 3);
        assert_eq!(
            span.receipts_of(&ids),
            [&json!({"logs": [log(7, 0, 3)]}), &json!({"logs": [log(7, 2, 4), log(7, 2, 5)]})]
        );
        assert!(span.covers(&ids) && span.covers(&[id(8, 1)]) && !span.covers(&[id(7, 1), id(9, 0)]));
        assert!(receipts_of(vec![json!({"blockNumber": "0x7"})]).is_none());
    }
}
