//! The integrity checker: every invariant of the format (spec §2 and §4), table by table.

use std::collections::BTreeSet;

use alloy_primitives::{Address, U256};
use signet_libmdbx::tx::TransactionKind;

use super::{
    address_index::{verify_address, AddressCounter, AddressIndex},
    attributes::attributes,
    matches::{MatchCounter, MatchTable},
};
use crate::db::{
    codec::{AttributeBit, Balance, BlockNumber, Count, Holding, KeyCodec, PairKey, Rank, ValueCodec},
    state,
    tables::*,
    DbError, Txn,
};

/// What a passing check saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// Match rows checked, over all match tables.
    pub matches: u64,
    /// Addresses whose index lists were checked.
    pub addresses: u64,
    /// Ids in those lists.
    pub ids: u64,
}

fn broken<T: Table>(key: &[u8], reason: String) -> DbError {
    DbError::Corrupt { table: T::ID.name(), key: alloy_primitives::hex::encode(key), reason }
}

/// Checks a match table against its counter; returns every matched address.
fn check_matches<M: MatchTable, C: MatchCounter, K: TransactionKind>(
    txn: &Txn<K>,
    report: &mut CheckReport,
) -> Result<BTreeSet<Address>, DbError> {
    let mut counters = Vec::new();
    let mut cursor = txn.cursor::<C>()?;
    let mut next = cursor.first()?;
    while let Some((Count(total), BlockNumber(block))) = next {
        counters.push((total, block));
        next = cursor.next_entry()?;
    }
    let mut matches: Vec<(u64, u64)> = Vec::new(); // (block, dups)
    let mut addresses = BTreeSet::new();
    let mut cursor = txn.cursor::<M>()?;
    let mut next = cursor.first()?;
    while let Some((BlockNumber(block), address)) = next {
        match matches.last_mut() {
            Some((b, n)) if *b == block => *n += 1,
            _ => matches.push((block, 1)),
        }
        addresses.insert(address);
        next = cursor.next_entry()?;
    }
    if counters.len() != matches.len() {
        return Err(broken::<C>(
            &[],
            format!(
                "{} counter rows for {} blocks with matches in {}",
                counters.len(),
                matches.len(),
                M::ID.name()
            ),
        ));
    }
    let mut before = 0;
    for ((total, block), (match_block, dups)) in counters.iter().zip(&matches) {
        if block != match_block || *total != before + dups {
            return Err(broken::<C>(
                &total.to_be_bytes(),
                format!("row {total} → block {block} does not match block {match_block} with {dups} matches after {before}"),
            ));
        }
        before = *total;
    }
    report.matches += before;
    Ok(addresses)
}

fn check_attribute<K: TransactionKind>(
    txn: &Txn<K>,
    matched: &BTreeSet<Address>,
    bit: AttributeBit,
) -> Result<(), DbError> {
    for address in matched {
        if !attributes(txn, address)?.has(bit) {
            return Err(broken::<OtsAddrAttributes>(
                address.as_slice(),
                format!("matched but bit {bit:?} is not set"),
            ));
        }
    }
    let mut cursor = txn.cursor::<OtsAddrAttributes>()?;
    let mut next = cursor.first()?;
    while let Some((address, attrs)) = next {
        if attrs.0.is_empty() {
            return Err(broken::<OtsAddrAttributes>(address.as_slice(), "empty attribute row".into()));
        }
        if attrs.has(bit) && !matched.contains(&address) {
            return Err(broken::<OtsAddrAttributes>(
                address.as_slice(),
                format!("bit {bit:?} set but no match row"),
            ));
        }
        next = cursor.next_entry()?;
    }
    Ok(())
}

fn check_index<I: AddressIndex, C: AddressCounter, K: TransactionKind>(
    txn: &Txn<K>,
    report: &mut CheckReport,
    below: u64,
) -> Result<(), DbError> {
    let mut counted = BTreeSet::new();
    let mut cursor = txn.cursor::<C>()?;
    let mut next = cursor.first()?;
    while let Some((address, _)) = next {
        let ids = verify_address::<I, C, K>(txn, &address)?;
        if ids.last().is_some_and(|&l| l >= below) {
            return Err(broken::<I>(
                address.as_slice(),
                format!("holds id {:#x}, beyond the indexed tip", ids[ids.len() - 1]),
            ));
        }
        report.addresses += 1;
        report.ids += ids.len() as u64;
        counted.insert(address);
        next = cursor.next_key()?;
    }
    let mut cursor = txn.cursor::<I>()?;
    let mut next = cursor.first()?;
    while let Some((key, _)) = next {
        if !counted.contains(&key.address) {
            return Err(broken::<I>(key.address.as_slice(), "chunk without a counter".into()));
        }
        next = cursor.next_entry()?;
    }
    Ok(())
}

/// Our own tables: rows decode, no block beyond the tip, the metadata bit only with ERC721, no
/// failed re-probe recorded for a token.
fn check_extras<K: TransactionKind>(txn: &Txn<K>, tip: Option<u64>) -> Result<(), DbError> {
    let beyond = |block: u64| tip.is_some_and(|t| block > t);
    let mut cursor = txn.cursor::<OtsContractInfo>()?;
    let mut next = cursor.first()?;
    while let Some((address, info)) = next {
        if beyond(info.block) {
            return Err(broken::<OtsContractInfo>(
                address.as_slice(),
                format!("written by block {}, beyond the tip", info.block),
            ));
        }
        next = cursor.next_entry()?;
    }
    let mut cursor = txn.cursor::<OtsLabels>()?;
    let mut next = cursor.first()?;
    while let Some((address, label)) = next {
        if beyond(label.block) {
            return Err(broken::<OtsLabels>(
                address.as_slice(),
                format!("given in block {}, beyond the tip", label.block),
            ));
        }
        next = cursor.next_entry()?;
    }
    let mut cursor = txn.cursor::<OtsTransferProbes>()?;
    let mut next = cursor.first()?;
    while let Some((address, BlockNumber(block))) = next {
        if beyond(block) {
            return Err(broken::<OtsTransferProbes>(
                address.as_slice(),
                format!("probed in block {block}, beyond the tip"),
            ));
        }
        let attrs = attributes(txn, &address)?;
        if attrs.has(AttributeBit::Erc20) || attrs.has(AttributeBit::Erc721) {
            return Err(broken::<OtsTransferProbes>(
                address.as_slice(),
                "a failed re-probe recorded for a token".into(),
            ));
        }
        next = cursor.next_entry()?;
    }
    check_balances(txn)?;
    check_multi_balances(txn)?;
    check_holdings::<OtsERC20Holdings, K>(txn, tip)?;
    check_holdings::<OtsERC721Holdings, K>(txn, tip)?;
    check_holdings::<OtsERC1155Holdings, K>(txn, tip)?;
    let mut cursor = txn.cursor::<OtsAddrAttributes>()?;
    let mut next = cursor.first()?;
    while let Some((address, attrs)) = next {
        if attrs.has(AttributeBit::Erc721Metadata) && !attrs.has(AttributeBit::Erc721) {
            return Err(broken::<OtsAddrAttributes>(
                address.as_slice(),
                "ERC721 metadata bit without ERC721".into(),
            ));
        }
        next = cursor.next_entry()?;
    }
    Ok(())
}

/// Every balance is non-zero, of a holder other than the zero address, ranked once; each
/// token's holder count is its number of balances, and of ranks.
fn check_balances<K: TransactionKind>(txn: &Txn<K>) -> Result<(), DbError> {
    let mut per_token: std::collections::BTreeMap<Address, u64> = std::collections::BTreeMap::new();
    let mut ranks = txn.cursor::<OtsTokenHolderRanks>()?;
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
        if ranks.seek_dup_at_least(&key.token, &rank.encode_value())? != Some(rank) {
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
        if per_token.get(&token).copied() != Some(count) || ranked != count {
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
                &key.encode_key(),
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

/// One dup per (holder, token) (the reference's duplicate-dup bug), none beyond the tip.
fn check_holdings<H: Table<Key = Address, Value = Holding>, K: TransactionKind>(
    txn: &Txn<K>,
    tip: Option<u64>,
) -> Result<(), DbError> {
    let mut cursor = txn.cursor::<H>()?;
    let mut next = cursor.first()?;
    let mut previous: Option<(Address, Address)> = None;
    while let Some((holder, holding)) = next {
        if previous == Some((holder, holding.token)) {
            return Err(broken::<H>(holder.as_slice(), format!("two dups for token {}", holding.token)));
        }
        if tip.is_some_and(|t| holding.first.block() > t) {
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

/// Checks the whole database; the error names the first broken table and key.
pub fn check<K: TransactionKind>(txn: &Txn<K>) -> Result<CheckReport, DbError> {
    let mut report = CheckReport::default();
    let tip = state::read_state(txn).ok().and_then(|s| s.checkpoint);
    // Without a checkpoint (a database no writer has bound) there is no tip to compare with.
    let below = tip.map_or(u64::MAX, |t| crate::txid::TxId::first_of_block(t.number + 1).0);
    check_matches::<OtsAllContracts, OtsAllContractsCounter, K>(txn, &mut report)?;
    let m = check_matches::<OtsERC20, OtsERC20Counter, K>(txn, &mut report)?;
    check_attribute(txn, &m, AttributeBit::Erc20)?;
    let m = check_matches::<OtsERC165, OtsERC165Counter, K>(txn, &mut report)?;
    check_attribute(txn, &m, AttributeBit::Erc165)?;
    let m = check_matches::<OtsERC721, OtsERC721Counter, K>(txn, &mut report)?;
    check_attribute(txn, &m, AttributeBit::Erc721)?;
    let m = check_matches::<OtsERC1155, OtsERC1155Counter, K>(txn, &mut report)?;
    check_attribute(txn, &m, AttributeBit::Erc1155)?;
    let m = check_matches::<OtsERC1167, OtsERC1167Counter, K>(txn, &mut report)?;
    check_attribute(txn, &m, AttributeBit::Erc1167)?;
    let m = check_matches::<OtsERC4626, OtsERC4626Counter, K>(txn, &mut report)?;
    check_attribute(txn, &m, AttributeBit::Erc4626)?;
    check_index::<OtsERC20TransferIndex, OtsERC20TransferCounter, K>(txn, &mut report, below)?;
    check_index::<OtsERC721TransferIndex, OtsERC721TransferCounter, K>(txn, &mut report, below)?;
    check_index::<OtsERC1155TransferIndex, OtsERC1155TransferCounter, K>(txn, &mut report, below)?;
    check_extras(txn, tip.map(|t| t.number))?;
    Ok(report)
}

/// The transfer indexes and their counters alone (ots2's `transferIntegrityChecker`): keys and
/// counts agree, ids grow, only the last chunk is open, no id beyond the tip.
pub fn check_transfer_indexes<K: TransactionKind>(txn: &Txn<K>) -> Result<CheckReport, DbError> {
    let mut report = CheckReport::default();
    let tip = state::read_tip(txn)?;
    let below = tip.map_or(u64::MAX, |t| crate::txid::TxId::first_of_block(t + 1).0);
    check_index::<OtsERC20TransferIndex, OtsERC20TransferCounter, K>(txn, &mut report, below)?;
    check_index::<OtsERC721TransferIndex, OtsERC721TransferCounter, K>(txn, &mut report, below)?;
    check_index::<OtsERC1155TransferIndex, OtsERC1155TransferCounter, K>(txn, &mut report, below)?;
    Ok(report)
}

/// The holdings tables alone (ots2's `holdingsIntegrityChecker`): one dup per (holder, token),
/// none first seen beyond the tip.
pub fn check_holdings_tables<K: TransactionKind>(txn: &Txn<K>) -> Result<(), DbError> {
    let tip = state::read_tip(txn)?;
    check_holdings::<OtsERC20Holdings, K>(txn, tip)?;
    check_holdings::<OtsERC721Holdings, K>(txn, tip)?;
    check_holdings::<OtsERC1155Holdings, K>(txn, tip)
}

/// One raw entry of [`dump`]: table name, key bytes, value bytes.
pub type DumpEntry = (&'static str, Vec<u8>, Vec<u8>);

/// Every entry of every ots2 table, as raw bytes: two indexes of the same chain are equal
/// exactly when their dumps are. Our own state and journal tables are left out (the journal
/// depends on where batches and reorgs fell).
pub fn dump<K: TransactionKind>(txn: &Txn<K>) -> Result<Vec<DumpEntry>, DbError> {
    let mut out = Vec::new();
    for table in
        TableId::ALL.iter().filter(|t| !matches!(t, TableId::OtsIndexerState | TableId::OtsUndoJournal))
    {
        out.extend(txn.raw_entries(*table)?.into_iter().map(|(k, v)| (table.name(), k, v)));
    }
    Ok(out)
}
