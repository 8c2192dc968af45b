//! The ERC20 classifier (docs/classifiers.md, "The built-ins"; with bytes32 metadata accepted).

use alloy_primitives::Address;

use crate::{
    abi::{decode_text, decode_uint8},
    probe::call0,
    ChainError, ChainView, ContractClassifier, Fact, Metadata, Standard,
};

/// Classifies a contract as ERC20 when, at the classified block, `decimals()` returns a `uint8`
/// and `name()` and `symbol()` return text (an ABI string, or a `bytes32` as MKR does) — unless
/// `junkjunkjunk()`, which no token has, returns the very same bytes as all three (a contract
/// whose fallback answers everything alike). Judges new contracts, and contracts that emitted
/// a Transfer-shaped log while unclassified (tokens initialised after deployment).
#[derive(Debug, Clone, Copy, Default)]
pub struct Erc20Classifier;

/// What the ERC20 probes read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Erc20Metadata {
    /// `name()`.
    pub name: String,
    /// `symbol()`.
    pub symbol: String,
    /// `decimals()`.
    pub decimals: u8,
}

impl Erc20Classifier {
    /// Name on the command line and in the database state.
    pub const NAME: &'static str = "erc20";

    /// Probes one contract at `block`. `Ok(None)`: not an ERC20.
    pub async fn probe(
        chain: &dyn ChainView,
        address: Address,
        block: u64,
    ) -> Result<Option<Erc20Metadata>, ChainError> {
        let call = |sig: &'static str| call0(chain, address, sig, block);
        let (decimals, name, symbol) =
            futures::try_join!(call("decimals()"), call("name()"), call("symbol()"))?;
        let (Some(decimals_raw), Some(name_raw), Some(symbol_raw)) = (decimals, name, symbol) else {
            return Ok(None);
        };
        let (Some(decimals), Some(name), Some(symbol)) =
            (decode_uint8(&decimals_raw), decode_text(&name_raw), decode_text(&symbol_raw))
        else {
            return Ok(None);
        };
        if let Some(junk) = call("junkjunkjunk()").await? {
            if junk == name_raw && junk == symbol_raw && junk == decimals_raw {
                return Ok(None);
            }
        }
        Ok(Some(Erc20Metadata { name, symbol, decimals }))
    }
}

impl ContractClassifier for Erc20Classifier {
    const NAME: &'static str = Self::NAME;
    const PRODUCES: &'static [Standard] = &[Standard::Erc20];
    const JUDGES_TRANSFER_EMITTERS: bool = true;

    async fn judge(
        &self,
        chain: &dyn ChainView,
        address: Address,
        block: u64,
    ) -> Result<Vec<Fact>, ChainError> {
        let Some(meta) = Self::probe(chain, address, block).await? else { return Ok(vec![]) };
        let metadata = Metadata {
            name: Some(meta.name),
            symbol: Some(meta.symbol),
            decimals: Some(meta.decimals),
            ..Metadata::default()
        };
        Ok(vec![Fact::Matched { standard: Standard::Erc20, address }, Fact::Described { address, metadata }])
    }
}
