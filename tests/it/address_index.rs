//! The chunked address index and the match tables on real MDBX: every count from 1 up past
//! several chunks, appended in batches of varied size, read back page by page.

use alloy::primitives::{address, Address};
use ots_indexer::{
    db::{
        codec::{ChunkKey, CounterDup, IdChunk, LAST_CHUNK},
        tables::{
            OtsAllContracts, OtsAllContractsCounter, OtsERC20TransferCounter, OtsERC20TransferIndex, Table,
        },
        AccessMode, Db,
    },
    index::{
        address_index::{append_ids, id_count, id_page, rewrite_with_appends, verify_address, CHUNK_IDS},
        matches::{append_matches, match_count, match_page},
    },
};

type I = OtsERC20TransferIndex;
type C = OtsERC20TransferCounter;

fn fresh() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
    (dir, db)
}

/// Ids as the writer produces them: growing, with gaps.
fn ids(n: usize) -> Vec<u64> {
    (0..n as u64).map(|i| (i + 3) * 1_048_576 + (i % 7)).collect()
}

fn check_all_pages(db: &Db, a: &Address, want: &[u64]) {
    let txn = db.begin_read().expect("read");
    let n = want.len();
    assert_eq!(id_count::<C, _>(&txn, a).expect("count"), n as u64);
    assert_eq!(verify_address::<I, C, _>(&txn, a).expect("invariants"), want);
    for size in [1usize, 7, 25, 244, n.max(1)] {
        let mut idx = 0;
        while idx <= n {
            let page = id_page::<I, C, _>(&txn, a, idx as u64, size as u64).expect("page");
            let end = (idx + size).min(n);
            assert_eq!(page, want[idx.min(n)..end], "n={n} idx={idx} size={size}");
            idx += size;
        }
    }
    assert!(id_page::<I, C, _>(&txn, a, n as u64 + 3, 10).expect("page").is_empty());
    assert!(id_page::<I, C, _>(&txn, a, 0, 0).expect("page").is_empty());
}

#[test]
fn every_count_reads_back_exactly() {
    let (_dir, db) = fresh();
    let a = address!("00000000000000000000000000000000000000a1");
    let neighbour_low = address!("00000000000000000000000000000000000000a0");
    let neighbour_high = address!("00000000000000000000000000000000000000a2");
    let all = ids(733);
    let mut stored = 0;
    let mut step = 1;
    while stored < all.len() {
        let next = (stored + step).min(all.len());
        let txn = db.begin_write().expect("write");
        append_ids::<I, C>(&txn, &a, &all[stored..next]).expect("append");
        // Neighbours on both sides make sure reads never run into another address's chunks.
        append_ids::<I, C>(&txn, &neighbour_low, &[all[stored]]).expect("append");
        append_ids::<I, C>(&txn, &neighbour_high, &[all[stored]]).expect("append");
        txn.commit().expect("commit");
        stored = next;
        check_all_pages(&db, &a, &all[..stored]);
        // Steps 1, 2, 3, … then jumps across chunk boundaries.
        step = if stored < 20 { 1 } else { (step * 3) % 97 + 1 };
    }
}

#[test]
fn one_batch_of_each_size_reads_back() {
    for n in [1usize, 2, 243, 244, 245, 255, 256, 257, 488, 489, 600] {
        let (_dir, db) = fresh();
        let a = address!("00000000000000000000000000000000000000b1");
        let txn = db.begin_write().expect("write");
        append_ids::<I, C>(&txn, &a, &ids(n)).expect("append");
        txn.commit().expect("commit");
        check_all_pages(&db, &a, &ids(n));
    }
}

#[test]
fn layout_follows_the_spec() {
    let (_dir, db) = fresh();
    let a = address!("00000000000000000000000000000000000000c1");
    let all = ids(600);
    let txn = db.begin_write().expect("write");
    append_ids::<I, C>(&txn, &a, &all[..256]).expect("append");
    txn.commit().expect("commit");
    {
        let txn = db.begin_read().expect("read");
        // 256 ids: one chunk and the 1-byte counter 0xff.
        assert_eq!(
            txn.cursor::<C>().expect("cursor").dups(&a).expect("dups"),
            vec![CounterDup::Unique { total: 256 }]
        );
        assert_eq!(txn.get::<I>(&ChunkKey::last(a)).expect("get"), Some(IdChunk(all[..256].to_vec())));
    }
    let txn = db.begin_write().expect("write");
    append_ids::<I, C>(&txn, &a, &all[256..]).expect("append");
    txn.commit().expect("commit");
    let txn = db.begin_read().expect("read");
    // The spec's 600-id example: 244 ‖ id244, 488 ‖ id488, 600 ‖ FF…FF.
    let dups = txn.cursor::<C>().expect("cursor").dups(&a).expect("dups");
    assert_eq!(
        dups,
        vec![
            CounterDup::Regular { cumulative: 244, chunk: all[243] },
            CounterDup::Regular { cumulative: 488, chunk: all[487] },
            CounterDup::Regular { cumulative: 600, chunk: LAST_CHUNK },
        ]
    );
    assert_eq!(
        txn.get::<I>(&ChunkKey { address: a, chunk: all[243] }).expect("get"),
        Some(IdChunk(all[..CHUNK_IDS].to_vec()))
    );
    assert_eq!(txn.get::<I>(&ChunkKey::last(a)).expect("get"), Some(IdChunk(all[488..].to_vec())));
}

/// Both tables of the index as stored.
fn index_bytes(db: &Db) -> Vec<Vec<(Vec<u8>, Vec<u8>)>> {
    let txn = db.begin_read().expect("read");
    [I::ID, C::ID].iter().map(|t| txn.raw_entries(*t).expect("entries")).collect()
}

#[test]
fn rewriting_whole_gives_the_bytes_of_appending_in_place() {
    // Rounds of appends to random addresses of a pool, by both write paths into two databases:
    // lists cross the 1-byte counter's limit and chunk boundaries, untouched addresses are
    // copied between touched ones, and new addresses arrive before, between and after old ones.
    let (_a, in_place) = fresh();
    let (_b, rewritten) = fresh();
    let mut state = 11u64;
    let mut next = |n: u64| {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) % n
    };
    let pool: Vec<Address> = (0..60u64).map(|i| Address::with_last_byte((i * 4 + 1) as u8)).collect();
    let mut stored: std::collections::BTreeMap<Address, Vec<u64>> = Default::default();
    let mut id = 1_000u64;
    for round in 0..40 {
        let mut appends: std::collections::BTreeMap<Address, Vec<u64>> = Default::default();
        for _ in 0..next(12) + 1 {
            let address = pool[next(pool.len() as u64) as usize];
            let count = [1, 3, 40, 250, 700][next(5) as usize];
            let ids = appends.entry(address).or_default();
            for _ in 0..count {
                id += next(3) + 1;
                ids.push(id);
            }
        }
        let txn = in_place.begin_write().expect("write");
        for (address, ids) in &appends {
            append_ids::<I, C>(&txn, address, ids).expect("append");
        }
        txn.commit().expect("commit");
        let before = rewritten.begin_read().expect("snapshot");
        let txn = rewritten.begin_write().expect("write");
        rewrite_with_appends::<I, C, _>(&txn, &before, appends.iter().map(|(a, ids)| (*a, ids.as_slice())))
            .expect("rewrite");
        txn.commit().expect("commit");
        drop(before);
        for (address, ids) in appends {
            stored.entry(address).or_default().extend(ids);
        }
        assert_eq!(index_bytes(&in_place), index_bytes(&rewritten), "round {round}");
        let txn = rewritten.begin_read().expect("read");
        for (address, ids) in &stored {
            assert_eq!(&verify_address::<I, C, _>(&txn, address).expect("invariants"), ids);
        }
    }
    assert!(stored.values().any(|ids| ids.len() > 3 * CHUNK_IDS), "no list crossed several chunks");
    assert!(stored.values().any(|ids| ids.len() < 256), "no list kept the 1-byte counter");
}

#[test]
fn ids_must_grow_on_both_write_paths() {
    let (_dir, db) = fresh();
    let a = address!("00000000000000000000000000000000000000d1");
    let txn = db.begin_write().expect("write");
    append_ids::<I, C>(&txn, &a, &[10, 20]).expect("append");
    let err = append_ids::<I, C>(&txn, &a, &[15]).expect_err("must refuse");
    assert!(err.to_string().contains("ids must grow"), "{err}");
    txn.commit().expect("commit");
    let stored = index_bytes(&db);
    let before = db.begin_read().expect("snapshot");
    let txn = db.begin_write().expect("write");
    let err = rewrite_with_appends::<I, C, _>(&txn, &before, [(a, &[15u64][..])]).expect_err("must refuse");
    assert!(err.to_string().contains("ids must grow"), "{err}");
    drop(txn);
    assert_eq!(index_bytes(&db), stored);
}

#[test]
fn match_tables_page_across_blocks() {
    let (_dir, db) = fresh();
    let mk = |b: u8| Address::with_last_byte(b);
    let blocks: Vec<(u64, Vec<Address>)> =
        vec![(100, vec![mk(2), mk(9)]), (105, vec![mk(1)]), (106, vec![mk(3), mk(4), mk(5)])];
    let txn = db.begin_write().expect("write");
    for (b, addrs) in &blocks {
        append_matches::<OtsAllContracts, OtsAllContractsCounter>(&txn, *b, addrs).expect("append");
    }
    let err =
        append_matches::<OtsAllContracts, OtsAllContractsCounter>(&txn, 105, &[mk(7)]).expect_err("order");
    assert!(err.to_string().contains("in order"), "{err}");
    txn.commit().expect("commit");

    let flat: Vec<(u64, Address)> =
        blocks.iter().flat_map(|(b, a)| a.iter().map(move |x| (*b, *x))).collect();
    let txn = db.begin_read().expect("read");
    assert_eq!(match_count::<OtsAllContractsCounter, _>(&txn).expect("count"), 6);
    for idx in 0..8u64 {
        for count in 0..8u64 {
            let got =
                match_page::<OtsAllContracts, OtsAllContractsCounter, _>(&txn, idx, count).expect("page");
            let want: Vec<_> = flat.iter().skip(idx as usize).take(count as usize).copied().collect();
            assert_eq!(got, want, "idx={idx} count={count}");
        }
    }
}

#[test]
fn check_names_the_first_broken_key() {
    use ots_indexer::{db::codec::CounterDup, index::check::check};
    let (dir, db) = fresh();
    let a = address!("00000000000000000000000000000000000000e1");
    let txn = db.begin_write().expect("write");
    append_ids::<I, C>(&txn, &a, &ids(300)).expect("append");
    txn.commit().expect("commit");
    check(&db.begin_read().expect("read")).expect("a good database passes");

    // A counter that claims one id too many.
    let txn = db.begin_write().expect("write");
    let last = CounterDup::Regular { cumulative: 300, chunk: LAST_CHUNK };
    assert!(txn.delete::<C>(&a, Some(&last)).expect("delete"));
    txn.put::<C>(&a, &CounterDup::Regular { cumulative: 301, chunk: LAST_CHUNK }).expect("put");
    txn.commit().expect("commit");
    let err = check(&db.begin_read().expect("read")).expect_err("must fail").to_string();
    assert!(
        err.contains("OtsERC20TransferIndex") && err.contains("00000000000000000000000000000000000000e1"),
        "{err}"
    );

    // The binary exits non-zero with the same message.
    drop(db);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ots-indexer"))
        .arg("check")
        .arg("--datadir")
        .arg(dir.path())
        .output()
        .expect("check");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("00000000000000000000000000000000000000e1"));
}
