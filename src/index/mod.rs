//! The index: the tables of one batch written by family, and read back for the API.
//!
//! Each family owns its tables' collect, write, unwind, check and read side by side:
//!
//! * [`matches`] (with [`attributes`]): contracts, one match table per standard, the attribute
//!   bits a match sets;
//! * [`address_index`]: per-address id lists in chunks — transfer indexes, blocks rewarded,
//!   withdrawals;
//! * [`holdings`]: per holder, the tokens it has held;
//! * [`balances`]: balances, holder counts and ranks, ERC721 owners, ERC1155 balances;
//! * [`contract_info`], [`labels`], [`probes`]: what classifiers said of a contract;
//! * [`appearances`]: the transactions each address appears in or sent, and contract creators
//!   (for the `ots_` search, sender-nonce and creator methods);
//! * [`lifetimes`]: when contracts' code was removed (with `appearances`' creators, their
//!   lifetimes);
//! * [`totals`]: per address, wei received, sent, paid in fees and withdrawn, and top-level
//!   transactions received (for `ots2_getAddressSummary`).
//!
//! [`recent`] keeps the rows of the blocks in the reorg window apart from the address-index and
//! appearance families' large tables (the totals keep theirs in `OtsTotalsUndo`), so that an
//! unwind writes none of those tables.
//!
//! [`write_batch`] runs them over a batch; [`journal`] unwinds them, [`check`] checks them.
//! docs/architecture.md draws the whole flow.

mod activity;
pub mod address_index;
pub mod appearances;
pub mod attributes;
pub mod balances;
mod batch;
pub mod check;
pub mod contract_info;
pub mod family;
pub mod holdings;
mod integrity;
pub mod journal;
pub mod labels;
pub mod lifetimes;
pub mod matches;
pub mod probes;
pub mod recent;
mod rewrite;
pub mod roster;
mod seen_in_tx;
pub mod stage;
mod stamped;
pub mod totals;
pub mod transfers;
mod undo;
pub mod window;

pub use activity::{Activity, ActivityKind, IndexedBlock};
pub use batch::{write_batch, BatchOptions, BatchStats, ClassifiedBlock, WriteError, WrittenBatch};
pub use stage::{Stage, StageOptions, StageSummary};
pub use window::WindowStart;
