//! The appearance lists' stored levels (docs/format.md, "Young levels" and "Staged segments of
//! the appearance lists"): `OtsAppearances`; its young level `OtsAppearancesYoung`, which the
//! bulk stages of a catch-up up to format 20 appended to; and the staged segments
//! `OtsAppearancesStaged`, one a later bulk stage of a catch-up, with their senders' nonce runs
//! (`OtsNonceRunsStaged`).
//!
//! A stage's ids fall on addresses all over the lists, so merged into the main table (or into a
//! young level keyed by address, which grows with it) they dirty pages in proportion to what
//! the table holds, not to what the stage holds. Keyed by the stage first, a segment is appended
//! at its table's end, pages filled whole, and its stage reads nothing: a list's chunks in a
//! segment count from its first id there, and a sender's nonces are kept as runs whose positions
//! count within the segment, so neither needs what came before. The catch-up's end (or the
//! first write of a batch, `check --hash`, `dump`, or a stage that would hold more than
//! [`MAX_SEGMENTS`]) folds the young level and every segment into the main table in one
//! streamed rewrite, writing the nonce anchors the runs imply at their absolute positions.
//!
//! An address's young ids follow its main ones, each segment's follow the older levels', and
//! the reorg window's follow them all: a list reads as main ‖ young ‖ segments ‖ window, each
//! level's counts added to the ones before it.

use std::{
    cmp::Reverse,
    collections::{BinaryHeap, VecDeque},
    sync::mpsc::{sync_channel, Receiver, SyncSender},
};

use alloy_primitives::Address;
use signet_libmdbx::tx::{Ro, Rw, TransactionKind};
use tracing::{debug, warn};

use super::lists::{self, unpack, BlockPage, ListCounts, Place, PlacedKey};
use crate::{
    db::{
        codec::{BlockNumber, ListKey, NonceAnchor, NonceRun, PackedIds, Role, StagedChunkKey},
        tables::{
            OtsAppearances, OtsAppearancesStaged, OtsAppearancesYoung, OtsNonceAnchors, OtsNonceRunsStaged,
            Table,
        },
        Db, DbError, DbResult, ReadTxn, TableCursor, Txn, WriteTxn,
    },
    index::rewrite::Rewrite,
};

/// The most segments the lists keep: a stage that would leave more folds them all with its own
/// ids. A read of an address seeks each segment once or twice; 1 % stages of a chain fold about
/// once, the defaults' stages of mainnet never before the end.
pub const MAX_SEGMENTS: usize = 128;

fn plus(a: ListCounts, b: ListCounts) -> ListCounts {
    ListCounts { all: a.all + b.all, sent: a.sent + b.sent }
}

/// One stored level of the lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Main,
    Young,
    Segment(u64),
}

/// Calls `lists::$f` on `$level`'s table with the address's place there and the other arguments.
macro_rules! at_level {
    ($level:expr, $txn:expr, $address:expr, $f:ident $(, $arg:expr)*) => {
        match $level {
            Level::Main => lists::$f::<OtsAppearances, _>($txn, $address $(, $arg)*),
            Level::Young => lists::$f::<OtsAppearancesYoung, _>($txn, $address $(, $arg)*),
            Level::Segment(segment) => {
                lists::$f::<OtsAppearancesStaged, _>($txn, Place { segment, address: *$address } $(, $arg)*)
            }
        }
    };
}

/// The levels that hold lists, oldest first: the main table, the young level if it holds any,
/// and each segment.
fn levels<K: TransactionKind>(txn: &Txn<K>) -> DbResult<Vec<Level>> {
    let mut levels = vec![Level::Main];
    if txn.entries::<OtsAppearancesYoung>()? > 0 {
        levels.push(Level::Young);
    }
    levels.extend(segment_keys(txn)?.into_iter().map(Level::Segment));
    Ok(levels)
}

const fn start_of(segment: u64) -> StagedChunkKey {
    StagedChunkKey { segment, address: Address::ZERO, chunk: 0 }
}

/// The segments held, oldest first: one seek each.
pub fn segment_keys<K: TransactionKind>(txn: &Txn<K>) -> DbResult<Vec<u64>> {
    let mut cursor = txn.cursor::<OtsAppearancesStaged>()?;
    let mut keys = Vec::new();
    let mut next = Some(0);
    while let Some(segment) = next {
        let Some((key, _)) = cursor.seek(&start_of(segment))? else { break };
        keys.push(key.segment);
        next = key.segment.checked_add(1);
    }
    Ok(keys)
}

/// How many ids `address`'s stored list holds (every level), and how many of them it sent.
pub fn count<K: TransactionKind>(txn: &Txn<K>, address: &Address) -> DbResult<ListCounts> {
    let mut sum = ListCounts::default();
    for level in levels(txn)? {
        sum = plus(sum, at_level!(level, txn, address, count)?);
    }
    Ok(sum)
}

/// How many stored ids of `address` are below `id`: each level's ids all follow the older
/// levels', so the ranks add (a level whose ids all follow `id` adds 0).
pub fn rank<K: TransactionKind>(txn: &Txn<K>, address: &Address, id: u64) -> DbResult<u64> {
    let mut sum = 0;
    for level in levels(txn)? {
        sum += at_level!(level, txn, address, rank, id)?;
    }
    Ok(sum)
}

/// How many stored ids of `address` below `id` it sent.
pub fn rank_sent<K: TransactionKind>(txn: &Txn<K>, address: &Address, id: u64) -> DbResult<u64> {
    let mut sum = 0;
    for level in levels(txn)? {
        sum += at_level!(level, txn, address, rank_sent, id)?;
    }
    Ok(sum)
}

/// How many stored ids of `address` in `first..=last` it sent or received.
pub fn listed_within<K: TransactionKind>(
    txn: &Txn<K>,
    address: &Address,
    first: u64,
    last: u64,
) -> DbResult<u64> {
    let mut sum = 0;
    for level in levels(txn)? {
        sum += at_level!(level, txn, address, listed_within, first, last)?;
    }
    Ok(sum)
}

/// `address`'s role in each of `ids` (in a walk's order), `None` for an id no level holds.
pub fn roles_of_ids<K: TransactionKind>(
    txn: &Txn<K>,
    address: &Address,
    ids: &[u64],
) -> DbResult<Vec<Option<Role>>> {
    let mut roles = vec![None; ids.len()];
    for level in levels(txn)? {
        let missing: Vec<u64> =
            ids.iter().zip(&roles).filter(|(_, r)| r.is_none()).map(|(&id, _)| id).collect();
        if missing.is_empty() {
            break;
        }
        // A level without the list would cost a seek an id.
        if level != Level::Main && at_level!(level, txn, address, count)?.all == 0 {
            continue;
        }
        let mut found = at_level!(level, txn, address, roles_of_ids, &missing)?.into_iter();
        for role in roles.iter_mut().filter(|r| r.is_none()) {
            *role = found.next().flatten();
        }
    }
    Ok(roles)
}

/// The `position`-th stored id of `address` (0 first), or with `sent` of the ids it sent.
pub fn nth<K: TransactionKind>(
    txn: &Txn<K>,
    address: &Address,
    position: u64,
    sent: bool,
) -> DbResult<Option<u64>> {
    let mut before = 0;
    for level in levels(txn)? {
        let held = at_level!(level, txn, address, count)?;
        let held = if sent { held.sent } else { held.all };
        if position < before + held {
            return at_level!(level, txn, address, nth, position - before, sent);
        }
        before += held;
    }
    Ok(None)
}

/// The first and the last stored id of `address`, if it has any.
pub fn ends<K: TransactionKind>(txn: &Txn<K>, address: &Address) -> DbResult<Option<(u64, u64)>> {
    let mut out: Option<(u64, u64)> = None;
    for level in levels(txn)? {
        if let Some((first, last)) = at_level!(level, txn, address, ends)? {
            out = Some((out.map_or(first, |(f, _)| f), last));
        }
    }
    Ok(out)
}

/// Adds `address`'s stored ids below `cut` to `page`, newest first (as [`lists::before`]): the
/// newest level's first.
pub fn before<K: TransactionKind>(
    txn: &Txn<K>,
    address: &Address,
    cut: u64,
    want: usize,
    page: &mut BlockPage,
) -> DbResult<()> {
    for level in levels(txn)?.into_iter().rev() {
        at_level!(level, txn, address, before, cut, want, page)?;
        if page.more {
            break;
        }
    }
    Ok(())
}

/// Adds `address`'s stored ids at or above `from` to `page`, oldest first (as
/// [`lists::after`]): the main level's first.
pub fn after<K: TransactionKind>(
    txn: &Txn<K>,
    address: &Address,
    from: u64,
    want: usize,
    page: &mut BlockPage,
) -> DbResult<()> {
    for level in levels(txn)? {
        at_level!(level, txn, address, after, from, want, page)?;
        if page.more {
            break;
        }
    }
    Ok(())
}

/// `stored` (a sender's anchors in `OtsNonceAnchors`, which cover its lists' older levels) with
/// the anchors its segments' nonce runs imply added at their absolute positions: the anchors
/// the fold would write.
pub fn with_staged_anchors<K: TransactionKind>(
    txn: &Txn<K>,
    sender: &Address,
    stored: Vec<NonceAnchor>,
) -> DbResult<Vec<NonceAnchor>> {
    let segments = segment_keys(txn)?;
    if segments.is_empty() {
        return Ok(stored);
    }
    let mut position = lists::count::<OtsAppearances, _>(txn, sender)?.sent
        + lists::count::<OtsAppearancesYoung, _>(txn, sender)?.sent;
    let mut anchors = stored;
    let mut cursor = txn.cursor::<OtsNonceRunsStaged>()?;
    for segment in segments {
        let sent = lists::count::<OtsAppearancesStaged, _>(txn, Place { segment, address: *sender })?.sent;
        if sent == 0 {
            continue;
        }
        let mut runs = Vec::new();
        let mut next = cursor.seek_sub_key(&BlockNumber(segment), sender)?;
        while let Some(run) = next.filter(|r| r.sender == *sender) {
            runs.push(run);
            next = cursor.next_dup()?;
        }
        let implied = super::anchors_of_runs(anchors.last().copied(), position, &runs);
        anchors.extend(implied);
        position += sent;
    }
    Ok(anchors)
}

/// Checks every level as lists ([`lists::check`]; a young or staged list counts from its own
/// first id), that each address's lists continue one another level after level, and each
/// segment's nonce runs. Returns (addresses, ids), an address held by many levels counted once.
pub fn check<K: TransactionKind>(txn: &Txn<K>, below: u64) -> DbResult<(u64, u64)> {
    let (mut addresses, mut ids) = lists::check::<OtsAppearances, K>(txn, below)?;
    ids += lists::check::<OtsAppearancesYoung, K>(txn, below)?.1;
    ids += lists::check::<OtsAppearancesStaged, K>(txn, below)?.1;
    let mut older = OlderLists::open(txn)?;
    while let Some(list) = older.take()? {
        if list.continues {
            continue;
        }
        match lists::ends::<OtsAppearances, K>(txn, &list.address)? {
            Some((_, last)) => {
                let first = list.ids.first().copied().unwrap_or(0);
                if first <= last {
                    return Err(DbError::Corrupt {
                        table: OtsAppearancesYoung::ID.name(),
                        key: list.address.to_string(),
                        reason: format!("id {first:#x} is not past the main list's last id {last:#x}"),
                    });
                }
            }
            None => addresses += 1,
        }
    }
    let runs = txn.entries::<OtsNonceRunsStaged>()?;
    if runs != older.runs {
        return Err(DbError::Corrupt {
            table: OtsNonceRunsStaged::ID.name(),
            key: String::new(),
            reason: format!("{runs} runs, of which {} belong to a sender's list", older.runs),
        });
    }
    Ok((addresses, ids))
}

/// Whether the young level or any segment holds anything.
pub fn any_older<K: TransactionKind>(txn: &Txn<K>) -> DbResult<bool> {
    Ok(txn.entries::<OtsAppearancesYoung>()? > 0 || txn.entries::<OtsAppearancesStaged>()? > 0)
}

/// One address's ids in one level after the main table: its ids, its roles in them, and for a
/// segment the runs of the nonces it sent them with.
struct Part {
    address: Address,
    ids: Vec<u64>,
    roles: Vec<Role>,
    runs: Option<Vec<NonceRun>>,
}

impl Part {
    fn sent(&self) -> u64 {
        self.roles.iter().filter(|&&r| r == Role::Sent).count() as u64
    }
}

/// One level after the main table, read whole in address order.
enum Source<'a, K: TransactionKind> {
    Young {
        cursor: TableCursor<'a, K, OtsAppearancesYoung>,
        pending: Option<(ListKey, PackedIds)>,
    },
    Segment {
        segment: u64,
        cursor: TableCursor<'a, K, OtsAppearancesStaged>,
        pending: Option<(StagedChunkKey, PackedIds)>,
        runs: TableCursor<'a, K, OtsNonceRunsStaged>,
        run: Option<NonceRun>,
    },
}

fn stray_run(segment: u64, run: &NonceRun, reason: &str) -> DbError {
    DbError::Corrupt {
        table: OtsNonceRunsStaged::ID.name(),
        key: format!("{segment:#x} {}", run.sender),
        reason: format!("{reason}: {run:?}"),
    }
}

impl<K: TransactionKind> Source<'_, K> {
    /// The next list's address.
    fn peek(&self) -> Option<Address> {
        match self {
            Self::Young { pending, .. } => pending.as_ref().map(|(key, _)| key.address),
            Self::Segment { pending, .. } => pending.as_ref().map(|(key, _)| key.address),
        }
    }

    /// The next list whole.
    fn take(&mut self) -> DbResult<Option<Part>> {
        match self {
            Self::Young { cursor, pending } => {
                let Some((key, packed)) = pending.take() else { return Ok(None) };
                let chunk = unpack::<OtsAppearancesYoung>(&key, &packed)?;
                let (mut ids, mut roles) = (chunk.ids, chunk.roles);
                loop {
                    match cursor.next_entry()? {
                        Some((k, p)) if k.address == key.address => {
                            let chunk = unpack::<OtsAppearancesYoung>(&k, &p)?;
                            ids.extend(chunk.ids);
                            roles.extend(chunk.roles);
                        }
                        next => {
                            *pending = next;
                            return Ok(Some(Part { address: key.address, ids, roles, runs: None }));
                        }
                    }
                }
            }
            Self::Segment { segment, cursor, pending, runs, run } => {
                let Some((key, packed)) = pending.take() else { return Ok(None) };
                let chunk = unpack::<OtsAppearancesStaged>(&key, &packed)?;
                let (mut ids, mut roles) = (chunk.ids, chunk.roles);
                loop {
                    match cursor.next_entry()? {
                        Some((k, p)) if k.segment == *segment && k.address == key.address => {
                            let chunk = unpack::<OtsAppearancesStaged>(&k, &p)?;
                            ids.extend(chunk.ids);
                            roles.extend(chunk.roles);
                        }
                        next => {
                            *pending = next.filter(|(k, _)| k.segment == *segment);
                            break;
                        }
                    }
                }
                let mut sender_runs = Vec::new();
                while let Some(r) = run.take() {
                    if r.sender > key.address {
                        *run = Some(r);
                        break;
                    }
                    if r.sender < key.address {
                        return Err(stray_run(*segment, &r, "a run of a sender the segment has no list of"));
                    }
                    sender_runs.push(r);
                    *run = runs.next_dup()?;
                }
                let part = Part { address: key.address, ids, roles, runs: Some(sender_runs) };
                check_runs(*segment, &part)?;
                Ok(Some(part))
            }
        }
    }

    /// Runs left once every list is taken: ones of senders past the segment's last list.
    fn stray(&self) -> Option<DbError> {
        match self {
            Self::Segment { segment, run: Some(r), .. } => {
                Some(stray_run(*segment, r, "a run of a sender the segment has no list of"))
            }
            _ => None,
        }
    }
}

/// A segment's runs of one sender: the first at position 0, positions ascending and below the
/// sender's sent ids in the segment; none for an address that sent none there.
fn check_runs(segment: u64, part: &Part) -> DbResult<()> {
    let Some(runs) = &part.runs else { return Ok(()) };
    let sent = part.sent();
    let Some(first) = runs.first() else {
        return if sent == 0 {
            Ok(())
        } else {
            Err(DbError::Corrupt {
                table: OtsNonceRunsStaged::ID.name(),
                key: format!("{segment:#x} {}", part.address),
                reason: format!("{sent} sent ids and no nonce run"),
            })
        };
    };
    if first.position != 0 {
        return Err(stray_run(segment, first, "the first run is not at position 0"));
    }
    for pair in runs.windows(2) {
        if pair[1].position <= pair[0].position {
            return Err(stray_run(segment, &pair[1], "runs out of order"));
        }
    }
    match runs.last() {
        Some(last) if last.position >= sent => {
            Err(stray_run(segment, last, "a run past the sender's sent ids"))
        }
        _ => Ok(()),
    }
}

/// An address's lists of every level after the main table, joined oldest first: all of them,
/// or a piece of them when they hold more than [`PIECE_IDS`].
pub(super) struct OlderList {
    address: Address,
    ids: Vec<u64>,
    roles: Vec<Role>,
    /// Each part's sent ids and (for a segment's) nonce runs, oldest first.
    parts: Vec<(u64, Option<Vec<NonceRun>>)>,
    /// Whether this piece follows an earlier one of the same address.
    continues: bool,
    /// Whether a later piece of the same address follows.
    more: bool,
}

/// An address's older lists are taken in pieces of about this many ids (a piece ends at the
/// first level that reaches it): the busiest addresses of a chain caught up in many stages hold
/// hundreds of millions of ids across the segments, and a fold holds one piece at a time. Tests
/// take small pieces, so that their few ids make addresses of many pieces.
const PIECE_IDS: usize = if cfg!(test) { 16 } else { 1 << 20 };

/// The young level and every segment read whole and merged by address.
pub(super) struct OlderLists<'a, K: TransactionKind> {
    sources: Vec<Source<'a, K>>,
    order: BinaryHeap<Reverse<(Address, usize)>>,
    /// Runs met so far.
    runs: u64,
    /// The address whose last piece was not its last, and the piece's last id.
    open: Option<(Address, u64)>,
}

impl<'a, K: TransactionKind> OlderLists<'a, K> {
    pub(super) fn open(txn: &'a Txn<K>) -> DbResult<Self> {
        let mut sources = Vec::new();
        let mut young = txn.walking_cursor::<OtsAppearancesYoung>()?;
        let pending = young.first()?;
        sources.push(Source::Young { cursor: young, pending });
        for segment in segment_keys(txn)? {
            let mut cursor = txn.walking_cursor::<OtsAppearancesStaged>()?;
            let pending = cursor.seek(&start_of(segment))?.filter(|(k, _)| k.segment == segment);
            let mut runs = txn.walking_cursor::<OtsNonceRunsStaged>()?;
            let run = runs.seek_sub_key(&BlockNumber(segment), &Address::ZERO)?;
            sources.push(Source::Segment { segment, cursor, pending, runs, run });
        }
        let order =
            sources.iter().enumerate().filter_map(|(i, s)| s.peek().map(|a| Reverse((a, i)))).collect();
        Ok(Self { sources, order, runs: 0, open: None })
    }

    /// The next list's address.
    fn peek(&self) -> Option<Address> {
        self.order.peek().map(|Reverse((address, _))| *address)
    }

    /// The next address's lists, joined, or the next piece of them; each level's ids must
    /// follow the older level's.
    fn take(&mut self) -> DbResult<Option<OlderList>> {
        let Some(address) = self.peek() else {
            return match self.sources.iter().find_map(Source::stray) {
                Some(e) => Err(e),
                None => Ok(None),
            };
        };
        let mut last = self.open.take().filter(|(a, _)| *a == address).map(|(_, id)| id);
        let mut list = OlderList {
            address,
            ids: Vec::new(),
            roles: Vec::new(),
            parts: Vec::new(),
            continues: last.is_some(),
            more: false,
        };
        while let Some(Reverse((_, i))) = self.order.peek().copied().filter(|Reverse((a, _))| *a == address) {
            if list.ids.len() >= PIECE_IDS {
                list.more = true;
                self.open = last.map(|id| (address, id));
                break;
            }
            self.order.pop();
            let source = &mut self.sources[i];
            let Some(part) = source.take()? else { continue };
            if let (Some(last), Some(&first)) = (last, part.ids.first()) {
                if first <= last {
                    return Err(DbError::Corrupt {
                        table: OtsAppearancesStaged::ID.name(),
                        key: address.to_string(),
                        reason: format!("id {first:#x} is not past the older level's last id {last:#x}"),
                    });
                }
            }
            self.runs += part.runs.as_ref().map_or(0, |r| r.len() as u64);
            last = part.ids.last().copied().or(last);
            list.parts.push((part.sent(), part.runs));
            list.ids.extend(part.ids);
            list.roles.extend(part.roles);
            if let Some(next) = source.peek() {
                self.order.push(Reverse((next, i)));
            }
        }
        Ok(Some(list))
    }
}

/// How many lists (or ids, whichever comes first) the beside thread of [`fold_older_beside`]
/// sends at a time, and how many such batches may wait for the writer.
const BESIDE_BATCH_LISTS: usize = 4_096;
const BESIDE_BATCH_IDS: usize = 1 << 20;
const BESIDE_BATCHES_AHEAD: usize = 4;

/// What the beside thread of [`fold_older_beside`] sends.
pub(super) enum Beside {
    /// The next older lists, merged by address.
    Lists(Vec<OlderList>),
    /// No snapshot could be begun on the thread (every reader slot taken): nothing follows.
    Unavailable,
}

/// Where a fold takes the older lists from.
pub(super) enum Older<'a> {
    /// Read and merged on the writer's own thread, from the snapshot.
    Here(OlderLists<'a, Ro>),
    /// Read and merged on a second thread, received in batches; `done` once it has hung up.
    Beside { batches: Receiver<DbResult<Beside>>, pending: VecDeque<OlderList>, done: bool },
}

impl Older<'_> {
    /// The next list's address.
    fn peek(&mut self) -> DbResult<Option<Address>> {
        match self {
            Self::Here(lists) => Ok(lists.peek()),
            Self::Beside { batches, pending, done } => {
                while pending.is_empty() && !*done {
                    match batches.recv() {
                        Ok(Ok(Beside::Lists(lists))) => pending.extend(lists),
                        Ok(Ok(Beside::Unavailable)) | Err(_) => *done = true,
                        Ok(Err(e)) => return Err(e),
                    }
                }
                Ok(pending.front().map(|list| list.address))
            }
        }
    }

    /// The next address's older lists, joined.
    fn take(&mut self) -> DbResult<Option<OlderList>> {
        self.peek()?;
        match self {
            Self::Here(lists) => lists.take(),
            Self::Beside { pending, .. } => Ok(pending.pop_front()),
        }
    }
}

/// Where a write's lists go. An address's ids may come in several consecutive appends (pieces
/// of a long list): every variant but the in-place one keeps the last chunk it packed open until
/// an append to another address or the end, so the chunks come out as from one append.
pub(super) enum Lists<'a> {
    /// Into the main table, in place.
    InPlace(&'a WriteTxn),
    /// Into the main table, rewritten whole.
    Rewriting {
        rewrite: Rewrite<'a, Ro, OtsAppearances>,
        /// The list the last append left open.
        open: Option<Box<OpenFold>>,
    },
    /// Into a new segment, appended.
    Segment {
        segment: u64,
        chunks: TableCursor<'a, Rw, OtsAppearancesStaged>,
        runs: TableCursor<'a, Rw, OtsNonceRunsStaged>,
        /// The list the last append left open.
        open: Option<Box<OpenSegmentList>>,
    },
    /// Into the main table rewritten whole, each address's older lists (the young level's and
    /// the segments', read from the snapshot) folded in before its new ids; the older levels are
    /// emptied at the end.
    Folding {
        txn: &'a WriteTxn,
        rewrite: Rewrite<'a, Ro, OtsAppearances>,
        older: Older<'a>,
        /// Where the runs' anchors go: one cursor for every sender the fold meets.
        anchors: TableCursor<'a, Rw, OtsNonceAnchors>,
        /// The address whose older lists are folded in pieces, between two of them, or whose
        /// new ids the last append took.
        open: Option<Box<OpenFold>>,
    },
}

/// An address a rewrite has taken some of the ids of, and maybe not the last: its older lists'
/// pieces in a fold, or its new ids' pieces.
pub(super) struct OpenFold {
    address: Address,
    /// Its list's last chunk so far, not written yet: the next piece is packed onto it, and
    /// packing is greedy from a chunk's first id, so the chunks come out as if packed at once.
    last: Option<(ListKey, PackedIds)>,
}

/// The list of a segment the last append wrote to, as [`OpenFold`].
pub(super) struct OpenSegmentList {
    address: Address,
    last: Option<(StagedChunkKey, PackedIds)>,
    /// The nonce of the last sent id appended: a run of nonces goes on across pieces.
    nonce: Option<u64>,
}

impl<'a> Lists<'a> {
    /// The lists of a stage's write to `addresses` addresses (`before` the snapshot the write
    /// started from): a new segment keyed `segment` (the stage's newest block; `None` for a write
    /// that may not stage) once the main table holds something, while fewer than
    /// [`MAX_SEGMENTS`] are held; else the main table, folding the older levels if they hold
    /// anything, rewritten whole when one in `share` of its entries or more is appended to.
    pub(super) fn of_stage(
        txn: &'a WriteTxn,
        before: &'a ReadTxn,
        addresses: u64,
        segment: Option<u64>,
        share: u64,
    ) -> DbResult<(Self, &'static str)> {
        let main_held = txn.entries::<OtsAppearances>()? > 0;
        if let Some(segment) = segment.filter(|_| main_held) {
            let held = segment_keys(txn)?;
            if held.len() < MAX_SEGMENTS && held.last().is_none_or(|&last| last < segment) {
                let lists = Self::Segment {
                    segment,
                    chunks: txn.cursor::<OtsAppearancesStaged>()?,
                    runs: txn.cursor::<OtsNonceRunsStaged>()?,
                    open: None,
                };
                return Ok((lists, "staged"));
            }
        }
        if any_older(txn)? {
            return Ok((Self::folding(txn, before)?, "folded"));
        }
        Ok(match Rewrite::begin_if_pays(txn, before, addresses, share)? {
            Some(rewrite) => (Self::Rewriting { rewrite, open: None }, "main"),
            None => (Self::InPlace(txn), "main"),
        })
    }

    fn folding(txn: &'a WriteTxn, before: &'a ReadTxn) -> DbResult<Self> {
        Self::folding_from(txn, before, Older::Here(OlderLists::open(before)?))
    }

    fn folding_from(txn: &'a WriteTxn, before: &'a ReadTxn, older: Older<'a>) -> DbResult<Self> {
        let rewrite = Rewrite::begin_if_pays(txn, before, u64::MAX, 1)?.ok_or_else(|| DbError::Corrupt {
            table: OtsAppearances::ID.name(),
            key: String::new(),
            reason: "a fold of the older levels did not rewrite the main table".into(),
        })?;
        let anchors = txn.cursor::<OtsNonceAnchors>()?;
        Ok(Self::Folding { txn, rewrite, older, anchors, open: None })
    }

    /// Appends `ids` (ascending, past every stored id of `address`, and past the ids appended
    /// to it before) with the address's `roles` in them. Returns what the list held before; in a
    /// segment, whose lists count from their own first id, what the segment's list held.
    pub(super) fn append(&mut self, address: &Address, ids: &[u64], roles: &[Role]) -> DbResult<ListCounts> {
        match self {
            Self::InPlace(txn) => lists::append::<OtsAppearances>(txn, address, ids, roles),
            Self::Rewriting { rewrite, open } => {
                close_open(rewrite, open, address)?;
                append_open(rewrite, open, address, ids, roles)
            }
            Self::Segment { segment, chunks, open, .. } => {
                let (last, nonce) = match open.take() {
                    Some(list) if list.address == *address => (list.last, list.nonce),
                    Some(list) => {
                        if let Some((key, packed)) = list.last {
                            chunks.append(&key, &packed)?;
                        }
                        (None, None)
                    }
                    None => (None, None),
                };
                let (before, mut packed) = lists::extend_last::<OtsAppearancesStaged>(last, ids, roles)?;
                let place = Place { segment: *segment, address: *address };
                let last = packed.pop().map(|(id, chunk)| (StagedChunkKey::at(place, id), chunk));
                for (id, chunk) in packed {
                    chunks.append(&StagedChunkKey::at(place, id), &chunk)?;
                }
                *open = Some(Box::new(OpenSegmentList { address: *address, last, nonce }));
                Ok(before)
            }
            Self::Folding { rewrite, older, anchors, open, .. } => {
                close_open(rewrite, open, address)?;
                while older.peek()?.is_some_and(|a| a < *address) {
                    if let Some(list) = older.take()? {
                        fold_list(rewrite, anchors, open, list, &[], &[])?;
                    }
                }
                while older.peek()? == Some(*address) {
                    match older.take()? {
                        Some(list) if list.more => fold_list(rewrite, anchors, open, list, &[], &[])?,
                        Some(list) => return fold_list(rewrite, anchors, open, list, ids, roles),
                        None => break,
                    };
                }
                append_open(rewrite, open, address, ids, roles)
            }
        }
    }

    /// Keeps the nonces `address` sent its appended ids with (`run`: (TxId, nonce), ascending;
    /// `before` the sent ids its list held, as [`Lists::append`] returned it): the anchors they
    /// need, or in a segment their runs. Returns the anchors written.
    pub(super) fn nonces(
        &mut self,
        txn: &WriteTxn,
        address: &Address,
        before: u64,
        run: &[(u64, u64)],
    ) -> DbResult<u64> {
        let Self::Segment { segment, runs, open, .. } = self else {
            return super::write_anchors(txn, address, before, run);
        };
        // The append just before left this address's list open, with the nonce its last piece
        // ended on.
        let open = open.as_mut().filter(|o| o.address == *address);
        let mut previous: Option<u64> = open.as_ref().and_then(|o| o.nonce);
        for (position, &(_, nonce)) in (before..).zip(run) {
            if previous.is_none_or(|p| p.checked_add(1) != Some(nonce)) {
                runs.append(&BlockNumber(*segment), &NonceRun { sender: *address, position, nonce })?;
            }
            previous = Some(nonce);
        }
        if let Some(open) = open {
            open.nonce = previous;
        }
        Ok(0)
    }

    /// Writes what the last append left open and copies what a rewrite has not reached yet; a
    /// fold folds the older lists left and empties the older levels.
    pub(super) fn finish(self) -> DbResult<()> {
        match self {
            Self::InPlace(_) => Ok(()),
            Self::Segment { mut chunks, open, .. } => {
                if let Some((key, packed)) = open.and_then(|o| o.last) {
                    chunks.append(&key, &packed)?;
                }
                Ok(())
            }
            Self::Rewriting { mut rewrite, open } => {
                if let Some(list) = open {
                    write_open(&mut rewrite, *list)?;
                }
                rewrite.finish()
            }
            Self::Folding { txn, mut rewrite, mut older, mut anchors, mut open } => {
                if let Some(list) = open.take() {
                    write_open(&mut rewrite, *list)?;
                }
                while let Some(list) = older.take()? {
                    fold_list(&mut rewrite, &mut anchors, &mut open, list, &[], &[])?;
                }
                if let Some(open) = open {
                    return Err(DbError::Corrupt {
                        table: OtsAppearancesStaged::ID.name(),
                        key: open.address.to_string(),
                        reason: "the older lists ended before the last piece of this address".into(),
                    });
                }
                rewrite.finish()?;
                drop((older, anchors));
                txn.clear::<OtsAppearancesYoung>()?;
                txn.clear::<OtsAppearancesStaged>()?;
                txn.clear::<OtsNonceRunsStaged>()
            }
        }
    }
}

/// Writes the last chunk of the list `open` holds.
fn write_open(rewrite: &mut Rewrite<'_, Ro, OtsAppearances>, open: OpenFold) -> DbResult<()> {
    match open.last {
        Some((key, packed)) => rewrite.append(&key, &packed),
        None => Ok(()),
    }
}

/// Writes the list left open unless it is `address`'s, which the next append goes on with.
fn close_open(
    rewrite: &mut Rewrite<'_, Ro, OtsAppearances>,
    open: &mut Option<Box<OpenFold>>,
    address: &Address,
) -> DbResult<()> {
    match open.take_if(|o| o.address != *address) {
        Some(list) => write_open(rewrite, *list),
        None => Ok(()),
    }
}

/// Appends `ids` to `address`'s list through `rewrite`, going on from its open list or opening
/// it (copying the lists before it and its old chunks but the last), and leaves its last chunk
/// open; returns what the list held before.
fn append_open(
    rewrite: &mut Rewrite<'_, Ro, OtsAppearances>,
    open: &mut Option<Box<OpenFold>>,
    address: &Address,
    ids: &[u64],
    roles: &[Role],
) -> DbResult<ListCounts> {
    let last = match open.take() {
        Some(list) if list.address == *address => list.last,
        Some(list) => {
            write_open(rewrite, *list)?;
            lists::open_rewriting(rewrite, address)?
        }
        None => lists::open_rewriting(rewrite, address)?,
    };
    let (before, mut chunks) = lists::extend_last::<OtsAppearances>(last, ids, roles)?;
    let place = Place::from(address);
    let last = chunks.pop().map(|(id, packed)| (ListKey::at(place, id), packed));
    for (id, packed) in chunks {
        rewrite.append(&ListKey::at(place, id), &packed)?;
    }
    *open = Some(Box::new(OpenFold { address: *address, last }));
    Ok(before)
}

/// Appends an address's older lists (or a piece of them) and then `ids` (given with its last
/// piece) to its main list through `rewrite`, and writes the anchors its segments' nonce runs
/// imply; returns what the stored list held before `ids`. Between two pieces of an address its
/// list's last chunk waits in `open`.
fn fold_list(
    rewrite: &mut Rewrite<'_, Ro, OtsAppearances>,
    anchors: &mut TableCursor<'_, Rw, OtsNonceAnchors>,
    open: &mut Option<Box<OpenFold>>,
    list: OlderList,
    ids: &[u64],
    roles: &[Role],
) -> DbResult<ListCounts> {
    let OlderList { address, ids: mut all, roles: mut marks, parts, continues, more } = list;
    let last = match open.take() {
        Some(open) if continues && open.address == address => open.last,
        None if !continues => lists::open_rewriting(rewrite, &address)?,
        _ => {
            return Err(DbError::Corrupt {
                table: OtsAppearancesStaged::ID.name(),
                key: address.to_string(),
                reason: "a piece of the older lists out of turn".into(),
            })
        }
    };
    let held =
        ListCounts { all: all.len() as u64, sent: marks.iter().filter(|&&r| r == Role::Sent).count() as u64 };
    if !more {
        all.extend_from_slice(ids);
        marks.extend_from_slice(roles);
    }
    let (before, mut chunks) = lists::extend_last::<OtsAppearances>(last, &all, &marks)?;
    drop((all, marks));
    let place = Place::from(&address);
    // New ids come with the last piece: more of them may follow in the next append.
    if more || !ids.is_empty() {
        let last = chunks.pop().map(|(id, packed)| (ListKey::at(place, id), packed));
        *open = Some(Box::new(OpenFold { address, last }));
    }
    for (id, packed) in chunks {
        rewrite.append(&ListKey::at(place, id), &packed)?;
    }
    let mut position = before.sent;
    for (sent, runs) in parts {
        if let Some(runs) = runs.filter(|r| !r.is_empty()) {
            super::write_run_anchors(anchors, &address, position, &runs)?;
        }
        position += sent;
    }
    Ok(plus(before, held))
}

/// Folds the young level and every segment into the main table (a no-op when they are empty);
/// `before` is a snapshot of the state `txn` started from, and nothing in `txn` may have
/// written these tables yet.
pub fn fold_older(txn: &WriteTxn, before: &ReadTxn) -> DbResult<()> {
    if !any_older(txn)? {
        return Ok(());
    }
    let started = std::time::Instant::now();
    Lists::folding(txn, before)?.finish()?;
    debug!(target: "ots::index", list = "appearances", how = "folded", addresses = 0u64, seconds = started.elapsed().as_secs_f64(), "list written");
    Ok(())
}

/// Reads the older lists from a snapshot of `db` it begins and sends them merged, in batches
/// ([`fold_older_beside`]'s second thread).
fn send_older_lists(db: &Db, to: &SyncSender<DbResult<Beside>>) -> DbResult<()> {
    let snapshot = match db.begin_read() {
        Ok(snapshot) => snapshot,
        Err(error) => {
            warn!(target: "ots::index", %error, list = "appearances", "no read snapshot beside the fold; folding on the writer");
            let _ = to.send(Ok(Beside::Unavailable));
            return Ok(());
        }
    };
    let mut older = OlderLists::open(&snapshot)?;
    let mut batch = Vec::with_capacity(BESIDE_BATCH_LISTS);
    let mut ids = 0;
    while let Some(list) = older.take()? {
        ids += list.ids.len();
        batch.push(list);
        if batch.len() == BESIDE_BATCH_LISTS || ids >= BESIDE_BATCH_IDS {
            ids = 0;
            let full = std::mem::replace(&mut batch, Vec::with_capacity(BESIDE_BATCH_LISTS));
            if to.send(Ok(Beside::Lists(full))).is_err() {
                return Ok(());
            }
        }
    }
    if !batch.is_empty() {
        let _ = to.send(Ok(Beside::Lists(batch)));
    }
    Ok(())
}

/// As [`fold_older`], with the young level and the segments read and merged on a second thread
/// (from a snapshot of `db` it begins, the state `txn` started from: the writer lock is held and
/// the lists not written yet) while this one rewrites `OtsAppearances`: the catch-up's end.
/// Without a reader slot for that snapshot, as [`fold_older`].
pub fn fold_older_beside(db: &Db, txn: &WriteTxn, before: &ReadTxn) -> DbResult<()> {
    if !any_older(txn)? {
        return Ok(());
    }
    let started = std::time::Instant::now();
    let folded = std::thread::scope(|scope| -> DbResult<bool> {
        let (sender, batches) = sync_channel::<DbResult<Beside>>(BESIDE_BATCHES_AHEAD);
        scope.spawn(move || {
            if let Err(e) = send_older_lists(db, &sender) {
                let _ = sender.send(Err(e));
            }
        });
        // The first batch tells whether the thread has a snapshot, before anything is written.
        let pending: VecDeque<OlderList> = match batches.recv() {
            Ok(Ok(Beside::Unavailable)) => return Ok(false),
            Ok(Ok(Beside::Lists(lists))) => lists.into(),
            Ok(Err(e)) => return Err(e),
            Err(_) => VecDeque::new(),
        };
        // The receiver goes with the lists: a failed write drops it, and the thread stops.
        let older = Older::Beside { batches, pending, done: false };
        Lists::folding_from(txn, before, older)?.finish()?;
        Ok(true)
    })?;
    if !folded {
        return fold_older(txn, before);
    }
    debug!(target: "ots::index", list = "appearances", how = "folded", beside = true, addresses = 0u64, seconds = started.elapsed().as_secs_f64(), "list written");
    Ok(())
}

/// The refusal of a write that would leave older levels behind it without a snapshot to fold
/// them from.
pub(super) fn unfolded() -> DbError {
    DbError::Corrupt {
        table: OtsAppearancesStaged::ID.name(),
        key: String::new(),
        reason: "a young level or staged segments are left to fold, but the write has no snapshot to fold them from"
            .into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        db::{AccessMode, Db},
        txid::TxId,
    };

    fn id(block: u64, index: u64) -> u64 {
        TxId::new(block, index).expect("fits").0
    }

    /// One stage's appends (addresses ascending), written as a bulk stage writes them, as
    /// segment `segment`; returns where they went.
    fn stage(db: &Db, rows: &[(Address, Vec<u64>, Vec<Role>)], segment: u64) -> &'static str {
        let before = db.begin_read().expect("snapshot");
        let txn = db.begin_write().expect("write");
        let (mut lists, how) =
            Lists::of_stage(&txn, &before, rows.len() as u64, Some(segment), 4).expect("lists");
        for (address, ids, roles) in rows {
            let counted = lists.append(address, ids, roles).expect("append");
            // Every sent id carries nonce 0, as a chain's system transactions do.
            let run: Vec<(u64, u64)> =
                ids.iter().zip(roles).filter(|(_, &r)| r == Role::Sent).map(|(&id, _)| (id, 0)).collect();
            if !run.is_empty() {
                lists.nonces(&txn, address, counted.sent, &run).expect("nonces");
            }
            let stored = count(&txn, address).expect("count");
            assert!(counted.all <= stored.all, "counts before the append are absolute, or zero");
        }
        lists.finish().expect("finish");
        txn.commit().expect("commit");
        how
    }

    /// Appends to the young level, as a bulk stage of format 20 or before did.
    fn young(db: &Db, rows: &[(Address, Vec<u64>, Vec<Role>)]) -> &'static str {
        let txn = db.begin_write().expect("write");
        for (address, ids, roles) in rows {
            lists::append::<OtsAppearancesYoung>(&txn, address, ids, roles).expect("append");
        }
        txn.commit().expect("commit");
        "young"
    }

    /// Stages of a few addresses' lists: one large into the main table, a few into a young level
    /// (left by a format-20 catch-up), then many small ones into segments, which fold with the
    /// young level once they would pass [`MAX_SEGMENTS`] and hold ids again at the end: at every
    /// stage checked count, rank, the n-th id and sent id, roles, ends and pages equal those of
    /// the same ids appended to one level; folded, the main table is byte for byte that level.
    #[test]
    fn older_levels_read_and_fold_as_one_level() {
        let dir = tempfile::tempdir().expect("tempdir");
        let leveled = Db::open(&dir.path().join("leveled"), AccessMode::ReadWrite).expect("open");
        let flat = Db::open(&dir.path().join("flat"), AccessMode::ReadWrite).expect("open");
        let who: Vec<Address> = (1..=6u8).map(|n| Address::repeat_byte(n * 0x20)).collect();
        let role = |i: u64| match i % 7 {
            0 | 3 => Role::Sent,
            1 => Role::Received,
            _ => Role::Other,
        };
        let stages = MAX_SEGMENTS as u64 + 16;
        let mut hows = Vec::new();
        for s in 0..stages {
            // The first stage is large (it makes the main table); later ones touch a few lists.
            let per = if s == 0 { 400 } else { 6 };
            let rows: Vec<(Address, Vec<u64>, Vec<Role>)> = who
                .iter()
                .enumerate()
                .filter(|(k, _)| s == 0 || !(s + *k as u64).is_multiple_of(3))
                .map(|(k, &a)| {
                    let ids: Vec<u64> = (0..per).map(|i| id(10 + s * 1_000 + i * 2, k as u64)).collect();
                    let roles = (0..per).map(|i| role(i + k as u64 + s)).collect();
                    (a, ids, roles)
                })
                .collect();
            let segment = 10 + s * 1_000 + 999;
            hows.push(if (1..4).contains(&s) {
                young(&leveled, &rows)
            } else {
                stage(&leveled, &rows, segment)
            });
            let txn = flat.begin_write().expect("write");
            for (a, ids, roles) in &rows {
                lists::append::<OtsAppearances>(&txn, a, ids, roles).expect("append");
            }
            txn.commit().expect("commit");
            if s % 9 != 0 && s + 3 < stages && hows.last() != Some(&"folded") {
                continue;
            }

            let (l, f) = (leveled.begin_read().expect("read"), flat.begin_read().expect("read"));
            for a in &who {
                let expected = lists::count::<OtsAppearances, _>(&f, a).expect("count");
                assert_eq!(count(&l, a).expect("count"), expected, "stage {s}");
                assert_eq!(
                    ends(&l, a).expect("ends"),
                    lists::ends::<OtsAppearances, _>(&f, a).expect("ends")
                );
                let mut all = BlockPage::default();
                lists::after::<OtsAppearances, _>(&f, a, 0, usize::MAX, &mut all).expect("after");
                for (n, &x) in all.ids.iter().enumerate().step_by(37) {
                    for probe in [x, x + 1] {
                        let want = lists::rank::<OtsAppearances, _>(&f, a, probe).expect("rank");
                        assert_eq!(rank(&l, a, probe).expect("rank"), want);
                        let want = lists::rank_sent::<OtsAppearances, _>(&f, a, probe).expect("rank");
                        assert_eq!(rank_sent(&l, a, probe).expect("rank"), want);
                    }
                    assert_eq!(nth(&l, a, n as u64, false).expect("nth"), Some(x));
                    let want = lists::nth::<OtsAppearances, _>(&f, a, n as u64, true).expect("nth");
                    assert_eq!(nth(&l, a, n as u64, true).expect("nth"), want);
                    let want = lists::listed_within::<OtsAppearances, _>(&f, a, x, x + 500).expect("listed");
                    assert_eq!(listed_within(&l, a, x, x + 500).expect("listed"), want);
                }
                let probes: Vec<u64> = all.ids.iter().rev().step_by(5).flat_map(|&x| [x, x - 1]).collect();
                let want = lists::roles_of_ids::<OtsAppearances, _>(&f, a, &probes).expect("roles");
                assert_eq!(roles_of_ids(&l, a, &probes).expect("roles"), want);
                for (cut, want) in [(u64::MAX, 7), (all.ids.last().copied().unwrap_or(0), 500)] {
                    let (mut got, mut expected) = (BlockPage::default(), BlockPage::default());
                    before(&l, a, cut, want, &mut got).expect("before");
                    lists::before::<OtsAppearances, _>(&f, a, cut, want, &mut expected).expect("before");
                    assert_eq!(got, expected, "before {cut}");
                    let from = all.ids.get(all.ids.len().saturating_sub(9)).copied().unwrap_or(0);
                    let (mut got, mut expected) = (BlockPage::default(), BlockPage::default());
                    after(&l, a, from, want, &mut got).expect("after");
                    lists::after::<OtsAppearances, _>(&f, a, from, want, &mut expected).expect("after");
                    assert_eq!(got, expected, "after {from}");
                }
            }
            let (addresses, ids) = check(&l, u64::MAX).expect("the levels check");
            let (flat_addresses, flat_ids) = lists::check::<OtsAppearances, _>(&f, u64::MAX).expect("check");
            assert_eq!((addresses, ids), (flat_addresses, flat_ids), "stage {s}");
        }
        assert_eq!(hows[0], "main");
        assert_eq!(hows[1..4], ["young"; 3]);
        assert_eq!(hows.iter().filter(|&&h| h == "folded").count(), 1, "{hows:?}");
        assert_eq!(hows.last(), Some(&"staged"), "{hows:?}");
        assert!(any_older(&leveled.begin_read().expect("read")).expect("older"));

        // The segments hold more of each address than a piece: the fold below takes them a
        // piece at a time, each at most a level's ids past the bound.
        let snapshot = leveled.begin_read().expect("snapshot");
        {
            let mut older = OlderLists::open(&snapshot).expect("older");
            let (mut pieces, mut continued) = (0, 0);
            let mut previous: Option<(Address, bool)> = None;
            while let Some(list) = older.take().expect("take") {
                assert!(list.ids.len() < PIECE_IDS + 6, "{} ids in one piece", list.ids.len());
                assert_eq!(list.continues, previous.is_some_and(|(a, more)| more && a == list.address));
                pieces += 1;
                continued += usize::from(list.continues);
                previous = Some((list.address, list.more));
            }
            assert!(!previous.is_some_and(|(_, more)| more), "the last piece says none follows");
            assert!(continued > who.len(), "{pieces} pieces, {continued} of them continued");
        }
        drop(snapshot);

        // The end of a catch-up folds on two threads.
        let before = leveled.begin_read().expect("snapshot");
        let txn = leveled.begin_write().expect("write");
        fold_older_beside(&leveled, &txn, &before).expect("fold");
        drop(before);
        txn.commit().expect("commit");
        let (l, f) = (leveled.begin_read().expect("read"), flat.begin_read().expect("read"));
        assert!(!any_older(&l).expect("older"));
        assert_eq!(
            l.raw_entries(OtsAppearances::ID).expect("entries"),
            f.raw_entries(OtsAppearances::ID).expect("entries"),
            "folded, the main table is the one level"
        );
    }

    /// A segment whose ids do not follow the older levels', or with a nonce run of a sender it
    /// holds no list of, fails the check.
    #[test]
    fn the_check_refuses_segments_out_of_order_and_stray_runs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
        let a = Address::repeat_byte(0x44);
        let ids: Vec<u64> = (0..10).map(|i| id(1 + i, 0)).collect();
        assert_eq!(stage(&db, &[(a, ids, vec![Role::Other; 10])], 10), "main");
        assert_eq!(stage(&db, &[(a, vec![id(20, 0)], vec![Role::Other])], 20), "staged");
        check(&db.begin_read().expect("read"), u64::MAX).expect("in order");
        let txn = db.begin_write().expect("write");
        let run = NonceRun { sender: Address::repeat_byte(0x55), position: 0, nonce: 0 };
        txn.cursor::<OtsNonceRunsStaged>().expect("cursor").put(&BlockNumber(20), &run).expect("put");
        assert!(check(&txn, u64::MAX).is_err(), "a stray run");
        drop(txn);
        assert_eq!(stage(&db, &[(a, vec![id(5, 1)], vec![Role::Other])], 30), "staged");
        assert!(check(&db.begin_read().expect("read"), u64::MAX).is_err(), "ids out of order");
    }

    /// A write that is not a stage's, with a segment held and no snapshot, is refused rather
    /// than appending ids before the staged ones.
    #[test]
    fn a_write_without_a_snapshot_refuses_to_leave_a_young_level_behind() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
        let a = Address::repeat_byte(0x33);
        let ids: Vec<u64> = (0..100).map(|i| id(1 + i, 0)).collect();
        assert_eq!(stage(&db, &[(a, ids, vec![Role::Other; 100])], 100), "main");
        assert_eq!(stage(&db, &[(a, vec![id(500, 0)], vec![Role::Other])], 500), "staged");
        let txn = db.begin_write().expect("write");
        let mut leaving = crate::index::recent::WindowRows::default();
        let refused = super::super::Appearances::default().write(
            &txn,
            None,
            crate::index::window::WindowStart::Closed,
            &mut leaving,
        );
        assert!(
            matches!(refused, Err(DbError::Corrupt { table: "OtsAppearancesStaged", .. })),
            "{refused:?}"
        );
    }
}
