//! Recording format 3's entries, read still: its transactions have no `mint` (format 4 added it
//! for the OP Stack's deposits), and bincode, which is not self-describing, cannot tell the two
//! apart, so format 3's blocks are read as these and given a zero mint.

use alloy_primitives::{Address, Bytes, B256, U256};
use ots_classifiers::{BlockData, CallFrame, CallOutcome, ReceiptData, TxData, Withdrawal};
use serde::Deserialize;

use super::fixture_entry::Entry;

/// A transaction as format 3 stores it.
#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
struct TxV3 {
    hash: B256,
    from: Address,
    to: Option<Address>,
    nonce: u64,
    value: U256,
}

/// A block as format 3 stores it (`BlockData`'s fields, in its order).
#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
struct BlockV3 {
    number: u64,
    hash: B256,
    parent_hash: B256,
    timestamp: u64,
    coinbase: Address,
    gas_limit: u64,
    transactions: Vec<TxV3>,
    receipts: Vec<ReceiptData>,
    frames: Option<Vec<CallFrame>>,
    withdrawals: Vec<Withdrawal>,
    code_removed: Vec<Address>,
}

/// One entry of format 3 (`Entry`'s variants, in its order).
#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
enum EntryV3 {
    Block(Box<BlockV3>),
    Call { to: Address, input: Bytes, block: u64, outcome: CallOutcome },
    Code { address: Address, block: u64, code: Bytes },
}

impl From<EntryV3> for Entry {
    fn from(entry: EntryV3) -> Self {
        match entry {
            EntryV3::Block(b) => {
                let b = *b;
                Self::Block(Box::new(BlockData {
                    number: b.number,
                    hash: b.hash,
                    parent_hash: b.parent_hash,
                    timestamp: b.timestamp,
                    coinbase: b.coinbase,
                    gas_limit: b.gas_limit,
                    transactions: b
                        .transactions
                        .into_iter()
                        .map(|t| TxData {
                            hash: t.hash,
                            from: t.from,
                            to: t.to,
                            nonce: t.nonce,
                            value: t.value,
                            mint: None,
                        })
                        .collect(),
                    receipts: b.receipts,
                    frames: b.frames,
                    withdrawals: b.withdrawals,
                    code_removed: b.code_removed,
                }))
            }
            EntryV3::Call { to, input, block, outcome } => Self::Call { to, input, block, outcome },
            EntryV3::Code { address, block, code } => Self::Code { address, block, code },
        }
    }
}

/// Decodes one format-3 entry.
pub(super) fn decode(bytes: &[u8]) -> Result<Entry, bincode::Error> {
    bincode::deserialize::<EntryV3>(bytes).map(Entry::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_format_3_block_is_read_with_no_mint() {
        let tx = TxV3 {
            hash: B256::repeat_byte(1),
            from: Address::repeat_byte(2),
            to: None,
            nonce: 5,
            value: U256::from(9),
        };
        let block = BlockV3 {
            number: 7,
            hash: B256::repeat_byte(3),
            parent_hash: B256::repeat_byte(4),
            timestamp: 12,
            coinbase: Address::repeat_byte(5),
            gas_limit: 30_000_000,
            transactions: vec![tx],
            receipts: vec![ReceiptData {
                success: true,
                contract_address: None,
                logs: Vec::new(),
                fee: U256::from(21),
            }],
            frames: None,
            withdrawals: Vec::new(),
            code_removed: vec![Address::repeat_byte(6)],
        };
        let bytes = bincode::serialize(&EntryV3::Block(Box::new(block))).expect("encode");
        let Entry::Block(read) = decode(&bytes).expect("decode") else { panic!("a block") };
        assert_eq!((read.number, read.gas_limit, read.code_removed.len()), (7, 30_000_000, 1));
        let tx = &read.transactions[0];
        assert_eq!((tx.nonce, tx.value, tx.mint), (5, U256::from(9), None));
        assert_eq!(read.receipts[0].fee, U256::from(21));
    }
}
