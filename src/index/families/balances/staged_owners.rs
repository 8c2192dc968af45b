//! The ERC721 owners' staged segments (`OtsOwnersStaged`; docs/format.md, "Staged owners"): the
//! owners each later bulk stage of a catch-up set, kept apart from `OtsERC721Owners` until the
//! catch-up ends.
//!
//! An id's owner is the receiver of its last transfer: a stage knows every owner it sets without
//! reading one. Put in place, a late stage's few tens of thousands of owners fell on most pages
//! of a table of millions, so the table's write and the commit of its pages grew with every
//! stage (docs/benchmarks.md, "The stage regime"). A stage appends its owners instead, as a
//! segment of its own; [`FANOUT`] segments of a tier merge into one of the next, keeping each
//! id's newest owner, so a read looks into few of them. A tier fills only as the one below it
//! merges: the segments merged are always the newest, every segment is appended at the table's
//! end, and the table's key order is the segments' age. A burnt id keeps the zero address, which
//! hides an older owner until the fold deletes both.

use std::{cmp::Reverse, collections::BinaryHeap};

use alloy_primitives::{Address, U256};
use signet_libmdbx::tx::TransactionKind;

use crate::db::{
    codec::{KeyCodec, StagedOwnerKey, TokenIdKey},
    tables::{OtsERC721Owners, OtsOwnersStaged},
    DbResult, ReadTxn, TableCursor, Txn, WriteTxn,
};
use crate::index::families::tiers::{full_tier, Segment, TierMerge};
use crate::index::integrity::broken;
use crate::index::rewrite::{Rewrite, SUMMARY_REWRITE_SHARE};

/// Segments of one tier merged into one of the next: a read looks into at most fifteen segments
/// a tier. A stage's owners are nearly all ids no other stage of the merge moved, so a merge
/// copies about all it reads: at eight, the 1 % run's tier merges (3.5 M owners copied into tier
/// 1, 1.9 M again into tier 2, 5.5 s) cost most of what the segments saved the stages' writes;
/// at sixteen a run of up to 256 stages copies each owner once.
const FANOUT: usize = 16;

fn key(segment: Segment, id: TokenIdKey) -> StagedOwnerKey {
    StagedOwnerKey { segment: segment.segment, tier: segment.tier, id }
}

/// The smallest key of `segment`.
fn start(segment: Segment) -> StagedOwnerKey {
    key(segment, TokenIdKey { token: Address::ZERO, id: U256::ZERO })
}

fn holds(segment: Segment, key: &StagedOwnerKey) -> bool {
    key.segment == segment.segment && key.tier == segment.tier
}

/// The smallest key past every key of `segment` (`None` past the last possible segment).
fn past(segment: Segment) -> Option<StagedOwnerKey> {
    let next = match segment.tier.checked_add(1) {
        Some(tier) => Segment { tier, ..segment },
        None => Segment { tier: 0, segment: segment.segment.checked_add(1)? },
    };
    Some(start(next))
}

/// Every segment, oldest first.
pub(crate) fn segments<K: TransactionKind>(txn: &Txn<K>) -> DbResult<Vec<Segment>> {
    let mut cursor = txn.cursor::<OtsOwnersStaged>()?;
    let mut found = Vec::new();
    let mut next = cursor.first()?;
    while let Some((key, _)) = next {
        let segment = Segment { tier: key.tier, segment: key.segment };
        found.push(segment);
        next = match past(segment) {
            Some(past) => cursor.seek(&past)?,
            None => None,
        };
    }
    Ok(found)
}

/// Whether a catch-up's stages have left segments (one read).
pub(crate) fn any<K: TransactionKind>(txn: &Txn<K>) -> DbResult<bool> {
    Ok(txn.cursor::<OtsOwnersStaged>()?.first()?.is_some())
}

/// Whether a stage reading `txn` (the state it starts from) stages its owners: unless it is a
/// catch-up's first, whose owners fill an empty table in key order.
pub(crate) fn stages<K: TransactionKind>(txn: &Txn<K>) -> DbResult<bool> {
    Ok(txn.entries::<OtsERC721Owners>()? > 0 || any(txn)?)
}

/// Looks ids up in the segments, newest first.
pub(crate) struct Lookup<'t, K: TransactionKind> {
    cursor: TableCursor<'t, K, OtsOwnersStaged>,
    newest_first: Vec<Segment>,
}

impl<'t, K: TransactionKind> Lookup<'t, K> {
    /// A look-up in the segments `txn` holds.
    pub(crate) fn open(txn: &'t Txn<K>) -> DbResult<Self> {
        let mut newest_first = segments(txn)?;
        newest_first.reverse();
        Ok(Self { cursor: txn.cursor::<OtsOwnersStaged>()?, newest_first })
    }

    /// Whether there are no segments.
    pub(crate) fn is_empty(&self) -> bool {
        self.newest_first.is_empty()
    }

    /// The owner the newest segment holding `id` gives it (the zero address: burnt), or `None`
    /// where no segment holds it.
    pub(crate) fn owner(&mut self, id: &TokenIdKey) -> DbResult<Option<Address>> {
        for &segment in &self.newest_first {
            if let Some(owner) = self.cursor.seek_exact(&key(segment, *id))? {
                return Ok(Some(owner));
            }
        }
        Ok(None)
    }
}

/// Appends the owners a stage set (each id's owner at the stage's end; the zero address for a
/// burnt id) as the tier-0 segment of its newest block, then merges the tiers it fills.
pub(crate) struct Appending<'t> {
    txn: &'t WriteTxn,
    cursor: TableCursor<'t, signet_libmdbx::tx::Rw, OtsOwnersStaged>,
    segment: Segment,
    last: Option<TokenIdKey>,
}

impl<'t> Appending<'t> {
    /// The segment of the stage whose newest block is `newest`.
    pub(crate) fn begin(txn: &'t WriteTxn, newest: u64) -> DbResult<Self> {
        Ok(Self {
            txn,
            cursor: txn.cursor::<OtsOwnersStaged>()?,
            segment: Segment { tier: 0, segment: newest },
            last: None,
        })
    }

    /// Sets `id`'s owner in the segment. Ids come in key order within a book; a token cut
    /// between books starts over in the next, whose owners are later ones and replace them.
    pub(crate) fn set(&mut self, id: TokenIdKey, owner: Address) -> DbResult<()> {
        let at = key(self.segment, id);
        if self.last.is_none_or(|last| last < id) {
            self.cursor.append(&at, &owner)?;
            self.last = Some(id);
        } else {
            self.cursor.put(&at, &owner)?;
        }
        Ok(())
    }

    /// Merges the tiers the segment fills. Returns how many owners the merges wrote.
    pub(crate) fn finish(self) -> DbResult<u64> {
        drop(self.cursor);
        if self.last.is_none() {
            return Ok(0);
        }
        merge_full_tiers(self.txn)
    }
}

/// Merges every tier holding [`FANOUT`] segments into one segment of the next tier, lowest tier
/// first, each id's newest owner kept. Returns how many owners the merges wrote.
fn merge_full_tiers(txn: &WriteTxn) -> DbResult<u64> {
    let mut written = 0;
    loop {
        let full = full_tier(&segments(txn)?, FANOUT).map_err(|tier| {
            broken::<OtsOwnersStaged>(&[tier], "a segment of the last tier to merge".into())
        })?;
        let Some(TierMerge { merged, into }) = full else { return Ok(written) };
        // The cascade merges the lowest full tier, every tier below it empty: the merged
        // segments are the newest, and their merge, keyed by the newest, sorts after every key.
        let mut owners = Merged::open(txn, &merged, None)?;
        let mut cursor = txn.cursor::<OtsOwnersStaged>()?;
        while let Some((id, owner)) = owners.next_owner()? {
            cursor.append(&key(into, id), &owner)?;
            written += 1;
        }
        drop(owners);
        for segment in merged {
            delete_segment(txn, segment)?;
        }
    }
}

/// Deletes a segment's entries from one cursor: MDBX leaves it, after a delete, where the next
/// step finds the entry that followed.
fn delete_segment(txn: &WriteTxn, segment: Segment) -> DbResult<()> {
    let mut cursor = txn.cursor::<OtsOwnersStaged>()?;
    let mut at = cursor.seek(&start(segment))?;
    while at.is_some_and(|(key, _)| holds(segment, &key)) {
        cursor.delete_current()?;
        at = cursor.next_entry()?;
    }
    Ok(())
}

/// A segment's next owner in the merge: its id, the segment's age (newest first), its owner.
type Head = (TokenIdKey, Reverse<usize>, Address);

/// Segments merged: each id once, in key order, with its newest owner.
pub(crate) struct Merged<'t, K: TransactionKind> {
    /// Oldest first: a segment's place is its age.
    segments: Vec<(Segment, TableCursor<'t, K, OtsOwnersStaged>)>,
    token: Option<Address>,
    order: BinaryHeap<Reverse<Head>>,
}

impl<'t, K: TransactionKind> Merged<'t, K> {
    /// The merge of `segments` (oldest first), of one token's ids or (`None`) every token's.
    pub(crate) fn open(txn: &'t Txn<K>, segments: &[Segment], token: Option<Address>) -> DbResult<Self> {
        let mut merged = Self { segments: Vec::new(), token, order: BinaryHeap::new() };
        for &segment in segments {
            let mut cursor = txn.cursor::<OtsOwnersStaged>()?;
            let from = TokenIdKey { token: token.unwrap_or(Address::ZERO), id: U256::ZERO };
            let first = cursor.seek(&key(segment, from))?;
            merged.segments.push((segment, cursor));
            merged.take(merged.segments.len() - 1, first);
        }
        Ok(merged)
    }

    fn take(&mut self, at: usize, entry: Option<(StagedOwnerKey, Address)>) {
        let Some((key, owner)) = entry else { return };
        if !holds(self.segments[at].0, &key) || self.token.is_some_and(|t| t != key.id.token) {
            return;
        }
        self.order.push(Reverse((key.id, Reverse(at), owner)));
    }

    fn advance(&mut self, at: usize) -> DbResult<()> {
        let next = self.segments[at].1.next_entry()?;
        self.take(at, next);
        Ok(())
    }

    /// The next id with its newest owner (the zero address: burnt).
    pub(crate) fn next_owner(&mut self) -> DbResult<Option<(TokenIdKey, Address)>> {
        // The newest segment's entry of an id pops first (the heap's order puts the larger age
        // first among equal ids).
        let Some(Reverse((id, Reverse(at), owner))) = self.order.pop() else { return Ok(None) };
        self.advance(at)?;
        while let Some(&Reverse((next, Reverse(older), _))) = self.order.peek() {
            if next != id {
                break;
            }
            self.order.pop();
            self.advance(older)?;
        }
        Ok(Some((id, owner)))
    }
}

/// Folds every segment into `OtsERC721Owners` (each id's newest owner put, a burnt one deleted)
/// and empties `OtsOwnersStaged`. Returns how many owners the segments held (0, doing nothing,
/// when there are none). With `before` (a snapshot of the state `txn` started from, which must
/// not have written `OtsERC721Owners` yet), a table the segments' owners are half its entries or
/// more is rewritten whole: a catch-up's end leaves it packed, with no repack after.
pub(crate) fn fold(txn: &WriteTxn, before: Option<&ReadTxn>) -> DbResult<u64> {
    let staged = txn.entries::<OtsOwnersStaged>()?;
    if staged == 0 {
        return Ok(0);
    }
    let all = segments(txn)?;
    let mut owners = Merged::open(txn, &all, None)?;
    let rewrite = match before {
        Some(before) => {
            Rewrite::<_, OtsERC721Owners>::begin_if_pays(txn, before, staged, SUMMARY_REWRITE_SHARE)?
        }
        None => None,
    };
    match rewrite {
        Some(mut table) => {
            while let Some((id, owner)) = owners.next_owner()? {
                table.copy_while(|old, _| *old < id)?;
                table.take_if(|old, _| *old == id)?;
                if owner != Address::ZERO {
                    table.append(&id, &owner)?;
                }
            }
            table.finish()?;
        }
        None => {
            let mut table = txn.walking_cursor::<OtsERC721Owners>()?;
            while let Some((id, owner)) = owners.next_owner()? {
                if owner == Address::ZERO {
                    table.delete(&id)?;
                } else {
                    table.put(&id, &owner)?;
                }
            }
        }
    }
    drop(owners);
    txn.clear::<OtsOwnersStaged>()?;
    Ok(staged)
}

/// No segment of a block past the tip (or while no block is indexed).
pub(crate) fn check<K: TransactionKind>(txn: &Txn<K>, tip: Option<u64>) -> DbResult<()> {
    for segment in segments(txn)? {
        if tip.is_none_or(|t| segment.segment > t) {
            return Err(broken::<OtsOwnersStaged>(
                start(segment).encode_key().as_ref(),
                "a segment past the tip".into(),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::{AccessMode, Db};

    #[test]
    fn segments_are_found_in_age_order_and_the_check_refuses_one_past_the_tip() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("db");
        let id = |token: u8, id: u64| TokenIdKey { token: Address::repeat_byte(token), id: U256::from(id) };
        let txn = db.begin_write().expect("write");
        // A merged segment of tier 255 and one of the next block: `past` steps over both ends.
        for (segment, tier) in [(7u64, 1u8), (9, 0), (9, u8::MAX), (10, 0)] {
            for (token, n) in [(0x00, 0), (0xff, u64::MAX)] {
                txn.put::<OtsOwnersStaged>(&key(Segment { tier, segment }, id(token, n)), &Address::ZERO)
                    .expect("put");
            }
        }
        txn.commit().expect("commit");
        let read = db.begin_read().expect("read");
        let found: Vec<(u64, u8)> =
            segments(&read).expect("segments").iter().map(|s| (s.segment, s.tier)).collect();
        assert_eq!(found, [(7, 1), (9, 0), (9, u8::MAX), (10, 0)]);
        check(&read, Some(10)).expect("none past the tip");
        assert!(check(&read, Some(9)).is_err(), "a segment past the tip");
        assert!(check(&read, None).is_err(), "a segment with no block indexed");
        assert_eq!(past(Segment { tier: u8::MAX, segment: u64::MAX }), None);
    }
}
