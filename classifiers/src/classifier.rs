//! The extension point.

use alloy_primitives::Address;

use crate::{BlockData, BoxFuture, ChainError, ChainView, Fact};

/// What a classifier is given about one block.
#[derive(Debug, Clone, Copy)]
pub struct ClassifyInput<'a> {
    /// The block.
    pub block: &'a BlockData,
    /// Contracts deployed in it.
    pub created: &'a [Address],
}

/// Looks at one block and reports facts about its contracts.
///
/// Implementations must be deterministic given the chain: the same block and state give the
/// same facts, so that re-indexing gives the same database. A [`ChainError`] means "could not
/// decide now" and stops the batch; it is never to be read as "no match".
pub trait Classifier: Send + Sync + std::fmt::Debug {
    /// Stable name, stored in the database's state and used on the command line.
    fn name(&self) -> &'static str;

    /// Classifies one block.
    fn classify<'a>(
        &'a self,
        input: ClassifyInput<'a>,
        chain: &'a dyn ChainView,
    ) -> BoxFuture<'a, Result<Vec<Fact>, ChainError>>;
}
