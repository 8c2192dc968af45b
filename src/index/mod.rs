//! Turns classified blocks into table writes, and reads them back for the API.

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

pub use writer::{write_batch, BatchStats, ClassifiedBlock, WriteError};
