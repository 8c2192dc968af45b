//! The addresses a family already collected for the transaction being collected, so that a
//! repeat is left out as it comes rather than sorted, spilled and merged only for the merge to
//! drop it (docs/benchmarks-history.md, "Rows once per transaction").

use alloy_primitives::Address;

use crate::txid::TxId;

/// The current transaction's addresses, the first [`SeenInTx::MOST`] of them.
#[derive(Debug, Default)]
pub(super) struct SeenInTx {
    tx: Option<TxId>,
    addresses: Vec<Address>,
}

impl SeenInTx {
    /// A transaction's first addresses remembered, at most: a scan past that costs more than
    /// the rare repeat it saves (the merge drops those anyway).
    const MOST: usize = 32;

    /// Whether `address` is not yet collected for `tx`; remembers it. Rows must come
    /// transaction by transaction to be caught: one of an earlier transaction is new again.
    pub(super) fn first_time(&mut self, address: Address, tx: TxId) -> bool {
        if self.tx != Some(tx) {
            self.tx = Some(tx);
            self.addresses.clear();
        }
        if self.addresses.contains(&address) {
            return false;
        }
        if self.addresses.len() < Self::MOST {
            self.addresses.push(address);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeat_within_a_transaction_is_caught_and_a_new_transaction_starts_afresh() {
        let mut seen = SeenInTx::default();
        let (a, b) = (Address::repeat_byte(1), Address::repeat_byte(2));
        let (t1, t2) = (TxId(10), TxId(11));
        assert!(seen.first_time(a, t1));
        assert!(seen.first_time(b, t1));
        assert!(!seen.first_time(a, t1));
        assert!(seen.first_time(a, t2), "the same address in the next transaction is a new row");
        assert!(!seen.first_time(a, t2));
        assert!(seen.first_time(b, t2));
        // Past the ones remembered, every address counts as new: never a row lost.
        let mut many = SeenInTx::default();
        for i in 0..40_u8 {
            assert!(many.first_time(Address::with_last_byte(i), t1));
        }
        assert!(!many.first_time(Address::with_last_byte(0), t1));
        assert!(many.first_time(Address::with_last_byte(39), t1), "not remembered: pushed again");
    }
}
