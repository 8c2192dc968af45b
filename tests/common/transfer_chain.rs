//! A generated chain of ERC20 transfers, big enough that tables span many pages and a token
//! has thousands of holders: 150 transfers per block between 4,000 addresses, two tokens; and
//! what other generated chains share with it (a block's fixed fields, a dump of every table).

use alloy::primitives::{keccak256, Address, Bytes, B256, U256};
use ots_classifiers::{BlockData, Fact, LogData, ReceiptData, Standard, TxData, TRANSFER_TOPIC};
use ots_indexer::{
    db::{tables::TableId, Db},
    index::{write_batch, BatchOptions, ClassifiedBlock},
};

const TOKENS: [Address; 2] = [Address::repeat_byte(0x20), Address::repeat_byte(0x21)];

fn holder(n: u64) -> Address {
    Address::left_padding_from(&(n + 1).to_be_bytes())
}

fn word(a: Address) -> B256 {
    B256::left_padding_from(a.as_slice())
}

/// Block `n`: 150 transfers between 4,000 addresses picked by a multiplicative hash of the log.
pub fn block(n: u64) -> ClassifiedBlock {
    let mut facts = Vec::new();
    let mut receipts = Vec::new();
    let mut transactions = Vec::new();
    if n == 0 {
        facts.extend(TOKENS.map(|address| Fact::Matched { standard: Standard::Erc20, address }));
    }
    for i in 0..if n == 0 { 0 } else { 150u64 } {
        let seed = (n * 1000 + i).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let (from, to) = (holder((seed >> 20) % 4000), holder((seed >> 40) % 4000));
        let log = LogData {
            address: TOKENS[(seed & 1) as usize],
            topics: vec![TRANSFER_TOPIC, word(from), word(to)],
            data: Bytes::from(U256::from(seed % 1000).to_be_bytes::<32>().to_vec()),
        };
        receipts.push(ReceiptData {
            success: true,
            contract_address: None,
            logs: vec![log],
            fee: U256::ZERO,
        });
        // Each transaction from its own sender, so every nonce is 0 and right.
        let hash = keccak256([n, i].map(u64::to_be_bytes).concat());
        transactions.push(TxData {
            hash,
            from: Address::from_slice(&hash[12..]),
            to: None,
            nonce: 0,
            value: U256::ZERO,
            mint: None,
        });
    }
    let parent = if n == 0 { B256::ZERO } else { keccak256((n - 1).to_be_bytes()) };
    let block = block_data(n, keccak256(n.to_be_bytes()), parent, transactions, receipts);
    ClassifiedBlock { block, facts, probe_misses: vec![] }
}

/// A generated block: one timestamp a second, no coinbase, frames or withdrawals.
pub fn block_data(
    number: u64,
    hash: B256,
    parent_hash: B256,
    transactions: Vec<TxData>,
    receipts: Vec<ReceiptData>,
) -> BlockData {
    BlockData {
        number,
        hash,
        parent_hash,
        timestamp: 1_700_000_000 + number,
        coinbase: Address::ZERO,
        gas_limit: 30_000_000,
        transactions,
        receipts,
        frames: None,
        withdrawals: vec![],
        code_removed: Vec::new(),
    }
}

/// Writes blocks `from..to` in batches of `per_batch` blocks.
pub fn index(db: &Db, from: u64, to: u64, per_batch: u64) {
    for start in (from..to).step_by(per_batch as usize) {
        let batch: Vec<ClassifiedBlock> = (start..(start + per_batch).min(to)).map(block).collect();
        write_batch(db, &batch, BatchOptions::window(64)).expect("write");
    }
}

/// Every table of `db`, byte for byte.
pub fn raw_tables(db: &Db) -> Vec<Vec<(Vec<u8>, Vec<u8>)>> {
    let txn = db.begin_read().expect("read");
    TableId::ALL.iter().map(|t| txn.raw_entries(*t).expect("entries")).collect()
}
