//! Walking an index list of transactions for a list action whose rows the index does not count
//! (`txlist`, `tokentx`, …): ids are read a step at a time from the end `sort` starts at, within
//! the blocks asked for, their transactions and receipts fetched in one batch per step (through
//! the server's transaction cache), and each turned into the action's rows, until the page is
//! full. How many rows each group of transactions made is remembered (`marks`), so a page costs
//! the transactions before it the first time only: later pages of the list, in either sort and
//! any block range, skip the counted groups (docs/etherscan.md). While a walk is still counting
//! the rows before its page it reads the next groups' transactions ahead, in concurrent batches,
//! into the transaction cache: the node answers them at once instead of one after the other.
//! Steps wholly before the page are counted rather than made: an account's `txlist` from its sent
//! marks and the recipients of the other transactions, a token list from the node's logs
//! (`movement_count`) — neither reads a receipt.

use std::{collections::HashMap, sync::Arc, time::Instant};

use alloy_primitives::Address;
use serde_json::Value;
use tracing::debug;

use super::{
    envelope::Answer,
    internal_ids,
    marks::{Group, Spans, Stream, WalkMarks, GROUP},
    movement_count::{Counted, SpanLogs},
    params::{Sort, Window},
    token_moves::{self, Moves},
    Etherscan,
};
use crate::{
    db::{state, DbResult, ReadTxn},
    decode::{TokenKind, TokenKinds},
    index::families::{
        address_index::{ids_below, ids_from, rank, settled, sum_row_ids, transfer_rows, IdList},
        appearances,
        attributes::attributes,
    },
    rpc::{page_timing::PageTimer, transfer_detail::transfer_emitters, TransactionWithReceipt},
    txid::TxId,
};

/// Groups a walk reads ahead of its steps while the page is still ahead of it.
const READ_AHEAD: u64 = 4;

/// The smallest transaction cache a walk reads ahead into: the groups read ahead (a few hundred
/// transactions and receipts, some MiB on a busy chain) must stay until their steps come.
const READ_AHEAD_CACHE_BYTES: usize = 16 << 20;

/// Where a walk reads transaction ids.
#[derive(Debug, Clone, Copy)]
pub(super) enum Source {
    /// Every transaction the address appears in (`OtsAppearances`).
    Appearances(Address),
    /// An address's transactions in a transfer index.
    Transfers(IdList, Address),
    /// An address's internal transactions: its index and its inner creations.
    InternalTxs(Address),
    /// The transactions that move a token, or in which a party moved it (`token_moves`).
    Moves(Moves),
}

impl Source {
    /// Up to `want` ids from `bound` on (ascending) or below it (descending), in the walk's
    /// order, and whether more follow.
    fn step(self, t: &ReadTxn, sort: Sort, bound: u64, want: usize) -> DbResult<(Vec<u64>, bool)> {
        let (mut ids, more) = match (self, sort) {
            (Self::Appearances(address), Sort::Asc) => {
                let page = appearances::after(t, &address, bound, want)?;
                (page.ids, page.more)
            }
            (Self::Appearances(address), Sort::Desc) => {
                let page = appearances::before(t, &address, bound, want)?;
                (page.ids, page.more)
            }
            (Self::Transfers(list, address), Sort::Asc) => ids_from(t, list, &address, bound, want as u64)?,
            (Self::Transfers(list, address), Sort::Desc) => ids_below(t, list, &address, bound, want as u64)?,
            (Self::InternalTxs(address), Sort::Asc) => internal_ids::after(t, &address, bound, want)?,
            (Self::InternalTxs(address), Sort::Desc) => internal_ids::before(t, &address, bound, want)?,
            (Self::Moves(moves), Sort::Asc) => token_moves::after(t, moves, bound, want)?,
            (Self::Moves(moves), Sort::Desc) => token_moves::before(t, moves, bound, want)?,
        };
        // The appearances come in whole blocks; a step ends on a group's edge instead.
        let cut = ids.len() > want;
        ids.truncate(want);
        Ok((ids, more || cut))
    }

    /// How many of the source's ids lie below `id`.
    fn rank(self, t: &ReadTxn, id: u64) -> DbResult<u64> {
        match self {
            Self::Appearances(address) => appearances::rank(t, &address, id),
            Self::Transfers(list, address) => rank(t, list, &address, id),
            Self::InternalTxs(address) => internal_ids::rank_of(t, &address, id),
            Self::Moves(moves) => token_moves::rank_of(t, moves, id),
        }
    }

    /// How many of the source's ids are older than the reorg window (its table's).
    fn settled(self, t: &ReadTxn) -> DbResult<u64> {
        match self {
            Self::Appearances(address) => appearances::settled(t, &address),
            Self::Transfers(list, address) => settled(t, list, &address),
            Self::InternalTxs(address) => internal_ids::settled_of(t, &address),
            Self::Moves(moves) => token_moves::settled_of(t, moves),
        }
    }
}

/// One transaction of a walk, for the action's rows.
pub(super) struct Walked<'a> {
    /// Its block.
    pub block: u64,
    /// Its block's time, Unix seconds.
    pub timestamp: u64,
    /// The indexed tip, for `confirmations`.
    pub tip: u64,
    /// The transaction and its receipt, as the node gave them.
    pub tx: &'a TransactionWithReceipt,
}

/// The first id of block `block`, or the end of all ids past the last block a `TxId` holds.
pub(super) fn first_id(block: u64) -> u64 {
    if block >= 1 << (64 - 20) {
        u64::MAX
    } else {
        TxId::first_of_block(block).0
    }
}

/// One step of a walk: the ids inside the block range, the indexed tip, and the group the
/// step read whole when it did and that group is older than the reorg window.
pub(super) struct Step {
    /// The step's ids in the range, in the walk's order.
    pub ids: Vec<TxId>,
    /// The indexed tip, for `confirmations`.
    pub tip: u64,
    group: Option<(u64, u64, u64)>,
    /// The step is a group whose rows are known (counted before) to reach into the page: it is
    /// read whole without counting it first.
    reaches_page: bool,
}

/// A walk over a source's ids within a block range for one page: a step (a group of
/// [`GROUP`] positions) at a time, skipping the groups before the page whose rows an earlier
/// walk counted (`marks`).
#[derive(Debug)]
pub(super) struct Walk {
    source: Source,
    stream: Stream,
    sort: Sort,
    window: Window,
    low: u64,
    high: u64,
    /// Ascending: the next id is the first at or above it; descending: the first below it.
    bound: u64,
    /// How many of the source's ids lie below `bound`, once read.
    at: Option<u64>,
    done: bool,
    /// Rows of the groups skipped, and rows the caller found.
    skipped: u64,
    found: u64,
    skipped_groups: u64,
    /// Groups whose contracts this walk checked one by one (a group is checked once a snapshot).
    checked_groups: u64,
    /// Where the ids read ahead end, in the walk's direction (ascending: the first id after
    /// them; descending: the last of them).
    ahead: Option<u64>,
    /// The counted group the walk stopped skipping at, its rows reaching into the page.
    reaching: Option<u64>,
    /// The index's part of the page, for `ots::rpc::timing`.
    timer: PageTimer,
}

impl Walk {
    /// A walk for `window`'s rows of `stream`, made of `source`'s ids in blocks `start..=end`,
    /// in `sort`'s order.
    pub(super) fn new(
        source: Source,
        stream: Stream,
        (start, end): (u64, u64),
        window: Window,
        sort: Sort,
    ) -> Self {
        let (low, high) = (first_id(start), end.checked_add(1).map_or(u64::MAX, first_id));
        let bound = match sort {
            Sort::Asc => low,
            Sort::Desc => high,
        };
        Self {
            source,
            stream,
            sort,
            window,
            low,
            high,
            bound,
            at: None,
            done: false,
            skipped: 0,
            found: 0,
            skipped_groups: 0,
            checked_groups: 0,
            ahead: None,
            reaching: None,
            timer: PageTimer::start(stream.action()),
        }
    }

    fn position(&mut self, t: &ReadTxn) -> DbResult<u64> {
        match self.at {
            Some(at) => Ok(at),
            None => {
                let at = self.source.rank(t, self.bound)?;
                self.at = Some(at);
                Ok(at)
            }
        }
    }

    /// The group that starts where the walk stands, in its direction, if it stands on a
    /// group's edge.
    fn group_ahead(&self, at: u64) -> Option<u64> {
        if !at.is_multiple_of(GROUP) {
            return None;
        }
        match self.sort {
            Sort::Asc => Some(at / GROUP),
            Sort::Desc => (at / GROUP).checked_sub(1),
        }
    }

    /// Skips the counted groups ahead whose rows all come before the page.
    fn skip_counted(&mut self, t: &ReadTxn, marks: &WalkMarks) -> DbResult<()> {
        let mut checked: HashMap<Address, bool> = HashMap::new();
        let (groups, rows) = (self.skipped_groups, self.skipped);
        let skipping = self.skip_groups(t, marks, &mut checked);
        if self.skipped_groups > groups {
            debug!(
                target: "ots::rpc",
                stream = ?self.stream,
                groups = self.skipped_groups - groups,
                rows = self.skipped - rows,
                checked = self.checked_groups,
                "walk skipped counted groups"
            );
        }
        skipping
    }

    fn skip_groups(
        &mut self,
        t: &ReadTxn,
        marks: &WalkMarks,
        checked: &mut HashMap<Address, bool>,
    ) -> DbResult<()> {
        loop {
            let before_page = self.window.skip.saturating_sub(self.skipped + self.found);
            let at = self.position(t)?;
            let Some(index) = self.group_ahead(at).filter(|_| before_page > 0) else { return Ok(()) };
            if let Some(spans) = self.confirmed_spans(t, marks, index)? {
                if self.pass_counted(t, marks, (&spans, index, at), before_page, checked)? {
                    continue;
                }
                return Ok(());
            }
            let group = match marks.get(&self.stream, index) {
                Some(group) if group.loaded => {
                    if !self.still_holds(t, index, &group)? {
                        marks.forget(&self.stream, index);
                        return Ok(());
                    }
                    let checked = Group { loaded: false, ..(*group).clone() };
                    marks.keep(self.stream, index, checked.clone());
                    Arc::new(checked)
                }
                Some(group) => group,
                None => match self.counted_by_index(t, at)? {
                    Some(group) => {
                        marks.keep(self.stream, index, group.clone());
                        Arc::new(group)
                    }
                    None => return Ok(()),
                },
            };
            let inside = match self.sort {
                Sort::Asc => group.first >= self.bound && group.last < self.high,
                Sort::Desc => group.last < self.bound && group.first >= self.low,
            };
            if group.rows > before_page && inside {
                self.reaching = Some(index);
            }
            if group.rows > before_page || !inside {
                return Ok(());
            }
            if !self.emitters_unchanged(t, &group, checked)? {
                marks.forget(&self.stream, index);
                return Ok(());
            }
            self.skipped += group.rows;
            self.skipped_groups += 1;
            (self.bound, self.at) = match self.sort {
                Sort::Asc => (group.last + 1, Some(at + GROUP)),
                Sort::Desc => (group.first, Some(at - GROUP)),
            };
        }
    }

    /// The stream's counted groups as spans, if group `index` is among them, with every group
    /// read back from the marks file confirmed by the index first (a group that no longer holds
    /// is forgotten, to be walked again).
    fn confirmed_spans(&self, t: &ReadTxn, marks: &WalkMarks, index: u64) -> DbResult<Option<Arc<Spans>>> {
        let Some(spans) = marks.spans_holding(&self.stream, index) else { return Ok(None) };
        if !spans.loaded {
            return Ok(Some(spans));
        }
        for (start, groups) in spans.runs() {
            let confirmed = self.confirm_loaded(t, start, groups)?;
            for ((at, group), holds) in (start..).zip(groups).zip(confirmed) {
                if !holds {
                    marks.forget(&self.stream, at);
                } else if group.loaded {
                    marks.keep(self.stream, at, Group { loaded: false, ..(**group).clone() });
                }
            }
        }
        // Unless another walk read the file's groups back again meanwhile, none is left loaded.
        Ok(marks.spans_holding(&self.stream, index).filter(|now| !now.loaded))
    }

    /// Passes the counted groups from group `index` (where the walk stands, `at`) on in the
    /// walk's direction that make at most `before_page` rows inside the range: how many are
    /// found with one search of `spans`, then, for a token list, each is checked once a snapshot
    /// (its emitters of the kinds they had) up to the first that is not, which is forgotten.
    /// False when none is passed.
    fn pass_counted(
        &mut self,
        t: &ReadTxn,
        marks: &WalkMarks,
        (spans, index, at): (&Spans, u64, u64),
        before_page: u64,
        checked: &mut HashMap<Address, bool>,
    ) -> DbResult<bool> {
        let fits = match self.sort {
            Sort::Asc => spans.fit_up(index, before_page, self.high),
            Sort::Desc => spans.fit_down(index, before_page, self.low),
        };
        let snapshot = t.snapshot_id()?;
        let mut passing = if spans.with_emitters { 0 } else { fits };
        while passing < fits {
            let g = match self.sort {
                Sort::Asc => index + passing,
                Sort::Desc => index - passing,
            };
            if !spans.checked_in(g, snapshot) {
                let Some(group) = spans.group(g) else { break };
                if !self.emitters_unchanged(t, group, checked)? {
                    marks.forget(&self.stream, g);
                    break;
                }
                spans.mark_checked(g, snapshot);
            }
            passing += 1;
        }
        let lowest = match self.sort {
            Sort::Asc => index,
            Sort::Desc => (index + 1).saturating_sub(passing),
        };
        let Some(passed) = spans.passed(lowest, passing) else { return Ok(false) };
        let inside = match self.sort {
            Sort::Asc => passed.first >= self.bound,
            Sort::Desc => passed.last < self.bound,
        };
        if !inside {
            return Ok(false);
        }
        self.skipped += passed.rows;
        self.skipped_groups += passed.groups;
        (self.bound, self.at) = match self.sort {
            Sort::Asc => (passed.last + 1, Some(at + passed.groups * GROUP)),
            Sort::Desc => (passed.first, Some(at - passed.groups * GROUP)),
        };
        Ok(true)
    }

    /// Whether every contract in `group` is of the kinds it was when the group was counted
    /// (`checked`: what this walk found of each before).
    fn emitters_unchanged(
        &mut self,
        t: &ReadTxn,
        group: &Group,
        checked: &mut HashMap<Address, bool>,
    ) -> DbResult<bool> {
        self.checked_groups += 1;
        for (emitter, kinds) in group.emitters.iter() {
            let same = match checked.get(emitter) {
                Some(&same) => same,
                None => {
                    let same = TokenKinds::of(&attributes(t, emitter)?) == *kinds;
                    checked.insert(*emitter, same);
                    same
                }
            };
            if !same {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// For each of `groups` (consecutive, from index `start`), whether it holds: true for one
    /// counted in this server, else [`Walk::still_holds`], found by reading the source's ids in
    /// slices of groups (a group's first and last id where its positions say) instead of four
    /// searches a group — a restart's marks can hold thousands of one list's groups.
    fn confirm_loaded(&self, t: &ReadTxn, start: u64, groups: &[Arc<Group>]) -> DbResult<Vec<bool>> {
        const SLICE: usize = 64;
        let mut holds = vec![true; groups.len()];
        if !groups.iter().any(|g| g.loaded) {
            return Ok(holds);
        }
        let settled = self.source.settled(t)?;
        for (k, slice) in groups.chunks(SLICE).enumerate() {
            let (offset, Some(head)) = (k * SLICE, slice.first()) else { continue };
            let head_index = start + offset as u64;
            if self.source.rank(t, head.first)? != head_index * GROUP {
                for (j, group) in slice.iter().enumerate().filter(|(_, g)| g.loaded) {
                    holds[offset + j] = self.still_holds(t, head_index + j as u64, group)?;
                }
                continue;
            }
            let (ids, _) = self.source.step(t, Sort::Asc, head.first, slice.len() * GROUP as usize)?;
            for (j, group) in slice.iter().enumerate().filter(|(_, g)| g.loaded) {
                let at = j * GROUP as usize;
                holds[offset + j] = (head_index + j as u64 + 1) * GROUP <= settled
                    && ids.get(at) == Some(&group.first)
                    && ids.get(at + GROUP as usize - 1) == Some(&group.last);
            }
        }
        Ok(holds)
    }

    /// Whether group `index` of the source is still settled and still spans `group`'s ids: its
    /// first id at its first position, its last at its last. A group read from the marks file is
    /// checked so before its count is used, since the index beside the file may have been built
    /// anew (and a chain's settled lists only ever grow at their end).
    fn still_holds(&self, t: &ReadTxn, index: u64, group: &Group) -> DbResult<bool> {
        let start = index * GROUP;
        let (Some(after_first), Some(after_last)) = (group.first.checked_add(1), group.last.checked_add(1))
        else {
            return Ok(false);
        };
        Ok(start + GROUP <= self.source.settled(t)?
            && self.source.rank(t, group.first)? == start
            && self.source.rank(t, after_first)? == start + 1
            && self.source.rank(t, group.last)? == start + GROUP - 1
            && self.source.rank(t, after_last)? == start + GROUP)
    }

    /// The account whose own `txlist` this walk reads (its appearances, the rows it is a
    /// top-level party of), if it is one: the index knows which of those it sent.
    fn own_account(&self) -> Option<Address> {
        match (self.stream, self.source) {
            (Stream::Transactions(address), Source::Appearances(_)) => Some(address),
            _ => None,
        }
    }

    /// Whether the index counts this walk's settled groups by itself: an account's own `txlist`,
    /// a token list of a party (of all tokens: the transfer rows index counts per party; of one:
    /// the party–token index), a token's own list, or an address's internal transactions.
    fn counted_in_index(&self) -> bool {
        self.own_account().is_some()
            || self.token_party().is_some()
            || self.moves_of_token().is_some()
            || self.internal_party().is_some()
    }

    /// The address whose `txlistinternal` this walk reads over its internal-transaction index.
    fn internal_party(&self) -> Option<Address> {
        match (self.stream, self.source) {
            (Stream::InternalTxs(address), Source::InternalTxs(_)) => Some(address),
            _ => None,
        }
    }

    /// The kind and list of a token list of one token over the transactions that move it: the
    /// token's own (`contractaddress` alone) or a party's (`address` too).
    fn moves_of_token(&self) -> Option<(TokenKind, Moves)> {
        match (self.stream, self.source) {
            (Stream::Movements(kind, None, Some(_)), Source::Moves(moves @ Moves::Token(_))) => {
                Some((kind, moves))
            }
            (Stream::Movements(kind, Some(_), Some(_)), Source::Moves(moves @ Moves::PartyToken { .. })) => {
                Some((kind, moves))
            }
            _ => None,
        }
    }

    /// The kind and party of a token list of one party over its transfer index, all tokens.
    fn token_party(&self) -> Option<(TokenKind, Address)> {
        match (self.stream, self.source) {
            (Stream::Movements(kind, Some(party), None), Source::Transfers(..)) => Some((kind, party)),
            _ => None,
        }
    }

    /// The rows of the settled group of ids `first..=last` (`len` of them), if the index alone
    /// says (see [`Walk::counted_by_index`]).
    fn rows_from_index(&self, t: &ReadTxn, (first, last): (u64, u64), len: u64) -> DbResult<Option<u64>> {
        if let Some(address) = self.own_account() {
            return own_rows_from_index(t, &address, first, last);
        }
        if let Some((kind, moves)) = self.moves_of_token() {
            return token_moves::rows_within(t, moves, kind, (first, last));
        }
        if let Some(address) = self.internal_party() {
            return internal_ids::rows_within(t, &address, (first, last), len);
        }
        match self.token_party() {
            Some((kind, party)) => movement_rows_from_index(t, kind, &party, (first, last), len),
            None => Ok(None),
        }
    }

    /// The group ahead of position `at`, counted from the index alone where it can be: a settled
    /// group of an address's appearances makes a `txlist` row for each it sent or received (the
    /// lists mark both), so an account's history needs no node to be skipped (below the received
    /// marks of a database upgraded from format 10, only a group it sent every one of is); a
    /// settled group of a party's transfer index (or internal-transaction index) makes a row for
    /// each transaction plus the rows the transfer rows index (or internal rows index) holds
    /// beyond them; one of a token's own list, the rows its ids code.
    fn counted_by_index(&self, t: &ReadTxn, at: u64) -> DbResult<Option<Group>> {
        if !self.counted_in_index() {
            return Ok(None);
        }
        let end = match self.sort {
            Sort::Asc => at + GROUP,
            Sort::Desc => at,
        };
        if end > self.source.settled(t)? {
            return Ok(None);
        }
        let (ids, _) = self.source.step(t, self.sort, self.bound, GROUP as usize)?;
        let (Some(&first), Some(&last)) = (ids.iter().min(), ids.iter().max()) else { return Ok(None) };
        if ids.len() as u64 != GROUP {
            return Ok(None);
        }
        let Some(rows) = self.rows_from_index(t, (first, last), GROUP)? else { return Ok(None) };
        Ok(Some(Group { first, last, rows, emitters: Arc::new([]), loaded: false }))
    }

    /// The next step of ids to turn into rows, after skipping what the server's marks counted;
    /// `None` once the page is full or the walk is over.
    pub(super) fn next(&mut self, api: &Etherscan) -> Result<Option<Step>, Answer> {
        let started = Instant::now();
        let step = api.read(|t| self.next_in(t, &api.marks));
        let ids = step.as_ref().ok().and_then(Option::as_ref).map_or(0, |s| s.ids.len());
        self.timer.index_part(started.elapsed(), ids);
        step
    }

    /// [`Walk::next`] over snapshot `t` with `marks`.
    fn next_in(&mut self, t: &ReadTxn, marks: &WalkMarks) -> DbResult<Option<Step>> {
        if self.done || self.skipped + self.found >= self.window.skip.saturating_add(self.window.rows) {
            return Ok(None);
        }
        self.skip_counted(t, marks)?;
        let at = self.position(t)?;
        let want = match self.sort {
            Sort::Asc => GROUP - at % GROUP,
            Sort::Desc if at.is_multiple_of(GROUP) => GROUP,
            Sort::Desc => at % GROUP,
        };
        let (ids, more) = self.source.step(t, self.sort, self.bound, want as usize)?;
        let inside: Vec<TxId> =
            ids.iter().copied().filter(|&id| self.low <= id && id < self.high).map(TxId).collect();
        let (Some(&first), Some(&last)) = (ids.iter().min(), ids.iter().max()) else {
            self.done = true;
            return Ok(None);
        };
        // An id past the range's far end ends the walk, as does the list's end.
        self.done = !more || inside.len() < ids.len();
        let whole = ids.len() as u64 == GROUP && inside.len() == ids.len();
        let settled = self.source.settled(t)?;
        let group = match self.sort {
            Sort::Asc => {
                self.bound = last + 1;
                self.at = Some(at + ids.len() as u64);
                self.group_ahead(at).filter(|_| whole && at + GROUP <= settled)
            }
            Sort::Desc => {
                self.bound = first;
                self.at = Some(at - ids.len() as u64);
                self.group_ahead(at).filter(|_| whole && at <= settled)
            }
        };
        let tip = state::read_tip(t)?.unwrap_or_default();
        let reaches_page = group.is_some() && group == self.reaching;
        Ok(Some(Step { ids: inside, tip, group: group.map(|g| (g, first, last)), reaches_page }))
    }

    /// The ids of the [`READ_AHEAD`] groups after the walk's bound, a group's ids each, when
    /// the walk is still short of its page by more than `step` can make (a step makes a row per
    /// transaction or more) and has walked past what it read ahead before; else none. Page 1
    /// never reads ahead.
    pub(super) fn read_ahead(&mut self, api: &Etherscan, step: &Step) -> Result<Vec<Vec<TxId>>, Answer> {
        if !self.wants_read_ahead(step) || api.pages.transaction_cache().budget() < READ_AHEAD_CACHE_BYTES {
            return Ok(Vec::new());
        }
        let started = Instant::now();
        let ahead = api.read(|t| self.read_ahead_in(t, &api.marks));
        self.timer.index_part(started.elapsed(), 0);
        ahead
    }

    fn wants_read_ahead(&self, step: &Step) -> bool {
        let short = self.window.skip.saturating_sub(self.skipped + self.found);
        let passed = match (self.ahead, self.sort) {
            (None, _) => true,
            (Some(end), Sort::Asc) => self.bound >= end,
            (Some(end), Sort::Desc) => self.bound <= end,
        };
        !self.done && passed && short > step.ids.len() as u64
    }

    /// [`Walk::read_ahead`]'s ids over snapshot `t`: up to the first group ahead that `marks`
    /// counted, which the walk will likely skip.
    fn read_ahead_in(&mut self, t: &ReadTxn, marks: &WalkMarks) -> DbResult<Vec<Vec<TxId>>> {
        let at = self.position(t)?;
        let cap = READ_AHEAD * GROUP;
        // The rest of the group the walk stands in is never skipped; whole groups are read
        // until the first one counted.
        let want = match self.sort {
            Sort::Asc => {
                let mut group = at.div_ceil(GROUP);
                while group * GROUP < at + cap && marks.get(&self.stream, group).is_none() {
                    group += 1;
                }
                (group * GROUP - at).min(cap)
            }
            Sort::Desc => {
                let mut end = at / GROUP * GROUP;
                while at - end < cap && end > 0 && marks.get(&self.stream, end / GROUP - 1).is_none() {
                    end -= GROUP;
                }
                (at - end).min(cap)
            }
        };
        if want == 0 {
            return Ok(Vec::new());
        }
        let (ids, _) = self.source.step(t, self.sort, self.bound, want as usize)?;
        // Cut where the groups start, so that a group the index counts by itself (an account's
        // own) is not read ahead either.
        let first = match self.sort {
            Sort::Asc => (GROUP - at % GROUP) % GROUP,
            Sort::Desc => at % GROUP,
        };
        let (partial, whole) = ids.split_at((first as usize).min(ids.len()));
        let settled = match self.counted_in_index() {
            true => Some(self.source.settled(t)?),
            false => None,
        };
        let mut groups = vec![partial];
        let mut edge = match self.sort {
            Sort::Asc => at + first,
            Sort::Desc => at - first,
        };
        for group in whole.chunks(GROUP as usize) {
            let (Some(&low), Some(&high)) = (group.iter().min(), group.iter().max()) else { break };
            let end = match self.sort {
                Sort::Asc => edge + GROUP,
                Sort::Desc => edge,
            };
            if let Some(settled) = settled {
                let full = group.len() as u64 == GROUP && end <= settled;
                if full && self.rows_from_index(t, (low, high), GROUP)?.is_some() {
                    self.ahead = Some(match self.sort {
                        Sort::Asc => low,
                        Sort::Desc => high + 1,
                    });
                    return Ok(Self::inside_of(groups, (self.low, self.high)));
                }
            }
            groups.push(group);
            edge = match self.sort {
                Sort::Asc => edge + GROUP,
                Sort::Desc => edge.saturating_sub(GROUP),
            };
        }
        self.ahead = match self.sort {
            Sort::Asc => ids.iter().max().map(|last| last + 1),
            Sort::Desc => ids.iter().min().copied(),
        };
        Ok(Self::inside_of(groups, (self.low, self.high)))
    }

    /// Each group's ids inside `low..high`, the empty ones left out.
    fn inside_of(groups: Vec<&[u64]>, (low, high): (u64, u64)) -> Vec<Vec<TxId>> {
        groups
            .into_iter()
            .map(|g| g.iter().copied().filter(|&id| low <= id && id < high).map(TxId).collect::<Vec<_>>())
            .filter(|g| !g.is_empty())
            .collect()
    }

    /// The block of the farthest of the next `ids` ids the walk would read inside its range, in
    /// its direction; `None` past the range's end.
    fn block_ahead(&self, api: &Etherscan, ids: u64) -> Result<Option<u64>, Answer> {
        api.read(|t| {
            let (ids, _) =
                self.source.step(t, self.sort, self.bound, usize::try_from(ids).unwrap_or(usize::MAX))?;
            let inside = ids.into_iter().filter(|&id| self.low <= id && id < self.high);
            let far = match self.sort {
                Sort::Asc => inside.max(),
                Sort::Desc => inside.min(),
            };
            Ok(far.map(|id| TxId(id).block()))
        })
    }

    /// How many groups after the walk's position a token list's logs are worth reading ahead
    /// for: those the index does not count (the reorg window's; any, `None`, for a list the
    /// index does not count, or in a database upgraded from before its rows were counted).
    fn groups_uncounted_ahead(&self, api: &Etherscan) -> Result<Option<u64>, Answer> {
        let (party, moves) = (self.token_party(), self.moves_of_token());
        if party.is_none() && moves.is_none() {
            return Ok(None);
        }
        let Some(at) = self.at else { return Ok(None) };
        api.read(|t| {
            let counted_from = match moves {
                Some((_, moves)) => moves.from(t)?,
                None => state::read_transfer_rows_from(t)?,
            };
            if counted_from > 0 {
                return Ok(None);
            }
            let settled = self.source.settled(t)?;
            Ok(match self.sort {
                Sort::Asc if at >= settled => None,
                Sort::Asc => Some(0),
                Sort::Desc => Some(at.saturating_sub(settled).div_ceil(GROUP)),
            })
        })
    }

    /// Rows still to pass before the page.
    fn short_of_page(&self) -> u64 {
        self.window.skip.saturating_sub(self.skipped + self.found)
    }

    /// Whether every row `step` can make lies before the page (a `txlist` step makes at most a
    /// row per transaction).
    fn before_page(&self, step: &Step) -> bool {
        self.short_of_page() >= step.ids.len() as u64
    }

    /// Takes note of the rows of `step`, all before the page, counted without making them.
    fn counted(&mut self, api: &Etherscan, step: &Step, counted: &Counted) -> Result<(), Answer> {
        self.took(api, step, counted.rows, &counted.emitters)?;
        self.found -= counted.rows;
        self.skipped += counted.rows;
        Ok(())
    }

    /// Takes note of the `rows` the caller made of `step`; `emitters` are the contracts whose
    /// transfer-shaped logs the step's receipts hold (token lists only).
    pub(super) fn took(
        &mut self,
        api: &Etherscan,
        step: &Step,
        rows: u64,
        emitters: &[Address],
    ) -> Result<(), Answer> {
        if step.group.is_none() {
            self.found += rows;
            return Ok(());
        }
        api.read(|t| self.took_in(t, &api.marks, step, rows, emitters))
    }

    /// [`Walk::took`] over snapshot `t` (where the emitters' kinds are read) with `marks`.
    fn took_in(
        &mut self,
        t: &ReadTxn,
        marks: &WalkMarks,
        step: &Step,
        rows: u64,
        emitters: &[Address],
    ) -> DbResult<()> {
        self.found += rows;
        let Some((index, first, last)) = step.group else { return Ok(()) };
        let mut kinds = Vec::new();
        if let Stream::Movements(..) = self.stream {
            let mut distinct = emitters.to_vec();
            distinct.sort_unstable();
            distinct.dedup();
            for a in distinct {
                kinds.push((a, TokenKinds::of(&attributes(t, &a)?)));
            }
        }
        marks.keep(self.stream, index, Group { first, last, rows, emitters: kinds.into(), loaded: false });
        Ok(())
    }

    /// The page's rows among `found`, the rows made of the steps walked.
    pub(super) fn page(self, found: Vec<Value>) -> Vec<Value> {
        let skip = self.window.skip - self.skipped;
        page_of(found, Window { skip, rows: self.window.rows })
    }
}

/// The rows of `window` among those `rows_of` makes of the transactions of `source` in blocks
/// `start..=end`, read in `sort`'s order (a transaction's rows in log or frame order, reversed
/// when descending); `stream` names those rows for the marks.
pub(super) async fn walk(
    api: &Etherscan,
    (source, stream): (Source, Stream),
    range: (u64, u64),
    window: Window,
    sort: Sort,
    mut rows_of: impl FnMut(&Walked<'_>, &ReadTxn) -> DbResult<Vec<Value>>,
) -> Result<Vec<Value>, Answer> {
    let mut walk = Walk::new(source, stream, range, window, sort);
    let mut found: Vec<Value> = Vec::new();
    // An account's `txlist` steps before the page are counted, not made: see `top_level_rows`.
    let own = walk.own_account();
    let mut recipients: HashMap<u64, Option<Address>> = HashMap::new();
    // A token list's steps before the page are counted from the node's logs, until it refuses.
    let mut by_logs = matches!(stream, Stream::Movements(..));
    let mut span: Option<SpanLogs> = None;
    while let Some(step) = walk.next(api)? {
        if by_logs && walk.short_of_page() > 0 && !step.reaches_page {
            if !span.as_ref().is_some_and(|s| s.covers(&step.ids)) {
                span = logs_for(api, &walk, stream, &step).await?;
            }
            match span.as_ref().and_then(|s| s.count(api, stream, &step.ids)) {
                Some(c) if c.rows <= walk.short_of_page() => {
                    walk.counted(api, &step, &c)?;
                    continue;
                }
                Some(_) => {}
                None => by_logs = false,
            }
        }
        let mut ahead = walk.read_ahead(api, &step)?;
        if let Some(address) = own.filter(|_| walk.before_page(&step)) {
            let (rows, read) = futures::future::join(
                top_level_rows(api, address, &step.ids, &recipients),
                futures::future::join_all(ahead.iter().map(|ids| recipients_ahead(api, address, ids))),
            )
            .await;
            // What is read ahead only saves node calls: a failure there shows in its own step.
            recipients.extend(read.into_iter().flatten().flatten());
            for id in &step.ids {
                recipients.remove(&id.0);
            }
            if let Some(rows) = rows? {
                walk.counted(api, &step, &Counted { rows, emitters: Vec::new() })?;
                continue;
            }
            ahead.clear();
        }
        // What is read ahead only fills the cache: a failure there shows in its own step.
        let (fetched, _) = futures::future::join(
            api.transactions(&step.ids),
            futures::future::join_all(ahead.iter().map(|ids| api.transactions(ids))),
        )
        .await;
        let (summaries, txs) = fetched?;
        let rows = api.read(|t| {
            let mut rows = Vec::new();
            for (id, tx) in step.ids.iter().zip(&txs) {
                let timestamp =
                    summaries.get(&format!("{:#x}", id.block())).map(|s| s.timestamp).unwrap_or_default();
                let mut of_tx = rows_of(&Walked { block: id.block(), timestamp, tip: step.tip, tx }, t)?;
                if sort == Sort::Desc {
                    of_tx.reverse();
                }
                rows.extend(of_tx);
            }
            Ok(rows)
        })?;
        let emitters: Vec<Address> = match stream {
            Stream::Movements(..) => txs.iter().flat_map(|tx| transfer_emitters(&tx.receipt)).collect(),
            _ => Vec::new(),
        };
        walk.took(api, &step, rows.len() as u64, &emitters)?;
        found.extend(rows);
    }
    Ok(walk.page(found))
}

/// Groups of a token list whose logs one `eth_getLogs` batch reads ahead of the step that asks.
const LOGS_AHEAD: u64 = 8;

/// The logs token list `stream` can show for `step` and for as many groups after it (up to
/// [`LOGS_AHEAD`]) as the rows the walk is still short of could fill at a row a transaction: one
/// query over their blocks instead of one a step. A refused wide query is asked again for the
/// step's blocks alone; `None` when that is refused too.
async fn logs_for(
    api: &Etherscan,
    walk: &Walk,
    stream: Stream,
    step: &Step,
) -> Result<Option<SpanLogs>, Answer> {
    let blocks = step.ids.iter().map(|id| id.block());
    let (Some(low), Some(high)) = (blocks.clone().min(), blocks.max()) else { return Ok(None) };
    let groups = (walk.short_of_page().saturating_sub(step.ids.len() as u64) / GROUP).min(LOGS_AHEAD);
    let groups = walk.groups_uncounted_ahead(api)?.map_or(groups, |uncounted| groups.min(uncounted));
    if groups > 0 {
        if let Some(far) = walk.block_ahead(api, groups * GROUP)? {
            if let Some(span) = SpanLogs::read(api, stream, (low.min(far), high.max(far))).await {
                return Ok(Some(span));
            }
        }
    }
    Ok(SpanLogs::read(api, stream, (low, high)).await)
}

/// How many rows of `kind`'s token list of `party` (all tokens) the settled transactions
/// `first..=last` of its transfer index (`len` of them) make, if the index alone says: one each,
/// plus those beyond the first that the transfer rows index holds for them (from
/// `transfer_rows_from` on: a database upgraded from format 12 has none below it). `None` below
/// that, or where a transaction's rows are not counted there (none, or past the codes' reach).
fn movement_rows_from_index(
    t: &ReadTxn,
    kind: TokenKind,
    party: &Address,
    (first, last): (u64, u64),
    len: u64,
) -> DbResult<Option<u64>> {
    if first < state::read_transfer_rows_from(t)? {
        return Ok(None);
    }
    let extra =
        sum_row_ids(
            t,
            IdList::TransferRows,
            party,
            (first, last),
            |id| match transfer_rows::decode_row_id(id) {
                (_, Some(k), _) if k != kind => Some(0),
                (_, _, transfer_rows::UNCOUNTED) => None,
                (_, _, extra) => Some(extra),
            },
        )?;
    Ok(extra.map(|extra| len + extra))
}

/// How many `txlist` rows of `address` the settled group of its appearances `first..=last` makes,
/// if the index alone says: from the sent and received marks, or below the received marks (see
/// [`appearances::settled_listed_within`]) when it sent every one of them.
fn own_rows_from_index(t: &ReadTxn, address: &Address, first: u64, last: u64) -> DbResult<Option<u64>> {
    if let Some(rows) = appearances::settled_listed_within(t, address, first, last)? {
        return Ok(Some(rows));
    }
    let sent = appearances::settled_sent_within(t, address, first, last)?;
    Ok((sent == GROUP).then_some(GROUP))
}

/// How many `txlist` rows of `address` the transactions `ids` make, all of them before the page:
/// those the index marks as sent or received, and (below the received marks of a database
/// upgraded from format 10) those sent to it, known from the node's transactions alone
/// (`known`: recipients read ahead) — a walk to a deep page asks for no receipts and no
/// transaction the index marks. `None` when one of the unmarked ones creates a contract:
/// whether it created `address` is in its receipt, so the step is read whole.
async fn top_level_rows(
    api: &Etherscan,
    address: Address,
    ids: &[TxId],
    known: &HashMap<u64, Option<Address>>,
) -> Result<Option<u64>, Answer> {
    let (marked, others) = marked_and_others(api, address, ids)?;
    let asked: Vec<TxId> = others.iter().filter(|id| !known.contains_key(&id.0)).copied().collect();
    let fetched = recipients(api, &asked).await?;
    let fetched: HashMap<u64, Option<Address>> = asked.iter().map(|id| id.0).zip(fetched).collect();
    let mut rows = marked;
    for id in &others {
        match known.get(&id.0).or_else(|| fetched.get(&id.0)) {
            Some(Some(to)) => rows += u64::from(*to == address),
            _ => return Ok(None),
        }
    }
    Ok(Some(rows))
}

/// The recipients of those of `ids` whose role the index does not mark, read ahead for
/// [`top_level_rows`].
async fn recipients_ahead(
    api: &Etherscan,
    address: Address,
    ids: &[TxId],
) -> Result<Vec<(u64, Option<Address>)>, Answer> {
    let (_, others) = marked_and_others(api, address, ids)?;
    let got = recipients(api, &others).await?;
    Ok(others.iter().map(|id| id.0).zip(got).collect())
}

/// How many of `ids` the index marks as `address`'s rows (sent or received), and those whose
/// role it does not know.
fn marked_and_others(api: &Etherscan, address: Address, ids: &[TxId]) -> Result<(u64, Vec<TxId>), Answer> {
    let raw: Vec<u64> = ids.iter().map(|id| id.0).collect();
    let roles = api.read(|t| appearances::roles_among(t, &address, &raw))?;
    let others: Vec<TxId> =
        ids.iter().zip(&roles).filter(|(_, role)| role.is_none()).map(|(&id, _)| id).collect();
    let marked = roles.iter().flatten().filter(|role| role.listed()).count() as u64;
    Ok((marked, others))
}

/// The node's recipients of `ids`, or the refusal that says why not.
async fn recipients(api: &Etherscan, ids: &[TxId]) -> Result<Vec<Option<Address>>, Answer> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    api.pages.recipients(ids).await.map_err(|e| Answer::refuse(format!("Error! {}", e.message())))
}

/// `window`'s rows of the rows found from the start of a walk.
pub(super) fn page_of(found: Vec<Value>, window: Window) -> Vec<Value> {
    let skip = usize::try_from(window.skip).unwrap_or(usize::MAX);
    let rows = usize::try_from(window.rows).unwrap_or(usize::MAX);
    found.into_iter().skip(skip).take(rows).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{
        db::{
            codec::{AttributeBit, IndexKind, ListId, RecentKey},
            tables::{
                OtsERC20TransferCounter, OtsERC20TransferIndex, OtsRecentIdsByAddress,
                OtsTransferRowsCounter, OtsTransferRowsIndex,
            },
            AccessMode, Db,
        },
        decode::TokenKind,
        index::families::{address_index::chunks::append_ids, attributes::add_attribute},
    };

    const HOLDER: Address = Address::repeat_byte(0x11);
    const TOKEN: Address = Address::repeat_byte(0x22);
    /// Ids the transfer index's table holds (older than the window), and ids the window holds.
    const SETTLED: u64 = 1_050;
    const RECENT: u64 = 30;

    /// Three transactions a block, from block 10 on: the table's, then the window's.
    fn id(n: u64) -> u64 {
        TxId::first_of_block(10 + n / 3).0 + n % 3
    }

    fn database() -> (tempfile::TempDir, Db) {
        database_of(0..SETTLED, SETTLED..SETTLED + RECENT)
    }

    /// The holder's transfer list: ids `id(n)` of `settled` in the table, of `recent` in the
    /// window, with the transfer rows index [`rows_of`] makes.
    fn database_of(settled: std::ops::Range<u64>, recent: std::ops::Range<u64>) -> (tempfile::TempDir, Db) {
        database_with(settled, recent, &|id| rows_of(id).len() as u64)
    }

    /// [`database_of`] with the transfer rows index of transactions making `rows` rows each.
    fn database_with(
        settled: std::ops::Range<u64>,
        recent: std::ops::Range<u64>,
        rows: &dyn Fn(TxId) -> u64,
    ) -> (tempfile::TempDir, Db) {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
        let txn = db.begin_write().expect("write");
        let row_ids = |ids: &[u64]| -> Vec<u64> {
            ids.iter()
                .filter_map(|&i| transfer_rows::row_id(TxId(i), TokenKind::Erc20, rows(TxId(i))))
                .collect()
        };
        let settled: Vec<u64> = settled.map(id).collect();
        append_ids::<OtsERC20TransferIndex, OtsERC20TransferCounter>(&txn, &HOLDER, &settled)
            .expect("append");
        append_ids::<OtsTransferRowsIndex, OtsTransferRowsCounter>(&txn, &HOLDER, &row_ids(&settled))
            .expect("append");
        let recent: Vec<u64> = recent.map(id).collect();
        let key = RecentKey { kind: IndexKind::Erc20Transfers, address: HOLDER };
        for &n in &recent {
            txn.put::<OtsRecentIdsByAddress>(&key, &ListId(n)).expect("recent");
        }
        let key = RecentKey { kind: IndexKind::TransferRows, address: HOLDER };
        for n in row_ids(&recent) {
            txn.put::<OtsRecentIdsByAddress>(&key, &ListId(n)).expect("recent");
        }
        txn.commit().expect("commit");
        (dir, db)
    }

    /// The rows a transaction makes: none, one or two, by its id.
    fn rows_of(id: TxId) -> Vec<Value> {
        (0..id.0 % 3).map(|k| json!([id.0, k])).collect()
    }

    /// Every row in blocks `range`, oldest first.
    fn all_rows((start, end): (u64, u64)) -> Vec<Value> {
        (0..SETTLED + RECENT)
            .map(|n| TxId(id(n)))
            .filter(|t| (start..=end).contains(&t.block()))
            .flat_map(rows_of)
            .collect()
    }

    /// One page as `walk` reads it, and how many transactions it turned into rows.
    fn read(
        db: &Db,
        marks: &WalkMarks,
        stream: Stream,
        range: (u64, u64),
        window: Window,
        sort: Sort,
    ) -> (Vec<Value>, usize) {
        let source = Source::Transfers(IdList::Erc20Transfers, HOLDER);
        read_from(db, marks, (source, stream), range, window, sort, &rows_of)
    }

    fn read_from(
        db: &Db,
        marks: &WalkMarks,
        (source, stream): (Source, Stream),
        range: (u64, u64),
        window: Window,
        sort: Sort,
        rows_of: &dyn Fn(TxId) -> Vec<Value>,
    ) -> (Vec<Value>, usize) {
        let mut walk = Walk::new(source, stream, range, window, sort);
        let (mut found, mut fetched) = (Vec::new(), 0);
        let t = db.begin_read().expect("read");
        let (mut read_ahead, mut walked) = (Vec::new(), std::collections::HashSet::new());
        while let Some(step) = walk.next_in(&t, marks).expect("step") {
            walked.extend(step.ids.iter().copied());
            if walk.wants_read_ahead(&step) {
                for ids in walk.read_ahead_in(&t, marks).expect("read ahead") {
                    assert!(ids.len() <= GROUP as usize);
                    assert!(ids.iter().all(|id| (range.0..=range.1).contains(&id.block())), "{ids:?}");
                    read_ahead.extend(ids);
                }
            }
            fetched += step.ids.len();
            let mut rows = Vec::new();
            for &id in &step.ids {
                let mut of_tx = rows_of(id);
                if sort == Sort::Desc {
                    of_tx.reverse();
                }
                rows.extend(of_tx);
            }
            walk.took_in(&t, marks, &step, rows.len() as u64, &[TOKEN]).expect("took");
            found.extend(rows);
        }
        // Page 1 reads nothing ahead; what is read ahead short of where the walk ended is what
        // it walked (a counted group it skips is not read ahead).
        assert!(window.skip > 0 || read_ahead.is_empty(), "page 1 reads nothing ahead");
        let end = match sort {
            Sort::Asc => walked.iter().max().copied(),
            Sort::Desc => walked.iter().min().copied(),
        };
        for id in read_ahead {
            let short_of_end = end.is_some_and(|end| if sort == Sort::Asc { id < end } else { id > end });
            assert!(!short_of_end || walked.contains(&id), "{id:?} read ahead and skipped");
        }
        (walk.page(found), fetched)
    }

    /// A first walk to a deep page finds every step after its first read ahead, a group's ids
    /// at a time, and page 1 reads nothing ahead.
    #[test]
    fn a_walk_short_of_its_page_reads_the_groups_ahead() {
        let (_dir, db) = database();
        let t = db.begin_read().expect("read");
        let stream = Stream::Transactions(HOLDER);
        let source = Source::Transfers(IdList::Erc20Transfers, HOLDER);
        for sort in [Sort::Asc, Sort::Desc] {
            for (window, reads_ahead) in
                [(Window { skip: 0, rows: 25 }, false), (Window { skip: 900, rows: 25 }, true)]
            {
                let marks = WalkMarks::default();
                let mut walk = Walk::new(source, stream, (0, u64::MAX), window, sort);
                let (mut ahead, mut steps, mut not_read_ahead) = (Vec::new(), 0, 0);
                while let Some(step) = walk.next_in(&t, &marks).expect("step") {
                    steps += 1;
                    if steps > 1 && !step.ids.iter().all(|id| ahead.contains(id)) {
                        not_read_ahead += 1;
                    }
                    if walk.wants_read_ahead(&step) {
                        for ids in walk.read_ahead_in(&t, &marks).expect("read ahead") {
                            assert!(ids.len() as u64 <= GROUP);
                            ahead.extend(ids);
                        }
                    }
                    let rows = step.ids.iter().map(|&id| rows_of(id).len() as u64).sum();
                    walk.took_in(&t, &marks, &step, rows, &[TOKEN]).expect("took");
                }
                assert_eq!(!ahead.is_empty(), reads_ahead, "{sort:?} {window:?}");
                if reads_ahead {
                    assert!(steps > 5, "{steps}");
                    assert!(
                        not_read_ahead <= 1,
                        "{not_read_ahead} of {steps} steps not read ahead ({sort:?})"
                    );
                }
            }
        }
    }

    fn expected(range: (u64, u64), window: Window, sort: Sort) -> Vec<Value> {
        let mut rows = all_rows(range);
        if sort == Sort::Desc {
            rows.reverse();
        }
        page_of(rows, window)
    }

    /// Pages of both sorts, ranges and sizes read as the plain walk does, whatever the marks
    /// hold; a deep page read again skips the groups an earlier walk counted (in either sort),
    /// and only groups older than the window are kept.
    #[test]
    fn pages_skip_the_groups_earlier_walks_counted() {
        let (_dir, db) = database();
        let marks = WalkMarks::default();
        let stream = Stream::Transactions(HOLDER);
        let whole = (0, u64::MAX);
        let total = all_rows(whole).len() as u64;
        let deep = Window { skip: total - 150, rows: 40 };

        let (rows, first_time) = read(&db, &marks, stream, whole, deep, Sort::Asc);
        assert_eq!(rows, expected(whole, deep, Sort::Asc));
        assert!(first_time >= 1_000, "a first walk reads what lies before the page: {first_time}");
        let (_, groups) = marks.usage();
        assert_eq!(groups as u64, SETTLED / GROUP, "every whole settled group, none of the window's");

        let (rows, again) = read(&db, &marks, stream, whole, deep, Sort::Asc);
        assert_eq!(rows, expected(whole, deep, Sort::Asc));
        assert!(again <= 3 * GROUP as usize, "the same page again skips counted groups: {again}");

        let from_end = Window { skip: total - 200, rows: 25 };
        let (rows, desc) = read(&db, &marks, stream, whole, from_end, Sort::Desc);
        assert_eq!(rows, expected(whole, from_end, Sort::Desc));
        assert!(desc <= 3 * GROUP as usize, "descending pages use the ascending walk's groups: {desc}");

        for range in [whole, (15, 300), (40, 360), (0, 12)] {
            for sort in [Sort::Asc, Sort::Desc] {
                for (skip, rows) in [(0, 7), (1, 100), (333, 50), (700, 1_000), (1_040, 20), (5_000, 10)] {
                    let window = Window { skip, rows };
                    for fresh in [WalkMarks::default(), WalkMarks::default()] {
                        // The first read fills `fresh`, the second reads from it.
                        let first = read(&db, &fresh, stream, range, window, sort).0;
                        let second = read(&db, &fresh, stream, range, window, sort).0;
                        let shared = read(&db, &marks, stream, range, window, sort).0;
                        let want = expected(range, window, sort);
                        assert_eq!(
                            (first, second, shared),
                            (want.clone(), want.clone(), want),
                            "{range:?} {sort:?} {skip}+{rows}"
                        );
                    }
                }
            }
        }
    }

    /// A deep page read again in one snapshot passes the counted groups without looking at each
    /// one: their contracts are checked once a snapshot (again after a write), and the groups a
    /// page passes are found with one search whatever their number, in both sorts.
    #[test]
    fn a_deep_page_passes_counted_groups_checked_once_a_snapshot() {
        let (_dir, db) = database();
        let marks = WalkMarks::default();
        let stream = Stream::Movements(TokenKind::Erc20, Some(HOLDER), None);
        let source = Source::Transfers(IdList::Erc20Transfers, HOLDER);
        let whole = (0, u64::MAX);
        let deep = Window { skip: 900, rows: 10 };
        // (groups passed, groups checked one by one, the page's rows)
        let walk = |sort: Sort| {
            let t = db.begin_read().expect("read");
            let mut walk = Walk::new(source, stream, whole, deep, sort);
            let mut found = Vec::new();
            while let Some(step) = walk.next_in(&t, &marks).expect("step") {
                let rows: Vec<Value> = step
                    .ids
                    .iter()
                    .flat_map(|&id| {
                        let mut rows = rows_of(id);
                        if sort == Sort::Desc {
                            rows.reverse();
                        }
                        rows
                    })
                    .collect();
                walk.took_in(&t, &marks, &step, rows.len() as u64, &[TOKEN]).expect("took");
                found.extend(rows);
            }
            (walk.skipped_groups, walk.checked_groups, walk.page(found))
        };
        let (passed, _, rows) = walk(Sort::Asc);
        assert_eq!((passed, rows), (0, expected(whole, deep, Sort::Asc)), "a first walk counts");
        let (passed, checked, rows) = walk(Sort::Asc);
        assert!(passed >= 8, "{passed}");
        assert_eq!((checked, rows), (passed, expected(whole, deep, Sort::Asc)), "each group checked once");
        let (again, checked, rows) = walk(Sort::Asc);
        assert_eq!((again, checked, rows), (passed, 0, expected(whole, deep, Sort::Asc)));
        let (down, checked, rows) = walk(Sort::Desc);
        assert!(down >= 8 && checked <= 1, "{down} {checked}");
        assert_eq!(rows, expected(whole, deep, Sort::Desc));

        let txn = db.begin_write().expect("write");
        add_attribute(&txn, &HOLDER, AttributeBit::Erc20).expect("a write");
        txn.commit().expect("commit");
        let (again, checked, rows) = walk(Sort::Asc);
        assert_eq!(
            (again, checked, rows),
            (passed, passed, expected(whole, deep, Sort::Asc)),
            "a new snapshot"
        );
    }

    /// The marks as a file hands them back after a restart: unchecked.
    fn reloaded(marks: &WalkMarks) -> WalkMarks {
        let (groups, _) = marks.snapshot();
        WalkMarks::from_groups(
            groups.into_iter().map(|(s, i, g)| (s, i, Group { loaded: true, ..(*g).clone() })),
        )
    }

    /// Marks read back from a file skip their groups once the index confirms each still spans
    /// the same ids; against an index built anew with other ids they are dropped and the page
    /// is walked, and still right.
    #[test]
    fn marks_read_back_are_checked_against_the_index_before_use() {
        let (_dir, db) = database();
        let stream = Stream::Transactions(HOLDER);
        let whole = (0, u64::MAX);
        let deep = Window { skip: 900, rows: 30 };
        let counted = WalkMarks::default();
        let (rows, first_time) = read(&db, &counted, stream, whole, deep, Sort::Asc);
        assert_eq!(rows, expected(whole, deep, Sort::Asc));
        assert!(first_time >= 600, "{first_time}");

        let restarted = reloaded(&counted);
        let (rows, walked) = read(&db, &restarted, stream, whole, deep, Sort::Asc);
        assert_eq!(rows, expected(whole, deep, Sort::Asc));
        assert!(walked <= 3 * GROUP as usize, "a restart keeps what was counted: {walked}");
        let (rows, walked) = read(&db, &restarted, stream, whole, deep, Sort::Desc);
        assert_eq!(rows, expected(whole, deep, Sort::Desc));
        assert!(walked <= 3 * GROUP as usize, "{walked}");

        // The same holder's list one id shorter at its start: every group spans other ids.
        let (_other_dir, other) = database_of(1..SETTLED, 0..0);
        let stale = reloaded(&counted);
        let want: Vec<Value> = (1..SETTLED).flat_map(|n| rows_of(TxId(id(n)))).collect();
        let (rows, walked) = read(&other, &stale, stream, whole, deep, Sort::Asc);
        assert_eq!(rows, page_of(want, deep), "stale marks are not used");
        assert!(walked >= 600, "the page is walked: {walked}");
    }

    /// A token list's group is walked again once a contract in it is classified otherwise than
    /// when its rows were counted.
    #[test]
    fn a_token_classified_since_its_group_was_counted_is_walked_again() {
        let (_dir, db) = database();
        let marks = WalkMarks::default();
        let stream = Stream::Movements(TokenKind::Erc20, Some(HOLDER), None);
        let whole = (0, u64::MAX);
        let deep = Window { skip: 800, rows: 10 };
        read(&db, &marks, stream, whole, deep, Sort::Asc);
        assert!(read(&db, &marks, stream, whole, deep, Sort::Asc).1 <= 3 * GROUP as usize);

        let txn = db.begin_write().expect("write");
        add_attribute(&txn, &TOKEN, AttributeBit::Erc20).expect("classify");
        txn.commit().expect("commit");
        let (rows, walked) = read(&db, &marks, stream, whole, deep, Sort::Asc);
        assert_eq!(rows, expected(whole, deep, Sort::Asc));
        assert!(walked >= GROUP as usize * 2, "the first counted group is walked again: {walked}");
        assert!(
            read(&db, &marks, stream, whole, deep, Sort::Asc).1 <= 3 * GROUP as usize,
            "and counted anew"
        );
    }

    /// A party's token list counts its settled groups from the transfer rows index: a first deep
    /// page, in either sort, reads the node for its own groups only (a transaction making two or
    /// three rows counted too); below `transfer_rows_from` (a database upgraded from format 12)
    /// and where a group holds a transaction making no row, the groups are walked.
    #[test]
    fn a_token_list_counts_its_settled_groups_from_the_transfer_rows_index() {
        let made = |id: TxId| -> Vec<Value> { (0..1 + id.0 % 3).map(|k| json!([id.0, k])).collect() };
        let (_dir, db) = database_with(0..SETTLED, SETTLED..SETTLED + RECENT, &|id| made(id).len() as u64);
        let stream = Stream::Movements(TokenKind::Erc20, Some(HOLDER), None);
        let source = Source::Transfers(IdList::Erc20Transfers, HOLDER);
        let whole = (0, u64::MAX);
        let all: Vec<Value> = (0..SETTLED + RECENT).flat_map(|n| made(TxId(id(n)))).collect();
        let deep = Window { skip: 1_500, rows: 10 };
        for sort in [Sort::Asc, Sort::Desc] {
            let mut want = all.clone();
            if sort == Sort::Desc {
                want.reverse();
            }
            let (rows, walked) =
                read_from(&db, &WalkMarks::default(), (source, stream), whole, deep, sort, &made);
            assert_eq!(rows, page_of(want, deep), "{sort:?}");
            assert!(walked <= 2 * GROUP as usize, "only the page's groups are read ({sort:?}): {walked}");
        }
        // The party's rows of one token: the index does not count them by token.
        let one_token = Stream::Movements(TokenKind::Erc20, Some(HOLDER), Some(TOKEN));
        let (rows, walked) =
            read_from(&db, &WalkMarks::default(), (source, one_token), whole, deep, Sort::Asc, &made);
        assert_eq!(rows, page_of(all.clone(), deep));
        assert!(walked >= 500, "one token's rows are walked: {walked}");
        // Upgraded from format 12 half way through the settled ids: the lower half is walked.
        let txn = db.begin_write().expect("write");
        state::set_transfer_rows_from(&txn, id(SETTLED / 2)).expect("state");
        txn.commit().expect("commit");
        let (rows, walked) =
            read_from(&db, &WalkMarks::default(), (source, stream), whole, deep, Sort::Asc, &made);
        assert_eq!(rows, page_of(all, deep));
        assert!(walked >= 500, "below the rows' start the groups are walked: {walked}");
    }

    /// A token's own list counts its settled groups from the token transfers index: a first deep
    /// page, in either sort, reads the node for its own groups only. Upgraded from format 13 half
    /// way, the token's appearances (with transactions that move nothing) stand in below the
    /// index's start, and those groups are walked.
    #[test]
    fn a_tokens_own_list_counts_its_settled_groups_from_the_token_transfers_index() {
        use crate::{
            db::{
                codec::Role,
                tables::{OtsAppearances, OtsTokenTransfersCounter, OtsTokenTransfersIndex},
            },
            index::families::appearances::lists,
        };
        let made = |id: TxId| -> Vec<Value> { (0..1 + id.0 % 3).map(|k| json!([id.0, k])).collect() };
        let row_id = |n: u64| transfer_rows::first_of(id(n)).expect("shifts") | (1 + id(n) % 3);
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
        let txn = db.begin_write().expect("write");
        let settled: Vec<u64> = (0..SETTLED).map(row_id).collect();
        append_ids::<OtsTokenTransfersIndex, OtsTokenTransfersCounter>(&txn, &TOKEN, &settled)
            .expect("append");
        let key = RecentKey { kind: IndexKind::TokenTransfers, address: TOKEN };
        for n in SETTLED..SETTLED + RECENT {
            txn.put::<OtsRecentIdsByAddress>(&key, &ListId(row_id(n))).expect("recent");
        }
        txn.commit().expect("commit");
        let stream = Stream::Movements(TokenKind::Erc20, None, Some(TOKEN));
        let source = Source::Moves(Moves::Token(TOKEN));
        let whole = (0, u64::MAX);
        let all: Vec<Value> = (0..SETTLED + RECENT).flat_map(|n| made(TxId(id(n)))).collect();
        let deep = Window { skip: 1_500, rows: 10 };
        for sort in [Sort::Asc, Sort::Desc] {
            let mut want = all.clone();
            if sort == Sort::Desc {
                want.reverse();
            }
            let (rows, walked) =
                read_from(&db, &WalkMarks::default(), (source, stream), whole, deep, sort, &made);
            assert_eq!(rows, page_of(want, deep), "{sort:?}");
            assert!(walked <= 2 * GROUP as usize, "only the page's groups are read ({sort:?}): {walked}");
        }
        // Its ERC721 list (none of its transfers) is counted empty without a walk.
        let nft = Stream::Movements(TokenKind::Erc721, None, Some(TOKEN));
        let (rows, walked) =
            read_from(&db, &WalkMarks::default(), (source, nft), whole, deep, Sort::Asc, &|_| Vec::new());
        assert!(rows.is_empty());
        assert!(walked <= 2 * GROUP as usize, "the settled groups count no rows unread: {walked}");

        // Upgraded half way: below it the appearances, every other one moving nothing.
        let half = SETTLED / 2;
        let txn = db.begin_write().expect("write");
        txn.clear::<OtsTokenTransfersIndex>().expect("clear");
        txn.clear::<OtsTokenTransfersCounter>().expect("clear");
        let upper: Vec<u64> = (half..SETTLED).map(row_id).collect();
        append_ids::<OtsTokenTransfersIndex, OtsTokenTransfersCounter>(&txn, &TOKEN, &upper).expect("append");
        let calls: Vec<u64> = (0..half).flat_map(|n| [id(n), id(n) | (1 << 19)]).collect();
        let mut calls_sorted = calls.clone();
        calls_sorted.sort_unstable();
        lists::append::<OtsAppearances>(&txn, &TOKEN, &calls_sorted, &vec![Role::Other; calls.len()])
            .expect("appearances");
        state::set_token_transfers_from(&txn, TxId::first_of_block(TxId(id(half)).block()).0).expect("state");
        txn.commit().expect("commit");
        let listed: std::collections::HashSet<u64> = (0..SETTLED + RECENT).map(id).collect();
        let made_or_none = |t: TxId| if listed.contains(&t.0) { made(t) } else { Vec::new() };
        let (rows, walked) =
            read_from(&db, &WalkMarks::default(), (source, stream), whole, deep, Sort::Asc, &made_or_none);
        assert_eq!(rows, page_of(all, deep));
        assert!(walked >= 500, "below the index's start the appearances are walked: {walked}");
    }

    /// An address's `txlistinternal` counts its settled groups from the internal rows index: a
    /// first deep page, in either sort, reads the node for its own groups only; below
    /// `internal_rows_from` (a database upgraded from format 13) the groups are walked.
    #[test]
    fn an_addresss_internal_transactions_count_their_settled_groups_from_the_internal_rows_index() {
        use crate::db::tables::{
            OtsInternalRowsCounter, OtsInternalRowsIndex, OtsInternalTxCounter, OtsInternalTxIndex,
        };
        let made = |id: TxId| -> Vec<Value> { (0..1 + id.0 % 3).map(|k| json!([id.0, k])).collect() };
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
        let txn = db.begin_write().expect("write");
        let ids: Vec<u64> = (0..SETTLED).map(id).collect();
        append_ids::<OtsInternalTxIndex, OtsInternalTxCounter>(&txn, &HOLDER, &ids).expect("append");
        let rows: Vec<u64> = ids
            .iter()
            .filter(|&&i| i % 3 > 0)
            .map(|&i| transfer_rows::first_of(i).expect("shifts") | (i % 3))
            .collect();
        append_ids::<OtsInternalRowsIndex, OtsInternalRowsCounter>(&txn, &HOLDER, &rows).expect("append");
        txn.commit().expect("commit");
        let walked = (Source::InternalTxs(HOLDER), Stream::InternalTxs(HOLDER));
        let whole = (0, u64::MAX);
        let all: Vec<Value> = (0..SETTLED).flat_map(|n| made(TxId(id(n)))).collect();
        let deep = Window { skip: 1_500, rows: 10 };
        for sort in [Sort::Asc, Sort::Desc] {
            let mut want = all.clone();
            if sort == Sort::Desc {
                want.reverse();
            }
            let (rows, read) = read_from(&db, &WalkMarks::default(), walked, whole, deep, sort, &made);
            assert_eq!(rows, page_of(want, deep), "{sort:?}");
            assert!(read <= 2 * GROUP as usize, "only the page's groups are read ({sort:?}): {read}");
        }
        let txn = db.begin_write().expect("write");
        state::set_internal_rows_from(&txn, id(SETTLED / 2)).expect("state");
        txn.commit().expect("commit");
        let (rows, read) = read_from(&db, &WalkMarks::default(), walked, whole, deep, Sort::Asc, &made);
        assert_eq!(rows, page_of(all, deep));
        assert!(read >= 500, "below the rows' start the groups are walked: {read}");
    }

    /// An account's settled groups are counted from the index (a sent or received transaction is
    /// one `txlist` row): its first deep page asks the node for its own groups only, and pages of
    /// both sorts read as the plain list. Below the received marks of a database upgraded from
    /// format 10, only the groups it sent every one of are.
    #[test]
    fn an_accounts_own_transactions_are_counted_without_the_node() {
        use crate::{
            db::{codec::Role, tables::OtsAppearances},
            index::families::appearances::lists,
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
        let all = 1_000u64;
        let sent_by = |n: u64| n < 600 || n.is_multiple_of(4);
        let txn = db.begin_write().expect("write");
        let ids: Vec<u64> = (0..all).map(id).collect();
        // A sent transaction is a row; of the others, those with an odd id are (received).
        let role = |n: u64| match (sent_by(n), id(n) % 2 == 1) {
            (true, _) => Role::Sent,
            (false, true) => Role::Received,
            (false, false) => Role::Other,
        };
        let roles: Vec<Role> = (0..all).map(role).collect();
        lists::append::<OtsAppearances>(&txn, &HOLDER, &ids, &roles).expect("append");
        txn.commit().expect("commit");
        let sent_ids: std::collections::HashSet<u64> = (0..all).filter(|&n| sent_by(n)).map(id).collect();
        let rows_of = |t: TxId| {
            if sent_ids.contains(&t.0) || t.0 % 2 == 1 {
                vec![json!(t.0)]
            } else {
                Vec::new()
            }
        };
        let list: Vec<Value> = ids.iter().flat_map(|&i| rows_of(TxId(i))).collect();
        let walked = (Source::Appearances(HOLDER), Stream::Transactions(HOLDER));
        let whole = (0, u64::MAX);

        // Row 750 lies in the mixed groups past the sent ones.
        let deep = Window { skip: 750, rows: 20 };
        let (rows, fetched) = read_from(&db, &WalkMarks::default(), walked, whole, deep, Sort::Asc, &rows_of);
        assert_eq!(rows, page_of(list.clone(), deep));
        assert!(fetched <= 2 * GROUP as usize, "the groups before are skipped unread: {fetched}");

        // Upgraded from format 10 after the first 700 transactions: the mixed group 6 is read.
        let txn = db.begin_write().expect("write");
        crate::db::state::set_received_marks_from(&txn, ids[700]).expect("mark");
        txn.commit().expect("commit");
        let (rows, upgraded) =
            read_from(&db, &WalkMarks::default(), walked, whole, deep, Sort::Asc, &rows_of);
        assert_eq!(rows, page_of(list.clone(), deep));
        assert_eq!(upgraded, fetched + GROUP as usize, "the mixed group below the marks is read, no other");

        for sort in [Sort::Asc, Sort::Desc] {
            let ordered: Vec<Value> =
                if sort == Sort::Asc { list.clone() } else { list.iter().rev().cloned().collect() };
            for (skip, rows) in [(0, 10), (99, 3), (450, 200), (599, 5), (640, 100), (2_000, 1)] {
                let window = Window { skip, rows };
                let got = read_from(&db, &WalkMarks::default(), walked, whole, window, sort, &rows_of).0;
                assert_eq!(got, page_of(ordered.clone(), window), "{sort:?} {skip}+{rows}");
            }
        }
    }
}
