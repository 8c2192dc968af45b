//! Read-only access to chain state at a block, for probes.

use std::{future::Future, pin::Pin};

use alloy_primitives::{Address, Bytes};
use serde::{Deserialize, Serialize};

/// A boxed future, so that classifiers and chain views can be trait objects.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// How an `eth_call` ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallOutcome {
    /// The call returned these bytes.
    Returned(Bytes),
    /// The EVM reverted or failed (out of gas, bad opcode…): a verdict about the contract.
    Reverted,
}

/// The node could not answer: not a verdict about the contract, so the block must not be
/// classified until it can.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{method} at block {block} failed: {message}")]
pub struct ChainError {
    /// The JSON-RPC method.
    pub method: &'static str,
    /// The block it was asked at.
    pub block: u64,
    /// What went wrong.
    pub message: String,
}

/// State of the chain as of the end of a block.
pub trait ChainView: Send + Sync {
    /// `eth_call` from the zero address with no gas price (so no base-fee check), on the state
    /// after `block`.
    fn call_at(
        &self,
        to: Address,
        input: Bytes,
        block: u64,
    ) -> BoxFuture<'_, Result<CallOutcome, ChainError>>;

    /// `eth_getCode` after `block`.
    fn code_at(&self, address: Address, block: u64) -> BoxFuture<'_, Result<Bytes, ChainError>>;
}
