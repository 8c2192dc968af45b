//! The node over HTTP JSON-RPC, with alloy.

use std::{
    borrow::Cow,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use alloy::{
    eips::BlockId,
    network::Ethereum,
    providers::{DynProvider, Provider, ProviderBuilder},
    rpc::{
        client::ClientBuilder,
        types::{Header, TransactionRequest},
    },
    transports::{
        http::reqwest, layers::RetryBackoffLayer, RpcError, TransportError, TransportErrorKind,
        TransportResult,
    },
};
use alloy_primitives::{Address, Bytes, B256};
use ots_classifiers::{BlockData, BoxFuture, CallFrame, CallOutcome, ChainError, ChainView, FrameKind};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use serde_json::{json, value::RawValue, Value};
use tracing::{info, warn};

use super::{
    chain_block,
    retry::{refuses_its_size, RetryLoadNotSize},
    structlog,
    traces::{parse_geth, parse_parity, TraceMode},
};
use crate::{
    db::state::ChainIdentity,
    notices::{RefusedProbe, SharedNotices},
};

/// Headers asked for in one JSON-RPC batch.
const HEADERS_PER_BATCH: u64 = CALLS_PER_BATCH as u64;

/// Calls sent in one JSON-RPC batch at most: nodes refuse larger batches whole (Erigon's default
/// limit is 100 calls, geth's 1,000), and a page of a thousand rows asks for more than that.
const CALLS_PER_BATCH: usize = 100;

/// What a failed batch's error names as its method.
const ONE_BATCH: &str = "JSON-RPC batch";

/// Batches of one [`NodeClient::batch`] in flight at once.
const BATCHES_IN_FLIGHT: usize = 4;

/// Batches of headers in flight at once.
const HEADER_BATCHES_IN_FLIGHT: usize = 4;

/// Retries of a request that the node rate-limited (429) or found itself unavailable for (503).
const RATE_LIMIT_RETRIES: u32 = 10;
/// First pause before such a retry, in milliseconds; it doubles each time.
const RATE_LIMIT_BACKOFF_MS: u64 = 250;

/// Transactions of one block traced at once for struct logs.
const STRUCT_LOG_CONCURRENCY: usize = 4;

/// Which tracer to take call frames from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceChoice {
    /// Ask the node at start-up: `trace_block`, else `debug_traceBlockByNumber`, else none.
    Auto,
    /// `trace_block`.
    Parity,
    /// `debug_traceBlockByNumber` with `callTracer`.
    Geth,
    /// `debug_traceTransaction` with the default struct-log tracer, frames rebuilt.
    StructLog,
    /// No call frames.
    None,
}

fn is_method_missing(err: &TransportError) -> bool {
    match err {
        RpcError::ErrorResp(p) => {
            let m = p.message.to_ascii_lowercase();
            p.code == -32601
                || m.contains("not found")
                || m.contains("not supported")
                || m.contains("does not exist")
                || m.contains("not available")
                || m.contains("unsupported")
        }
        _ => false,
    }
}

/// The node failed to give usable data. Nothing is written from a failed fetch.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The URL is not usable.
    #[error("invalid node URL {url:?}: {reason}")]
    BadUrl {
        /// The URL given.
        url: String,
        /// Why.
        reason: String,
    },
    /// The request failed (connection, timeout, an error answer, malformed JSON).
    #[error("node request {method} failed: {source}")]
    Request {
        /// The JSON-RPC method.
        method: &'static str,
        /// The transport's error.
        source: TransportError,
    },
    /// The node answered null for something that must exist.
    #[error("the node has no {what} for block {block}")]
    Missing {
        /// What was asked.
        what: &'static str,
        /// The block.
        block: u64,
    },
    /// A recording could not be read or lacks what was asked.
    #[error("recording {path}: {reason}")]
    Fixture {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// A block's answer lacks a field the index needs, or holds one it cannot read, even taken
    /// as any chain's: waiting will not change it.
    #[error("block {block} cannot be read: {part}{} field `{field}`: {reason}; the node answered {snippet}", index.map(|i| format!(" {i}")).unwrap_or_default())]
    Unreadable {
        /// The block.
        block: u64,
        /// `header`, `transaction`, `receipt` or `withdrawal`.
        part: &'static str,
        /// Which transaction, receipt or withdrawal of the block.
        index: Option<usize>,
        /// The field.
        field: String,
        /// What is wrong with it.
        reason: String,
        /// The start of the raw object.
        snippet: String,
    },
    /// A block's hash is not the hash of its header read as Ethereum's: a chain whose headers
    /// differ (or a node that forges them). Asking again gives the same answer.
    #[error(
        "block {block}: {reason}; if this chain's headers differ from Ethereum's, run with --no-header-check"
    )]
    ForeignHeader {
        /// The block.
        block: u64,
        /// What does not match.
        reason: String,
    },
    /// The node's answer contradicts itself.
    #[error("the node answered inconsistent data for block {block}: {reason}")]
    Inconsistent {
        /// The block.
        block: u64,
        /// What is wrong.
        reason: String,
    },
}

impl SourceError {
    /// Whether the node answered that it lacks the method asked for.
    pub fn is_method_missing(&self) -> bool {
        matches!(self, Self::Request { source, .. } if is_method_missing(source))
    }

    /// Why an answer to the first requests (the tracer probes, `eth_chainId`) says the URL is
    /// not an Ethereum JSON-RPC endpoint at all, if it does: an HTTP server that takes no
    /// JSON-RPC there (404, 405, 501: a consensus client's REST port, a web page), a body that
    /// is not JSON-RPC, or a JSON-RPC server without `eth_chainId`. Asking it again will not
    /// change that; a node still starting (connection refused, 502, 503) answers otherwise.
    pub fn not_a_node(&self) -> Option<String> {
        let Self::Request { method, source } = self else { return None };
        match source {
            RpcError::Transport(TransportErrorKind::HttpError(http))
                if matches!(http.status, 404 | 405 | 501) =>
            {
                Some(format!("it answers HTTP {} to a JSON-RPC request", http.status))
            }
            RpcError::DeserError { .. } => Some("its answer is not JSON-RPC".to_owned()),
            e if *method == "eth_chainId" && is_method_missing(e) => {
                Some("it does not know eth_chainId".to_owned())
            }
            _ => None,
        }
    }

    /// Whether the node says it no longer keeps the block's history (EIP-4444: geth's
    /// `--history.chain postmerge`, code 4444 "pruned history unavailable"): asking again will
    /// not bring it back.
    pub fn is_pruned_history(&self) -> bool {
        matches!(self, Self::Request { source: RpcError::ErrorResp(p), .. }
            if p.code == 4444 || p.message.to_ascii_lowercase().contains("pruned history"))
    }

    /// Whether the node answered with an error object of its own that is not a request to
    /// slow down (a rate limit, "busy", "try again"): the same one every time says something
    /// about what was asked, not about the load.
    pub fn is_node_verdict(&self) -> bool {
        matches!(self, Self::Request { source: RpcError::ErrorResp(p), .. } if !asks_to_slow_down(p.code, &p.message))
    }

    /// Whether the node answered with a JSON-RPC error (it is there, and refused the call).
    pub fn is_error_answer(&self) -> bool {
        matches!(self, Self::Request { source: RpcError::ErrorResp(_), .. })
    }

    /// Why no connection to the node could be made, when that is what failed (nothing listens
    /// at the URL, the host is unknown, the WebSocket handshake failed): the innermost cause, for
    /// a message about the node rather than about whichever request happened to go first.
    pub fn unreachable_cause(&self) -> Option<String> {
        let Self::Request { method, source: RpcError::Transport(kind) } = self else { return None };
        let connect_failed = *method == "WebSocket connect"
            || matches!(kind, TransportErrorKind::Custom(e)
                if e.downcast_ref::<reqwest::Error>().is_some_and(reqwest::Error::is_connect));
        if !connect_failed {
            return None;
        }
        let mut cause: &dyn std::error::Error = kind;
        while let Some(inner) = cause.source() {
            cause = inner;
        }
        Some(cause.to_string())
    }
}

/// A forwarded request did not give a result.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    /// The node answered with a JSON-RPC error, passed on as it is.
    #[error("node error {code}: {message}")]
    Answered {
        /// The node's code.
        code: i64,
        /// The node's message.
        message: String,
        /// The node's data, if any.
        data: Option<Box<RawValue>>,
    },
    /// No answer: connection refused, timeout, or something that is not JSON-RPC.
    #[error("{0}")]
    Failed(String),
}

/// A connection to the node.
#[derive(Debug, Clone)]
pub struct NodeClient {
    provider: DynProvider<Ethereum>,
    trace_mode: TraceMode,
    pubsub: bool,
    check_header_hash: bool,
    /// Whether the node answers `eth_getBlockReceipts` (until it says it does not): shared by
    /// the clones that fetch blocks in parallel.
    block_receipts: Arc<AtomicBool>,
    /// Calls sent in one JSON-RPC batch at most: [`CALLS_PER_BATCH`] until the node refuses a
    /// batch whole, then halved (shared by the clones).
    batch_cap: Arc<AtomicUsize>,
    /// What this client met that the operator should know of.
    notices: SharedNotices,
}

fn request_err(method: &'static str) -> impl FnOnce(TransportError) -> SourceError {
    move |source| SourceError::Request { method, source }
}

/// How long an idle HTTP connection to the node is kept for reuse: under the 5 s keep-alive of
/// Node.js servers.
const IDLE_CONNECTION_TIMEOUT: Duration = Duration::from_secs(3);

impl NodeClient {
    /// Connects to an `http://` URL; every request times out after `timeout`.
    pub fn connect(url: &str, timeout: Duration) -> Result<Self, SourceError> {
        let bad = |reason: String| SourceError::BadUrl { url: url.to_owned(), reason };
        let parsed = url.parse::<reqwest::Url>().map_err(|e| bad(e.to_string()))?;
        match parsed.scheme() {
            "http" => {}
            "https" | "wss" => {
                return Err(bad(
                    "TLS is not built in (ots-indexer runs beside its node): use http:// or ws://, or a local TLS-terminating proxy".into(),
                ))
            }
            other => return Err(bad(format!("scheme {other} is not supported; use http:// or ws://"))),
        }
        // A connection idle past the server's keep-alive (Node.js servers such as Hardhat's close
        // theirs after 5 s) can be closed just as it is reused, and the request fails with a
        // reset: let idle connections go first.
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .pool_idle_timeout(IDLE_CONNECTION_TIMEOUT)
            .build()
            .map_err(|e| bad(e.to_string()))?;
        let client = ClientBuilder::default()
            .layer(RetryBackoffLayer::new_with_policy(
                RATE_LIMIT_RETRIES,
                RATE_LIMIT_BACKOFF_MS,
                u64::MAX,
                RetryLoadNotSize,
            ))
            .http_with_client(http, parsed);
        let provider = ProviderBuilder::default().connect_client(client).erased();
        Ok(Self {
            provider,
            trace_mode: TraceMode::None,
            pubsub: false,
            check_header_hash: true,
            block_receipts: Arc::new(AtomicBool::new(true)),
            batch_cap: Arc::new(AtomicUsize::new(CALLS_PER_BATCH)),
            notices: SharedNotices::default(),
        })
    }

    /// Connects to `url`: `http://` as [`NodeClient::connect`], or `ws://`, over which the head
    /// is followed by a `newHeads` subscription.
    pub async fn open(url: &str, timeout: Duration) -> Result<Self, SourceError> {
        if !url.starts_with("ws://") {
            return Self::connect(url, timeout);
        }
        let client = ClientBuilder::default()
            .layer(RetryBackoffLayer::new_with_policy(
                RATE_LIMIT_RETRIES,
                RATE_LIMIT_BACKOFF_MS,
                u64::MAX,
                RetryLoadNotSize,
            ))
            .ws(alloy::transports::ws::WsConnect::new(url))
            .await
            .map_err(|source| SourceError::Request { method: "WebSocket connect", source })?;
        let provider = ProviderBuilder::default().connect_client(client).erased();
        Ok(Self {
            provider,
            trace_mode: TraceMode::None,
            pubsub: true,
            check_header_hash: true,
            block_receipts: Arc::new(AtomicBool::new(true)),
            batch_cap: Arc::new(AtomicUsize::new(CALLS_PER_BATCH)),
            notices: SharedNotices::default(),
        })
    }

    /// New head block numbers as the node announces them (`eth_subscribe` `newHeads`), when
    /// connected over WebSocket.
    pub async fn new_heads(&self) -> Option<futures::stream::BoxStream<'static, u64>> {
        if !self.pubsub {
            return None;
        }
        match self.provider.subscribe_blocks().await {
            Ok(sub) => {
                Some(futures::StreamExt::boxed(futures::StreamExt::map(sub.into_stream(), |h| h.number)))
            }
            Err(e) => {
                tracing::warn!(target: "ots::source", error = %e, "newHeads subscription failed; polling instead");
                None
            }
        }
    }

    /// Items of an `eth_subscribe` with `params`, as the node sends them, when connected over
    /// WebSocket and the node accepts it.
    pub async fn subscribe_raw(&self, params: Value) -> Option<futures::stream::BoxStream<'static, Value>> {
        if !self.pubsub {
            return None;
        }
        match self.provider.subscribe::<_, Value>(params.clone()).await {
            Ok(sub) => Some(futures::StreamExt::boxed(sub.into_stream())),
            Err(e) => {
                tracing::debug!(target: "ots::source", %params, error = %e, "subscription refused");
                None
            }
        }
    }

    /// Stops checking that each block's hash is the hash of its header (for chains whose headers
    /// carry fields Ethereum's do not).
    pub const fn without_header_check(mut self) -> Self {
        self.check_header_hash = false;
        self
    }

    /// What this client met that the operator should know of (shared by its clones).
    pub const fn notices(&self) -> &SharedNotices {
        &self.notices
    }

    /// Where call frames come from.
    pub const fn trace_mode(&self) -> TraceMode {
        self.trace_mode
    }

    /// Chooses the tracer, asking the node when `choice` is `Auto`.
    pub async fn with_traces(mut self, choice: TraceChoice) -> Result<Self, SourceError> {
        self.trace_mode = match choice {
            TraceChoice::Parity => TraceMode::Parity,
            TraceChoice::Geth => TraceMode::Geth,
            TraceChoice::StructLog => TraceMode::StructLog,
            TraceChoice::None => TraceMode::None,
            TraceChoice::Auto => {
                let parity: Result<Value, _> = self.provider.raw_request("trace_block".into(), ["0x0"]).await;
                match parity {
                    Ok(_) => TraceMode::Parity,
                    Err(e) if is_method_missing(&e) => {
                        if self.has_call_tracer().await? {
                            TraceMode::Geth
                        } else if self.has_struct_logs().await? {
                            TraceMode::StructLog
                        } else {
                            TraceMode::None
                        }
                    }
                    Err(source) => return Err(SourceError::Request { method: "trace_block", source }),
                }
            }
        };
        if self.trace_mode == TraceMode::None && choice == TraceChoice::Auto {
            let lacks = "call traces (no trace_block, no debug_traceBlockByNumber, no debug_traceTransaction): contracts made by other contracts, their creators, internal transfers, the Trace tab and revert reasons will be missing; enable the debug namespace (geth: --http.api eth,net,web3,debug,txpool) or trace (Erigon, reth, Nethermind)";
            tracing::warn!(target: "ots::source", "the node offers no {lacks}");
            self.notices.update(|n| n.node_lacks.push(lacks.to_owned()));
        } else if self.trace_mode == TraceMode::None {
            info!(target: "ots::source", "call traces are off (--traces none): contracts created by other contracts are not seen");
        } else {
            info!(target: "ots::source", tracer = self.trace_mode.name(), "taking call frames from the node's tracer");
        }
        Ok(self)
    }

    /// Whether the node has `debug_traceBlockByNumber` with `callTracer`. Block 0 is asked
    /// first; a node that cannot trace it for another reason than a missing method or tracer
    /// (geth: "genesis is not traceable") is asked to trace a call at its head instead.
    async fn has_call_tracer(&self) -> Result<bool, SourceError> {
        let lacks = |code: i64, message: &str| {
            let m = message.to_ascii_lowercase();
            code == -32601 || m.contains("tracer") || m.contains("method") || m.contains("not supported")
        };
        let block: Result<Value, _> = self
            .provider
            .raw_request("debug_traceBlockByNumber".into(), json!(["0x0", {"tracer": "callTracer"}]))
            .await;
        match block {
            Ok(_) => return Ok(true),
            Err(RpcError::ErrorResp(p)) if lacks(p.code, &p.message) => return Ok(false),
            Err(RpcError::ErrorResp(_)) => {}
            Err(source) => return Err(SourceError::Request { method: "debug_traceBlockByNumber", source }),
        }
        let call: Result<Value, _> = self
            .provider
            .raw_request(
                "debug_traceCall".into(),
                json!([{"to": Address::ZERO, "data": "0x"}, "latest", {"tracer": "callTracer"}]),
            )
            .await;
        match call {
            Ok(answer) => Ok(answer.get("type").is_some()),
            Err(RpcError::ErrorResp(_)) => Ok(false),
            Err(source) => Err(SourceError::Request { method: "debug_traceCall", source }),
        }
    }

    /// Whether the node has `debug_traceTransaction` with its default tracer: asked for a
    /// transaction that does not exist, such a node answers that it is not found (or null),
    /// one without the method that the method is missing.
    async fn has_struct_logs(&self) -> Result<bool, SourceError> {
        let probe: Result<Value, _> =
            self.provider.raw_request("debug_traceTransaction".into(), json!([B256::ZERO, {}])).await;
        match probe {
            Ok(_) => Ok(true),
            Err(RpcError::ErrorResp(p)) => {
                let m = p.message.to_ascii_lowercase();
                Ok(!(p.code == -32601 || m.contains("method") || m.contains("tracer")))
            }
            Err(source) => Err(SourceError::Request { method: "debug_traceTransaction", source }),
        }
    }

    /// Sends any JSON-RPC request and returns the raw answer.
    pub async fn raw<P: Serialize, R: DeserializeOwned>(
        &self,
        method: &'static str,
        params: P,
    ) -> Result<R, SourceError> {
        let params = serde_json::to_value(params)
            .map_err(|e| SourceError::Request { method, source: TransportError::ser_err(e) })?;
        let answer: serde_json::Value =
            self.provider.raw_request(Cow::Borrowed(method), params).await.map_err(request_err(method))?;
        serde_json::from_value(answer)
            .map_err(|e| SourceError::Request { method, source: TransportError::deser_err(e, "") })
    }

    /// Sends `calls` as JSON-RPC batches of at most [`CALLS_PER_BATCH`], a few in flight at
    /// once; answers in order. An empty list sends nothing. A node that refuses a batch whole
    /// (a cap on its size below ours) gets batches half as large from then on; one that refuses
    /// a batch of one call (it takes no batches at all) gets plain requests.
    pub async fn batch(&self, calls: &[(&'static str, Value)]) -> Result<Vec<Value>, SourceError> {
        let mut answers = Vec::with_capacity(calls.len());
        let mut rest = calls;
        while !rest.is_empty() {
            let cap = self.batch_cap.load(Ordering::Relaxed);
            let per_batch = cap.max(1);
            let (now, later) = rest.split_at(rest.len().min(per_batch * BATCHES_IN_FLIGHT));
            let sent: Vec<_> = now
                .chunks(per_batch)
                .map(|chunk| async move {
                    let each =
                        if cap == 0 { self.plain_each(chunk).await } else { self.batch_each(chunk).await? };
                    each.into_iter()
                        .zip(chunk)
                        .map(|(answer, (method, _))| answer.map_err(request_err(method)))
                        .collect::<Result<Vec<_>, _>>()
                })
                .collect();
            match futures::future::try_join_all(sent).await {
                Ok(batches) => {
                    answers.extend(batches.into_iter().flatten());
                    rest = later;
                }
                Err(e) if cap > 0 && refused_whole(&e, now) => self.lower_batch_cap(cap, cap / 2, &e),
                Err(e) => return Err(e),
            }
        }
        Ok(answers)
    }

    /// Each call's answer or error: in one batch when the node takes batches of that many calls,
    /// else (or when it refuses this one whole) as plain requests.
    async fn answers_each(
        &self,
        calls: &[(&'static str, Value)],
    ) -> Result<Vec<TransportResult<Value>>, SourceError> {
        let cap = self.batch_cap.load(Ordering::Relaxed);
        if calls.len() <= cap {
            match self.batch_each(calls).await {
                Err(e) if refused_whole(&e, calls) => self.lower_batch_cap(cap, calls.len() - 1, &e),
                other => return other,
            }
        }
        Ok(self.plain_each(calls).await)
    }

    /// Sends `calls` as one JSON-RPC batch; each call's answer or error, in order. Fails whole
    /// when the batch got no answers of its own (refused whole, or not sent). An empty list
    /// sends nothing.
    async fn batch_each(
        &self,
        calls: &[(&'static str, Value)],
    ) -> Result<Vec<TransportResult<Value>>, SourceError> {
        if calls.is_empty() {
            return Ok(Vec::new());
        }
        let mut batch = alloy::rpc::client::BatchRequest::new(self.provider.client());
        let waiters = calls
            .iter()
            .map(|(method, params)| batch.add_call::<_, Value>(*method, params).map_err(request_err(method)))
            .collect::<Result<Vec<_>, _>>()?;
        batch.send().await.map_err(request_err(ONE_BATCH))?;
        Ok(futures::future::join_all(waiters).await)
    }

    /// Sends `calls` as plain requests, all in flight at once; each call's answer or error, in
    /// order.
    async fn plain_each(&self, calls: &[(&'static str, Value)]) -> Vec<TransportResult<Value>> {
        let sent = calls
            .iter()
            .map(|(method, params)| self.provider.raw_request::<_, Value>(Cow::Borrowed(*method), params));
        futures::future::join_all(sent).await
    }

    /// Sends batches of `to` calls at most from now on (none at all if `to` is 0), after the node
    /// refused one of `from` whole.
    fn lower_batch_cap(&self, from: usize, to: usize, refusal: &SourceError) {
        if self.batch_cap.fetch_min(to, Ordering::Relaxed) > to {
            if to == 0 {
                warn!(target: "ots::source", calls = from, error = %refusal, "the node refused a JSON-RPC batch of one call; sending plain requests");
            } else {
                warn!(target: "ots::source", calls = from, now = to, error = %refusal, "the node refused a JSON-RPC batch whole; sending smaller ones");
            }
        }
    }

    /// Sends a request that an API client made, unchanged, and returns the node's answer as it
    /// came: a result, or the node's own error object.
    pub async fn forward(
        &self,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<Box<RawValue>, ForwardError> {
        let empty =
            RawValue::from_string("[]".to_owned()).map_err(|e| ForwardError::Failed(e.to_string()))?;
        let params: &RawValue = params.unwrap_or(&empty);
        let answer: Result<Box<RawValue>, TransportError> =
            self.provider.raw_request(Cow::Owned(method.to_owned()), params).await;
        match answer {
            Ok(v) => Ok(v),
            Err(RpcError::ErrorResp(p)) => {
                Err(ForwardError::Answered { code: p.code, message: p.message.into_owned(), data: p.data })
            }
            Err(e) => Err(ForwardError::Failed(e.to_string())),
        }
    }

    /// Chain id and genesis hash.
    pub async fn chain_identity(&self) -> Result<ChainIdentity, SourceError> {
        let chain_id = self.provider.get_chain_id().await.map_err(request_err("eth_chainId"))?;
        let genesis_hash =
            self.block_hash(0).await?.ok_or(SourceError::Missing { what: "header", block: 0 })?;
        Ok(ChainIdentity { chain_id, genesis_hash })
    }

    /// The timestamps of blocks `from..=to`, from their headers: batches of
    /// [`HEADERS_PER_BATCH`], a few in flight at once.
    pub async fn block_times(&self, from: u64, to: u64) -> Result<Vec<u64>, SourceError> {
        use futures::{StreamExt, TryStreamExt};
        let starts = (from..=to).step_by(HEADERS_PER_BATCH as usize);
        let batches: Vec<Vec<u64>> = futures::stream::iter(starts)
            .map(|start| async move {
                let numbers: Vec<u64> = (start..=to.min(start + HEADERS_PER_BATCH - 1)).collect();
                let calls: Vec<_> = numbers
                    .iter()
                    .map(|n| ("eth_getBlockByNumber", serde_json::json!([format!("{n:#x}"), false])))
                    .collect();
                let headers = self.batch(&calls).await?;
                numbers
                    .iter()
                    .zip(&headers)
                    .map(|(&n, header)| {
                        if header.is_null() {
                            return Err(SourceError::Missing { what: "header", block: n });
                        }
                        Ok(chain_block::header(n, header)?.timestamp)
                    })
                    .collect::<Result<Vec<u64>, SourceError>>()
            })
            .buffered(HEADER_BATCHES_IN_FLIGHT)
            .try_collect()
            .await?;
        Ok(batches.concat())
    }

    /// The newest block number.
    pub async fn head(&self) -> Result<u64, SourceError> {
        self.provider.get_block_number().await.map_err(request_err("eth_blockNumber"))
    }

    /// The hash of block `number`, or `None` if the node has no such block.
    pub async fn block_hash(&self, number: u64) -> Result<Option<alloy_primitives::B256>, SourceError> {
        let block: Value = self.raw("eth_getBlockByNumber", (format!("{number:#x}"), false)).await?;
        if block.is_null() {
            return Ok(None);
        }
        Ok(Some(chain_block::header(number, &block)?.hash))
    }

    /// One block with its transactions, receipts and (if the node traces) call frames, fetched
    /// in one JSON-RPC batch and checked for consistency. A node without `eth_getBlockReceipts`
    /// (Hardhat's, some others) gives its receipts one transaction at a time instead, from the
    /// first time it says so on.
    pub async fn block(&self, number: u64) -> Result<BlockData, SourceError> {
        if !self.block_receipts.load(Ordering::Relaxed) {
            return self.fetch_block(number, false).await;
        }
        match self.fetch_block(number, true).await {
            // Some nodes fail the whole batch for one method they lack, others that entry only
            // (handled in `fetch_block`): either way the method name says which.
            Err(SourceError::Request { source, .. })
                if is_method_missing(&source) && source.to_string().contains("eth_getBlockReceipts") =>
            {
                if self.block_receipts.swap(false, Ordering::Relaxed) {
                    info!(target: "ots::source", "the node has no eth_getBlockReceipts: receipts are fetched one transaction at a time");
                }
                self.fetch_block(number, false).await
            }
            other => other,
        }
    }

    async fn fetch_block(&self, number: u64, block_receipts: bool) -> Result<BlockData, SourceError> {
        let n = format!("{number:#x}");
        let mut calls = vec![("eth_getBlockByNumber", json!([n, true]))];
        if block_receipts {
            calls.push(("eth_getBlockReceipts", json!([n])));
        }
        match self.trace_mode {
            TraceMode::Parity => calls.push(("trace_block", json!([n]))),
            // Genesis has no transactions, and geth refuses to trace it.
            TraceMode::Geth if number == 0 => {}
            TraceMode::Geth => calls.push(("debug_traceBlockByNumber", json!([n, {"tracer": "callTracer"}]))),
            TraceMode::StructLog | TraceMode::None => {}
        }
        let mut answers = self.answers_each(&calls).await?.into_iter();
        let (block, receipts) = match (answers.next(), block_receipts) {
            (Some(block), false) => (block, None),
            (Some(block), true) => (block, answers.next()),
            (None, _) => (Ok(Value::Null), None),
        };
        let traces = answers.next();

        let block = block.map_err(request_err("eth_getBlockByNumber"))?;
        if block.is_null() {
            return Err(SourceError::Missing { what: "block", block: number });
        }
        let receipts = match receipts {
            None => self.receipts_one_by_one(number, &block).await?,
            Some(receipts) => match receipts {
                Ok(Value::Array(v)) => v,
                Ok(Value::Null) => return Err(SourceError::Missing { what: "receipts", block: number }),
                Ok(other) => {
                    return Err(SourceError::Inconsistent {
                        block: number,
                        reason: format!("eth_getBlockReceipts answered {other} where a list belongs"),
                    })
                }
                Err(e) if is_method_missing(&e) => {
                    self.block_receipts.store(false, Ordering::Relaxed);
                    self.receipts_one_by_one(number, &block).await?
                }
                Err(source) => return Err(SourceError::Request { method: "eth_getBlockReceipts", source }),
            },
        };
        let got = chain_block::header(number, &block)?.number;
        if got != number {
            return Err(SourceError::Inconsistent {
                block: number,
                reason: format!("asked for block {number}, got block {got}"),
            });
        }
        if self.check_header_hash {
            check_header_hash(number, &block)?;
        }
        let mut data = chain_block::block_data(number, &block, &receipts)?;
        let tx_count = receipts.len();
        let frames = match traces {
            None if self.trace_mode == TraceMode::Geth => Some(Vec::new()),
            None => None,
            Some(answer) => {
                let method = self.trace_mode.name();
                let answer = answer.map_err(request_err(method))?;
                let parsed = match self.trace_mode {
                    TraceMode::Geth => parse_geth(tx_count, answer),
                    _ => parse_parity(tx_count, answer),
                };
                Some(parsed.map_err(|reason| SourceError::Inconsistent { block: number, reason })?)
            }
        };
        let frames = match self.trace_mode {
            TraceMode::StructLog => Some(self.struct_log_frames(&data).await?),
            _ => frames,
        };
        data.code_removed = self.code_removed(number, frames.as_deref()).await?;
        data.frames = frames;
        Ok(data)
    }

    /// The frames of every transaction of `block`, rebuilt from struct logs (a few transactions
    /// traced at once: each is one `debug_traceTransaction`).
    async fn struct_log_frames(&self, block: &BlockData) -> Result<Vec<CallFrame>, SourceError> {
        use futures::{StreamExt, TryStreamExt};
        let calls: Vec<(B256, structlog::TopCall)> = block
            .transactions
            .iter()
            .zip(&block.receipts)
            .map(|(tx, receipt)| {
                let top = structlog::TopCall {
                    from: tx.from,
                    to: tx.to.or(receipt.contract_address).unwrap_or_default(),
                    create: tx.to.is_none(),
                    value: tx.value,
                    input: Bytes::new(),
                };
                (tx.hash, top)
            })
            .collect();
        let number = block.number;
        let trees: Vec<Value> = futures::stream::iter(calls)
            .map(|(hash, top)| async move {
                let tree = structlog::tree_of(self, hash, &top, number, false).await?;
                Ok::<_, SourceError>(json!({"txHash": hash, "result": tree}))
            })
            .buffered(STRUCT_LOG_CONCURRENCY)
            .try_collect()
            .await?;
        parse_geth(block.transactions.len(), Value::Array(trees))
            .map_err(|reason| SourceError::Inconsistent { block: block.number, reason })
    }

    /// The contracts a successful SELFDESTRUCT of block `number` named whose code the node says
    /// is gone at the block's end: since EIP-6780 a selfdestruct removes code only of a contract
    /// created in the same transaction, and the node knows its fork schedule where we do not.
    /// Selfdestructs are rare (about 0.05 % of mainnet transactions): one batch per block that
    /// has any.
    async fn code_removed(
        &self,
        number: u64,
        frames: Option<&[CallFrame]>,
    ) -> Result<Vec<Address>, SourceError> {
        let mut candidates: Vec<Address> = frames
            .into_iter()
            .flatten()
            .filter(|f| f.kind == FrameKind::SelfDestruct && f.success)
            .map(|f| f.from)
            .collect();
        candidates.sort_unstable();
        candidates.dedup();
        let n = format!("{number:#x}");
        let calls: Vec<(&'static str, Value)> =
            candidates.iter().map(|a| ("eth_getCode", json!([a, n]))).collect();
        let codes = self.batch(&calls).await?;
        Ok(candidates
            .into_iter()
            .zip(codes)
            .filter(|(_, code)| code.as_str().is_some_and(|c| c.trim_start_matches("0x").is_empty()))
            .map(|(a, _)| a)
            .collect())
    }

    /// The receipts of each block of `blocks`, whose headers (`eth_getBlockByNumber` answers,
    /// with transaction hashes or bodies) are `headers`: one `eth_getBlockReceipts` batch, or
    /// one `eth_getTransactionReceipt` batch on a node without it.
    pub async fn receipts_of_blocks(
        &self,
        blocks: &[u64],
        headers: &[Value],
    ) -> Result<Vec<Vec<Value>>, SourceError> {
        if self.block_receipts.load(Ordering::Relaxed) {
            let calls: Vec<(&'static str, Value)> =
                blocks.iter().map(|n| ("eth_getBlockReceipts", json!([format!("{n:#x}")]))).collect();
            match self.batch(&calls).await {
                Ok(answers) => {
                    return blocks
                        .iter()
                        .zip(answers)
                        .map(|(&n, a)| match a {
                            Value::Array(receipts) => Ok(receipts),
                            _ => Err(SourceError::Missing { what: "receipts", block: n }),
                        })
                        .collect()
                }
                Err(e) if e.is_method_missing() => {
                    if self.block_receipts.swap(false, Ordering::Relaxed) {
                        info!(target: "ots::source", "the node has no eth_getBlockReceipts: receipts are fetched one transaction at a time");
                    }
                }
                Err(e) => return Err(e),
            }
        }
        let mut calls = Vec::new();
        let mut counts = Vec::with_capacity(blocks.len());
        for (&n, header) in blocks.iter().zip(headers) {
            let hashes = chain_block::transaction_hashes(n, header)?;
            counts.push(hashes.len());
            calls.extend(hashes.into_iter().map(|h| ("eth_getTransactionReceipt", json!([h]))));
        }
        let mut answers = self.batch(&calls).await?.into_iter();
        blocks
            .iter()
            .zip(counts)
            .map(|(&n, count)| {
                let receipts: Vec<Value> = answers.by_ref().take(count).collect();
                if receipts.len() != count || receipts.iter().any(Value::is_null) {
                    return Err(SourceError::Missing { what: "receipt", block: n });
                }
                Ok(receipts)
            })
            .collect()
    }

    /// Receipts by `eth_getTransactionReceipt`, for nodes without `eth_getBlockReceipts`.
    async fn receipts_one_by_one(&self, number: u64, block: &Value) -> Result<Vec<Value>, SourceError> {
        let calls: Vec<(&'static str, Value)> = chain_block::transaction_hashes(number, block)?
            .into_iter()
            .map(|h| ("eth_getTransactionReceipt", json!([h])))
            .collect();
        let receipts = self.batch(&calls).await?;
        if receipts.iter().any(Value::is_null) {
            return Err(SourceError::Missing { what: "receipt", block: number });
        }
        Ok(receipts)
    }
}

/// Checks that the block's hash is the hash of its header, read as Ethereum's.
fn check_header_hash(number: u64, block: &Value) -> Result<(), SourceError> {
    let header: Header = Header::deserialize(block).map_err(|e| SourceError::ForeignHeader {
        block: number,
        reason: format!("its header is not an Ethereum header ({e})"),
    })?;
    let computed = header.inner.hash_slow();
    if computed != header.hash {
        return Err(SourceError::ForeignHeader {
            block: number,
            reason: format!("its hash {} is not the hash of its header ({computed})", header.hash),
        });
    }
    Ok(())
}

/// Whether an error answer to `eth_call` is the EVM failing (a verdict on the contract) rather
/// than the node failing. Nodes differ: geth and Anvil use code 3 with "execution reverted";
/// other EVM halts come as -32000/-32015 with messages naming the halt.
fn is_evm_failure(code: i64, message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    code == 3
        || [
            "revert",
            "out of gas",
            "invalid opcode",
            "opcode",
            "stack underflow",
            "stack overflow",
            "invalid jump",
            "execution",
        ]
        .iter()
        .any(|needle| m.contains(needle))
            && !["header not found", "missing trie node", "state", "timeout"].iter().any(|n| m.contains(n))
}

/// Pause before asking a probe the node refused a second time.
const PROBE_RETRY_PAUSE: Duration = Duration::from_millis(250);

/// Whether an error message says the node no longer has the state a call needs (a pruned, not
/// archive, node): waiting will not bring it back.
pub fn needs_archive(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("missing trie node")
        || (m.contains("state")
            && ["not available", "unavailable", "pruned", "no state", "not found"]
                .iter()
                .any(|n| m.contains(n)))
}

/// Whether a batch of `calls` was refused as a whole (HTTP 413, or an error answer about the
/// batch) rather than answered: what a node says of a batch larger than it takes (geth "batch too
/// large", Nethermind "Batch size limit exceeded", jsonrpsee "The batch request was too large"),
/// of a batch whose answers outgrow its cap on a response's size (geth's
/// `--rpc.batch-response-max-size`, 25 MB by default, answers the calls past it "response too
/// large": a hundred blocks' receipts of a busy chain pass it), or of any batch when it takes
/// none. The client's retry layer fails a batch on its first error answer, so an error about one
/// call ("header not found", a reverted `eth_call`, a method the node lacks) fails it too: that
/// is the call's answer, not a cap, and must not shrink the batches.
fn refused_whole(e: &SourceError, calls: &[(&'static str, Value)]) -> bool {
    match e {
        SourceError::Request { method: ONE_BATCH, source: RpcError::ErrorResp(p) } => {
            let m = p.message.to_ascii_lowercase();
            (m.contains("batch") || m.contains("too large"))
                && !calls.iter().any(|(method, _)| p.message.contains(method))
        }
        SourceError::Request {
            method: ONE_BATCH,
            source: RpcError::Transport(TransportErrorKind::HttpError(http)),
        } => http.status == 413,
        _ => false,
    }
}

/// Whether an error answer says the node is busy or not there yet: worth waiting for.
fn is_transient_answer(code: i64, message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    asks_to_slow_down(code, message)
        || ["header not found", "unknown block", "block not found", "timeout", "timed out"]
            .iter()
            .any(|n| m.contains(n))
}

/// Whether a JSON-RPC error answer asks the caller to slow down or come back (a rate limit, a
/// busy node: -32005 is EIP-1474's "limit exceeded"), rather than saying something of the call
/// (a query refused for its size, whatever its code: `retry::refuses_its_size`).
fn asks_to_slow_down(code: i64, message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    !refuses_its_size(message)
        && (code == -32005
            || ["rate limit", "too many", "busy", "try again", "overloaded"].iter().any(|n| m.contains(n)))
}

/// What one `eth_call` answer says about a probe.
enum ProbeAnswer {
    Outcome(CallOutcome),
    /// An error answer that is none of the known kinds: asked again before it counts.
    Refused(String),
    Failed(ChainError),
}

fn probe_answer(answer: Result<Bytes, TransportError>, block: u64) -> ProbeAnswer {
    let failed = |message: String| ProbeAnswer::Failed(ChainError { method: "eth_call", block, message });
    match answer {
        Ok(bytes) => ProbeAnswer::Outcome(CallOutcome::Returned(bytes)),
        // Code 3 is a revert, whatever its reason string says.
        Err(RpcError::ErrorResp(p)) if p.code == 3 => ProbeAnswer::Outcome(CallOutcome::Reverted),
        Err(RpcError::ErrorResp(p)) if needs_archive(&p.message) => failed(p.to_string()),
        Err(RpcError::ErrorResp(p)) if is_evm_failure(p.code, &p.message) => {
            ProbeAnswer::Outcome(CallOutcome::Reverted)
        }
        Err(RpcError::ErrorResp(p)) if is_transient_answer(p.code, &p.message) => failed(p.to_string()),
        Err(RpcError::ErrorResp(p)) => ProbeAnswer::Refused(p.to_string()),
        Err(e) => failed(e.to_string()),
    }
}

impl NodeClient {
    async fn call_once(&self, request: &TransactionRequest, block: u64) -> ProbeAnswer {
        probe_answer(self.provider.call(request.clone()).block(BlockId::number(block)).await, block)
    }
}

impl ChainView for NodeClient {
    /// An error answer of no known kind is asked again; the same answer twice is the node's
    /// verdict on the contract (Hardhat's "Contract with code hash … does not exist" for one):
    /// the probe says no, and the operator is told (`status`, the metrics).
    fn call_at(
        &self,
        to: Address,
        input: Bytes,
        block: u64,
    ) -> BoxFuture<'_, Result<CallOutcome, ChainError>> {
        Box::pin(async move {
            let request = TransactionRequest::default().from(Address::ZERO).to(to).input(input.into());
            let message = match self.call_once(&request, block).await {
                ProbeAnswer::Outcome(outcome) => return Ok(outcome),
                ProbeAnswer::Failed(e) => return Err(e),
                ProbeAnswer::Refused(_) => {
                    tokio::time::sleep(PROBE_RETRY_PAUSE).await;
                    match self.call_once(&request, block).await {
                        ProbeAnswer::Outcome(outcome) => return Ok(outcome),
                        ProbeAnswer::Failed(e) => return Err(e),
                        ProbeAnswer::Refused(message) => message,
                    }
                }
            };
            tracing::warn!(target: "ots::source", contract = %to, block, error = %message, "the node refused a classifier's probe twice: taken as no");
            self.notices.refused_probe(RefusedProbe { address: to, block, message });
            Ok(CallOutcome::Reverted)
        })
    }

    fn code_at(&self, address: Address, block: u64) -> BoxFuture<'_, Result<Bytes, ChainError>> {
        Box::pin(async move {
            self.provider
                .get_code_at(address)
                .block_id(BlockId::number(block))
                .await
                .map_err(|e| ChainError { method: "eth_getCode", block, message: e.to_string() })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(method: &'static str, code: i64, message: &str) -> SourceError {
        let payload =
            serde_json::from_value(json!({"code": code, "message": message})).expect("an error object");
        SourceError::Request { method, source: RpcError::ErrorResp(payload) }
    }

    fn batch_answered(code: i64, message: &str) -> SourceError {
        answered(ONE_BATCH, code, message)
    }

    /// A query refused for its size says the same on every try: a verdict the sync loop's
    /// same-answer rule ends with its reason, not a rate limit it would wait out for ever.
    #[test]
    fn a_query_refused_for_its_size_is_a_verdict_and_a_rate_limit_is_not() {
        let too_big = answered("eth_getLogs", -32005, "query returned more than 10000 results");
        assert!(too_big.is_node_verdict());
        assert!(!answered("eth_getLogs", -32005, "limit exceeded").is_node_verdict());
        assert!(!answered("eth_getLogs", -32016, "rate limit reached, try again").is_node_verdict());
    }

    #[test]
    fn only_an_answer_about_the_batch_is_a_refusal_of_it() {
        let calls =
            [("eth_getBlockByNumber", json!(["0x1", false])), ("eth_getBlockReceipts", json!(["0x1"]))];
        for about_the_batch in [
            "batch too large",
            "Batch size limit exceeded",
            "The batch request was too large",
            "Batch requests are not supported",
            "response too large",
        ] {
            assert!(refused_whole(&batch_answered(-32600, about_the_batch), &calls), "{about_the_batch}");
        }
        for about_one_call in [
            "header not found",
            "execution reverted",
            "tracer not found",
            "the method eth_getBlockReceipts does not exist/is not available",
        ] {
            assert!(!refused_whole(&batch_answered(-32000, about_one_call), &calls), "{about_one_call}");
        }
        let one_call = answered("eth_getBlockByNumber", -32600, "batch too large");
        assert!(!refused_whole(&one_call, &calls), "a plain request's answer");
    }
}
