//! The holdings' staged segments (`OtsHoldingsStaged`; docs/format.md, "Staged holdings"): the
//! (holder, token, first transaction) pairs each later bulk stage of a catch-up touched, kept
//! apart from the holdings tables until the catch-up ends.
//!
//! A late stage of the 21 M chain touches about 450 k pairs, of which a few percent are new, all
//! over tables of a few million: added in place, even those few dirty most of the tables' pages,
//! so the hundredth 1 % stage costs several times the first (docs/benchmarks.md, "The stage
//! regime"). A stage looks each pair up in the tables and the segments, which dirties nothing
//! (and runs on a second thread beside the other families' writes), and appends those found
//! nowhere as a segment of its own. Segments are kept in tiers so that
//! a look-up reads few of them: a stage's segment is of tier 0, and [`FANOUT`] segments of one
//! tier merge into one of the next. A pair is in one place only, but reads and merges take the
//! earliest first transaction of any copies all the same. A tier fills only as the one below it
//! merges, so the segments merged are always the newest, and every segment, a stage's or a
//! merge's, is appended at the table's end. Reads take a holder's dups from the main table and
//! every segment; the catch-up's end (or the first write of a batch) folds them all into the
//! main tables in one pass.

use std::{cmp::Reverse, collections::BinaryHeap};

use alloy_primitives::Address;
use signet_libmdbx::tx::TransactionKind;

pub use super::tiers::Segment;
use super::tiers::{full_tier, TierMerge};
use crate::db::{
    codec::{Holding, IndexKind, KeyCodec, StagedHoldingKey},
    tables::OtsHoldingsStaged,
    DbResult, TableCursor, Txn, WriteTxn,
};
use crate::index::integrity::broken;
use crate::txid::TxId;

/// Segments of one tier merged into one of the next. A stage of the 1 % regime holds about a
/// fifth of all pairs; merging eight stages keeps each pair about once per eight stages, and a
/// read looks into at most seven segments a tier.
pub(super) const FANOUT: usize = 8;

impl Segment {
    /// The key of `holder`'s dups of `kind` in the segment.
    pub(super) fn key(self, kind: IndexKind, holder: Address) -> StagedHoldingKey {
        StagedHoldingKey { tier: self.tier, segment: self.segment, kind, holder }
    }

    /// The smallest key of the segment.
    fn start(self) -> StagedHoldingKey {
        self.key(IndexKind::Erc20Transfers, Address::ZERO)
    }

    fn holds(self, key: &StagedHoldingKey) -> bool {
        key.tier == self.tier && key.segment == self.segment
    }
}

/// Every segment, in key order (oldest first).
pub fn segments<K: TransactionKind>(txn: &Txn<K>) -> DbResult<Vec<Segment>> {
    let mut cursor = txn.cursor::<OtsHoldingsStaged>()?;
    let mut found = Vec::new();
    let mut next = cursor.first()?;
    while let Some((key, _)) = next {
        let segment = Segment { tier: key.tier, segment: key.segment };
        found.push(segment);
        // Past the segment's keys: none has a kind byte as large as the last kind's.
        let past =
            StagedHoldingKey { kind: IndexKind::PartyToken, holder: Address::repeat_byte(0xff), ..key };
        next = cursor.seek(&past)?;
    }
    Ok(found)
}

/// Look-ups of a stage's pairs, in key order, in every segment. Each segment is read by a cursor
/// of its own that only moves forward: a few steps to the next pair when it is near, a seek when
/// it is not. A late stage of the 1 % regime looks ~450 k pairs up in up to 15 segments, about a
/// fifth of every pair they hold, so most of its look-ups are steps; a seek per pair and segment
/// from one cursor shared by the segments cost the 1 % run ten more CPU-seconds in all
/// (docs/benchmarks.md, "The holdings' look-ups walk each segment").
pub(super) struct Probe<'t, K: TransactionKind> {
    segments: Vec<SegmentWalk<'t, K>>,
}

/// A pair's place in a segment's order: kind byte, holder, token.
type PairAt = (u8, Address, Address);

/// Steps a segment's cursor takes towards a pair before it seeks instead.
const STEPS_BEFORE_SEEK: usize = 16;

struct SegmentWalk<'t, K: TransactionKind> {
    segment: Segment,
    cursor: TableCursor<'t, K, OtsHoldingsStaged>,
    /// Where the cursor is: `None` before the first look-up; `Some(None)` past the segment.
    at: Option<Option<PairAt>>,
}

impl<K: TransactionKind> SegmentWalk<'_, K> {
    fn place(&self, entry: Option<(StagedHoldingKey, Holding)>) -> Option<PairAt> {
        entry.filter(|(key, _)| self.segment.holds(key)).map(|(key, h)| (key.kind as u8, key.holder, h.token))
    }

    /// Moves to the segment's first pair at `pair` or after it.
    fn seek(&mut self, kind: IndexKind, pair: PairAt) -> DbResult<Option<PairAt>> {
        let key = self.segment.key(kind, pair.1);
        if let Some(holding) = self.cursor.seek_sub_key(&key, &pair.2)? {
            return Ok(Some((pair.0, pair.1, holding.token)));
        }
        // No dup of the holder's at the token or after it: the next holder's first.
        let entry = match self.cursor.seek(&key)? {
            Some((found, _)) if found == key => self.cursor.next_key()?,
            other => other,
        };
        Ok(self.place(entry))
    }

    fn holds(&mut self, kind: IndexKind, pair: PairAt) -> DbResult<bool> {
        let mut steps = 0;
        loop {
            let at = match self.at {
                None => self.seek(kind, pair)?,
                Some(None) => return Ok(false),
                Some(Some(at)) if at >= pair => return Ok(at == pair),
                Some(Some(_)) if steps < STEPS_BEFORE_SEEK => {
                    steps += 1;
                    let next = self.cursor.next_entry()?;
                    self.place(next)
                }
                Some(Some(_)) => self.seek(kind, pair)?,
            };
            self.at = Some(at);
            if at.is_none_or(|at| at >= pair) {
                return Ok(at == Some(pair));
            }
        }
    }
}

impl<'t, K: TransactionKind> Probe<'t, K> {
    /// A look-up in `segments`.
    pub(super) fn open(txn: &'t Txn<K>, segments: &[Segment]) -> DbResult<Self> {
        let segments = segments
            .iter()
            .map(|&segment| Ok(SegmentWalk { segment, cursor: txn.cursor::<OtsHoldingsStaged>()?, at: None }))
            .collect::<DbResult<_>>()?;
        Ok(Self { segments })
    }

    /// Whether a segment holds `holder`'s pair with `token` of `kind`. Pairs must be looked up in
    /// (kind, holder, token) order.
    pub(super) fn holds(&mut self, kind: IndexKind, holder: &Address, token: &Address) -> DbResult<bool> {
        let pair = (kind as u8, *holder, *token);
        for segment in &mut self.segments {
            if segment.holds(kind, pair)? {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// Merges every tier holding [`FANOUT`] segments into one segment of the next tier, lowest tier
/// first. Returns how many pairs the merges wrote.
pub(super) fn merge_full_tiers(txn: &WriteTxn) -> DbResult<u64> {
    let mut written = 0;
    loop {
        let all = segments(txn)?;
        let full = full_tier(&all, FANOUT).map_err(|tier| {
            broken::<OtsHoldingsStaged>(&[tier], "a segment of the last tier to merge".into())
        })?;
        let Some(TierMerge { merged, into }) = full else { return Ok(written) };
        // The merged segments are the newest (the cascade merges the lowest full tier, and
        // every tier below it is empty), so their merge, keyed by the newest, sorts after every
        // key and is appended as it is read (MDBX keeps a write transaction's other cursors in
        // place across a write). Segments merged otherwise (none are) would be put in place.
        let newest_segments = all.len() >= merged.len() && all[all.len() - merged.len()..] == merged[..];
        let mut pairs = Merged::open(txn, &merged, None)?;
        let mut cursor = txn.cursor::<OtsHoldingsStaged>()?;
        while let Some(pair) = pairs.next_pair()? {
            let key = into.key(pair.kind, pair.holder);
            if newest_segments {
                cursor.append(&key, &pair.holding)?;
            } else {
                cursor.put(&key, &pair.holding)?;
            }
            written += 1;
        }
        drop(pairs);
        for segment in merged {
            delete_segment(txn, segment)?;
        }
    }
}

/// Deletes a segment's dups one by one from one cursor: MDBX leaves it after a delete where the
/// next step finds the dup that followed.
fn delete_segment(txn: &WriteTxn, segment: Segment) -> DbResult<()> {
    let mut cursor = txn.cursor::<OtsHoldingsStaged>()?;
    let mut at = cursor.seek(&segment.start())?;
    while at.is_some_and(|(key, _)| segment.holds(&key)) {
        cursor.delete_current()?;
        at = cursor.next_entry()?;
    }
    Ok(())
}

/// One pair of the segments: the holdings table it belongs to, its holder and its holding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct StagedPair {
    pub kind: IndexKind,
    pub holder: Address,
    pub holding: Holding,
}

/// A segment's next pair in the merge: (kind byte, holder, token), its first transaction, and
/// the segment's place in the merge.
type Head = ((u8, Address, Address), TxId, usize);

/// Segments merged: each (kind, holder, token) once, in that order, with the earliest first
/// transaction any of them holds for it.
pub(super) struct Merged<'t, K: TransactionKind> {
    segments: Vec<(Segment, TableCursor<'t, K, OtsHoldingsStaged>)>,
    kind: Option<IndexKind>,
    /// The segments by their next pair.
    order: BinaryHeap<Reverse<Head>>,
}

impl<'t, K: TransactionKind> Merged<'t, K> {
    /// The merge of `segments`, of one kind's pairs or (`None`) every kind's.
    pub(super) fn open(txn: &'t Txn<K>, segments: &[Segment], kind: Option<IndexKind>) -> DbResult<Self> {
        let mut merged = Self { segments: Vec::new(), kind, order: BinaryHeap::new() };
        for &segment in segments {
            let mut cursor = txn.cursor::<OtsHoldingsStaged>()?;
            let start = match kind {
                Some(kind) => segment.key(kind, Address::ZERO),
                None => segment.start(),
            };
            let first = cursor.seek(&start)?;
            merged.segments.push((segment, cursor));
            merged.take(merged.segments.len() - 1, first);
        }
        Ok(merged)
    }

    fn take(&mut self, at: usize, entry: Option<(StagedHoldingKey, Holding)>) {
        let Some((key, holding)) = entry else { return };
        if !self.segments[at].0.holds(&key) || self.kind.is_some_and(|k| k != key.kind) {
            return;
        }
        self.order.push(Reverse(((key.kind as u8, key.holder, holding.token), holding.first, at)));
    }

    fn advance(&mut self, at: usize) -> DbResult<()> {
        let next = self.segments[at].1.next_entry()?;
        self.take(at, next);
        Ok(())
    }

    /// The next pair, with its earliest first transaction.
    pub(super) fn next_pair(&mut self) -> DbResult<Option<StagedPair>> {
        let Some(Reverse(((kind, holder, token), first, at))) = self.order.pop() else { return Ok(None) };
        self.advance(at)?;
        while let Some(&Reverse(((k, h, t), _, at))) = self.order.peek() {
            if (k, h, t) != (kind, holder, token) {
                break;
            }
            self.order.pop();
            self.advance(at)?;
        }
        let kind = IndexKind::from_byte(kind)
            .ok_or_else(|| broken::<OtsHoldingsStaged>(holder.as_slice(), format!("unknown kind {kind}")))?;
        Ok(Some(StagedPair { kind, holder, holding: Holding { token, first } }))
    }

    /// The remaining pairs as (holder, token, first transaction).
    pub(super) fn triples(mut self) -> impl Iterator<Item = DbResult<(Address, Address, TxId)>> + use<'t, K> {
        std::iter::from_fn(move || {
            self.next_pair().transpose().map(|p| p.map(|p| (p.holder, p.holding.token, p.holding.first)))
        })
    }
}

/// `holder`'s dups of `kind` in every segment, each token once with its earliest first
/// transaction, by token.
pub(super) fn held<K: TransactionKind>(
    txn: &Txn<K>,
    kind: IndexKind,
    holder: &Address,
) -> DbResult<Vec<Holding>> {
    let mut cursor = txn.cursor::<OtsHoldingsStaged>()?;
    let mut held = Vec::new();
    for segment in segments(txn)? {
        held.extend(cursor.dups(&segment.key(kind, *holder))?);
    }
    Ok(earliest_by_token(held))
}

/// `holdings` (of one holder) by token, each token once with its earliest first transaction.
pub(super) fn earliest_by_token(mut holdings: Vec<Holding>) -> Vec<Holding> {
    holdings.sort_unstable_by_key(|h| (h.token, h.first));
    holdings.dedup_by_key(|h| h.token);
    holdings
}

/// No segment of a block past the tip (or while no block is indexed), no pair first seen after
/// its segment's block, and one dup per token in a holder's dups of a segment.
pub(super) fn check<K: TransactionKind>(txn: &Txn<K>, tip: Option<u64>) -> DbResult<()> {
    for segment in segments(txn)? {
        if tip.is_none_or(|t| segment.segment > t) {
            return Err(broken::<OtsHoldingsStaged>(
                &segment.start().encode_key(),
                "a segment past the tip".into(),
            ));
        }
        let mut cursor = txn.cursor::<OtsHoldingsStaged>()?;
        let mut next = cursor.seek(&segment.start())?;
        let mut previous: Option<(IndexKind, Address, Address)> = None;
        while let Some((key, holding)) = next.filter(|(key, _)| segment.holds(key)) {
            if previous == Some((key.kind, key.holder, holding.token)) {
                return Err(broken::<OtsHoldingsStaged>(
                    &key.encode_key(),
                    format!("two dups for token {}", holding.token),
                ));
            }
            if holding.first.block() > segment.segment {
                return Err(broken::<OtsHoldingsStaged>(
                    &key.encode_key(),
                    format!("first seen in block {}, after its segment's", holding.first.block()),
                ));
            }
            previous = Some((key.kind, key.holder, holding.token));
            next = cursor.next_entry()?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::db::{AccessMode, Db};

    /// Looked up in key order, whether densely (every pair in a range, most of them held) or
    /// sparsely (far apart, stepping past a segment's end and into another kind's pairs), the
    /// probe finds exactly the pairs some segment holds.
    #[test]
    fn the_probe_finds_exactly_the_pairs_the_segments_hold() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
        let kinds = [IndexKind::Erc20Holdings, IndexKind::Erc721Holdings];
        let address = |i: u64| Address::left_padding_from(&i.to_be_bytes());
        let segments = [
            Segment { tier: 1, segment: 40 },
            Segment { tier: 0, segment: 50 },
            Segment { tier: 0, segment: 60 },
        ];
        let mut held = BTreeSet::new();
        let txn = db.begin_write().expect("write");
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut random = move |below: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % below
        };
        for (n, segment) in segments.iter().enumerate() {
            let mut pairs = BTreeSet::new();
            for _ in 0..[3000, 400, 40][n] {
                pairs.insert((kinds[random(2) as usize] as u8, address(random(300)), address(random(40))));
            }
            for &(kind, holder, token) in &pairs {
                let kind = IndexKind::from_byte(kind).expect("kind");
                let first = TxId::new(segment.segment, 0).expect("id");
                txn.put::<OtsHoldingsStaged>(&segment.key(kind, holder), &Holding { token, first })
                    .expect("put");
            }
            held.extend(pairs);
        }
        txn.commit().expect("commit");
        let txn = db.begin_read().expect("read");
        assert_eq!(super::segments(&txn).expect("segments"), segments);
        for stride in [1, 3, 29, 997] {
            for kind in kinds {
                let mut probe = Probe::open(&txn, &segments).expect("probe");
                let mut found = 0;
                for i in (0..300 * 41).step_by(stride) {
                    let (holder, token) = (address(i / 41), address(i % 41));
                    let want = held.contains(&(kind as u8, holder, token));
                    assert_eq!(probe.holds(kind, &holder, &token).expect("holds"), want, "{i} by {stride}");
                    found += u64::from(want);
                }
                assert!(stride > 1 || found > 1000, "{found}");
            }
        }
    }
}
