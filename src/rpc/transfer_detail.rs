//! The token movements of a listed transaction (`transfers` of a transfer-list result): its
//! receipt's transfer logs of classified tokens that involve the queried address.

use alloy_primitives::{Address, Bytes, B256, U256};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::decode::{TokenKind, TokenKinds, TokenLog};

/// One token movement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TransferDetail {
    /// The token contract that emitted the log.
    pub token: Address,
    /// ERC1155 only: who moved the tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operator: Option<Address>,
    /// Sender (the zero address for a mint).
    pub from: Address,
    /// Receiver (the zero address for a burn).
    pub to: Address,
    /// ERC721 and ERC1155: the token id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_id: Option<U256>,
    /// ERC20 and ERC1155: the amount, in base units.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<U256>,
}

#[derive(Debug, Deserialize)]
struct ReceiptLog {
    address: Address,
    topics: Vec<B256>,
    data: Bytes,
}

/// The logs of a receipt as the node gave it; an unreadable log is skipped (the receipt itself
/// is still returned whole).
fn logs_of(receipt: &Value) -> Vec<ReceiptLog> {
    receipt
        .get("logs")
        .and_then(Value::as_array)
        .map(|logs| logs.iter().filter_map(|l| serde_json::from_value(l.clone()).ok()).collect())
        .unwrap_or_default()
}

/// The contracts that emitted a transfer-shaped log (ERC20/721 `Transfer`, ERC1155
/// `TransferSingle`/`TransferBatch`) in `receipt`: those whose classification decides which of
/// its logs a transfer list shows.
pub fn transfer_emitters(receipt: &Value) -> Vec<Address> {
    let shaped = [
        crate::decode::TRANSFER_TOPIC,
        crate::decode::TRANSFER_SINGLE_TOPIC,
        crate::decode::TRANSFER_BATCH_TOPIC,
    ];
    logs_of(receipt)
        .into_iter()
        .filter(|log| log.topics.first().is_some_and(|t| shaped.contains(t)))
        .map(|log| log.address)
        .collect()
}

/// Every movement in `receipt` of the kind a list shows (`kind`) that `address` sent or
/// received, in log order. `kinds_of` says how an emitter is classified.
pub fn transfers_in(
    receipt: &Value,
    kind: TokenKind,
    address: Address,
    kinds_of: impl FnMut(&Address) -> TokenKinds,
) -> Vec<TransferDetail> {
    movements(receipt, kind, Some(address), None, kinds_of)
}

/// Every movement in `receipt` of `kind`, in log order: those `party` sent or received when
/// given, of `token` when given.
pub fn movements(
    receipt: &Value,
    kind: TokenKind,
    party: Option<Address>,
    token: Option<Address>,
    mut kinds_of: impl FnMut(&Address) -> TokenKinds,
) -> Vec<TransferDetail> {
    let mut out = Vec::new();
    for log in logs_of(receipt) {
        let decoded = TokenLog::decode(log.address, &log.topics, &log.data, |token| {
            Ok::<_, std::convert::Infallible>(kinds_of(token))
        });
        let Ok(Some(decoded)) = decoded else { continue };
        let involved = party.is_none_or(|p| decoded.from == p || decoded.to == p);
        if decoded.kind != kind || !involved || token.is_some_and(|t| t != decoded.token) {
            continue;
        }
        let detail = |token_id, value| TransferDetail {
            token: decoded.token,
            operator: decoded.operator,
            from: decoded.from,
            to: decoded.to,
            token_id,
            value,
        };
        match kind {
            TokenKind::Erc20 => out.push(detail(None, Some(decoded.shown_value()))),
            TokenKind::Erc721 => out.push(detail(decoded.shown_token_id(), None)),
            TokenKind::Erc1155 => {
                let Some(pairs) = decoded.units() else { continue };
                out.extend(pairs.into_iter().map(|(id, value)| detail(Some(id), Some(value))));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use alloy_primitives::{address, hex};
    use serde_json::json;

    use super::*;
    use crate::decode::{TRANSFER_BATCH_TOPIC, TRANSFER_SINGLE_TOPIC, TRANSFER_TOPIC};

    const TOKEN: Address = address!("00000000000000000000000000000000000000aa");
    const OTHER: Address = address!("00000000000000000000000000000000000000bb");
    const ME: Address = address!("0000000000000000000000000000000000000001");
    const YOU: Address = address!("0000000000000000000000000000000000000002");

    fn topic(a: Address) -> B256 {
        a.into_word()
    }

    fn log(address: Address, topics: &[B256], data: Vec<u8>) -> Value {
        json!({"address": address, "topics": topics, "data": Bytes::from(data), "logIndex": "0x0"})
    }

    fn uint(n: u64) -> Vec<u8> {
        U256::from(n).to_be_bytes::<32>().to_vec()
    }

    fn kinds(transfer: Option<TokenKind>, multi: bool) -> impl FnMut(&Address) -> TokenKinds {
        move |a: &Address| if *a == TOKEN { TokenKinds { transfer, multi } } else { TokenKinds::default() }
    }

    #[test]
    fn erc20_movements_of_the_address_only_and_only_of_classified_tokens() {
        let receipt = json!({"logs": [
            log(TOKEN, &[TRANSFER_TOPIC, topic(ME), topic(YOU)], uint(5)),
            log(TOKEN, &[TRANSFER_TOPIC, topic(YOU), topic(OTHER)], uint(6)),
            log(OTHER, &[TRANSFER_TOPIC, topic(ME), topic(YOU)], uint(7)),
            log(TOKEN, &[TRANSFER_TOPIC, topic(YOU), topic(ME)], uint(8)),
            {"address": "junk"},
        ]});
        let got = transfers_in(&receipt, TokenKind::Erc20, ME, kinds(Some(TokenKind::Erc20), false));
        let v = |from, to, n| TransferDetail {
            token: TOKEN,
            operator: None,
            from,
            to,
            token_id: None,
            value: Some(U256::from(n)),
        };
        assert_eq!(got, vec![v(ME, YOU, 5), v(YOU, ME, 8)]);
        assert!(
            transfers_in(&receipt, TokenKind::Erc721, ME, kinds(Some(TokenKind::Erc20), false)).is_empty()
        );
        assert_eq!(
            serde_json::to_value(&got[0]).expect("json"),
            json!({"token": TOKEN, "from": ME, "to": YOU, "value": "0x5"})
        );
    }

    #[test]
    fn erc721_ids_come_from_the_fourth_topic() {
        let id = B256::from(U256::from(77));
        let receipt =
            json!({"logs": [log(TOKEN, &[TRANSFER_TOPIC, topic(Address::ZERO), topic(ME), id], vec![])]});
        let got = transfers_in(&receipt, TokenKind::Erc721, ME, kinds(Some(TokenKind::Erc721), false));
        assert_eq!(
            serde_json::to_value(&got).expect("json"),
            json!([{"token": TOKEN, "from": Address::ZERO, "to": ME, "tokenId": "0x4d"}])
        );
    }

    #[test]
    fn erc1155_single_and_batch() {
        let single = [uint(3), uint(10)].concat();
        // ids [1, 2], values [100, 200]
        let batch = hex::decode(concat!(
            "0000000000000000000000000000000000000000000000000000000000000040",
            "00000000000000000000000000000000000000000000000000000000000000a0",
            "0000000000000000000000000000000000000000000000000000000000000002",
            "0000000000000000000000000000000000000000000000000000000000000001",
            "0000000000000000000000000000000000000000000000000000000000000002",
            "0000000000000000000000000000000000000000000000000000000000000002",
            "0000000000000000000000000000000000000000000000000000000000000064",
            "00000000000000000000000000000000000000000000000000000000000000c8",
        ))
        .expect("hex");
        let receipt = json!({"logs": [
            log(TOKEN, &[TRANSFER_SINGLE_TOPIC, topic(OTHER), topic(ME), topic(YOU)], single),
            log(TOKEN, &[TRANSFER_BATCH_TOPIC, topic(OTHER), topic(YOU), topic(ME)], batch),
            log(TOKEN, &[TRANSFER_BATCH_TOPIC, topic(OTHER), topic(YOU), topic(ME)], uint(1 << 40)),
        ]});
        let got = transfers_in(&receipt, TokenKind::Erc1155, ME, kinds(None, true));
        let m = |from, to, id: u64, value: u64| TransferDetail {
            token: TOKEN,
            operator: Some(OTHER),
            from,
            to,
            token_id: Some(U256::from(id)),
            value: Some(U256::from(value)),
        };
        assert_eq!(got, vec![m(ME, YOU, 3, 10), m(YOU, ME, 1, 100), m(YOU, ME, 2, 200)]);
    }
}
