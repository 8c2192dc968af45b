//! The roster: every family of the index, listed once. Both write paths, the journal, the
//! checker and the dumps walk [`each_family`] and nothing else (docs/architecture.md, "Adding a table family or a
//! standard").
//!
//! A new family is its module (with a type implementing [`Family`]) and one line in
//! [`each_family`]; a table of the registry that no family owns and that is not
//! [`INFRASTRUCTURE`] fails this module's test.

use super::{
    address_index::AddressIndexFamily,
    appearances::AppearancesFamily,
    balances::BalancesFamily,
    block_times::BlockTimesFamily,
    contract_info::ContractInfoFamily,
    family::{Family, ForEachFamily},
    holdings::HoldingsFamily,
    labels::LabelsFamily,
    lifetimes::LifetimesFamily,
    matches::MatchesFamily,
    probes::ProbesFamily,
    totals::TotalsFamily,
};
use crate::db::tables::TableId;

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
    each.family::<BlockTimesFamily>()?;
    each.family::<MatchesFamily>()
}

/// Each family's name, tables, and window and young tables, in roster order.
pub fn tables() -> Vec<(&'static str, &'static [TableId], Vec<TableId>)> {
    struct Collect(Vec<(&'static str, &'static [TableId], Vec<TableId>)>);
    impl ForEachFamily for Collect {
        type Error = std::convert::Infallible;
        fn family<F: Family>(&mut self) -> Result<(), Self::Error> {
            self.0.push((F::NAME, F::TABLES, [F::WINDOW_TABLES, F::YOUNG_TABLES].concat()));
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
            owners.extend(tables.iter().chain(&window).map(|t| (*t, name)));
        }
        for table in TableId::ALL {
            let of: Vec<&str> = owners.iter().filter(|(t, _)| t == table).map(|(_, n)| *n).collect();
            assert_eq!(of.len(), 1, "{} is owned by {of:?}: a table belongs to one family", table.name());
        }
        assert_eq!(owners.len(), TableId::ALL.len());
    }
}
