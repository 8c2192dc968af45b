//! The common shape of a classifier: judge each contract it is shown on its own.

use std::future::Future;

use alloy_primitives::Address;
use futures::future::try_join_all;

use crate::{BoxFuture, Candidates, ChainError, ChainView, Classifier, ClassifyInput, Fact, Standard};

/// A classifier that judges every contract it is shown on its own, at the classified block.
/// Implement this instead of [`Classifier`]: running the contracts of a block at once comes
/// with it.
pub trait ContractClassifier: Send + Sync + std::fmt::Debug {
    /// See [`Classifier::name`].
    const NAME: &'static str;
    /// See [`Classifier::candidates`].
    const CANDIDATES: Candidates = Candidates::AllContracts;
    /// See [`Classifier::produces`].
    const PRODUCES: &'static [Standard];
    /// Whether the block's unclassified Transfer emitters are judged too (token classifiers).
    const JUDGES_TRANSFER_EMITTERS: bool = false;

    /// The facts about `address` as of the end of `block`; none when it does not match.
    fn judge<'a>(
        &'a self,
        chain: &'a dyn ChainView,
        address: Address,
        block: u64,
    ) -> impl Future<Output = Result<Vec<Fact>, ChainError>> + Send + 'a;
}

impl<T: ContractClassifier> Classifier for T {
    fn name(&self) -> &'static str {
        T::NAME
    }

    fn candidates(&self) -> Candidates {
        T::CANDIDATES
    }

    fn produces(&self) -> &'static [Standard] {
        T::PRODUCES
    }

    fn classify<'a>(
        &'a self,
        input: ClassifyInput<'a>,
        chain: &'a dyn ChainView,
    ) -> BoxFuture<'a, Result<Vec<Fact>, ChainError>> {
        Box::pin(async move {
            let block = input.block.number;
            let mut shown = input.contracts.to_vec();
            if T::JUDGES_TRANSFER_EMITTERS {
                shown.extend(input.transfer_emitters.iter().filter(|a| !input.contracts.contains(a)));
            }
            let verdicts = try_join_all(shown.into_iter().map(|a| self.judge(chain, a, block))).await?;
            Ok(verdicts.into_iter().flatten().collect())
        })
    }
}
