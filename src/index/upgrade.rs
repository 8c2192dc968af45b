//! Upgrading a database of an older format in place (`ots-indexer migrate`): a mainnet index is
//! hours of work, an upgrade seconds.
//!
//! Format 8 → 9 changes only the reorg window's tables: three per-block balance tables and the
//! totals' window table take names that say what they hold (their bytes stay), and the window
//! gains its holder counts and ranking by token, computed from its balances. The large tables
//! are not touched. Everything happens in one write transaction: a crash before its commit
//! leaves the format-8 database as it was (and the next `migrate` starts again), after it the
//! format-9 one whole.

use std::time::Instant;

use tracing::info;

use crate::db::{
    state::{self, FORMAT_VERSION, UPGRADABLE_FORMATS},
    tables::TableId,
    Db, DbError, WriteTxn,
};

use super::balances::rebuild_window_holders;

/// Tables format 9 renamed: (the name format 8 gave it, the table now).
const RENAMED_IN_9: &[(&str, TableId)] = &[
    ("OtsBalanceUndo", TableId::OtsRecentBalancesByBlock),
    ("OtsOwnerUndo", TableId::OtsRecentOwnersByBlock),
    ("OtsERC1155BalanceUndo", TableId::OtsRecentMultiBalancesByBlock),
    ("OtsTotalsUndo", TableId::OtsRecentTotals),
];

/// Why a database was not upgraded.
#[derive(Debug, thiserror::Error)]
pub enum UpgradeError {
    /// Storage failed; nothing was changed.
    #[error(transparent)]
    Db(#[from] DbError),
    /// The state could not be read.
    #[error(transparent)]
    State(#[from] state::StateError),
    /// The database was never written by an indexer.
    #[error("the database has not been initialised: there is nothing to upgrade")]
    NotInitialised,
    /// A format this build cannot upgrade from.
    #[error("the database uses format version {found}; this build upgrades versions {UPGRADABLE_FORMATS:?} to {FORMAT_VERSION}: re-index into a new --datadir (or use a matching ots-indexer release)")]
    Unsupported {
        /// Its format version.
        found: u64,
    },
}

/// What an upgrade did.
#[derive(Debug, Clone, PartialEq)]
pub enum Upgraded {
    /// The database was already of this build's format.
    AlreadyCurrent,
    /// It was upgraded.
    From {
        /// Its format before.
        version: u64,
        /// Entries moved to each renamed table.
        renamed: Vec<(&'static str, TableId, u64)>,
        /// Seconds the upgrade took, commit included.
        seconds: f64,
    },
}

/// Upgrades the database to this build's format, in one transaction. The caller holds it
/// exclusively: no reader may see the tables change format under it.
pub fn upgrade(db: &Db) -> Result<Upgraded, UpgradeError> {
    let started = Instant::now();
    let txn = db.begin_write()?;
    let current = state::read_state(&txn)?;
    let version = match current.format_version {
        None if current.chain.is_none() => return Err(UpgradeError::NotInitialised),
        Some(FORMAT_VERSION) => return Ok(Upgraded::AlreadyCurrent),
        Some(found) if UPGRADABLE_FORMATS.contains(&found) => found,
        other => return Err(UpgradeError::Unsupported { found: other.unwrap_or(0) }),
    };
    let renamed = to_9(&txn)?;
    state::set_format_version(&txn)?;
    txn.commit()?;
    let seconds = started.elapsed().as_secs_f64();
    info!(target: "ots::index", from = version, to = FORMAT_VERSION, seconds, "database upgraded");
    Ok(Upgraded::From { version, renamed, seconds })
}

/// Format 8 → 9.
fn to_9(txn: &WriteTxn) -> Result<Vec<(&'static str, TableId, u64)>, DbError> {
    let mut renamed = Vec::new();
    for &(old, table) in RENAMED_IN_9 {
        renamed.push((old, table, txn.adopt_table(old, table)?));
    }
    rebuild_window_holders(txn)?;
    Ok(renamed)
}
