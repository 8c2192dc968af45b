//! Shared test helpers: a real Anvil node, the standard workload, and a JSON-RPC client.

// Shared by every test binary, each using a part: `pub` here means "for the tests".
#![allow(dead_code, unreachable_pub)]

pub mod anvil;
pub mod contracts;
pub mod fault_proxy;
pub mod follower;
pub mod geth;
pub mod hardhat;
pub mod transfer_chain;
pub mod workload;
pub mod world;

use alloy::providers::{DynProvider, Provider, ProviderBuilder};
use jsonrpsee::server::ServerHandle;
use ots_indexer::{
    db::Db,
    rpc::{self, RpcContext},
    source::NodeClient,
};
use serde_json::Value;

/// Serves `db` (forwarding to `node`) on a free loopback port with the default limits and 1,000
/// results per page: a real client for it, and the server's handle.
pub async fn serve(db: &Db, node: NodeClient) -> (Client, ServerHandle) {
    let ctx = RpcContext::new(db.clone(), node);
    let (addr, server) =
        rpc::serve("127.0.0.1:0".parse().expect("addr"), ctx, &rpc::ServerOptions::default())
            .await
            .expect("serve");
    (Client::new(&format!("http://{addr}")), server)
}

/// A real JSON-RPC client over HTTP.
#[derive(Debug, Clone)]
pub struct Client {
    provider: DynProvider,
    /// Server URL.
    pub url: String,
}

impl Client {
    /// A client for `url`.
    pub fn new(url: &str) -> Self {
        let provider = ProviderBuilder::default().connect_http(url.parse().expect("valid URL")).erased();
        Self { provider, url: url.to_owned() }
    }

    /// Calls `method`; panics on any error.
    pub async fn call(&self, method: &'static str, params: Value) -> Value {
        self.try_call(method, params).await.unwrap_or_else(|e| panic!("{method} failed: {e:?}"))
    }

    /// Calls `method`; a JSON-RPC error comes back as `(code, message)`.
    pub async fn try_call(&self, method: &'static str, params: Value) -> Result<Value, (i64, String)> {
        match self.provider.raw_request::<_, Value>(method.into(), params).await {
            Ok(v) => Ok(v),
            Err(alloy::transports::RpcError::ErrorResp(p)) => Err((p.code, p.message.to_string())),
            Err(e) => Err((0, e.to_string())),
        }
    }
}
