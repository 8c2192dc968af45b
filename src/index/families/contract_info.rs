//! The contract-info family: `OtsContractInfo`, the metadata classifiers read (name, symbol,
//! decimals, asset, implementation), one dup per block that wrote it, merged when read.

use std::collections::BTreeMap;

use alloy_primitives::Address;
use ots_classifiers::{Fact, Metadata};
use signet_libmdbx::tx::TransactionKind;

use super::stamped;
use crate::db::{
    codec::{ContractInfo, IndexKind},
    tables::OtsContractInfo,
    DbResult, Txn, WriteTxn,
};
use crate::index::family::journalled_family;
use crate::index::undo::UndoLog;

/// What is known of `address`: its dups merged oldest first, so newer fields win. `None` when
/// no classifier described it.
pub fn contract_info<K: TransactionKind>(txn: &Txn<K>, address: &Address) -> DbResult<Option<ContractInfo>> {
    let dups = txn.cursor::<OtsContractInfo>()?.dups(address)?;
    Ok(dups.into_iter().reduce(|mut merged, newer| {
        merged.block = newer.block;
        merged.name = newer.name.or(merged.name);
        merged.symbol = newer.symbol.or(merged.symbol);
        merged.decimals = newer.decimals.or(merged.decimals);
        merged.asset = newer.asset.or(merged.asset);
        merged.implementation = newer.implementation.or(merged.implementation);
        merged
    }))
}

/// Writes what block `block`'s facts describe, one dup per address (a block's descriptions of
/// one address merged).
pub fn write_block(txn: &WriteTxn, block: u64, facts: &[Fact], undo: &mut UndoLog) -> DbResult<()> {
    let mut described: BTreeMap<Address, Metadata> = BTreeMap::new();
    for fact in facts {
        if let Fact::Described { address, metadata } = fact {
            described.entry(*address).or_default().merge(metadata.clone());
        }
    }
    for (address, metadata) in described {
        let Metadata { name, symbol, decimals, asset, implementation } = metadata;
        txn.put::<OtsContractInfo>(
            &address,
            &ContractInfo { block, name, symbol, decimals, asset, implementation },
        )?;
        undo.touch(IndexKind::ContractInfo, address);
    }
    Ok(())
}

/// Drops the dups of `address` written by blocks above `to`.
pub fn unwind_address(txn: &WriteTxn, address: &Address, to: u64) -> DbResult<()> {
    stamped::unwind_address::<OtsContractInfo>(txn, address, to)
}

/// Every dup decodes and none was written beyond the tip.
pub fn check<K: TransactionKind>(txn: &Txn<K>, tip: Option<u64>) -> DbResult<()> {
    stamped::check::<OtsContractInfo, K>(txn, tip)
}

journalled_family! {
    /// What classifiers said of a contract: its metadata, by the block that said it.
    ContractInfoFamily, "contract info", OtsContractInfo, ContractInfo,
    write_block: |block, undo| Ok(write_block(block.txn, block.block.number, block.facts, undo)?),
    unwind: |txn, address, unwinding| unwind_address(txn, address, unwinding.to),
    check: |txn, checking| check(txn, checking.tip),
}
