//! The address-index family: per-address id lists in chunks with their counters — the three
//! transfer indexes and the internal-transaction index (ids are TxIds), blocks rewarded (block
//! numbers) and withdrawals (withdrawal indexes) — and the withdrawal → block table
//! (docs/format.md, "Address indexes").
//!
//! An index's tables are named once, in [`view_id_list`]; collecting a batch, writing,
//! unwinding, checking and the API's counts and pages reach them through it. The chunk
//! mechanics of one list live in [`chunks`]; the ids of blocks still in the reorg window wait in
//! [`crate::index::recent`], after the table's, until their blocks leave it.

pub mod chunks;
pub mod internal_rows;
pub mod levels;
pub mod party_token;
pub mod staged;
pub mod transfer_rows;

use std::sync::Arc;

use alloy_primitives::Address;
use ots_classifiers::{BlockData, CallFrame, FrameKind};
use signet_libmdbx::tx::TransactionKind;

use levels::{stored_count, stored_page, stored_rank, view_level, Level, LEVELS};

pub use chunks::{
    append_ids, id_count, id_page, id_rank, rewrite_with_appends, verify_address, AddressCounter,
    AddressIndex, IdAppender, CHUNK_IDS,
};

use super::{seen_in_tx::SeenInTx, transfers::Touch};
use crate::index::family::{Checking, Family, Unwinding};
use crate::index::recent::WindowRows;
use crate::index::{
    error::WriteError,
    gather::{BlockRows, Buffering, Gatherer, Gathering, Writing},
    integrity::{broken, CheckReport},
    recent,
    undo::UndoLog,
    window::WindowStart,
};
use crate::{
    db::{
        codec::{BlockNumber, Count, IndexKind},
        tables::*,
        DbResult, ReadTxn, Txn, WriteTxn,
    },
    decode::TokenKind,
    etl::{Buffer, RunDir, Sorter, ADDRESS_KEY},
    txid::TxId,
};

/// One address index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IdList {
    /// `OtsERC20TransferIndex`.
    Erc20Transfers,
    /// `OtsERC721TransferIndex`.
    Erc721Transfers,
    /// `OtsERC1155TransferIndex`.
    Erc1155Transfers,
    /// `OtsBlocksRewardedIndex`.
    BlocksRewarded,
    /// `OtsWithdrawalsIndex`.
    Withdrawals,
    /// `OtsInternalTxIndex`.
    InternalTxs,
    /// `OtsTransferRowsIndex`: ids are row ids ([`transfer_rows`]), not TxIds.
    TransferRows,
    /// `OtsTokenTransfersIndex`: a token's row ids ([`transfer_rows::token_row_ids`]).
    TokenTransfers,
    /// `OtsInternalRowsIndex`: row ids ([`internal_rows`]).
    InternalRows,
    /// `OtsPartyTokenIndex`: a party's row ids of one token, keyed by the pair
    /// ([`transfer_rows::party_token_key`]).
    PartyToken,
}

/// Every address index, in the order a batch writes them.
pub const ID_LISTS: [IdList; 10] = [
    IdList::Erc20Transfers,
    IdList::Erc721Transfers,
    IdList::Erc1155Transfers,
    IdList::BlocksRewarded,
    IdList::Withdrawals,
    IdList::InternalTxs,
    IdList::TransferRows,
    IdList::TokenTransfers,
    IdList::InternalRows,
    IdList::PartyToken,
];

/// The lists whose ids are row ids ([`transfer_rows`]): a TxId shifted left, a kind and a code.
pub const ROW_LISTS: [IdList; 4] =
    [IdList::TransferRows, IdList::TokenTransfers, IdList::InternalRows, IdList::PartyToken];

/// The transfer indexes, whose ids are TxIds.
pub const TRANSFER_LISTS: [IdList; 3] =
    [IdList::Erc20Transfers, IdList::Erc721Transfers, IdList::Erc1155Transfers];

/// Every index whose ids are TxIds: the transfer indexes and the internal transactions.
pub const TX_LISTS: [IdList; 4] =
    [IdList::Erc20Transfers, IdList::Erc721Transfers, IdList::Erc1155Transfers, IdList::InternalTxs];

impl IdList {
    /// The transfer index of a token kind.
    pub const fn of_transfers(kind: TokenKind) -> Self {
        match kind {
            TokenKind::Erc20 => Self::Erc20Transfers,
            TokenKind::Erc721 => Self::Erc721Transfers,
            TokenKind::Erc1155 => Self::Erc1155Transfers,
        }
    }

    /// How the undo journal's row kinds (and the reorg window's rows) name this index.
    pub const fn journal_kind(self) -> IndexKind {
        match self {
            Self::Erc20Transfers => IndexKind::Erc20Transfers,
            Self::Erc721Transfers => IndexKind::Erc721Transfers,
            Self::Erc1155Transfers => IndexKind::Erc1155Transfers,
            Self::BlocksRewarded => IndexKind::BlocksRewarded,
            Self::Withdrawals => IndexKind::Withdrawals,
            Self::InternalTxs => IndexKind::InternalTxs,
            Self::TransferRows => IndexKind::TransferRows,
            Self::TokenTransfers => IndexKind::TokenTransfers,
            Self::InternalRows => IndexKind::InternalRows,
            Self::PartyToken => IndexKind::PartyToken,
        }
    }
}

/// Code generic over one address index and its counter.
pub trait IdListViewer {
    /// What the code gives back.
    type Output;
    /// Runs on the tables `I` and `C`.
    fn view<I: AddressIndex, C: AddressCounter>(&mut self) -> Self::Output;
}

/// Runs `viewer` on `list`'s tables: the one place an index is tied to its tables.
pub fn view_id_list<V: IdListViewer>(list: IdList, viewer: &mut V) -> V::Output {
    match list {
        IdList::Erc20Transfers => viewer.view::<OtsERC20TransferIndex, OtsERC20TransferCounter>(),
        IdList::Erc721Transfers => viewer.view::<OtsERC721TransferIndex, OtsERC721TransferCounter>(),
        IdList::Erc1155Transfers => viewer.view::<OtsERC1155TransferIndex, OtsERC1155TransferCounter>(),
        IdList::BlocksRewarded => viewer.view::<OtsBlocksRewardedIndex, OtsBlocksRewardedCounter>(),
        IdList::Withdrawals => viewer.view::<OtsWithdrawalsIndex, OtsWithdrawalsCounter>(),
        IdList::InternalTxs => viewer.view::<OtsInternalTxIndex, OtsInternalTxCounter>(),
        IdList::TransferRows => viewer.view::<OtsTransferRowsIndex, OtsTransferRowsCounter>(),
        IdList::TokenTransfers => viewer.view::<OtsTokenTransfersIndex, OtsTokenTransfersCounter>(),
        IdList::InternalRows => viewer.view::<OtsInternalRowsIndex, OtsInternalRowsCounter>(),
        IdList::PartyToken => viewer.view::<OtsPartyTokenIndex, OtsPartyTokenCounter>(),
    }
}

/// The (address, id) pairs of one address index, gathered over a batch (or a bulk stage) and
/// sorted once: a flat list sorts faster than a map grows.
type IdCollector = Sorter<(Address, u64)>;

/// Every address index's new ids of a batch or a stage.
#[derive(Debug, Default)]
pub struct IdLists {
    lists: [IdCollector; 10],
    /// Per transfer index: a transaction with several transfers names the same address in
    /// many (9.4 M of the 102 M touches of the 21 M-transaction benchmark chain).
    in_tx: [SeenInTx; 3],
    /// The same for the internal transactions: a router paid back in several frames.
    internal_in_tx: SeenInTx,
    /// Whether the party–token index is kept ([`party_token`]).
    party_tokens: bool,
    /// Whether the ids may go to a staged segment ([`staged`]): a bulk stage's lists.
    staged: bool,
    /// The newest block collected: a stage's segment key.
    newest: Option<u64>,
}

impl IdLists {
    /// Lists whose rows spill into sorted runs under `runs`, each buffering `budget` bytes.
    pub fn spilling(runs: &Arc<RunDir>, budget: usize) -> Self {
        Self {
            lists: std::array::from_fn(|_| Sorter::spilling(runs.clone(), budget).keyed(ADDRESS_KEY)),
            in_tx: Default::default(),
            internal_in_tx: SeenInTx::default(),
            party_tokens: false,
            staged: true,
            newest: None,
        }
    }

    /// The same lists, collecting the party–token index's ids too when `kept`.
    #[must_use]
    pub const fn with_party_tokens(mut self, kept: bool) -> Self {
        self.party_tokens = kept;
        self
    }

    fn push(&mut self, list: IdList, address: Address, id: u64) -> DbResult<()> {
        self.lists[list as usize].push((address, id))?;
        Ok(())
    }

    /// Collects a transfer's touch.
    pub fn touch(&mut self, touch: &Touch) -> DbResult<()> {
        let list = IdList::of_transfers(touch.kind);
        if !self.in_tx[list as usize].first_time(touch.address, touch.tx) {
            return Ok(());
        }
        self.push(list, touch.address, touch.tx.0)
    }

    /// Collects the row ids of a block's transfer logs (`logs`, in log order): the parties'
    /// and the tokens'.
    pub fn count_rows(&mut self, logs: &[(TxId, crate::decode::TokenLog<'_>)]) -> DbResult<()> {
        for (party, id) in transfer_rows::row_ids(logs) {
            self.push(IdList::TransferRows, party, id)?;
        }
        for (token, id) in transfer_rows::token_row_ids(logs) {
            self.push(IdList::TokenTransfers, token, id)?;
        }
        if self.party_tokens {
            for (pair, id) in transfer_rows::party_token_row_ids(logs) {
                self.push(IdList::PartyToken, pair, id)?;
            }
        }
        Ok(())
    }

    /// Collects `block`'s fee recipient, withdrawals and internal transactions, and writes
    /// which block holds its last withdrawal.
    pub fn collect_block(&mut self, txn: &WriteTxn, block: &BlockData) -> Result<(), WriteError> {
        self.newest = self.newest.max(Some(block.number));
        self.push(IdList::BlocksRewarded, block.coinbase, block.number)?;
        let frames = block.frames.as_deref().unwrap_or_default();
        for (party, id) in internal_rows::row_ids(block.number, frames) {
            self.push(IdList::InternalRows, party, id)?;
        }
        for frame in frames.iter().filter(|f| lists_internal(f)) {
            let tx = TxId::new(block.number, frame.tx_index)?;
            for address in internal_parties(frame) {
                if self.internal_in_tx.first_time(address, tx) {
                    self.push(IdList::InternalTxs, address, tx.0)?;
                }
            }
        }
        for w in &block.withdrawals {
            self.push(IdList::Withdrawals, w.address, w.index)?;
        }
        if let Some(last_withdrawal) = block.withdrawals.iter().map(|w| w.index).max() {
            txn.put::<OtsWithdrawalIdx2Block>(&Count(last_withdrawal), &BlockNumber(block.number))?;
        }
        Ok(())
    }

    /// Appends every index's ids, addresses in key order; returns how many transfer ids were
    /// new. Ids of blocks still in the reorg window go to [`recent`] instead, and the ids of
    /// blocks leaving it as it starts at `start` (their ids taken out of `leaving`, what the
    /// window's rows of those blocks held) go to the tables first. The block → withdrawal table
    /// must already hold the written blocks' rows. With `before` (a snapshot of the
    /// state `txn` started from, in which no index has been written yet) an index and its
    /// counter are rewritten whole when the rows append to a large share of its chunks.
    /// Withdrawal indexes grow with the chain; a block may list them in any order, which the
    /// sort puts right.
    pub fn write(
        self,
        txn: &WriteTxn,
        before: Option<&ReadTxn>,
        start: WindowStart,
        leaving: &mut recent::WindowRows,
    ) -> DbResult<u64> {
        let mut transfer_ids = 0;
        let mut new_rows = recent::NewRows::default();
        let cuts = Cuts::of_window(txn, start)?;
        let leaving = ID_LISTS.map(|list| leaving.take_list(list.journal_kind()));
        let segment = self.newest.filter(|_| self.staged && start == WindowStart::Closed && before.is_some());
        for ((list, collector), leaving) in ID_LISTS.into_iter().zip(self.lists).zip(leaving) {
            let mut write =
                Write { collector, leaving, cut: cuts.of(list), txn, before, segment, recent: Vec::new() };
            let written = write.run(list)?;
            if TRANSFER_LISTS.contains(&list) {
                transfer_ids += written;
            }
            for (address, ids) in write.recent {
                for id in ids {
                    new_rows.id(block_of(txn, list, id)?, list.journal_kind(), address, id);
                }
            }
        }
        new_rows.write(txn)?;
        Ok(transfer_ids)
    }
}

/// Whether `frame` makes its transaction one of the internal transactions of its `from` and
/// `to`: a frame below the top call that moves ether (a CALL with value), creates a contract or
/// selfdestructs — what `txlistinternal` lists, reverted or not. A DELEGATECALL or CALLCODE
/// repeats its caller's value without moving it, and is left out as Etherscan leaves it out.
pub fn lists_internal(frame: &CallFrame) -> bool {
    frame.depth > 0
        && match frame.kind {
            FrameKind::Call => !frame.value.is_zero(),
            FrameKind::Create | FrameKind::Create2 | FrameKind::SelfDestruct => true,
            FrameKind::StaticCall | FrameKind::DelegateCall | FrameKind::CallCode => false,
        }
}

/// The parties a frame that [`lists_internal`] lists under: its `from`, and its `to` unless that
/// is a contract it created — `OtsContractCreators` holds that creation, and the walk reads it
/// from there (half the index's addresses would otherwise be contracts a factory made, listed
/// once) — or no address at all (a create that failed before it had one). A create reverted
/// after it ran is not in `OtsContractCreators`, so its contract is listed here.
pub fn internal_parties(frame: &CallFrame) -> impl Iterator<Item = Address> {
    let creates = matches!(frame.kind, FrameKind::Create | FrameKind::Create2);
    let to = (!creates || !(frame.success || frame.to.is_zero())).then_some(frame.to);
    std::iter::once(frame.from).chain(to)
}

/// An address's ids, addresses ascending: what one list moves at once.
type AddressIds = Vec<(Address, Vec<u64>)>;

/// The block that added id `id` to `list`.
fn block_of(txn: &WriteTxn, list: IdList, id: u64) -> DbResult<u64> {
    Ok(match list {
        IdList::Erc20Transfers | IdList::Erc721Transfers | IdList::Erc1155Transfers | IdList::InternalTxs => {
            TxId(id).block()
        }
        IdList::TransferRows | IdList::TokenTransfers | IdList::InternalRows | IdList::PartyToken => {
            TxId(id >> transfer_rows::SHIFT).block()
        }
        IdList::BlocksRewarded => id,
        IdList::Withdrawals => match txn.cursor::<OtsWithdrawalIdx2Block>()?.seek(&Count(id))? {
            Some((_, BlockNumber(block))) => block,
            None => {
                return Err(broken::<OtsWithdrawalIdx2Block>(
                    &id.to_be_bytes(),
                    "no block holds a withdrawal just written".into(),
                ))
            }
        },
    })
}

/// The block of each withdrawal index in `indexes`, as `(index, block)`.
pub fn withdrawal_blocks<K: TransactionKind>(txn: &Txn<K>, indexes: Vec<u64>) -> DbResult<Vec<(u64, u64)>> {
    let mut blocks = txn.cursor::<OtsWithdrawalIdx2Block>()?;
    indexes
        .into_iter()
        .map(|i| match blocks.seek(&Count(i))? {
            Some((_, BlockNumber(block))) => Ok((i, block)),
            None => Err(crate::db::DbError::Corrupt {
                table: "OtsWithdrawalIdx2Block",
                key: alloy_primitives::hex::encode(i.to_be_bytes()),
                reason: format!("no block holds withdrawal {i}"),
            }),
        })
        .collect()
}

/// The first withdrawal index of the blocks from `block` on (every one at or above it is
/// theirs): a binary search of `OtsWithdrawalIdx2Block`'s keys, whose blocks grow with them.
pub fn first_withdrawal_from<K: TransactionKind>(txn: &Txn<K>, block: u64) -> DbResult<u64> {
    let mut cursor = txn.cursor::<OtsWithdrawalIdx2Block>()?;
    let Some((Count(last), _)) = cursor.last()? else { return Ok(0) };
    let (mut low, mut high) = (0u64, last.saturating_add(1));
    while low < high {
        let middle = low + (high - low) / 2;
        match cursor.seek(&Count(middle))? {
            Some((_, BlockNumber(b))) if b >= block => high = middle,
            _ => low = middle + 1,
        }
    }
    Ok(low)
}

/// An index's rows for its table, addresses ascending: the leaving ids of each address, then the
/// write's own ids below the window's cut; the write's ids at or above it go to `recent`.
struct ToTable<'a, L: Iterator<Item = (Address, Vec<u64>)>, B: Iterator<Item = (Address, Vec<u64>)>> {
    leaving: std::iter::Peekable<L>,
    written: std::iter::Peekable<B>,
    cut: u64,
    recent: &'a mut AddressIds,
}

impl<L: Iterator<Item = (Address, Vec<u64>)>, B: Iterator<Item = (Address, Vec<u64>)>> Iterator
    for ToTable<'_, L, B>
{
    type Item = (Address, Vec<u64>);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let address = match (self.leaving.peek(), self.written.peek()) {
                (None, None) => return None,
                (Some((a, _)), None) | (None, Some((a, _))) => *a,
                (Some((a, _)), Some((b, _))) => *a.min(b),
            };
            let mut ids =
                self.leaving.next_if(|(a, _)| *a == address).map(|(_, ids)| ids).unwrap_or_default();
            if let Some((_, new_ids)) = self.written.next_if(|(a, _)| *a == address) {
                let split = new_ids.partition_point(|&id| id < self.cut);
                if split < new_ids.len() {
                    self.recent.push((address, new_ids[split..].to_vec()));
                }
                ids.extend_from_slice(&new_ids[..split]);
            }
            if !ids.is_empty() {
                return Some((address, ids));
            }
        }
    }
}

/// One list's part of a write: the collected ids and those leaving the window.
struct Write<'a> {
    collector: IdCollector,
    leaving: AddressIds,
    cut: u64,
    txn: &'a WriteTxn,
    before: Option<&'a ReadTxn>,
    /// The staged segment the ids may go to ([`staged`]): a bulk stage's newest block.
    segment: Option<u64>,
    /// The collected ids at or above the cut, for the window.
    recent: AddressIds,
}

impl Write<'_> {
    /// Appends the leaving and the collected ids; returns how many were collected (the index
    /// has at least one chunk per address, so the rewrite rule weighs addresses against its
    /// entries).
    fn run(&mut self, list: IdList) -> DbResult<u64> {
        let collector = std::mem::take(&mut self.collector);
        let sorted = if collector.is_empty() { None } else { Some(collector.into_sorted()?) };
        let leaving = std::mem::take(&mut self.leaving);
        if sorted.is_none() && leaving.is_empty() {
            // Nothing to append: not even an empty table is worth clearing. The incremental
            // path leaves no young level or segment behind it, written to or not: the reorg
            // window's ids it opens must follow every stored id.
            if self.segment.is_none() && self.before.is_some() {
                levels::write_rows(self.txn, self.before, list, std::iter::empty(), (0, 0), None)?;
            }
            return Ok(0);
        }
        let addresses = sorted.as_ref().map_or(0, |s| s.keys_at_most(|row| row.0)) + leaving.len() as u64;
        let ids = sorted.as_ref().map_or(0, |s| s.rows())
            + leaving.iter().map(|(_, ids)| ids.len() as u64).sum::<u64>();
        // An address's ids a piece at a time: a large stage's busiest lists run to tens of
        // millions of ids.
        let mut groups = sorted.map(|s| s.groups_in_pieces(|row| row, staged::PIECE_IDS, |_, _| false));
        let rows = ToTable {
            leaving: leaving.into_iter().peekable(),
            written: groups.iter_mut().flatten().peekable(),
            cut: self.cut,
            recent: &mut self.recent,
        };
        levels::write_rows(self.txn, self.before, list, rows, (addresses, ids), self.segment)?;
        match groups {
            Some(groups) => Ok(groups.finish()?),
            None => Ok(0),
        }
    }
}

/// Where the reorg window starts for each kind of id.
#[derive(Debug, Clone, Copy)]
pub struct Cuts {
    /// TxIds: the first id of block `to + 1`.
    pub tx: u64,
    /// Block numbers: `to + 1`.
    pub block: u64,
    /// Withdrawal indexes: the first one the unwound blocks held.
    pub withdrawal: u64,
}

impl Cuts {
    /// No cut: every id is below it.
    const NONE: Self = Self { tx: u64::MAX, block: u64::MAX, withdrawal: u64::MAX };

    /// The first id of each kind that stays in (or enters) the window as it starts at `start`.
    fn of_window(txn: &WriteTxn, start: WindowStart) -> DbResult<Self> {
        Ok(match start {
            WindowStart::At(from) => Self {
                tx: TxId::first_of_block(from).0,
                block: from,
                withdrawal: first_withdrawal_from(txn, from)?,
            },
            WindowStart::Closed => Self::NONE,
        })
    }

    fn of(self, list: IdList) -> u64 {
        match list {
            IdList::Erc20Transfers
            | IdList::Erc721Transfers
            | IdList::Erc1155Transfers
            | IdList::InternalTxs => self.tx,
            IdList::TransferRows | IdList::TokenTransfers | IdList::InternalRows | IdList::PartyToken => {
                transfer_rows::first_of(self.tx).unwrap_or(u64::MAX)
            }
            IdList::BlocksRewarded => self.block,
            IdList::Withdrawals => self.withdrawal,
        }
    }
}

/// Drops the `OtsWithdrawalIdx2Block` rows of blocks above `to`.
pub fn unwind_withdrawal_blocks(txn: &WriteTxn, to: u64) -> DbResult<()> {
    loop {
        let last = txn.cursor::<OtsWithdrawalIdx2Block>()?.last()?;
        match last {
            Some((count, BlockNumber(block))) if block > to => {
                txn.delete::<OtsWithdrawalIdx2Block>(&count, None)?;
            }
            _ => return Ok(()),
        }
    }
}

struct Check<'a, K: TransactionKind> {
    txn: &'a Txn<K>,
    list: IdList,
    level: Level,
    report: &'a mut CheckReport,
    below: u64,
}

impl<K: TransactionKind> IdListViewer for Check<'_, K> {
    type Output = DbResult<()>;
    fn view<I: AddressIndex, C: AddressCounter>(&mut self) -> Self::Output {
        let mut counted = std::collections::BTreeSet::new();
        let mut cursor = self.txn.cursor::<C>()?;
        let mut next = cursor.first()?;
        while let Some((address, _)) = next {
            let ids = verify_address::<I, C, K>(self.txn, &address)?;
            if let Some(&last) = ids.last().filter(|&&l| l >= self.below) {
                return Err(broken::<I>(
                    address.as_slice(),
                    format!("holds id {last:#x}, beyond the indexed tip"),
                ));
            }
            let mut listed = true;
            if self.level == Level::Young {
                // A young list continues the main one; an address counts once.
                let main = view_id_list(self.list, &mut levels::Counted(self.txn, &address))?;
                listed = main == 0;
                let last_main = match main.checked_sub(1) {
                    Some(last) => stored_page(self.txn, self.list, &address, last, 1)?,
                    None => Vec::new(),
                };
                if let (Some(&last), Some(&first)) = (last_main.last(), ids.first()) {
                    if first <= last {
                        return Err(broken::<I>(
                            address.as_slice(),
                            format!("young id {first:#x} is not past the main level's last id {last:#x}"),
                        ));
                    }
                }
            }
            self.report.addresses += u64::from(listed);
            self.report.ids += ids.len() as u64;
            counted.insert(address);
            next = cursor.next_key()?;
        }
        let mut cursor = self.txn.cursor::<I>()?;
        let mut next = cursor.first()?;
        while let Some((key, _)) = next {
            if !counted.contains(&key.address) {
                return Err(broken::<I>(key.address.as_slice(), "chunk without a counter".into()));
            }
            next = cursor.next_entry()?;
        }
        Ok(())
    }
}

/// Checks the transfer indexes (ots2's `transferIntegrityChecker`) and the internal
/// transactions: keys and counts agree, ids grow, only the last chunk is open, no id at or above
/// `below` (the first id past the tip).
pub fn check_transfers<K: TransactionKind>(
    txn: &Txn<K>,
    report: &mut CheckReport,
    below: u64,
) -> DbResult<()> {
    for list in TX_LISTS {
        for level in LEVELS {
            view_level(list, level, &mut Check { txn, list, level, report, below })?;
        }
    }
    // The row ids are checked as lists, but are not the transfer indexes' lists or ids.
    let rows_below = transfer_rows::first_of(below).unwrap_or(u64::MAX);
    for list in ROW_LISTS {
        for level in LEVELS {
            let report = &mut CheckReport::default();
            view_level(list, level, &mut Check { txn, list, level, report, below: rows_below })?;
        }
    }
    // Neither level of the other lists holds ids past the tip (a block number, a withdrawal
    // index): their order and counters are checked all the same.
    for list in [IdList::BlocksRewarded, IdList::Withdrawals] {
        for level in LEVELS {
            let report = &mut CheckReport::default();
            view_level(list, level, &mut Check { txn, list, level, report, below: u64::MAX })?;
        }
    }
    // The segments as the levels above: only the transfer indexes' lists count in `report`.
    for list in TX_LISTS {
        check_staged(txn, list, report, below)?;
    }
    for list in ROW_LISTS {
        check_staged(txn, list, &mut CheckReport::default(), rows_below)?;
    }
    for list in [IdList::BlocksRewarded, IdList::Withdrawals] {
        check_staged(txn, list, &mut CheckReport::default(), u64::MAX)?;
    }
    party_token::check(txn)
}

/// Checks the staged segments of `list` ([`staged`]): their chunks, and each address's ids
/// across them ascending and past its ids in the levels. An address the levels lack counts as a
/// list of `report`.
fn check_staged<K: TransactionKind>(
    txn: &Txn<K>,
    list: IdList,
    report: &mut CheckReport,
    below: u64,
) -> DbResult<()> {
    staged::check_chunks(txn, list, below)?;
    // The last row's address and id: a long list comes in several rows.
    let mut piece: Option<(Address, Option<u64>)> = None;
    for row in staged::staged_rows(txn, list)? {
        let (address, ids) = row?;
        let (new_list, mut previous) = match piece.filter(|(a, _)| *a == address) {
            Some((_, last)) => (false, last),
            None => match levels::leveled_count(txn, list, &address)?.checked_sub(1) {
                Some(last) => (false, stored_page(txn, list, &address, last, 1)?.last().copied()),
                None => (true, None),
            },
        };
        for &id in &ids {
            if let Some(before) = previous.filter(|&p| p >= id) {
                return Err(crate::db::DbError::Corrupt {
                    table: staged::table_name(list),
                    key: alloy_primitives::hex::encode(address),
                    reason: format!("staged id {id:#x} is not past the address's earlier id {before:#x}"),
                });
            }
            previous = Some(id);
        }
        piece = Some((address, previous));
        report.addresses += u64::from(new_list);
        report.ids += ids.len() as u64;
    }
    Ok(())
}

/// Checks the reorg window's part of every list (`window`: its ids by list and address): each
/// address's window ids come after its table's, and a transfer index's stay below `below` (the
/// first id past the tip). A window-only address counts as a list of `report`.
pub fn check_recent<K: TransactionKind>(
    txn: &Txn<K>,
    report: &mut CheckReport,
    below: u64,
    window: &recent::IdsByList,
) -> DbResult<()> {
    for list in ID_LISTS {
        let kind = list.journal_kind();
        for ((_, address), ids) in window.range((kind, Address::ZERO)..=(kind, Address::repeat_byte(0xff))) {
            let bad = |reason: String| {
                let mut key = vec![kind as u8];
                key.extend_from_slice(address.as_slice());
                broken::<OtsRecentIds>(&key, reason)
            };
            let stored = stored_count(txn, list, address)?;
            let last_stored = match stored.checked_sub(1) {
                Some(last) => stored_page(txn, list, address, last, 1)?,
                None => Vec::new(),
            };
            if let (Some(&last), Some(&first)) = (last_stored.last(), ids.first()) {
                if first <= last {
                    return Err(bad(format!(
                        "window id {first:#x} is not past the table's last id {last:#x}"
                    )));
                }
            }
            if ids.windows(2).any(|w| w[0] >= w[1]) {
                return Err(bad("window ids do not grow from block to block".into()));
            }
            let past_tip = match list {
                _ if ROW_LISTS.contains(&list) => transfer_rows::first_of(below).unwrap_or(u64::MAX),
                _ if TX_LISTS.contains(&list) => below,
                _ => u64::MAX,
            };
            if let Some(&last) = ids.last().filter(|&&l| l >= past_tip) {
                return Err(bad(format!("holds id {last:#x}, beyond the indexed tip")));
            }
            if TX_LISTS.contains(&list) {
                report.addresses += u64::from(stored == 0);
                report.ids += ids.len() as u64;
            }
        }
    }
    Ok(())
}

/// Number of ids of `address` in `list`.
pub fn count<K: TransactionKind>(txn: &Txn<K>, list: IdList, address: &Address) -> DbResult<u64> {
    Ok(stored_count(txn, list, address)? + recent::count(txn, list.journal_kind(), address)?)
}

/// How many ids of `address` in `list` its tables hold (both levels): those older than the
/// reorg window, which no unwind can take back.
pub fn settled<K: TransactionKind>(txn: &Txn<K>, list: IdList, address: &Address) -> DbResult<u64> {
    stored_count(txn, list, address)
}

/// Ids `idx..idx + count` of `address` in `list`, ascending: the tables', then the window's.
pub fn page<K: TransactionKind>(
    txn: &Txn<K>,
    list: IdList,
    address: &Address,
    idx: u64,
    count: u64,
) -> DbResult<Vec<u64>> {
    let stored = stored_count(txn, list, address)?;
    let mut out = match stored.checked_sub(idx).filter(|&n| n > 0) {
        Some(n) => stored_page(txn, list, address, idx, count.min(n))?,
        None => Vec::new(),
    };
    let want = usize::try_from(count).unwrap_or(usize::MAX);
    if out.len() < want {
        let skip = usize::try_from(idx.saturating_sub(stored)).unwrap_or(usize::MAX);
        let missing = want - out.len();
        out.extend(recent::ids(txn, list.journal_kind(), address)?.into_iter().skip(skip).take(missing));
    }
    Ok(out)
}

/// How many ids of `address` in `list` are below `id` (the table's and the window's): where a
/// page that starts at `id` starts.
pub fn rank<K: TransactionKind>(txn: &Txn<K>, list: IdList, address: &Address, id: u64) -> DbResult<u64> {
    let (stored, all) = stored_rank(txn, list, address, id)?;
    if !all {
        return Ok(stored);
    }
    let recent = recent::ids(txn, list.journal_kind(), address)?;
    Ok(stored + recent.partition_point(|&x| x < id) as u64)
}

/// Up to `want` ids of `address` in `list` from `bound` on, ascending, and whether more follow.
pub fn ids_from<K: TransactionKind>(
    txn: &Txn<K>,
    list: IdList,
    address: &Address,
    bound: u64,
    want: u64,
) -> DbResult<(Vec<u64>, bool)> {
    let at = rank(txn, list, address, bound)?;
    let ids = page(txn, list, address, at, want)?;
    let more = at + (ids.len() as u64) < count(txn, list, address)?;
    Ok((ids, more))
}

/// Up to `want` ids of `address` in `list` below `bound`, newest first, and whether more precede
/// them.
pub fn ids_below<K: TransactionKind>(
    txn: &Txn<K>,
    list: IdList,
    address: &Address,
    bound: u64,
    want: u64,
) -> DbResult<(Vec<u64>, bool)> {
    let end = rank(txn, list, address, bound)?;
    let start = end.saturating_sub(want);
    let mut ids = page(txn, list, address, start, end - start)?;
    ids.reverse();
    Ok((ids, start > 0))
}

/// The sum of what `rows_of` says of each row id of `address` in row list `list` (one of
/// [`ROW_LISTS`]) whose transaction lies in `first..=last` (TxIds); `None` when it says `None`
/// of one, or the TxIds are past what a row id holds.
pub fn sum_row_ids<K: TransactionKind>(
    txn: &Txn<K>,
    list: IdList,
    address: &Address,
    (first, last): (u64, u64),
    mut rows_of: impl FnMut(u64) -> Option<u64>,
) -> DbResult<Option<u64>> {
    let (Some(low), Some(high)) =
        (transfer_rows::first_of(first), last.checked_add(1).and_then(transfer_rows::first_of))
    else {
        return Ok(None);
    };
    let from = rank(txn, list, address, low)?;
    let to = rank(txn, list, address, high)?;
    let mut sum = 0;
    for id in page(txn, list, address, from, to - from)? {
        match rows_of(id) {
            Some(rows) => sum += rows,
            None => return Ok(None),
        }
    }
    Ok(Some(sum))
}

/// Per-address id lists in chunks: transfer indexes, blocks rewarded, withdrawals.
#[derive(Debug)]
pub struct AddressIndexFamily;

impl Gatherer for IdLists {
    fn collect(&mut self, block: &BlockRows<'_, '_>, _: &mut UndoLog) -> Result<(), WriteError> {
        for touch in block.touches {
            self.touch(touch)?;
        }
        self.count_rows(block.logs)?;
        self.collect_block(block.txn, block.block)
    }

    fn buffers(&mut self) -> Vec<&mut dyn Buffer> {
        self.lists.iter_mut().map(|l| l as &mut dyn Buffer).collect()
    }

    fn write(self: Box<Self>, writing: &mut Writing<'_>) -> Result<(), WriteError> {
        // A snapshot holds the state the write started from (the writer lock is held), which
        // a whole-table rewrite copies.
        let before = writing.db.begin_read().ok();
        writing.transfer_ids +=
            Self::write(*self, writing.txn, before.as_ref(), writing.window, &mut writing.leaving)?;
        Ok(())
    }
}

impl Family for AddressIndexFamily {
    const NAME: &'static str = "address indexes";
    const TABLES: &'static [TableId] = &[
        TableId::OtsERC20TransferIndex,
        TableId::OtsERC20TransferCounter,
        TableId::OtsERC721TransferIndex,
        TableId::OtsERC721TransferCounter,
        TableId::OtsWithdrawalsIndex,
        TableId::OtsWithdrawalsCounter,
        TableId::OtsWithdrawalIdx2Block,
        TableId::OtsBlocksRewardedIndex,
        TableId::OtsBlocksRewardedCounter,
        TableId::OtsERC1155TransferIndex,
        TableId::OtsERC1155TransferCounter,
        TableId::OtsInternalTxIndex,
        TableId::OtsInternalTxCounter,
        TableId::OtsTransferRowsIndex,
        TableId::OtsTransferRowsCounter,
        TableId::OtsTokenTransfersIndex,
        TableId::OtsTokenTransfersCounter,
        TableId::OtsInternalRowsIndex,
        TableId::OtsInternalRowsCounter,
        TableId::OtsPartyTokenIndex,
        TableId::OtsPartyTokenCounter,
    ];
    const YOUNG_TABLES: &'static [TableId] = levels::YOUNG_TABLES;

    fn gatherer(gathering: &Gathering) -> Option<Box<dyn Gatherer>> {
        let lists = match &gathering.buffering {
            Buffering::InMemory => IdLists::default(),
            Buffering::Spilling { runs, each } => IdLists::spilling(runs, *each),
        };
        Some(Box::new(lists.with_party_tokens(gathering.party_tokens)))
    }

    fn fold(txn: &WriteTxn, window: WindowStart, leaving: &mut WindowRows) -> DbResult<()> {
        IdLists::default().write(txn, None, window, leaving).map(drop)
    }

    fn unwind(txn: &WriteTxn, unwinding: &Unwinding) -> DbResult<()> {
        unwind_withdrawal_blocks(txn, unwinding.to)
    }

    fn check<K: TransactionKind>(txn: &Txn<K>, checking: &mut Checking) -> DbResult<()> {
        let below = checking.first_past_tip();
        check_transfers(txn, &mut checking.report, below)?;
        check_recent(txn, &mut checking.report, below, &checking.window.ids)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txid::TxId;

    /// A swap sends a token to the router and on from it: the router's transfer index gets the
    /// transaction once, and each token kind's index its own.
    #[test]
    fn a_transaction_touching_an_address_twice_gathers_it_once_per_index() {
        let mut lists = IdLists::default();
        let [token, router, user] = [1, 2, 3].map(Address::repeat_byte);
        let touch = |kind, address, tx| Touch { kind, token, address, tx: TxId(tx) };
        for t in [
            touch(TokenKind::Erc20, user, 7),
            touch(TokenKind::Erc20, router, 7),
            touch(TokenKind::Erc20, router, 7),
            touch(TokenKind::Erc20, user, 7),
            touch(TokenKind::Erc721, router, 7),
            touch(TokenKind::Erc20, router, 8),
        ] {
            lists.touch(&t).expect("touch");
        }
        let len = |list: IdList| lists.lists[list as usize].len();
        assert_eq!(len(IdList::Erc20Transfers), 3, "user and router in 7, router in 8");
        assert_eq!(len(IdList::Erc721Transfers), 1);
    }

    /// A transaction is an internal transaction of the parties of its inner frames that move
    /// ether, create or selfdestruct, reverted or not, once each; the top call, calls without
    /// value, static calls and the value a DELEGATECALL or CALLCODE repeats make none.
    #[test]
    fn inner_frames_that_move_ether_create_or_destroy_list_their_parties() {
        use crate::db::{AccessMode, Db};
        use alloy_primitives::U256;
        let [sender, router, payee, factory, made, heir, proxy, logic, clone, stillborn] =
            [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map(Address::repeat_byte);
        let frame = |tx: u64, depth: u32, kind: FrameKind, from: Address, to: Address, value: u64| {
            CallFrame { tx_index: tx, depth, kind, from, to, value: U256::from(value), success: value != 13 }
        };
        let block = BlockData {
            number: 9,
            frames: Some(vec![
                frame(0, 0, FrameKind::Call, sender, router, 100),
                frame(0, 1, FrameKind::Call, router, payee, 40),
                frame(0, 1, FrameKind::Call, router, payee, 13),
                frame(0, 1, FrameKind::Call, router, factory, 0),
                frame(1, 0, FrameKind::Call, sender, proxy, 5),
                frame(1, 1, FrameKind::DelegateCall, proxy, logic, 5),
                frame(1, 1, FrameKind::StaticCall, proxy, router, 0),
                frame(1, 1, FrameKind::CallCode, proxy, logic, 5),
                frame(2, 0, FrameKind::Call, sender, factory, 0),
                frame(2, 1, FrameKind::Create2, factory, made, 0),
                frame(2, 2, FrameKind::SelfDestruct, made, heir, 0),
                frame(3, 0, FrameKind::Create, sender, made, 0),
                // A contract a factory made: its creation is `OtsContractCreators`' to tell.
                frame(4, 0, FrameKind::Call, sender, factory, 0),
                frame(4, 1, FrameKind::Create, factory, clone, 0),
                // One reverted after it ran (no creation stored), one that never had an address.
                frame(5, 1, FrameKind::Create, factory, stillborn, 13),
                frame(6, 1, FrameKind::Create2, factory, Address::ZERO, 13),
            ]),
            ..Default::default()
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
        let txn = db.begin_write().expect("write");
        let mut lists = IdLists::default();
        lists.collect_block(&txn, &block).expect("collect");
        lists.write(&txn, None, WindowStart::Closed, &mut WindowRows::default()).expect("write");
        let id = |i| TxId::new(9, i).expect("id").0;
        for (address, want) in [
            (sender, vec![]),
            (router, vec![id(0)]),
            (payee, vec![id(0)]),
            (factory, vec![id(2), id(4), id(5), id(6)]),
            // Made by CREATE2 and listed for the selfdestruct it then ran.
            (made, vec![id(2)]),
            (clone, vec![]),
            (stillborn, vec![id(5)]),
            (Address::ZERO, vec![]),
            (heir, vec![id(2)]),
            (proxy, vec![]),
            (logic, vec![]),
        ] {
            assert_eq!(page(&txn, IdList::InternalTxs, &address, 0, 10).expect("page"), want, "{address}");
        }
    }

    /// A stage's lists are written an address's ids a piece at a time (16 ids in unit tests):
    /// the first stage's to the main tables (rewritten whole), a batch's in place, the later
    /// stages' to segments, then folded; after every write the tables are byte for byte those
    /// the same ids give written as one row an address.
    #[test]
    fn a_stage_writes_an_address_in_pieces_as_in_one_row() {
        use crate::db::{tables::TableId, AccessMode, Db};
        const LIST: IdList = IdList::Erc20Transfers;
        let dir = tempfile::tempdir().expect("tempdir");
        let pieces = Db::open(&dir.path().join("pieces"), AccessMode::ReadWrite).expect("open");
        let whole = Db::open(&dir.path().join("whole"), AccessMode::ReadWrite).expect("open");
        let raw = |db: &Db| -> Vec<(Vec<u8>, Vec<u8>)> {
            let txn = db.begin_read().expect("read");
            [
                TableId::OtsERC20TransferIndex,
                TableId::OtsERC20TransferCounter,
                TableId::OtsERC20TransferIndexStaged,
            ]
            .into_iter()
            .flat_map(|t| txn.raw_entries(t).expect("entries"))
            .collect()
        };
        // `segment` of a stage; `None`, a batch (in place, no snapshot).
        let write = |rows: &[(Address, Vec<u64>)], segment: Option<u64>| {
            let mut lists = IdLists { staged: segment.is_some(), newest: segment, ..IdLists::default() };
            for (address, ids) in rows {
                for &id in ids {
                    lists.push(LIST, *address, id).expect("push");
                }
            }
            let txn = pieces.begin_write().expect("write");
            let before = pieces.begin_read().expect("read");
            let before = segment.map(|_| &before);
            lists.write(&txn, before, WindowStart::Closed, &mut WindowRows::default()).expect("lists");
            txn.commit().expect("commit");
            let txn = whole.begin_write().expect("write");
            let before = whole.begin_read().expect("read");
            let before = segment.map(|_| &before);
            let counts = (rows.len() as u64, rows.iter().map(|(_, ids)| ids.len() as u64).sum());
            levels::write_rows(&txn, before, LIST, rows.iter().cloned(), counts, segment).expect("rows");
            txn.commit().expect("commit");
        };
        let [busy, quiet, later] = [1, 2, 3].map(Address::repeat_byte);
        let stage = |s: u64, busy_ids: u64| {
            let base = 100_000 * s;
            vec![
                (busy, (base..base + busy_ids).collect::<Vec<u64>>()),
                (quiet, vec![base + 50_000]),
                (later, (base + 60_000..base + 60_000 + 3 * staged::PIECE_IDS as u64 + 5).collect()),
            ]
        };
        // Lengths past a piece and past a chunk, and not a multiple of either.
        write(&stage(1, 700), Some(1));
        assert_eq!(raw(&pieces), raw(&whole), "the first stage");
        write(&stage(2, 37), None);
        assert_eq!(raw(&pieces), raw(&whole), "a batch in place");
        for s in 3..6 {
            write(&stage(s, 250 + 61 * s), Some(s));
            assert_eq!(raw(&pieces), raw(&whole), "stage {s}, a segment");
        }
        assert!(!pieces
            .begin_read()
            .expect("read")
            .raw_entries(TableId::OtsERC20TransferIndexStaged)
            .expect("staged")
            .is_empty());
        // A batch with a snapshot folds the segments in with its own rows.
        let rows = stage(7, 500);
        let mut lists = IdLists::default();
        for (address, ids) in &rows {
            for &id in ids {
                lists.push(LIST, *address, id).expect("push");
            }
        }
        let txn = pieces.begin_write().expect("write");
        lists
            .write(
                &txn,
                Some(&pieces.begin_read().expect("read")),
                WindowStart::Closed,
                &mut WindowRows::default(),
            )
            .expect("fold");
        txn.commit().expect("commit");
        let txn = whole.begin_write().expect("write");
        let counts = (3, rows.iter().map(|(_, ids)| ids.len() as u64).sum());
        levels::write_rows(
            &txn,
            Some(&whole.begin_read().expect("read")),
            LIST,
            rows.into_iter(),
            counts,
            None,
        )
        .expect("fold");
        txn.commit().expect("commit");
        assert!(pieces
            .begin_read()
            .expect("read")
            .raw_entries(TableId::OtsERC20TransferIndexStaged)
            .expect("staged")
            .is_empty());
        assert_eq!(raw(&pieces), raw(&whole), "folded");
        let txn = pieces.begin_read().expect("read");
        assert_eq!(
            stored_count(&txn, LIST, &busy).expect("count"),
            700 + 37 + (3..6).map(|s| 250 + 61 * s).sum::<u64>() + 500
        );
    }

    /// A rank is the position an id has or would have, in the single-byte form, in the last
    /// chunk and in every full chunk, appended in several batches.
    #[test]
    fn an_id_ranks_where_a_page_would_find_it() {
        use crate::db::{tables::OtsERC20TransferCounter, tables::OtsERC20TransferIndex, AccessMode, Db};
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
        let [few, many] = [1, 2].map(Address::repeat_byte);
        let ids = |n: u64| (0..n).map(|i| 10 + 3 * i).collect::<Vec<u64>>();
        let txn = db.begin_write().expect("write");
        append_ids::<OtsERC20TransferIndex, OtsERC20TransferCounter>(&txn, &few, &ids(100)).expect("few");
        for batch in ids(1_000).chunks(300) {
            append_ids::<OtsERC20TransferIndex, OtsERC20TransferCounter>(&txn, &many, batch).expect("many");
        }
        txn.commit().expect("commit");
        let txn = db.begin_read().expect("read");
        for (address, n) in [(few, 100), (many, 1_000)] {
            let all = page(&txn, IdList::Erc20Transfers, &address, 0, n).expect("page");
            assert_eq!(all, ids(n));
            for (position, &id) in all.iter().enumerate() {
                for probe in [id - 1, id] {
                    assert_eq!(
                        rank(&txn, IdList::Erc20Transfers, &address, probe).expect("rank"),
                        position as u64
                    );
                }
                assert_eq!(
                    rank(&txn, IdList::Erc20Transfers, &address, id + 1).expect("rank"),
                    position as u64 + 1
                );
            }
            assert_eq!(rank(&txn, IdList::Erc20Transfers, &address, u64::MAX).expect("rank"), n);
            assert_eq!(rank(&txn, IdList::Erc20Transfers, &Address::ZERO, 5).expect("rank"), 0);
        }
    }
}
