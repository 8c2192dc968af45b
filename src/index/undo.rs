//! A batch's undo records while it is written: per block, its hash and the `(kind, address)`
//! rows each family wrote that an unwind must find again (docs/format.md, "OtsUndoJournal").

use alloy_primitives::{Address, B256};

use super::window::WindowStart;
use crate::{
    db::{
        codec::{BlockNumber, IndexKind, UndoRecord},
        tables::OtsUndoJournal,
        DbResult, WriteTxn,
    },
    txid::TxId,
};

/// One block's record while its batch is written: number, hash, the rows it wrote.
type PendingRecord = (u64, B256, Vec<(IndexKind, Address)>);

/// The undo records of a batch's blocks, oldest first.
#[derive(Debug)]
pub struct UndoLog {
    records: Vec<PendingRecord>,
    /// Where the reorg window starts once the batch commits: older blocks' rows are not kept.
    window: WindowStart,
}

impl UndoLog {
    /// The records of a batch after which the reorg window starts at `window`.
    pub const fn keeping(window: WindowStart) -> Self {
        Self { records: Vec::new(), window }
    }

    /// Starts the record of the next block of the batch.
    pub fn begin_block(&mut self, number: u64, hash: B256) {
        self.records.push((number, hash, Vec::new()));
    }

    /// The block begun last wrote `address`'s row of `kind`. Not kept for a block that leaves
    /// the window (most of a catch-up batch: several rows per transaction otherwise).
    pub fn touch(&mut self, kind: IndexKind, address: Address) {
        match self.records.last_mut() {
            Some((number, _, touched)) if self.window.keeps(*number) => touched.push((kind, address)),
            _ => {}
        }
    }

    /// The block of transaction `tx` wrote `address`'s row of `kind` (a row written once per
    /// batch but owed to one block of it).
    pub fn touch_at(&mut self, tx: TxId, kind: IndexKind, address: Address) {
        let Some(&(first, _, _)) = self.records.first() else { return };
        if !self.window.keeps(tx.block()) {
            return;
        }
        let at = usize::try_from(tx.block().saturating_sub(first)).unwrap_or(usize::MAX);
        if let Some((_, _, touched)) = self.records.get_mut(at) {
            touched.push((kind, address));
        }
    }

    /// Writes the records of blocks in the window (older ones leave the reorg window as the
    /// batch commits, so nothing would ever read them).
    pub fn write(self, txn: &WriteTxn) -> DbResult<()> {
        for (number, hash, mut touched) in self.records {
            if !self.window.keeps(number) {
                continue;
            }
            touched.sort_unstable();
            touched.dedup();
            txn.put::<OtsUndoJournal>(&BlockNumber(number), &UndoRecord { hash, touched })?;
        }
        Ok(())
    }
}
