//! Turns classified blocks into table writes, and reads them back for the API.

mod activity;
pub mod address_index;
pub mod attributes;
mod balance_book;
pub mod balances;
pub mod check;
pub mod contract_info;
pub mod matches;
pub mod refresh;
pub mod reprobe;
mod rewrite;
pub mod transfers;
pub mod unwind;
mod writer;

pub use activity::{Activity, ActivityKind, IndexedBlock};
pub use writer::{write_batch, BatchOptions, BatchStats, ClassifiedBlock, WriteError, WrittenBatch};
