//! The holdings family: per holder, every token it has held, with the transaction it first
//! appeared in (`OtsERC20Holdings`, `OtsERC721Holdings`, `OtsERC1155Holdings`; docs/format.md,
//! "Holdings").
//!
//! A token kind's table is named once, in [`view_holdings`].

use std::sync::Arc;

use alloy_primitives::Address;
use signet_libmdbx::tx::TransactionKind;

use super::transfers::Touch;
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
        DbResult, ReadTxn, Txn, WriteTxn,
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
}

/// A holding keeps only its pair's first transaction: of one pair's rows only the least is
/// kept. On the 21 M chain about 100 M touches hold 2.3 M pairs; collapsed in each sorted run,
/// most never reach a run file or the merge (docs/benchmarks-history.md).
fn same_pair(a: &mut (Address, Address, TxId), b: &(Address, Address, TxId)) -> bool {
    a.0 == b.0 && a.1 == b.1
}

impl Default for Holdings {
    fn default() -> Self {
        Self { seen: std::array::from_fn(|_| Sorter::in_memory().collapsing(same_pair)) }
    }
}

impl Holdings {
    /// Holdings whose rows spill into sorted runs under `runs`, each kind buffering `budget`
    /// bytes.
    pub fn spilling(runs: &Arc<RunDir>, budget: usize) -> Self {
        Self { seen: std::array::from_fn(|_| Sorter::spilling(runs.clone(), budget).collapsing(same_pair)) }
    }

    /// Collects a transfer's touch: its address held (or holds) the token.
    pub fn touch(&mut self, touch: &Touch) -> DbResult<()> {
        Ok(self.seen[touch.kind as usize].push((touch.address, touch.token, touch.tx))?)
    }

    /// Adds a dup for every pair without one, with its first transaction of the rows; each
    /// added pair is journalled with the block of that transaction.
    ///
    /// With `before` (a snapshot of the state `txn` started from, given only for a stage's
    /// write), a table the rows touch a large share of is rewritten whole (`index::rewrite`).
    pub fn write(self, txn: &WriteTxn, before: Option<&ReadTxn>, undo: &mut UndoLog) -> DbResult<()> {
        for (kind, seen) in KINDS.into_iter().zip(self.seen) {
            view_holdings(kind, &mut Write { seen: Some(seen), txn, before, undo: &mut *undo })?;
        }
        Ok(())
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
        let rewrite = match self.before {
            Some(before) => {
                let pairs = seen.keys_at_most(|row| (row.0, row.1));
                Rewrite::<_, H>::begin_if_pays(self.txn, before, pairs, SUMMARY_REWRITE_SHARE)?
            }
            None => None,
        };
        let mut pairs = seen.groups(|(holder, token, tx)| ((holder, token), tx));
        match rewrite {
            Some(mut rewrite) => {
                for ((holder, token), txs) in pairs.by_ref() {
                    // A dup sorts by its token first: the old holdings before the pair are
                    // copied, the pair's own (an earlier first transaction) kept.
                    rewrite.copy_while(|h, held| (h, &held.token) < (&holder, &token))?;
                    let stored = rewrite.take_if(|h, held| *h == holder && held.token == token)?;
                    let fresh = stored.is_none();
                    let holding = stored.map_or(Holding { token, first: txs[0] }, |(_, held)| held);
                    rewrite.append(&holder, &holding)?;
                    if fresh {
                        self.undo.touch_at(holding.first, kind, holder);
                    }
                }
                rewrite.finish()?;
            }
            None => {
                let mut cursor = self.txn.walking_cursor::<H>()?;
                for ((holder, token), txs) in pairs.by_ref() {
                    let first = txs[0];
                    // Forward sync only ever finds earlier appearances stored.
                    if cursor.seek_sub_key_exact(&holder, &token)?.is_some() {
                        continue;
                    }
                    cursor.put(&holder, &Holding { token, first })?;
                    self.undo.touch_at(first, kind, holder);
                }
            }
        }
        pairs.finish()?;
        Ok(())
    }
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
/// (ots2's `holdingsIntegrityChecker`).
pub fn check<K: TransactionKind>(txn: &Txn<K>, tip: Option<u64>) -> DbResult<()> {
    for kind in KINDS {
        view_holdings(kind, &mut Check { txn, tip })?;
    }
    Ok(())
}

struct Read<'a, K: TransactionKind>(&'a Txn<K>, &'a Address);

impl<K: TransactionKind> HoldingsViewer for Read<'_, K> {
    type Output = DbResult<Vec<Holding>>;
    fn view<H: HoldingsTable>(&mut self, _: IndexKind) -> Self::Output {
        self.0.cursor::<H>()?.dups(self.1)
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
    fn view<H: HoldingsTable>(&mut self, _: IndexKind) -> Self::Output {
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
