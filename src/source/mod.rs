//! Where block data comes from.

mod rpc;
pub mod traces;

pub use rpc::{NodeClient, SourceError, TraceChoice};
