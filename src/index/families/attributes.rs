//! `OtsAddrAttributes`: which standards an address implements (docs/format.md,
//! "OtsAddrAttributes"); part of the matches family: a match sets its standard's bit.

use alloy_primitives::Address;
use signet_libmdbx::tx::TransactionKind;

use crate::db::{
    codec::{AttributeBit, Attributes},
    tables::OtsAddrAttributes,
    DbResult, Txn, WriteTxn,
};

/// The attributes of `address` (empty when it has none).
pub fn attributes<K: TransactionKind>(txn: &Txn<K>, address: &Address) -> DbResult<Attributes> {
    Ok(txn.get::<OtsAddrAttributes>(address)?.unwrap_or_default())
}

/// ORs `bit` into `address`'s attributes; returns the new attributes.
pub fn add_attribute(txn: &WriteTxn, address: &Address, bit: AttributeBit) -> DbResult<Attributes> {
    let mut attrs = attributes(txn, address)?;
    if attrs.set(bit) {
        txn.put::<OtsAddrAttributes>(address, &attrs)?;
    }
    Ok(attrs)
}

/// Clears `bit` from `address`'s attributes, deleting the row once no bit is left.
pub fn remove_attribute(txn: &WriteTxn, address: &Address, bit: AttributeBit) -> DbResult<()> {
    let mut attrs = attributes(txn, address)?;
    if !attrs.0.remove(bit as u64) {
        return Ok(());
    }
    if attrs.0.is_empty() {
        txn.delete::<OtsAddrAttributes>(address, None)?;
    } else {
        txn.put::<OtsAddrAttributes>(address, &attrs)?;
    }
    Ok(())
}
