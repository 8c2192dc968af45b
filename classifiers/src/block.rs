//! One block's data, as every source (node or recording) delivers it.

use alloy_primitives::{Address, Bytes, B256, U256};
use serde::{Deserialize, Serialize};

/// A block with its transactions and receipts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
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
    /// Every call frame of every transaction, in execution order; `None` when the node offers
    /// no call traces.
    pub frames: Option<Vec<CallFrame>>,
    /// Consensus-layer withdrawals.
    pub withdrawals: Vec<Withdrawal>,
    /// Contracts a successful SELFDESTRUCT frame of this block named whose code the node says is
    /// gone at the block's end (before Cancun every selfdestruct removes code; after it, only a
    /// contract created in the same transaction's); empty without call frames.
    #[serde(default)]
    pub code_removed: Vec<Address>,
}

/// What a call frame did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FrameKind {
    /// CALL.
    Call,
    /// STATICCALL.
    StaticCall,
    /// DELEGATECALL.
    DelegateCall,
    /// CALLCODE.
    CallCode,
    /// CREATE.
    Create,
    /// CREATE2.
    Create2,
    /// SELFDESTRUCT.
    SelfDestruct,
}

/// One call frame (CALL, CREATE, CREATE2, SELFDESTRUCT…) of a transaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallFrame {
    /// Index of the transaction in the block.
    pub tx_index: u64,
    /// 0 for the transaction's own call.
    pub depth: u32,
    /// What it did.
    pub kind: FrameKind,
    /// Caller (for SELFDESTRUCT: the destroyed contract).
    pub from: Address,
    /// Callee; for CREATE/CREATE2 the new contract; for SELFDESTRUCT the beneficiary.
    pub to: Address,
    /// Wei moved.
    pub value: U256,
    /// Whether the frame and every frame around it succeeded, i.e. whether its effects stayed.
    pub success: bool,
}

/// A consensus-layer withdrawal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Withdrawal {
    /// Global withdrawal index.
    pub index: u64,
    /// Validator index.
    pub validator_index: u64,
    /// Recipient.
    pub address: Address,
    /// Amount in Gwei.
    pub amount_gwei: u64,
}

/// What the index needs of a transaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxData {
    /// Transaction hash.
    pub hash: B256,
    /// Sender.
    pub from: Address,
    /// Recipient; `None` for a contract creation.
    pub to: Option<Address>,
    /// The sender's nonce (0 in recordings made before it was kept).
    #[serde(default)]
    pub nonce: u64,
    /// Wei the transaction itself sends to its recipient (or new contract); 0 in JSON
    /// recordings made before it was kept.
    #[serde(default)]
    pub value: U256,
    /// Wei the chain created and credited to the sender before the transaction ran: an OP Stack
    /// deposit's `mint` (it stands even when the deposit fails); `None` for every other
    /// transaction (one byte in a recording, where a number would be 32).
    #[serde(default)]
    pub mint: Option<U256>,
}

/// What the index needs of a receipt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReceiptData {
    /// Whether the transaction succeeded.
    pub success: bool,
    /// The contract a creation transaction deployed.
    pub contract_address: Option<Address>,
    /// Logs in order.
    pub logs: Vec<LogData>,
    /// Wei the sender paid for the transaction: gas used × effective gas price, plus blob gas
    /// used × blob gas price; 0 in JSON recordings made before it was kept.
    #[serde(default)]
    pub fee: U256,
}

/// An event log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogData {
    /// Emitting contract.
    pub address: Address,
    /// Topics (topic 0 is the event signature for non-anonymous events).
    pub topics: Vec<B256>,
    /// Non-indexed data.
    pub data: Bytes,
}

impl BlockData {
    /// Contracts deployed by this block, in execution order, without repeats: every successful
    /// CREATE/CREATE2 frame when the block has call frames (so contracts made by factories count,
    /// and so does one destroyed later in the same transaction), else the `contractAddress` of
    /// successful receipts.
    pub fn created_contracts(&self) -> Vec<Address> {
        let mut out: Vec<Address> = Vec::new();
        let mut add = |a: Address| {
            if !out.contains(&a) {
                out.push(a);
            }
        };
        match &self.frames {
            Some(frames) => frames
                .iter()
                .filter(|f| f.success && matches!(f.kind, FrameKind::Create | FrameKind::Create2))
                .for_each(|f| add(f.to)),
            None => self
                .receipts
                .iter()
                .filter(|r| r.success)
                .filter_map(|r| r.contract_address)
                .for_each(&mut add),
        }
        out
    }
}
