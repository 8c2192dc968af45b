//! Token balances from Transfer logs (ours): who holds a token, how much, how many holders.
//!
//! An ERC20 `Transfer(from, to, value)` moves `value`; an ERC721 `Transfer(from, to, id)` moves
//! the id and one unit of balance; an ERC1155 `TransferSingle`/`TransferBatch` moves amounts of
//! ids, kept per (token, holder, id) with their sum per (token, holder) for counts and ranks.
//! The zero address is never a holder. Each batch gathers its
//! changes in memory and writes each (token, holder) once; the value each block found is kept
//! in `OtsBalanceUndo`/`OtsOwnerUndo` so that an unwind puts it back exactly.

use std::collections::{BTreeMap, HashMap, HashSet};

use alloy_primitives::{Address, U256};
use ots_classifiers::BlockData;
use signet_libmdbx::tx::TransactionKind;

use super::transfers::{
    erc1155_amounts, TokenKind, TokenKinds, TRANSFER_BATCH_TOPIC, TRANSFER_SINGLE_TOPIC, TRANSFER_TOPIC,
};
use crate::db::{
    codec::{
        address_word, word_address, Balance, BlockNumber, Count, MultiKey, MultiPrior, PairKey, PriorValue,
        Rank, TokenIdKey,
    },
    tables::*,
    DbError, DbResult, Txn, WriteTxn,
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

fn party(topic: &alloy_primitives::B256) -> Address {
    Address::from_slice(&topic[12..])
}

/// The balance-changing movements of `block`, in log order: Transfers of tokens `kinds_of`
/// calls ERC20 (the amount is the first data word) or ERC721 (the id is topic 3), and
/// TransferSingle/TransferBatch of ERC1155 tokens (one movement per id). A log without those
/// parts is skipped.
pub fn balance_moves<E>(
    block: &BlockData,
    mut kinds_of: impl FnMut(&Address) -> Result<TokenKinds, E>,
) -> Result<Vec<BalanceMove>, E> {
    let mut out = Vec::new();
    for log in block.successful_logs() {
        let Some(topic0) = log.topics.first() else { continue };
        if *topic0 == TRANSFER_TOPIC && log.topics.len() >= 3 {
            let Some(kind) = kinds_of(&log.address)?.transfer else { continue };
            let (id, amount) = match kind {
                TokenKind::Erc20 => match log.data.get(..32) {
                    Some(word) => (U256::ZERO, U256::from_be_slice(word)),
                    None => continue,
                },
                TokenKind::Erc721 => match log.topics.get(3) {
                    Some(id) => (U256::from_be_bytes(id.0), U256::from(1)),
                    None => continue,
                },
                TokenKind::Erc1155 => continue,
            };
            let (from, to) = (party(&log.topics[1]), party(&log.topics[2]));
            out.push(BalanceMove { token: log.address, kind, from, to, id, amount });
        } else if (*topic0 == TRANSFER_SINGLE_TOPIC || *topic0 == TRANSFER_BATCH_TOPIC)
            && log.topics.len() == 4
        {
            if !kinds_of(&log.address)?.multi {
                continue;
            }
            let Some(pairs) = erc1155_amounts(topic0, &log.data) else { continue };
            let (from, to) = (party(&log.topics[2]), party(&log.topics[3]));
            for (id, amount) in pairs {
                out.push(BalanceMove { token: log.address, kind: TokenKind::Erc1155, from, to, id, amount });
            }
        }
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
    multi: HashMap<MultiKey, U256>,
    multi_undo: BTreeMap<u64, Vec<MultiPrior>>,
    seen_multi: HashSet<(u64, MultiKey)>,
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

    /// Moves `amount` of one id in or out; returns the units actually moved (an outflow never
    /// takes more than is held), which the token-wide balance then moves too, so that it stays
    /// the exact sum over ids.
    fn shift_multi(
        &mut self,
        txn: &WriteTxn,
        block: u64,
        key: MultiKey,
        add: bool,
        amount: U256,
    ) -> DbResult<U256> {
        if key.holder == Address::ZERO {
            return Ok(amount);
        }
        let current = match self.multi.get(&key) {
            Some(b) => *b,
            None => multi_balance(txn, &key)?,
        };
        if self.seen_multi.insert((block, key)) {
            self.multi_undo.entry(block).or_default().push(MultiPrior { key, old: current });
        }
        let next = if add { current.saturating_add(amount) } else { current.saturating_sub(amount) };
        self.multi.insert(key, next);
        Ok(if add { next - current } else { current - next })
    }

    /// Applies one move of `block`.
    pub fn apply(&mut self, txn: &WriteTxn, block: u64, m: &BalanceMove) -> DbResult<()> {
        match m.kind {
            TokenKind::Erc721 => {
                let key = TokenIdKey { token: m.token, id: m.id };
                if self.seen_ids.insert((block, key)) {
                    let before = match self.owners.get(&key) {
                        Some(o) => *o,
                        None => txn.get::<OtsERC721Owners>(&key)?.unwrap_or(Address::ZERO),
                    };
                    let prior = PriorValue { token: m.token, key: m.id, old: address_word(before) };
                    self.owner_undo.entry(block).or_default().push(prior);
                }
                self.owners.insert(key, m.to);
            }
            TokenKind::Erc1155 => {
                let key = |holder| MultiKey { token: m.token, holder, id: m.id };
                let out = self.shift_multi(txn, block, key(m.from), false, m.amount)?;
                let into = self.shift_multi(txn, block, key(m.to), true, m.amount)?;
                self.shift(txn, block, PairKey { token: m.token, holder: m.from }, false, out)?;
                return self.shift(txn, block, PairKey { token: m.token, holder: m.to }, true, into);
            }
            TokenKind::Erc20 => {}
        }
        // The token-wide balance: ERC20 amount, ERC721 ids held.
        self.shift(txn, block, PairKey { token: m.token, holder: m.from }, false, m.amount)?;
        self.shift(txn, block, PairKey { token: m.token, holder: m.to }, true, m.amount)
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
        let multi: BTreeMap<MultiKey, U256> = self.multi.into_iter().collect();
        for (key, value) in multi {
            set_multi_balance(txn, &key, value)?;
        }
        for (block, priors) in self.multi_undo {
            for prior in priors {
                txn.put::<OtsERC1155BalanceUndo>(&BlockNumber(block), &prior)?;
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
    for prior in txn.cursor::<OtsERC1155BalanceUndo>()?.dups(&key)? {
        set_multi_balance(txn, &prior.key, prior.old)?;
    }
    txn.delete::<OtsERC1155BalanceUndo>(&key, None)?;
    Ok(())
}
