//! The balances family (ours): who holds a token, how much, how many holders, ranked by
//! balance; ERC721 owners; ERC1155 balances per id.
//!
//! An ERC20 `Transfer(from, to, value)` moves `value`; an ERC721 `Transfer(from, to, id)` moves
//! the id and one unit of balance; an ERC1155 `TransferSingle`/`TransferBatch` moves amounts of
//! ids, kept per (token, holder, id) with their sum per (token, holder) for counts and ranks.
//! The zero address is never a holder. Each batch gathers its moves (`BalanceBook`), resolves
//! them against a read snapshot on the second core while the other families write, and writes
//! each value once. The large tables hold the state before the reorg window; what the window's
//! blocks changed waits in its own tables (`window.rs`) until they leave it, so that an unwind
//! deletes those rows and touches no balance, rank or count.

mod book;
mod bulk;
mod holders;
mod read;
pub(crate) mod staged_owners;
mod window;

use alloy_primitives::{Address, U256};
use signet_libmdbx::tx::TransactionKind;
use tracing::warn;

pub(crate) use book::rank_deferred;
pub use book::BalanceMove;
use book::{BalanceBook, Ranking, Resolved};
pub use bulk::BulkBalances;
pub use holders::rebuild as rebuild_window_holders;
pub use read::{
    balance, holder_count, holders_page, holders_page_knowing, holders_page_marked, multi_balance,
    multi_balances, owned_ids, owner, rank_moves_since, HolderPage, RankMoves, RankingMark, WindowHolders,
};
pub use window::{fold, prune, unwind};

use crate::index::family::{Checking, Family, Unwinding};
use crate::index::recent::WindowRows;
use crate::index::{
    error::WriteError,
    gather::{BlockRows, Buffering, Gatherer, Gathering, Writing},
    integrity::broken,
    undo::UndoLog,
    window::WindowStart,
};
use crate::{
    db::{
        codec::{Balance, Count, KeyCodec, PairKey, Rank},
        tables::*,
        Db, DbError, DbResult, Txn, WriteTxn,
    },
    decode::TokenLog,
    txid::TxId,
};

/// A batch's balance moves, resolved (on a second core, while the other families write) into
/// what it writes.
#[derive(Debug, Default)]
pub struct Balances {
    book: BalanceBook,
    /// The book resolved against a snapshot, once it is.
    resolved: Option<Box<Resolved>>,
}

impl Balances {
    /// Collects the moves of block `block`'s token logs, in log order.
    pub fn collect(&mut self, block: u64, logs: &[(TxId, TokenLog<'_>)]) {
        for (_, log) in logs {
            for m in BalanceMove::of(log) {
                self.book.push(block, m);
            }
        }
    }
}

impl Gatherer for Balances {
    fn collect(&mut self, block: &BlockRows<'_, '_>, _: &mut UndoLog) -> Result<(), WriteError> {
        Self::collect(self, block.block.number, block.logs);
        Ok(())
    }

    fn resolves_beside(&self) -> bool {
        true
    }

    /// The snapshot is exact: the write holds the writer lock, so nothing commits in between,
    /// and no other family writes a balance table. An empty book still settles the values of
    /// the blocks leaving the window.
    fn resolve(&mut self, db: &Db, window: WindowStart) -> Result<(), WriteError> {
        match db.begin_read() {
            Ok(snapshot) => {
                // The book is freed on this thread, once resolved.
                let book = std::mem::take(&mut self.book);
                self.resolved = Some(Box::new(book.resolve(&snapshot, window.first_kept())?));
            }
            // E.g. every reader slot taken by API clients: the write resolves them in the write
            // transaction instead, after the other families.
            Err(error) => {
                warn!(target: "ots::index", %error, "no read snapshot for balances; resolving them serially");
            }
        }
        Ok(())
    }

    /// Owners a catch-up's stages left in segments are folded first: the batch's owners (read
    /// through the segments) are then written over the owners they hold.
    fn write(self: Box<Self>, writing: &mut Writing<'_>) -> Result<(), WriteError> {
        staged_owners::fold(writing.txn, None)?;
        match self.resolved {
            Some(resolved) => {
                // Still the state the write started from for the balance table, the one a
                // rewrite copies: the fold wrote only owners.
                let before = writing.db.begin_read().ok();
                resolved.write(writing.txn, before.as_ref(), Ranking::Kept, None)?;
            }
            None => {
                self.book.resolve(writing.txn, writing.window.first_kept())?.write(
                    writing.txn,
                    None,
                    Ranking::Kept,
                    None,
                )?;
            }
        }
        Ok(())
    }
}

/// Every balance is non-zero, of a holder other than the zero address, ranked once; each
/// token's holder count is its number of balances, and of ranks — or, where a catch-up deferred
/// the token's ranking (`state::rankings_deferred`), of none.
fn check_balances<K: TransactionKind>(txn: &Txn<K>) -> Result<(), DbError> {
    let deferred = crate::db::state::rankings_deferred(txn)?;
    let mut per_token: std::collections::BTreeMap<Address, u64> = std::collections::BTreeMap::new();
    let mut ranks = txn.cursor::<OtsTokenHolderRanks>()?;
    let unranked = |token: &Address| -> DbResult<bool> {
        Ok(deferred && txn.cursor::<OtsTokenHolderRanks>()?.seek_exact(token)?.is_none())
    };
    let mut cursor = txn.cursor::<OtsTokenBalances>()?;
    let mut next = cursor.first()?;
    while let Some((key, Balance(balance))) = next {
        if balance.is_zero() || key.holder == Address::ZERO {
            return Err(broken::<OtsTokenBalances>(
                &key.encode_key(),
                "a zero balance or the zero address".into(),
            ));
        }
        let rank = Rank { balance, holder: key.holder };
        if !ranks.seek_both(&key.token, &rank)? && !unranked(&key.token)? {
            return Err(broken::<OtsTokenHolderRanks>(
                key.token.as_slice(),
                format!("no rank for holder {}", key.holder),
            ));
        }
        *per_token.entry(key.token).or_default() += 1;
        next = cursor.next_entry()?;
    }
    let mut cursor = txn.cursor::<OtsTokenHolderCounts>()?;
    let mut next = cursor.first()?;
    let mut counted = 0;
    while let Some((token, Count(count))) = next {
        let ranked = txn.cursor::<OtsTokenHolderRanks>()?.dups(&token)?.len() as u64;
        let ranked_whole = ranked == count || (ranked == 0 && deferred);
        if per_token.get(&token).copied() != Some(count) || !ranked_whole {
            return Err(broken::<OtsTokenHolderCounts>(
                token.as_slice(),
                format!("count {count}, {ranked} ranks"),
            ));
        }
        counted += 1;
        next = cursor.next_entry()?;
    }
    if counted != per_token.len() {
        return Err(broken::<OtsTokenHolderCounts>(&[], "a token with balances has no holder count".into()));
    }
    Ok(())
}

/// ERC1155 balances: none zero, none of the zero address, and per (token, holder) their sum is
/// the token-wide balance in `OtsTokenBalances`.
fn check_multi_balances<K: TransactionKind>(txn: &Txn<K>) -> Result<(), DbError> {
    let mut sums: std::collections::BTreeMap<PairKey, U256> = std::collections::BTreeMap::new();
    let mut cursor = txn.cursor::<OtsERC1155Balances>()?;
    let mut next = cursor.first()?;
    while let Some((key, Balance(balance))) = next {
        if balance.is_zero() || key.holder == Address::ZERO {
            return Err(broken::<OtsERC1155Balances>(
                key.encode_key().as_ref(),
                "a zero balance or the zero address".into(),
            ));
        }
        let sum = sums.entry(PairKey { token: key.token, holder: key.holder }).or_default();
        *sum = sum.saturating_add(balance);
        next = cursor.next_entry()?;
    }
    for (pair, sum) in sums {
        let total = txn.get::<OtsTokenBalances>(&pair)?.map_or(U256::ZERO, |b| b.0);
        if total != sum {
            return Err(broken::<OtsTokenBalances>(
                &pair.encode_key(),
                format!("token-wide balance {total}, but its ERC1155 ids add up to {sum}"),
            ));
        }
    }
    Ok(())
}

/// Balances, ranks, holder counts and ERC1155 balances agree, and the window's two orders name
/// the same rows.
pub fn check<K: TransactionKind>(txn: &Txn<K>) -> DbResult<()> {
    check_balances(txn)?;
    check_multi_balances(txn)?;
    window::check(txn)?;
    holders::check(txn)
}

/// Balances, holder counts and ranks, ERC721 owners, ERC1155 balances.
#[derive(Debug)]
pub struct BalancesFamily;

impl Family for BalancesFamily {
    const NAME: &'static str = "balances";
    const TABLES: &'static [TableId] = &[
        TableId::OtsTokenBalances,
        TableId::OtsTokenHolderRanks,
        TableId::OtsTokenHolderCounts,
        TableId::OtsERC721Owners,
        TableId::OtsERC1155Balances,
    ];
    const WINDOW_TABLES: &'static [TableId] = &[
        TableId::OtsRecentBalancesByBlock,
        TableId::OtsRecentOwnersByBlock,
        TableId::OtsRecentMultiBalancesByBlock,
        TableId::OtsRecentBalances,
        TableId::OtsRecentHolderCounts,
        TableId::OtsRecentHolderRanks,
        TableId::OtsRecentOwners,
        TableId::OtsRecentMultiBalances,
    ];
    const YOUNG_TABLES: &'static [TableId] = &[TableId::OtsOwnersStaged];

    fn gatherer(gathering: &Gathering) -> Option<Box<dyn Gatherer>> {
        Some(match &gathering.buffering {
            Buffering::InMemory => Box::new(Balances::default()),
            Buffering::Spilling { runs, each } => Box::new(BulkBalances::spilling(runs, *each)),
        })
    }

    fn fold(txn: &WriteTxn, window: WindowStart, leaving: &mut WindowRows) -> DbResult<()> {
        let _ = leaving;
        fold(txn, window)
    }

    fn prune(txn: &WriteTxn, window: WindowStart) -> DbResult<()> {
        prune(txn, window)
    }

    fn unwind(txn: &WriteTxn, unwinding: &Unwinding) -> DbResult<()> {
        unwind(txn, unwinding.to)
    }

    fn check<K: TransactionKind>(txn: &Txn<K>, checking: &mut Checking) -> DbResult<()> {
        staged_owners::check(txn, checking.tip)?;
        check(txn)
    }
}
