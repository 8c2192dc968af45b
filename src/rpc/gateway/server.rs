//! Binding the server: one port for HTTP and WebSocket, CORS, limits, and the gateway that
//! forwards what we do not serve.

use std::{collections::HashMap, net::SocketAddr, sync::Arc, time::Duration};

use jsonrpsee::{
    server::{middleware::rpc::RpcServiceBuilder, BatchRequestConfig, Server, ServerConfig, ServerHandle},
    MethodCallback,
};
use tower_http::cors::{AllowOrigin, Any, CorsLayer};

use crate::rpc::{
    etherscan::{
        marks_file::{self, MarksFile},
        Etherscan, EtherscanLayer,
    },
    gateway::oversized::OversizedBodyLayer,
    gateway::proxy::ProxyPolicy,
    gateway::{Gateway, GatewayConfig},
    module, RpcContext, ServeError,
};

/// Which browser origins may call the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cors {
    /// Any origin (`*`): the API is read-only, and explorers run in browsers.
    AnyOrigin,
    /// Only these origins.
    Origins(Vec<String>),
    /// No CORS headers: browsers on other origins are refused.
    Off,
}

impl Cors {
    /// Parses `--http-cors`: `*`, a comma-separated list of origins, or `none`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text == "*" {
            return Ok(Self::AnyOrigin);
        }
        if text.is_empty() || text.eq_ignore_ascii_case("none") {
            return Ok(Self::Off);
        }
        let origins: Vec<String> =
            text.split(',').map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect();
        for o in &origins {
            if !(o.starts_with("http://") || o.starts_with("https://")) || o.ends_with('/') {
                return Err(format!(
                    "{o:?} is not an origin (scheme://host[:port], no path); or use * or none"
                ));
            }
        }
        Ok(Self::Origins(origins))
    }

    fn layer(&self) -> Result<CorsLayer, ServeError> {
        let base = CorsLayer::new()
            .allow_methods([http::Method::POST, http::Method::GET, http::Method::OPTIONS])
            .allow_headers([http::header::CONTENT_TYPE]);
        Ok(match self {
            Self::AnyOrigin => base.allow_origin(Any),
            Self::Off => base.allow_origin(AllowOrigin::list([])),
            Self::Origins(list) => {
                let values = list
                    .iter()
                    .map(|o| {
                        http::HeaderValue::from_str(o)
                            .map_err(|e| ServeError::Config(format!("origin {o:?}: {e}")))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                base.allow_origin(AllowOrigin::list(values))
            }
        })
    }
}

/// How the server behaves toward clients: every limit, CORS, and the proxy policy.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Largest request body, in bytes.
    pub max_request_bytes: u32,
    /// Largest response body, in bytes (a forwarded `trace_block` can be large).
    pub max_response_bytes: u32,
    /// Most calls in one JSON-RPC batch.
    pub max_batch_len: u32,
    /// Most open connections (HTTP and WebSocket together).
    pub max_connections: u32,
    /// Most subscriptions per WebSocket connection.
    pub max_subscriptions_per_connection: u32,
    /// Messages a WebSocket connection may have waiting to be read; a subscriber that lets more
    /// pile up is dropped.
    pub max_pending_messages: u32,
    /// Longest one call may take.
    pub request_timeout: Duration,
    /// Browser origins.
    pub cors: Cors,
    /// What is forwarded to the node.
    pub proxy: ProxyPolicy,
    /// Most rows one page of an Etherscan list (`offset`) may ask for.
    pub etherscan_max_offset: u64,
    /// The Etherscan paths' API keys; none admits every call.
    pub etherscan_keys: Vec<String>,
    /// Calls a second each key may make (0: no limit).
    pub etherscan_key_rate: u32,
    /// Where the Etherscan list walks' counts are kept across restarts; none keeps them in
    /// memory only.
    pub walk_marks: Option<Arc<MarksFile>>,
}

/// Defaults of [`ServerOptions`], for the flags' help.
pub mod server_defaults {
    /// Request body cap.
    pub const MAX_REQUEST_BYTES: u32 = 1 << 20;
    /// Response body cap.
    pub const MAX_RESPONSE_BYTES: u32 = 64 << 20;
    /// Batch length cap.
    pub const MAX_BATCH_LEN: u32 = 100;
    /// Connection cap.
    pub const MAX_CONNECTIONS: u32 = 256;
    /// Subscriptions per connection.
    pub const MAX_SUBSCRIPTIONS: u32 = 64;
    /// Unread messages per WebSocket connection.
    pub const MAX_PENDING_MESSAGES: u32 = 1024;
    /// Time limit of one call, in seconds.
    pub const REQUEST_TIMEOUT_SECS: u64 = 30;
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            max_request_bytes: server_defaults::MAX_REQUEST_BYTES,
            max_response_bytes: server_defaults::MAX_RESPONSE_BYTES,
            max_batch_len: server_defaults::MAX_BATCH_LEN,
            max_connections: server_defaults::MAX_CONNECTIONS,
            max_subscriptions_per_connection: server_defaults::MAX_SUBSCRIPTIONS,
            max_pending_messages: server_defaults::MAX_PENDING_MESSAGES,
            request_timeout: Duration::from_secs(server_defaults::REQUEST_TIMEOUT_SECS),
            cors: Cors::AnyOrigin,
            proxy: ProxyPolicy::default(),
            etherscan_max_offset: crate::rpc::etherscan::DEFAULT_MAX_OFFSET,
            etherscan_keys: Vec::new(),
            etherscan_key_rate: crate::rpc::etherscan::DEFAULT_KEY_RATE,
            walk_marks: None,
        }
    }
}

/// Starts serving HTTP and WebSocket on `addr`; returns the bound address (useful with port 0)
/// and a handle that stops the server.
pub async fn serve(
    addr: SocketAddr,
    ctx: RpcContext,
    options: &ServerOptions,
) -> Result<(SocketAddr, ServerHandle), ServeError> {
    let node = ctx.node.clone();
    let mut etherscan = Etherscan::new(ctx.clone(), options.etherscan_max_offset, options.proxy.clone())
        .with_keys(&options.etherscan_keys, options.etherscan_key_rate);
    if let Some(file) = &options.walk_marks {
        etherscan = etherscan.with_marks(file.marks());
        file.keep_saving(marks_file::SAVE_EVERY);
    }
    let etherscan = EtherscanLayer::new(etherscan);
    let methods = module(ctx)?;
    let ours: HashMap<String, bool> = methods
        .method_names()
        .map(|name| (name.to_owned(), !matches!(methods.method(name), Some(MethodCallback::Sync(_)))))
        .collect();
    let gateway = GatewayConfig {
        ours: Arc::new(ours),
        policy: Arc::new(options.proxy.clone()),
        node,
        request_timeout: options.request_timeout,
        max_response_bytes: options.max_response_bytes as usize,
    };
    let config = ServerConfig::builder()
        .max_request_body_size(options.max_request_bytes)
        .max_response_body_size(options.max_response_bytes)
        .max_connections(options.max_connections)
        .max_subscriptions_per_connection(options.max_subscriptions_per_connection)
        .set_message_buffer_capacity(options.max_pending_messages.max(1))
        .set_batch_request_config(BatchRequestConfig::Limit(options.max_batch_len))
        .build();
    let server = Server::builder()
        .set_config(config)
        .set_http_middleware(
            tower::ServiceBuilder::new()
                .layer(options.cors.layer()?)
                .layer(OversizedBodyLayer::new(options.max_request_bytes))
                .layer(etherscan),
        )
        .set_rpc_middleware(
            RpcServiceBuilder::new().layer_fn(move |inner| Gateway::new(inner, gateway.clone())),
        )
        .build(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })?;
    let bound = server.local_addr().map_err(|source| ServeError::Bind { addr, source })?;
    let handle = server.start(methods);
    tracing::info!(target: "ots::rpc", addr = %bound, "serving JSON-RPC over HTTP and WebSocket");
    Ok((bound, handle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cors_flag() {
        assert_eq!(Cors::parse("*"), Ok(Cors::AnyOrigin));
        assert_eq!(Cors::parse("none"), Ok(Cors::Off));
        assert_eq!(Cors::parse(""), Ok(Cors::Off));
        assert_eq!(
            Cors::parse("http://localhost:5173, https://explorer.example"),
            Ok(Cors::Origins(vec!["http://localhost:5173".into(), "https://explorer.example".into()]))
        );
        assert!(Cors::parse("localhost:5173").is_err());
        assert!(Cors::parse("https://explorer.example/").is_err());
    }
}
