//! The totals family: per address, the wei it received, sent, paid in fees and was withdrawn in
//! all, and the transactions it was the top-level recipient of (`OtsAddressTotals`), as of the
//! blocks older than the reorg window; what each block of the window added waits in
//! `OtsRecentTotals` (reads add it, an unwind drops it, a block leaving the window moves it into
//! the totals; docs/format.md, "Address totals").
//!
//! Value moves at any depth come from call frames: a successful CALL, CREATE, CREATE2 or
//! SELFDESTRUCT with a value moves it from `from` to `to`; DELEGATECALL, STATICCALL and
//! CALLCODE move nothing (their `value` is the caller's context, or stays with the caller); a
//! frame inside a reverted one moved nothing. A block without call frames (a node with no
//! tracer) counts its transactions' own values, when they succeeded. An OP Stack deposit's
//! `mint` is received by its sender whether or not the deposit succeeded, sent by no one.

use std::sync::Arc;

use alloy_primitives::{Address, U256};
use ots_classifiers::{BlockData, FrameKind};
use signet_libmdbx::tx::TransactionKind;

use super::staged_totals;
use crate::db::tables::TableId;
use crate::index::family::{Checking, Family, Unwinding};
use crate::index::recent::WindowRows;
use crate::index::{
    error::WriteError,
    gather::{BlockRows, Buffering, Gatherer, Gathering, Writing},
    integrity::broken,
    rewrite::{Rewrite, SUMMARY_REWRITE_SHARE},
    undo::UndoLog,
    window::WindowStart,
};
use crate::{
    db::{
        codec::{AddressTotals, BlockNumber, TotalsDelta, ValueCodec},
        tables::{OtsAddressTotals, OtsRecentTotals, OtsStagedTotals},
        DbError, DbResult, ReadTxn, Txn, WriteTxn,
    },
    etl::{Buffer, Record, RecordError, RunDir, Sorter},
};

/// Wei per gwei (withdrawal amounts are in gwei).
const GWEI: u64 = 1_000_000_000;

/// A run row: length byte, then the value's bytes as the table stores them.
impl Record for AddressTotals {
    fn encode(&self, out: &mut Vec<u8>) {
        let bytes = self.encode_value();
        out.push(bytes.len() as u8);
        out.extend_from_slice(&bytes);
    }
    fn decode(input: &mut &[u8]) -> Result<Self, RecordError> {
        let len = usize::from(u8::decode(input)?);
        if input.len() < len {
            return Err(RecordError("the row ends early"));
        }
        let (bytes, rest) = input.split_at(len);
        *input = rest;
        Self::decode_value(bytes).map_err(|_| RecordError("malformed address totals"))
    }
}

/// What each block added to each address's totals, for a batch or a bulk stage.
#[derive(Debug, Default)]
pub struct Totals {
    added: Sorter<(Address, u64, AddressTotals)>,
    /// The newest block that added to any totals: a stage's segment key.
    newest: Option<u64>,
    /// Whether a stage's sums may go to a segment of their own ([`staged_totals`]): a bulk
    /// stage's.
    staged: bool,
}

impl Totals {
    /// A bulk stage's totals, whose rows spill into sorted runs under `runs`, buffering
    /// `budget` bytes. A stage keeps no undo rows, so an address's rows of many blocks are
    /// summed in each run (into the row of the first of them): 35 M rows of the 21 M chain
    /// spill for 2.3 M addresses (docs/benchmarks-history.md, "Totals summed in their runs").
    pub fn spilling(runs: &Arc<RunDir>, budget: usize) -> Self {
        Self {
            added: Sorter::spilling(runs.clone(), budget).collapsing(sum_of_address),
            newest: None,
            staged: true,
        }
    }

    /// Collects what `block` adds to each address's totals.
    pub fn collect_block(&mut self, block: &BlockData) -> DbResult<()> {
        for (address, added) in block_totals(block) {
            self.added.push((address, block.number, added))?;
            self.newest = Some(block.number);
        }
        Ok(())
    }

    /// Adds what blocks leaving the reorg window (as it starts at `window`) added to the stored
    /// totals, address by address in key order, and keeps what each block it keeps added in its
    /// deltas (`OtsRecentTotals`); the deltas of window blocks that leave it as the write commits
    /// join the totals first.
    ///
    /// With `before` (a snapshot of the state `txn` started from, given only for a stage's
    /// write, whose window is empty), a table the rows touch a large share of is rewritten
    /// whole (`index::rewrite`); a bulk stage after the first appends its sums as a segment of
    /// their own instead ([`staged_totals`]). Any other write sums the segments into the table
    /// first.
    pub fn write(self, txn: &WriteTxn, before: Option<&ReadTxn>, window: WindowStart) -> DbResult<()> {
        fold(txn, window)?;
        let stage = before.filter(|_| self.staged && window == WindowStart::Closed);
        let mut before = before;
        if stage.is_none() {
            if staged_totals::fold_staged(txn, None)? > 0 {
                // The table has changed: the snapshot no longer holds it.
                before = None;
            }
        } else if let (Some(before), Some(key)) = (stage, self.newest) {
            let first = txn.entries::<OtsAddressTotals>()? == 0 && txn.entries::<OtsStagedTotals>()? == 0;
            if !first {
                return self.write_segment(txn, before, key);
            }
        }
        let added = self.added.into_sorted()?;
        let mut rewrite = match before {
            // A fold that moved deltas into the table wrote it: the snapshot no longer holds it.
            Some(before) if window == WindowStart::Closed && txn.stats::<OtsRecentTotals>()?.entries == 0 => {
                let addresses = added.keys_at_most(|row| row.0);
                Rewrite::<_, OtsAddressTotals>::begin_if_pays(txn, before, addresses, SUMMARY_REWRITE_SHARE)?
            }
            _ => None,
        };
        let mut groups = added.groups(|(address, block, added)| (address, (block, added)));
        let mut table = txn.cursor::<OtsAddressTotals>()?;
        let mut kept = txn.cursor::<OtsRecentTotals>()?;
        for (address, blocks) in groups.by_ref() {
            let mut older: Option<AddressTotals> = None;
            for &(block, added) in &blocks {
                if window.keeps(block) {
                    kept.put(&BlockNumber(block), &TotalsDelta { address, added })?;
                } else {
                    let sum =
                        older.unwrap_or_default().checked_add(&added).ok_or_else(|| overflow(&address))?;
                    older = Some(sum);
                }
            }
            let Some(added) = older else { continue };
            staged_totals::add_to_row(&mut rewrite, &mut table, address, &added)?;
        }
        groups.finish()?;
        if let Some(rewrite) = rewrite {
            rewrite.finish()?;
        }
        Ok(())
    }
}

impl Totals {
    /// Appends a stage's sums as the segment `key`, then folds every segment into the table if
    /// that leaves more than [`staged_totals::MAX_SEGMENTS`].
    fn write_segment(self, txn: &WriteTxn, before: &ReadTxn, key: u64) -> DbResult<()> {
        let added = self.added.into_sorted()?;
        // The block stays in each value: groups keep equal values once, and two blocks may add
        // the same.
        let mut groups = added.groups(|(address, block, added)| (address, (block, added)));
        let sums = groups.by_ref().map(|(address, blocks)| {
            let sum =
                blocks.iter().try_fold(AddressTotals::default(), |sum, (_, added)| sum.checked_add(added));
            sum.map(|sum| (address, sum)).ok_or_else(|| overflow(&address))
        });
        staged_totals::append_segment(txn, key, sums)?;
        groups.finish()?;
        if staged_totals::segment_keys(txn)?.len() > staged_totals::MAX_SEGMENTS {
            staged_totals::fold_staged(txn, Some(before))?;
        }
        Ok(())
    }
}

/// Folds `later` into `kept` if both are the same address's and the sum fits (a sum that does
/// not is left to the merge, which says so).
fn sum_of_address(kept: &mut (Address, u64, AddressTotals), later: &(Address, u64, AddressTotals)) -> bool {
    if kept.0 != later.0 {
        return false;
    }
    match kept.2.checked_add(&later.2) {
        Some(sum) => {
            kept.2 = sum;
            true
        }
        None => false,
    }
}

fn overflow(address: &Address) -> DbError {
    broken::<OtsAddressTotals>(address.as_slice(), "a sum past 2^256".into())
}

/// What `block` adds to each address's totals (a fast hash: the map is only read back whole,
/// into a sorter, and SipHash was a tenth of this function on the 21 M chain).
pub fn block_totals(block: &BlockData) -> foldhash::HashMap<Address, AddressTotals> {
    let mut out: foldhash::HashMap<Address, AddressTotals> = foldhash::HashMap::default();
    out.reserve(2 * block.transactions.len() + block.withdrawals.len());
    let mut moved = |from: Address, to: Address, value: U256| {
        if value.is_zero() {
            return;
        }
        let sent = &mut out.entry(from).or_default().sent;
        *sent = sent.saturating_add(value);
        let received = &mut out.entry(to).or_default().received;
        *received = received.saturating_add(value);
    };
    match &block.frames {
        Some(frames) => {
            for frame in frames.iter().filter(|f| f.success) {
                let moves = match frame.kind {
                    FrameKind::Call | FrameKind::SelfDestruct => true,
                    // A create frame that failed before an address was known names none.
                    FrameKind::Create | FrameKind::Create2 => !frame.to.is_zero(),
                    FrameKind::DelegateCall | FrameKind::StaticCall | FrameKind::CallCode => false,
                };
                if moves {
                    moved(frame.from, frame.to, frame.value);
                }
            }
        }
        None => {
            for (tx, receipt) in block.transactions.iter().zip(&block.receipts) {
                if let (true, Some(to)) = (receipt.success, tx.to.or(receipt.contract_address)) {
                    moved(tx.from, to, tx.value);
                }
            }
        }
    }
    for (tx, receipt) in block.transactions.iter().zip(&block.receipts) {
        // An OP Stack deposit's mint is new ETH: received, sent by no one.
        if let Some(mint) = tx.mint.filter(|m| !m.is_zero()) {
            let received = &mut out.entry(tx.from).or_default().received;
            *received = received.saturating_add(mint);
        }
        if !receipt.fee.is_zero() {
            let fees = &mut out.entry(tx.from).or_default().fees;
            *fees = fees.saturating_add(receipt.fee);
        }
        let mut recipients = [tx.to, receipt.contract_address];
        if recipients[0] == recipients[1] {
            recipients[1] = None;
        }
        for to in recipients.into_iter().flatten().filter(|to| *to != tx.from) {
            out.entry(to).or_default().top_level_in += 1;
        }
    }
    for w in &block.withdrawals {
        let withdrawn = &mut out.entry(w.address).or_default().withdrawn;
        *withdrawn = withdrawn.saturating_add(U256::from(w.amount_gwei) * U256::from(GWEI));
    }
    out.retain(|_, t| !t.is_zero());
    out
}

/// Moves the deltas of the blocks that leave the reorg window as it starts at `window` into
/// the totals.
pub fn fold(txn: &WriteTxn, window: WindowStart) -> DbResult<()> {
    let mut deltas = txn.cursor::<OtsRecentTotals>()?;
    let mut table = txn.cursor::<OtsAddressTotals>()?;
    while let Some((BlockNumber(block), _)) = deltas.first()?.filter(|(b, _)| !window.keeps(b.0)) {
        for TotalsDelta { address, added } in deltas.dups(&BlockNumber(block))? {
            let stored = table.seek_exact(&address)?.unwrap_or_default();
            table.put(&address, &stored.checked_add(&added).ok_or_else(|| overflow(&address))?)?;
        }
        txn.delete::<OtsRecentTotals>(&BlockNumber(block), None)?;
    }
    Ok(())
}

/// Drops what blocks `to + 1 ..= tip` added: they are in the reorg window, whose deltas the
/// totals do not hold yet.
pub fn unwind(txn: &WriteTxn, to: u64, tip: u64) -> DbResult<()> {
    for block in to + 1..=tip {
        txn.delete::<OtsRecentTotals>(&BlockNumber(block), None)?;
    }
    Ok(())
}

/// An address's totals: its row (all zero when it has none), what a catch-up's stages added
/// (one look-up per segment) and what the reorg window's blocks added (one per window block).
pub fn of<K: TransactionKind>(txn: &Txn<K>, address: &Address) -> DbResult<AddressTotals> {
    let stored = txn.get::<OtsAddressTotals>(address)?.unwrap_or_default();
    let staged = staged_totals::add_per_key::<OtsStagedTotals, K>(txn, address, stored)?;
    staged_totals::add_per_key::<OtsRecentTotals, K>(txn, address, staged)
}

/// No all-zero row; no window delta of a block past the tip; an address's row and its window
/// deltas sum below 2^256.
pub fn check<K: TransactionKind>(txn: &Txn<K>, tip: Option<u64>) -> DbResult<()> {
    let mut cursor = txn.cursor::<OtsAddressTotals>()?;
    let mut next = cursor.first()?;
    while let Some((address, totals)) = next {
        if totals.is_zero() {
            return Err(broken::<OtsAddressTotals>(address.as_slice(), "a row of zeros".into()));
        }
        next = cursor.next_entry()?;
    }
    let mut window = txn.cursor::<OtsRecentTotals>()?;
    let mut next = window.first()?;
    let mut sums: std::collections::BTreeMap<Address, AddressTotals> = std::collections::BTreeMap::new();
    while let Some((BlockNumber(block), delta)) = next {
        if tip.is_none_or(|t| block > t) {
            return Err(broken::<OtsRecentTotals>(
                &block.to_be_bytes(),
                "a record of a block past the tip".into(),
            ));
        }
        let sum = sums.entry(delta.address).or_default();
        *sum = sum.checked_add(&delta.added).ok_or_else(|| {
            broken::<OtsRecentTotals>(&block.to_be_bytes(), format!("{}'s totals pass 2^256", delta.address))
        })?;
        next = window.next_entry()?;
    }
    for (address, added) in sums {
        let stored = txn.get::<OtsAddressTotals>(&address)?.unwrap_or_default();
        if stored.checked_add(&added).is_none() {
            return Err(broken::<OtsRecentTotals>(address.as_slice(), "totals pass 2^256".into()));
        }
    }
    Ok(())
}

/// Per address, wei received, sent, paid in fees and withdrawn, and transactions received.
#[derive(Debug)]
pub struct TotalsFamily;

impl Gatherer for Totals {
    fn collect(&mut self, block: &BlockRows<'_, '_>, _: &mut UndoLog) -> Result<(), WriteError> {
        Ok(self.collect_block(block.block)?)
    }

    fn buffers(&mut self) -> Vec<&mut dyn Buffer> {
        vec![&mut self.added]
    }

    fn write(self: Box<Self>, writing: &mut Writing<'_>) -> Result<(), WriteError> {
        // A snapshot holds the state the write started from (the writer lock is held), which
        // a whole-table rewrite copies; only a stage's write (the window closed) rewrites.
        let before = (writing.window == WindowStart::Closed).then(|| writing.db.begin_read().ok()).flatten();
        Ok(Self::write(*self, writing.txn, before.as_ref(), writing.window)?)
    }
}

impl Family for TotalsFamily {
    const NAME: &'static str = "totals";
    const TABLES: &'static [TableId] = &[TableId::OtsAddressTotals];
    const WINDOW_TABLES: &'static [TableId] = &[TableId::OtsRecentTotals];
    const YOUNG_TABLES: &'static [TableId] = &[TableId::OtsStagedTotals];

    fn gatherer(gathering: &Gathering) -> Option<Box<dyn Gatherer>> {
        Some(Box::new(match &gathering.buffering {
            Buffering::InMemory => Totals::default(),
            Buffering::Spilling { runs, each } => Totals::spilling(runs, *each),
        }))
    }

    fn fold(txn: &WriteTxn, window: WindowStart, leaving: &mut WindowRows) -> DbResult<()> {
        let _ = leaving;
        fold(txn, window)
    }

    fn unwind(txn: &WriteTxn, unwinding: &Unwinding) -> DbResult<()> {
        unwind(txn, unwinding.to, unwinding.tip)
    }

    fn check<K: TransactionKind>(txn: &Txn<K>, checking: &mut Checking) -> DbResult<()> {
        check(txn, checking.tip)?;
        staged_totals::check(txn, checking.tip)
    }
}

#[cfg(test)]
mod tests {
    use alloy_primitives::{address, B256};
    use ots_classifiers::{CallFrame, ReceiptData, TxData, Withdrawal};

    use super::*;
    use crate::db::Db;

    const A: Address = address!("00000000000000000000000000000000000000aa");
    const B: Address = address!("00000000000000000000000000000000000000bb");
    const C: Address = address!("00000000000000000000000000000000000000cc");

    /// A stage that touches most addresses rewrites the table whole: the same entries as
    /// adding in place, old sums carried, untouched addresses copied.
    #[test]
    fn a_rewritten_table_holds_what_adding_in_place_gives() {
        let sent = |wei: u64| AddressTotals { sent: U256::from(wei), ..Default::default() };
        let write = |db: &Db, rows: &[(Address, u64, u64)], rewrite: bool| {
            let txn = db.begin_write().expect("begin");
            let before = rewrite.then(|| db.begin_read().expect("snapshot"));
            let mut totals = Totals::default();
            for &(address, block, wei) in rows {
                totals.added.push((address, block, sent(wei))).expect("push");
            }
            totals.write(&txn, before.as_ref(), WindowStart::Closed).expect("write");
            txn.commit().expect("commit");
        };
        let entries = |rewrite: bool| {
            let dir = tempfile::tempdir().expect("tempdir");
            let db = Db::open(dir.path(), crate::db::AccessMode::ReadWrite).expect("open");
            write(&db, &[(A, 1, 5), (C, 1, 7)], false);
            // Two of the two entries touched: a stage rewrites.
            write(&db, &[(A, 2, 1), (B, 2, 2)], rewrite);
            let txn = db.begin_read().expect("read");
            assert_eq!(of(&txn, &A).expect("A"), sent(6));
            assert_eq!(of(&txn, &B).expect("B"), sent(2));
            assert_eq!(of(&txn, &C).expect("C"), sent(7));
            txn.raw_entries(TableId::OtsAddressTotals).expect("entries")
        };
        assert_eq!(entries(true), entries(false));
    }

    /// Writes `rows` (address, block, wei sent) as one write of a stage (`staged`: a bulk
    /// stage's gatherer, whose later writes go to segments) or of a batch with the window closed.
    fn write_stage(db: &Db, rows: &[(Address, u64, u64)], staged: bool) {
        let dir = tempfile::tempdir().expect("tempdir");
        let runs = RunDir::create(dir.path()).expect("run dir");
        let txn = db.begin_write().expect("begin");
        let before = db.begin_read().expect("snapshot");
        let mut totals = if staged { Totals::spilling(&runs, 1 << 20) } else { Totals::default() };
        for &(address, block, wei) in rows {
            let sent = AddressTotals { sent: U256::from(wei), ..Default::default() };
            totals.added.push((address, block, sent)).expect("push");
            totals.newest = totals.newest.max(Some(block));
            if staged {
                // A run a row: no run sums an address's rows, the merge of the runs sees them all.
                totals.added.flush().expect("spill");
            }
        }
        totals.write(&txn, Some(&before), WindowStart::Closed).expect("write");
        txn.commit().expect("commit");
    }

    /// Later stages append segments that reads add; the catch-up's end sums them into the
    /// table, rewritten from a snapshot or added in place, which then holds what adding in place
    /// all along gives; so does the next write that is not a stage's.
    #[test]
    fn later_stages_stage_their_sums_and_folding_them_gives_what_adding_in_place_gives() {
        let sent = |wei: u64| AddressTotals { sent: U256::from(wei), ..Default::default() };
        let stages: [&[(Address, u64, u64)]; 3] =
            [&[(A, 1, 5), (C, 1, 7)], &[(A, 2, 1), (B, 2, 2), (A, 3, 1)], &[(B, 4, 1), (C, 4, 1)]];
        let open = || {
            let dir = tempfile::tempdir().expect("tempdir");
            let db = Db::open(dir.path(), crate::db::AccessMode::ReadWrite).expect("open");
            (dir, db)
        };
        let (_in_place_dir, in_place) = open();
        for rows in stages {
            write_stage(&in_place, rows, false);
        }
        let want =
            in_place.begin_read().expect("read").raw_entries(TableId::OtsAddressTotals).expect("entries");
        for how in ["snapshot", "in place", "batch"] {
            let (_dir, db) = open();
            for rows in stages {
                write_stage(&db, rows, true);
            }
            let txn = db.begin_read().expect("read");
            // The first stage found the table empty and wrote it; the others wrote segments.
            assert_eq!(staged_totals::segment_keys(&txn).expect("keys"), [3, 4], "{how}");
            assert_eq!(txn.entries::<OtsAddressTotals>().expect("entries"), 2);
            // Two blocks added the same to A: both count.
            assert_eq!(of(&txn, &A).expect("A"), sent(7));
            assert_eq!(of(&txn, &B).expect("B"), sent(3));
            assert_eq!(of(&txn, &C).expect("C"), sent(8));
            check(&txn, Some(4)).expect("check");
            staged_totals::check(&txn, Some(4)).expect("staged check");
            assert!(staged_totals::check(&txn, Some(3)).is_err(), "a segment past the tip");
            drop(txn);
            let txn = db.begin_write().expect("write");
            match how {
                "snapshot" => {
                    let before = db.begin_read().expect("snapshot");
                    assert_eq!(staged_totals::fold_staged(&txn, Some(&before)).expect("fold"), 3);
                }
                "in place" => assert_eq!(staged_totals::fold_staged(&txn, None).expect("fold"), 3),
                _ => Totals::default().write(&txn, None, WindowStart::Closed).expect("batch"),
            }
            txn.commit().expect("commit");
            let txn = db.begin_read().expect("read");
            assert_eq!(txn.entries::<OtsStagedTotals>().expect("entries"), 0, "{how}");
            assert_eq!(txn.raw_entries(TableId::OtsAddressTotals).expect("entries"), want, "{how}");
            assert_eq!(of(&txn, &A).expect("A"), sent(7));
        }
    }

    /// A stage that would leave more than `MAX_SEGMENTS` segments folds them all.
    #[test]
    fn a_stage_past_the_segment_bound_folds_every_segment() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), crate::db::AccessMode::ReadWrite).expect("open");
        let stages = staged_totals::MAX_SEGMENTS as u64 + 2;
        for block in 1..=stages {
            write_stage(&db, &[(A, block, 1), (Address::with_last_byte(block as u8), block, 2)], true);
            let txn = db.begin_read().expect("read");
            let segments = staged_totals::segment_keys(&txn).expect("keys").len() as u64;
            assert_eq!(segments, if block == stages { 0 } else { block - 1 }, "after stage {block}");
            assert_eq!(of(&txn, &A).expect("A").sent, U256::from(block));
        }
    }

    /// A stage's totals sum an address's rows in each run; a sum past 2^256 stays two rows, for
    /// the merge to refuse.
    #[test]
    fn a_stage_sums_an_address_in_its_runs_and_leaves_an_overflow_to_the_merge() {
        let dir = tempfile::tempdir().expect("tempdir");
        let runs = RunDir::create(dir.path()).expect("run dir");
        let mut totals = Totals::spilling(&runs, 1 << 20);
        let sent = |wei: U256| AddressTotals { sent: wei, ..Default::default() };
        for (address, block, wei) in [(A, 1, U256::from(5)), (B, 1, U256::from(1)), (A, 2, U256::from(7))] {
            totals.added.push((address, block, sent(wei))).expect("push");
        }
        for block in [3, 4] {
            totals.added.push((C, block, sent(U256::MAX))).expect("push");
        }
        totals.added.flush().expect("spill");
        let rows: Vec<_> =
            totals.added.into_sorted().expect("sorted").collect::<Result<_, _>>().expect("rows");
        let want = [
            (A, 1, sent(U256::from(12))),
            (B, 1, sent(U256::from(1))),
            (C, 3, sent(U256::MAX)),
            (C, 4, sent(U256::MAX)),
        ];
        assert_eq!(rows, want);
    }

    fn frame(kind: FrameKind, from: Address, to: Address, value: u64, success: bool) -> CallFrame {
        CallFrame { tx_index: 0, depth: 1, kind, from, to, value: U256::from(value), success }
    }

    fn block(frames: Option<Vec<CallFrame>>) -> BlockData {
        BlockData {
            number: 1,
            hash: B256::ZERO,
            parent_hash: B256::ZERO,
            timestamp: 0,
            coinbase: Address::ZERO,
            gas_limit: 0,
            transactions: vec![TxData {
                hash: B256::ZERO,
                from: A,
                to: Some(B),
                nonce: 0,
                value: U256::from(7),
                mint: None,
            }],
            receipts: vec![ReceiptData {
                success: true,
                contract_address: None,
                logs: Vec::new(),
                fee: U256::from(100),
            }],
            frames,
            withdrawals: vec![Withdrawal { index: 0, validator_index: 0, address: C, amount_gwei: 2 }],
            code_removed: Vec::new(),
        }
    }

    #[test]
    fn frames_move_value_unless_reverted_or_not_a_transfer() {
        let frames = vec![
            frame(FrameKind::Call, A, B, 7, true),
            frame(FrameKind::Call, B, C, 3, true),
            frame(FrameKind::Call, B, C, 50, false),
            frame(FrameKind::DelegateCall, B, C, 7, true),
            frame(FrameKind::CallCode, B, C, 7, true),
            frame(FrameKind::SelfDestruct, C, A, 2, true),
            frame(FrameKind::Create, B, Address::ZERO, 9, true),
        ];
        let t = block_totals(&block(Some(frames)));
        assert_eq!(t[&A].sent, U256::from(7));
        assert_eq!(t[&A].received, U256::from(2));
        assert_eq!(t[&A].fees, U256::from(100));
        assert_eq!(t[&B].received, U256::from(7));
        assert_eq!(t[&B].sent, U256::from(3));
        assert_eq!(t[&B].top_level_in, 1);
        assert_eq!(t[&C].received, U256::from(3));
        assert_eq!(t[&C].sent, U256::from(2));
        assert_eq!(t[&C].withdrawn, U256::from(2 * GWEI));
        assert!(!t.contains_key(&Address::ZERO));
    }

    #[test]
    fn without_frames_the_top_level_counts() {
        let t = block_totals(&block(None));
        assert_eq!((t[&A].sent, t[&B].received), (U256::from(7), U256::from(7)));
        let mut failed = block(None);
        failed.receipts[0].success = false;
        let t = block_totals(&failed);
        assert!(t[&A].sent.is_zero());
        assert!(t[&B].received.is_zero());
        assert_eq!(t[&A].fees, U256::from(100), "a failed transaction still pays");
        assert_eq!(t[&B].top_level_in, 1);
    }

    #[test]
    fn a_deposits_mint_is_received_by_its_sender_even_when_it_fails() {
        for success in [true, false] {
            let mut deposit = block(Some(vec![frame(FrameKind::Call, A, B, 7, success)]));
            deposit.transactions[0].mint = Some(U256::from(1_000));
            deposit.receipts[0].success = success;
            deposit.receipts[0].fee = U256::ZERO;
            let t = block_totals(&deposit);
            assert_eq!(t[&A].received, U256::from(1_000));
            assert_eq!(t[&A].sent, U256::from(if success { 7 } else { 0 }));
            assert!(t[&A].fees.is_zero());
        }
    }
}
