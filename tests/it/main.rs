//! The integration tests, one binary: each module is one area's tests against real parts (an
//! Anvil, geth or Hardhat node from the test bed, MDBX on disk, our server over HTTP). One
//! binary links once; `cargo test --test it MODULE::` runs one area. A test that must own
//! something of the process's (a port across a node's restart) has a binary of its own beside
//! this one (`tests/node_restart.rs`).

#[path = "../common/mod.rs"]
mod common;

mod address_index;
mod anvil_bulk;
mod anvil_erc20;
mod anvil_erc721;
mod api_server;
mod batching;
mod bulk;
mod classifiers;
mod cli_errors;
mod cli_run;
mod compact;
mod crash;
mod db_state;
mod etherscan;
mod etherscan_busy;
mod etherscan_clients;
mod etherscan_geth;
mod etherscan_node;
mod full_disk;
mod geth;
mod golden_api;
mod hardhat;
mod index_model;
mod layering;
mod metadata_refresh;
mod node_faults;
mod op_stack;
mod ots_blocks;
mod ots_search;
mod pending;
mod reorg;
mod reorg_soak;
mod reorg_window;
mod replay;
mod residency;
mod rewards_withdrawals;
mod state_diff;
mod structlog;
mod subscriptions;
mod summary;
pub(crate) mod synthetic;
mod terminal;
mod traces;
mod upgrade;
mod websocket;
