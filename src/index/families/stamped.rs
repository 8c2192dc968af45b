//! Dups stamped with the block that wrote them (`OtsContractInfo`, `OtsLabels`): an unwind drops
//! the ones of unwound blocks, and the checker refuses one from beyond the tip.

use alloy_primitives::Address;
use signet_libmdbx::tx::TransactionKind;

use crate::db::{
    codec::{ContractInfo, Label},
    tables::{DupTable, Table},
    DbResult, Txn, WriteTxn,
};
use crate::index::integrity::broken;

/// A dup that records the block that wrote it.
pub(super) trait Stamped {
    /// That block.
    fn block(&self) -> u64;
}

impl Stamped for ContractInfo {
    fn block(&self) -> u64 {
        self.block
    }
}

impl Stamped for Label {
    fn block(&self) -> u64 {
        self.block
    }
}

/// Drops the dups of `address` in `T` written by blocks above `to`.
pub(super) fn unwind_address<T>(txn: &WriteTxn, address: &Address, to: u64) -> DbResult<()>
where
    T: DupTable + Table<Key = Address>,
    T::Value: Stamped,
{
    for dup in txn.cursor::<T>()?.dups(address)? {
        if dup.block() > to {
            txn.delete::<T>(address, Some(&dup))?;
        }
    }
    Ok(())
}

/// Every dup of `T` decodes and none was written beyond the tip.
pub(super) fn check<T, K>(txn: &Txn<K>, tip: Option<u64>) -> DbResult<()>
where
    T: DupTable + Table<Key = Address>,
    T::Value: Stamped,
    K: TransactionKind,
{
    let mut cursor = txn.cursor::<T>()?;
    let mut next = cursor.first()?;
    while let Some((address, dup)) = next {
        if tip.is_some_and(|t| dup.block() > t) {
            return Err(broken::<T>(
                address.as_slice(),
                format!("written by block {}, beyond the tip", dup.block()),
            ));
        }
        next = cursor.next_entry()?;
    }
    Ok(())
}
