//! What an integrity check reports, and how it names a broken key.

use crate::db::{tables::Table, DbError};

/// What a passing check saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// Match rows checked, over all match tables.
    pub matches: u64,
    /// Addresses whose index lists were checked.
    pub addresses: u64,
    /// Ids in those lists.
    pub ids: u64,
    /// Addresses with an appearance list.
    pub appearance_addresses: u64,
    /// (address, transaction) appearances in those lists.
    pub appearances: u64,
}

/// The error naming a broken entry of table `T` at `key`.
pub(crate) fn broken<T: Table>(key: &[u8], reason: String) -> DbError {
    DbError::Corrupt { table: T::ID.name(), key: alloy_primitives::hex::encode(key), reason }
}
