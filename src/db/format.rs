//! Which on-disk format this build writes, and which older ones it upgrades in place.

/// Version of the on-disk format this build writes and reads. Bump it when a table's bytes
/// change; an older database is then refused instead of misread, or upgraded in place by
/// `ots-indexer migrate` where it is one of [`UPGRADABLE_FORMATS`].
pub const FORMAT_VERSION: u64 = 24;

/// Older formats `ots-indexer migrate` upgrades to [`FORMAT_VERSION`] in place
/// (`index::upgrade`).
pub const UPGRADABLE_FORMATS: &[u64] = &[8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23];

/// The state entry that holds the format version (`db::state`).
pub(super) const FORMAT_VERSION_KEY: &str = "format_version";

/// What to do with a database of format `found`.
pub(super) fn format_advice(found: u64) -> &'static str {
    if found >= 10 && UPGRADABLE_FORMATS.contains(&found) {
        "stop every process using it and run `ots-indexer migrate --datadir <the same datadir>` to upgrade it in place (no re-index, seconds)"
    } else if UPGRADABLE_FORMATS.contains(&found) {
        "stop every process using it and run `ots-indexer migrate --datadir <the same datadir> --rpc-url <its node>` to upgrade it in place (no re-index; the node gives the indexed blocks' times)"
    } else {
        "re-index into a new --datadir (or use a matching ots-indexer release)"
    }
}
