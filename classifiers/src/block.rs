//! One block's data, as every source (node or recording) delivers it.

use alloy_primitives::{Address, Bytes, B256};

/// A block with its transactions and receipts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockData {
    /// Block number.
    pub number: u64,
    /// Block hash.
    pub hash: B256,
    /// Parent block hash.
    pub parent_hash: B256,
    /// Unix timestamp (seconds).
    pub timestamp: u64,
    /// Fee recipient.
    pub coinbase: Address,
    /// Block gas limit (probes run with it).
    pub gas_limit: u64,
    /// Transactions in block order.
    pub transactions: Vec<TxData>,
    /// One receipt per transaction, same order.
    pub receipts: Vec<ReceiptData>,
}

/// What the index needs of a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxData {
    /// Transaction hash.
    pub hash: B256,
    /// Sender.
    pub from: Address,
    /// Recipient; `None` for a contract creation.
    pub to: Option<Address>,
}

/// What the index needs of a receipt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptData {
    /// Whether the transaction succeeded.
    pub success: bool,
    /// The contract a creation transaction deployed.
    pub contract_address: Option<Address>,
    /// Logs in order.
    pub logs: Vec<LogData>,
}

/// An event log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogData {
    /// Emitting contract.
    pub address: Address,
    /// Topics (topic 0 is the event signature for non-anonymous events).
    pub topics: Vec<B256>,
    /// Non-indexed data.
    pub data: Bytes,
}

impl BlockData {
    /// Contracts deployed by this block's transactions, in transaction order, without repeats.
    ///
    /// Without call traces this sees only top-level creations (a receipt's `contractAddress`);
    /// contracts created by other contracts need traces.
    pub fn created_contracts(&self) -> Vec<Address> {
        let mut out: Vec<Address> = Vec::new();
        for r in &self.receipts {
            if let (true, Some(a)) = (r.success, r.contract_address) {
                if !out.contains(&a) {
                    out.push(a);
                }
            }
        }
        out
    }
}
