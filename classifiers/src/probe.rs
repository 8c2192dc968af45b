//! Helpers shared by the call-based classifiers.

use alloy_primitives::{Address, Bytes};

use crate::{abi::selector, CallOutcome, ChainError, ChainView};

/// Calls `signature` (no arguments) on `address` at `block`; `None` when it reverted.
pub(crate) async fn call0(
    chain: &dyn ChainView,
    address: Address,
    signature: &str,
    block: u64,
) -> Result<Option<Bytes>, ChainError> {
    Ok(returned(chain.call_at(address, Bytes::copy_from_slice(&selector(signature)), block).await?))
}

/// Calls a function taking one 32-byte word.
pub(crate) async fn call1(
    chain: &dyn ChainView,
    address: Address,
    signature: &str,
    argument: [u8; 32],
    block: u64,
) -> Result<Option<Bytes>, ChainError> {
    let mut input = selector(signature).to_vec();
    input.extend_from_slice(&argument);
    Ok(returned(chain.call_at(address, input.into(), block).await?))
}

/// `supportsInterface(id)` decoded as a bool; a revert or a malformed answer is `false`.
pub(crate) async fn supports_interface(
    chain: &dyn ChainView,
    address: Address,
    id: [u8; 4],
    block: u64,
) -> Result<bool, ChainError> {
    let mut word = [0u8; 32];
    word[..4].copy_from_slice(&id);
    let answer = call1(chain, address, "supportsInterface(bytes4)", word, block).await?;
    Ok(answer.and_then(|b| crate::abi::decode_bool(&b)) == Some(true))
}

fn returned(outcome: CallOutcome) -> Option<Bytes> {
    match outcome {
        CallOutcome::Returned(bytes) => Some(bytes),
        CallOutcome::Reverted => None,
    }
}
