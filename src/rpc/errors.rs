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
