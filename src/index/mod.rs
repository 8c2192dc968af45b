//! The index: its families (in [`families`]) and the machinery that runs them over a batch —
//! the two write paths ([`write_batch`], [`stage`], both driving each family's [`gather`]
//! part of a write), the reorg window ([`window`], [`recent`],
//! the undo journal), the roster every family is listed in once ([`roster`], [`family`]) and
//! the checker ([`check`]). docs/architecture.md draws the whole flow.
//!
//! [`recent`] keeps the rows of the blocks in the reorg window apart from the address-index and
//! appearance families' large tables (the totals and balances keep theirs in their own window
//! tables), so that an unwind writes none of those tables.

mod activity;
mod batch;
pub mod check;
mod error;
pub mod families;
pub mod family;
pub mod gather;
mod integrity;
pub mod journal;
mod kinds;
mod packing;
pub mod recent;
mod rewrite;
pub mod roster;
mod rows;
pub mod stage;
mod thread_cpu;
pub mod undo;
pub mod upgrade;
pub mod window;

pub use activity::{Activity, ActivityKind, IndexedBlock};
pub use batch::{write_batch, BatchOptions, BatchStats, ClassifiedBlock, WriteError, WrittenBatch};
pub use families::{
    address_index, appearances, attributes, balances, block_times, contract_info, holdings, labels,
    lifetimes, matches, probes, staged_totals, totals, transfers,
};
pub use packing::Packed;
pub use stage::{pack_caught_up, Stage, StageOptions, StageSummary};
pub use window::WindowStart;
