//! The ERC4626 vault classifier (docs/classifiers.md, "The built-ins").

use alloy_primitives::Address;

use crate::{
    abi::{decode_address, decode_uint256},
    probe::call0,
    Candidates, ChainError, ChainView, ContractClassifier, Fact, Metadata, Standard,
};

/// Classifies ERC20 tokens as ERC4626 vaults when `asset()` returns an address and
/// `totalAssets()` a `uint256` — unless `junkjunkjunk()` succeeds with the same bytes as both.
#[derive(Debug, Clone, Copy, Default)]
pub struct Erc4626Classifier;

impl Erc4626Classifier {
    /// Name on the command line and in the database state.
    pub const NAME: &'static str = "erc4626";
}

impl ContractClassifier for Erc4626Classifier {
    const NAME: &'static str = Self::NAME;
    const CANDIDATES: Candidates = Candidates::MatchesOf(Standard::Erc20);
    const PRODUCES: &'static [Standard] = &[Standard::Erc4626];

    async fn judge(
        &self,
        chain: &dyn ChainView,
        address: Address,
        block: u64,
    ) -> Result<Vec<Fact>, ChainError> {
        let (asset, total, junk) = futures::try_join!(
            call0(chain, address, "asset()", block),
            call0(chain, address, "totalAssets()", block),
            call0(chain, address, "junkjunkjunk()", block),
        )?;
        let (Some(asset_raw), Some(total_raw)) = (asset, total) else { return Ok(vec![]) };
        let (Some(asset), Some(_)) = (decode_address(&asset_raw), decode_uint256(&total_raw)) else {
            return Ok(vec![]);
        };
        if junk.is_some_and(|j| j == asset_raw && j == total_raw) {
            return Ok(vec![]);
        }
        let metadata = Metadata { asset: Some(asset), ..Metadata::default() };
        Ok(vec![
            Fact::Matched { standard: Standard::Erc4626, address },
            Fact::Described { address, metadata },
        ])
    }
}
