//! Reading balances: a holder's balance of a token, a token's holder count and its holders
//! ranked by balance, ERC1155 balances per id.

use alloy_primitives::{Address, U256};
use signet_libmdbx::tx::TransactionKind;

use crate::db::{
    codec::{Balance, Count, MultiKey, PairKey},
    tables::*,
    DbResult, Txn,
};

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
