//! ots-indexer: an Otterscan V2 token-attribution indexer that runs beside any Ethereum node.
//!
//! Data flows one way: [`source`] fetches blocks from the node, `ots_classifiers` classify
//! their contracts, [`index`] writes the tables of the Otterscan V2 format into MDBX ([`db`]) in
//! one transaction per batch, and [`rpc`] serves them as `ots_`/`ots2_` JSON-RPC.

pub mod classify;
pub mod cli;
pub mod db;
pub mod decode;
pub mod events;
pub mod index;
pub mod metrics;
pub mod rpc;
pub mod source;
pub mod status;
pub mod sync;
pub mod txid;

pub use txid::TxId;
