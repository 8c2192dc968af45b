//! A recording's entries after its header, as its binary formats store them: what the current
//! format reads and writes, and what format 3's reader gives back.

use alloy_primitives::{Address, Bytes};
use ots_classifiers::{BlockData, CallOutcome};
use serde::{Deserialize, Serialize};

/// One record after the header.
#[derive(Debug, Serialize, Deserialize)]
pub(super) enum Entry {
    /// A block with its receipts and frames.
    Block(Box<BlockData>),
    /// A classifier's `eth_call` and the node's answer.
    Call { to: Address, input: Bytes, block: u64, outcome: CallOutcome },
    /// An `eth_getCode` answer.
    Code { address: Address, block: u64, code: Bytes },
}
