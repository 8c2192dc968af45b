//! Where the reorg window starts once a write commits: the one type every family's window rows
//! are kept, settled and dropped by (docs/architecture.md, "The reorg window").

use crate::txid::TxId;

/// Which blocks stay in the reorg window once a write commits. Blocks from its start on keep
/// their rows apart from the large tables and their undo records in the journal; every older
/// block leaves it, its rows settled into the large tables. `Closed` is a window no block stays
/// in: a bulk stage (all its blocks are older than the window) or a fold of the whole window
/// (`check --hash`, the commit before a stage begins).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowStart {
    /// Blocks from this one on stay in the window.
    At(u64),
    /// No block stays in the window.
    Closed,
}

impl WindowStart {
    /// The window of the newest `blocks` blocks up to `tip` (the tip at least).
    pub const fn newest(blocks: u64, tip: u64) -> Self {
        let blocks = if blocks == 0 { 1 } else { blocks };
        Self::At(tip.saturating_sub(blocks - 1))
    }

    /// Whether block `block` stays in the window.
    pub const fn keeps(self, block: u64) -> bool {
        match self {
            Self::At(from) => block >= from,
            Self::Closed => false,
        }
    }

    /// The first block that stays; every block below it leaves. A closed window's is past every
    /// block: the one place that bound stands for "none stays".
    pub const fn first_kept(self) -> u64 {
        match self {
            Self::At(from) => from,
            Self::Closed => u64::MAX,
        }
    }

    /// The first transaction id that stays, as [`Self::first_kept`] for blocks.
    pub const fn first_kept_tx(self) -> u64 {
        match self {
            Self::At(from) => TxId::first_of_block(from).0,
            Self::Closed => u64::MAX,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_of_n_blocks_keeps_the_newest_n() {
        let start = WindowStart::newest(128, 1_000);
        assert_eq!(start, WindowStart::At(873));
        assert!(start.keeps(873) && start.keeps(1_000) && !start.keeps(872));
        // A window of none still keeps the tip: an unwind to it needs its hash.
        assert_eq!(WindowStart::newest(0, 5), WindowStart::At(5));
        assert_eq!(WindowStart::newest(128, 3), WindowStart::At(0));
    }

    #[test]
    fn a_closed_window_keeps_no_block() {
        assert!(!WindowStart::Closed.keeps(u64::MAX));
        assert!(!WindowStart::Closed.keeps(0));
        assert_eq!(WindowStart::Closed.first_kept_tx(), u64::MAX);
        assert_eq!(WindowStart::At(2).first_kept_tx(), TxId::first_of_block(2).0);
    }
}
