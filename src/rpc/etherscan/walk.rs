//! Walking an index list of transactions for a list action whose rows the index does not count
//! (`txlist`, `tokentx`, …): ids are read a step at a time from the end `sort` starts at, within
//! the blocks asked for, their transactions and receipts fetched in one batch per step (through
//! the server's transaction cache), and each turned into the action's rows, until the page is
//! full. A page costs the transactions before it in the walk, not only its rows
//! (docs/etherscan.md).

use alloy_primitives::Address;
use serde_json::Value;

use super::{
    envelope::Answer,
    params::{Sort, Window},
    Etherscan,
};
use crate::{
    db::{state, DbResult, ReadTxn},
    index::families::{
        address_index::{count, page, rank, IdList},
        appearances,
    },
    rpc::TransactionWithReceipt,
    txid::TxId,
};

/// Transactions one step of a walk fetches.
const STEP: usize = 100;

/// Where a walk reads transaction ids.
#[derive(Debug, Clone, Copy)]
pub(super) enum Source {
    /// Every transaction the address appears in (`OtsAppearances`).
    Appearances(Address),
    /// An address's transactions in a transfer index.
    Transfers(IdList, Address),
}

impl Source {
    /// Up to about `want` ids from `bound` on (ascending) or below it (descending), in the
    /// walk's order, and whether more follow.
    fn step(self, t: &ReadTxn, sort: Sort, bound: u64, want: usize) -> DbResult<(Vec<u64>, bool)> {
        match (self, sort) {
            (Self::Appearances(address), Sort::Asc) => {
                let page = appearances::after(t, &address, bound, want)?;
                Ok((page.ids, page.more))
            }
            (Self::Appearances(address), Sort::Desc) => {
                let page = appearances::before(t, &address, bound, want)?;
                Ok((page.ids, page.more))
            }
            (Self::Transfers(list, address), Sort::Asc) => {
                let at = rank(t, list, &address, bound)?;
                let ids = page(t, list, &address, at, want as u64)?;
                let more = at + (ids.len() as u64) < count(t, list, &address)?;
                Ok((ids, more))
            }
            (Self::Transfers(list, address), Sort::Desc) => {
                let end = rank(t, list, &address, bound)?;
                let start = end.saturating_sub(want as u64);
                let mut ids = page(t, list, &address, start, end - start)?;
                ids.reverse();
                Ok((ids, start > 0))
            }
        }
    }
}

/// One transaction of a walk, for the action's rows.
pub(super) struct Walked<'a> {
    /// Its block.
    pub block: u64,
    /// Its block's time, Unix seconds.
    pub timestamp: u64,
    /// The indexed tip, for `confirmations`.
    pub tip: u64,
    /// The transaction and its receipt, as the node gave them.
    pub tx: &'a TransactionWithReceipt,
}

/// The first id of block `block`, or the end of all ids past the last block a `TxId` holds.
fn first_id(block: u64) -> u64 {
    if block >= 1 << (64 - 20) {
        u64::MAX
    } else {
        TxId::first_of_block(block).0
    }
}

/// A walk over a source's ids within a block range, a step at a time.
#[derive(Debug, Clone)]
pub(super) struct Walk {
    source: Source,
    sort: Sort,
    low: u64,
    high: u64,
    bound: u64,
    done: bool,
}

impl Walk {
    /// A walk of `source`'s ids in blocks `start..=end`, in `sort`'s order.
    pub(super) fn new(source: Source, (start, end): (u64, u64), sort: Sort) -> Self {
        let (low, high) = (first_id(start), end.checked_add(1).map_or(u64::MAX, first_id));
        let bound = match sort {
            Sort::Asc => low,
            Sort::Desc => high,
        };
        Self { source, sort, low, high, bound, done: false }
    }

    /// The next step's ids (in the walk's order) and the indexed tip; `None` once the walk is
    /// over.
    pub(super) fn advance(&mut self, api: &Etherscan) -> Result<Option<(Vec<TxId>, u64)>, Answer> {
        if self.done {
            return Ok(None);
        }
        let ((ids, more), tip) =
            api.read(|t| Ok((self.source.step(t, self.sort, self.bound, STEP)?, state::read_tip(t)?)))?;
        let inside: Vec<TxId> =
            ids.iter().copied().filter(|&id| self.low <= id && id < self.high).map(TxId).collect();
        let Some(&last) = ids.last() else {
            self.done = true;
            return Ok(None);
        };
        // An id past the range's far end ends the walk, as does the list's end.
        self.done = !more || inside.len() < ids.len();
        self.bound = match self.sort {
            Sort::Asc => last + 1,
            Sort::Desc => last,
        };
        Ok(Some((inside, tip.unwrap_or_default())))
    }
}

/// The rows of `window` among those `rows_of` makes of the transactions of `source` in blocks
/// `start..=end`, read in `sort`'s order (a transaction's rows in log or frame order, reversed
/// when descending).
pub(super) async fn walk(
    api: &Etherscan,
    source: Source,
    range: (u64, u64),
    window: Window,
    sort: Sort,
    mut rows_of: impl FnMut(&Walked<'_>, &ReadTxn) -> DbResult<Vec<Value>>,
) -> Result<Vec<Value>, Answer> {
    let wanted = usize::try_from(window.skip.saturating_add(window.rows)).unwrap_or(usize::MAX);
    let mut walk = Walk::new(source, range, sort);
    let mut found: Vec<Value> = Vec::new();
    while found.len() < wanted {
        let Some((ids, tip)) = walk.advance(api)? else { break };
        let (summaries, txs) = api.transactions(&ids).await?;
        let rows = api.read(|t| {
            let mut rows = Vec::new();
            for (id, tx) in ids.iter().zip(&txs) {
                let timestamp =
                    summaries.get(&format!("{:#x}", id.block())).map(|s| s.timestamp).unwrap_or_default();
                let mut of_tx = rows_of(&Walked { block: id.block(), timestamp, tip, tx }, t)?;
                if sort == Sort::Desc {
                    of_tx.reverse();
                }
                rows.extend(of_tx);
            }
            Ok(rows)
        })?;
        found.extend(rows);
    }
    Ok(page_of(found, window))
}

/// `window`'s rows of the rows found from the start of a walk.
pub(super) fn page_of(found: Vec<Value>, window: Window) -> Vec<Value> {
    let skip = usize::try_from(window.skip).unwrap_or(usize::MAX);
    let rows = usize::try_from(window.rows).unwrap_or(usize::MAX);
    found.into_iter().skip(skip).take(rows).collect()
}
