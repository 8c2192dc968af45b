//! The transaction id stored in address indexes (docs/format.md, "Transaction ids").

use std::fmt;

/// Bits of a [`TxId`] that hold the transaction index inside its block.
pub const TX_INDEX_BITS: u32 = 20;

/// Largest transaction index a [`TxId`] can hold (about a million transactions per block).
pub const MAX_TX_INDEX: u64 = (1 << TX_INDEX_BITS) - 1;

/// `block_number << 20 | tx_index`: grows with the chain, survives re-indexing unchanged and
/// decodes to `(block, index)` with no lookup table — unlike Erigon's internal `ethTx`,
/// which we cannot reproduce outside Erigon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct TxId(pub u64);

/// A transaction index too large for a [`TxId`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("transaction index {index} in block {block} does not fit in a TxId (max {MAX_TX_INDEX})")]
pub struct TxIdOverflow {
    /// The block.
    pub block: u64,
    /// The offending index.
    pub index: u64,
}

impl TxId {
    /// Packs a block number and a transaction index.
    pub fn new(block: u64, index: u64) -> Result<Self, TxIdOverflow> {
        if index > MAX_TX_INDEX || block > (u64::MAX >> TX_INDEX_BITS) {
            return Err(TxIdOverflow { block, index });
        }
        Ok(Self(block << TX_INDEX_BITS | index))
    }

    /// The block number.
    pub const fn block(self) -> u64 {
        self.0 >> TX_INDEX_BITS
    }

    /// The transaction's index inside its block.
    pub const fn index(self) -> u64 {
        self.0 & MAX_TX_INDEX
    }

    /// The first id of `block`: every id of a transaction in `block` or later is at least this.
    pub const fn first_of_block(block: u64) -> Self {
        Self(block << TX_INDEX_BITS)
    }
}

impl fmt::Display for TxId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.block(), self.index())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_and_unpacks() {
        let id = TxId::new(19_000_000, 313).expect("fits");
        assert_eq!(id.0, (19_000_000 << 20) | 313);
        assert_eq!((id.block(), id.index()), (19_000_000, 313));
        assert!(TxId::new(5, 0).expect("fits") > TxId::new(4, MAX_TX_INDEX).expect("fits"));
        assert_eq!(TxId::first_of_block(7), TxId::new(7, 0).expect("fits"));
    }

    #[test]
    fn refuses_overflow() {
        assert!(TxId::new(1, MAX_TX_INDEX + 1).is_err());
        assert!(TxId::new(u64::MAX, 0).is_err());
    }
}
