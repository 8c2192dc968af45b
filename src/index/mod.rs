//! Turns classified blocks into table writes, and reads them back for the API.

pub mod address_index;
pub mod attributes;
pub mod matches;
pub mod transfers;
mod writer;

pub use writer::{write_batch, BatchStats, ClassifiedBlock, WriteError};
