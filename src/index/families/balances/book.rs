//! A batch's balance and owner changes: gathered as moves, then resolved and written table by
//! table in key order.
//!
//! Every value a batch touches is read once, through one cursor walking the keys in order (MDBX
//! finds a key next to the last one without a descent from the root), replayed in memory, and
//! written once, again in key order. The ranking's deletes and puts are sorted by rank so that
//! each lands near the previous one, or a token's ranking is rewritten whole when the batch
//! changed a large share of its holders; each token's holder count is written once per batch.
//! A batch that changes a large share of all balances rewrites the balance table whole
//! (`index::rewrite`).
//!
//! A value is read as the reorg window's newest dup where it has one, else the large table's row
//! (the state before the window). What the batch's blocks still in the window change becomes
//! window rows; what its older blocks change, with the last values of the window's blocks that
//! leave it now, settles into the large tables, each key written once.

use std::time::{Duration, Instant};

use alloy_primitives::{Address, U256};
use signet_libmdbx::tx::{Rw, TransactionKind};

use super::{holders, staged_owners};
use crate::db::{
    codec::{
        Balance, BalancePrior, BlockNumber, Count, MultiKey, MultiPrior, OwnerPrior, PairKey, Rank,
        TokenIdKey, WindowValue,
    },
    state,
    tables::*,
    DbResult, ReadTxn, TableCursor, Txn, WriteTxn,
};
use crate::decode::{TokenKind, TokenLog};
use crate::index::{integrity::broken, rewrite::rewrite_pays};

/// One balance-changing movement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BalanceMove {
    /// The token.
    pub token: Address,
    /// ERC20, ERC721 or ERC1155.
    pub kind: TokenKind,
    /// Sender (zero: a mint).
    pub from: Address,
    /// Receiver (zero: a burn).
    pub to: Address,
    /// ERC721 and ERC1155: the token id (zero for ERC20).
    pub id: U256,
    /// Units moved: the ERC20 or ERC1155 amount, 1 for an ERC721 id.
    pub amount: U256,
}

impl BalanceMove {
    /// The movements of `log`, one per id it moves (none for a log without an amount or id).
    pub fn of<'a>(log: &'a TokenLog<'_>) -> impl Iterator<Item = Self> + 'a {
        log.units().into_iter().flatten().map(move |(id, amount)| Self {
            token: log.token,
            kind: log.kind,
            from: log.from,
            to: log.to,
            id,
            amount,
        })
    }
}

/// One value while its batch is resolved.
#[derive(Debug, Clone, Copy)]
struct Slot<V> {
    /// What the large table holds before the batch: the value before the reorg window.
    stored: V,
    /// What it holds after: `stored` as the blocks that leave the window with this batch left
    /// it.
    settled: V,
    /// The value after the moves replayed so far.
    now: V,
    /// The newest window block that changed it, and that block's row in the batch's window
    /// rows.
    row: Option<(u64, usize)>,
    /// Its newest window value before the batch (`None`: no window block changed it).
    window: Option<V>,
    /// Whether a window block that stays in the window changed it.
    kept: bool,
}

impl<V: Copy> Slot<V> {
    fn new(stored: V) -> Self {
        Self { stored, settled: stored, now: stored, row: None, window: None, kept: false }
    }

    /// Its newest window value after the batch: the value now if a block still in the window
    /// changed it (the batch's blocks are newer than every such block), else none.
    fn window_after(&self) -> Option<V> {
        (self.kept || self.row.is_some()).then_some(self.now)
    }

    /// Sets the value as of `block`: settled if the block leaves the window with this batch
    /// (is below `keep_from`), else a window row of the block (one per key and block, holding
    /// the value before the block and after it).
    fn set<K: Copy>(&mut self, key: K, block: u64, keep_from: u64, now: V, rows: &mut Vec<WindowRow<K, V>>) {
        if block < keep_from {
            self.settled = now;
        } else if let Some(row) = self.row.filter(|(b, _)| *b == block).and_then(|(_, at)| rows.get_mut(at)) {
            row.after = now;
        } else {
            self.row = Some((block, rows.len()));
            rows.push(WindowRow { block, key, before: self.now, after: now });
        }
        self.now = now;
    }
}

/// What one block in the reorg window changed in one value.
#[derive(Debug, Clone, Copy)]
struct WindowRow<K, V> {
    block: u64,
    key: K,
    before: V,
    after: V,
}

/// Where a key's value before the batch comes from, besides the reorg window.
enum Before<V> {
    /// This value (a catch-up's segments hold it).
    Is(V),
    /// The large table.
    InTable,
    /// Nowhere: a stage that writes what it sets whatever was there does not read it.
    Unread,
}

/// A reference to no slot: a move's side whose holder is the zero address, or a move of another
/// kind.
const NO_SLOT: u32 = u32::MAX;

/// The slots of a batch, one per key its moves touch or a block leaving the window changed, in
/// table order, with the window's dups of the blocks leaving it.
#[derive(Debug)]
struct Slots<K, V> {
    /// The keys, ascending.
    keys: Vec<K>,
    /// The slot of `keys[i]`.
    slots: Vec<Slot<V>>,
    /// The dups of the window table that leave it with this batch, in key order.
    leaving: Vec<(K, WindowValue<V>)>,
}

impl<K: Copy + Ord, V: Copy> Slots<K, V> {
    /// Reads the value of every key in `refs` through one cursor per table, walking them in
    /// order: as `stored` says (or as the large table `T` holds it, `absent` where it has none),
    /// and as the window table `W` has it. Each key comes with an index into `slot_of`, which is
    /// set to the key's slot: the moves are then replayed in chain order straight to their
    /// slots, with no lookup (hashing every move's keys was a fifth of the balances' merge).
    fn read<T, W, Kind>(
        txn: &Txn<Kind>,
        mut refs: Vec<(K, u32)>,
        slot_of: &mut [u32],
        absent: V,
        value: impl Fn(T::Value) -> V,
        mut stored: impl FnMut(&K) -> DbResult<Before<V>>,
        keep_from: u64,
    ) -> DbResult<Self>
    where
        T: Table<Key = K>,
        W: DupTable + Table<Key = K, Value = WindowValue<V>>,
        Kind: TransactionKind,
    {
        refs.sort_unstable_by_key(|r| r.0);
        let mut keys: Vec<K> = Vec::new();
        for (key, at) in refs {
            if keys.last() != Some(&key) {
                keys.push(key);
            }
            if let Some(slot) = slot_of.get_mut(at as usize) {
                *slot = (keys.len() - 1) as u32;
            }
        }
        let mut slots = Vec::with_capacity(keys.len());
        let mut leaving = Vec::new();
        let mut cursor = txn.walking_cursor::<T>()?;
        let mut window = txn.walking_cursor::<W>()?;
        // A bulk stage's books find the window empty: no seek per key then.
        let window_empty = window.first()?.is_none();
        for key in &keys {
            let before = match stored(key)? {
                Before::Is(before) => before,
                Before::Unread => absent,
                Before::InTable => cursor.seek_exact(key)?.map_or(absent, &value),
            };
            let mut slot = Slot::new(before);
            let mut dup = if window_empty { None } else { window.seek_exact(key)? };
            while let Some(row) = dup {
                if row.block < keep_from {
                    slot.settled = row.value;
                    leaving.push((*key, row));
                } else {
                    slot.kept = true;
                }
                slot.now = row.value;
                slot.window = Some(row.value);
                dup = window.next_dup()?;
            }
            slots.push(slot);
        }
        Ok(Self { keys, slots, leaving })
    }

    /// Slot `at` with its key (`None` for [`NO_SLOT`]).
    fn get_mut(&mut self, at: u32) -> Option<(K, &mut Slot<V>)> {
        let key = *self.keys.get(at as usize)?;
        Some((key, self.slots.get_mut(at as usize)?))
    }

    /// Every key whose large-table value changes, in table order, with its value before the
    /// batch and after.
    fn changed(&self) -> impl Iterator<Item = (&K, V, V)> + '_
    where
        V: PartialEq,
    {
        self.keys
            .iter()
            .zip(&self.slots)
            .filter_map(|(k, slot)| (slot.stored != slot.settled).then_some((k, slot.stored, slot.settled)))
    }

    /// Every key with its value after the batch, in table order, changed or not: what a stage
    /// that did not read the values writes.
    fn settled(&self) -> impl Iterator<Item = (K, V)> + '_ {
        self.keys.iter().zip(&self.slots).map(|(k, slot)| (*k, slot.settled))
    }
}

/// The keys blocks below `keep_from` changed, by the window's per-block table `U`: their
/// window dups settle into the large tables with this batch.
fn leaving_keys<U, K>(
    txn: &Txn<impl TransactionKind>,
    keep_from: u64,
    key: impl Fn(U::Value) -> K,
) -> DbResult<Vec<(K, u32)>>
where
    U: DupTable + Table<Key = BlockNumber>,
{
    let mut out = Vec::new();
    let mut cursor = txn.cursor::<U>()?;
    let mut entry = cursor.first()?;
    while let Some((BlockNumber(block), row)) = entry {
        if block >= keep_from {
            break;
        }
        out.push((key(row), NO_SLOT));
        entry = cursor.next_entry()?;
    }
    Ok(out)
}

/// The balance and owner changes of one batch, in the order the chain made them.
#[derive(Debug, Default)]
pub(super) struct BalanceBook {
    moves: Vec<(u64, BalanceMove)>,
    /// Whether its ERC721 owners go to a stage's segment (`staged_owners`): then none is read.
    owners_staged: bool,
}

/// A batch's values resolved against the database: what the large tables hold after it, and the
/// rows of its blocks in the reorg window; ready to be written.
#[derive(Debug)]
pub(super) struct Resolved {
    balances: Slots<PairKey, U256>,
    owners: Slots<TokenIdKey, Address>,
    multi: Slots<MultiKey, U256>,
    balance_rows: Vec<WindowRow<PairKey, U256>>,
    owner_rows: Vec<WindowRow<TokenIdKey, Address>>,
    multi_rows: Vec<WindowRow<MultiKey, U256>>,
    /// The reorg window's first block after this batch.
    keep_from: u64,
    /// Whether the owners were resolved unread, for a stage's segment (`staged_owners`).
    owners_staged: bool,
}

impl Resolved {
    /// Moves `amount` into or out of the token-wide balance in slot `at` (none for the zero
    /// address). Logs cannot see every balance change (docs/format.md), so a balance never wraps
    /// around.
    fn shift(&mut self, block: u64, at: u32, add: bool, amount: U256) {
        let Some((key, slot)) = self.balances.get_mut(at) else { return };
        let now = if add { slot.now.saturating_add(amount) } else { slot.now.saturating_sub(amount) };
        slot.set(key, block, self.keep_from, now, &mut self.balance_rows);
    }

    /// Moves `amount` of one ERC1155 id in or out of slot `at` (none for the zero address);
    /// returns the units actually moved (an outflow never takes more than is held, the zero
    /// address moves all), which the token-wide balance then moves too, so that it stays the
    /// exact sum over ids.
    fn shift_multi(&mut self, block: u64, at: u32, add: bool, amount: U256) -> U256 {
        let Some((key, slot)) = self.multi.get_mut(at) else { return amount };
        let current = slot.now;
        let now = if add { current.saturating_add(amount) } else { current.saturating_sub(amount) };
        slot.set(key, block, self.keep_from, now, &mut self.multi_rows);
        if add {
            now - current
        } else {
            current - now
        }
    }

    fn apply(&mut self, block: u64, m: &BalanceMove, slots: MoveSlots) {
        match m.kind {
            TokenKind::Erc721 => {
                if let Some((key, slot)) = self.owners.get_mut(slots.owner) {
                    slot.set(key, block, self.keep_from, m.to, &mut self.owner_rows);
                }
            }
            TokenKind::Erc1155 => {
                let out = self.shift_multi(block, slots.multi[0], false, m.amount);
                let into = self.shift_multi(block, slots.multi[1], true, m.amount);
                self.shift(block, slots.pair[0], false, out);
                self.shift(block, slots.pair[1], true, into);
                return;
            }
            TokenKind::Erc20 => {}
        }
        // The token-wide balance: ERC20 amount, ERC721 ids held.
        self.shift(block, slots.pair[0], false, m.amount);
        self.shift(block, slots.pair[1], true, m.amount);
    }
}

/// The slots one move changes: token-wide balances of its sender and receiver, the ERC721
/// owner, the ERC1155 balances of sender and receiver ([`NO_SLOT`] where it changes none).
#[derive(Debug, Clone, Copy)]
struct MoveSlots {
    pair: [u32; 2],
    owner: u32,
    multi: [u32; 2],
}

impl BalanceBook {
    /// Records one move of `block` (blocks in chain order).
    pub(super) fn push(&mut self, block: u64, m: BalanceMove) {
        self.moves.push((block, m));
    }

    /// Whether the batch moved nothing.
    pub(super) fn is_empty(&self) -> bool {
        self.moves.is_empty()
    }

    /// Moves recorded.
    pub(super) fn len(&self) -> usize {
        self.moves.len()
    }

    /// A book whose ERC721 owners are appended to a stage's segment ([`staged_owners`]): none is
    /// read, since a transfer sets its id's owner whatever it was.
    ///
    /// [`staged_owners`]: super::staged_owners
    pub(super) fn staging_owners() -> Self {
        Self { moves: Vec::new(), owners_staged: true }
    }

    /// Reads every value the moves touch as `txn` sees it (the state the batch starts from,
    /// the reorg window's newest value where it has one) and replays the moves. Blocks from
    /// `keep_from` on stay in the window; the window's blocks below it leave it with this batch,
    /// and settle with the batch's older blocks into the large tables.
    pub(super) fn resolve<Kind: TransactionKind>(
        self,
        txn: &Txn<Kind>,
        keep_from: u64,
    ) -> DbResult<Resolved> {
        // Each move's sides are numbered 2·i (sender) and 2·i + 1 (receiver); its ERC721 owner i.
        let sides = |i: usize, m: &BalanceMove| {
            [(2 * i as u32, m.from), (2 * i as u32 + 1, m.to)]
                .into_iter()
                .filter(|(_, h)| *h != Address::ZERO)
        };
        let moves = self.moves.iter().enumerate();
        let mut pairs = leaving_keys::<OtsRecentBalancesByBlock, _>(txn, keep_from, |p| p.key)?;
        pairs.extend(moves.clone().flat_map(|(i, (_, m))| {
            sides(i, m).map(|(at, holder)| (PairKey { token: m.token, holder }, at))
        }));
        let mut ids = leaving_keys::<OtsRecentOwnersByBlock, _>(txn, keep_from, |p| p.key)?;
        ids.extend(
            moves
                .clone()
                .filter(|(_, (_, m))| m.kind == TokenKind::Erc721)
                .map(|(i, (_, m))| (TokenIdKey { token: m.token, id: m.id }, i as u32)),
        );
        let mut multi = leaving_keys::<OtsRecentMultiBalancesByBlock, _>(txn, keep_from, |p| p.key)?;
        multi.extend(moves.filter(|(_, (_, m))| m.kind == TokenKind::Erc1155).flat_map(|(i, (_, m))| {
            sides(i, m).map(|(at, holder)| (MultiKey { token: m.token, holder, id: m.id }, at))
        }));
        let mut pair_slots = vec![NO_SLOT; 2 * self.moves.len()];
        let mut owner_slots = vec![NO_SLOT; if ids.is_empty() { 0 } else { self.moves.len() }];
        let mut multi_slots = vec![NO_SLOT; if multi.is_empty() { 0 } else { 2 * self.moves.len() }];
        let balance = |b: Balance| b.0;
        // The owners a catch-up's segments hold come before the table's (a stage's unread).
        let mut staged = if self.owners_staged || ids.is_empty() {
            None
        } else {
            Some(staged_owners::Lookup::open(txn)?).filter(|lookup| !lookup.is_empty())
        };
        let owners_staged = self.owners_staged;
        let stored_owner = |id: &TokenIdKey| match staged.as_mut() {
            _ if owners_staged => Ok(Before::Unread),
            Some(lookup) => Ok(lookup.owner(id)?.map_or(Before::InTable, Before::Is)),
            None => Ok(Before::InTable),
        };
        let mut resolved = Resolved {
            balances: Slots::read::<OtsTokenBalances, OtsRecentBalances, _>(
                txn,
                pairs,
                &mut pair_slots,
                U256::ZERO,
                balance,
                |_| Ok(Before::InTable),
                keep_from,
            )?,
            owners: Slots::read::<OtsERC721Owners, OtsRecentOwners, _>(
                txn,
                ids,
                &mut owner_slots,
                Address::ZERO,
                |o| o,
                stored_owner,
                keep_from,
            )?,
            multi: Slots::read::<OtsERC1155Balances, OtsRecentMultiBalances, _>(
                txn,
                multi,
                &mut multi_slots,
                U256::ZERO,
                balance,
                |_| Ok(Before::InTable),
                keep_from,
            )?,
            balance_rows: Vec::new(),
            owner_rows: Vec::new(),
            multi_rows: Vec::new(),
            keep_from,
            owners_staged: self.owners_staged,
        };
        let slot = |slots: &[u32], at: usize| slots.get(at).copied().unwrap_or(NO_SLOT);
        for (i, (block, m)) in self.moves.iter().enumerate() {
            let slots = MoveSlots {
                pair: [slot(&pair_slots, 2 * i), slot(&pair_slots, 2 * i + 1)],
                owner: slot(&owner_slots, i),
                multi: [slot(&multi_slots, 2 * i), slot(&multi_slots, 2 * i + 1)],
            };
            resolved.apply(*block, m, slots);
        }
        Ok(resolved)
    }
}

/// Where a book's write went, table by table: what a stage's merge spends on each of the
/// family's large tables (docs/benchmarks.md).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct WriteTimes {
    /// Token-wide balances.
    pub(super) balances: Duration,
    /// Holder counts and rankings.
    pub(super) ranks: Duration,
    /// ERC721 owners.
    pub(super) owners: Duration,
    /// ERC1155 balances.
    pub(super) multi: Duration,
    /// The reorg window's tables.
    pub(super) window: Duration,
}

impl WriteTimes {
    /// Adds another book's times.
    pub(super) fn add(&mut self, other: Self) {
        self.balances += other.balances;
        self.ranks += other.ranks;
        self.owners += other.owners;
        self.multi += other.multi;
        self.window += other.window;
    }
}

/// How a write keeps the holder rankings of the tokens whose balances it changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ranking {
    /// Moves each changed holder's rank, or rebuilds the token's ranking: every ranking stays
    /// whole. Rankings a catch-up deferred are built first.
    Kept,
    /// Drops the token's ranking, to be built once at the catch-up's end ([`rank_deferred`]):
    /// a bulk stage's. Rebuilding every changed token's ranking at every stage cost each stage
    /// the holders of every busy token, a merge growing with the tables (docs/benchmarks.md).
    Deferred,
}

impl Resolved {
    /// Writes every changed balance, owner, rank and holder count of the large tables once,
    /// moves the window's rows of the blocks leaving it out, and the batch's in. With `before`
    /// (a snapshot of the state `txn` started from) the balance table is rewritten whole when
    /// the batch changes a large share of it. With `staged` (a bulk stage's segment), the owners
    /// go to the segment; owners resolved for one ([`BalanceBook::staging_owners`]) must.
    /// Returns how long each table took.
    pub(super) fn write(
        self,
        txn: &WriteTxn,
        before: Option<&ReadTxn>,
        ranking: Ranking,
        staged: Option<&mut staged_owners::Appending<'_>>,
    ) -> DbResult<WriteTimes> {
        let resolved = self;
        let mut times = WriteTimes::default();
        if ranking == Ranking::Kept {
            // From the balances as they stood before this write: its own changes then move
            // ranks of a whole ranking.
            rank_deferred(txn)?;
        }
        let mut since = Instant::now();
        let mut lap = |into: &mut Duration| *into += std::mem::replace(&mut since, Instant::now()).elapsed();
        write_balance_rows(txn, &resolved.balances, before)?;
        lap(&mut times.balances);
        write_ranks(txn, &resolved.balances, ranking)?;
        lap(&mut times.ranks);
        match staged {
            Some(segment) => {
                for (key, now) in resolved.owners.settled() {
                    segment.set(key, now)?;
                }
            }
            None if resolved.owners_staged && !resolved.owners.keys.is_empty() => {
                return Err(broken::<OtsOwnersStaged>(
                    &[],
                    "owners resolved for a segment, with none to take them".into(),
                ));
            }
            None => {
                let mut owners = txn.cursor::<OtsERC721Owners>()?;
                for (key, _, now) in resolved.owners.changed() {
                    if now == Address::ZERO {
                        owners.delete(key)?;
                    } else {
                        owners.put(key, &now)?;
                    }
                }
            }
        }
        lap(&mut times.owners);
        let mut multi = txn.cursor::<OtsERC1155Balances>()?;
        for (key, _, now) in resolved.multi.changed() {
            if now.is_zero() {
                multi.delete(key)?;
            } else {
                multi.put(key, &Balance(now))?;
            }
        }
        lap(&mut times.multi);
        // The window's holder counts and ranks follow its balances: each key's newest window
        // value before the batch and after it, as its slot knows them.
        let balances = &resolved.balances;
        let moved: Vec<(PairKey, Option<U256>, Option<U256>)> = balances
            .keys
            .iter()
            .zip(&balances.slots)
            .map(|(key, slot)| (*key, slot.window, slot.window_after()))
            .filter(|(_, before, after)| before != after)
            .collect();
        holders::drop_counts(txn, balances.leaving.iter().map(|(key, row)| (key.token, row.block)))?;
        holders::add_counts(
            txn,
            resolved.balance_rows.iter().map(|r| (r.block, r.key.token, r.before, r.after)),
        )?;
        write_window::<OtsRecentBalances, OtsRecentBalancesByBlock, _, _>(
            txn,
            &balances.leaving,
            resolved.balance_rows,
            |key, old| BalancePrior { key, old },
        )?;
        holders::move_ranks(txn, moved)?;
        write_window::<OtsRecentOwners, OtsRecentOwnersByBlock, _, _>(
            txn,
            &resolved.owners.leaving,
            resolved.owner_rows,
            |key, old| OwnerPrior { key, old },
        )?;
        write_window::<OtsRecentMultiBalances, OtsRecentMultiBalancesByBlock, _, _>(
            txn,
            &resolved.multi.leaving,
            resolved.multi_rows,
            |key, old| MultiPrior { key, old },
        )?;
        lap(&mut times.window);
        Ok(times)
    }
}

/// Deletes the dups of window table `W` that leave it (their per-block rows in `U` go with the
/// undo journal's), and writes a batch's window rows into both (rows in block order).
fn write_window<W, U, K, V>(
    txn: &WriteTxn,
    leaving: &[(K, WindowValue<V>)],
    mut rows: Vec<WindowRow<K, V>>,
    prior: impl Fn(K, V) -> U::Value,
) -> DbResult<()>
where
    W: DupTable + Table<Key = K, Value = WindowValue<V>>,
    U: DupTable + Table<Key = BlockNumber>,
    K: Copy + Ord,
    V: Copy,
{
    let mut window = txn.cursor::<W>()?;
    for (key, row) in leaving {
        window.delete_dup(key, row)?;
    }
    let mut undo = txn.cursor::<U>()?;
    let mut values = Vec::new();
    for block_rows in rows.chunk_by(|a, b| a.block == b.block) {
        values.clear();
        values.extend(block_rows.iter().map(|r| prior(r.key, r.before)));
        undo.put_dups(&BlockNumber(block_rows[0].block), &values)?;
    }
    rows.sort_unstable_by(|a, b| a.key.cmp(&b.key).then(a.block.cmp(&b.block)));
    for row in &rows {
        window.put(&row.key, &WindowValue { block: row.block, value: row.after })?;
    }
    Ok(())
}

/// A token's ranking is rewritten whole from its balances once a batch changes more than one in
/// this many of its holders. Moving a changed holder's rank (a delete and a put in the nested
/// tree) measured ~3.4 µs; the rewrite is a sequential scan, a sort and an append per holder,
/// several times cheaper, and took the 5 M-log benchmark from ~118k to ~128k logs/s.
const REBUILD_SHARE: u64 = 8;

/// Writes changed token-wide balances; with `before`, by rewriting the balance table whole when
/// that pays (`rewrite_pays`).
fn write_balance_rows(
    txn: &WriteTxn,
    slots: &Slots<PairKey, U256>,
    before: Option<&ReadTxn>,
) -> DbResult<()> {
    let changes = slots.changed().count() as u64;
    match before {
        Some(before) if rewrite_pays(txn.stats::<OtsTokenBalances>()?.entries, changes) => {
            rewrite_balances(txn, before, slots.changed())?;
        }
        _ => {
            let mut balances = txn.cursor::<OtsTokenBalances>()?;
            for (key, _, now) in slots.changed() {
                if now.is_zero() {
                    balances.delete(key)?;
                } else {
                    balances.put(key, &Balance(now))?;
                }
            }
        }
    }
    Ok(())
}

/// Writes the holder counts and rankings of the tokens whose balances changed (after the
/// balances: a rebuilt ranking reads them).
fn write_ranks(txn: &WriteTxn, slots: &Slots<PairKey, U256>, ranking: Ranking) -> DbResult<()> {
    let mut counts = txn.cursor::<OtsTokenHolderCounts>()?;
    let mut ranks = txn.cursor::<OtsTokenHolderRanks>()?;
    // Rank dups sort by !balance, then holder.
    let mut stale: Vec<(Address, U256, Address)> = Vec::new();
    let mut fresh: Vec<(Address, U256, Address)> = Vec::new();
    // The changes come in key order: each token's holders are one run.
    let mut changes = slots.changed().peekable();
    let mut run: Vec<(PairKey, U256, U256)> = Vec::new();
    // Rebuilt rankings read their tokens' balances: one walk over the batch.
    let mut balances = txn.walking_cursor::<OtsTokenBalances>()?;
    while let Some(&(first, _, _)) = changes.peek() {
        let token = first.token;
        run.clear();
        while let Some((key, was, now)) = changes.next_if(|(key, _, _)| key.token == token) {
            run.push((*key, was, now));
        }
        let gained = run.iter().filter(|(_, was, _)| was.is_zero()).count() as i64;
        let lost = run.iter().filter(|(_, _, now)| now.is_zero()).count() as i64;
        let stored = counts.seek_exact(&token)?.map_or(0, |Count(c)| c);
        if gained != lost {
            match stored.saturating_add_signed(gained - lost) {
                0 => counts.delete(&token).map(drop)?,
                next => counts.put(&token, &Count(next))?,
            }
        }
        if ranking == Ranking::Deferred {
            if ranks.seek_exact(&token)?.is_some() {
                ranks.replace_dups(&token, &[])?;
            }
            continue;
        }
        if (run.len() as u64).saturating_mul(REBUILD_SHARE) > stored {
            rebuild_ranks(&mut balances, &mut ranks, token)?;
            continue;
        }
        for &(key, was, now) in &run {
            if !was.is_zero() {
                stale.push((token, !was, key.holder));
            }
            if !now.is_zero() {
                fresh.push((token, !now, key.holder));
            }
        }
    }
    stale.sort_unstable();
    fresh.sort_unstable();
    for &(token, inverted, holder) in &stale {
        ranks.delete_dup(&token, &Rank { balance: !inverted, holder })?;
    }
    for &(token, inverted, holder) in &fresh {
        ranks.put(&token, &Rank { balance: !inverted, holder })?;
    }
    Ok(())
}

/// Empties the balance table and appends every row of `before` (the state `txn` started from)
/// with `changed` (in key order: key, value before, value now) merged in; zero balances leave no
/// row.
fn rewrite_balances<'a>(
    txn: &WriteTxn,
    before: &ReadTxn,
    changed: impl Iterator<Item = (&'a PairKey, U256, U256)>,
) -> DbResult<()> {
    let mut old = before.walking_cursor::<OtsTokenBalances>()?;
    let mut next_old = old.first()?;
    txn.clear::<OtsTokenBalances>()?;
    let mut out = txn.walking_cursor::<OtsTokenBalances>()?;
    let mut changes = changed.peekable();
    loop {
        let change = changes.peek().map(|(key, _, _)| **key);
        match next_old.take() {
            Some((key, value)) if change.is_none_or(|c| key < c) => {
                out.append(&key, &value)?;
                next_old = old.next_entry()?;
            }
            stored => {
                let Some((&key, _, now)) = changes.next() else { return Ok(()) };
                // A changed key replaces its stored row.
                next_old = match stored {
                    Some((stored_key, _)) if stored_key == key => old.next_entry()?,
                    other => other,
                };
                if !now.is_zero() {
                    out.append(&key, &Balance(now))?;
                }
            }
        }
    }
}

/// Builds every ranking a catch-up's stages deferred ([`Ranking::Deferred`]): each token with
/// holders and no ranking is ranked from its balances. Returns the tokens ranked (none, at the
/// cost of one read, when nothing was deferred).
pub(crate) fn rank_deferred(txn: &WriteTxn) -> DbResult<u64> {
    if !state::rankings_deferred(txn)? {
        return Ok(0);
    }
    let mut ranked = 0;
    let mut counts = txn.cursor::<OtsTokenHolderCounts>()?;
    let mut ranks = txn.cursor::<OtsTokenHolderRanks>()?;
    let mut balances = txn.walking_cursor::<OtsTokenBalances>()?;
    let mut next = counts.first()?;
    while let Some((token, _)) = next {
        if ranks.seek_exact(&token)?.is_none() {
            rebuild_ranks(&mut balances, &mut ranks, token)?;
            ranked += 1;
        }
        next = counts.next_entry()?;
    }
    state::set_rankings_deferred(txn, false)?;
    Ok(ranked)
}

/// Rewrites `token`'s ranking from its balances as they stand (read through `balances`).
fn rebuild_ranks(
    balances: &mut TableCursor<'_, Rw, OtsTokenBalances>,
    ranks: &mut TableCursor<'_, Rw, OtsTokenHolderRanks>,
    token: Address,
) -> DbResult<()> {
    let mut order: Vec<(U256, Address)> = Vec::new();
    let mut entry = balances.seek(&PairKey { token, holder: Address::ZERO })?;
    while let Some((key, Balance(balance))) = entry {
        if key.token != token {
            break;
        }
        order.push((!balance, key.holder));
        entry = balances.next_entry()?;
    }
    order.sort_unstable();
    let sorted: Vec<Rank> =
        order.into_iter().map(|(inverted, holder)| Rank { balance: !inverted, holder }).collect();
    ranks.replace_dups(&token, &sorted)
}
