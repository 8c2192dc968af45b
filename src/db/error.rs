//! Storage errors, each carrying the table and key it concerns.

use std::path::PathBuf;

use signet_libmdbx::{MdbxError, ReadError};

use super::{
    codec::CodecError,
    format::{format_advice, FORMAT_VERSION},
};

/// Result of a storage operation.
pub type DbResult<T> = Result<T, DbError>;

/// A storage operation failed.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// The environment could not be opened.
    #[error("cannot open the database at {path}: {source}{hint}")]
    Open {
        /// Database directory.
        path: PathBuf,
        /// MDBX's error.
        source: MdbxCause,
        /// What to do about it, if we know.
        hint: &'static str,
    },
    /// The directory holds no database, and this command does not create one.
    #[error("there is no database in {path}: `ots-indexer run` or `ots-indexer sync` creates one (read-only commands never do)")]
    NoDatabase {
        /// Database directory.
        path: PathBuf,
    },
    /// The directory is not an ots-indexer database (a table is missing).
    #[error("{path} is not an ots-indexer database: table {table} is missing (run `ots-indexer run` once to create it)")]
    MissingTable {
        /// Database directory.
        path: PathBuf,
        /// The missing table.
        table: &'static str,
    },
    /// The database was written in another format, which lacks a table this build reads.
    #[error("{path} holds an ots-indexer database of format version {found}; this build reads version {FORMAT_VERSION}: {}", format_advice(*found))]
    OtherFormat {
        /// Database directory.
        path: PathBuf,
        /// Its format version.
        found: u64,
    },
    /// A transaction could not begin or commit.
    #[error("MDBX transaction {op} failed: {source}{hint}")]
    Txn {
        /// `begin`, `commit` or `id`.
        op: &'static str,
        /// MDBX's error.
        source: MdbxCause,
        /// What to do about it, if we know.
        hint: &'static str,
    },
    /// An operation on one table failed.
    #[error("{op} on table {table} at key 0x{key} failed: {source}{hint}")]
    Table {
        /// What we were doing.
        op: &'static str,
        /// The table.
        table: &'static str,
        /// Hex of the key involved (empty when none).
        key: String,
        /// MDBX's error.
        source: MdbxCause,
        /// What to do about it, if we know.
        hint: &'static str,
    },
    /// Bytes on disk do not have the shape the table declares.
    #[error("table {table} holds a malformed entry at key 0x{key}: {source}")]
    Decode {
        /// The table.
        table: &'static str,
        /// Hex of the key.
        key: String,
        /// What was wrong.
        source: CodecError,
    },
    /// The MDBX binding could not hand over the bytes it read.
    #[error("{op} on table {table} at key 0x{key} failed in the MDBX binding: {message}")]
    Binding {
        /// What we were doing.
        op: &'static str,
        /// The table.
        table: &'static str,
        /// Hex of the key.
        key: String,
        /// The binding's message.
        message: String,
    },
    /// Entries that must agree with each other do not.
    #[error("table {table} is inconsistent at key 0x{key}: {reason}; run `ots-indexer check`, or re-index into a new --datadir")]
    Corrupt {
        /// The table.
        table: &'static str,
        /// Hex of the key.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// A bulk stage's run files failed; nothing of the stage was committed.
    #[error("{error} (nothing of the stage was committed; {hint})")]
    Runs {
        /// What failed (its message says all: not repeated as a cause).
        error: crate::etl::EtlError,
        /// What to do about it.
        hint: &'static str,
    },
}

impl From<crate::etl::EtlError> for DbError {
    fn from(error: crate::etl::EtlError) -> Self {
        let hint = match &error {
            crate::etl::EtlError::Io { error, .. } => match error.kind() {
                std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded => {
                    "free disk space under the datadir, or lower --stage-max-run-mib, and restart"
                }
                _ if error.raw_os_error() == Some(libc::EMFILE) => {
                    "raise the open-file limit (ulimit -n) or --stage-buffer-mib, and restart"
                }
                _ => "restart; if it happens again, free disk space under the datadir",
            },
            crate::etl::EtlError::Malformed { .. } => {
                "a run file was damaged while the stage ran; restart, which writes them again"
            }
        };
        Self::Runs { error, hint }
    }
}

/// MDBX's error in words: one it passes on from the operating system (`Other(errno)`, which the
/// binding shows as "unknown error code") by the system's name for it.
#[derive(Debug)]
pub struct MdbxCause(pub MdbxError);

impl From<MdbxError> for MdbxCause {
    fn from(error: MdbxError) -> Self {
        Self(error)
    }
}

impl std::fmt::Display for MdbxCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            MdbxError::Other(errno) => std::io::Error::from_raw_os_error(errno).fmt(f),
            ref other => other.fmt(f),
        }
    }
}

impl std::error::Error for MdbxCause {}

/// Advice for MDBX errors a user can act on.
pub(crate) const fn hint_for(err: &MdbxError) -> &'static str {
    match err {
        MdbxError::MapFull => {
            " (the database reached its size limit or the disk is full: free disk space and restart; nothing of the failed batch was written)"
        }
        MdbxError::Busy => " (another process holds the database for writing: stop it first)",
        MdbxError::Incompatible => " (the database was created with different table settings)",
        MdbxError::Other(libc::ENOSPC) => {
            " (the disk is full: free disk space under the datadir and restart; nothing of the failed write was committed)"
        }
        // What a commit on a full tmpfs returned (measured), and what a failing disk returns.
        MdbxError::Other(libc::EIO) => {
            " (an I/O error writing the database: the disk may be full or failing; free disk space under the datadir and restart; nothing of the failed write was committed)"
        }
        _ => "",
    }
}

pub(crate) fn table_err(op: &'static str, table: &'static str, key: &[u8], source: MdbxError) -> DbError {
    DbError::Table {
        op,
        table,
        key: alloy_primitives::hex::encode(key),
        hint: hint_for(&source),
        source: source.into(),
    }
}

pub(crate) fn read_err(op: &'static str, table: &'static str, key: &[u8], err: ReadError) -> DbError {
    match err {
        ReadError::Mdbx(source) => table_err(op, table, key, source),
        ReadError::Decoding(e) => {
            DbError::Binding { op, table, key: alloy_primitives::hex::encode(key), message: e.to_string() }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::etl::EtlError;

    #[test]
    fn a_full_or_failing_disk_says_what_to_do() {
        for errno in [libc::ENOSPC, libc::EIO] {
            let hint = hint_for(&MdbxError::Other(errno));
            assert!(hint.contains("free disk space under the datadir"), "errno {errno}: {hint:?}");
        }
        assert_eq!(hint_for(&MdbxError::Other(libc::EINVAL)), "");
        let failed = DbError::Txn { op: "commit", source: MdbxError::Other(libc::EIO).into(), hint: "" };
        assert_eq!(failed.to_string(), "MDBX transaction commit failed: Input/output error (os error 5)");
    }

    #[test]
    fn a_run_file_error_says_what_to_do_once() {
        let too_many = DbError::from(EtlError::Io {
            path: "etl-tmp/run-002647.bin".into(),
            error: std::io::Error::from_raw_os_error(libc::EMFILE),
        });
        let shown = format!("{:#}", anyhow::Error::new(too_many));
        assert!(shown.contains("ulimit -n"), "{shown}");
        assert!(!shown.contains("free disk space"), "{shown}");
        assert_eq!(shown.matches("run-002647.bin").count(), 1, "{shown}");
        let full = DbError::from(EtlError::Io {
            path: "etl-tmp/run-000002.bin".into(),
            error: std::io::Error::from(std::io::ErrorKind::StorageFull),
        });
        assert!(full.to_string().contains("free disk space under the datadir"), "{full}");
    }
}
