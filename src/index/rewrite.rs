//! When a batch rewrites a table whole instead of changing it in place.
//!
//! A batch that changes a large share of a table's entries dirties nearly every page of it
//! either way. Rewritten whole — emptied in the batch's transaction and appended to again in key
//! order from a snapshot of the state the transaction started from — the table costs a
//! sequential copy per entry instead of a seek and an update per changed one, and its pages come
//! out full (MDBX splits a page it appends to at its end, not in its middle).

/// A table is rewritten whole once a batch changes more than one in this many of its entries.
/// Measured on the benchmark chain (docs/benchmarks-history.md): an entry copied in key order costs
/// ~0.2 µs, a seek and update in place ~3 µs; at 1 in 4 the one-block-per-transaction run gained
/// nothing over 1 in 16, and always rewriting halved it.
const REWRITE_SHARE: u64 = 16;

/// Whether a batch that changes `changed` entries of a table holding `entries` should rewrite it
/// whole (always for an empty table: rewriting it is appending).
pub(super) fn rewrite_pays(entries: u64, changed: u64) -> bool {
    changed.saturating_mul(REWRITE_SHARE) >= entries
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_shares_rewrite_small_ones_update_in_place() {
        assert!(rewrite_pays(0, 0));
        assert!(rewrite_pays(1_600, 100));
        assert!(!rewrite_pays(1_601, 100));
        assert!(rewrite_pays(10, 10));
        assert!(!rewrite_pays(u64::MAX, 1));
    }
}
