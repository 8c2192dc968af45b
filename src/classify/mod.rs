//! Classification work that asks the node on the index's behalf — and `capture`, which records
//! those answers for node-less replay: second probes of Transfer
//! emitters that were no token when deployed, metadata read again for tokens initialised after
//! their deployment, and re-reading token metadata on request.
//!
//! The classifiers themselves (pure logic over a block and a `ChainView`) live in the
//! `ots-classifiers` crate; this module sits between them, the node and the index.

pub mod capture;
pub mod known;
pub mod late_metadata;
pub mod refresh;
pub mod reprobe;
