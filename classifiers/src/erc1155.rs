//! The ERC1155 classifier (spec §3.3).

use crate::{
    erc721::names,
    probe::{judge_all, supports_interface},
    BoxFuture, Candidates, ChainError, ChainView, Classifier, ClassifyInput, Fact, Standard,
};

/// ERC1155's interface id.
pub const ERC1155_ID: [u8; 4] = [0xd9, 0xb6, 0x7a, 0x26];

/// Classifies ERC165 contracts that declare ERC1155; `name()`/`symbol()` are kept when the
/// contract has them (the standard does not require them).
#[derive(Debug, Clone, Copy, Default)]
pub struct Erc1155Classifier;

impl Erc1155Classifier {
    /// Name on the command line and in the database state.
    pub const NAME: &'static str = "erc1155";
}

impl Classifier for Erc1155Classifier {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn candidates(&self) -> Candidates {
        Candidates::MatchesOf(Standard::Erc165)
    }

    fn produces(&self) -> &'static [Standard] {
        &[Standard::Erc1155]
    }

    fn classify<'a>(
        &'a self,
        input: ClassifyInput<'a>,
        chain: &'a dyn ChainView,
    ) -> BoxFuture<'a, Result<Vec<Fact>, ChainError>> {
        Box::pin(async move {
            let block = input.block.number;
            judge_all(input.contracts, |address| async move {
                if !supports_interface(chain, address, ERC1155_ID, block).await? {
                    return Ok(vec![]);
                }
                let metadata = names(chain, address, block).await?;
                let mut facts = vec![Fact::Matched { standard: Standard::Erc1155, address }];
                if metadata.name.is_some() || metadata.symbol.is_some() {
                    facts.push(Fact::Described { address, metadata });
                }
                Ok(facts)
            })
            .await
        })
    }
}
