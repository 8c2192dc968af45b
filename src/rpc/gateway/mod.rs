//! The RPC middleware in front of every call: our own methods run under the per-request time
//! limit; any other method is forwarded to the node unless the proxy policy refuses it.

mod oversized;
pub mod proxy;
pub mod server;
pub mod subscriptions;

use std::{collections::HashMap, sync::Arc, time::Duration};

use futures::future::{join_all, BoxFuture, FutureExt};
use jsonrpsee::{
    core::middleware::{Batch, BatchEntry, Notification, RpcServiceT},
    server::{BatchResponseBuilder, MethodResponse},
    types::{error::METHOD_NOT_FOUND_CODE, ErrorObjectOwned, Id, Request},
    ResponsePayload,
};
use serde_json::value::RawValue;

use crate::rpc::{errors::server_error, gateway::proxy::ProxyPolicy};
use crate::source::{ForwardError, NodeClient};

/// What the gateway needs besides the service it wraps.
#[derive(Debug, Clone)]
pub(super) struct GatewayConfig {
    /// The methods the server itself serves, each with whether it runs under the time limit:
    /// async ones do; a synchronous one (an index read) runs to its end on the worker thread
    /// anyway, so a timer around it would only cost time.
    pub ours: Arc<HashMap<String, bool>>,
    /// What may be forwarded.
    pub policy: Arc<ProxyPolicy>,
    /// Where forwarded calls go.
    pub node: NodeClient,
    /// Longest a call may take.
    pub request_timeout: Duration,
    /// Largest response, in bytes.
    pub max_response_bytes: usize,
}

/// What the gateway wraps: jsonrpsee's dispatcher, whose three answers are all a
/// `MethodResponse`.
pub(super) trait Dispatcher:
    RpcServiceT<
        MethodResponse = MethodResponse,
        BatchResponse = MethodResponse,
        NotificationResponse = MethodResponse,
    > + Clone
    + Send
    + Sync
    + 'static
{
}

impl<S> Dispatcher for S where
    S: RpcServiceT<
            MethodResponse = MethodResponse,
            BatchResponse = MethodResponse,
            NotificationResponse = MethodResponse,
        > + Clone
        + Send
        + Sync
        + 'static
{
}

/// The middleware; `S` is jsonrpsee's own method dispatcher.
#[derive(Debug, Clone)]
pub(super) struct Gateway<S> {
    inner: S,
    config: GatewayConfig,
}

impl<S> Gateway<S> {
    /// Wraps `inner`.
    pub(super) const fn new(inner: S, config: GatewayConfig) -> Self {
        Self { inner, config }
    }
}

fn timed_out(id: Id<'_>, limit: Duration) -> MethodResponse {
    MethodResponse::error(
        id,
        server_error(format!(
            "the request took longer than {} s and was abandoned (--request-timeout)",
            limit.as_secs_f64()
        )),
    )
}

async fn forward(
    config: GatewayConfig,
    id: Id<'static>,
    method: String,
    params: Option<Box<RawValue>>,
) -> MethodResponse {
    let answer =
        tokio::time::timeout(config.request_timeout, config.node.forward(&method, params.as_deref())).await;
    match answer {
        Err(_) => timed_out(id, config.request_timeout),
        Ok(Ok(result)) => {
            MethodResponse::response(id, ResponsePayload::success(result), config.max_response_bytes)
        }
        Ok(Err(ForwardError::Answered { code, message, data })) => {
            let code = i32::try_from(code).unwrap_or(crate::rpc::errors::SERVER_ERROR_CODE);
            MethodResponse::error(id, ErrorObjectOwned::owned(code, message, data))
        }
        Ok(Err(ForwardError::Failed(why))) => {
            tracing::warn!(target: "ots::rpc", %method, error = %why, "forwarding to the node failed");
            MethodResponse::error(id, server_error(format!("the node failed to answer {method}: {why}")))
        }
    }
}

impl<S> Gateway<S>
where
    S: Dispatcher,
{
    fn route<'a>(&self, request: Request<'a>) -> BoxFuture<'a, MethodResponse> {
        let method = request.method_name();
        if let Some(&timed) = self.config.ours.get(method) {
            if !timed {
                return self.inner.call(request).boxed();
            }
            let id = request.id().into_owned();
            let limit = self.config.request_timeout;
            let call = self.inner.call(request);
            return async move {
                tokio::time::timeout(limit, call).await.unwrap_or_else(|_| timed_out(id, limit))
            }
            .boxed();
        }
        if let Some(why) = self.config.policy.refusal(method) {
            tracing::debug!(target: "ots::rpc", method, "refused by the proxy policy");
            let err = ErrorObjectOwned::owned(METHOD_NOT_FOUND_CODE, why, None::<()>);
            return futures::future::ready(MethodResponse::error(request.id(), err)).boxed();
        }
        let id = request.id().into_owned();
        let method = method.to_owned();
        let params = request.params.as_ref().map(|p| p.clone().into_owned());
        forward(self.config.clone(), id, method, params).boxed()
    }
}

impl<S> RpcServiceT for Gateway<S>
where
    S: Dispatcher,
{
    type MethodResponse = MethodResponse;
    type NotificationResponse = MethodResponse;
    type BatchResponse = MethodResponse;

    fn call<'a>(
        &self,
        request: Request<'a>,
    ) -> impl std::future::Future<Output = MethodResponse> + Send + 'a {
        self.route(request)
    }

    /// The entries of a batch run at once (a page of forwarded calls is as slow as its slowest,
    /// not their sum) and answer in order.
    fn batch<'a>(&self, batch: Batch<'a>) -> impl std::future::Future<Output = MethodResponse> + Send + 'a {
        let this = self.clone();
        async move {
            let mut any_notification = false;
            let mut pending: Vec<BoxFuture<'a, Option<MethodResponse>>> = Vec::new();
            for entry in batch {
                match entry {
                    Ok(BatchEntry::Call(request)) => pending.push(this.route(request).map(Some).boxed()),
                    Ok(BatchEntry::Notification(n)) => {
                        any_notification = true;
                        let done = this.inner.notification(n);
                        pending.push(done.map(|_| None).boxed());
                    }
                    Err(err) => {
                        let (err, id) = err.into_parts();
                        pending.push(futures::future::ready(Some(MethodResponse::error(id, err))).boxed());
                    }
                }
            }
            let mut answers = BatchResponseBuilder::new_with_limit(this.config.max_response_bytes);
            for response in join_all(pending).await.into_iter().flatten() {
                if let Err(too_big) = answers.append(response) {
                    return too_big;
                }
            }
            if answers.is_empty() && any_notification {
                MethodResponse::notification()
            } else {
                MethodResponse::from_batch(answers.finish())
            }
        }
    }

    fn notification<'a>(
        &self,
        n: Notification<'a>,
    ) -> impl std::future::Future<Output = MethodResponse> + Send + 'a {
        self.inner.notification(n)
    }
}
