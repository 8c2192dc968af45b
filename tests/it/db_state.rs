//! The database refuses to be used for another chain, format version or classifier set, and
//! when left inconsistent; with a message that says what differs and what to do.

use alloy::primitives::B256;
use ots_indexer::db::{
    codec::StateKey,
    state::{self, ChainIdentity, DbState, StateError, FORMAT_VERSION},
    tables::OtsIndexerState,
    AccessMode, Db, DbError,
};

const CHAIN: ChainIdentity = ChainIdentity { chain_id: 31337, genesis_hash: B256::repeat_byte(0x11) };

fn bound_db() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
    let txn = db.begin_write().expect("write");
    state::bind(&txn, CHAIN, &["erc20".to_owned()]).expect("bind");
    txn.commit().expect("commit");
    (dir, db)
}

#[test]
fn same_chain_binds_again() {
    let (_dir, db) = bound_db();
    let txn = db.begin_write().expect("write");
    let s = state::bind(&txn, CHAIN, &["erc20".to_owned()]).expect("same chain");
    assert_eq!(s.format_version, Some(FORMAT_VERSION));
    assert_eq!(s.chain, Some(CHAIN));
    assert_eq!(s.classifiers, vec!["erc20".to_owned()]);
}

#[test]
fn another_chain_is_refused() {
    let (_dir, db) = bound_db();
    let txn = db.begin_write().expect("write");
    let other = ChainIdentity { chain_id: 1, genesis_hash: B256::repeat_byte(0x22) };
    let err = state::bind(&txn, other, &["erc20".to_owned()]).expect_err("other chain");
    assert!(matches!(err, StateError::ChainMismatch { .. }));
    let msg = err.to_string();
    assert!(msg.contains("chain id 31337") && msg.contains("chain id 1 "), "{msg}");
    assert!(msg.contains("--datadir"), "{msg}");
    let same_id_other_genesis = ChainIdentity { chain_id: 31337, genesis_hash: B256::repeat_byte(0x33) };
    assert!(state::bind(&txn, same_id_other_genesis, &["erc20".to_owned()]).is_err());
}

#[test]
fn another_classifier_set_is_refused() {
    let (_dir, db) = bound_db();
    let txn = db.begin_write().expect("write");
    let err = state::bind(&txn, CHAIN, &[]).expect_err("other set");
    assert!(err.to_string().contains("classifiers [erc20]"), "{err}");
}

#[test]
fn another_format_version_is_refused() {
    // A newer build's database, and one of format 2, whose balance and owner undo rows had
    // another shape.
    for other in [FORMAT_VERSION + 1, 2] {
        let (dir, db) = bound_db();
        let txn = db.begin_write().expect("write");
        txn.put::<OtsIndexerState>(&StateKey("format_version".into()), &other.to_be_bytes().to_vec())
            .expect("put");
        txn.commit().expect("commit");
        drop(db);
        let db = Db::open(dir.path(), AccessMode::ReadOnly).expect("reopen");
        let s = state::read_state(&db.begin_read().expect("read")).expect("state");
        let err = state::check_usable(&s).expect_err("another format");
        assert!(err.to_string().contains(&format!("format version {other}")), "{err}");
        drop(db);
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("reopen");
        let txn = db.begin_write().expect("write");
        let err = state::bind(&txn, CHAIN, &["erc20".to_owned()]).expect_err("a writer refuses it");
        assert!(err.to_string().contains(&format!("format version {other}")), "{err}");
    }
}

#[test]
fn inconsistent_is_refused_and_open_is_not() {
    let (_dir, db) = bound_db();
    let txn = db.begin_write().expect("write");
    state::set_db_state(&txn, DbState::Open).expect("open");
    txn.commit().expect("commit");
    let s = state::read_state(&db.begin_read().expect("read")).expect("state");
    state::check_usable(&s).expect("a killed writer leaves a usable DB");

    let txn = db.begin_write().expect("write");
    state::set_db_state(&txn, DbState::Inconsistent).expect("mark");
    txn.commit().expect("commit");
    let s = state::read_state(&db.begin_read().expect("read")).expect("state");
    assert!(matches!(state::check_usable(&s), Err(StateError::Inconsistent)));
}

#[test]
fn read_only_open_of_a_missing_db_says_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let err = Db::open(&dir.path().join("nothing-here"), AccessMode::ReadOnly).expect_err("missing");
    assert!(matches!(err, DbError::NoDatabase { .. }), "{err}");
    assert!(err.to_string().contains("`ots-indexer run` or `ots-indexer sync` creates one"), "{err}");
}
