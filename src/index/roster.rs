//! The roster: every family of the index, listed once. A family says what tables it owns, how
//! the rows it keeps in the reorg window leave it, how it unwinds and how it is checked; the
//! journal, the checker and the dumps walk [`each_family`] and nothing else (docs/architecture.md,
//! "Families").
//!
//! A new family is its module (with a type implementing [`Family`]) and one line in
//! [`each_family`]; a table of the registry that no family owns and that is not
//! [`INFRASTRUCTURE`] fails this module's test.

use std::collections::BTreeSet;

use alloy_primitives::Address;
use signet_libmdbx::tx::TransactionKind;

use super::{
    address_index::AddressIndexFamily, appearances::AppearancesFamily, balances::BalancesFamily,
    contract_info::ContractInfoFamily, holdings::HoldingsFamily, integrity::CheckReport,
    labels::LabelsFamily, lifetimes::LifetimesFamily, matches::MatchesFamily, probes::ProbesFamily,
    recent::WindowRows, totals::TotalsFamily, window::WindowStart,
};
use crate::{
    db::{codec::IndexKind, tables::TableId, DbResult, Txn, WriteTxn},
    txid::TxId,
};

/// The tables no family owns: the indexer's state, the undo journal, and the reorg window's
/// list rows, which the address-index and appearance families share (`recent.rs`).
pub const INFRASTRUCTURE: &[TableId] = &[
    TableId::OtsIndexerState,
    TableId::OtsUndoJournal,
    TableId::OtsRecentIds,
    TableId::OtsRecentSent,
    TableId::OtsRecentIdsByAddress,
    TableId::OtsRecentSentBySender,
];

/// One family of the index.
pub trait Family {
    /// Its name, for logs.
    const NAME: &'static str;
    /// The tables holding what it indexed, as of the blocks older than the reorg window: what
    /// `check --hash` compares.
    const TABLES: &'static [TableId];
    /// The tables holding its rows of the window's blocks, apart from [`Self::TABLES`] until
    /// those blocks leave the window.
    const WINDOW_TABLES: &'static [TableId] = &[];

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

/// Something done for each family in turn.
pub trait ForEachFamily {
    /// Why it may stop.
    type Error;
    /// Does it for family `F`.
    fn family<F: Family>(&mut self) -> Result<(), Self::Error>;
}

/// The roster. Unwinds run in this order: the families whose window rows are kept by block
/// first, those the journal names rows of next, the matches (whose attribute bits the others'
/// readers look up) last.
pub fn each_family<V: ForEachFamily>(each: &mut V) -> Result<(), V::Error> {
    each.family::<BalancesFamily>()?;
    each.family::<TotalsFamily>()?;
    each.family::<AddressIndexFamily>()?;
    each.family::<HoldingsFamily>()?;
    each.family::<ContractInfoFamily>()?;
    each.family::<LabelsFamily>()?;
    each.family::<ProbesFamily>()?;
    each.family::<AppearancesFamily>()?;
    each.family::<LifetimesFamily>()?;
    each.family::<MatchesFamily>()
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

/// Each family's name, tables and window tables, in roster order.
pub fn tables() -> Vec<(&'static str, &'static [TableId], &'static [TableId])> {
    struct Collect(Vec<(&'static str, &'static [TableId], &'static [TableId])>);
    impl ForEachFamily for Collect {
        type Error = std::convert::Infallible;
        fn family<F: Family>(&mut self) -> Result<(), Self::Error> {
            self.0.push((F::NAME, F::TABLES, F::WINDOW_TABLES));
            Ok(())
        }
    }
    let mut collect = Collect(Vec::new());
    let Ok(()) = each_family(&mut collect);
    collect.0
}

/// The tables whose rows are what the index says of the chain, in registry order: every
/// family's [`Family::TABLES`]. Two indexes of the same chain, their windows folded, hold the
/// same bytes in these.
pub fn state_tables() -> impl Iterator<Item = TableId> {
    let owned: Vec<TableId> =
        tables().into_iter().flat_map(|(_, tables, _)| tables.iter().copied()).collect();
    TableId::ALL.iter().copied().filter(move |t| owned.contains(t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_has_one_owner() {
        let mut owners: Vec<(TableId, &str)> =
            INFRASTRUCTURE.iter().map(|t| (*t, "infrastructure")).collect();
        for (name, tables, window) in tables() {
            owners.extend(tables.iter().chain(window).map(|t| (*t, name)));
        }
        for table in TableId::ALL {
            let of: Vec<&str> = owners.iter().filter(|(t, _)| t == table).map(|(_, n)| *n).collect();
            assert_eq!(of.len(), 1, "{} is owned by {of:?}: a table belongs to one family", table.name());
        }
        assert_eq!(owners.len(), TableId::ALL.len());
    }

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
