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

/// Whether one of `segments` holds `holder`'s pair with `token` of `kind`.
pub(super) fn holds<K: TransactionKind>(
    cursor: &mut TableCursor<'_, K, OtsHoldingsStaged>,
    segments: &[Segment],
    kind: IndexKind,
    holder: &Address,
    token: &Address,
) -> DbResult<bool> {
    for segment in segments {
        if cursor.seek_sub_key_exact(&segment.key(kind, *holder), token)?.is_some() {
            return Ok(true);
        }
    }
    Ok(false)
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
