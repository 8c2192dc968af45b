//! The labels family: `OtsLabels`, names classifiers give addresses (`uniswap-v2-pair`, …), one
//! dup per (block, label).

use std::collections::BTreeSet;

use alloy_primitives::Address;
use ots_classifiers::Fact;
use signet_libmdbx::tx::TransactionKind;

use super::stamped;
use crate::db::{
    codec::{IndexKind, Label, MAX_LABEL_BYTES},
    tables::OtsLabels,
    DbResult, Txn, WriteTxn,
};
use crate::index::undo::UndoLog;
use crate::index::{error::WriteError, family::journalled_family};

/// Writes the labels block `block`'s facts give, each (address, label) once.
pub fn write_block(txn: &WriteTxn, block: u64, facts: &[Fact], undo: &mut UndoLog) -> Result<(), WriteError> {
    let mut labels: BTreeSet<(Address, &str)> = BTreeSet::new();
    for fact in facts {
        if let Fact::Labeled { label, address } = fact {
            if label.is_empty() || label.len() > MAX_LABEL_BYTES {
                return Err(WriteError::BadLabel { label: label.clone(), block });
            }
            labels.insert((*address, label));
        }
    }
    for (address, label) in labels {
        txn.put::<OtsLabels>(&address, &Label { block, label: label.to_owned() })?;
        undo.touch(IndexKind::Label, address);
    }
    Ok(())
}

/// Drops the dups of `address` written by blocks above `to`.
pub fn unwind_address(txn: &WriteTxn, address: &Address, to: u64) -> DbResult<()> {
    stamped::unwind_address::<OtsLabels>(txn, address, to)
}

/// Every dup decodes and none was written beyond the tip.
pub fn check<K: TransactionKind>(txn: &Txn<K>, tip: Option<u64>) -> DbResult<()> {
    stamped::check::<OtsLabels, K>(txn, tip)
}

journalled_family! {
    /// The labels classifiers gave addresses.
    LabelsFamily, "labels", OtsLabels, Label,
    write_block: |block, undo| write_block(block.txn, block.block.number, block.facts, undo),
    unwind: |txn, address, unwinding| unwind_address(txn, address, unwinding.to),
    check: |txn, checking| check(txn, checking.tip),
}
