//! How many rows the walked lists (`txlist`, `txlistinternal`, the token lists) make of each
//! group of their transactions, remembered from earlier walks so that a later page skips whole
//! groups instead of asking the node for every transaction before it.
//!
//! A group is [`GROUP`] consecutive positions of a source's id list (group `g` holds positions
//! `g·GROUP .. (g+1)·GROUP`), the same for every sort and block range, so a walk of one page
//! serves the pages of the other sort and of other ranges. Only groups older than the reorg
//! window are kept: the ids the list's table holds, which no unwind takes back, and whose rows
//! the node's blocks, receipts and traces fix for good — except a token list's, which also
//! depends on how each emitting contract is classified now; a group keeps those contracts with
//! their kinds, and a reader that finds one changed walks the group again.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard},
};

use alloy_primitives::Address;

use crate::decode::{TokenKind, TokenKinds};

/// Positions of an id list one group holds: one step of a walk.
pub const GROUP: u64 = 100;

/// Groups kept over all lists (each a few dozen bytes and its emitters) before the marks start
/// afresh: 2^18 groups stand for 26 M transactions walked.
const BUDGET: usize = 1 << 18;

/// Which rows a walk makes of a transaction: one stream per list action and its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stream {
    /// `txlist` of an address.
    Transactions(Address),
    /// `txlistinternal` of an address.
    Internal(Address),
    /// A token transfer list: its kind, the party and the token asked for.
    Movements(TokenKind, Option<Address>, Option<Address>),
}

impl Stream {
    /// The list action, as page timings name it (`ots::rpc::timing`).
    pub(super) fn action(self) -> &'static str {
        match self {
            Self::Transactions(_) => "etherscan_txlist",
            Self::Internal(_) => "etherscan_txlistinternal",
            Self::Movements(TokenKind::Erc20, ..) => "etherscan_tokentx",
            Self::Movements(TokenKind::Erc721, ..) => "etherscan_tokennfttx",
            Self::Movements(TokenKind::Erc1155, ..) => "etherscan_token1155tx",
        }
    }
}

/// What a walk learned of one whole group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// The group's smallest id.
    pub first: u64,
    /// Its largest id.
    pub last: u64,
    /// The rows its transactions make.
    pub rows: u64,
    /// The contracts whose transfer-shaped logs its receipts hold, with the kinds the index gave
    /// them when the rows were counted (token lists only).
    pub emitters: Box<[(Address, TokenKinds)]>,
    /// Read from the marks file and not yet checked against the index: the database beside it
    /// may have been built anew since (`marks_file`).
    pub loaded: bool,
}

#[derive(Debug, Default)]
struct Kept {
    groups: HashMap<Stream, HashMap<u64, Arc<Group>>>,
    count: usize,
    /// Changes made since the marks began, for the marks file to tell whether to save.
    changes: u64,
}

/// The groups walks have counted, shared by every request of a server.
#[derive(Debug, Default)]
pub struct WalkMarks {
    kept: Mutex<Kept>,
}

impl WalkMarks {
    fn lock(&self) -> MutexGuard<'_, Kept> {
        // A panic elsewhere cannot leave a half-written map: every change is one insert or
        // remove, so a poisoned lock's contents are still whole.
        self.kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Group `index` of `stream`, if a walk counted it.
    pub(super) fn get(&self, stream: &Stream, index: u64) -> Option<Arc<Group>> {
        self.lock().groups.get(stream).and_then(|g| g.get(&index)).cloned()
    }

    /// Keeps what a walk counted of group `index` of `stream` (public for a benchmark over a
    /// recording, which has no node to walk with, to set down what a first walk would count).
    pub fn keep(&self, stream: Stream, index: u64, group: Group) {
        let mut kept = self.lock();
        if kept.count >= BUDGET {
            tracing::debug!(target: "ots::rpc", groups = kept.count, "walk marks start afresh");
            *kept = Kept { changes: kept.changes + 1, ..Kept::default() };
        }
        if kept.groups.entry(stream).or_default().insert(index, Arc::new(group)).is_none() {
            kept.count += 1;
        }
        kept.changes += 1;
    }

    /// Drops group `index` of `stream` (a contract in it was classified since it was counted).
    pub(super) fn forget(&self, stream: &Stream, index: u64) {
        let mut kept = self.lock();
        if kept.groups.get_mut(stream).and_then(|g| g.remove(&index)).is_some() {
            kept.count -= 1;
            kept.changes += 1;
        }
    }

    /// Every group kept, and how many changes they are the result of.
    pub(super) fn snapshot(&self) -> (Vec<(Stream, u64, Arc<Group>)>, u64) {
        let kept = self.lock();
        let groups = kept
            .groups
            .iter()
            .flat_map(|(stream, groups)| groups.iter().map(|(&index, g)| (*stream, index, g.clone())))
            .collect();
        (groups, kept.changes)
    }

    /// Marks holding `groups` (read from a file), as many as the budget takes.
    pub(super) fn from_groups(groups: impl IntoIterator<Item = (Stream, u64, Group)>) -> Self {
        let mut kept = Kept::default();
        for (stream, index, group) in groups.into_iter().take(BUDGET) {
            if kept.groups.entry(stream).or_default().insert(index, Arc::new(group)).is_none() {
                kept.count += 1;
            }
        }
        Self { kept: Mutex::new(kept) }
    }

    /// Lists with groups kept, and groups kept.
    pub fn usage(&self) -> (usize, usize) {
        let kept = self.lock();
        (kept.groups.len(), kept.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(first: u64) -> Group {
        Group { first, last: first + 99, rows: 3, emitters: Box::new([]), loaded: false }
    }

    #[test]
    fn groups_are_kept_by_stream_and_index_and_forgotten() {
        let marks = WalkMarks::default();
        let (a, b) =
            (Stream::Transactions(Address::repeat_byte(1)), Stream::Internal(Address::repeat_byte(1)));
        marks.keep(a, 0, group(10));
        marks.keep(a, 0, group(10));
        marks.keep(a, 3, group(400));
        assert_eq!(marks.get(&a, 3).as_deref(), Some(&group(400)));
        assert_eq!(marks.get(&b, 3), None, "another list of the same address");
        assert_eq!(marks.usage(), (1, 2));
        marks.forget(&a, 3);
        assert_eq!(marks.get(&a, 3), None);
        assert_eq!(marks.usage(), (1, 1));
    }
}
