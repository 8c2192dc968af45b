//! The benchmarks' yardstick: a plain sorted MDBX insert, same machine, same run.

use std::time::Instant;

use ots_indexer::db::{
    codec::{BlockNumber, Count},
    tables::OtsWithdrawalIdx2Block,
    AccessMode, Db,
};

/// Seconds to insert `n` sorted 8-byte keys with 8-byte values into a new database, committed
/// every million.
pub(crate) fn plain_sorted_insert(n: u64) -> anyhow::Result<f64> {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), AccessMode::ReadWrite)?;
    let started = Instant::now();
    let mut i = 0;
    while i < n {
        let txn = db.begin_write()?;
        for k in i..(i + 1_000_000).min(n) {
            txn.put::<OtsWithdrawalIdx2Block>(&Count(k), &BlockNumber(k))?;
        }
        txn.commit()?;
        i += 1_000_000;
    }
    Ok(started.elapsed().as_secs_f64())
}
