//! Where block data comes from.

mod rpc;

pub use rpc::{NodeClient, SourceError};
