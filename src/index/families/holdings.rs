//! The holdings family: per holder, every token it has held, with the transaction it first
//! appeared in (`OtsERC20Holdings`, `OtsERC721Holdings`, `OtsERC1155Holdings`; docs/format.md,
//! "Holdings").
//!
//! A token kind's table is named once, in [`view_holdings`]. A catch-up's later stages append
//! the pairs they touch to staged segments instead ([`staged_holdings`]), which reads join.

use std::sync::Arc;

use alloy_primitives::Address;
use signet_libmdbx::tx::TransactionKind;
use tracing::warn;

use super::{staged_holdings, transfers::Touch};
use crate::index::family::{Checking, Family, Unwinding};
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
        codec::{Holding, IndexKind},
        tables::*,
        Db, DbResult, ReadTxn, Txn, WriteTxn,
    },
    decode::TokenKind,
    etl::{Buffer, RunDir, Sorter},
    txid::TxId,
};

/// A holdings table: holder → `token ‖ first TxId` dups.
pub trait HoldingsTable: DupSubKey<SubKey = Address> + Table<Key = Address, Value = Holding> {}
impl<T: DupSubKey<SubKey = Address> + Table<Key = Address, Value = Holding>> HoldingsTable for T {}

/// Every token kind with a holdings table, in the order a batch writes them.
const KINDS: [TokenKind; 3] = [TokenKind::Erc20, TokenKind::Erc721, TokenKind::Erc1155];

/// Code generic over one holdings table.
pub trait HoldingsViewer {
    /// What the code gives back.
    type Output;
    /// Runs on the table `H`, which the journal names `kind`.
    fn view<H: HoldingsTable>(&mut self, kind: IndexKind) -> Self::Output;
}

/// Runs `viewer` on the holdings table of `kind`: the one place a kind is tied to its table.
pub fn view_holdings<V: HoldingsViewer>(kind: TokenKind, viewer: &mut V) -> V::Output {
    match kind {
        TokenKind::Erc20 => viewer.view::<OtsERC20Holdings>(IndexKind::Erc20Holdings),
        TokenKind::Erc721 => viewer.view::<OtsERC721Holdings>(IndexKind::Erc721Holdings),
        TokenKind::Erc1155 => viewer.view::<OtsERC1155Holdings>(IndexKind::Erc1155Holdings),
    }
}

/// The (holder, token, transaction) triples of a batch (or a bulk stage), per token kind.
#[derive(Debug)]
pub struct Holdings {
    seen: [Sorter<(Address, Address, TxId)>; 3],
    /// The newest block of a touch: a stage's segment key.
    newest: Option<u64>,
    /// Where a bulk stage's rows spill, and each kind's budget: its pairs may go to a segment
    /// of their own ([`staged_holdings`]).
    spill: Option<(Arc<RunDir>, usize)>,
    /// The pairs of each kind that neither the tables nor a segment held, when they were looked
    /// up beside the other families' writes ([`Gatherer::resolve`]).
    new_pairs: Option<[Sorter<(Address, Address, TxId)>; 3]>,
}

/// A holding keeps only its pair's first transaction: of one pair's rows only the least is
/// kept. On the 21 M chain about 100 M touches hold 2.3 M pairs; collapsed in each sorted run,
/// most never reach a run file or the merge (docs/benchmarks-history.md).
fn same_pair(a: &mut (Address, Address, TxId), b: &(Address, Address, TxId)) -> bool {
    a.0 == b.0 && a.1 == b.1
}

impl Default for Holdings {
    fn default() -> Self {
        Self {
            seen: std::array::from_fn(|_| Sorter::in_memory().collapsing(same_pair)),
            newest: None,
            spill: None,
            new_pairs: None,
        }
    }
}

impl Holdings {
    /// Holdings whose rows spill into sorted runs under `runs`, each kind buffering `budget`
    /// bytes.
    pub fn spilling(runs: &Arc<RunDir>, budget: usize) -> Self {
        Self {
            seen: std::array::from_fn(|_| Sorter::spilling(runs.clone(), budget).collapsing(same_pair)),
            newest: None,
            spill: Some((runs.clone(), budget)),
            new_pairs: None,
        }
    }

    /// Collects a transfer's touch: its address held (or holds) the token.
    pub fn touch(&mut self, touch: &Touch) -> DbResult<()> {
        self.newest = self.newest.max(Some(touch.tx.block()));
        Ok(self.seen[touch.kind as usize].push((touch.address, touch.token, touch.tx))?)
    }

    /// Adds a dup for every pair without one, with its first transaction of the rows; each
    /// added pair is journalled with the block of that transaction.
    ///
    /// With `before` (a snapshot of the state `txn` started from, given only for a stage's
    /// write), a table the rows touch a large share of is rewritten whole (`index::rewrite`); a
    /// bulk stage after the first appends its pairs as a segment of their own instead
    /// ([`staged_holdings`]). Any other write folds the segments into the tables first.
    pub fn write(mut self, txn: &WriteTxn, before: Option<&ReadTxn>, undo: &mut UndoLog) -> DbResult<()> {
        let mut before = before;
        if let (Some(found), Some(segment)) = (self.new_pairs.take(), self.newest) {
            return append_segment(txn, segment, found);
        }
        match (before.filter(|_| self.spill.is_some()), self.newest) {
            (Some(_), Some(segment)) if !first_write(txn)? => {
                let found = self.look_up(txn)?;
                return append_segment(txn, segment, found);
            }
            (Some(_), _) => {}
            (None, _) => {
                if fold_staged(txn, None)? > 0 {
                    // The tables have changed: the snapshot no longer holds them.
                    before = None;
                }
            }
        }
        for (kind, seen) in KINDS.into_iter().zip(self.seen) {
            view_holdings(kind, &mut Write { seen: Some(seen), txn, before, undo: &mut *undo })?;
        }
        Ok(())
    }

    /// The stage's pairs, each with its first transaction, that neither the tables nor a
    /// segment of `txn` hold, per kind (spilling as the stage's rows do).
    fn look_up<K: TransactionKind>(
        &mut self,
        txn: &Txn<K>,
    ) -> DbResult<[Sorter<(Address, Address, TxId)>; 3]> {
        let segments = staged_holdings::segments(txn)?;
        let mut found: [Sorter<_>; 3] = std::array::from_fn(|_| match &self.spill {
            Some((runs, budget)) => Sorter::spilling(runs.clone(), *budget),
            None => Sorter::in_memory(),
        });
        for ((kind, seen), found) in KINDS.into_iter().zip(&mut self.seen).zip(&mut found) {
            let seen = std::mem::take(seen);
            view_holdings(kind, &mut NewPairs { seen: Some(seen), txn, segments: &segments, found })?;
        }
        Ok(found)
    }
}

/// Appends `found` (each kind's new pairs) as the tier-0 segment `segment`, then merges the
/// tiers it fills.
fn append_segment(
    txn: &WriteTxn,
    segment: u64,
    found: [Sorter<(Address, Address, TxId)>; 3],
) -> DbResult<()> {
    let into = staged_holdings::Segment { tier: 0, segment };
    let mut cursor = txn.cursor::<OtsHoldingsStaged>()?;
    for (kind, found) in KINDS.into_iter().zip(found) {
        let kind = view_holdings(kind, &mut KindOf);
        for pair in found.into_sorted()? {
            let (holder, token, first) = pair?;
            cursor.append(&into.key(kind, holder), &Holding { token, first })?;
        }
    }
    staged_holdings::merge_full_tiers(txn)?;
    Ok(())
}

/// The journal's name of a kind's table.
struct KindOf;

impl HoldingsViewer for KindOf {
    type Output = IndexKind;
    fn view<H: HoldingsTable>(&mut self, kind: IndexKind) -> IndexKind {
        kind
    }
}

/// Looks a stage's pairs of one table up, keeping those held nowhere.
struct NewPairs<'a, K: TransactionKind> {
    seen: Option<Sorter<(Address, Address, TxId)>>,
    txn: &'a Txn<K>,
    segments: &'a [staged_holdings::Segment],
    found: &'a mut Sorter<(Address, Address, TxId)>,
}

impl<K: TransactionKind> HoldingsViewer for NewPairs<'_, K> {
    type Output = DbResult<()>;
    fn view<H: HoldingsTable>(&mut self, kind: IndexKind) -> Self::Output {
        let Some(seen) = self.seen.take() else { return Ok(()) };
        let mut pairs = seen.into_sorted()?.groups(|(holder, token, tx)| ((holder, token), tx));
        // Nearly every pair a late stage touches is held already, most in the tables: looking
        // them up reads pages the stage leaves clean.
        let mut table = self.txn.walking_cursor::<H>()?;
        let mut staged = staged_holdings::Probe::open(self.txn, self.segments)?;
        for ((holder, token), txs) in pairs.by_ref() {
            if table.seek_sub_key_exact(&holder, &token)?.is_some() || staged.holds(kind, &holder, &token)? {
                continue;
            }
            self.found.push((holder, token, txs[0]))?;
        }
        pairs.finish()?;
        Ok(())
    }
}

/// Whether nothing is held yet, in the tables or their segments: a catch-up's first stage, which
/// writes the tables (appending to empty ones).
fn first_write<K: TransactionKind>(txn: &Txn<K>) -> DbResult<bool> {
    Ok(txn.entries::<OtsERC20Holdings>()? == 0
        && txn.entries::<OtsERC721Holdings>()? == 0
        && txn.entries::<OtsERC1155Holdings>()? == 0
        && txn.entries::<OtsHoldingsStaged>()? == 0)
}

/// Folds every staged segment into the holdings tables and empties `OtsHoldingsStaged`;
/// returns how many pairs the segments held (0, doing nothing, when there are none). With
/// `before` (a snapshot of the state `txn` started from, which must not have written the
/// holdings tables yet), a table the segments touch a large share of is rewritten whole.
pub fn fold_staged(txn: &WriteTxn, before: Option<&ReadTxn>) -> DbResult<u64> {
    let staged = txn.entries::<OtsHoldingsStaged>()?;
    if staged == 0 {
        return Ok(0);
    }
    let segments = staged_holdings::segments(txn)?;
    for kind in KINDS {
        view_holdings(kind, &mut Fold { txn, before, segments: &segments, staged })?;
    }
    txn.clear::<OtsHoldingsStaged>()?;
    Ok(staged)
}

struct Fold<'a> {
    txn: &'a WriteTxn,
    before: Option<&'a ReadTxn>,
    segments: &'a [staged_holdings::Segment],
    staged: u64,
}

impl HoldingsViewer for Fold<'_> {
    type Output = DbResult<()>;
    fn view<H: HoldingsTable>(&mut self, kind: IndexKind) -> Self::Output {
        let pairs = staged_holdings::Merged::open(self.txn, self.segments, Some(kind))?.triples();
        // The segments' blocks left the reorg window long ago: nothing journals them.
        merge_pairs::<H>(self.txn, self.before, self.staged, pairs, |_, _| {})
    }
}

struct Write<'a> {
    seen: Option<Sorter<(Address, Address, TxId)>>,
    txn: &'a WriteTxn,
    before: Option<&'a ReadTxn>,
    undo: &'a mut UndoLog,
}

impl HoldingsViewer for Write<'_> {
    type Output = DbResult<()>;
    fn view<H: HoldingsTable>(&mut self, kind: IndexKind) -> Self::Output {
        let Some(seen) = self.seen.take() else { return Ok(()) };
        let seen = seen.into_sorted()?;
        let changed = seen.keys_at_most(|row| (row.0, row.1));
        let mut pairs = seen.groups(|(holder, token, tx)| ((holder, token), tx));
        let undo = &mut *self.undo;
        let triples = pairs.by_ref().map(|((holder, token), txs)| Ok((holder, token, txs[0])));
        merge_pairs::<H>(self.txn, self.before, changed, triples, |first, holder| {
            undo.touch_at(first, kind, holder)
        })?;
        pairs.finish()?;
        Ok(())
    }
}

/// Adds to `H` every pair of `pairs` (holder, token, first transaction; in holder then token
/// order, each pair once) it does not hold yet, calling `added` with each added pair's first
/// transaction and holder. With `before` (a snapshot of the state `txn` started from), a table
/// the `changed` pairs are a large share of is rewritten whole (`index::rewrite`).
fn merge_pairs<H: HoldingsTable>(
    txn: &WriteTxn,
    before: Option<&ReadTxn>,
    changed: u64,
    pairs: impl Iterator<Item = DbResult<(Address, Address, TxId)>>,
    mut added: impl FnMut(TxId, Address),
) -> DbResult<()> {
    let rewrite = match before {
        Some(before) => Rewrite::<_, H>::begin_if_pays(txn, before, changed, SUMMARY_REWRITE_SHARE)?,
        None => None,
    };
    match rewrite {
        Some(mut rewrite) => {
            for pair in pairs {
                let (holder, token, first) = pair?;
                // A dup sorts by its token first: the old holdings before the pair are copied,
                // the pair's own kept if it is the earlier.
                rewrite.copy_while(|h, held| (h, &held.token) < (&holder, &token))?;
                let stored = rewrite.take_if(|h, held| *h == holder && held.token == token)?;
                let holding = match stored {
                    Some((_, held)) if held.first <= first => held,
                    Some(_) => Holding { token, first },
                    None => {
                        added(first, holder);
                        Holding { token, first }
                    }
                };
                rewrite.append(&holder, &holding)?;
            }
            rewrite.finish()?;
        }
        None => {
            let mut cursor = txn.walking_cursor::<H>()?;
            for pair in pairs {
                let (holder, token, first) = pair?;
                match cursor.seek_sub_key_exact(&holder, &token)? {
                    Some(held) if held.first <= first => {}
                    Some(held) => {
                        // The earlier first transaction is the pair's, wherever it was kept.
                        cursor.delete_dup(&holder, &held)?;
                        cursor.put(&holder, &Holding { token, first })?;
                    }
                    None => {
                        cursor.put(&holder, &Holding { token, first })?;
                        added(first, holder);
                    }
                }
            }
        }
    }
    Ok(())
}

struct Unwind<'a> {
    txn: &'a WriteTxn,
    holder: &'a Address,
    cut: u64,
}

impl HoldingsViewer for Unwind<'_> {
    type Output = DbResult<()>;
    fn view<H: HoldingsTable>(&mut self, _: IndexKind) -> Self::Output {
        for holding in self.txn.cursor::<H>()?.dups(self.holder)? {
            if holding.first.0 >= self.cut {
                self.txn.delete::<H>(self.holder, Some(&holding))?;
            }
        }
        Ok(())
    }
}

/// Unwinds every holder whose holdings of a kind the unwound blocks wrote.
struct UnwindTouched<'a> {
    txn: &'a WriteTxn,
    unwinding: &'a Unwinding,
}

impl HoldingsViewer for UnwindTouched<'_> {
    type Output = DbResult<()>;
    fn view<H: HoldingsTable>(&mut self, kind: IndexKind) -> Self::Output {
        let cut = self.unwinding.tx_cut();
        for holder in self.unwinding.touched(kind) {
            Unwind { txn: self.txn, holder, cut }.view::<H>(kind)?;
        }
        Ok(())
    }
}

struct Check<'a, K: TransactionKind> {
    txn: &'a Txn<K>,
    tip: Option<u64>,
}

impl<K: TransactionKind> HoldingsViewer for Check<'_, K> {
    type Output = DbResult<()>;
    fn view<H: HoldingsTable>(&mut self, _: IndexKind) -> Self::Output {
        let mut cursor = self.txn.cursor::<H>()?;
        let mut next = cursor.first()?;
        let mut previous: Option<(Address, Address)> = None;
        while let Some((holder, holding)) = next {
            if previous == Some((holder, holding.token)) {
                return Err(broken::<H>(holder.as_slice(), format!("two dups for token {}", holding.token)));
            }
            if self.tip.is_some_and(|t| holding.first.block() > t) {
                return Err(broken::<H>(
                    holder.as_slice(),
                    format!("first seen in block {}, beyond the tip", holding.first.block()),
                ));
            }
            previous = Some((holder, holding.token));
            next = cursor.next_entry()?;
        }
        Ok(())
    }
}

/// One dup per (holder, token) (the reference's duplicate-dup bug), none beyond the tip
/// (ots2's `holdingsIntegrityChecker`); in the staged segments too.
pub fn check<K: TransactionKind>(txn: &Txn<K>, tip: Option<u64>) -> DbResult<()> {
    for kind in KINDS {
        view_holdings(kind, &mut Check { txn, tip })?;
    }
    staged_holdings::check(txn, tip)
}

struct Read<'a, K: TransactionKind>(&'a Txn<K>, &'a Address);

impl<K: TransactionKind> HoldingsViewer for Read<'_, K> {
    type Output = DbResult<Vec<Holding>>;
    fn view<H: HoldingsTable>(&mut self, kind: IndexKind) -> Self::Output {
        let mut held = self.0.cursor::<H>()?.dups(self.1)?;
        if self.0.entries::<OtsHoldingsStaged>()? > 0 {
            held.extend(staged_holdings::held(self.0, kind, self.1)?);
            held = staged_holdings::earliest_by_token(held);
        }
        Ok(held)
    }
}

/// Every token of `kind` that `holder` has held, by token.
pub fn of<K: TransactionKind>(txn: &Txn<K>, kind: TokenKind, holder: &Address) -> DbResult<Vec<Holding>> {
    view_holdings(kind, &mut Read(txn, holder))
}

struct Paged<'a, K: TransactionKind> {
    txn: &'a Txn<K>,
    holder: &'a Address,
    idx: u64,
    count: u64,
}

impl<K: TransactionKind> HoldingsViewer for Paged<'_, K> {
    type Output = DbResult<(u64, Vec<Holding>)>;
    fn view<H: HoldingsTable>(&mut self, kind: IndexKind) -> Self::Output {
        if self.txn.entries::<OtsHoldingsStaged>()? > 0 {
            // During a catch-up: the main table's dups and the segments' joined, then cut.
            let held = Read(self.txn, self.holder).view::<H>(kind)?;
            let from = usize::try_from(self.idx).unwrap_or(usize::MAX).min(held.len());
            let count = usize::try_from(self.count).unwrap_or(usize::MAX);
            return Ok((held.len() as u64, held[from..].iter().take(count).copied().collect()));
        }
        let mut cursor = self.txn.cursor::<H>()?;
        let mut next = cursor.seek_exact(self.holder)?;
        if next.is_none() {
            return Ok((0, Vec::new()));
        }
        let total = cursor.dup_count()? as u64;
        let mut out = Vec::new();
        let mut at = 0;
        while let Some(holding) = next {
            if at >= self.idx.saturating_add(self.count) {
                break;
            }
            if at >= self.idx {
                out.push(holding);
            }
            at += 1;
            next = cursor.next_dup()?;
        }
        Ok((total, out))
    }
}

/// How many tokens of `kind` `holder` has held, and those at positions `idx..idx + count` in
/// token order.
pub fn page<K: TransactionKind>(
    txn: &Txn<K>,
    kind: TokenKind,
    holder: &Address,
    idx: u64,
    count: u64,
) -> DbResult<(u64, Vec<Holding>)> {
    view_holdings(kind, &mut Paged { txn, holder, idx, count })
}

/// Per holder, the tokens it has held.
#[derive(Debug)]
pub struct HoldingsFamily;

impl Gatherer for Holdings {
    fn resolves_beside(&self) -> bool {
        self.spill.is_some()
    }

    /// Looks a later stage's pairs up beside the other families' writes. The snapshot is the
    /// state the stage's transaction started from: it holds the writer lock, and no other family
    /// writes a holdings table.
    fn resolve(&mut self, db: &Db, window: WindowStart) -> Result<(), WriteError> {
        if window != WindowStart::Closed || self.newest.is_none() {
            return Ok(());
        }
        let snapshot = match db.begin_read() {
            Ok(snapshot) => snapshot,
            Err(error) => {
                warn!(target: "ots::index", %error, "no read snapshot for holdings; looking them up when they are written");
                return Ok(());
            }
        };
        if !first_write(&snapshot)? {
            self.new_pairs = Some(self.look_up(&snapshot)?);
        }
        Ok(())
    }

    fn collect(&mut self, block: &BlockRows<'_, '_>, _: &mut UndoLog) -> Result<(), WriteError> {
        for touch in block.touches {
            self.touch(touch)?;
        }
        Ok(())
    }

    fn buffers(&mut self) -> Vec<&mut dyn Buffer> {
        self.seen.iter_mut().map(|s| s as &mut dyn Buffer).collect()
    }

    fn write(self: Box<Self>, writing: &mut Writing<'_>) -> Result<(), WriteError> {
        // A snapshot holds the state the write started from (the writer lock is held), which
        // a whole-table rewrite copies; only a stage's write (the window closed) rewrites.
        let before = (writing.window == WindowStart::Closed).then(|| writing.db.begin_read().ok()).flatten();
        Ok(Self::write(*self, writing.txn, before.as_ref(), &mut writing.undo)?)
    }
}

impl Family for HoldingsFamily {
    const NAME: &'static str = "holdings";
    const TABLES: &'static [TableId] =
        &[TableId::OtsERC20Holdings, TableId::OtsERC721Holdings, TableId::OtsERC1155Holdings];
    const YOUNG_TABLES: &'static [TableId] = &[TableId::OtsHoldingsStaged];

    fn gatherer(gathering: &Gathering) -> Option<Box<dyn Gatherer>> {
        Some(Box::new(match &gathering.buffering {
            Buffering::InMemory => Holdings::default(),
            Buffering::Spilling { runs, each } => Holdings::spilling(runs, *each),
        }))
    }

    fn unwind(txn: &WriteTxn, unwinding: &Unwinding) -> DbResult<()> {
        for kind in KINDS {
            view_holdings(kind, &mut UnwindTouched { txn, unwinding })?;
        }
        Ok(())
    }

    fn check<K: TransactionKind>(txn: &Txn<K>, checking: &mut Checking) -> DbResult<()> {
        check(txn, checking.tip)
    }
}

#[cfg(test)]
mod tests {
    use alloy_primitives::address;

    use super::*;
    use crate::db::{AccessMode, Db};

    const HOLDER: Address = address!("00000000000000000000000000000000000000a1");
    const LATER: Address = address!("00000000000000000000000000000000000000a2");
    const EARLIER: Address = address!("00000000000000000000000000000000000000a0");
    const TOKEN: Address = address!("00000000000000000000000000000000000000b1");
    const OTHER: Address = address!("00000000000000000000000000000000000000b2");

    /// Touches of a small space (30 holders and one more each stage, 10 tokens, the three kinds),
    /// pseudo-random, each stage's in blocks `stage * 10 ..`: most pairs come back in many
    /// stages, and each stage has a few new ones.
    fn stage_touches(stage: u64) -> Vec<(TokenKind, Address, Address, TxId)> {
        let mut state = stage.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        (0..40)
            .map(|i| {
                let r = next();
                let kind = KINDS[(r % 3) as usize];
                let holder = Address::with_last_byte(((r >> 8) % (30 + stage)) as u8);
                let token = Address::with_last_byte(0xb0 + (r >> 16) as u8 % 10);
                (kind, holder, token, TxId::new(stage * 10 + i / 8, i % 8).expect("id"))
            })
            .collect()
    }

    /// Writes a stage's touches: in place, or staged, looked up beside (as a stage's write
    /// does) or on the writer (where no snapshot could be had).
    fn write_stage(db: &Db, stage: u64, staged: bool, beside: bool) {
        let txn = db.begin_write().expect("begin");
        let before = staged.then(|| db.begin_read().expect("snapshot"));
        let runs = RunDir::create(&db.dir().join("runs")).expect("runs");
        let mut holdings = if staged { Holdings::spilling(&runs, 1 << 20) } else { Holdings::default() };
        for (kind, holder, token, tx) in stage_touches(stage) {
            holdings.touch(&Touch { kind, address: holder, token, tx }).expect("touch");
        }
        if beside {
            holdings.resolve(db, WindowStart::Closed).expect("resolve");
        }
        holdings.write(&txn, before.as_ref(), &mut UndoLog::keeping(WindowStart::Closed)).expect("write");
        txn.commit().expect("commit");
    }

    /// Stages written as segments (their pairs looked up beside or on the writer) read, page and
    /// check as the same stages merged in place, at every stage; tiers merge; folded (by a
    /// rewrite or in place) the tables hold the same bytes.
    #[test]
    fn staged_pairs_read_and_fold_as_written_in_place() {
        let dirs = [(); 3].map(|()| tempfile::tempdir().expect("tempdir"));
        let [in_place, staged, staged_too] =
            [0, 1, 2].map(|i| Db::open(dirs[i].path(), AccessMode::ReadWrite).expect("open"));
        let fanout = staged_holdings::FANOUT as u64;
        let stages = 1 + fanout * fanout + fanout + 3;
        for stage in 1..=stages {
            write_stage(&in_place, stage, false, false);
            write_stage(&staged, stage, true, true);
            write_stage(&staged_too, stage, true, false);
            let (a, b) = (in_place.begin_read().expect("read"), staged.begin_read().expect("read"));
            for kind in KINDS {
                for holder in (0..30 + stage as u8).map(Address::with_last_byte) {
                    let held = of(&a, kind, &holder).expect("of");
                    assert_eq!(of(&b, kind, &holder).expect("of"), held, "stage {stage}");
                    for (idx, count) in [(0, 100), (0, 1), (1, 2), (3, 3), (9, 5), (50, 1)] {
                        assert_eq!(
                            page(&b, kind, &holder, idx, count).expect("page"),
                            page(&a, kind, &holder, idx, count).expect("page"),
                            "stage {stage}, {idx}+{count}"
                        );
                    }
                }
            }
            check(&b, Some(stage * 10 + 4)).expect("check");
            let newest = staged_holdings::segments(&b).expect("segments").last().map(|s| s.segment);
            if newest == Some(stage * 10 + 4) {
                assert!(check(&b, Some(stage * 10 + 3)).is_err(), "a segment past the tip");
            }
        }
        let segments = staged_holdings::segments(&staged.begin_read().expect("read")).expect("segments");
        // The first stage wrote the tables; of the other 75 segments, 64 merged into one of tier
        // 2 (through eight of tier 1) and 8 into one of tier 1.
        let tiers: Vec<u8> = segments.iter().map(|s| s.tier).collect();
        assert_eq!(tiers, [2, 1, 0, 0, 0], "{segments:?}");
        let entries = |db: &Db| {
            let txn = db.begin_read().expect("read");
            KINDS.map(|kind| {
                let table = match kind {
                    TokenKind::Erc20 => TableId::OtsERC20Holdings,
                    TokenKind::Erc721 => TableId::OtsERC721Holdings,
                    TokenKind::Erc1155 => TableId::OtsERC1155Holdings,
                };
                txn.raw_entries(table).expect("entries")
            })
        };
        for (db, rewrite) in [(&staged, true), (&staged_too, false)] {
            let txn = db.begin_write().expect("write");
            let before = rewrite.then(|| db.begin_read().expect("snapshot"));
            assert!(fold_staged(&txn, before.as_ref()).expect("fold") > 0);
            txn.commit().expect("commit");
            assert_eq!(db.begin_read().expect("read").entries::<OtsHoldingsStaged>().expect("entries"), 0);
            assert_eq!(entries(db), entries(&in_place), "folded with a rewrite: {rewrite}");
        }
    }

    /// The check refuses a segment with two dups of one token for a holder, or a pair first
    /// seen after its segment's block.
    #[test]
    fn the_check_refuses_a_broken_segment() {
        use crate::db::codec::StagedHoldingKey;
        let at = |block| TxId::new(block, 0).expect("id");
        for (first, second) in [(at(5), Some(at(6))), (at(30), None)] {
            let dir = tempfile::tempdir().expect("tempdir");
            let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
            let txn = db.begin_write().expect("write");
            let key =
                StagedHoldingKey { tier: 0, segment: 20, kind: IndexKind::Erc20Holdings, holder: HOLDER };
            txn.put::<OtsHoldingsStaged>(&key, &Holding { token: TOKEN, first }).expect("put");
            if let Some(first) = second {
                txn.put::<OtsHoldingsStaged>(&key, &Holding { token: TOKEN, first }).expect("put");
            }
            txn.commit().expect("commit");
            let txn = db.begin_read().expect("read");
            assert!(check(&txn, Some(40)).is_err(), "{first:?} {second:?}");
        }
    }

    /// A stage that touches most holdings rewrites the table whole: the same dups as adding in
    /// place, a pair's first transaction kept, untouched pairs copied.
    #[test]
    fn a_rewritten_table_holds_what_adding_in_place_gives() {
        let write = |db: &Db, rows: &[(Address, Address, u64)], rewrite: bool| {
            let txn = db.begin_write().expect("begin");
            let before = rewrite.then(|| db.begin_read().expect("snapshot"));
            let mut holdings = Holdings::default();
            for &(holder, token, tx) in rows {
                holdings.seen[TokenKind::Erc20 as usize].push((holder, token, TxId(tx))).expect("push");
            }
            holdings.write(&txn, before.as_ref(), &mut UndoLog::keeping(WindowStart::Closed)).expect("write");
            txn.commit().expect("commit");
        };
        let entries = |rewrite: bool| {
            let dir = tempfile::tempdir().expect("tempdir");
            let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
            write(&db, &[(HOLDER, TOKEN, 10), (LATER, TOKEN, 11)], false);
            // Three pairs against two entries: a stage rewrites.
            write(&db, &[(HOLDER, TOKEN, 20), (HOLDER, OTHER, 21), (EARLIER, TOKEN, 22)], rewrite);
            let txn = db.begin_read().expect("read");
            let (count, held) = page(&txn, TokenKind::Erc20, &HOLDER, 0, 10).expect("page");
            assert_eq!(count, 2);
            assert_eq!(
                held,
                [Holding { token: TOKEN, first: TxId(10) }, Holding { token: OTHER, first: TxId(21) }]
            );
            txn.raw_entries(TableId::OtsERC20Holdings).expect("entries")
        };
        assert_eq!(entries(true), entries(false));
    }
}
