//! The reorg window's rows kept apart from the large tables (docs/architecture.md,
//! "Invariants"): the newest blocks' list ids and appearances wait in `OtsRecentIds` and
//! `OtsRecentSent`, their balances, owners and ERC1155 balances in `OtsRecentBalances` and its
//! siblings; reads join them to the tables', blocks leaving the window move theirs into the
//! tables, and an unwind deletes window rows only.

use crate::common;

use std::{collections::BTreeMap, time::Duration};

use alloy::primitives::{Address, U256};
use common::transfer_chain::{self, block};
use ots_indexer::{
    db::{
        codec::{
            BalancePrior, BlockNumber, ChunkKey, IdChunk, IndexKind, ListId, RecentId, RecentKey, TokenIdKey,
            WindowValue,
        },
        tables::*,
        AccessMode, Db,
    },
    index::{
        address_index::{count, page, IdList, ID_LISTS},
        appearances, balances,
        check::{check, dump},
        journal::{fold_window, unwind_to},
        recent, totals,
    },
    source::synthetic::{Shape, SyntheticChain},
    sync::{Indexer, SyncConfig},
    txid::TxId,
};
use signet_libmdbx::tx::TransactionKind;

/// The window's lists of `kind`, addresses ascending.
fn window_lists<K: TransactionKind>(
    txn: &ots_indexer::db::Txn<K>,
    kind: IndexKind,
) -> Vec<(Address, Vec<u64>)> {
    let (rows, _) = recent::all(txn).expect("window");
    rows.ids.into_iter().filter(|((k, _), _)| *k == kind).map(|((_, a), ids)| (a, ids)).collect()
}

/// `transfer_chain::index` keeps a window of 64 blocks.
const WINDOW: u64 = 64;

/// Every address's ERC20 transfer ids in blocks `..to`, from the chain's own logs.
fn expected(to: u64) -> BTreeMap<Address, Vec<u64>> {
    let mut out: BTreeMap<Address, Vec<u64>> = BTreeMap::new();
    for n in 0..to {
        for (i, receipt) in block(n).block.receipts.iter().enumerate() {
            let id = TxId::new(n, i as u64).expect("id").0;
            for log in &receipt.logs {
                for topic in &log.topics[1..] {
                    let ids = out.entry(Address::from_slice(&topic[12..])).or_default();
                    if ids.last() != Some(&id) {
                        ids.push(id);
                    }
                }
            }
        }
    }
    out
}

fn indexed(to: u64, per_batch: u64) -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
    transfer_chain::index(&db, 0, to, per_batch);
    (dir, db)
}

/// The large table's ids by address.
fn stored(db: &Db) -> BTreeMap<Address, Vec<u64>> {
    let txn = db.begin_read().expect("read");
    let mut out: BTreeMap<Address, Vec<u64>> = BTreeMap::new();
    let mut cursor = txn.cursor::<OtsERC20TransferIndex>().expect("cursor");
    let mut next = cursor.first().expect("first");
    while let Some((ChunkKey { address, .. }, IdChunk(ids))) = next {
        out.entry(address).or_default().extend(ids);
        next = cursor.next_entry().expect("next");
    }
    out
}

#[test]
fn the_newest_blocks_ids_wait_in_the_window_and_reads_join_them() {
    let (_dir, db) = indexed(200, 7);
    let first_kept = TxId::first_of_block(200 - WINDOW).0;
    let in_tables = stored(&db);
    assert!(in_tables.values().flatten().all(|&id| id < first_kept), "a window block's id in the table");
    let txn = db.begin_read().expect("read");
    let window = window_lists(&txn, IndexKind::Erc20Transfers);
    assert!(!window.is_empty());
    assert!(window.iter().flat_map(|(_, ids)| ids).all(|&id| id >= first_kept), "an old id in the window");

    let want = expected(200);
    let mut straddled = 0;
    for (address, ids) in &want {
        assert_eq!(count(&txn, IdList::Erc20Transfers, address).expect("count"), ids.len() as u64);
        assert_eq!(&page(&txn, IdList::Erc20Transfers, address, 0, 10_000).expect("page"), ids);
        // A page that starts in the table and ends in the window.
        let in_table = in_tables.get(address).map_or(0, Vec::len);
        if in_table > 0 && in_table < ids.len() {
            straddled += 1;
            let from = in_table - 1;
            let got = page(&txn, IdList::Erc20Transfers, address, from as u64, 3).expect("page");
            assert_eq!(got, ids[from..(from + 3).min(ids.len())], "{address}");
            let past = page(&txn, IdList::Erc20Transfers, address, ids.len() as u64, 3).expect("page");
            assert!(past.is_empty());
        }
    }
    assert!(straddled > 100, "only {straddled} lists straddle the window's start");
    check(&txn).expect("check passes");
}

#[test]
fn blocks_leaving_the_window_move_their_ids_into_the_tables_whatever_the_batches() {
    // Batches of one block (each moves one block out), of 50, and of 300 (every block of the
    // batch but the window's goes straight to the tables).
    let (_one, by_one) = indexed(300, 1);
    let (_fifty, by_fifty) = indexed(300, 50);
    let (_all, at_once) = indexed(300, 300);
    assert!(raw(&by_one) == raw(&by_fifty), "the tables depend on where batches fell");
    assert!(raw(&by_one) == raw(&at_once), "the tables depend on where batches fell");
    let want = expected(300 - WINDOW);
    let in_tables = stored(&by_one);
    assert_eq!(in_tables, want.into_iter().filter(|(_, ids)| !ids.is_empty()).collect());
}

/// The list tables and the window, byte for byte.
fn raw(db: &Db) -> Vec<Vec<(Vec<u8>, Vec<u8>)>> {
    let txn = db.begin_read().expect("read");
    [TableId::OtsERC20TransferIndex, TableId::OtsERC20TransferCounter, TableId::OtsRecentIds]
        .iter()
        .map(|t| txn.raw_entries(*t).expect("entries"))
        .collect()
}

#[test]
fn an_unwind_in_the_window_leaves_the_large_tables_as_they_were() {
    let (_dir, db) = indexed(200, 10);
    let tables_before = stored(&db);
    let large = [TableId::OtsAppearances, TableId::OtsNonceAnchors, TableId::OtsAddressTotals];
    let large_tables = |db: &Db| {
        let txn = db.begin_read().expect("read");
        large.map(|t| txn.raw_entries(t).expect("entries"))
    };
    let appearances_before = large_tables(&db);
    assert!(!appearances_before[0].is_empty());
    let txn = db.begin_write().expect("write");
    unwind_to(&txn, 150).expect("unwind");
    txn.commit().expect("commit");
    assert_eq!(stored(&db), tables_before, "the unwind wrote to the large table");
    assert!(large_tables(&db) == appearances_before, "the unwind wrote to the appearance or totals tables");
    let txn = db.begin_read().expect("read");
    let cut = TxId::first_of_block(151).0;
    let window = window_lists(&txn, IndexKind::Erc20Transfers);
    assert!(window.iter().flat_map(|(_, ids)| ids).all(|&id| id < cut), "an unwound id stayed");
    for (address, ids) in expected(151) {
        assert_eq!(page(&txn, IdList::Erc20Transfers, &address, 0, 10_000).expect("page"), ids);
    }
    check(&txn).expect("check passes");
    drop(txn);

    // Indexed again, the database reads as one never unwound; and unwound, as one indexed to
    // block 150 only (whose window starts 49 blocks earlier).
    transfer_chain::index(&db, 151, 200, 10);
    let (_clean_dir, clean) = indexed(200, 10);
    assert!(dump(&db).expect("dump") == dump(&clean).expect("dump"));
    let (_short_dir, short) = indexed(151, 10);
    let txn = db.begin_write().expect("write");
    unwind_to(&txn, 150).expect("unwind");
    txn.commit().expect("commit");
    let without_undo = |db: &Db| {
        dump(db).expect("dump").into_iter().filter(|(table, ..)| !table.ends_with("Undo")).collect::<Vec<_>>()
    };
    assert!(without_undo(&db) == without_undo(&short), "an unwound database reads as a clean one");
}

#[test]
fn the_checker_refuses_window_ids_out_of_place() {
    let (_dir, db) = indexed(100, 10);
    let (address, ids) = {
        let txn = db.begin_read().expect("read");
        window_lists(&txn, IndexKind::Erc20Transfers)
            .into_iter()
            .find(|(a, _)| stored(&db).get(a).is_some_and(|t| !t.is_empty()))
            .expect("an address in both")
    };
    let tampered = |what: &str, change: &dyn Fn(&ots_indexer::db::WriteTxn)| {
        let txn = db.begin_write().expect("write");
        change(&txn);
        let err = check(&txn).expect_err(what).to_string();
        assert!(err.contains("OtsRecentIds"), "{what}: {err}");
        drop(txn);
    };
    // An id the table already holds, in a block the window holds.
    let first_stored = stored(&db)[&address][0];
    let block = TxId(ids[0]).block();
    tampered("an id not past the table's", &|txn| {
        let row = RecentId { kind: IndexKind::Erc20Transfers, address, id: first_stored };
        txn.put::<OtsRecentIds>(&BlockNumber(block), &row).expect("put");
        let key = RecentKey { kind: IndexKind::Erc20Transfers, address };
        txn.put::<OtsRecentIdsByAddress>(&key, &ListId(first_stored)).expect("put");
    });
    // A row kept by block but not by address: reads would miss it.
    tampered("a row missing by address", &|txn| {
        let row = RecentId { kind: IndexKind::Erc20Transfers, address, id: ids[0] + 1 };
        txn.put::<OtsRecentIds>(&BlockNumber(block), &row).expect("put");
    });
    // Rows of a block the journal does not hold: they would never leave the window.
    tampered("rows of no journal block", &|txn| {
        let row =
            RecentId { kind: IndexKind::Erc20Transfers, address: Address::repeat_byte(0xee), id: ids[0] };
        txn.put::<OtsRecentIds>(&BlockNumber(10_000), &row).expect("put");
    });
}

/// What every read of the window's families answers for `addresses` (and, as senders, their
/// nonces up to `nonces`), as text to compare.
fn reads<K: TransactionKind>(
    txn: &ots_indexer::db::Txn<K>,
    addresses: &[Address],
    nonces: u64,
) -> Vec<String> {
    let mut out = Vec::new();
    for address in addresses {
        let counts = appearances::counts(txn, address).expect("counts");
        out.push(format!("{address} {counts:?} {:?}", appearances::ends(txn, address).expect("ends")));
        out.push(format!("totals {:?}", totals::of(txn, address).expect("totals")));
        let all = appearances::after(txn, address, 0, usize::MAX).expect("after").ids;
        assert_eq!(all.len() as u64, counts.all);
        for cut in all.iter().step_by(3).copied().chain([0, u64::MAX]) {
            out.push(format!(
                "before {cut} {:?}",
                appearances::before(txn, address, cut, 2).expect("before")
            ));
            out.push(format!("after {cut} {:?}", appearances::after(txn, address, cut, 2).expect("after")));
        }
        for nonce in 0..=nonces {
            out.push(format!(
                "nonce {nonce} {:?}",
                appearances::sent_with_nonce(txn, address, nonce).expect("nonce")
            ));
        }
        for list in ID_LISTS {
            let n = count(txn, list, address).expect("count");
            out.push(format!("{list:?} {n} {:?}", page(txn, list, address, 0, n + 1).expect("page")));
            for idx in (0..n).step_by(5) {
                out.push(format!("{list:?} {idx} {:?}", page(txn, list, address, idx, 4).expect("page")));
            }
        }
    }
    out
}

#[test]
fn the_checker_refuses_a_window_balance_out_of_step_with_its_blocks() {
    let (_dir, db) = indexed(100, 10);
    let tampered = |what: &str, change: &dyn Fn(&ots_indexer::db::WriteTxn)| {
        let txn = db.begin_write().expect("write");
        change(&txn);
        let err = check(&txn).expect_err(what).to_string();
        assert!(err.contains("OtsRecentBalances"), "{what}: {err}");
        drop(txn);
    };
    let (key, row) = {
        let txn = db.begin_read().expect("read");
        let first = txn.cursor::<OtsRecentBalances>().expect("cursor").first().expect("first");
        first.expect("a balance in the window")
    };
    tampered("a block's balance missing", &|txn| {
        assert!(txn.delete::<OtsRecentBalances>(&key, Some(&row)).expect("delete"));
    });
    tampered("a balance of no block", &|txn| {
        let stray = WindowValue { block: row.block + 1_000, ..row };
        txn.put::<OtsRecentBalances>(&key, &stray).expect("put");
    });
    // Each block's row keeps the value the block found: the settled one for the key's first
    // window block, the window's value of the block before it otherwise.
    let txn = db.begin_read().expect("read");
    let mut firsts = Vec::new();
    let mut laters = Vec::new();
    let mut rows = txn.cursor::<OtsRecentBalancesByBlock>().expect("cursor");
    let mut next = rows.first().expect("first");
    while let Some((block, prior)) = next {
        let values = txn.cursor::<OtsRecentBalances>().expect("cursor").dups(&prior.key).expect("dups");
        if values.first().is_some_and(|v| v.block == block.0) {
            firsts.push((block, prior));
        } else {
            laters.push((block, prior));
        }
        next = rows.next_entry().expect("next");
    }
    drop(rows);
    drop(txn);
    assert!(!firsts.is_empty() && !laters.is_empty(), "the window holds keys changed once and more often");
    for (what, (block, prior)) in
        [("a first block's value before it", firsts[0]), ("a later block's", laters[0])]
    {
        tampered(what, &|txn| {
            assert!(txn.delete::<OtsRecentBalancesByBlock>(&block, Some(&prior)).expect("delete"));
            let wrong = BalancePrior { old: prior.old + U256::from(1), ..prior };
            txn.put::<OtsRecentBalancesByBlock>(&block, &wrong).expect("put");
        });
    }
}

/// The tokens, ERC721 ids and ERC1155 holders the balances' window holds values of.
fn window_balance_keys<K: TransactionKind>(
    txn: &ots_indexer::db::Txn<K>,
) -> (Vec<Address>, Vec<TokenIdKey>, Vec<(Address, Address)>) {
    fn keys<T: Table, K: TransactionKind>(txn: &ots_indexer::db::Txn<K>) -> Vec<T::Key> {
        let mut out = Vec::new();
        let mut cursor = txn.cursor::<T>().expect("cursor");
        let mut next = cursor.first().expect("first");
        while let Some((key, _)) = next {
            out.push(key);
            next = cursor.next_key().expect("next");
        }
        out
    }
    let mut tokens: Vec<Address> = keys::<OtsRecentBalances, _>(txn).into_iter().map(|k| k.token).collect();
    tokens.dedup();
    let ids = keys::<OtsRecentOwners, _>(txn);
    let mut multi: Vec<(Address, Address)> =
        keys::<OtsRecentMultiBalances, _>(txn).into_iter().map(|k| (k.token, k.holder)).collect();
    multi.dedup();
    (tokens, ids, multi)
}

/// Every balance read of the given tokens (counts, whole rankings and pages of them, each
/// ranked holder's balance), ERC721 ids and ERC1155 holders, as text.
fn balance_reads<K: TransactionKind>(
    txn: &ots_indexer::db::Txn<K>,
    (tokens, ids, multi): &(Vec<Address>, Vec<TokenIdKey>, Vec<(Address, Address)>),
) -> Vec<String> {
    let mut out = Vec::new();
    for token in tokens {
        let n = balances::holder_count(txn, token).expect("count");
        let all = balances::holders_page(txn, token, 0, n + 5).expect("holders");
        assert_eq!(all.len() as u64, n, "{token}: holder count and ranking disagree");
        out.push(format!("{token} {n} {all:?}"));
        for idx in (0..n + 2).step_by(3) {
            out.push(format!("{idx} {:?}", balances::holders_page(txn, token, idx, 2).expect("page")));
        }
        for (holder, _) in all.iter().take(50) {
            out.push(format!("{:?}", balances::balance(txn, *token, *holder).expect("balance")));
        }
    }
    for key in ids {
        out.push(format!("{key:?} {:?}", balances::owner(txn, key.token, key.id).expect("owner")));
    }
    for (token, holder) in multi {
        out.push(format!("{:?}", balances::multi_balances(txn, *token, *holder).expect("multi")));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_join_the_window_exactly_as_if_its_blocks_had_left_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let chain = SyntheticChain::new(3, 12_000, Shape::MAINNET);
    let head = chain.last_block();
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("db");
    let classifiers =
        ots_classifiers::BUILTIN_NAMES.iter().filter_map(|n| ots_classifiers::builtin(n)).collect();
    let config = SyncConfig {
        batch_blocks: 5,
        reorg_window: 16,
        poll_interval: Duration::from_millis(10),
        ..Default::default()
    };
    let indexer = Indexer::open(db.clone(), chain, classifiers, config).await.expect("indexer");
    indexer.sync_to(head).await.expect("sync");
    indexer.close().await.expect("close");

    // Addresses the window holds rows of, and as many that only the tables hold.
    let (addresses, nonces) = {
        let txn = db.begin_read().expect("read");
        check(&txn).expect("check passes");
        let mut addresses: Vec<Address> = Vec::new();
        for kind in [IndexKind::Appearances, IndexKind::Erc20Transfers, IndexKind::Withdrawals] {
            addresses.extend(window_lists(&txn, kind).into_iter().map(|(a, _)| a).take(150));
        }
        let senders = recent::all(&txn).expect("window").0.sent;
        assert!(!senders.is_empty(), "no sender in the window");
        let nonces = senders.values().flat_map(|run| run.iter().map(|&(_, n)| n)).max().unwrap_or(0) + 1;
        addresses.extend(senders.into_keys().take(150));
        let mut cursor = txn.cursor::<OtsAppearances>().expect("cursor");
        let mut next = cursor.first().expect("first");
        while let Some((key, _)) = next.filter(|_| addresses.len() < 900) {
            addresses.push(key.address);
            next = cursor.next_key().expect("next");
        }
        addresses.sort_unstable();
        addresses.dedup();
        (addresses, nonces.min(40))
    };
    let balance_keys = window_balance_keys(&db.begin_read().expect("read"));
    assert!(balance_keys.0.len() > 20, "{} tokens in the window", balance_keys.0.len());
    assert!(!balance_keys.1.is_empty(), "no ERC721 id in the window");
    assert!(!balance_keys.2.is_empty(), "no ERC1155 holder in the window");
    let live = {
        let txn = db.begin_read().expect("read");
        let mut reads = reads(&txn, &addresses, nonces);
        reads.extend(balance_reads(&txn, &balance_keys));
        reads
    };
    let folded = {
        let txn = db.begin_write().expect("write");
        fold_window(&txn).expect("fold");
        assert_eq!(txn.stats::<OtsRecentIds>().expect("stats").entries, 0);
        assert_eq!(txn.stats::<OtsRecentSent>().expect("stats").entries, 0);
        assert_eq!(txn.stats::<OtsRecentTotals>().expect("stats").entries, 0);
        for table in [TableId::OtsRecentBalances, TableId::OtsRecentOwners, TableId::OtsRecentMultiBalances] {
            assert!(txn.raw_entries(table).expect("entries").is_empty(), "{table:?} not folded");
        }
        let mut reads = reads(&txn, &addresses, nonces);
        reads.extend(balance_reads(&txn, &balance_keys));
        reads
    };
    assert!(live.len() > 10_000, "{} reads", live.len());
    for (live, folded) in live.iter().zip(&folded) {
        assert_eq!(live, folded);
    }
    assert_eq!(live.len(), folded.len());

    // Unwinding ten blocks of the window writes none of the large tables.
    let large = [
        TableId::OtsAppearances,
        TableId::OtsNonceAnchors,
        TableId::OtsAddressTotals,
        TableId::OtsERC20TransferIndex,
        TableId::OtsERC20TransferCounter,
        TableId::OtsWithdrawalsIndex,
        TableId::OtsTokenBalances,
        TableId::OtsTokenHolderRanks,
        TableId::OtsTokenHolderCounts,
        TableId::OtsERC721Owners,
        TableId::OtsERC1155Balances,
    ];
    let large_tables = || {
        let txn = db.begin_read().expect("read");
        large.map(|t| txn.raw_entries(t).expect("entries"))
    };
    let before = large_tables();
    assert!(before.iter().filter(|t| !t.is_empty()).count() >= 9, "the large tables are mostly empty");
    let txn = db.begin_write().expect("write");
    unwind_to(&txn, head - 10).expect("unwind");
    check(&txn).expect("check passes");
    txn.commit().expect("commit");
    assert!(large_tables() == before, "the unwind wrote to a large table");
}

/// A busy token's deep holder page after a block starts from the marks the pages of the block
/// before left, moved by what the block changed in the ranking, instead of walking from the
/// top; every page reads as the plain walk does. An unwind below the marks' block drops them.
#[test]
fn holder_ranking_marks_outlive_their_block() {
    use ots_indexer::rpc::window_holders::WindowHoldersCache;
    let (_dir, db) = indexed(120, 1);
    let token = Address::repeat_byte(0x20);
    let cache = WindowHoldersCache::default();
    let plain = |db: &Db, idx, count| {
        let txn = db.begin_read().expect("read");
        balances::holders_page(&txn, &token, idx, count).expect("plain")
    };
    let read = db.begin_read().expect("read");
    let total = balances::holder_count(&read, &token).expect("count");
    assert!(total > 1_500, "{total} holders");
    let deep = total - 30;
    assert_eq!(cache.page(&read, &token, deep, 25).expect("deep"), plain(&db, deep, 25));
    let left = cache.marks();
    assert!(left.newest as u64 >= deep / 256, "a mark every 256 holders the walk passed: {left:?}");
    drop(read);

    for block in 120..123 {
        transfer_chain::index(&db, block, block + 1, 1);
        let read = db.begin_read().expect("read");
        let total = balances::holder_count(&read, &token).expect("count");
        for idx in [deep, 0, 255, 256, 700, 1_024, total - 25, total] {
            assert_eq!(
                cache.page(&read, &token, idx, 25).expect("page"),
                plain(&db, idx, 25),
                "block {block}, {idx}"
            );
        }
    }
    let kept = cache.marks();
    assert_eq!((kept.carried, kept.dropped, kept.waiting), (3, 0, 0), "{kept:?}");
    assert!(kept.newest >= left.newest, "{kept:?}");

    let txn = db.begin_write().expect("write");
    unwind_to(&txn, 110).expect("unwind");
    txn.commit().expect("commit");
    let read = db.begin_read().expect("read");
    assert_eq!(cache.page(&read, &token, deep, 25).expect("deep"), plain(&db, deep, 25));
    let after = cache.marks();
    assert_eq!((after.carried, after.dropped), (3, 1), "{after:?}");
}
