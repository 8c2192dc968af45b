//! Reading a token's name, symbol and decimals, each optional.

use alloy_primitives::Address;

use crate::{
    abi::{decode_text, decode_uint8},
    probe::call0,
    ChainError, ChainView, Metadata,
};

/// `name()`, `symbol()` (as text) and `decimals()` of `address` after `block`; a call that
/// reverts or answers malformed leaves its field empty.
pub async fn read_token_metadata(
    chain: &dyn ChainView,
    address: Address,
    block: u64,
) -> Result<Metadata, ChainError> {
    let (name, symbol, decimals) = futures::try_join!(
        call0(chain, address, "name()", block),
        call0(chain, address, "symbol()", block),
        call0(chain, address, "decimals()", block),
    )?;
    Ok(Metadata {
        name: name.and_then(|b| decode_text(&b)),
        symbol: symbol.and_then(|b| decode_text(&b)),
        decimals: decimals.and_then(|b| decode_uint8(&b)),
        ..Metadata::default()
    })
}
