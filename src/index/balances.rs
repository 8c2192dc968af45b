//! Token balances from Transfer logs (ours): who holds a token, how much, how many holders.
//!
//! An ERC20 `Transfer(from, to, value)` moves `value`; an ERC721 `Transfer(from, to, id)` moves
//! the id and one unit of balance; an ERC1155 `TransferSingle`/`TransferBatch` moves amounts of
//! ids, kept per (token, holder, id) with their sum per (token, holder) for counts and ranks.
//! The zero address is never a holder. Each batch gathers its
//! changes in memory and writes each (token, holder) once; the value each block found is kept
//! in `OtsBalanceUndo`/`OtsOwnerUndo` so that an unwind puts it back exactly.

use alloy_primitives::{Address, U256};
use signet_libmdbx::tx::TransactionKind;

use super::balance_book::restore_balances;
use crate::{
    db::{
        codec::{word_address, Balance, BlockNumber, Count, MultiKey, PairKey, TokenIdKey},
        tables::*,
        DbError, DbResult, Txn, WriteTxn,
    },
    decode::{TokenKind, TokenLog},
};

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

/// `holder`'s balance of `token` (zero when none is stored).
pub fn balance<K: TransactionKind>(txn: &Txn<K>, token: Address, holder: Address) -> DbResult<U256> {
    Ok(txn.get::<OtsTokenBalances>(&PairKey { token, holder })?.map_or(U256::ZERO, |b| b.0))
}

/// The number of holders of `token` with a non-zero balance.
pub fn holder_count<K: TransactionKind>(txn: &Txn<K>, token: &Address) -> DbResult<u64> {
    Ok(txn.get::<OtsTokenHolderCounts>(token)?.map_or(0, |Count(c)| c))
}

/// Holders `idx..idx + count` of `token`, largest balance first (ties by address).
pub fn holders_page<K: TransactionKind>(
    txn: &Txn<K>,
    token: &Address,
    idx: u64,
    count: u64,
) -> DbResult<Vec<(Address, U256)>> {
    let mut out = Vec::new();
    if count == 0 {
        return Ok(out);
    }
    let mut cursor = txn.cursor::<OtsTokenHolderRanks>()?;
    let mut current = cursor.seek_exact(token)?;
    let mut skipped = 0;
    while let Some(rank) = current {
        if skipped >= idx {
            out.push((rank.holder, rank.balance));
            if out.len() as u64 == count {
                break;
            }
        } else {
            skipped += 1;
        }
        current = cursor.next_dup()?;
    }
    Ok(out)
}

/// `holder`'s balance of id `id` of the ERC1155 `token` (zero when none is stored).
pub fn multi_balance<K: TransactionKind>(txn: &Txn<K>, key: &MultiKey) -> DbResult<U256> {
    Ok(txn.get::<OtsERC1155Balances>(key)?.map_or(U256::ZERO, |b| b.0))
}

/// Every id of the ERC1155 `token` that `holder` holds, with its balance, by id.
pub fn multi_balances<K: TransactionKind>(
    txn: &Txn<K>,
    token: Address,
    holder: Address,
) -> DbResult<Vec<(U256, U256)>> {
    let mut out = Vec::new();
    let mut cursor = txn.cursor::<OtsERC1155Balances>()?;
    let mut current = cursor.seek(&MultiKey { token, holder, id: U256::ZERO })?;
    while let Some((key, Balance(b))) = current {
        if key.token != token || key.holder != holder {
            break;
        }
        out.push((key.id, b));
        current = cursor.next_entry()?;
    }
    Ok(out)
}

fn set_multi_balance(txn: &WriteTxn, key: &MultiKey, value: U256) -> DbResult<()> {
    if value.is_zero() {
        txn.delete::<OtsERC1155Balances>(key, None)?;
        Ok(())
    } else {
        txn.put::<OtsERC1155Balances>(key, &Balance(value))
    }
}

/// Puts back what `block` changed (blocks must be undone newest first).
pub fn undo_block(txn: &WriteTxn, block: u64) -> Result<(), DbError> {
    let key = BlockNumber(block);
    let priors: Vec<(PairKey, U256)> = txn
        .cursor::<OtsBalanceUndo>()?
        .dups(&key)?
        .into_iter()
        .map(|prior| (PairKey { token: prior.token, holder: word_address(prior.key) }, prior.old))
        .collect();
    restore_balances(txn, &priors)?;
    txn.delete::<OtsBalanceUndo>(&key, None)?;
    for prior in txn.cursor::<OtsOwnerUndo>()?.dups(&key)? {
        let id = TokenIdKey { token: prior.token, id: prior.key };
        let owner = word_address(prior.old);
        if owner == Address::ZERO {
            txn.delete::<OtsERC721Owners>(&id, None)?;
        } else {
            txn.put::<OtsERC721Owners>(&id, &owner)?;
        }
    }
    txn.delete::<OtsOwnerUndo>(&key, None)?;
    for prior in txn.cursor::<OtsERC1155BalanceUndo>()?.dups(&key)? {
        set_multi_balance(txn, &prior.key, prior.old)?;
    }
    txn.delete::<OtsERC1155BalanceUndo>(&key, None)?;
    Ok(())
}
