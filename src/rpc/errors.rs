//! JSON-RPC error objects. Codes: -32602 for bad parameters, -32000 for everything else (as
//! Erigon), each with a message that says what failed.

use jsonrpsee::types::{error::INVALID_PARAMS_CODE, ErrorObjectOwned};

use crate::{db::DbError, source::SourceError};

/// Erigon's code for a failed call.
pub const SERVER_ERROR_CODE: i32 = -32000;

/// A parameter is out of range or malformed.
pub fn invalid_params(message: impl Into<String>) -> ErrorObjectOwned {
    ErrorObjectOwned::owned(INVALID_PARAMS_CODE, message.into(), None::<()>)
}

/// A failure with Erigon's generic code.
pub fn server_error(message: impl Into<String>) -> ErrorObjectOwned {
    ErrorObjectOwned::owned(SERVER_ERROR_CODE, message.into(), None::<()>)
}

/// The index could not be read.
pub fn db_error(err: &DbError) -> ErrorObjectOwned {
    tracing::error!(target: "ots::rpc", error = %err, "database read failed");
    server_error(format!("index read failed: {err}"))
}

/// The node failed while we materialised a result.
pub fn node_error(err: &SourceError) -> ErrorObjectOwned {
    tracing::warn!(target: "ots::rpc", error = %err, "node request failed while serving");
    server_error(format!("the node failed: {err}"))
}

/// Whether `err` says the node lacks a tracer (or the method that runs it) rather than that it
/// failed: "method not found", or an error answer naming the tracer ("Hardhat currently only
/// supports the default tracer", geth's "tracer not found").
pub fn lacks_tracer(err: &SourceError) -> bool {
    err.is_method_missing()
        || (err.is_error_answer() && err.to_string().to_ascii_lowercase().contains("tracer"))
}

/// JSON-RPC's code for a method that is not there.
pub const METHOD_NOT_FOUND_CODE: i32 = -32601;

/// An answer this server cannot give with this node, worded as a missing method (code -32601,
/// "the method … does not exist/is not available"): client libraries (ethers' "unsupported
/// operation") and so the Otterscan UI show their "not supported" notice for it instead of
/// asking again and again.
pub fn not_supported(method: &str, why: &str) -> ErrorObjectOwned {
    ErrorObjectOwned::owned(
        METHOD_NOT_FOUND_CODE,
        format!("the method {method} does not exist/is not available here: {why}"),
        None::<()>,
    )
}

/// The one wording of every method that needs a feature the node does not have: what is
/// missing, then the node's own words, as [`not_supported`].
pub fn node_lacks(method: &str, feature: &str, err: &SourceError) -> ErrorObjectOwned {
    not_supported(method, &format!("this node has no {feature}, which it needs (the node says: {err})"))
}
