//! The ERC20 classifier (spec §3.3).

use alloy_primitives::{Address, Bytes};
use futures::future::try_join_all;

use crate::{
    abi::{decode_string, decode_uint8, selector},
    BoxFuture, CallOutcome, ChainError, ChainView, Classifier, ClassifyInput, Fact, Standard,
};

/// Classifies a new contract as ERC20 when, at its deployment block, `decimals()` returns a
/// `uint8` and `name()` and `symbol()` return ABI strings — unless `junkjunkjunk()`, which no
/// token has, returns the very same bytes as all three (a contract whose fallback answers
/// everything alike).
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
        let call = |sig: &str| chain.call_at(address, Bytes::copy_from_slice(&selector(sig)), block);
        let (decimals, name, symbol) =
            futures::try_join!(call("decimals()"), call("name()"), call("symbol()"))?;
        let (
            CallOutcome::Returned(decimals_raw),
            CallOutcome::Returned(name_raw),
            CallOutcome::Returned(symbol_raw),
        ) = (decimals, name, symbol)
        else {
            return Ok(None);
        };
        let (Some(decimals), Some(name), Some(symbol)) =
            (decode_uint8(&decimals_raw), decode_string(&name_raw), decode_string(&symbol_raw))
        else {
            return Ok(None);
        };
        if let CallOutcome::Returned(junk) = call("junkjunkjunk()").await? {
            if junk == name_raw && junk == symbol_raw && junk == decimals_raw {
                return Ok(None);
            }
        }
        Ok(Some(Erc20Metadata { name, symbol, decimals }))
    }
}

impl Classifier for Erc20Classifier {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn classify<'a>(
        &'a self,
        input: ClassifyInput<'a>,
        chain: &'a dyn ChainView,
    ) -> BoxFuture<'a, Result<Vec<Fact>, ChainError>> {
        Box::pin(async move {
            let block = input.block.number;
            let verdicts = try_join_all(input.created.iter().map(|&address| async move {
                Ok::<_, ChainError>((address, Self::probe(chain, address, block).await?))
            }))
            .await?;
            Ok(verdicts
                .into_iter()
                .filter(|(_, meta)| meta.is_some())
                .map(|(address, _)| Fact::Matched { standard: Standard::Erc20, address })
                .collect())
        })
    }
}
