//! ots-indexer: an Otterscan V2 token-attribution indexer that runs beside any Ethereum node.
//!
//! Data flows one way: [`source`] fetches blocks from the node, `ots_classifiers` classify
//! their contracts ([`classify`] gives some a second look), [`decode`] reads their token logs,
//! [`index`] writes the tables of the Otterscan V2 format into MDBX ([`db`]) in one transaction
//! per batch, and [`rpc`] serves them as `ots_`/`ots2_` JSON-RPC. docs/architecture.md is the
//! map.

// Every dependency is used by the library itself (tests and examples have their own).
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

// The binary's global allocator (src/main.rs), a dependency of the package rather than the library.
use mimalloc as _;

pub mod classify;
pub mod cli;
pub mod db;
pub mod decode;
pub mod etl;
pub mod events;
pub mod index;
pub mod metrics;
pub mod notices;
pub mod pending;
pub mod rpc;
pub mod source;
pub mod status;
pub mod sync;
pub mod txid;

pub use txid::TxId;

// A dependency only for its `ws-base` feature: alloy's WebSocket client without a TLS stack.
use alloy_rpc_client as _;
