//! Reading balances: a holder's balance of a token, a token's holder count and its holders
//! ranked by balance, ERC721 owners, ERC1155 balances per id. Each joins the large tables (the
//! state before the reorg window) with the window's newest values, and the owners with what a
//! catch-up's stages staged.

use alloy_primitives::{Address, U256};
use signet_libmdbx::tx::TransactionKind;

use super::{staged_owners, window::newest};
use crate::db::{
    codec::{Balance, BlockNumber, Count, MultiKey, PairKey, Rank, TokenIdKey, UndoRecordHash},
    state::Checkpoint,
    tables::*,
    DbResult, DupRun, Txn,
};

/// `holder`'s balance of `token` (zero when none is stored).
pub fn balance<K: TransactionKind>(txn: &Txn<K>, token: Address, holder: Address) -> DbResult<U256> {
    let key = PairKey { token, holder };
    if let Some(now) = newest::<OtsRecentBalances, _, _>(txn, &key)? {
        return Ok(now);
    }
    Ok(txn.get::<OtsTokenBalances>(&key)?.map_or(U256::ZERO, |b| b.0))
}

/// The number of holders of `token` with a non-zero balance: the count before the reorg window
/// plus what each window block changed it by.
pub fn holder_count<K: TransactionKind>(txn: &Txn<K>, token: &Address) -> DbResult<u64> {
    let stored = txn.get::<OtsTokenHolderCounts>(token)?.map_or(0, |Count(c)| c);
    let mut changes = txn.cursor::<OtsRecentHolderCounts>()?;
    let mut change = changes.seek_exact(token)?;
    let mut count = stored;
    while let Some(row) = change {
        count = count.saturating_add_signed(row.value);
        change = changes.next_dup()?;
    }
    Ok(count)
}

/// The holders of one token whose balance a window block changed: the entries of the large
/// table's ranking that a holders page passes over. Built from one snapshot, it serves every page
/// read from that snapshot; a server keeps it per token (rpc's `window_holders`), so a page of a
/// busy token checks each stored holder in memory instead of seeking the window for it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WindowHolders(foldhash::HashSet<Address>);

impl WindowHolders {
    /// The holders of `token` the window changed, as `txn` sees them.
    pub fn of<K: TransactionKind>(txn: &Txn<K>, token: &Address) -> DbResult<Self> {
        let mut holders = foldhash::HashSet::default();
        let mut cursor = txn.cursor::<OtsRecentBalances>()?;
        let mut entry = cursor.seek(&PairKey { token: *token, holder: Address::ZERO })?;
        while let Some((key, _)) = entry {
            if key.token != *token {
                break;
            }
            holders.insert(key.holder);
            entry = cursor.next_key()?;
        }
        Ok(Self(holders))
    }

    /// Whether the window changed `holder`'s balance.
    pub fn contains(&self, holder: &Address) -> bool {
        self.0.contains(holder)
    }

    /// How many holders the window changed.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the window changed no holder.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Holders `idx..idx + count` of `token`, largest balance first (ties by address): the large
/// table's ranking, less the holders the window changed, merged with the window's ranking of
/// those holders' balances now. Reads the page and what comes before it, never every holder the
/// window changed; each stored holder passed costs a seek into the window.
pub fn holders_page<K: TransactionKind>(
    txn: &Txn<K>,
    token: &Address,
    idx: u64,
    count: u64,
) -> DbResult<Vec<(Address, U256)>> {
    let mut window_balances = txn.cursor::<OtsRecentBalances>()?;
    let changed = |holder| Ok(window_balances.seek_exact(&PairKey { token: *token, holder })?.is_some());
    ranked_page(txn, token, idx, count, changed, RankingWalk { from: None, every: 0 }, |_| {})
}

/// [`holders_page`] with the holders the window changed already known (`changed`, read from the
/// same snapshot as `txn`): no seek per stored holder.
pub fn holders_page_knowing<K: TransactionKind>(
    txn: &Txn<K>,
    token: &Address,
    idx: u64,
    count: u64,
    changed: &WindowHolders,
) -> DbResult<Vec<(Address, U256)>> {
    let walk = RankingWalk { from: None, every: 0 };
    ranked_page(txn, token, idx, count, |holder| Ok(changed.contains(&holder)), walk, |_| {})
}

/// A page of holders: each with its balance, largest first.
pub type HolderPage = Vec<(Address, U256)>;

/// Where a walk of a token's holder ranking stood after passing `position` holders: the rank
/// of the next holder (`None`: the ranking's end). Every holder ranked before that rank was
/// passed and none after, so a walk can resume at it in any snapshot whose number of holders
/// ranked before it is `position` — the snapshot the mark was left in, or a later one once the
/// holders that moved since are counted ([`RankingMark::moved`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankingMark {
    /// Holders passed.
    pub position: u64,
    next: Option<Rank>,
}

impl RankingMark {
    /// The mark in a later snapshot, given each holder whose rank changed since, with its rank
    /// then and now (`None`: it held nothing); `None` when the moves cannot have led there (more
    /// holders left before the mark than were there).
    pub fn moved(self, moves: &RankMoves) -> Option<Self> {
        let before = |ranks: &[Rank]| match self.next {
            Some(next) => ranks.partition_point(|r| *r < next) as u64,
            None => ranks.len() as u64,
        };
        let position = (self.position + before(&moves.now)).checked_sub(before(&moves.then))?;
        Some(Self { position, next: self.next })
    }
}

/// The ranks that holders of one token had and have, for the holders whose balance changed
/// between two snapshots: each list sorted, holders with nothing left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RankMoves {
    then: Vec<Rank>,
    now: Vec<Rank>,
}

/// How a ranking walk starts and which marks it leaves.
#[derive(Debug, Clone, Copy)]
struct RankingWalk {
    /// A mark valid for this snapshot at or before the page, to start from instead of the top.
    from: Option<RankingMark>,
    /// A mark is left every this many holders passed (0: none).
    every: u64,
}

/// [`holders_page_knowing`] starting from `from` (a mark valid for `txn`'s snapshot at or before
/// `idx`) instead of the ranking's top, and leaving a mark every `every` holders it passes
/// beyond position `after` (where the marks already kept end): once some page walked that far,
/// a page costs its rows and fewer than `every` holders before them. Returns the page and the
/// marks it left, in order.
#[allow(clippy::too_many_arguments)] // the page, the snapshot's knowledge, the marks' spacing
pub fn holders_page_marked<K: TransactionKind>(
    txn: &Txn<K>,
    token: &Address,
    idx: u64,
    count: u64,
    changed: &WindowHolders,
    from: Option<RankingMark>,
    after: u64,
    every: u64,
) -> DbResult<(HolderPage, Vec<RankingMark>)> {
    let from = from.filter(|m| m.position <= idx);
    let mut left = Vec::new();
    let walk = RankingWalk { from, every };
    let changed_in_window = |holder| Ok(changed.contains(&holder));
    let page = ranked_page(txn, token, idx, count, changed_in_window, walk, |mark| {
        if mark.position > after {
            left.push(mark);
        }
    })?;
    Ok((page, left))
}

/// The holders of each of `tokens` whose balance the blocks after `since` changed, with their
/// ranks at `since` and now; `None` when `txn` cannot tell: `since` is not the block of that
/// number on the indexed chain (a reorg replaced it), or blocks after it have left the reorg
/// window (their changes are in the large tables, mixed with older ones), or none is indexed.
pub fn rank_moves_since<K: TransactionKind>(
    txn: &Txn<K>,
    since: Checkpoint,
    tokens: &foldhash::HashSet<Address>,
) -> DbResult<Option<foldhash::HashMap<Address, RankMoves>>> {
    match txn.get_as::<OtsUndoJournal, UndoRecordHash>(&BlockNumber(since.number))? {
        Some(UndoRecordHash(hash)) if hash == since.hash => {}
        _ => return Ok(None),
    }
    let mut keys = Vec::new();
    let mut rows = txn.cursor::<OtsRecentBalancesByBlock>()?;
    let mut row = rows.seek(&BlockNumber(since.number + 1))?;
    while let Some((_, prior)) = row {
        if tokens.contains(&prior.key.token) {
            keys.push(prior.key);
        }
        row = rows.next_entry()?;
    }
    keys.sort_unstable_by_key(|k| (k.token, k.holder));
    keys.dedup();
    let mut moves: foldhash::HashMap<Address, RankMoves> = foldhash::HashMap::default();
    let mut window = txn.cursor::<OtsRecentBalances>()?;
    let rank = |holder, balance: U256| (!balance.is_zero()).then_some(Rank { balance, holder });
    for key in keys {
        // The key's first dup after `since` is there (its block changed it): the dup before it,
        // if any, is its value at `since`; else the large table's is.
        if window.seek_sub_key(&key, &(since.number + 1))?.is_none() {
            return Ok(None);
        }
        let then = match window.prev_dup()? {
            Some(row) => row.value,
            None => txn.get::<OtsTokenBalances>(&key)?.map_or(U256::ZERO, |b| b.0),
        };
        window.seek_exact(&key)?;
        let now = window.last_dup()?.map_or(U256::ZERO, |row| row.value);
        let token = moves.entry(key.token).or_default();
        token.then.extend(rank(key.holder, then));
        token.now.extend(rank(key.holder, now));
    }
    for token in moves.values_mut() {
        token.then.sort_unstable();
        token.now.sort_unstable();
    }
    Ok(Some(moves))
}

/// The walk of a page.
fn ranked_page<K: TransactionKind>(
    txn: &Txn<K>,
    token: &Address,
    idx: u64,
    count: u64,
    mut changed_in_window: impl FnMut(Address) -> DbResult<bool>,
    walk: RankingWalk,
    mut mark: impl FnMut(RankingMark),
) -> DbResult<Vec<(Address, U256)>> {
    let mut out = Vec::new();
    if count == 0 {
        return Ok(out);
    }
    let mut fresh_cursor = txn.cursor::<OtsRecentHolderRanks>()?;
    // The large table's ranking is read a page of dups at a time: a busy token's walk passes
    // every stored holder the window changed.
    let mut stored_run = StoredRanking::Absent;
    let stored_cursor = txn.cursor::<OtsTokenHolderRanks>()?;
    let (start, position) = match walk.from {
        Some(from) => (from.next, from.position),
        None => (None, 0),
    };
    let (mut stored, mut fresh) = match (walk.from, start) {
        // A mark at the ranking's end: nothing after it.
        (Some(_), None) => (None, None),
        (Some(_), Some(next)) => {
            let stored = match DupRun::at_or_after(stored_cursor, token, &next)? {
                Some(placed) => stored_run.place(placed),
                None => stored_run.sort_if_deferred(txn, token, Some(&next))?,
            };
            (stored, fresh_cursor.seek_sub_key(token, &next)?)
        }
        (None, _) => {
            let stored = match DupRun::first(stored_cursor, token)? {
                Some(placed) => stored_run.place(placed),
                None => stored_run.sort_if_deferred(txn, token, None)?,
            };
            (stored, fresh_cursor.seek_exact(token)?)
        }
    };
    let mut position = position;
    let mut next_stored = || stored_run.next();
    loop {
        // The large table's next holder the window did not change.
        while let Some(rank) = stored {
            if !changed_in_window(rank.holder)? {
                break;
            }
            stored = next_stored()?;
        }
        if walk.every > 0 && position > 0 && position.is_multiple_of(walk.every) {
            let next = match (stored, fresh) {
                (Some(old), Some(new)) => Some(old.min(new)),
                (one, other) => one.or(other),
            };
            mark(RankingMark { position, next });
        }
        let next = match (stored, fresh) {
            (None, None) => break,
            (Some(old), Some(new)) if new < old => {
                fresh = fresh_cursor.next_dup()?;
                new
            }
            (Some(old), _) => {
                stored = next_stored()?;
                old
            }
            (None, Some(new)) => {
                fresh = fresh_cursor.next_dup()?;
                new
            }
        };
        position += 1;
        if position <= idx {
            continue;
        }
        out.push((next.holder, next.balance));
        if out.len() as u64 == count {
            break;
        }
    }
    Ok(out)
}

/// Where a walk reads the large table's ranking of a token.
enum StoredRanking<'tx, K: TransactionKind> {
    /// No ranking, or past its end.
    Absent,
    /// The stored dups, from the one after the current.
    Dups(DupRun<'tx, K, OtsTokenHolderRanks>),
    /// A ranking a catch-up deferred (`book::Ranking::Deferred`): the token's balances, sorted
    /// here, from the one after the current. It costs every holder of the token, until the
    /// catch-up's end builds the ranking.
    Sorted(std::vec::IntoIter<Rank>),
}

impl<'tx, K: TransactionKind> StoredRanking<'tx, K> {
    /// Keeps a run placed on the stored ranking and returns its first dup.
    fn place(&mut self, (run, rank): (DupRun<'tx, K, OtsTokenHolderRanks>, Rank)) -> Option<Rank> {
        *self = Self::Dups(run);
        Some(rank)
    }

    /// With no stored dups at or after `from` (the top: `None`): when the token has no ranking
    /// at all, its balances sorted, from `from` on; returns the first.
    fn sort_if_deferred(
        &mut self,
        txn: &'tx Txn<K>,
        token: &Address,
        from: Option<&Rank>,
    ) -> DbResult<Option<Rank>> {
        // Dups before `from`: the ranking is stored, and ends before it.
        if from.is_some() && txn.cursor::<OtsTokenHolderRanks>()?.seek_exact(token)?.is_some() {
            return Ok(None);
        }
        let mut sorted = Vec::new();
        let mut balances = txn.cursor::<OtsTokenBalances>()?;
        let mut entry = balances.seek(&PairKey { token: *token, holder: Address::ZERO })?;
        while let Some((key, Balance(balance))) = entry {
            if key.token != *token {
                break;
            }
            let rank = Rank { balance, holder: key.holder };
            if from.is_none_or(|from| rank >= *from) {
                sorted.push(rank);
            }
            entry = balances.next_entry()?;
        }
        sorted.sort_unstable();
        let mut ranks = sorted.into_iter();
        let first = ranks.next();
        *self = Self::Sorted(ranks);
        Ok(first)
    }

    /// The next holder of the ranking.
    fn next(&mut self) -> DbResult<Option<Rank>> {
        match self {
            Self::Absent => Ok(None),
            Self::Dups(run) => run.next_dup(),
            Self::Sorted(ranks) => Ok(ranks.next()),
        }
    }
}

/// The owner of id `id` of the ERC721 `token` (none when burnt or never seen): the window's
/// newest, else the newest a catch-up's segments hold, else the table's.
pub fn owner<K: TransactionKind>(txn: &Txn<K>, token: Address, id: U256) -> DbResult<Option<Address>> {
    let key = TokenIdKey { token, id };
    if let Some(now) = newest::<OtsRecentOwners, _, _>(txn, &key)? {
        return Ok((now != Address::ZERO).then_some(now));
    }
    if staged_owners::any(txn)? {
        if let Some(now) = staged_owners::Lookup::open(txn)?.owner(&key)? {
            return Ok((now != Address::ZERO).then_some(now));
        }
    }
    txn.get::<OtsERC721Owners>(&key)
}

/// `holder`'s balance of id `id` of the ERC1155 `token` (zero when none is stored).
pub fn multi_balance<K: TransactionKind>(txn: &Txn<K>, key: &MultiKey) -> DbResult<U256> {
    if let Some(now) = newest::<OtsRecentMultiBalances, _, _>(txn, key)? {
        return Ok(now);
    }
    Ok(txn.get::<OtsERC1155Balances>(key)?.map_or(U256::ZERO, |b| b.0))
}

/// Every id of the ERC1155 `token` that `holder` holds, with its balance, by id.
pub fn multi_balances<K: TransactionKind>(
    txn: &Txn<K>,
    token: Address,
    holder: Address,
) -> DbResult<Vec<(U256, U256)>> {
    let mut held = std::collections::BTreeMap::new();
    let first = MultiKey { token, holder, id: U256::ZERO };
    let mut cursor = txn.cursor::<OtsERC1155Balances>()?;
    let mut current = cursor.seek(&first)?;
    while let Some((key, Balance(b))) = current {
        if key.token != token || key.holder != holder {
            break;
        }
        held.insert(key.id, b);
        current = cursor.next_entry()?;
    }
    let mut window = txn.cursor::<OtsRecentMultiBalances>()?;
    let mut entry = window.seek(&first)?;
    while let Some((key, _)) = entry {
        if key.token != token || key.holder != holder {
            break;
        }
        match window.last_dup()? {
            Some(now) if !now.value.is_zero() => held.insert(key.id, now.value),
            _ => held.remove(&key.id),
        };
        entry = window.next_key()?;
    }
    Ok(held.into_iter().collect())
}

/// Every id of the ERC721 `token` that `holder` owns, ascending: one walk over the token's owners
/// (the stored ones, then a catch-up's segments', then the window's newest), so it costs the
/// token's ids.
pub fn owned_ids<K: TransactionKind>(txn: &Txn<K>, token: Address, holder: Address) -> DbResult<Vec<U256>> {
    if holder == Address::ZERO {
        // The window's zero owner means burnt: nobody owns those ids.
        return Ok(Vec::new());
    }
    let mut owned = std::collections::BTreeSet::new();
    let first = TokenIdKey { token, id: U256::ZERO };
    let mut cursor = txn.cursor::<OtsERC721Owners>()?;
    let mut current = cursor.seek(&first)?;
    while let Some((key, owner)) = current {
        if key.token != token {
            break;
        }
        if owner == holder {
            owned.insert(key.id);
        }
        current = cursor.next_entry()?;
    }
    let segments = staged_owners::segments(txn)?;
    if !segments.is_empty() {
        let mut staged = staged_owners::Merged::open(txn, &segments, Some(token))?;
        while let Some((key, owner)) = staged.next_owner()? {
            if owner == holder {
                owned.insert(key.id);
            } else {
                owned.remove(&key.id);
            }
        }
    }
    let mut window = txn.cursor::<OtsRecentOwners>()?;
    let mut entry = window.seek(&first)?;
    while let Some((key, _)) = entry {
        if key.token != token {
            break;
        }
        match window.last_dup()? {
            Some(now) if now.value == holder => owned.insert(key.id),
            _ => owned.remove(&key.id),
        };
        entry = window.next_key()?;
    }
    Ok(owned.into_iter().collect())
}
