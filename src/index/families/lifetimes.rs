//! Contract lifetimes: when a contract's code was removed (`OtsCodeRemovals`), beside when it was
//! created (`OtsContractCreators`, the appearance family's). A creation starts a lifetime and a
//! removal after it ends it; a contract re-created at the same address (CREATE2 after a
//! removal) starts another.
//!
//! The node decides which selfdestructs removed code (the source asks `eth_getCode` at the
//! block's end: `BlockData::code_removed`): since EIP-6780 only a contract created in the same
//! transaction loses its code, and the indexer does not know the chain's fork schedule.
//! Removals are rare (about 0.05 % of mainnet transactions selfdestruct), so both write paths
//! put them as blocks come.

use alloy_primitives::Address;
use ots_classifiers::{BlockData, FrameKind};
use signet_libmdbx::tx::TransactionKind;

use crate::index::family::journalled_family;
use crate::index::{error::WriteError, integrity::broken, undo::UndoLog};
use crate::{
    db::{
        codec::{Creation, IndexKind},
        tables::{OtsCodeRemovals, OtsContractCreators},
        DbResult, Txn, WriteTxn,
    },
    txid::TxId,
};

/// Writes the removals of `block`: for each contract whose code it removed, the transaction of
/// its last successful SELFDESTRUCT in the block.
pub fn write_block(txn: &WriteTxn, block: &BlockData, undo: &mut UndoLog) -> Result<(), WriteError> {
    if block.code_removed.is_empty() {
        return Ok(());
    }
    let mut cursor = txn.cursor::<OtsCodeRemovals>()?;
    let mut removed = block.code_removed.clone();
    removed.sort_unstable();
    removed.dedup();
    for contract in removed {
        let last = block
            .frames
            .iter()
            .flatten()
            .filter(|f| f.kind == FrameKind::SelfDestruct && f.success && f.from == contract)
            .map(|f| f.tx_index)
            .next_back();
        let Some(index) = last else { continue };
        cursor.put(&contract, &TxId::new(block.number, index)?)?;
        undo.touch(IndexKind::CodeRemoval, contract);
    }
    Ok(())
}

/// Deletes `contract`'s removals at or after TxId `cut`.
pub fn unwind_contract(txn: &WriteTxn, contract: &Address, cut: u64) -> DbResult<()> {
    for tx in txn.cursor::<OtsCodeRemovals>()?.dups(contract)? {
        if tx.0 >= cut {
            txn.delete::<OtsCodeRemovals>(contract, Some(&tx))?;
        }
    }
    Ok(())
}

/// A contract's lifetimes as the index knows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifetimes {
    /// How many times it was created.
    pub creations: u64,
    /// Its newest creation.
    pub current: Option<Creation>,
    /// The removal that ended the newest lifetime, if one did.
    pub removed: Option<TxId>,
    /// How many times its code was removed.
    pub removals: u64,
}

/// `contract`'s lifetimes.
pub fn of<K: TransactionKind>(txn: &Txn<K>, contract: &Address) -> DbResult<Lifetimes> {
    let creations = txn.cursor::<OtsContractCreators>()?.dups(contract)?;
    let removals = txn.cursor::<OtsCodeRemovals>()?.dups(contract)?;
    let current = creations.last().copied();
    let removed = removals.last().copied().filter(|r| current.is_none_or(|c| r.0 >= c.tx.0));
    Ok(Lifetimes { creations: creations.len() as u64, current, removed, removals: removals.len() as u64 })
}

/// No removal beyond the tip.
pub fn check<K: TransactionKind>(txn: &Txn<K>, tip: Option<u64>) -> DbResult<()> {
    let mut cursor = txn.cursor::<OtsCodeRemovals>()?;
    let mut next = cursor.first()?;
    while let Some((contract, tx)) = next {
        if tip.is_none_or(|t| tx.block() > t) {
            return Err(broken::<OtsCodeRemovals>(
                contract.as_slice(),
                format!("removed in block {}, beyond the tip", tx.block()),
            ));
        }
        next = cursor.next_entry()?;
    }
    Ok(())
}

journalled_family! {
    /// When contracts' code was removed.
    LifetimesFamily, "lifetimes", OtsCodeRemovals, CodeRemoval,
    write_block: |block, undo| write_block(block.txn, block.block, undo),
    unwind: |txn, contract, unwinding| unwind_contract(txn, contract, unwinding.tx_cut()),
    check: |txn, checking| check(txn, checking.tip),
}
