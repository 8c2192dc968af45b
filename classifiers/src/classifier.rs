//! The extension point.

use alloy_primitives::Address;

use crate::{BlockData, BoxFuture, ChainError, ChainView, Fact, Standard};

/// Which contracts of a block a classifier is shown as [`ClassifyInput::contracts`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Candidates {
    /// Every contract created in the block.
    AllContracts,
    /// Only the contracts that an earlier classifier matched as this standard in the block
    /// (ERC721 and ERC1155 look at ERC165 matches, ERC4626 at ERC20 matches).
    MatchesOf(Standard),
}

/// What a classifier is given about one block.
#[derive(Debug, Clone, Copy)]
pub struct ClassifyInput<'a> {
    /// The block.
    pub block: &'a BlockData,
    /// The contracts it is to judge (see [`Classifier::candidates`]).
    pub contracts: &'a [Address],
    /// Contracts that emitted a Transfer-shaped log in this block while not (yet) known as
    /// ERC20 or ERC721 tokens: proxies and clones initialised after their deployment, tokens
    /// created where the node gave no call frames. Probed here, at this block.
    pub transfer_emitters: &'a [Address],
}

/// Looks at one block and reports facts about its contracts.
///
/// Implementations must be deterministic given the chain: the same block and state give the
/// same facts, so that re-indexing gives the same database. A [`ChainError`] means "could not
/// decide now" and stops the batch; it is never to be read as "no match".
pub trait Classifier: Send + Sync + std::fmt::Debug {
    /// Stable name, stored in the database's state and used on the command line.
    fn name(&self) -> &'static str;

    /// Which contracts it judges; a classifier that depends on another's matches says so here
    /// and must run after it.
    fn candidates(&self) -> Candidates {
        Candidates::AllContracts
    }

    /// The standards whose matches it reports.
    fn produces(&self) -> &'static [Standard] {
        &[]
    }

    /// Classifies one block.
    fn classify<'a>(
        &'a self,
        input: ClassifyInput<'a>,
        chain: &'a dyn ChainView,
    ) -> BoxFuture<'a, Result<Vec<Fact>, ChainError>>;
}

/// A classifier was enabled without the one whose matches it reads, or after it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("classifier `{classifier}` reads the matches of {needs:?}, so a classifier that produces them (`{provider}`) must be enabled before it")]
pub struct DependencyError {
    /// The classifier whose input is missing.
    pub classifier: &'static str,
    /// The standard it reads.
    pub needs: Standard,
    /// The built-in that would provide it.
    pub provider: &'static str,
}

/// Checks that every classifier's [`Candidates::MatchesOf`] is produced by one listed before it.
pub fn check_dependencies(classifiers: &[Box<dyn Classifier>]) -> Result<(), DependencyError> {
    for (i, classifier) in classifiers.iter().enumerate() {
        if let Candidates::MatchesOf(needs) = classifier.candidates() {
            if !classifiers[..i].iter().any(|c| c.produces().contains(&needs)) {
                return Err(DependencyError {
                    classifier: classifier.name(),
                    needs,
                    provider: crate::provider_of(needs),
                });
            }
        }
    }
    Ok(())
}
