//! Token balances from Transfer logs (ours): who holds a token, how much, how many holders.
//!
//! An ERC20 `Transfer(from, to, value)` moves `value`; an ERC721 `Transfer(from, to, id)` moves
//! the id and one unit of balance. The zero address is never a holder. Each batch gathers its
//! changes in memory and writes each (token, holder) once; the value each block found is kept
//! in `OtsBalanceUndo`/`OtsOwnerUndo` so that an unwind puts it back exactly.

use std::collections::{BTreeMap, HashMap, HashSet};

use alloy_primitives::{Address, U256};
use ots_classifiers::BlockData;
use signet_libmdbx::tx::TransactionKind;

use super::transfers::{TokenKind, TokenKinds, TRANSFER_TOPIC};
use crate::db::{
    codec::{address_word, word_address, Balance, BlockNumber, Count, PairKey, PriorValue, Rank, TokenIdKey},
    tables::*,
    DbError, DbResult, Txn, WriteTxn,
};

/// One balance-changing log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BalanceMove {
    /// The token.
    pub token: Address,
    /// ERC20 or ERC721.
    pub kind: TokenKind,
    /// Sender (zero: a mint).
    pub from: Address,
    /// Receiver (zero: a burn).
    pub to: Address,
    /// ERC20 amount, or the ERC721 token id.
    pub value: U256,
}

/// The balance-changing logs of `block`, in log order: Transfers of tokens `kinds_of` calls
/// ERC20 (the amount is the first data word; a log without one is skipped) or ERC721 (the id
/// is topic 3; a log without it is skipped).
pub fn balance_moves<E>(
    block: &BlockData,
    mut kinds_of: impl FnMut(&Address) -> Result<TokenKinds, E>,
) -> Result<Vec<BalanceMove>, E> {
    let mut out = Vec::new();
    for log in block.successful_logs() {
        if log.topics.len() < 3 || log.topics[0] != TRANSFER_TOPIC {
            continue;
        }
        let Some(kind) = kinds_of(&log.address)?.transfer else { continue };
        let value = match kind {
            TokenKind::Erc20 => match log.data.get(..32) {
                Some(word) => U256::from_be_slice(word),
                None => continue,
            },
            TokenKind::Erc721 => match log.topics.get(3) {
                Some(id) => U256::from_be_bytes(id.0),
                None => continue,
            },
            TokenKind::Erc1155 => continue,
        };
        let party = |i: usize| Address::from_slice(&log.topics[i][12..]);
        out.push(BalanceMove { token: log.address, kind, from: party(1), to: party(2), value });
    }
    Ok(out)
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

/// Sets a balance, keeping the ranking and the holder count in step.
pub fn set_balance(txn: &WriteTxn, token: Address, holder: Address, new: U256) -> DbResult<()> {
    let key = PairKey { token, holder };
    let old = balance(txn, token, holder)?;
    if old == new {
        return Ok(());
    }
    if old.is_zero() {
        adjust_count(txn, &token, true)?;
    } else {
        txn.delete::<OtsTokenHolderRanks>(&token, Some(&Rank { balance: old, holder }))?;
    }
    if new.is_zero() {
        txn.delete::<OtsTokenBalances>(&key, None)?;
        adjust_count(txn, &token, false)?;
    } else {
        txn.put::<OtsTokenBalances>(&key, &Balance(new))?;
        txn.put::<OtsTokenHolderRanks>(&token, &Rank { balance: new, holder })?;
    }
    Ok(())
}

fn adjust_count(txn: &WriteTxn, token: &Address, up: bool) -> DbResult<()> {
    let count = holder_count(txn, token)?;
    let next = if up { count + 1 } else { count.saturating_sub(1) };
    if next == 0 {
        txn.delete::<OtsTokenHolderCounts>(token, None)?;
        Ok(())
    } else {
        txn.put::<OtsTokenHolderCounts>(token, &Count(next))
    }
}

/// A batch's balance and owner changes, gathered before they are written.
#[derive(Debug, Default)]
pub struct BalanceBook {
    balances: HashMap<PairKey, U256>,
    owners: HashMap<TokenIdKey, Address>,
    balance_undo: BTreeMap<u64, Vec<PriorValue>>,
    owner_undo: BTreeMap<u64, Vec<PriorValue>>,
    seen: HashSet<(u64, PairKey)>,
    seen_ids: HashSet<(u64, TokenIdKey)>,
}

impl BalanceBook {
    fn shift(&mut self, txn: &WriteTxn, block: u64, key: PairKey, add: bool, amount: U256) -> DbResult<()> {
        if key.holder == Address::ZERO {
            return Ok(());
        }
        let current = match self.balances.get(&key) {
            Some(b) => *b,
            None => balance(txn, key.token, key.holder)?,
        };
        if self.seen.insert((block, key)) {
            let prior = PriorValue { token: key.token, key: address_word(key.holder), old: current };
            self.balance_undo.entry(block).or_default().push(prior);
        }
        // Logs cannot see every balance change (docs/format.md): never wrap around.
        let next = if add { current.saturating_add(amount) } else { current.saturating_sub(amount) };
        self.balances.insert(key, next);
        Ok(())
    }

    /// Applies one move of `block`.
    pub fn apply(&mut self, txn: &WriteTxn, block: u64, m: &BalanceMove) -> DbResult<()> {
        let amount = match m.kind {
            TokenKind::Erc721 => {
                let key = TokenIdKey { token: m.token, id: m.value };
                if self.seen_ids.insert((block, key)) {
                    let before = match self.owners.get(&key) {
                        Some(o) => *o,
                        None => txn.get::<OtsERC721Owners>(&key)?.unwrap_or(Address::ZERO),
                    };
                    let prior = PriorValue { token: m.token, key: m.value, old: address_word(before) };
                    self.owner_undo.entry(block).or_default().push(prior);
                }
                self.owners.insert(key, m.to);
                U256::from(1)
            }
            _ => m.value,
        };
        self.shift(txn, block, PairKey { token: m.token, holder: m.from }, false, amount)?;
        self.shift(txn, block, PairKey { token: m.token, holder: m.to }, true, amount)
    }

    /// Writes every changed balance and owner once, and what each block found before it.
    pub fn write(self, txn: &WriteTxn) -> DbResult<()> {
        let balances: BTreeMap<PairKey, U256> = self.balances.into_iter().collect();
        for (key, value) in balances {
            set_balance(txn, key.token, key.holder, value)?;
        }
        let owners: BTreeMap<TokenIdKey, Address> = self.owners.into_iter().collect();
        for (key, owner) in owners {
            if owner == Address::ZERO {
                txn.delete::<OtsERC721Owners>(&key, None)?;
            } else {
                txn.put::<OtsERC721Owners>(&key, &owner)?;
            }
        }
        for (block, priors) in self.balance_undo {
            for prior in priors {
                txn.put::<OtsBalanceUndo>(&BlockNumber(block), &prior)?;
            }
        }
        for (block, priors) in self.owner_undo {
            for prior in priors {
                txn.put::<OtsOwnerUndo>(&BlockNumber(block), &prior)?;
            }
        }
        Ok(())
    }
}

/// Puts back what `block` changed (blocks must be undone newest first).
pub fn undo_block(txn: &WriteTxn, block: u64) -> Result<(), DbError> {
    let key = BlockNumber(block);
    for prior in txn.cursor::<OtsBalanceUndo>()?.dups(&key)? {
        set_balance(txn, prior.token, word_address(prior.key), prior.old)?;
    }
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
    Ok(())
}
