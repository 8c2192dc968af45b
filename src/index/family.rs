//! What a family of the index says of itself, once: the tables it owns, what it writes of a
//! block, how the rows it keeps in the reorg window leave it, how it unwinds, how it is checked.
//! The roster (`roster.rs`) lists the families; both write paths, the journal, the checker and
//! the dumps walk that list.

use std::{collections::BTreeSet, marker::PhantomData};

use alloy_primitives::Address;
use signet_libmdbx::tx::TransactionKind;

use super::{
    error::WriteError,
    gather::{BlockRows, Gatherer, Gathering, Writing},
    integrity::CheckReport,
    recent::WindowRows,
    undo::UndoLog,
    window::WindowStart,
};
use crate::{
    db::{codec::IndexKind, tables::TableId, DbResult, Txn, WriteTxn},
    txid::TxId,
};

/// One family of the index.
pub trait Family: Sized + 'static {
    /// Its name, for logs.
    const NAME: &'static str;
    /// The tables holding what it indexed, as of the blocks older than the reorg window: what
    /// `check --hash` compares.
    const TABLES: &'static [TableId];
    /// The tables holding its rows of the window's blocks, apart from [`Self::TABLES`] until
    /// those blocks leave the window.
    const WINDOW_TABLES: &'static [TableId] = &[];
    /// The tables holding the newest part of [`Self::TABLES`] while a catch-up runs, apart
    /// until they are folded in (`address_index::levels`): not what `check --hash` compares.
    const YOUNG_TABLES: &'static [TableId] = &[];

    /// Its part of a write. By default it writes as each block comes, through
    /// [`Self::write_block`]; a family keyed by address gathers its rows instead and writes
    /// each key once at the write's end; `None` leaves it out of the write.
    fn gatherer(gathering: &Gathering) -> Option<Box<dyn Gatherer>> {
        let _ = gathering;
        Some(Box::new(AsBlocksCome::<Self>(PhantomData)))
    }

    /// Writes what `block` gives it, as the block comes (with the default [`Self::gatherer`]).
    fn write_block(block: &BlockRows<'_, '_>, undo: &mut UndoLog) -> Result<(), WriteError> {
        let _ = (block, undo);
        Ok(())
    }

    /// Settles what the blocks leaving the window (as it starts at `window`) kept apart into
    /// its tables. `leaving` holds what those blocks added to the window's shared list rows;
    /// a family takes out its own.
    fn fold(txn: &WriteTxn, window: WindowStart, leaving: &mut WindowRows) -> DbResult<()> {
        let _ = (txn, window, leaving);
        Ok(())
    }

    /// Drops its per-block window rows of the blocks that left the window (after [`Self::fold`]
    /// or a write settled them).
    fn prune(txn: &WriteTxn, window: WindowStart) -> DbResult<()> {
        let _ = (txn, window);
        Ok(())
    }

    /// Undoes what the blocks above `unwinding.to` wrote.
    fn unwind(txn: &WriteTxn, unwinding: &Unwinding) -> DbResult<()>;

    /// Checks its invariants (docs/format.md); the error names the first broken table and key.
    fn check<K: TransactionKind>(txn: &Txn<K>, checking: &mut Checking) -> DbResult<()>;
}

/// The part of a write of a family that writes as blocks come: nothing waits for the write's
/// end.
struct AsBlocksCome<F>(PhantomData<fn() -> F>);

impl<F> std::fmt::Debug for AsBlocksCome<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(std::any::type_name::<F>())
    }
}

impl<F: Family> Gatherer for AsBlocksCome<F> {
    fn collect(&mut self, block: &BlockRows<'_, '_>, undo: &mut UndoLog) -> Result<(), WriteError> {
        F::write_block(block, undo)
    }

    fn write(self: Box<Self>, _: &mut Writing<'_>) -> Result<(), WriteError> {
        Ok(())
    }
}

/// Something done for each family in turn.
pub trait ForEachFamily {
    /// Why it may stop.
    type Error;
    /// Does it for family `F`.
    fn family<F: Family>(&mut self) -> Result<(), Self::Error>;
}

/// What an unwind undoes: the blocks above `to` up to `tip`, and the rows the journal says they
/// wrote.
#[derive(Debug)]
pub struct Unwinding {
    /// The block the index goes back to.
    pub to: u64,
    /// The tip it goes back from.
    pub tip: u64,
    /// The `(kind, address)` rows the unwound blocks wrote, from their journal records.
    pub touched: BTreeSet<(IndexKind, Address)>,
}

impl Unwinding {
    /// The first TxId of the unwound blocks: every id at or above it goes.
    pub fn tx_cut(&self) -> u64 {
        TxId::first_of_block(self.to + 1).0
    }

    /// The addresses whose row of `kind` the unwound blocks wrote.
    pub fn touched(&self, kind: IndexKind) -> impl Iterator<Item = &Address> {
        self.touched.range((kind, Address::ZERO)..=(kind, Address::repeat_byte(0xff))).map(|(_, a)| a)
    }
}

/// What a check knows as it goes from family to family.
#[derive(Debug, Default)]
pub struct Checking {
    /// The indexed tip, if a writer ever bound the database.
    pub tip: Option<u64>,
    /// Every row of the window's shared list tables.
    pub window: WindowRows,
    /// What the check saw.
    pub report: CheckReport,
}

impl Checking {
    /// The first TxId past the tip (every id when nothing is indexed): no id of a list reaches
    /// it.
    pub fn first_past_tip(&self) -> u64 {
        self.tip.map_or(u64::MAX, |t| TxId::first_of_block(t + 1).0)
    }
}

/// Declares a family of one table, written as blocks come, whose rows the undo journal names by
/// a row kind and which unwinds address by address: `write_block` writes a block's rows,
/// `unwind` runs for each address the unwound blocks wrote a row of that kind for, `check`
/// checks the table.
macro_rules! journalled_family {
    (
        $(#[$doc:meta])*
        $family:ident, $name:literal, $table:ident, $kind:ident,
        write_block: |$block:ident, $undo:ident| $write_block:expr,
        unwind: |$txn:ident, $address:ident, $unwinding:ident| $unwind:expr,
        check: |$ctxn:ident, $checking:ident| $check:expr $(,)?
    ) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $family;

        impl $crate::index::family::Family for $family {
            const NAME: &'static str = $name;
            const TABLES: &'static [$crate::db::tables::TableId] = &[$crate::db::tables::TableId::$table];

            fn write_block(
                $block: &$crate::index::gather::BlockRows<'_, '_>,
                $undo: &mut $crate::index::undo::UndoLog,
            ) -> Result<(), $crate::index::error::WriteError> {
                $write_block
            }

            fn unwind(
                $txn: &$crate::db::WriteTxn,
                $unwinding: &$crate::index::family::Unwinding,
            ) -> $crate::db::DbResult<()> {
                for $address in $unwinding.touched($crate::db::codec::IndexKind::$kind) {
                    $unwind?;
                }
                Ok(())
            }

            fn check<K: signet_libmdbx::tx::TransactionKind>(
                $ctxn: &$crate::db::Txn<K>,
                $checking: &mut $crate::index::family::Checking,
            ) -> $crate::db::DbResult<()> {
                $check
            }
        }
    };
}
pub(crate) use journalled_family;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_touched_rows_of_a_kind_are_its_own() {
        let (a, b) = (Address::repeat_byte(1), Address::repeat_byte(0xff));
        let unwinding = Unwinding {
            to: 4,
            tip: 9,
            touched: [(IndexKind::Label, a), (IndexKind::Label, b), (IndexKind::ContractInfo, a)]
                .into_iter()
                .collect(),
        };
        assert_eq!(unwinding.touched(IndexKind::Label).collect::<Vec<_>>(), [&a, &b]);
        assert_eq!(unwinding.touched(IndexKind::TransferProbe).count(), 0);
        assert_eq!(unwinding.tx_cut(), TxId::first_of_block(5).0);
    }
}
