//! The probes family: `OtsTransferProbes`, Transfer emitters re-probed in vain at the block they
//! were first seen in, so that they are not probed again (docs/format.md).

use alloy_primitives::Address;
use signet_libmdbx::tx::TransactionKind;

use super::attributes::attributes;
use crate::db::{
    codec::{AttributeBit, BlockNumber, IndexKind},
    tables::OtsTransferProbes,
    DbResult, Txn, WriteTxn,
};
use crate::index::family::journalled_family;
use crate::index::{integrity::broken, undo::UndoLog};

/// Records that `misses` were re-probed at `block` and are still no token.
pub fn write_block(txn: &WriteTxn, block: u64, misses: &[Address], undo: &mut UndoLog) -> DbResult<()> {
    for address in misses {
        txn.put::<OtsTransferProbes>(address, &BlockNumber(block))?;
        undo.touch(IndexKind::TransferProbe, *address);
    }
    Ok(())
}

/// Forgets `address`'s probe if a block above `to` made it.
pub fn unwind_address(txn: &WriteTxn, address: &Address, to: u64) -> DbResult<()> {
    if txn.get::<OtsTransferProbes>(address)?.is_some_and(|BlockNumber(b)| b > to) {
        txn.delete::<OtsTransferProbes>(address, None)?;
    }
    Ok(())
}

/// No probe beyond the tip, and none recorded for an address that is a token.
pub fn check<K: TransactionKind>(txn: &Txn<K>, tip: Option<u64>) -> DbResult<()> {
    let mut cursor = txn.cursor::<OtsTransferProbes>()?;
    let mut next = cursor.first()?;
    while let Some((address, BlockNumber(block))) = next {
        if tip.is_some_and(|t| block > t) {
            return Err(broken::<OtsTransferProbes>(
                address.as_slice(),
                format!("probed in block {block}, beyond the tip"),
            ));
        }
        let attrs = attributes(txn, &address)?;
        if attrs.has(AttributeBit::Erc20) || attrs.has(AttributeBit::Erc721) {
            return Err(broken::<OtsTransferProbes>(
                address.as_slice(),
                "a failed re-probe recorded for a token".into(),
            ));
        }
        next = cursor.next_entry()?;
    }
    Ok(())
}

journalled_family! {
    /// Transfer emitters re-probed in vain.
    ProbesFamily, "transfer probes", OtsTransferProbes, TransferProbe,
    write_block: |block, undo| Ok(write_block(block.txn, block.block.number, block.probe_misses, undo)?),
    unwind: |txn, address, unwinding| unwind_address(txn, address, unwinding.to),
    check: |txn, checking| check(txn, checking.tip),
}
