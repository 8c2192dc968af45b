//! Helpers shared by the call-based classifiers.

use alloy_primitives::{Address, Bytes};
use futures::future::try_join_all;

use crate::{abi::selector, CallOutcome, ChainError, ChainView, Fact};

/// Calls `signature` (no arguments) on `address` at `block`; `None` when it reverted.
pub async fn call0(
    chain: &dyn ChainView,
    address: Address,
    signature: &str,
    block: u64,
) -> Result<Option<Bytes>, ChainError> {
    Ok(returned(chain.call_at(address, Bytes::copy_from_slice(&selector(signature)), block).await?))
}

/// Calls a function taking one 32-byte word.
pub async fn call1(
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
pub async fn supports_interface(
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

/// Runs `judge` on every address at once and gathers the facts.
pub async fn judge_all<'a, F, Fut>(addresses: &'a [Address], judge: F) -> Result<Vec<Fact>, ChainError>
where
    F: Fn(Address) -> Fut,
    Fut: std::future::Future<Output = Result<Vec<Fact>, ChainError>> + 'a,
{
    Ok(try_join_all(addresses.iter().map(|&a| judge(a))).await?.into_iter().flatten().collect())
}

/// `contracts` then whichever `extra` are not among them, without repeats.
pub fn union(contracts: &[Address], extra: &[Address]) -> Vec<Address> {
    let mut out = contracts.to_vec();
    for a in extra {
        if !out.contains(a) {
            out.push(*a);
        }
    }
    out
}
