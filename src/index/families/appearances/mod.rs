//! The appearance family (not part of ots2): which transactions each address appears in, which
//! it sent and with what nonces, and who created each contract — what `ots_searchTransactions*`,
//! `ots_getTransactionBySenderAndNonce` and `ots_getContractCreator` read (docs/format.md,
//! "Appearances").
//!
//! An address appears in a transaction as its sender, its recipient, the contract it created,
//! the `from` or `to` of any call or create frame at any depth (reverted frames included), or
//! the address or beneficiary of a selfdestruct. Without call frames (a node with no tracer)
//! the sender, the recipient, the created contract and the emitter of each of its logs are
//! what is known: an emitter ran code in the transaction, so a tracer would have named it as a
//! frame's `to` (a token moved by a contract called in between, above all).
//!
//! Each appearance is marked with the address's role in the transaction: its sender, its
//! top-level recipient or created contract ("received"), or neither — Etherscan's `txlist` of
//! an address is its sent and received transactions, so the marks count it without the node.
//!
//! The appearances, sent and received transactions of blocks still in the reorg window wait in
//! [`crate::index::recent`] (ids, TxId ‖ nonce of those sent, the ids of those received) and
//! move into the list and its nonce anchors as their blocks leave it; reads join both.
//! Creations stay in their table.

pub mod levels;
pub mod lists;

use std::sync::Arc;

use alloy_primitives::Address;
use ots_classifiers::{BlockData, CallFrame, FrameKind};
use signet_libmdbx::tx::{Rw, TransactionKind};
use tracing::debug;

pub use lists::{BlockPage, ListCounts};

use super::seen_in_tx::SeenInTx;
use crate::db::tables::TableId;
use crate::index::family::{Checking, Family, Unwinding};
use crate::index::recent::WindowRows;
use crate::index::{
    error::WriteError,
    gather::{BlockRows, Buffering, Gatherer, Gathering, Writing},
    integrity::broken,
    recent,
    undo::UndoLog,
    window::WindowStart,
};
use crate::{
    db::{
        codec::Role,
        codec::{Creation, IndexKind, NonceAnchor, NonceRun},
        state,
        tables::{OtsAppearances, OtsContractCreators, OtsNonceAnchors, OtsRecentIds, OtsRecentSent, Table},
        DbError, DbResult, ReadTxn, TableCursor, Txn, WriteTxn,
    },
    etl::{Buffer, RunDir, Sorter, ADDRESS_KEY},
    txid::TxId,
};

/// A stage rewrites the list table whole once the addresses it appends to (bounded from above
/// by the keys its runs hold) number one in this many of the table's chunks or more. Measured
/// on the benchmark chains (docs/benchmarks.md, "The stage regime"): in stages of a third of the
/// 21 M chain the second and third merges' lists took 5.2 and 6.9 s rewritten against 6.5 and
/// 8.6 s in place; in stages of 1 % of the 2 M chain only the first stages rewrite, and the run
/// took as long.
const LIST_REWRITE_SHARE: u64 = 4;

/// A batch's (or a bulk stage's) appearances, sent transactions and creations, gathered before
/// they are written address by address.
#[derive(Debug, Default)]
pub struct Appearances {
    /// (address, [`seen_value`]: the TxId and whether the address received the transaction).
    seen: Sorter<(Address, u64)>,
    /// (sender, TxId, nonce).
    sent: Sorter<(Address, u64, u64)>,
    /// (contract, creating TxId, creator).
    created: Sorter<(Address, TxId, Address)>,
    /// A transaction's top call frame names its sender and recipient again, and its inner
    /// frames name the same contracts over and over: on the 21 M-transaction benchmark chain
    /// 188 M appearances came for 88.6 M distinct ones.
    in_tx: SeenInTx,
    /// Whether the lists may go to a staged segment ([`levels`]): a bulk stage's.
    staged: bool,
    /// The newest block collected: a stage's segment key.
    newest: Option<u64>,
}

/// What a batch wrote to the family.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AppearanceStats {
    /// (address, transaction) pairs added to `OtsAppearances`.
    pub appearances: u64,
    /// Nonce anchors written.
    pub anchors: u64,
}

impl Appearances {
    /// A family whose rows spill into sorted runs under `runs`, each list buffering `budget`
    /// bytes.
    pub fn spilling(runs: &Arc<RunDir>, budget: usize) -> Self {
        Self {
            seen: Sorter::spilling(runs.clone(), budget).keyed(ADDRESS_KEY),
            sent: Sorter::spilling(runs.clone(), budget / 4),
            created: Sorter::spilling(runs.clone(), budget / 16),
            in_tx: SeenInTx::default(),
            staged: true,
            newest: None,
        }
    }

    /// The family's rows of a write, waiting as `buffering` says.
    fn gathering(buffering: &Buffering) -> Self {
        match buffering {
            Buffering::InMemory => Self::default(),
            Buffering::Spilling { runs, each } => Self::spilling(runs, *each),
        }
    }

    /// Gathers `address`'s appearance in `tx`, the first time the transaction names it: its
    /// first mention says whether it received the transaction (the recipient and the created
    /// contract come right after the sender, before any frame or log).
    fn see(&mut self, address: Address, tx: TxId, received: bool) -> DbResult<()> {
        if self.in_tx.first_time(address, tx) {
            self.seen.push((address, seen_value(address, tx, received)?))?;
        }
        Ok(())
    }

    fn see_frame(&mut self, frame: &CallFrame, id: TxId, undo: &mut UndoLog) -> DbResult<()> {
        let creates = matches!(frame.kind, FrameKind::Create | FrameKind::Create2);
        self.see(frame.from, id, false)?;
        // A create frame that failed before an address was known names none.
        if !(creates && frame.to.is_zero()) {
            self.see(frame.to, id, false)?;
        }
        if creates && frame.success {
            self.create(frame.to, Creation { tx: id, creator: frame.from }, undo)?;
        }
        Ok(())
    }

    fn create(&mut self, contract: Address, creation: Creation, undo: &mut UndoLog) -> DbResult<()> {
        self.created.push((contract, creation.tx, creation.creator))?;
        undo.touch(IndexKind::ContractCreator, contract);
        Ok(())
    }

    /// Collects `block`'s appearances, senders and created contracts.
    pub fn collect_block(&mut self, block: &BlockData, undo: &mut UndoLog) -> Result<(), WriteError> {
        let mut ids = Vec::with_capacity(block.transactions.len());
        self.newest = self.newest.max(Some(block.number));
        let frames = block.frames.as_deref().unwrap_or_default();
        // Frames come in execution order, so a transaction's follow it; any left over (out of
        // order) are collected after the transactions.
        let mut next_frame = 0;
        for (i, (tx, receipt)) in block.transactions.iter().zip(&block.receipts).enumerate() {
            let id = TxId::new(block.number, i as u64)?;
            ids.push(id);
            self.see(tx.from, id, false)?;
            // The recipient and the created contract received it (the parties Etherscan lists
            // the transaction for); a sender naming itself is seen once, as the sender.
            if let Some(to) = tx.to {
                self.see(to, id, true)?;
            }
            if let Some(created) = receipt.contract_address {
                self.see(created, id, true)?;
                if receipt.success && block.frames.is_none() {
                    self.create(created, Creation { tx: id, creator: tx.from }, undo)?;
                }
            }
            if block.frames.is_none() {
                for log in &receipt.logs {
                    self.see(log.address, id, false)?;
                }
            }
            self.sent.push((tx.from, id.0, tx.nonce)).map_err(DbError::from)?;
            while let Some(frame) = frames.get(next_frame).filter(|f| f.tx_index == i as u64) {
                self.see_frame(frame, id, undo)?;
                next_frame += 1;
            }
        }
        for frame in frames.get(next_frame..).unwrap_or_default() {
            let Some(&id) = ids.get(frame.tx_index as usize) else { continue };
            self.see_frame(frame, id, undo)?;
        }
        Ok(())
    }

    /// Writes what was collected, address by address in key order: each address's new ids
    /// with the marks of those it sent and received, and a sender's nonce anchors. The ids of blocks still in
    /// the reorg window go to [`recent`] instead, and those of blocks leaving it as it starts at
    /// `start` (taken out of `leaving`, what the window's rows of those blocks held) to the lists
    /// first.
    ///
    /// With `before` (a snapshot of the state `txn` started from), a stage's write (the window
    /// closed, nothing leaving it) rewrites the list table whole when that pays
    /// (`index::rewrite`), and a later stage's goes to a staged segment ([`levels`]). Any other
    /// write folds the young level and the segments first, which takes `before`.
    pub fn write(
        self,
        txn: &WriteTxn,
        before: Option<&ReadTxn>,
        start: WindowStart,
        leaving: &mut recent::WindowRows,
    ) -> DbResult<AppearanceStats> {
        let mut stats = AppearanceStats::default();
        let mut new_rows = recent::NewRows::default();
        let cut = start.first_kept_tx();
        let leaving_sent: Vec<(Address, Vec<(u64, u64)>)> =
            std::mem::take(&mut leaving.sent).into_iter().collect();
        let leaving_received = leaving.take_list(IndexKind::Received);
        let leaving = leaving.take_list(IndexKind::Appearances);
        let untouched = leaving.is_empty() && leaving_sent.is_empty() && leaving_received.is_empty();
        let stage = before.filter(|_| untouched && start == WindowStart::Closed);
        if stage.is_none() && levels::any_older(txn)? {
            levels::fold_older(txn, before.ok_or_else(levels::unfolded)?)?;
        }
        let mut leaving_sent = leaving_sent.into_iter().peekable();
        let mut leaving_received = leaving_received.into_iter().peekable();
        let mut in_place = levels::Lists::InPlace(txn);
        for (address, ids) in leaving {
            let run = leaving_sent.next_if(|(s, _)| *s == address).map(|(_, run)| run).unwrap_or_default();
            let got =
                leaving_received.next_if(|(r, _)| *r == address).map(|(_, got)| got).unwrap_or_default();
            write_list(txn, &mut in_place, &address, &ids, (&run, &got), &mut stats)?;
        }
        if let Some((sender, _)) = leaving_sent.next() {
            return Err(unseen_sender(&sender));
        }
        if let Some((recipient, _)) = leaving_received.next() {
            return Err(unseen_sender(&recipient));
        }
        let seen = self.seen.into_sorted()?;
        let started = std::time::Instant::now();
        let addresses = seen.keys_at_most(|row| row.0);
        let (mut lists, how) = match stage {
            Some(before) => {
                let segment = self.newest.filter(|_| self.staged);
                levels::Lists::of_stage(txn, before, addresses, segment, LIST_REWRITE_SHARE)?
            }
            None => (in_place, "main"),
        };
        // An address's ids a piece at a time (a large stage's busiest lists run to tens of
        // millions), a transaction's two values (received or not) in one piece.
        let mut seen = seen.groups_in_pieces(|row| row, PIECE_VALUES, |a, b| a >> 1 == b >> 1);
        let mut sent = SentRows { rows: self.sent.into_sorted()?.peekable() };
        for (address, values) in seen.by_ref() {
            let (ids, got) = seen_ids(&values);
            stats.appearances += ids.len() as u64;
            // Both streams are in address order, and every sender appears in its transactions.
            let run = sent.take_through(&address, ids.last().copied().unwrap_or(0))?;
            let split = ids.partition_point(|&id| id < cut);
            let run_split = run.partition_point(|&(id, _)| id < cut);
            let got_split = got.partition_point(|&id| id < cut);
            let settled = (&run[..run_split], &got[..got_split]);
            write_list(txn, &mut lists, &address, &ids[..split], settled, &mut stats)?;
            roles_of(&address, &ids[split..], (&run[run_split..], &got[got_split..]))?;
            for &id in &ids[split..] {
                new_rows.id(TxId(id).block(), IndexKind::Appearances, address, id);
            }
            for &(id, nonce) in &run[run_split..] {
                new_rows.sent(TxId(id).block(), address, id, nonce);
            }
            for &id in &got[got_split..] {
                new_rows.id(TxId(id).block(), IndexKind::Received, address, id);
            }
        }
        seen.finish()?;
        sent.finish()?;
        lists.finish()?;
        debug!(target: "ots::index", list = "appearances", how, addresses, seconds = started.elapsed().as_secs_f64(), "list written");
        new_rows.write(txn)?;
        let mut creators = txn.cursor::<OtsContractCreators>()?;
        for row in self.created.into_sorted()? {
            let (contract, tx, creator) = row?;
            creators.put(&contract, &Creation { tx, creator })?;
        }
        Ok(stats)
    }
}

/// A gathered appearance's value: the TxId with the received flag below it, so that an address's
/// values sort by TxId. A TxId of a block past 2^43 does not fit (no chain comes near).
fn seen_value(address: Address, tx: TxId, received: bool) -> DbResult<u64> {
    if tx.0 >> 63 != 0 {
        return Err(DbError::Corrupt {
            table: OtsAppearances::ID.name(),
            key: address.to_string(),
            reason: format!("block {} is past the 2^43 blocks an appearance can name", tx.block()),
        });
    }
    Ok(tx.0 << 1 | u64::from(received))
}

/// An address's gathered values (ascending) as its TxIds and those of them it received. A
/// transaction met again out of order (a frame after later transactions) has a value of each
/// flag: it was received if either says so.
fn seen_ids(values: &[u64]) -> (Vec<u64>, Vec<u64>) {
    let mut ids: Vec<u64> = Vec::with_capacity(values.len());
    let mut received = Vec::new();
    for &value in values {
        let id = value >> 1;
        if ids.last() != Some(&id) {
            ids.push(id);
        }
        if value & 1 == 1 && received.last() != Some(&id) {
            received.push(id);
        }
    }
    (ids, received)
}

/// The values of an address a stage's write takes at once (a piece of its list; unit tests cut
/// pieces of a few ids).
const PIECE_VALUES: usize = if cfg!(test) { 16 } else { 1 << 20 };

/// A write's sent transactions, (sender, TxId, nonce) in that order, taken an address's piece at
/// a time.
struct SentRows {
    rows: std::iter::Peekable<crate::etl::Sorted<(Address, u64, u64)>>,
}

impl SentRows {
    /// `address`'s sent transactions up to TxId `through` (a piece of its list ends there),
    /// ascending, each once: a sender before `address` (one the appearances did not see) is a
    /// refusal.
    fn take_through(&mut self, address: &Address, through: u64) -> DbResult<Vec<(u64, u64)>> {
        let mut run: Vec<(u64, u64)> = Vec::new();
        loop {
            match self.rows.peek() {
                Some(Ok((sender, id, _))) if sender == address && *id <= through => {}
                Some(Ok((sender, _, _))) if sender < address => return Err(unseen_sender(sender)),
                Some(Err(_)) => {
                    if let Some(Err(e)) = self.rows.next() {
                        return Err(e.into());
                    }
                }
                _ => return Ok(run),
            }
            if let Some(Ok((_, id, nonce))) = self.rows.next() {
                if run.last() != Some(&(id, nonce)) {
                    run.push((id, nonce));
                }
            }
        }
    }

    /// Refuses a sent transaction no appearance was taken for.
    fn finish(mut self) -> DbResult<()> {
        match self.rows.next() {
            None => Ok(()),
            Some(Ok((sender, _, _))) => Err(unseen_sender(&sender)),
            Some(Err(e)) => Err(e.into()),
        }
    }
}

/// The sent and received transactions of one address in a write: (TxId, nonce) of those it
/// sent, and the TxIds of those it received, each ascending.
type RoleRuns<'a> = (&'a [(u64, u64)], &'a [u64]);

/// The address's role in each of `ids` (ascending): sent where `sent` holds it, received where
/// `received` does; a sent or received transaction missing from `ids`, or both, is a refusal.
fn roles_of(address: &Address, ids: &[u64], (sent, received): RoleRuns<'_>) -> DbResult<Vec<Role>> {
    let mut sent = sent.iter().map(|&(id, _)| id).peekable();
    let mut received = received.iter().copied().peekable();
    let mut both = false;
    let roles: Vec<Role> = ids
        .iter()
        .map(|&id| match (sent.next_if_eq(&id).is_some(), received.next_if_eq(&id).is_some()) {
            (true, was_received) => {
                both |= was_received;
                Role::Sent
            }
            (false, true) => Role::Received,
            (false, false) => Role::Other,
        })
        .collect();
    if both || sent.next().is_some() || received.next().is_some() {
        return Err(unseen_sender(address));
    }
    Ok(roles)
}

/// Appends `ids` (with the marks of `runs`, the ones `address` sent and received) to its list,
/// and the nonce anchors its sent transactions need.
fn write_list(
    txn: &WriteTxn,
    lists: &mut levels::Lists<'_>,
    address: &Address,
    ids: &[u64],
    runs: RoleRuns<'_>,
    stats: &mut AppearanceStats,
) -> DbResult<()> {
    let run = runs.0;
    if ids.is_empty() {
        return if run.is_empty() && runs.1.is_empty() { Ok(()) } else { Err(unseen_sender(address)) };
    }
    let roles = roles_of(address, ids, runs)?;
    let before = lists.append(address, ids, &roles)?;
    if !run.is_empty() {
        stats.anchors += lists.nonces(txn, address, before.sent, run)?;
    }
    Ok(())
}

/// A sent or received transaction missing from its party's appearances (or both sent and
/// received): the batch's rows contradict each other, and writing either would leave the list
/// and its marks disagreeing.
fn unseen_sender(party: &Address) -> DbError {
    DbError::Corrupt {
        table: OtsAppearances::ID.name(),
        key: party.to_string(),
        reason: "a sender or recipient the batch did not see in its transactions".into(),
    }
}

/// The nonce the sender's `position`-th transaction has when no anchor at or after
/// `last_anchor` says otherwise.
fn expected_nonce(last_anchor: Option<NonceAnchor>, position: u64) -> u64 {
    last_anchor.map_or(position, |a| a.nonce.wrapping_add(position - a.position))
}

/// The nonce a transaction counts with: the one it carries, unless that is lower than the one
/// expected. A sender's nonce never goes back, but some chains' system transactions say 0 for
/// every one (Arbitrum's internal transactions; Anvil's OP Stack deposits): those take the next
/// nonce, as the sender's account does.
fn effective_nonce(carried: u64, expected: u64) -> u64 {
    carried.max(expected)
}

/// Writes the anchors where the nonces of one sender's transactions of the batch (`(TxId,
/// nonce)`, ascending; `before` sent earlier) skip forward; returns how many it wrote.
fn write_anchors(txn: &WriteTxn, sender: &Address, before: u64, run: &[(u64, u64)]) -> DbResult<u64> {
    let mut anchors = txn.cursor::<OtsNonceAnchors>()?;
    let mut last = if anchors.seek_exact(sender)?.is_some() { anchors.last_dup()? } else { None };
    let mut written = 0;
    for (position, &(_, nonce)) in (before..).zip(run) {
        let expected = expected_nonce(last, position);
        if effective_nonce(nonce, expected) != expected {
            let anchor = NonceAnchor { position, nonce };
            anchors.put(sender, &anchor)?;
            last = Some(anchor);
            written += 1;
        }
    }
    Ok(written)
}

/// The anchors a sender's segment runs imply (`runs`, one segment's, positions counting from
/// `before`, the sent transactions the older levels hold), with `last` the newest anchor before
/// them. Within a run each nonce is the one before plus one, so only a run's first transaction
/// can skip forward (as [`write_anchors`] decides it for each transaction).
fn anchors_of_runs(mut last: Option<NonceAnchor>, before: u64, runs: &[NonceRun]) -> Vec<NonceAnchor> {
    let mut anchors = Vec::new();
    for run in runs {
        let position = before + run.position;
        let expected = expected_nonce(last, position);
        if effective_nonce(run.nonce, expected) != expected {
            let anchor = NonceAnchor { position, nonce: run.nonce };
            anchors.push(anchor);
            last = Some(anchor);
        }
    }
    anchors
}

/// Writes the anchors a sender's segment runs imply ([`anchors_of_runs`]) after its stored
/// ones; returns how many it wrote.
fn write_run_anchors(
    cursor: &mut TableCursor<'_, Rw, OtsNonceAnchors>,
    sender: &Address,
    before: u64,
    runs: &[NonceRun],
) -> DbResult<u64> {
    let last = if cursor.seek_exact(sender)?.is_some() { cursor.last_dup()? } else { None };
    let anchors = anchors_of_runs(last, before, runs);
    for anchor in &anchors {
        cursor.put(sender, anchor)?;
    }
    Ok(anchors.len() as u64)
}

/// Drops the creations of `contract` at or after TxId `cut`.
pub fn unwind_creator(txn: &WriteTxn, contract: &Address, cut: u64) -> DbResult<()> {
    let mut cursor = txn.cursor::<OtsContractCreators>()?;
    for creation in cursor.dups(contract)? {
        if creation.tx.0 >= cut {
            cursor.delete_dup(contract, &creation)?;
        }
    }
    Ok(())
}

/// The transaction `sender` sent with `nonce`, if the index holds one: in the reorg window by
/// its nonce (counted on from the list's as the anchors count), else its position among the
/// sender's transactions follows from the anchors, its TxId from the sent marks of its list.
pub fn sent_with_nonce<K: TransactionKind>(
    txn: &Txn<K>,
    sender: &Address,
    nonce: u64,
) -> DbResult<Option<TxId>> {
    let anchors = levels::with_staged_anchors(txn, sender, txn.cursor::<OtsNonceAnchors>()?.dups(sender)?)?;
    let window = recent::sent(txn, sender)?;
    if !window.is_empty() {
        let settled = levels::count(txn, sender)?.sent;
        let mut expected = expected_nonce(anchors.last().copied(), settled);
        for &(tx, carried) in &window {
            let counted = effective_nonce(carried, expected);
            if counted == nonce {
                return Ok(Some(TxId(tx)));
            }
            expected = counted.wrapping_add(1);
        }
    }
    // Runs of consecutive nonces: (first position, first nonce); before any anchor nonces count
    // from 0.
    let mut runs: Vec<(u64, u64)> = Vec::with_capacity(anchors.len() + 1);
    if anchors.first().is_none_or(|a| a.position > 0) {
        runs.push((0, 0));
    }
    runs.extend(anchors.iter().map(|a| (a.position, a.nonce)));
    for (i, &(position, first_nonce)) in runs.iter().enumerate() {
        let Some(offset) = nonce.checked_sub(first_nonce) else { break };
        let candidate = position + offset;
        // A nonce past its run's end was used up by something other than a transaction of the
        // sender (an EIP-7702 authorization), or lies in a later run.
        if runs.get(i + 1).is_none_or(|&(next, _)| candidate < next) {
            return Ok(levels::nth(txn, sender, candidate, true)?.map(TxId));
        }
    }
    Ok(None)
}

/// The newest creation of `contract`, if the index saw one.
pub fn creation<K: TransactionKind>(txn: &Txn<K>, contract: &Address) -> DbResult<Option<Creation>> {
    let mut cursor = txn.cursor::<OtsContractCreators>()?;
    if cursor.seek_exact(contract)?.is_none() {
        return Ok(None);
    }
    cursor.last_dup()
}

/// `address`'s transactions before TxId `cut`, newest first, in whole blocks: the reorg
/// window's, then the list's.
pub fn before<K: TransactionKind>(
    txn: &Txn<K>,
    address: &Address,
    cut: u64,
    want: usize,
) -> DbResult<BlockPage> {
    let mut page = BlockPage::default();
    for id in recent::ids(txn, IndexKind::Appearances, address)?.into_iter().rev().filter(|&id| id < cut) {
        if !lists::take(&mut page, id, want) {
            return Ok(page);
        }
    }
    levels::before(txn, address, cut, want, &mut page)?;
    Ok(page)
}

/// `address`'s transactions from TxId `from` on, oldest first, in whole blocks: the list's,
/// then the reorg window's.
pub fn after<K: TransactionKind>(
    txn: &Txn<K>,
    address: &Address,
    from: u64,
    want: usize,
) -> DbResult<BlockPage> {
    let mut page = BlockPage::default();
    levels::after(txn, address, from, want, &mut page)?;
    if page.more {
        return Ok(page);
    }
    for id in recent::ids(txn, IndexKind::Appearances, address)?.into_iter().filter(|&id| id >= from) {
        if !lists::take(&mut page, id, want) {
            break;
        }
    }
    Ok(page)
}

/// How many transactions `address` appears in, and how many it sent: the list's and the reorg
/// window's.
pub fn counts<K: TransactionKind>(txn: &Txn<K>, address: &Address) -> DbResult<ListCounts> {
    let stored = levels::count(txn, address)?;
    Ok(ListCounts {
        all: stored.all + recent::count(txn, IndexKind::Appearances, address)?,
        sent: stored.sent + recent::sent_count(txn, address)?,
    })
}

/// How many transactions `address` appears in below TxId `id` (the list's and the window's):
/// the position a walk from `id` starts at.
pub fn rank<K: TransactionKind>(txn: &Txn<K>, address: &Address, id: u64) -> DbResult<u64> {
    let stored = levels::rank(txn, address, id)?;
    let window = recent::ids(txn, IndexKind::Appearances, address)?;
    Ok(stored + window.partition_point(|&x| x < id) as u64)
}

/// How many of `address`'s appearances the list's levels hold: those older than the reorg
/// window, which no unwind can take back.
pub fn settled<K: TransactionKind>(txn: &Txn<K>, address: &Address) -> DbResult<u64> {
    Ok(levels::count(txn, address)?.all)
}

/// How many of `address`'s appearances in its list's table (older than the reorg window) lie
/// in `first..=last` and were sent by it.
pub fn settled_sent_within<K: TransactionKind>(
    txn: &Txn<K>,
    address: &Address,
    first: u64,
    last: u64,
) -> DbResult<u64> {
    let below_first = levels::rank_sent(txn, address, first)?;
    let through_last = levels::rank_sent(txn, address, last.saturating_add(1))?;
    Ok(through_last - below_first)
}

/// How many of `address`'s appearances in its list's table (older than the reorg window) lie
/// in `first..=last` and were sent or received by it (its `txlist` rows among them); `None`
/// when the index has no received marks for `first` (a database upgraded from format 10 has
/// them for the blocks indexed after the upgrade only).
pub fn settled_listed_within<K: TransactionKind>(
    txn: &Txn<K>,
    address: &Address,
    first: u64,
    last: u64,
) -> DbResult<Option<u64>> {
    if first < state::read_received_marks_from(txn)? {
        return Ok(None);
    }
    levels::listed_within(txn, address, first, last).map(Some)
}

/// `address`'s role in each of `ids` (ids it appears in, settled or in the reorg window), where
/// the index knows it: a sent one always, the others where it has received marks (`None` below
/// them, and for an id the address does not appear in).
pub fn roles_among<K: TransactionKind>(
    txn: &Txn<K>,
    address: &Address,
    ids: &[u64],
) -> DbResult<Vec<Option<Role>>> {
    use std::collections::HashSet;
    let marked_from = state::read_received_marks_from(txn)?;
    let window_sent: HashSet<u64> = recent::sent(txn, address)?.into_iter().map(|(tx, _)| tx).collect();
    let window_got: HashSet<u64> = recent::ids(txn, IndexKind::Received, address)?.into_iter().collect();
    let window: HashSet<u64> = recent::ids(txn, IndexKind::Appearances, address)?.into_iter().collect();
    let settled: Vec<u64> = ids.iter().copied().filter(|id| !window.contains(id)).collect();
    let mut settled_roles = levels::roles_of_ids(txn, address, &settled)?.into_iter();
    Ok(ids
        .iter()
        .map(|id| {
            let role = if window.contains(id) {
                Some(match (window_sent.contains(id), window_got.contains(id)) {
                    (true, _) => Role::Sent,
                    (false, true) => Role::Received,
                    (false, false) => Role::Other,
                })
            } else {
                settled_roles.next().flatten()
            };
            role.filter(|&r| r == Role::Sent || *id >= marked_from)
        })
        .collect())
}

/// The first and the last transaction `address` appears in, if any.
pub fn ends<K: TransactionKind>(txn: &Txn<K>, address: &Address) -> DbResult<Option<(u64, u64)>> {
    let stored = levels::ends(txn, address)?;
    let window = recent::ids(txn, IndexKind::Appearances, address)?;
    Ok(match (stored, window.first(), window.last()) {
        (Some((first, _)), Some(_), Some(&last)) => Some((first, last)),
        (None, Some(&first), Some(&last)) => Some((first, last)),
        (stored, ..) => stored,
    })
}

/// Checks the family: the lists (see [`lists::check`]), anchors inside their sender's sent ids
/// with nonces that grow, creations below `below`, and the reorg window's part (`window`, see
/// `check_window`). Returns (addresses, appearances).
pub fn check<K: TransactionKind>(
    txn: &Txn<K>,
    below: u64,
    window: &recent::WindowRows,
) -> DbResult<(u64, u64)> {
    let (mut addresses, mut appearances) = levels::check(txn, below)?;
    let (window_addresses, window_appearances) = check_window(txn, below, window)?;
    addresses += window_addresses;
    appearances += window_appearances;
    let mut cursor = txn.walking_cursor::<OtsNonceAnchors>()?;
    let mut next = cursor.first()?;
    while let Some((sender, _)) = next {
        let anchors = txn.cursor::<OtsNonceAnchors>()?.dups(&sender)?;
        let sent = levels::count(txn, &sender)?.sent;
        let mut previous: Option<NonceAnchor> = None;
        for a in &anchors {
            // Nonces only ever skip forward.
            if a.position >= sent || a.nonce <= expected_nonce(previous, a.position) {
                return Err(broken::<OtsNonceAnchors>(
                    sender.as_slice(),
                    format!("anchor {a:?} does not fit {sent} sent transactions after {previous:?}"),
                ));
            }
            previous = Some(*a);
        }
        next = cursor.next_key()?;
    }
    let mut cursor = txn.walking_cursor::<OtsContractCreators>()?;
    let mut next = cursor.first()?;
    while let Some((contract, creation)) = next {
        if creation.tx.0 >= below {
            return Err(broken::<OtsContractCreators>(
                contract.as_slice(),
                format!("created in TxId {}, beyond the indexed tip", creation.tx),
            ));
        }
        next = cursor.next_entry()?;
    }
    Ok((addresses, appearances))
}

/// Checks the reorg window's appearances and sent transactions (`window`): each address's come
/// after its list's and below `below`, and each sent one is among its sender's window
/// appearances. Returns (addresses only the window holds, appearances it holds).
fn check_window<K: TransactionKind>(
    txn: &Txn<K>,
    below: u64,
    window: &recent::WindowRows,
) -> DbResult<(u64, u64)> {
    let (mut addresses, mut appearances) = (0, 0);
    let kind = IndexKind::Appearances;
    for ((_, address), ids) in window.ids.range((kind, Address::ZERO)..=(kind, Address::repeat_byte(0xff))) {
        let bad = |reason: String| {
            let mut key = vec![kind as u8];
            key.extend_from_slice(address.as_slice());
            broken::<OtsRecentIds>(&key, reason)
        };
        let stored = levels::ends(txn, address)?;
        if let (Some((_, last)), Some(&first)) = (stored, ids.first()) {
            if first <= last {
                return Err(bad(format!(
                    "window TxId {} is not past the list's last {}",
                    TxId(first),
                    TxId(last)
                )));
            }
        }
        if ids.windows(2).any(|w| w[0] >= w[1]) {
            return Err(bad("window TxIds do not grow from block to block".into()));
        }
        if let Some(&last) = ids.last().filter(|&&l| l >= below) {
            return Err(bad(format!("holds TxId {}, beyond the indexed tip", TxId(last))));
        }
        addresses += u64::from(stored.is_none());
        appearances += ids.len() as u64;
    }
    for (sender, run) in &window.sent {
        let seen = window.ids.get(&(kind, *sender)).map_or(&[][..], Vec::as_slice);
        if let Some(&(tx, _)) = run.iter().find(|(tx, _)| seen.binary_search(tx).is_err()) {
            return Err(broken::<OtsRecentSent>(
                sender.as_slice(),
                format!("sent TxId {} is not among the window's appearances", TxId(tx)),
            ));
        }
    }
    let received = IndexKind::Received;
    for ((_, recipient), got) in
        window.ids.range((received, Address::ZERO)..=(received, Address::repeat_byte(0xff)))
    {
        let seen = window.ids.get(&(kind, *recipient)).map_or(&[][..], Vec::as_slice);
        let sent = window.sent.get(recipient).map_or(&[][..], Vec::as_slice);
        let stray =
            got.iter().find(|&&tx| seen.binary_search(&tx).is_err() || sent.iter().any(|s| s.0 == tx));
        if let Some(&tx) = stray {
            let mut key = vec![received as u8];
            key.extend_from_slice(recipient.as_slice());
            return Err(broken::<OtsRecentIds>(
                &key,
                format!("received TxId {} is not among the window's appearances, or was sent", TxId(tx)),
            ));
        }
    }
    Ok((addresses, appearances))
}

/// The transactions each address appears in or sent, nonce anchors, and contract creators.
#[derive(Debug)]
pub struct AppearancesFamily;

impl Gatherer for Appearances {
    fn collect(&mut self, block: &BlockRows<'_, '_>, undo: &mut UndoLog) -> Result<(), WriteError> {
        self.collect_block(block.block, undo)
    }

    fn buffers(&mut self) -> Vec<&mut dyn Buffer> {
        vec![&mut self.seen, &mut self.sent, &mut self.created]
    }

    fn write(self: Box<Self>, writing: &mut Writing<'_>) -> Result<(), WriteError> {
        // A snapshot holds the state the write started from (the writer lock is held), which
        // a whole-table rewrite copies: a stage's write (the window closed) may rewrite, and
        // the first write after a catch-up folds its young level.
        let snapshot = writing.window == WindowStart::Closed || levels::any_older(writing.txn)?;
        let before = snapshot.then(|| writing.db.begin_read().ok()).flatten();
        let stats = Self::write(*self, writing.txn, before.as_ref(), writing.window, &mut writing.leaving)?;
        writing.appearances += stats.appearances;
        Ok(())
    }
}

impl Family for AppearancesFamily {
    const NAME: &'static str = "appearances";
    const TABLES: &'static [TableId] =
        &[TableId::OtsAppearances, TableId::OtsNonceAnchors, TableId::OtsContractCreators];
    const YOUNG_TABLES: &'static [TableId] =
        &[TableId::OtsAppearancesYoung, TableId::OtsAppearancesStaged, TableId::OtsNonceRunsStaged];

    fn gatherer(gathering: &Gathering) -> Option<Box<dyn Gatherer>> {
        let appearances = Appearances::gathering(&gathering.buffering);
        gathering.appearances.then(|| Box::new(appearances) as Box<dyn Gatherer>)
    }

    fn fold(txn: &WriteTxn, window: WindowStart, leaving: &mut WindowRows) -> DbResult<()> {
        Appearances::default().write(txn, None, window, leaving).map(drop)
    }

    fn unwind(txn: &WriteTxn, unwinding: &Unwinding) -> DbResult<()> {
        for contract in unwinding.touched(IndexKind::ContractCreator) {
            unwind_creator(txn, contract, unwinding.tx_cut())?;
        }
        Ok(())
    }

    fn check<K: TransactionKind>(txn: &Txn<K>, checking: &mut Checking) -> DbResult<()> {
        let (addresses, appearances) = check(txn, checking.first_past_tip(), &checking.window)?;
        checking.report.appearance_addresses = addresses;
        checking.report.appearances = appearances;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::{tables::OtsNonceRunsStaged, AccessMode, Db};

    fn gathered(seen: &[(Address, u64)], sent: &[(Address, u64, u64)]) -> Appearances {
        let mut family = Appearances::default();
        for &(address, id) in seen {
            family.seen.push((address, seen_value(address, TxId(id), false).expect("fits"))).expect("push");
        }
        for &row in sent {
            family.sent.push(row).expect("push");
        }
        family
    }

    /// A transaction's top call frame repeats its sender and recipient, and inner frames repeat
    /// contracts: each (address, transaction) is gathered once. A frame out of execution order
    /// is still gathered (its repeats too, which the merge drops).
    #[test]
    fn an_address_is_gathered_once_per_transaction() {
        use ots_classifiers::{ReceiptData, TxData};
        let [a, b, c, d] = [1, 2, 3, 4].map(Address::repeat_byte);
        let frame = |tx_index, depth, from, to| CallFrame {
            tx_index,
            depth,
            kind: FrameKind::Call,
            from,
            to,
            value: alloy_primitives::U256::ZERO,
            success: true,
        };
        let tx = |from, to| TxData {
            hash: alloy_primitives::B256::ZERO,
            from,
            to: Some(to),
            nonce: 0,
            value: alloy_primitives::U256::ZERO,
            mint: None,
        };
        let receipt = ReceiptData {
            success: true,
            contract_address: None,
            logs: Vec::new(),
            fee: alloy_primitives::U256::ZERO,
        };
        let block = BlockData {
            number: 5,
            transactions: vec![tx(a, b), tx(c, b)],
            receipts: vec![receipt.clone(), receipt],
            frames: Some(vec![
                frame(0, 0, a, b),
                frame(0, 1, b, c),
                frame(0, 1, b, c),
                frame(0, 2, c, b),
                frame(1, 0, c, b),
                frame(1, 1, b, d),
                // Out of order: the first transaction's again.
                frame(0, 1, b, d),
            ]),
            ..Default::default()
        };
        let mut family = Appearances::default();
        let mut undo = UndoLog::keeping(WindowStart::At(0));
        family.collect_block(&block, &mut undo).expect("collect");
        // {a, b, c} in the first, {c, b, d} in the second, then b again and d out of order.
        assert_eq!(family.seen.len(), 8);
        let groups: Vec<(Address, Vec<u64>)> =
            family.seen.into_sorted().expect("sorted").groups(|row| row).collect();
        // (address, (its ids, those it received)).
        type Gathered = (Address, (Vec<u64>, Vec<u64>));
        let rows: Vec<Gathered> =
            groups.into_iter().map(|(address, values)| (address, seen_ids(&values))).collect();
        let first = TxId::new(5, 0).expect("id").0;
        let second = TxId::new(5, 1).expect("id").0;
        // b received both (met again out of order in the first, as a frame's party).
        let want = vec![
            (a, (vec![first], vec![])),
            (b, (vec![first, second], vec![first, second])),
            (c, (vec![first, second], vec![])),
            (d, (vec![first, second], vec![])),
        ];
        assert_eq!(rows, want);
    }

    /// Without call frames, a log's emitter appears in its transaction (a token moved by a
    /// contract the sender called); with them, the frames alone say who ran.
    #[test]
    fn without_frames_a_log_emitter_appears() {
        use ots_classifiers::{LogData, ReceiptData, TxData};
        let [a, b, token, other] = [1, 2, 3, 4].map(Address::repeat_byte);
        let log = |address| LogData { address, topics: Vec::new(), data: alloy_primitives::Bytes::new() };
        let block = |frames| BlockData {
            number: 7,
            transactions: vec![TxData {
                hash: alloy_primitives::B256::ZERO,
                from: a,
                to: Some(b),
                nonce: 0,
                value: alloy_primitives::U256::ZERO,
                mint: None,
            }],
            receipts: vec![ReceiptData {
                success: true,
                contract_address: None,
                logs: vec![log(token), log(b), log(token)],
                fee: alloy_primitives::U256::ZERO,
            }],
            frames,
            ..Default::default()
        };
        let seen = |frames| {
            let mut family = Appearances::default();
            let mut undo = UndoLog::keeping(WindowStart::At(0));
            family.collect_block(&block(frames), &mut undo).expect("collect");
            let rows: Vec<(Address, u64)> =
                family.seen.into_sorted().expect("sorted").collect::<Result<_, _>>().expect("rows");
            rows.into_iter().map(|(address, _)| address).collect::<Vec<_>>()
        };
        assert_eq!(seen(None), vec![a, b, token]);
        let frame = CallFrame {
            tx_index: 0,
            depth: 0,
            kind: FrameKind::Call,
            from: a,
            to: other,
            value: alloy_primitives::U256::ZERO,
            success: true,
        };
        assert_eq!(seen(Some(vec![frame])), vec![a, b, other]);
    }

    /// A sent transaction must be among its sender's appearances: one that is not (before the
    /// first seen address, between two, after the last, or a sender's id it did not see) is a
    /// refusal, never a silently dropped mark.
    #[test]
    fn a_sent_transaction_its_sender_did_not_see_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
        let [a, b, c] = [1, 2, 3].map(Address::repeat_byte);
        let seen = [(b, 10), (b, 11)];
        {
            let txn = db.begin_write().expect("write");
            let written = gathered(&seen, &[(b, 11, 0)])
                .write(&txn, None, WindowStart::Closed, &mut Default::default())
                .expect("consistent rows");
            assert_eq!(written.appearances, 2);
        }
        for sent in [(a, 10, 0), (c, 10, 0), (b, 12, 1)] {
            let txn = db.begin_write().expect("write");
            let refused =
                gathered(&seen, &[sent]).write(&txn, None, WindowStart::Closed, &mut Default::default());
            assert!(matches!(refused, Err(DbError::Corrupt { .. })), "{sent:?}: {refused:?}");
        }
    }

    /// Nonces that go back (system transactions that all say 0) count as the next nonce, in the
    /// lists' anchors and in the reorg window alike; a skip forward is still an anchor.
    #[test]
    fn a_nonce_that_goes_back_counts_as_the_next_one() {
        let b = Address::repeat_byte(2);
        let ids: Vec<u64> = (1..=6).map(|block| TxId::new(block, 0).expect("id").0).collect();
        let carried = [0, 0, 0, 5, 0, 0];
        // Which transaction each nonce finds: the sender's account counted 0, 1, 2, 5, 6, 7.
        let want =
            [(0, Some(0)), (1, Some(1)), (2, Some(2)), (3, None), (5, Some(3)), (6, Some(4)), (7, Some(5))];
        for window_from in [None, Some(3), Some(5)] {
            let dir = tempfile::tempdir().expect("tempdir");
            let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
            let txn = db.begin_write().expect("write");
            let seen: Vec<(Address, u64)> = ids.iter().map(|&id| (b, id)).collect();
            let sent: Vec<(Address, u64, u64)> = ids.iter().zip(carried).map(|(&id, n)| (b, id, n)).collect();
            let window = window_from.map_or(WindowStart::Closed, WindowStart::At);
            let written =
                gathered(&seen, &sent).write(&txn, None, window, &mut Default::default()).expect("write");
            assert_eq!(
                written.anchors,
                u64::from(window_from.is_none_or(|block| block > 4)),
                "{window_from:?}"
            );
            for (nonce, position) in want {
                let found = sent_with_nonce(&txn, &b, nonce).expect("read");
                assert_eq!(found, position.map(|p| TxId(ids[p])), "{window_from:?}: nonce {nonce}");
            }
            let anchors = txn.cursor::<OtsNonceAnchors>().expect("cursor").dups(&b).expect("dups");
            let settled = lists::count::<OtsAppearances, _>(&txn, &b).expect("count").sent;
            let mut previous = None;
            for a in &anchors {
                assert!(a.position < settled && a.nonce > expected_nonce(previous, a.position), "{a:?}");
                previous = Some(*a);
            }
        }
    }

    /// A sender's nonces written stage by stage into staged segments (runs counted within each
    /// segment), with skips forward and nonces that go back, find the same transactions as the
    /// same stages written in place at every stage; the segments check, and folded they leave
    /// the lists and anchors of the in-place writes byte for byte.
    #[test]
    fn staged_nonces_read_and_fold_as_written_in_place() {
        let (b, c) = (Address::repeat_byte(2), Address::repeat_byte(3));
        let dir = tempfile::tempdir().expect("tempdir");
        let staged = Db::open(&dir.path().join("staged"), AccessMode::ReadWrite).expect("open");
        let flat = Db::open(&dir.path().join("flat"), AccessMode::ReadWrite).expect("open");
        // Nonce by block: counting, a skip forward, system transactions carrying 0, another skip
        // at a stage's first block, and a stage where b sends nothing.
        let carried = |block: u64| match block {
            1..=9 => block - 1,
            10..=14 => block + 3,
            15..=17 => 0,
            21 => 40,
            22..=29 => 40 + block - 21,
            30..=39 => u64::MAX,
            _ => 60 + block,
        };
        let mut hows = Vec::new();
        for stage in 0..6u64 {
            let blocks = stage * 10 + 1..=stage * 10 + 10;
            let ids: Vec<u64> = blocks.clone().map(|n| TxId::new(n, 0).expect("id").0).collect();
            let mut seen: Vec<(Address, u64)> = ids.iter().map(|&id| (c, id)).collect();
            let sent: Vec<(Address, u64, u64)> = blocks
                .clone()
                .zip(&ids)
                .filter(|&(n, _)| carried(n) != u64::MAX)
                .map(|(n, &id)| (b, id, carried(n)))
                .collect();
            seen.extend(sent.iter().map(|&(a, id, _)| (a, id)));
            let before = staged.begin_read().expect("snapshot");
            let txn = staged.begin_write().expect("write");
            let mut family = gathered(&seen, &sent);
            family.staged = true;
            family.newest = Some(stage * 10 + 10);
            family.write(&txn, Some(&before), WindowStart::Closed, &mut Default::default()).expect("stage");
            drop(before);
            txn.commit().expect("commit");
            let txn = flat.begin_write().expect("write");
            gathered(&seen, &sent)
                .write(&txn, None, WindowStart::Closed, &mut Default::default())
                .expect("write");
            txn.commit().expect("commit");

            let (s, f) = (staged.begin_read().expect("read"), flat.begin_read().expect("read"));
            hows.push(levels::segment_keys(&s).expect("segments").len());
            for nonce in 0..140 {
                let want = sent_with_nonce(&f, &b, nonce).expect("read");
                assert_eq!(
                    sent_with_nonce(&s, &b, nonce).expect("read"),
                    want,
                    "stage {stage}, nonce {nonce}"
                );
            }
            assert_eq!(levels::count(&s, &b).expect("count"), levels::count(&f, &b).expect("count"));
            levels::check(&s, u64::MAX).expect("the levels check");
        }
        assert_eq!(hows, [0, 1, 2, 3, 4, 5], "every stage after the first is a segment");
        let before = staged.begin_read().expect("snapshot");
        let txn = staged.begin_write().expect("write");
        levels::fold_older_beside(&staged, &txn, &before).expect("fold");
        drop(before);
        txn.commit().expect("commit");
        let (s, f) = (staged.begin_read().expect("read"), flat.begin_read().expect("read"));
        assert!(!levels::any_older(&s).expect("older"));
        assert_eq!(s.entries::<OtsNonceRunsStaged>().expect("entries"), 0);
        for table in [TableId::OtsAppearances, TableId::OtsNonceAnchors] {
            assert_eq!(
                s.raw_entries(table).expect("entries"),
                f.raw_entries(table).expect("entries"),
                "{table:?}"
            );
        }
        assert!(!f.raw_entries(TableId::OtsNonceAnchors).expect("entries").is_empty());
    }

    /// Stages of many ids an address, taken a piece at a time (16 values in unit tests), with a
    /// sender's runs of nonces and skips on both sides of the pieces' cuts, received
    /// transactions and transactions met with both flags: written as a first stage (the table
    /// rewritten), staged segments, a stage folding them with its own ids and one rewriting the
    /// table, they read at every stage as the same rows written in place batch by batch, and
    /// leave the same bytes.
    #[test]
    fn a_stage_writes_an_address_in_pieces_as_in_place() {
        let (b, c, d) = (Address::repeat_byte(2), Address::repeat_byte(3), Address::repeat_byte(4));
        let dir = tempfile::tempdir().expect("tempdir");
        let staged = Db::open(&dir.path().join("staged"), AccessMode::ReadWrite).expect("open");
        let flat = Db::open(&dir.path().join("flat"), AccessMode::ReadWrite).expect("open");
        let nonce = |n: u64| match n {
            _ if n.is_multiple_of(31) => 0,
            _ if n.is_multiple_of(23) => 3 * n,
            _ => 3 * (n - n % 23),
        };
        let family = |stage: u64| {
            let mut family = Appearances::default();
            let mut see = |address: Address, id: TxId, received: bool| {
                family.seen.push((address, seen_value(address, id, received).expect("fits"))).expect("push");
            };
            for n in stage * 50 + 1..=stage * 50 + 50 {
                let [first, second] = [0, 1].map(|i| TxId::new(n, i).expect("id"));
                see(b, first, false);
                see(c, first, false);
                see(c, second, true);
                if n.is_multiple_of(7) {
                    see(c, first, true);
                }
            }
            see(d, TxId::new(stage * 50 + 9, 2).expect("id"), true);
            if stage == 5 {
                // Addresses enough for the main table to be rewritten whole.
                for i in 0..60u64 {
                    see(
                        Address::left_padding_from(&(1_000 + i).to_be_bytes()),
                        TxId::new(300, 3).expect("id"),
                        false,
                    );
                }
            }
            for n in stage * 50 + 1..=stage * 50 + 50 {
                family.sent.push((b, TxId::new(n, 0).expect("id").0, nonce(n))).expect("push");
            }
            family
        };
        let mut hows = Vec::new();
        for stage in 0..6u64 {
            let before = staged.begin_read().expect("snapshot");
            let txn = staged.begin_write().expect("write");
            let mut stage_family = family(stage);
            // A first stage, four segments, a stage that folds them with its ids, one that
            // rewrites the main table with its.
            stage_family.staged = (1..4).contains(&stage);
            stage_family.newest = Some(stage * 50 + 50);
            stage_family
                .write(&txn, Some(&before), WindowStart::Closed, &mut Default::default())
                .expect("stage");
            drop(before);
            txn.commit().expect("commit");
            let txn = flat.begin_write().expect("write");
            family(stage).write(&txn, None, WindowStart::Closed, &mut Default::default()).expect("write");
            txn.commit().expect("commit");

            let (s, f) = (staged.begin_read().expect("read"), flat.begin_read().expect("read"));
            hows.push(levels::segment_keys(&s).expect("segments").len());
            for who in [b, c, d] {
                assert_eq!(
                    levels::count(&s, &who).expect("count"),
                    levels::count(&f, &who).expect("count"),
                    "{who}"
                );
            }
            for n in 0..1_000 {
                let want = sent_with_nonce(&f, &b, n).expect("read");
                assert_eq!(sent_with_nonce(&s, &b, n).expect("read"), want, "stage {stage}, nonce {n}");
            }
            levels::check(&s, u64::MAX).expect("the levels check");
            if !(1..4).contains(&stage) {
                for table in [TableId::OtsAppearances, TableId::OtsNonceAnchors] {
                    assert_eq!(
                        s.raw_entries(table).expect("entries"),
                        f.raw_entries(table).expect("entries"),
                        "stage {stage}: {table:?}"
                    );
                }
            }
        }
        assert_eq!(hows, [0, 1, 2, 3, 0, 0]);
        let s = staged.begin_read().expect("read");
        assert!(levels::count(&s, &c).expect("count").all > 6 * 16 * 4, "c's stages came in pieces");
        assert!(!flat
            .begin_read()
            .expect("read")
            .raw_entries(TableId::OtsNonceAnchors)
            .expect("entries")
            .is_empty());
    }

    /// An address's role in its ids: settled ones by the list's marks, the window's by its sent
    /// and received rows; below the received marks of an upgraded database only a sent one is
    /// known, and an id the address does not appear in is not.
    #[test]
    fn roles_among_read_the_marks_and_the_window() {
        use crate::db::{
            codec::{ListId, RecentKey, SentTx},
            tables::{OtsAppearances, OtsRecentIdsByAddress, OtsRecentSentBySender},
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
        let who = Address::repeat_byte(7);
        let txn = db.begin_write().expect("write");
        let ids: Vec<u64> = (0..300).map(|n| 1_000 + 3 * n).collect();
        let roles: Vec<Role> = (0..300)
            .map(|n| match n % 3 {
                1 => Role::Sent,
                2 => Role::Received,
                _ => Role::Other,
            })
            .collect();
        lists::append::<OtsAppearances>(&txn, &who, &ids, &roles).expect("append");
        for (tx, kind) in [
            (5_000, IndexKind::Appearances),
            (5_001, IndexKind::Appearances),
            (5_002, IndexKind::Appearances),
            (5_001, IndexKind::Received),
        ] {
            txn.put::<OtsRecentIdsByAddress>(&RecentKey { kind, address: who }, &ListId(tx)).expect("window");
        }
        txn.put::<OtsRecentSentBySender>(&who, &SentTx { tx: 5_000, nonce: 9 }).expect("window");
        txn.commit().expect("commit");
        let asked = [ids[0], ids[1], ids[2], ids[298], ids[299], 5_000, 5_001, 5_002, 2];
        let (sent, got, other) = (Some(Role::Sent), Some(Role::Received), Some(Role::Other));
        let t = db.begin_read().expect("read");
        let roles = roles_among(&t, &who, &asked).expect("roles");
        assert_eq!(roles, vec![other, sent, got, sent, got, sent, got, other, None]);
        assert_eq!(settled_listed_within(&t, &who, ids[0], ids[5]).expect("listed"), Some(4));
        drop(t);

        // Upgraded from format 10 with ids[200] the first id past the tip then.
        let txn = db.begin_write().expect("write");
        state::set_received_marks_from(&txn, ids[200]).expect("mark");
        txn.commit().expect("commit");
        let t = db.begin_read().expect("read");
        let roles = roles_among(&t, &who, &asked).expect("roles");
        assert_eq!(roles, vec![None, sent, None, sent, got, sent, got, other, None]);
        assert_eq!(settled_listed_within(&t, &who, ids[0], ids[5]).expect("listed"), None);
        assert_eq!(settled_listed_within(&t, &who, ids[200], ids[205]).expect("listed"), Some(4));
    }
}
