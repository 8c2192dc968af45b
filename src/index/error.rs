//! Why a write (a batch or a stage) failed. Every family's write returns this error, so that
//! the write paths run the families as one list.

use crate::{
    db::{
        codec::MAX_LABEL_BYTES,
        state::{Checkpoint, StateError},
        DbError,
    },
    etl::EtlError,
    txid::TxIdOverflow,
};

/// Writing a batch failed; nothing of it was committed.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// Storage failed.
    #[error(transparent)]
    Db(#[from] DbError),
    /// State could not be read or written.
    #[error(transparent)]
    State(#[from] StateError),
    /// A block holds more transactions than a TxId can number.
    #[error(transparent)]
    TxId(#[from] TxIdOverflow),
    /// A classifier gave a label that cannot be stored.
    #[error("a classifier labelled something in block {block} with {label:?}: labels must be 1 to {MAX_LABEL_BYTES} bytes")]
    BadLabel {
        /// The label.
        label: String,
        /// The block.
        block: u64,
    },
    /// The batch does not continue the indexed chain.
    #[error("block {number} ({hash}) does not continue the index at {checkpoint:?}: its parent is {parent}")]
    NotContiguous {
        /// First block of the batch.
        number: u64,
        /// Its hash.
        hash: alloy_primitives::B256,
        /// Its parent hash.
        parent: alloy_primitives::B256,
        /// The indexed tip.
        checkpoint: Option<Checkpoint>,
    },
}

impl From<EtlError> for WriteError {
    fn from(e: EtlError) -> Self {
        Self::Db(e.into())
    }
}
