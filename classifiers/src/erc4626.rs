//! The ERC4626 vault classifier (spec §3.3).

use crate::{
    abi::{decode_address, decode_uint256},
    probe::{call0, judge_all},
    BoxFuture, Candidates, ChainError, ChainView, Classifier, ClassifyInput, Fact, Metadata, Standard,
};

/// Classifies ERC20 tokens as ERC4626 vaults when `asset()` returns an address and
/// `totalAssets()` a `uint256` — unless `junkjunkjunk()` succeeds with the same bytes as both.
#[derive(Debug, Clone, Copy, Default)]
pub struct Erc4626Classifier;

impl Erc4626Classifier {
    /// Name on the command line and in the database state.
    pub const NAME: &'static str = "erc4626";
}

impl Classifier for Erc4626Classifier {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn candidates(&self) -> Candidates {
        Candidates::MatchesOf(Standard::Erc20)
    }

    fn produces(&self) -> &'static [Standard] {
        &[Standard::Erc4626]
    }

    fn classify<'a>(
        &'a self,
        input: ClassifyInput<'a>,
        chain: &'a dyn ChainView,
    ) -> BoxFuture<'a, Result<Vec<Fact>, ChainError>> {
        Box::pin(async move {
            let block = input.block.number;
            judge_all(input.contracts, |address| async move {
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
                Ok(vec![
                    Fact::Matched { standard: Standard::Erc4626, address },
                    Fact::Described {
                        address,
                        metadata: Metadata { asset: Some(asset), ..Metadata::default() },
                    },
                ])
            })
            .await
        })
    }
}
