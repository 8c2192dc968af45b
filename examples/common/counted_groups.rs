//! How many rows the settled groups of an address's Etherscan `txlist` and `tokentx` make
//! (docs/etherscan.md, "Counted groups"), counted here from the recording the database was
//! indexed from, independently of the index: how deep the lists go, so that the benchmark asks
//! for pages that exist. The server counts both lists' settled groups from the index itself (the
//! appearances' marks; the transfer index and the transfer rows index), so a first read of a
//! deep page is a whole first walk.

use std::{
    collections::{HashMap, HashSet},
    path::Path,
};

use alloy_primitives::Address;
use anyhow::Context;
use ots_indexer::{
    db::{state, Db, ReadTxn},
    decode::{token_logs, TokenKind, TokenKinds},
    index::families::{
        address_index::{self, IdList},
        appearances,
        attributes::attributes,
    },
    rpc::etherscan::marks::GROUP,
    source::{fixture::Fixture, BlockSource},
    txid::TxId,
};

/// Blocks below the tip whose ids a group may hold: the reorg window's (128) and a margin; the
/// server keeps only groups older than its window, and checks each against the index.
const SETTLED_BELOW_TIP: u64 = 256;

/// How many rows the counted groups of one list make, and how many groups.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Counted {
    pub(crate) groups: u64,
    pub(crate) rows: u64,
}

/// One list to count: its settled ids ascending, and each id's rows.
struct List {
    ids: Vec<u64>,
    rows: HashMap<u64, u64>,
}

/// Counts the whole groups of `address`'s `txlist` and `tokentx` from `recording`: (txlist,
/// tokentx).
pub(crate) async fn count_groups(
    db: &Db,
    recording: &Path,
    address: Address,
) -> anyhow::Result<(Counted, Counted)> {
    let txn = db.begin_read()?;
    let state = state::read_state(&txn)?;
    let tip = state.checkpoint.context("the database holds no block")?.number;
    let below = TxId::first_of_block(tip.saturating_sub(SETTLED_BELOW_TIP)).0;
    let settled = address_index::settled(&txn, IdList::Erc20Transfers, &address)?;
    let mut transfers = List {
        ids: address_index::page(&txn, IdList::Erc20Transfers, &address, 0, settled)?,
        rows: HashMap::new(),
    };
    transfers.ids.retain(|&id| id < below);
    let mut txlist = List { ids: appearances_below(&txn, &address, below)?, rows: HashMap::new() };
    let wanted: HashSet<u64> = txlist.ids.iter().chain(&transfers.ids).map(|&id| TxId(id).block()).collect();
    let (in_txlist, in_transfers): (HashSet<u64>, HashSet<u64>) =
        (txlist.ids.iter().copied().collect(), transfers.ids.iter().copied().collect());

    let fixture = Fixture::load(recording)?;
    let mut kinds: HashMap<Address, TokenKinds> = HashMap::new();
    let mut kinds_of = |txn: &ReadTxn, a: &Address| -> anyhow::Result<TokenKinds> {
        if let Some(k) = kinds.get(a) {
            return Ok(*k);
        }
        let k = TokenKinds::of(&attributes(txn, a)?);
        kinds.insert(*a, k);
        Ok(k)
    };
    let last = wanted.iter().copied().max().unwrap_or(0);
    let first = wanted.iter().copied().min().unwrap_or(1);
    for number in first..=last {
        if !wanted.contains(&number) {
            continue;
        }
        let block = fixture.block(number).await?;
        for (index, (tx, receipt)) in block.transactions.iter().zip(&block.receipts).enumerate() {
            let id = TxId::new(number, index as u64)?.0;
            if in_txlist.contains(&id) {
                let top_level =
                    tx.from == address || tx.to == Some(address) || receipt.contract_address == Some(address);
                txlist.rows.insert(id, u64::from(top_level));
            }
            if in_transfers.contains(&id) {
                transfers.rows.insert(id, 0);
            }
        }
        let logs = token_logs(&block, |a| kinds_of(&txn, a))?;
        for (id, log) in logs {
            if log.kind == TokenKind::Erc20 && (log.from == address || log.to == address) {
                if let Some(rows) = transfers.rows.get_mut(&id.0) {
                    *rows += 1;
                }
            }
        }
    }

    Ok((count_list(&txlist), count_list(&transfers)))
}

/// Counts every whole group of `list`.
fn count_list(list: &List) -> Counted {
    let mut counted = Counted::default();
    for ids in list.ids.chunks_exact(GROUP as usize) {
        counted.groups += 1;
        counted.rows += ids.iter().map(|id| list.rows.get(id).copied().unwrap_or_default()).sum::<u64>();
    }
    counted
}

/// `address`'s appearances below id `below`, ascending.
fn appearances_below(txn: &ReadTxn, address: &Address, below: u64) -> anyhow::Result<Vec<u64>> {
    let mut ids = Vec::new();
    let mut from = 0;
    loop {
        let page = appearances::after(txn, address, from, 10_000)?;
        let Some(&newest) = page.ids.last() else { break };
        ids.extend(page.ids.iter().copied().filter(|&id| id < below));
        if !page.more || newest >= below {
            break;
        }
        from = newest + 1;
    }
    Ok(ids)
}
