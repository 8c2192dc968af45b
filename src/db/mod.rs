//! Storage: the MDBX environment, the table registry, codecs and the indexer's state.

pub mod codec;
pub mod compact;
mod dup_run;
mod durability;
mod env;
mod error;
mod format;
pub(crate) mod page_heap;
pub mod repack;
pub(crate) mod residency;
pub mod state;
pub mod tables;
mod txn;

pub use dup_run::DupRun;
pub use durability::DeferredSync;
pub use env::{AccessMode, Db, DATA_FILE, GROWTH_STEP, MAX_DB_SIZE, PAGE_SIZE};
pub use error::{DbError, DbResult, MdbxCause};
pub use page_heap::{keep_freed_heap, prefault_page_heap, prefault_size};
pub use txn::{CommitTimes, ReadTxn, TableCursor, TableStats, Txn, WriteTxn};
