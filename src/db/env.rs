//! Opening the MDBX environment.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use signet_libmdbx::{
    sys::PageSize, Database, Environment, EnvironmentFlags, Geometry, MdbxError, Mode, SyncMode,
};
use tracing::{debug, info};

use super::{
    error::{hint_for, DbError, DbResult},
    format::{FORMAT_VERSION, FORMAT_VERSION_KEY},
    residency::{release_mapped, MappedFile},
    tables::TableId,
    txn::{ReadTxn, Txn, WriteTxn},
};

/// Largest size the database may grow to. MDBX only reserves address space for it, so a big
/// limit costs nothing until the data is there.
pub const MAX_DB_SIZE: usize = 4 << 40;
/// The file grows in steps of this size: fewer remaps while catching up, at most this much
/// unused tail on disk.
pub const GROWTH_STEP: isize = 256 << 20;
/// 16 KiB pages: measured 30% faster random-address writes than 4 KiB (tree depth 3 instead of 4)
/// and a 256-id chunk (2 KiB) still fits in a leaf without an overflow page.
pub const PAGE_SIZE: usize = 16 << 10;
/// Dirty pages a write transaction keeps in memory (16,384 × 16 KiB = 256 MiB); past that MDBX
/// writes the oldest out early. A 1,000-block catch-up batch touches ~600 MiB of pages: the cap
/// measured −160 MiB anonymous memory for ~2% speed (docs/benchmarks-history.md).
pub(super) const DIRTY_PAGE_LIMIT: u64 = 16_384;
/// The MDBX data file inside a database directory.
pub const DATA_FILE: &str = "mdbx.dat";
/// Readers: the sync loop, the RPC server's workers and other processes reading the same DB.
pub(super) const MAX_READERS: u64 = 256;

pub(super) fn txn_err(op: &'static str) -> impl FnOnce(MdbxError) -> DbError {
    move |source| DbError::Txn { op, hint: hint_for(&source), source: source.into() }
}

/// Whether this process may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessMode {
    /// Creates missing tables; one writer at a time.
    ReadWrite,
    /// Never writes; the tables must exist.
    ReadOnly,
    /// Read-write, and no other process may open the database meanwhile (for `compact`, which
    /// replaces the file); the database must exist.
    Exclusive,
}

/// An open database: the MDBX environment and a handle to every table of the registry.
#[derive(Debug, Clone)]
pub struct Db {
    env: Environment,
    tables: Arc<[Database]>,
    /// The data file, to find its pages in this process's memory map; `None` where it cannot be
    /// identified.
    data_file: Option<MappedFile>,
    /// The database directory.
    dir: Arc<PathBuf>,
}

/// The format version the database's state names, read without the registry (a table this
/// build expects may be missing from an older format's file).
fn stored_format(tx: &signet_libmdbx::tx::Tx<signet_libmdbx::tx::Ro>) -> Option<u64> {
    let state = tx.open_db(Some(TableId::OtsIndexerState.name())).ok()?;
    let bytes: Vec<u8> = tx.get(state.dbi(), FORMAT_VERSION_KEY.as_bytes()).ok()??;
    Some(u64::from_be_bytes(bytes.try_into().ok()?))
}

/// The MDBX environment of the database in `path`, opened as `mode` says.
fn open_env(path: &Path, mode: AccessMode) -> Result<Environment, MdbxError> {
    Environment::builder()
        .set_txn_dp_limit(DIRTY_PAGE_LIMIT)
        .set_max_dbs(TableId::ALL.len() + 8)
        .set_max_readers(MAX_READERS)
        .set_geometry(Geometry {
            size: Some(0..MAX_DB_SIZE),
            growth_step: Some(GROWTH_STEP),
            shrink_threshold: None,
            page_size: Some(PageSize::Set(PAGE_SIZE)),
        })
        .set_flags(EnvironmentFlags {
            mode: match mode {
                AccessMode::ReadWrite | AccessMode::Exclusive => {
                    Mode::ReadWrite { sync_mode: SyncMode::Durable }
                }
                AccessMode::ReadOnly => Mode::ReadOnly,
            },
            exclusive: mode == AccessMode::Exclusive,
            ..Default::default()
        })
        .open(path)
}

impl Db {
    /// Opens (and in read-write mode creates) the database in directory `path`.
    pub fn open(path: &Path, mode: AccessMode) -> DbResult<Self> {
        // A read-only open never creates anything: say plainly that there is nothing to open.
        if mode != AccessMode::ReadWrite && !path.join(DATA_FILE).exists() {
            return Err(DbError::NoDatabase { path: path.to_path_buf() });
        }
        let open_err = |source: MdbxError| DbError::Open {
            path: path.to_path_buf(),
            hint: match source {
                MdbxError::Other(2) => " (no database there yet)",
                MdbxError::Busy | MdbxError::Other(11 | 16) if mode == AccessMode::Exclusive => {
                    " (another process has the database open: stop `run`, `sync` and `serve` first)"
                }
                _ => hint_for(&source),
            },
            source: source.into(),
        };
        if mode == AccessMode::ReadWrite {
            std::fs::create_dir_all(path).map_err(|e| DbError::Open {
                path: path.to_path_buf(),
                source: MdbxError::Other(e.raw_os_error().unwrap_or(0)).into(),
                hint: " (cannot create the directory)",
            })?;
        }
        let env = match open_env(path, mode) {
            // The last process to write stopped without syncing its last commits (a catch-up's
            // stages do not wait for the disk: `durability`), and a read-only open may not
            // sync them: one read-write open does, then this one goes on.
            Err(MdbxError::WannaRecovery) if mode == AccessMode::ReadOnly => {
                drop(open_env(path, AccessMode::ReadWrite).map_err(|source| DbError::Open {
                    path: path.to_path_buf(),
                    hint: " (the last writer stopped before its commits reached the disk, and this user cannot open the database read-write to sync them: run `ots-indexer sync` or `run` once as its owner)",
                    source: source.into(),
                })?);
                info!(target: "ots::db", path = %path.display(), "synced the commits the last writer left unsynced");
                open_env(path, mode)
            }
            opened => opened,
        }
        .map_err(open_err)?;

        let tables = match mode {
            AccessMode::ReadWrite | AccessMode::Exclusive => {
                let tx = env.begin_rw_unsync().map_err(txn_err("begin"))?;
                let mut dbs = Vec::with_capacity(TableId::ALL.len());
                for t in TableId::ALL {
                    let db = tx.create_db(Some(t.name()), t.layout().flags()).map_err(|source| {
                        DbError::Table {
                            op: "create table",
                            table: t.name(),
                            key: String::new(),
                            hint: hint_for(&source),
                            source: source.into(),
                        }
                    })?;
                    dbs.push(db);
                }
                tx.commit().map_err(txn_err("commit"))?;
                dbs
            }
            AccessMode::ReadOnly => {
                let tx = env.begin_ro_unsync().map_err(txn_err("begin"))?;
                let mut dbs = Vec::with_capacity(TableId::ALL.len());
                for t in TableId::ALL {
                    let db = tx.open_db(Some(t.name())).map_err(|source| match source {
                        MdbxError::NotFound => match stored_format(&tx) {
                            Some(found) if found != FORMAT_VERSION => {
                                DbError::OtherFormat { path: path.to_path_buf(), found }
                            }
                            _ => DbError::MissingTable { path: path.to_path_buf(), table: t.name() },
                        },
                        source => DbError::Table {
                            op: "open table",
                            table: t.name(),
                            key: String::new(),
                            hint: hint_for(&source),
                            source: source.into(),
                        },
                    })?;
                    dbs.push(db);
                }
                dbs
            }
        };
        debug!(target: "ots::db", path = %path.display(), ?mode, tables = tables.len(), "database open");
        // With WRITEMAP the map would hold dirty pages not yet in the file: never drop those.
        let data_file = if env.is_write_map() { None } else { MappedFile::of(&path.join(DATA_FILE)).ok() };
        Ok(Self { env, tables: tables.into(), data_file, dir: Arc::new(path.to_path_buf()) })
    }

    /// Begins a read-only snapshot.
    pub fn begin_read(&self) -> DbResult<ReadTxn> {
        let tx = self.env.begin_ro_unsync().map_err(txn_err("begin"))?;
        Ok(Txn::new(tx, self.tables.clone(), self.data_file))
    }

    /// Begins the write transaction (waits while another one is open).
    pub fn begin_write(&self) -> DbResult<WriteTxn> {
        let tx = self.env.begin_rw_unsync().map_err(txn_err("begin"))?;
        Ok(Txn::new(tx, self.tables.clone(), self.data_file))
    }

    /// Drops the database pages this process has read through MDBX's memory map from its
    /// resident set; they stay in the page cache, so reading them again costs no I/O. Without
    /// this, every page a batch reads stays counted in the process's RSS (`residency.rs`).
    /// Best effort: a failure is logged and changes nothing else.
    pub fn release_mapped_pages(&self) {
        release_mapped(self.data_file.as_ref());
    }

    /// The MDBX environment.
    pub(super) const fn env(&self) -> &Environment {
        &self.env
    }

    /// The database directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Bytes of the database file (it grows in steps of [`GROWTH_STEP`]; the memory map's upper
    /// bound, [`MAX_DB_SIZE`], is only reserved address space).
    pub fn file_size(&self) -> u64 {
        std::fs::metadata(self.dir.join(DATA_FILE)).map(|m| m.len()).unwrap_or(0)
    }

    /// Bytes of the file's pages that hold data: every page up to the last one used, less the
    /// free pages MDBX keeps for reuse.
    pub fn used_bytes(&self) -> u64 {
        let page = self.env.stat().map_or(PAGE_SIZE as u64, |s| u64::from(s.page_size()));
        let pages = self.env.info().map_or(0, |i| i.last_pgno() as u64 + 1);
        let free = self.env.freelist().map_or(0, |f| f as u64);
        pages.saturating_sub(free) * page
    }
}
