//! What a first walk of an address's Etherscan `tokentx` would leave in the walk marks
//! (docs/etherscan.md, "Counted groups"), counted here from the recording the database was
//! indexed from and written to the datadir's marks file, which `serve` reads at start. A
//! recording has no node to walk with, so without them a page past row 10,000 cannot be reached
//! at all; with them, its index part — skipping the counted groups, reading the page's ids — is
//! what a server pays on every read after the first. Its `txlist` is counted too, for the rows
//! it has, but not written: the server counts those groups from the index's marks itself.

use std::{
    collections::{HashMap, HashSet},
    path::Path,
};

use alloy_primitives::Address;
use anyhow::Context;
use ots_indexer::{
    db::{state, Db, ReadTxn},
    decode::{
        token_logs, TokenKind, TokenKinds, TRANSFER_BATCH_TOPIC, TRANSFER_SINGLE_TOPIC, TRANSFER_TOPIC,
    },
    index::families::{
        address_index::{self, IdList},
        appearances,
        attributes::attributes,
    },
    rpc::etherscan::{
        marks::{Group, Stream, GROUP},
        marks_file::{MarksFile, FILE_NAME},
    },
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

/// One list to count: its stream, its settled ids ascending, and each id's rows and emitters.
struct List {
    stream: Stream,
    ids: Vec<u64>,
    rows: HashMap<u64, (u64, Vec<(Address, TokenKinds)>)>,
}

/// Counts the whole groups of `address`'s `txlist` and `tokentx` from `recording` and keeps the
/// `tokentx` ones in `datadir`'s marks file: (txlist, tokentx).
pub(crate) async fn count_into_marks(
    db: &Db,
    recording: &Path,
    datadir: &Path,
    address: Address,
) -> anyhow::Result<(Counted, Counted)> {
    let txn = db.begin_read()?;
    let state = state::read_state(&txn)?;
    let chain = state.chain.context("the database names no chain")?;
    let tip = state.checkpoint.context("the database holds no block")?.number;
    let below = TxId::first_of_block(tip.saturating_sub(SETTLED_BELOW_TIP)).0;
    let settled = address_index::settled(&txn, IdList::Erc20Transfers, &address)?;
    let mut transfers = List {
        stream: Stream::Movements(TokenKind::Erc20, Some(address), None),
        ids: address_index::page(&txn, IdList::Erc20Transfers, &address, 0, settled)?,
        rows: HashMap::new(),
    };
    transfers.ids.retain(|&id| id < below);
    let mut txlist = List {
        stream: Stream::Transactions(address),
        ids: appearances_below(&txn, &address, below)?,
        rows: HashMap::new(),
    };
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
                txlist.rows.insert(id, (u64::from(top_level), Vec::new()));
            }
            if in_transfers.contains(&id) {
                let shaped = [TRANSFER_TOPIC, TRANSFER_SINGLE_TOPIC, TRANSFER_BATCH_TOPIC];
                let mut emitters = Vec::new();
                for log in &receipt.logs {
                    if log.topics.first().is_some_and(|t| shaped.contains(t)) {
                        emitters.push((log.address, kinds_of(&txn, &log.address)?));
                    }
                }
                emitters.sort_unstable_by_key(|(a, _)| *a);
                emitters.dedup_by_key(|(a, _)| *a);
                transfers.rows.insert(id, (0, emitters));
            }
        }
        let logs = token_logs(&block, |a| kinds_of(&txn, a))?;
        for (id, log) in logs {
            if log.kind == TokenKind::Erc20 && (log.from == address || log.to == address) {
                if let Some((rows, _)) = transfers.rows.get_mut(&id.0) {
                    *rows += 1;
                }
            }
        }
    }

    let marks = MarksFile::open(&datadir.join(FILE_NAME), chain);
    let counted = [(&txlist, false), (&transfers, true)].map(|(list, keep)| keep_groups(&marks, list, keep));
    marks.save().context("writing the walk marks")?;
    Ok((counted[0], counted[1]))
}

/// Counts every whole group of `list`, keeping them in `marks` if `keep`.
fn keep_groups(marks: &MarksFile, list: &List, keep: bool) -> Counted {
    let mut counted = Counted::default();
    for (index, ids) in list.ids.chunks_exact(GROUP as usize).enumerate() {
        let mut rows = 0;
        let mut emitters: Vec<(Address, TokenKinds)> = Vec::new();
        for id in ids {
            let (r, e) = list.rows.get(id).cloned().unwrap_or_default();
            rows += r;
            emitters.extend(e);
        }
        emitters.sort_unstable_by_key(|(a, _)| *a);
        emitters.dedup_by_key(|(a, _)| *a);
        let group =
            Group { first: ids[0], last: ids[ids.len() - 1], rows, emitters: emitters.into(), loaded: false };
        if keep {
            marks.marks().keep(list.stream, index as u64, group);
        }
        counted.groups += 1;
        counted.rows += rows;
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
