//! Answers an oversized HTTP request body with 413 in a way the client can read.
//!
//! jsonrpsee answers 413 as soon as it sees a `Content-Length` over the limit, without reading
//! the body; the connection then closes with the client's bytes still unread, and the kernel
//! resets it, so a client that writes its whole body before reading (most do) sees a broken pipe
//! instead of the answer. This layer reads and discards such a body first, up to a bound, then
//! answers the same 413 and asks the client to close.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use http::{header, HeaderValue};
use http_body_util::BodyExt;
use jsonrpsee::server::{http::response, HttpBody, HttpRequest, HttpResponse};
use tower::{Layer, Service};

/// Bytes of an oversized body read and thrown away before answering; past this the connection
/// is closed with the answer unread, as without this layer.
pub(super) const DRAIN_LIMIT: u64 = 64 << 20;
/// Time spent reading an oversized body before answering anyway.
pub(super) const DRAIN_TIME: Duration = Duration::from_secs(10);

/// The layer: `max_request_bytes` is the server's request body limit.
#[derive(Debug, Clone, Copy)]
pub(super) struct OversizedBodyLayer {
    max_request_bytes: u32,
}

impl OversizedBodyLayer {
    /// A layer for bodies over `max_request_bytes`.
    pub(super) const fn new(max_request_bytes: u32) -> Self {
        Self { max_request_bytes }
    }
}

impl<S> Layer<S> for OversizedBodyLayer {
    type Service = OversizedBody<S>;

    fn layer(&self, inner: S) -> Self::Service {
        OversizedBody { inner, max_request_bytes: self.max_request_bytes }
    }
}

/// The service of [`OversizedBodyLayer`].
#[derive(Debug, Clone)]
pub(super) struct OversizedBody<S> {
    inner: S,
    max_request_bytes: u32,
}

fn content_length(request: &HttpRequest) -> Option<u64> {
    request.headers().get(header::CONTENT_LENGTH)?.to_str().ok()?.parse().ok()
}

/// Reads `body` to its end, or to [`DRAIN_LIMIT`] bytes or [`DRAIN_TIME`], whichever comes first.
async fn drain(mut body: HttpBody) {
    let read_all = async {
        let mut read = 0u64;
        while let Some(Ok(frame)) = body.frame().await {
            read += frame.data_ref().map_or(0, |d| d.len() as u64);
            if read > DRAIN_LIMIT {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(DRAIN_TIME, read_all).await;
}

fn too_large(limit: u32) -> HttpResponse {
    let mut answer = response::too_large(limit);
    answer.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    answer
}

impl<S> Service<HttpRequest> for OversizedBody<S>
where
    S: Service<HttpRequest, Response = HttpResponse> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = HttpResponse;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<HttpResponse, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: HttpRequest) -> Self::Future {
        let limit = self.max_request_bytes;
        match content_length(&request) {
            Some(n) if n <= u64::from(limit) => Box::pin(self.inner.call(request)),
            Some(_) => Box::pin(async move {
                drain(request.into_body()).await;
                Ok(too_large(limit))
            }),
            // No length given (a chunked body): read it here, up to the limit, to know.
            None => {
                let (parts, body) = request.into_parts();
                let mut inner = self.inner.clone();
                Box::pin(async move {
                    let mut kept = Vec::new();
                    let mut body = body;
                    while let Some(frame) = body.frame().await {
                        let Ok(frame) = frame else { break };
                        if let Some(data) = frame.data_ref() {
                            kept.extend_from_slice(data);
                        }
                        if kept.len() > limit as usize {
                            drain(body).await;
                            return Ok(too_large(limit));
                        }
                    }
                    inner.call(HttpRequest::from_parts(parts, HttpBody::from(kept))).await
                })
            }
        }
    }
}
