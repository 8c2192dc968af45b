//! The `ots_` namespace: what the index serves of it.

mod block_state_diff;
pub mod blocks;
pub mod issuance;
mod prestate_diff;
pub mod search;
mod shapes;
pub mod state_diff;
pub mod tx;

use jsonrpsee::{core::RpcResult, proc_macros::rpc};

/// Otterscan API level we implement; the Otterscan UI requires at least 8.
pub const API_LEVEL: u64 = 8;

/// `ots_` methods.
#[rpc(server, namespace = "ots")]
pub trait OtsApi {
    /// The Otterscan API level (8).
    #[method(name = "getApiLevel")]
    fn get_api_level(&self) -> RpcResult<u64>;
}

/// Implementation of [`OtsApiServer`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Ots;

impl OtsApiServer for Ots {
    fn get_api_level(&self) -> RpcResult<u64> {
        Ok(API_LEVEL)
    }
}
