//! The families of the index, each its tables' collect, write, unwind, check and read side by
//! side, and a type implementing [`super::family::Family`] that the roster lists:
//!
//! * [`matches`](mod@matches) (with [`attributes`]): contracts, one match table per standard, the attribute
//!   bits a match sets;
//! * [`address_index`]: per-address id lists in chunks — transfer indexes, blocks rewarded,
//!   withdrawals;
//! * [`holdings`]: per holder, the tokens it has held, with [`staged_holdings`], what a
//!   catch-up's later stages touched;
//! * [`balances`]: balances, holder counts and ranks, ERC721 owners, ERC1155 balances;
//! * [`contract_info`], [`labels`], [`probes`]: what classifiers said of a contract;
//! * [`appearances`]: the transactions each address appears in or sent, and contract creators
//!   (for the `ots_` search, sender-nonce and creator methods);
//! * [`lifetimes`]: when contracts' code was removed (with `appearances`' creators, their
//!   lifetimes);
//! * [`block_times`]: every block's timestamp (a block found by its time);
//! * [`totals`]: per address, wei received, sent, paid in fees and withdrawn, and top-level
//!   transactions received (for `ots2_getAddressSummary`), with [`staged_totals`], what a
//!   catch-up's later stages added.
//!
//! [`transfers`], `seen_in_tx` and `stamped` are what several families share: a transfer's
//! touches, a transaction's addresses once, rows stamped with the block that wrote them.

pub mod address_index;
pub mod appearances;
pub mod attributes;
pub mod balances;
pub mod block_internal_rows;
pub mod block_times;
pub mod contract_info;
pub mod holdings;
pub mod labels;
pub mod lifetimes;
pub mod matches;
pub mod probes;
mod seen_in_tx;
pub mod staged_holdings;
pub mod staged_totals;
mod stamped;
mod tiers;
pub mod totals;
pub mod transfers;
