//! `ots-indexer compact` through the binary: the database comes out smaller and the same byte
//! for byte; a database another process has open is refused and left alone; the copy an
//! interrupted compact left behind is cleared.

use std::{path::Path, process::Command};

use alloy::primitives::{keccak256, Address, Bytes, B256, U256};
use ots_classifiers::{BlockData, Fact, LogData, ReceiptData, Standard, TxData, TRANSFER_TOPIC};
use ots_indexer::{
    db::{tables::TableId, AccessMode, Db},
    index::{write_batch, ClassifiedBlock},
};

const BIN: &str = env!("CARGO_BIN_EXE_ots-indexer");
const TOKENS: [Address; 2] = [Address::repeat_byte(0x20), Address::repeat_byte(0x21)];

fn holder(n: u64) -> Address {
    Address::left_padding_from(&(n + 1).to_be_bytes())
}

fn word(a: Address) -> B256 {
    B256::left_padding_from(a.as_slice())
}

/// Block `n`: 150 transfers between 4,000 addresses picked by a multiplicative hash of the log.
fn block(n: u64) -> ClassifiedBlock {
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
        receipts.push(ReceiptData { success: true, contract_address: None, logs: vec![log] });
        transactions.push(TxData { hash: keccak256([n, i].map(u64::to_be_bytes).concat()), from, to: None });
    }
    let block = BlockData {
        number: n,
        hash: keccak256(n.to_be_bytes()),
        parent_hash: if n == 0 { B256::ZERO } else { keccak256((n - 1).to_be_bytes()) },
        timestamp: 1_700_000_000 + n,
        coinbase: Address::ZERO,
        gas_limit: 30_000_000,
        transactions,
        receipts,
        frames: None,
        withdrawals: vec![],
    };
    ClassifiedBlock { block, facts, probe_misses: vec![] }
}

/// Writes blocks `from..to` in batches of 20.
fn index(db: &Db, from: u64, to: u64) {
    for start in (from..to).step_by(20) {
        let batch: Vec<ClassifiedBlock> = (start..(start + 20).min(to)).map(block).collect();
        write_batch(db, &batch, 64, None).expect("write");
    }
}

fn raw_tables(db: &Db) -> Vec<Vec<(Vec<u8>, Vec<u8>)>> {
    let txn = db.begin_read().expect("read");
    TableId::ALL.iter().map(|t| txn.raw_entries(*t).expect("entries")).collect()
}

/// Bytes of the ERC20 transfer index.
fn index_bytes(db: &Db) -> u64 {
    let stats = db.begin_read().expect("read").table_stats().expect("stats");
    stats.iter().filter(|t| t.table == TableId::OtsERC20TransferIndex).map(|t| t.bytes).sum()
}

fn compact(dir: &Path) -> std::process::Output {
    Command::new(BIN).args(["compact", "--datadir"]).arg(dir).output().expect("run ots-indexer")
}

#[test]
fn compact_rewrites_in_place_smaller_and_the_same() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("db");
    index(&db, 0, 400);
    let before = raw_tables(&db);
    let bytes_before = index_bytes(&db);

    // Open here: compact must refuse and change nothing.
    let out = compact(dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "compact ran beside an open database");
    assert!(stderr.contains("another process has the database open"), "stderr: {stderr}");
    assert_eq!(raw_tables(&db), before);
    drop(db);

    // What an interrupted compact leaves: a half-made copy beside the database.
    std::fs::create_dir(dir.path().join("compacting")).expect("mkdir");
    std::fs::write(dir.path().join("compacting/mdbx.dat"), b"half a copy").expect("write");

    let out = compact(dir.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "compact failed: {}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("OtsERC20TransferIndex") && stdout.contains("smaller"), "stdout: {stdout}");
    assert!(!dir.path().join("compacting").exists(), "the scratch copy is left behind");
    let out = Command::new(BIN).args(["check", "--datadir"]).arg(dir.path()).output().expect("check");
    assert!(out.status.success(), "check: {}", String::from_utf8_lossy(&out.stderr));

    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("reopen");
    assert_eq!(raw_tables(&db), before, "compact changed an entry");
    let bytes_after = index_bytes(&db);
    assert!(bytes_after * 10 < bytes_before * 9, "only {bytes_before} -> {bytes_after} bytes");

    // The compacted database takes more blocks as any other.
    index(&db, 400, 440);
    let fresh_dir = tempfile::tempdir().expect("tempdir");
    let fresh = Db::open(fresh_dir.path(), AccessMode::ReadWrite).expect("fresh");
    index(&fresh, 0, 440);
    assert_eq!(raw_tables(&db), raw_tables(&fresh));
}

#[test]
fn compact_without_a_database_says_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = compact(dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("holds no database"), "stderr: {stderr}");
    assert!(std::fs::read_dir(dir.path()).expect("read dir").next().is_none(), "compact created files");
}
