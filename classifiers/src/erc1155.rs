//! The ERC1155 classifier (docs/classifiers.md, "The built-ins").

use alloy_primitives::Address;

use crate::{
    erc721::names, probe::supports_interface, Candidates, ChainError, ChainView, ContractClassifier, Fact,
    Standard,
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

impl ContractClassifier for Erc1155Classifier {
    const NAME: &'static str = Self::NAME;
    const CANDIDATES: Candidates = Candidates::MatchesOf(Standard::Erc165);
    const PRODUCES: &'static [Standard] = &[Standard::Erc1155];

    async fn judge(
        &self,
        chain: &dyn ChainView,
        address: Address,
        block: u64,
    ) -> Result<Vec<Fact>, ChainError> {
        if !supports_interface(chain, address, ERC1155_ID, block).await? {
            return Ok(vec![]);
        }
        let metadata = names(chain, address, block).await?;
        let mut facts = vec![Fact::Matched { standard: Standard::Erc1155, address }];
        if metadata.name.is_some() || metadata.symbol.is_some() {
            facts.push(Fact::Described { address, metadata });
        }
        Ok(facts)
    }
}
