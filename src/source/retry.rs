//! Which failed node requests are asked again: what alloy's rate-limit policy retries (HTTP 429
//! and 503, EIP-1474's -32005 "limit exceeded", "rate limited, try again") except an answer that
//! refuses the request for its size. Infura answers a log query over its result limit with -32005
//! too ("query returned more than 10000 results"), and asking again gets the same answer after
//! every backoff; the caller is told at once and can ask a smaller question.

use std::time::Duration;

use alloy::transports::{
    layers::{RateLimitRetryPolicy, RetryPolicy},
    RpcError, TransportError,
};

/// The node client's retry policy (see the module's doc).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RetryLoadNotSize;

impl RetryPolicy for RetryLoadNotSize {
    fn should_retry(&self, error: &TransportError) -> bool {
        RateLimitRetryPolicy::default().should_retry(error)
            && !matches!(error, RpcError::ErrorResp(p) if refuses_its_size(&p.message))
    }

    fn backoff_hint(&self, error: &TransportError) -> Option<Duration> {
        RateLimitRetryPolicy::default().backoff_hint(error)
    }
}

/// Whether an error answer refuses a query for its size — too many results, too large an answer,
/// too wide a block range — as nodes and providers word it (Infura, Alchemy, reth, QuickNode,
/// Ankr): the same query gets the same answer, whatever its error code says.
pub(crate) fn refuses_its_size(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    [
        "returned more than",
        "exceeds max",
        "response size",
        "too many results",
        "block range",
        "range is too",
        "limited to a",
    ]
    .iter()
    .any(|words| m.contains(words))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn answer(code: i64, message: &str) -> TransportError {
        RpcError::ErrorResp(
            serde_json::from_value(json!({"code": code, "message": message})).expect("error payload"),
        )
    }

    #[test]
    fn a_query_refused_for_its_size_is_not_asked_again() {
        let policy = RetryLoadNotSize;
        for refused in [
            answer(-32005, "query returned more than 10000 results"),
            answer(
                -32602,
                "Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range",
            ),
            answer(-32602, "query exceeds max results 20000, retry with the range 1-2"),
            answer(-32005, "eth_getLogs is limited to a 10,000 range"),
        ] {
            assert!(!policy.should_retry(&refused), "{refused}");
        }
        for load in [
            answer(-32005, "limit exceeded"),
            answer(-32005, "rate limited, try again in 4ms"),
            answer(429, "Too Many Requests"),
        ] {
            assert!(policy.should_retry(&load), "{load}");
        }
        assert!(!policy.should_retry(&answer(-32000, "execution reverted")));
    }
}
