//! Classifiers of ots-indexer: they look at one block and tell what its contracts are.
//!
//! A [`Classifier`] sees a block's data ([`BlockData`]) and the contracts created in it, may ask
//! the node about state at that block through a read-only [`ChainView`] (`eth_call`,
//! `eth_getCode`), and returns [`Fact`]s. It knows nothing of storage: the indexer turns facts
//! into table rows. Built-ins live here; a user adds one by implementing the same trait.

mod abi;
mod block;
mod chain_view;
mod classifier;
mod erc20;
mod facts;

pub use abi::{decode_string, decode_uint8, selector};
pub use block::{BlockData, CallFrame, FrameKind, LogData, ReceiptData, TxData, Withdrawal};
pub use chain_view::{BoxFuture, CallOutcome, ChainError, ChainView};
pub use classifier::{Classifier, ClassifyInput};
pub use erc20::{Erc20Classifier, Erc20Metadata};
pub use facts::{Fact, Standard};

/// The classifiers this build ships, by name.
pub fn builtin(name: &str) -> Option<Box<dyn Classifier>> {
    match name {
        Erc20Classifier::NAME => Some(Box::new(Erc20Classifier)),
        _ => None,
    }
}

/// Names of the built-in classifiers, in the order they run.
pub const BUILTIN_NAMES: &[&str] = &[Erc20Classifier::NAME];
