//! `OtsContractInfo`: the metadata classifiers read, merged over the blocks that wrote it.

use alloy_primitives::Address;
use signet_libmdbx::tx::TransactionKind;

use crate::db::{codec::ContractInfo, tables::OtsContractInfo, DbResult, Txn};

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
