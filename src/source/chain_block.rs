//! A node's block and receipts read as any EVM chain gives them.
//!
//! Ethereum's typed transactions are not the only ones: every OP Stack block begins with a
//! deposit (type `0x7e`, with `sourceHash`, `mint`, `isSystemTx`), Arbitrum has types
//! `0x64`–`0x6a`, other chains have theirs. The index needs only what every transaction and
//! receipt has, so it reads those fields by name from the JSON answer and leaves the rest alone
//! (the API passes the node's objects on whole). A field the index needs that is missing or
//! malformed is an [`SourceError::Unreadable`] naming the block, the transaction and the field.
//! docs/architecture.md ("Blocks of any chain") says why this is not alloy's typed envelopes.

use alloy_primitives::{Address, Bytes, B256, U256};
use ots_classifiers::{BlockData, LogData, ReceiptData, TxData, Withdrawal};
use serde::{de::DeserializeOwned, Deserialize};
use serde_json::{Map, Value};

use super::SourceError;

/// The OP Stack's deposit transaction type: it pays no fee, and may mint ETH to its sender.
const DEPOSIT_TX_TYPE: u64 = 0x7e;

/// The most characters of the raw answer an error quotes.
const SNIPPET_CHARS: usize = 240;

/// Where in a block's answers a field was looked for.
#[derive(Debug, Clone, Copy)]
enum Part {
    Header,
    Transaction(usize),
    Receipt(usize),
    Withdrawal(usize),
}

struct Reader<'a> {
    block: u64,
    part: Part,
    object: &'a Map<String, Value>,
}

fn snippet(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(SNIPPET_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

fn object_of(block: u64, part: Part, value: &Value) -> Result<Reader<'_>, SourceError> {
    match value.as_object() {
        Some(object) => Ok(Reader { block, part, object }),
        None => Err(unreadable(block, part, "(the whole object)", "not a JSON object", value)),
    }
}

fn unreadable(block: u64, part: Part, field: &str, why: &str, raw: &Value) -> SourceError {
    let (what, index) = match part {
        Part::Header => ("header", None),
        Part::Transaction(i) => ("transaction", Some(i)),
        Part::Receipt(i) => ("receipt", Some(i)),
        Part::Withdrawal(i) => ("withdrawal", Some(i)),
    };
    SourceError::Unreadable {
        block,
        part: what,
        index,
        field: field.to_owned(),
        reason: why.to_owned(),
        snippet: snippet(raw),
    }
}

/// A JSON quantity: a hex string ("0x1a", any case), or a plain number as some nodes give for a
/// few fields (Anvil's receipt `blockTimestamp`).
fn quantity(value: &Value) -> Option<U256> {
    match value {
        Value::String(s) => {
            let digits = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X"))?;
            if digits.is_empty() {
                return Some(U256::ZERO);
            }
            U256::from_str_radix(digits, 16).ok()
        }
        Value::Number(n) => n.as_u64().map(U256::from),
        _ => None,
    }
}

impl Reader<'_> {
    fn fail(&self, field: &str, why: &str) -> SourceError {
        unreadable(self.block, self.part, field, why, &Value::Object(self.object.clone()))
    }

    /// A field that may be absent or null.
    fn optional<T: DeserializeOwned>(&self, field: &str) -> Result<Option<T>, SourceError> {
        match self.object.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => T::deserialize(v).map(Some).map_err(|e| self.fail(field, &e.to_string())),
        }
    }

    fn required<T: DeserializeOwned>(&self, field: &str) -> Result<T, SourceError> {
        self.optional(field)?.ok_or_else(|| self.fail(field, "missing"))
    }

    fn optional_quantity(&self, field: &str) -> Result<Option<U256>, SourceError> {
        match self.object.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => quantity(v).map(Some).ok_or_else(|| self.fail(field, "not a quantity")),
        }
    }

    fn quantity_or_zero(&self, field: &str) -> Result<U256, SourceError> {
        Ok(self.optional_quantity(field)?.unwrap_or_default())
    }

    fn required_u64(&self, field: &str) -> Result<u64, SourceError> {
        let q = self.optional_quantity(field)?.ok_or_else(|| self.fail(field, "missing"))?;
        u64::try_from(q).map_err(|_| self.fail(field, "over 64 bits"))
    }

    fn u64_or_zero(&self, field: &str) -> Result<u64, SourceError> {
        let q = self.quantity_or_zero(field)?;
        u64::try_from(q).map_err(|_| self.fail(field, "over 64 bits"))
    }
}

/// The header fields the index keeps.
pub(super) struct HeaderFields {
    pub(super) number: u64,
    pub(super) hash: B256,
    pub(super) parent_hash: B256,
    pub(super) timestamp: u64,
    pub(super) coinbase: Address,
    pub(super) gas_limit: u64,
}

/// Reads the header fields of `block`'s answer (with or without its transactions).
pub(super) fn header(number: u64, block: &Value) -> Result<HeaderFields, SourceError> {
    let h = object_of(number, Part::Header, block)?;
    Ok(HeaderFields {
        number: h.required_u64("number")?,
        hash: h.required("hash")?,
        parent_hash: h.required("parentHash")?,
        timestamp: h.required_u64("timestamp")?,
        // Some chains name no fee recipient; the zero address is what they mean.
        coinbase: h.optional("miner")?.unwrap_or_default(),
        gas_limit: h.u64_or_zero("gasLimit")?,
    })
}

/// The hashes of `block`'s transactions, full or as hashes, in block order.
pub(super) fn transaction_hashes(number: u64, block: &Value) -> Result<Vec<B256>, SourceError> {
    let txs = transactions(number, block)?;
    txs.iter()
        .enumerate()
        .map(|(i, tx)| match tx {
            Value::String(_) => B256::deserialize(tx)
                .map_err(|_| unreadable(number, Part::Transaction(i), "hash", "not a hash", tx)),
            _ => object_of(number, Part::Transaction(i), tx)?.required("hash"),
        })
        .collect()
}

fn transactions(number: u64, block: &Value) -> Result<&Vec<Value>, SourceError> {
    match block.get("transactions") {
        Some(Value::Array(txs)) => Ok(txs),
        _ => Err(unreadable(number, Part::Header, "transactions", "missing or not a list", block)),
    }
}

/// One transaction's common fields, and whether it is an OP Stack deposit.
fn transaction(number: u64, index: usize, tx: &Value) -> Result<(TxData, bool), SourceError> {
    let t = object_of(number, Part::Transaction(index), tx)?;
    let kind = t.u64_or_zero("type")?;
    Ok((
        TxData {
            hash: t.required("hash")?,
            from: t.required("from")?,
            to: t.optional("to")?,
            nonce: t.u64_or_zero("nonce")?,
            value: t.quantity_or_zero("value")?,
            mint: if kind == DEPOSIT_TX_TYPE { t.optional_quantity("mint")? } else { None },
        },
        kind == DEPOSIT_TX_TYPE,
    ))
}

/// What the sender paid: L2 gas at its price, blob gas at its price, and on the OP Stack the
/// receipt's L1 data fee and operator fee. A deposit pays nothing.
fn fee(r: &Reader<'_>, deposit: bool, gas_used: U256) -> Result<U256, SourceError> {
    if deposit {
        return Ok(U256::ZERO);
    }
    let execution = gas_used.saturating_mul(r.quantity_or_zero("effectiveGasPrice")?);
    let blob = r.quantity_or_zero("blobGasUsed")?.saturating_mul(r.quantity_or_zero("blobGasPrice")?);
    let l1 = r.quantity_or_zero("l1Fee")?;
    // Isthmus: gas used × scalar / 10⁶ + constant, both in the receipt when the chain charges it.
    let operator =
        match (r.optional_quantity("operatorFeeScalar")?, r.optional_quantity("operatorFeeConstant")?) {
            (None, None) => U256::ZERO,
            (scalar, constant) => {
                gas_used.saturating_mul(scalar.unwrap_or_default()) / U256::from(1_000_000u64)
                    + constant.unwrap_or_default()
            }
        };
    Ok(execution.saturating_add(blob).saturating_add(l1).saturating_add(operator))
}

fn log(number: u64, receipt: usize, raw: &Value) -> Result<LogData, SourceError> {
    let l = object_of(number, Part::Receipt(receipt), raw)?;
    Ok(LogData {
        address: l.required("address")?,
        topics: l.optional("topics")?.unwrap_or_default(),
        data: l.optional::<Bytes>("data")?.unwrap_or_default(),
    })
}

fn receipt(
    number: u64,
    block_hash: B256,
    index: usize,
    tx: &TxData,
    deposit: bool,
    raw: &Value,
) -> Result<ReceiptData, SourceError> {
    let r = object_of(number, Part::Receipt(index), raw)?;
    let inconsistent = |reason: String| SourceError::Inconsistent { block: number, reason };
    let hash: B256 = r.required("transactionHash")?;
    if hash != tx.hash {
        return Err(inconsistent(format!("receipt {index} is for transaction {hash}")));
    }
    if r.optional::<B256>("blockHash")?.is_some_and(|h| h != block_hash) {
        return Err(inconsistent(format!("receipt {index} belongs to another block")));
    }
    // Before Byzantium a receipt has a state root instead of a status: the transaction stood.
    let success = match r.optional_quantity("status")? {
        Some(status) => !status.is_zero(),
        None => true,
    };
    let logs = match r.object.get("logs") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(logs)) => logs.iter().map(|l| log(number, index, l)).collect::<Result<_, _>>()?,
        Some(_) => return Err(r.fail("logs", "not a list")),
    };
    let gas_used = r.quantity_or_zero("gasUsed")?;
    Ok(ReceiptData {
        success,
        contract_address: r.optional("contractAddress")?,
        logs,
        fee: fee(&r, deposit, gas_used)?,
    })
}

fn withdrawals(number: u64, block: &Value) -> Result<Vec<Withdrawal>, SourceError> {
    let Some(Value::Array(list)) = block.get("withdrawals") else { return Ok(Vec::new()) };
    list.iter()
        .enumerate()
        .map(|(i, w)| {
            let w = object_of(number, Part::Withdrawal(i), w)?;
            Ok(Withdrawal {
                index: w.required_u64("index")?,
                validator_index: w.required_u64("validatorIndex")?,
                address: w.required("address")?,
                amount_gwei: w.required_u64("amount")?,
            })
        })
        .collect()
}

/// Block `number` from `eth_getBlockByNumber(number, true)`'s answer and its receipts, in
/// transaction order.
pub(super) fn block_data(number: u64, block: &Value, receipts: &[Value]) -> Result<BlockData, SourceError> {
    let header = header(number, block)?;
    if header.number != number {
        return Err(SourceError::Inconsistent {
            block: number,
            reason: format!("asked for block {number}, got block {}", header.number),
        });
    }
    let txs = transactions(number, block)?;
    if txs.iter().any(Value::is_string) {
        return Err(SourceError::Inconsistent {
            block: number,
            reason: "transactions came without bodies".into(),
        });
    }
    if txs.len() != receipts.len() {
        return Err(SourceError::Inconsistent {
            block: number,
            reason: format!("{} transactions but {} receipts", txs.len(), receipts.len()),
        });
    }
    let mut transactions = Vec::with_capacity(txs.len());
    let mut receipt_data = Vec::with_capacity(txs.len());
    for (i, (tx, raw_receipt)) in txs.iter().zip(receipts).enumerate() {
        let (tx, deposit) = transaction(number, i, tx)?;
        receipt_data.push(receipt(number, header.hash, i, &tx, deposit, raw_receipt)?);
        transactions.push(tx);
    }
    Ok(BlockData {
        number,
        hash: header.hash,
        parent_hash: header.parent_hash,
        timestamp: header.timestamp,
        coinbase: header.coinbase,
        gas_limit: header.gas_limit,
        transactions,
        receipts: receipt_data,
        frames: None,
        withdrawals: withdrawals(number, block)?,
        code_removed: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const BLOCK_HASH: &str = "0x2ead09ed1ea493d125992f749f08d08db4033ed408c3cd0be7c3e403511ad884";
    const TX_HASH: &str = "0xead0ee3ac1e93ddf7cdfac2f3a6aed9ae3892af937f4e11aa778e798a6ab619e";

    /// Anvil's OP Stack mode: a deposit minting 0x1000 wei and sending 0x100 of it.
    fn deposit_block() -> (Value, Vec<Value>) {
        let block = json!({
            "hash": BLOCK_HASH,
            "parentHash": "0x2add444cd8530ec7fe92c97811b26f1bbae540d2ebb14c13585c7e669661e9c4",
            "miner": "0x0000000000000000000000000000000000000000",
            "number": "0x1", "gasLimit": "0x1c9c380", "timestamp": "0x6b093af5",
            "transactions": [{
                "hash": TX_HASH, "type": "0x7e",
                "from": "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266",
                "to": "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
                "gas": "0x5208", "input": "0x", "mint": "0x1000", "nonce": "0x0", "value": "0x100",
                "sourceHash": "0x0000000000000000000000000000000000000000000000000000000000000001",
                "blockHash": BLOCK_HASH, "blockNumber": "0x1", "transactionIndex": "0x0"
            }],
            "withdrawals": []
        });
        let receipt = json!({
            "type": "0x7E", "status": "0x1", "cumulativeGasUsed": "0x5208", "logs": [],
            "depositNonce": "0x1", "depositReceiptVersion": "0x1",
            "transactionHash": TX_HASH, "transactionIndex": "0x0", "blockHash": BLOCK_HASH,
            "blockNumber": "0x1", "gasUsed": "0x5208", "effectiveGasPrice": "0x7", "blobGasPrice": "0x1",
            "from": "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266",
            "to": "0x70997970c51812dc3a010c7d01b50e0d17dc79c8", "contractAddress": null,
            "blockTimestamp": 1_795_767_029u64
        });
        (block, vec![receipt])
    }

    #[test]
    fn an_op_stack_deposit_is_read_and_pays_no_fee() {
        let (block, receipts) = deposit_block();
        let data = block_data(1, &block, &receipts).expect("read");
        assert_eq!(data.transactions.len(), 1);
        assert_eq!(data.transactions[0].value, U256::from(0x100));
        assert_eq!(data.transactions[0].mint, Some(U256::from(0x1000)));
        assert!(data.receipts[0].success);
        assert_eq!(data.receipts[0].fee, U256::ZERO);
    }

    #[test]
    fn an_op_stack_fee_adds_the_l1_fee_and_the_operator_fee() {
        let (mut block, mut receipts) = deposit_block();
        block["transactions"][0]["type"] = json!("0x2");
        receipts[0]["type"] = json!("0x2");
        receipts[0]["l1Fee"] = json!("0x64");
        receipts[0]["operatorFeeScalar"] = json!("0xf4240"); // 10⁶: one wei per gas
        receipts[0]["operatorFeeConstant"] = json!("0x3");
        let data = block_data(1, &block, &receipts).expect("read");
        assert_eq!(data.receipts[0].fee, U256::from(0x5208 * 7 + 0x64 + 0x5208 + 3));
    }

    #[test]
    fn an_unknown_type_is_read_from_the_common_fields() {
        let (mut block, mut receipts) = deposit_block();
        // Arbitrum's retryable submission: fields of its own, none of Ethereum's signature.
        let tx = block["transactions"][0].as_object_mut().expect("object");
        tx.insert("type".into(), json!("0x69"));
        tx.insert("requestId".into(), json!(format!("0x{}", "ab".repeat(32))));
        tx.remove("nonce");
        receipts[0]["type"] = json!("0x69");
        let data = block_data(1, &block, &receipts).expect("read");
        assert_eq!(data.transactions[0].nonce, 0);
        assert_eq!(data.receipts[0].fee, U256::from(0x5208 * 7));
    }

    #[test]
    fn a_missing_sender_names_the_block_the_transaction_and_the_field() {
        let (mut block, receipts) = deposit_block();
        block["transactions"][0].as_object_mut().expect("object").remove("from");
        let err = block_data(1, &block, &receipts).expect_err("no sender");
        let text = err.to_string();
        assert!(
            text.contains("block 1") && text.contains("transaction 0") && text.contains("`from`"),
            "{text}"
        );
        assert!(text.contains(TX_HASH), "a snippet of the answer: {text}");
    }

    #[test]
    fn a_long_answer_is_quoted_in_part() {
        let long = json!({"input": format!("0x{}", "00".repeat(10_000))});
        assert!(snippet(&long).chars().count() <= SNIPPET_CHARS + 1);
    }

    #[test]
    fn quantities_are_hex_strings_or_plain_numbers() {
        assert_eq!(quantity(&json!("0x7E")), Some(U256::from(0x7e)));
        assert_eq!(quantity(&json!("0x")), Some(U256::ZERO));
        assert_eq!(quantity(&json!(12)), Some(U256::from(12)));
        assert_eq!(quantity(&json!("12")), None);
        assert_eq!(quantity(&json!(null)), None);
    }
}
