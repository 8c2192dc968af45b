//! Sorted runs on disk, merged in one ordered pass: how the bulk write path gathers a stage's
//! rows in bounded memory (docs/architecture.md, "Two write paths").
//!
//! A [`Sorter`] takes rows in any order. In memory it only buffers them; spilling, it sorts its
//! buffer into a run file under a [`RunDir`] each time the buffer is full. [`Sorter::into_sorted`]
//! gives every row back in order: a sort of the buffer alone, or a heap merge of the runs and
//! the buffer. A family's merge reads that one ordered stream whichever way the rows went.

mod collapse;
mod disk;
mod record;
mod run;
mod sorter;

pub use collapse::Collapse;
pub use disk::{disk_space, DiskSpace};
pub use record::{Record, RecordError};
pub use run::{RunDir, RUN_DIR_NAME};
pub use sorter::{spill_over, Buffer, Groups, Sorted, Sorter, ROWS_AHEAD};

use std::path::PathBuf;

/// The bytes of an address at the front of an encoded row: the key of a row that starts with
/// one ([`Sorter::keyed`]).
pub const ADDRESS_KEY: usize = 20;

/// A run file could not be written or read back.
#[derive(Debug, thiserror::Error)]
pub enum EtlError {
    /// The file system failed (a full disk, a removed directory).
    #[error("run file {path}: {error}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What the OS said (part of the message, not a separate cause: shown once).
        error: std::io::Error,
    },
    /// A run file holds bytes no row encodes to (damaged while the stage ran).
    #[error("run file {path} holds a malformed row: {problem}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        problem: RecordError,
    },
}
