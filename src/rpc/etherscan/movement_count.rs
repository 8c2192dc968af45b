//! A token list's rows in a step wholly before its page, counted from the node's logs instead of
//! made from every transaction's receipt: one `eth_getLogs` batch over the step's blocks, the
//! listed party as sender and as receiver (its topics), or the listed token's own logs. The logs
//! a transaction's receipt holds that a list can show are exactly those, so the step's logs,
//! grouped by transaction, are read by the same [`movements`] that makes the rows — the count is
//! the rows the step would make. A node that refuses the query (a block range over its limit,
//! too many results) leaves the rest of the walk to be read whole.

use std::collections::{hash_map::Entry, BTreeMap, HashMap, HashSet};

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

/// The rows `stream` (a token list) makes of the transactions `ids`, from the node's logs; `None`
/// when the node does not answer the query or the stream is not a token list.
pub(super) async fn movement_rows(api: &Etherscan, stream: Stream, ids: &[TxId]) -> Option<Counted> {
    let Stream::Movements(kind, party, token) = stream else { return None };
    let (low, high) = (ids.iter().map(|id| id.block()).min()?, ids.iter().map(|id| id.block()).max()?);
    let queries = filters(kind, party, token, low, high);
    let answers = api.pages.logs(&queries).await.ok()?;
    let receipts = receipts_of(ids, answers.into_iter().flatten())?;
    let kinds = api
        .read(|t| {
            let mut kinds = HashMap::new();
            for receipt in receipts.values() {
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
    let rows = receipts.values().map(|r| movements(r, kind, party, token, kinds_of).len() as u64).sum();
    let mut emitters: Vec<Address> = kinds.into_keys().collect();
    emitters.sort_unstable();
    Some(Counted { rows, emitters })
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

/// The logs among `logs` of the transactions `ids`, as each one's receipt holds them (`{logs}`,
/// in log order, each log once though two filters returned it); `None` when a log does not say
/// where it stands.
fn receipts_of(ids: &[TxId], logs: impl IntoIterator<Item = Value>) -> Option<BTreeMap<u64, Value>> {
    let wanted: HashSet<u64> = ids.iter().map(|id| id.0).collect();
    let mut by_tx: BTreeMap<u64, BTreeMap<u64, Value>> = BTreeMap::new();
    for log in logs {
        if log.get("removed").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        let block = hex_field(&log, "blockNumber")?;
        let id = TxId::new(block, hex_field(&log, "transactionIndex")?).ok()?;
        if wanted.contains(&id.0) {
            by_tx.entry(id.0).or_default().insert(hex_field(&log, "logIndex")?, log);
        }
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
    fn logs_gather_by_transaction_once_each_in_log_order_and_only_for_the_step() {
        let id = |b, i| TxId::new(b, i).expect("id");
        let ids = [id(7, 0), id(7, 2)];
        let mut removed = log(7, 0, 9);
        removed["removed"] = json!(true);
        let logs = vec![log(7, 2, 5), log(7, 0, 3), log(7, 2, 4), log(7, 1, 2), log(7, 2, 5), removed];
        let got = receipts_of(&ids, logs).expect("every log placed");
        assert_eq!(got.len(), 2);
        assert_eq!(got[&id(7, 0).0], json!({"logs": [log(7, 0, 3)]}));
        assert_eq!(got[&id(7, 2).0], json!({"logs": [log(7, 2, 4), log(7, 2, 5)]}));
        assert!(receipts_of(&ids, vec![json!({"blockNumber": "0x7"})]).is_none());
    }
}
