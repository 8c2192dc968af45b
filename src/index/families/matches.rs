//! The matches family: `OtsAllContracts` and one match table per standard, their cumulative
//! counters, and the attribute bit each match sets (docs/format.md, "Match tables").
//!
//! A standard's tables are named once, in [`view_standard`]; writing a block's matches, unwinding,
//! checking and the API's counts and pages all reach them through it.

use std::collections::{BTreeMap, BTreeSet};

use alloy_primitives::Address;
use ots_classifiers::{BlockData, Fact, Flag, Standard};
use signet_libmdbx::tx::TransactionKind;

use super::attributes::{add_attribute, attributes, remove_attribute};
use crate::index::family::{Checking, Family, Unwinding};
use crate::index::gather::{Gatherer, Gathering};
use crate::index::integrity::{broken, CheckReport};
use crate::{
    db::{
        codec::{AttributeBit, BlockNumber, Count},
        tables::*,
        DbError, DbResult, Txn, WriteTxn,
    },
    decode::TokenKinds,
};

/// Every standard with a match table, in the order unwinding and checking visit them.
pub const STANDARDS: [Standard; 6] = [
    Standard::Erc20,
    Standard::Erc165,
    Standard::Erc721,
    Standard::Erc1155,
    Standard::Erc1167,
    Standard::Erc4626,
];

/// Code generic over one match table, its counter and its attribute bit.
pub trait MatchViewer {
    /// What the code gives back.
    type Output;
    /// Runs on the tables `M` and `C`, whose matches set `bit`.
    fn view<M: MatchTable, C: MatchCounter>(&mut self, bit: AttributeBit) -> Self::Output;
}

/// Runs `viewer` on `standard`'s tables: the one place a standard is tied to its tables.
pub fn view_standard<V: MatchViewer>(standard: Standard, viewer: &mut V) -> V::Output {
    match standard {
        Standard::Erc20 => viewer.view::<OtsERC20, OtsERC20Counter>(AttributeBit::Erc20),
        Standard::Erc165 => viewer.view::<OtsERC165, OtsERC165Counter>(AttributeBit::Erc165),
        Standard::Erc721 => viewer.view::<OtsERC721, OtsERC721Counter>(AttributeBit::Erc721),
        Standard::Erc1155 => viewer.view::<OtsERC1155, OtsERC1155Counter>(AttributeBit::Erc1155),
        Standard::Erc1167 => viewer.view::<OtsERC1167, OtsERC1167Counter>(AttributeBit::Erc1167),
        Standard::Erc4626 => viewer.view::<OtsERC4626, OtsERC4626Counter>(AttributeBit::Erc4626),
    }
}

/// A match table: deployment block → contract addresses.
pub trait MatchTable: DupTable + Table<Key = BlockNumber, Value = Address> {}
impl<T: DupTable + Table<Key = BlockNumber, Value = Address>> MatchTable for T {}

/// A match counter table: cumulative count → block.
pub trait MatchCounter: Table<Key = Count, Value = BlockNumber> {}
impl<T: Table<Key = Count, Value = BlockNumber>> MatchCounter for T {}

/// Largest page a contract-list read may ask for (the reference's limit).
pub const MAX_MATCH_PAGE: u64 = 500;

/// Number of matches so far: the key of the counter's last row.
pub fn match_count<C: MatchCounter, K: TransactionKind>(txn: &Txn<K>) -> DbResult<u64> {
    Ok(txn.cursor::<C>()?.last()?.map_or(0, |(Count(total), _)| total))
}

/// Adds the matches of `block`, which must be newer than every block already in the table.
/// `addresses` must be sorted and free of repeats.
pub fn append_matches<M: MatchTable, C: MatchCounter>(
    txn: &WriteTxn,
    block: u64,
    addresses: &[Address],
) -> DbResult<()> {
    if addresses.is_empty() {
        return Ok(());
    }
    let last = txn.cursor::<C>()?.last()?;
    let (total, last_block) = last.map_or((0, None), |(Count(t), BlockNumber(b))| (t, Some(b)));
    if last_block.is_some_and(|b| b >= block) {
        return Err(DbError::Corrupt {
            table: C::ID.name(),
            key: alloy_primitives::hex::encode(total.to_be_bytes()),
            reason: format!("matches for block {block} arrive after block {last_block:?}: blocks must be appended in order"),
        });
    }
    let key = BlockNumber(block);
    for address in addresses {
        txn.put::<M>(&key, address)?;
    }
    txn.put::<C>(&Count(total + addresses.len() as u64), &key)
}

/// Matches `idx..idx + count` (0-based, oldest first) as `(block, address)`.
pub fn match_page<M: MatchTable, C: MatchCounter, K: TransactionKind>(
    txn: &Txn<K>,
    idx: u64,
    count: u64,
) -> DbResult<Vec<(u64, Address)>> {
    let mut out = Vec::new();
    if count == 0 {
        return Ok(out);
    }
    let mut counter = txn.cursor::<C>()?;
    let Some((Count(cumulative), BlockNumber(block))) = counter.seek(&Count(idx + 1))? else {
        return Ok(out);
    };
    let before = counter.prev_entry()?.map_or(0, |(Count(c), _)| c);
    let skip = idx - before;
    if cumulative <= idx {
        return Err(corrupt_counter::<C>(cumulative, "seek returned a smaller cumulative count"));
    }
    let mut matches = txn.cursor::<M>()?;
    let mut current = matches.seek_exact(&BlockNumber(block))?.map(|a| (block, a));
    if current.is_none() {
        return Err(DbError::Corrupt {
            table: M::ID.name(),
            key: alloy_primitives::hex::encode(block.to_be_bytes()),
            reason: format!("the counter points at block {block}, which has no matches"),
        });
    }
    for _ in 0..skip {
        current = matches.next_entry()?.map(|(BlockNumber(b), a)| (b, a));
    }
    while let Some(m) = current {
        out.push(m);
        if out.len() as u64 == count {
            break;
        }
        current = matches.next_entry()?.map(|(BlockNumber(b), a)| (b, a));
    }
    Ok(out)
}

fn corrupt_counter<C: Table>(at: u64, reason: &str) -> DbError {
    DbError::Corrupt {
        table: C::ID.name(),
        key: alloy_primitives::hex::encode(at.to_be_bytes()),
        reason: reason.to_owned(),
    }
}

/// Writes block `block`'s contracts and matches, and the attribute bits they set; tells
/// `set_kind` how each address matched is now indexed. Returns (contracts, matches).
pub fn write_block(
    txn: &WriteTxn,
    block: &BlockData,
    facts: &[Fact],
    mut set_kind: impl FnMut(Address, TokenKinds),
) -> DbResult<(u64, u64)> {
    let created: BTreeSet<Address> = block.created_contracts().into_iter().collect();
    let created: Vec<Address> = created.into_iter().collect();
    append_matches::<OtsAllContracts, OtsAllContractsCounter>(txn, block.number, &created)?;

    let mut by_standard: BTreeMap<Standard, BTreeSet<Address>> = BTreeMap::new();
    let mut flagged: BTreeSet<(Address, Flag)> = BTreeSet::new();
    for fact in facts {
        match fact {
            Fact::Matched { standard, address } => {
                by_standard.entry(*standard).or_default().insert(*address);
            }
            Fact::Flagged { flag, address } => {
                flagged.insert((*address, *flag));
            }
            Fact::Described { .. } | Fact::Labeled { .. } => {}
        }
    }
    let mut matches = 0;
    for (standard, addresses) in by_standard {
        let addresses: Vec<Address> = addresses.into_iter().collect();
        let bit = view_standard(standard, &mut Append { txn, block: block.number, addresses: &addresses })?;
        for address in &addresses {
            let attrs = add_attribute(txn, address, bit)?;
            set_kind(*address, TokenKinds::of(&attrs));
        }
        matches += addresses.len() as u64;
    }
    for (address, Flag::Erc721Metadata) in flagged {
        add_attribute(txn, &address, AttributeBit::Erc721Metadata)?;
    }
    Ok((created.len() as u64, matches))
}

struct Append<'a> {
    txn: &'a WriteTxn,
    block: u64,
    addresses: &'a [Address],
}

impl MatchViewer for Append<'_> {
    type Output = DbResult<AttributeBit>;
    fn view<M: MatchTable, C: MatchCounter>(&mut self, bit: AttributeBit) -> Self::Output {
        append_matches::<M, C>(self.txn, self.block, self.addresses)?;
        Ok(bit)
    }
}

/// Removes the matches of blocks above `to`; returns the removed addresses.
fn unwind_matches<M: MatchTable, C: MatchCounter>(txn: &WriteTxn, to: u64) -> DbResult<Vec<Address>> {
    let mut removed = Vec::new();
    loop {
        let last = txn.cursor::<M>()?.last()?;
        match last {
            Some((BlockNumber(block), _)) if block > to => {
                removed.extend(txn.cursor::<M>()?.dups(&BlockNumber(block))?);
                txn.delete::<M>(&BlockNumber(block), None)?;
            }
            _ => break,
        }
    }
    loop {
        let last = txn.cursor::<C>()?.last()?;
        match last {
            Some((count, BlockNumber(block))) if block > to => {
                txn.delete::<C>(&count, None)?;
            }
            _ => break,
        }
    }
    Ok(removed)
}

struct Unwind<'a> {
    txn: &'a WriteTxn,
    to: u64,
}

impl MatchViewer for Unwind<'_> {
    type Output = DbResult<()>;
    fn view<M: MatchTable, C: MatchCounter>(&mut self, bit: AttributeBit) -> Self::Output {
        for address in unwind_matches::<M, C>(self.txn, self.to)? {
            remove_attribute(self.txn, &address, bit)?;
            // The metadata flag is only ever set with the ERC721 match of the same block.
            if bit == AttributeBit::Erc721 {
                remove_attribute(self.txn, &address, AttributeBit::Erc721Metadata)?;
            }
        }
        Ok(())
    }
}

/// Removes every match of blocks above `to`, and the attribute bits they set.
pub fn unwind(txn: &WriteTxn, to: u64) -> DbResult<()> {
    unwind_matches::<OtsAllContracts, OtsAllContractsCounter>(txn, to)?;
    for standard in STANDARDS {
        view_standard(standard, &mut Unwind { txn, to })?;
    }
    Ok(())
}

/// Checks a match table against its counter; returns every matched address.
fn check_matches<M: MatchTable, C: MatchCounter, K: TransactionKind>(
    txn: &Txn<K>,
    report: &mut CheckReport,
) -> DbResult<BTreeSet<Address>> {
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

/// Every matched address has the bit, and every address with the bit is matched.
fn check_attribute<K: TransactionKind>(
    txn: &Txn<K>,
    matched: &BTreeSet<Address>,
    bit: AttributeBit,
) -> DbResult<()> {
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

struct Check<'a, K: TransactionKind> {
    txn: &'a Txn<K>,
    report: &'a mut CheckReport,
}

impl<K: TransactionKind> MatchViewer for Check<'_, K> {
    type Output = DbResult<()>;
    fn view<M: MatchTable, C: MatchCounter>(&mut self, bit: AttributeBit) -> Self::Output {
        let matched = check_matches::<M, C, K>(self.txn, self.report)?;
        check_attribute(self.txn, &matched, bit)
    }
}

/// Every match table agrees with its counter and with the attribute bits; the ERC721 metadata
/// bit only stands with ERC721.
pub fn check<K: TransactionKind>(txn: &Txn<K>, report: &mut CheckReport) -> DbResult<()> {
    check_matches::<OtsAllContracts, OtsAllContractsCounter, K>(txn, report)?;
    for standard in STANDARDS {
        view_standard(standard, &mut Check { txn, report })?;
    }
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

struct Counted<'a, K: TransactionKind>(&'a Txn<K>);

impl<K: TransactionKind> MatchViewer for Counted<'_, K> {
    type Output = DbResult<u64>;
    fn view<M: MatchTable, C: MatchCounter>(&mut self, _: AttributeBit) -> Self::Output {
        match_count::<C, K>(self.0)
    }
}

struct Paged<'a, K: TransactionKind> {
    txn: &'a Txn<K>,
    idx: u64,
    count: u64,
}

impl<K: TransactionKind> MatchViewer for Paged<'_, K> {
    type Output = DbResult<Vec<(u64, Address)>>;
    fn view<M: MatchTable, C: MatchCounter>(&mut self, _: AttributeBit) -> Self::Output {
        match_page::<M, C, K>(self.txn, self.idx, self.count)
    }
}

/// Number of contracts matched as `standard` (`None`: of every contract).
pub fn count<K: TransactionKind>(txn: &Txn<K>, standard: Option<Standard>) -> DbResult<u64> {
    match standard {
        None => match_count::<OtsAllContractsCounter, K>(txn),
        Some(s) => view_standard(s, &mut Counted(txn)),
    }
}

/// Matches `idx..idx + count` of `standard` (`None`: of every contract), as (block, address).
pub fn page<K: TransactionKind>(
    txn: &Txn<K>,
    standard: Option<Standard>,
    idx: u64,
    count: u64,
) -> DbResult<Vec<(u64, Address)>> {
    match standard {
        None => match_page::<OtsAllContracts, OtsAllContractsCounter, K>(txn, idx, count),
        Some(s) => view_standard(s, &mut Paged { txn, idx, count }),
    }
}

/// Contracts, one match table and counter per standard, and the attribute bits matches set.
#[derive(Debug)]
pub struct MatchesFamily;

impl Family for MatchesFamily {
    const NAME: &'static str = "matches";
    const TABLES: &'static [TableId] = &[
        TableId::OtsAllContracts,
        TableId::OtsAllContractsCounter,
        TableId::OtsERC20,
        TableId::OtsERC20Counter,
        TableId::OtsERC165,
        TableId::OtsERC165Counter,
        TableId::OtsERC721,
        TableId::OtsERC721Counter,
        TableId::OtsERC1155,
        TableId::OtsERC1155Counter,
        TableId::OtsERC1167,
        TableId::OtsERC1167Counter,
        TableId::OtsERC4626,
        TableId::OtsERC4626Counter,
        TableId::OtsAddrAttributes,
    ];

    /// The write paths write a block's matches before the other families see it
    /// ([`write_block`]): the attribute bits they set decide which of its logs are token
    /// transfers.
    fn gatherer(_: &Gathering) -> Option<Box<dyn Gatherer>> {
        None
    }

    fn unwind(txn: &WriteTxn, unwinding: &Unwinding) -> DbResult<()> {
        unwind(txn, unwinding.to)
    }

    fn check<K: TransactionKind>(txn: &Txn<K>, checking: &mut Checking) -> DbResult<()> {
        check(txn, &mut checking.report)
    }
}
