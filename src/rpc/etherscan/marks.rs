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
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex, MutexGuard,
    },
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
    /// `txlistinternal` of an address, walked over its appearances (where the internal-transaction
    /// index does not reach).
    Internal(Address),
    /// `txlistinternal` of an address, walked over its internal-transaction index.
    InternalTxs(Address),
    /// A token transfer list: its kind, the party and the token asked for.
    Movements(TokenKind, Option<Address>, Option<Address>),
}

impl Stream {
    /// The list action, as page timings name it (`ots::rpc::timing`).
    pub(super) fn action(self) -> &'static str {
        match self {
            Self::Transactions(_) => "etherscan_txlist",
            Self::Internal(_) | Self::InternalTxs(_) => "etherscan_txlistinternal",
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
    pub emitters: Arc<[(Address, TokenKinds)]>,
    /// Read from the marks file and not yet checked against the index: the database beside it
    /// may have been built anew since (`marks_file`).
    pub loaded: bool,
}

/// One stream's counted groups.
#[derive(Debug, Default)]
struct StreamGroups {
    groups: HashMap<u64, Arc<Group>>,
    /// The groups as [`Spans`], made when a walk first asks after a change.
    spans: Option<Arc<Spans>>,
}

/// A stream's counted groups in runs of consecutive indexes, each with its rows summed, so that
/// a walk finds how many groups it passes with a binary search instead of one group at a time:
/// the index's part of a deep page then costs about what page 1 costs.
#[derive(Debug)]
pub struct Spans {
    /// Ordered by their first index; no two adjoin.
    runs: Vec<Run>,
    /// Whether some group was read back from the marks file and not yet confirmed.
    pub(super) loaded: bool,
    /// Whether some group keeps contracts to check (a token list's); a list without has nothing
    /// that can change under a counted group, so its pages pass them unchecked.
    pub(super) with_emitters: bool,
}

/// Counted groups of consecutive indexes.
#[derive(Debug)]
struct Run {
    start: u64,
    groups: Vec<Arc<Group>>,
    /// `rows_before[i]`: the rows of `groups[..i]`; one longer than `groups`.
    rows_before: Vec<u64>,
    /// Per group, the snapshot (`ReadTxn::snapshot_id`) in which its emitters were last found
    /// of the kinds they had when it was counted.
    checked_in: Vec<AtomicU64>,
}

/// Consecutive counted groups a walk passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Passed {
    pub groups: u64,
    pub rows: u64,
    /// The smallest id of the groups passed.
    pub first: u64,
    /// Their largest id.
    pub last: u64,
}

const NOT_CHECKED: u64 = u64::MAX;

impl Spans {
    fn of(groups: &HashMap<u64, Arc<Group>>) -> Self {
        let mut indexes: Vec<u64> = groups.keys().copied().collect();
        indexes.sort_unstable();
        let mut runs: Vec<Run> = Vec::new();
        for index in indexes {
            let group = groups[&index].clone();
            let run = match runs.last_mut() {
                Some(run) if run.start + run.groups.len() as u64 == index => run,
                _ => {
                    runs.push(Run {
                        start: index,
                        groups: Vec::new(),
                        rows_before: vec![0],
                        checked_in: Vec::new(),
                    });
                    runs.last_mut().expect("a run was just pushed")
                }
            };
            let before = run.rows_before[run.groups.len()];
            run.rows_before.push(before + group.rows);
            run.groups.push(group);
            run.checked_in.push(AtomicU64::new(NOT_CHECKED));
        }
        let loaded = runs.iter().any(|run| run.groups.iter().any(|g| g.loaded));
        let with_emitters = runs.iter().any(|run| run.groups.iter().any(|g| !g.emitters.is_empty()));
        Self { runs, loaded, with_emitters }
    }

    /// Every run of consecutive groups: its first index and its groups.
    pub(super) fn runs(&self) -> impl Iterator<Item = (u64, &[Arc<Group>])> {
        self.runs.iter().map(|run| (run.start, run.groups.as_slice()))
    }

    fn run_holding(&self, index: u64) -> Option<(&Run, usize)> {
        let after = self.runs.partition_point(|run| run.start <= index);
        let run = self.runs.get(after.checked_sub(1)?)?;
        let at = usize::try_from(index - run.start).ok()?;
        (at < run.groups.len()).then_some((run, at))
    }

    /// Group `index`, if counted.
    pub(super) fn group(&self, index: u64) -> Option<&Arc<Group>> {
        self.run_holding(index).map(|(run, at)| &run.groups[at])
    }

    /// Whether group `index`'s emitters were found unchanged in snapshot `snapshot`.
    pub(super) fn checked_in(&self, index: u64, snapshot: u64) -> bool {
        self.run_holding(index).is_some_and(|(run, at)| {
            snapshot != NOT_CHECKED && run.checked_in[at].load(Ordering::Acquire) == snapshot
        })
    }

    /// Takes note that group `index`'s emitters were found unchanged in snapshot `snapshot`.
    pub(super) fn mark_checked(&self, index: u64, snapshot: u64) {
        if let Some((run, at)) = self.run_holding(index) {
            run.checked_in[at].store(snapshot, Ordering::Release);
        }
    }

    /// How many groups from group `index` upwards, consecutive and counted, make at most `rows`
    /// rows with their ids all below `high`.
    pub(super) fn fit_up(&self, index: u64, rows: u64, high: u64) -> u64 {
        let Some((run, from)) = self.run_holding(index) else { return 0 };
        // Rows and ids only grow upwards: `fits` holds up to some count and not past it.
        let fits = |n: usize| {
            run.rows_before[from + n] - run.rows_before[from] <= rows && run.groups[from + n - 1].last < high
        };
        most_that_fit(run.groups.len() - from, fits) as u64
    }

    /// How many groups from group `index` downwards, consecutive and counted, make at most
    /// `rows` rows with their ids all at or above `low`.
    pub(super) fn fit_down(&self, index: u64, rows: u64, low: u64) -> u64 {
        let Some((run, at)) = self.run_holding(index) else { return 0 };
        let to = at + 1;
        let fits = |n: usize| {
            run.rows_before[to] - run.rows_before[to - n] <= rows && run.groups[to - n].first >= low
        };
        most_that_fit(to, fits) as u64
    }

    /// The `count` groups from group `lowest` upwards (all counted, in one run).
    pub(super) fn passed(&self, lowest: u64, count: u64) -> Option<Passed> {
        let (run, from) = self.run_holding(lowest)?;
        let to = from + usize::try_from(count).ok()?;
        if count == 0 || to > run.groups.len() {
            return None;
        }
        Some(Passed {
            groups: count,
            rows: run.rows_before[to] - run.rows_before[from],
            first: run.groups[from].first,
            last: run.groups[to - 1].last,
        })
    }
}

/// The largest `n` in `0..=max` with `fits(n)`, for a `fits` that holds up to some `n` and not
/// past it (`fits(0)` is taken to hold).
fn most_that_fit(max: usize, fits: impl Fn(usize) -> bool) -> usize {
    let (mut low, mut high) = (0, max);
    while low < high {
        let mid = low + (high - low).div_ceil(2);
        if fits(mid) {
            low = mid;
        } else {
            high = mid - 1;
        }
    }
    low
}

#[derive(Debug, Default)]
struct Kept {
    groups: HashMap<Stream, StreamGroups>,
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
        self.lock().groups.get(stream).and_then(|c| c.groups.get(&index)).cloned()
    }

    /// `stream`'s groups as spans, if group `index` is among them.
    pub(super) fn spans_holding(&self, stream: &Stream, index: u64) -> Option<Arc<Spans>> {
        let mut kept = self.lock();
        let counted = kept.groups.get_mut(stream)?;
        if !counted.groups.contains_key(&index) {
            return None;
        }
        Some(counted.spans.get_or_insert_with(|| Arc::new(Spans::of(&counted.groups))).clone())
    }

    /// Keeps what a walk counted of group `index` of `stream` (public for a benchmark over a
    /// recording, which has no node to walk with, to set down what a first walk would count).
    pub fn keep(&self, stream: Stream, index: u64, group: Group) {
        let mut kept = self.lock();
        if kept.count >= BUDGET {
            tracing::debug!(target: "ots::rpc", groups = kept.count, "walk marks start afresh");
            *kept = Kept { changes: kept.changes + 1, ..Kept::default() };
        }
        let counted = kept.groups.entry(stream).or_default();
        if counted.groups.get(&index).is_some_and(|kept| **kept == group) {
            // A page's own group counted again: the spans and their checks stand.
            return;
        }
        counted.spans = None;
        if counted.groups.insert(index, Arc::new(group)).is_none() {
            kept.count += 1;
        }
        kept.changes += 1;
    }

    /// Drops group `index` of `stream` (a contract in it was classified since it was counted).
    pub(super) fn forget(&self, stream: &Stream, index: u64) {
        let mut kept = self.lock();
        let Some(counted) = kept.groups.get_mut(stream) else { return };
        if counted.groups.remove(&index).is_some() {
            counted.spans = None;
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
            .flat_map(|(stream, c)| c.groups.iter().map(|(&index, g)| (*stream, index, g.clone())))
            .collect();
        (groups, kept.changes)
    }

    /// Marks holding `groups` (read from a file), as many as the budget takes.
    pub(super) fn from_groups(groups: impl IntoIterator<Item = (Stream, u64, Group)>) -> Self {
        let mut kept = Kept::default();
        for (stream, index, group) in groups.into_iter().take(BUDGET) {
            if kept.groups.entry(stream).or_default().groups.insert(index, Arc::new(group)).is_none() {
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
        Group { first, last: first + 99, rows: 3, emitters: Arc::new([]), loaded: false }
    }

    /// Groups 2..=5 and 8..=9, group `i` of ids `100·i ..= 100·i + 99` making `i` rows.
    fn spans() -> (WalkMarks, Stream) {
        let marks = WalkMarks::default();
        let stream = Stream::Transactions(Address::repeat_byte(1));
        for i in (2..=5).chain(8..=9) {
            marks.keep(
                stream,
                i,
                Group { first: 100 * i, last: 100 * i + 99, rows: i, emitters: Arc::new([]), loaded: false },
            );
        }
        (marks, stream)
    }

    #[test]
    fn spans_pass_the_groups_that_fit_with_one_search() {
        let (marks, stream) = spans();
        assert!(marks.spans_holding(&stream, 6).is_none(), "group 6 was not counted");
        let spans = marks.spans_holding(&stream, 3).expect("spans");
        assert_eq!(spans.runs().map(|(start, g)| (start, g.len())).collect::<Vec<_>>(), [(2, 4), (8, 2)]);
        // Upwards from 3: groups 3, 4, 5 make 3, 7, 12 rows; the run ends at 5.
        assert_eq!(spans.fit_up(3, 2, u64::MAX), 0);
        assert_eq!(spans.fit_up(3, 7, u64::MAX), 2);
        assert_eq!(spans.fit_up(3, 11, u64::MAX), 2);
        assert_eq!(spans.fit_up(3, 1_000, u64::MAX), 3);
        assert_eq!(spans.fit_up(3, 1_000, 499), 1, "group 4's last id is 499, not below it");
        // Downwards from 5: 5, 9, 12, 14 rows.
        assert_eq!(spans.fit_down(5, 12, 0), 3);
        assert_eq!(spans.fit_down(5, 1_000, 0), 4);
        assert_eq!(spans.fit_down(5, 1_000, 300), 3, "group 2's first id is below 300");
        assert_eq!(spans.fit_down(9, 1_000, 0), 2);
        assert_eq!(spans.fit_down(7, 1_000, 0), 0, "group 7 was not counted");
        assert_eq!(spans.passed(3, 2), Some(Passed { groups: 2, rows: 7, first: 300, last: 499 }));
        assert_eq!(spans.passed(4, 3), None, "past the run's end");
        assert_eq!(spans.passed(4, 0), None);
    }

    #[test]
    fn spans_are_made_anew_after_a_change_and_checks_are_per_snapshot() {
        let (marks, stream) = spans();
        let spans = marks.spans_holding(&stream, 2).expect("spans");
        assert!(
            Arc::ptr_eq(&spans, &marks.spans_holding(&stream, 9).expect("spans")),
            "kept while nothing changes"
        );
        assert!(!spans.checked_in(2, 7));
        spans.mark_checked(2, 7);
        assert!(spans.checked_in(2, 7) && !spans.checked_in(2, 8) && !spans.checked_in(3, 7));
        marks.keep(
            stream,
            6,
            Group { first: 600, last: 699, rows: 6, emitters: Arc::new([]), loaded: false },
        );
        let joined = marks.spans_holding(&stream, 2).expect("spans");
        assert_eq!(joined.runs().map(|(start, g)| (start, g.len())).collect::<Vec<_>>(), [(2, 5), (8, 2)]);
        assert!(!joined.checked_in(2, 7), "made anew, unchecked");
        marks.keep(
            stream,
            7,
            Group { first: 700, last: 799, rows: 7, emitters: Arc::new([]), loaded: false },
        );
        let whole = marks.spans_holding(&stream, 2).expect("spans");
        assert_eq!(whole.fit_up(2, u64::MAX, u64::MAX), 8);
        assert_eq!(whole.passed(2, 8).map(|p| p.rows), Some((2..=9).sum()));
        marks.forget(&stream, 4);
        assert_eq!(marks.spans_holding(&stream, 2).expect("spans").fit_up(2, u64::MAX, u64::MAX), 2);
    }

    #[test]
    fn the_search_finds_the_last_count_that_fits() {
        for max in 0..40 {
            for limit in 0..=max {
                assert_eq!(most_that_fit(max, |n| n <= limit), limit, "{max} {limit}");
            }
        }
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
