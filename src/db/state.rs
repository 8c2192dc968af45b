//! The indexer's own state (docs/format.md, "OtsIndexerState"), kept in `OtsIndexerState`.
//!
//! | key              | value                                         |
//! |------------------|-----------------------------------------------|
//! | `format_version` | u64 BE: [`FORMAT_VERSION`] of the writer      |
//! | `chain_id`       | u64 BE                                        |
//! | `genesis_hash`   | 32 bytes                                      |
//! | `classifiers`    | UTF-8, names joined by `,`                    |
//! | `db_state`       | UTF-8: `open`, `closed` or `inconsistent`     |
//! | `last_block`     | block number (u64 BE) ‖ block hash (32 bytes) |
//! | `sync_rate`      | f64 BE bits: blocks/s of the last batch       |
//! | `call_frames`    | 1 byte: bit 0 some block came with call frames, bit 1 some without |
//! | `received_marks_from` | TxId (u64 BE): the appearance lists mark received transactions from it on (absent: from 0) |
//! | `transfer_rows_from` | TxId (u64 BE): `OtsTransferRowsIndex` holds every transaction's extra rows from it on (absent: from 0) |
//! | `internal_rows_from` | TxId (u64 BE): `OtsInternalRowsIndex` holds every transaction's extra rows from it on (absent: from 0) |
//! | `token_transfers_from` | TxId (u64 BE): `OtsTokenTransfersIndex` holds every transaction that moves a token from it on (absent: from 0) |
//! | `party_token_from` | TxId (u64 BE): `OtsPartyTokenIndex` holds every transaction in which a party moved a token from it on (absent: from 0; `u64::MAX`: the index is not kept) |
//! | `internal_txs_from` | TxId (u64 BE): `OtsInternalTxIndex` holds every internal transaction from it on (absent: from 0; `u64::MAX`: none up to the tip) |
//! | `packed:<table>` | bytes (u64 BE) ‖ entries (u64 BE) of the table when it was last left with full pages |
//! | `rankings_deferred` | empty: a catch-up's stages left some tokens with holders unranked in `OtsTokenHolderRanks` (absent: every ranking is whole) |

use std::fmt;

use alloy_primitives::B256;

use super::{
    codec::StateKey,
    error::{DbError, DbResult},
    tables::{OtsIndexerState, TableId},
    txn::{TableStats, Txn, WriteTxn},
};
use signet_libmdbx::tx::TransactionKind;

use super::format::FORMAT_VERSION_KEY;
pub use super::format::{FORMAT_VERSION, UPGRADABLE_FORMATS};

const CHAIN_ID_KEY: &str = "chain_id";
const GENESIS_HASH_KEY: &str = "genesis_hash";
const CLASSIFIERS_KEY: &str = "classifiers";
const DB_STATE_KEY: &str = "db_state";
const LAST_BLOCK_KEY: &str = "last_block";
const SYNC_RATE_KEY: &str = "sync_rate";
const CALL_FRAMES_KEY: &str = "call_frames";
const STOPPED_KEY: &str = "stopped";
const REFUSED_PROBES_KEY: &str = "refused_probes";
const RECEIVED_MARKS_FROM_KEY: &str = "received_marks_from";
const INTERNAL_TXS_FROM_KEY: &str = "internal_txs_from";
const TRANSFER_ROWS_FROM_KEY: &str = "transfer_rows_from";
const TOKEN_TRANSFERS_FROM_KEY: &str = "token_transfers_from";
const INTERNAL_ROWS_FROM_KEY: &str = "internal_rows_from";
const PARTY_TOKEN_FROM_KEY: &str = "party_token_from";
/// Followed by a table's name: its bytes and entries when it was last left packed.
const PACKED_KEY_PREFIX: &str = "packed:";
const RANKINGS_DEFERRED_KEY: &str = "rankings_deferred";

/// Which chain a database indexes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainIdentity {
    /// `eth_chainId`.
    pub chain_id: u64,
    /// Hash of block 0.
    pub genesis_hash: B256,
}

impl fmt::Display for ChainIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "chain id {} with genesis {}", self.chain_id, self.genesis_hash)
    }
}

/// Whether the last writer left the database in a usable state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DbState {
    /// A writer has it open, or was killed. Every batch commits atomically, so the tables are
    /// still consistent at `last_block`.
    Open,
    /// The last writer stopped cleanly.
    Closed,
    /// A multi-transaction operation stopped half-way; the tables cannot be trusted.
    Inconsistent,
}

impl DbState {
    const fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Closed => "closed",
            Self::Inconsistent => "inconsistent",
        }
    }

    fn parse(s: &[u8]) -> Option<Self> {
        match s {
            b"open" => Some(Self::Open),
            b"closed" => Some(Self::Closed),
            b"inconsistent" => Some(Self::Inconsistent),
            _ => None,
        }
    }
}

impl fmt::Display for DbState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The last block whose data is fully in the tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checkpoint {
    /// Its number.
    pub number: u64,
    /// Its hash.
    pub hash: B256,
}

/// Everything `OtsIndexerState` holds. A fresh database has none of it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct IndexerState {
    /// Format version of the writer that created the database.
    pub format_version: Option<u64>,
    /// The chain indexed.
    pub chain: Option<ChainIdentity>,
    /// Enabled classifiers, by name.
    pub classifiers: Vec<String>,
    /// Last writer's state.
    pub db_state: Option<DbState>,
    /// Last indexed block.
    pub checkpoint: Option<Checkpoint>,
    /// Blocks per second of the last batch written.
    pub sync_rate: Option<f64>,
}

/// The database cannot be used as asked.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// Written by another format version.
    #[error("the database uses format version {found}, this build reads version {expected}: re-index into a new --datadir (or use a matching ots-indexer release)")]
    FormatVersion {
        /// Stored version.
        found: u64,
        /// This build's version.
        expected: u64,
    },
    /// Written by an older format version that `ots-indexer migrate` upgrades in place.
    #[error("the database uses format version {found}, this build reads version {expected}: {}", super::format::format_advice(*found))]
    Upgradable {
        /// Stored version.
        found: u64,
        /// This build's version.
        expected: u64,
    },
    /// Made for another chain.
    #[error("the database indexes {stored}, but the node serves {node}: point --rpc-url at the right node or use another --datadir")]
    ChainMismatch {
        /// Stored chain.
        stored: ChainIdentity,
        /// The node's chain.
        node: ChainIdentity,
    },
    /// Made with other classifiers.
    #[error("the database was indexed with classifiers [{stored}], but [{requested}] were asked for: keep the same set or re-index into a new --datadir")]
    ClassifiersMismatch {
        /// Stored set.
        stored: String,
        /// Requested set.
        requested: String,
    },
    /// Left half-written by an interrupted multi-step operation.
    #[error("the database is marked inconsistent (an operation spanning several transactions was interrupted): re-index into a new --datadir")]
    Inconsistent,
    /// Has no state (never initialised by a writer).
    #[error("the database has not been initialised: run `ots-indexer run` against a node first")]
    NotInitialised,
    /// A state value has the wrong shape.
    #[error("state entry `{key}` is malformed ({len} bytes)")]
    Malformed {
        /// The entry.
        key: &'static str,
        /// Its length.
        len: usize,
    },
    /// Storage failed.
    #[error(transparent)]
    Db(#[from] DbError),
}

fn get<K: TransactionKind>(txn: &Txn<K>, key: &str) -> DbResult<Option<Vec<u8>>> {
    txn.get::<OtsIndexerState>(&StateKey(key.to_owned()))
}

fn put(txn: &WriteTxn, key: &str, value: &[u8]) -> DbResult<()> {
    txn.put::<OtsIndexerState>(&StateKey(key.to_owned()), &value.to_vec())
}

fn u64_of(key: &'static str, bytes: &[u8]) -> Result<u64, StateError> {
    let arr: [u8; 8] = bytes.try_into().map_err(|_| StateError::Malformed { key, len: bytes.len() })?;
    Ok(u64::from_be_bytes(arr))
}

/// The indexed tip alone, for readers that need nothing else of the state.
pub fn read_tip<K: TransactionKind>(txn: &Txn<K>) -> DbResult<Option<u64>> {
    match get(txn, LAST_BLOCK_KEY)? {
        None => Ok(None),
        Some(v) => match v.get(..8).and_then(|b| <[u8; 8]>::try_from(b).ok()) {
            Some(b) if v.len() == 40 => Ok(Some(u64::from_be_bytes(b))),
            _ => Err(crate::db::DbError::Corrupt {
                table: "OtsIndexerState",
                key: LAST_BLOCK_KEY.to_owned(),
                reason: format!("{} bytes, expected 40", v.len()),
            }),
        },
    }
}

/// The indexed tip with its hash alone (`None`: nothing indexed).
pub fn read_checkpoint<K: TransactionKind>(txn: &Txn<K>) -> DbResult<Option<Checkpoint>> {
    let Some(number) = read_tip(txn)? else { return Ok(None) };
    // `read_tip` checked the row's 40 bytes: number (8) ‖ hash (32).
    let hash = get(txn, LAST_BLOCK_KEY)?.and_then(|v| v.get(8..40).map(B256::from_slice));
    Ok(hash.map(|hash| Checkpoint { number, hash }))
}

/// Reads the whole state.
pub fn read_state<K: TransactionKind>(txn: &Txn<K>) -> Result<IndexerState, StateError> {
    let format_version = get(txn, FORMAT_VERSION_KEY)?.map(|v| u64_of(FORMAT_VERSION_KEY, &v)).transpose()?;
    let chain = match (get(txn, CHAIN_ID_KEY)?, get(txn, GENESIS_HASH_KEY)?) {
        (Some(id), Some(hash)) => {
            if hash.len() != 32 {
                return Err(StateError::Malformed { key: GENESIS_HASH_KEY, len: hash.len() });
            }
            Some(ChainIdentity {
                chain_id: u64_of(CHAIN_ID_KEY, &id)?,
                genesis_hash: B256::from_slice(&hash),
            })
        }
        _ => None,
    };
    let classifiers = match get(txn, CLASSIFIERS_KEY)? {
        Some(v) => String::from_utf8(v)
            .map_err(|e| StateError::Malformed { key: CLASSIFIERS_KEY, len: e.as_bytes().len() })?
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect(),
        None => Vec::new(),
    };
    let db_state = match get(txn, DB_STATE_KEY)? {
        Some(v) => Some(DbState::parse(&v).ok_or(StateError::Malformed { key: DB_STATE_KEY, len: v.len() })?),
        None => None,
    };
    let checkpoint = match get(txn, LAST_BLOCK_KEY)? {
        Some(v) if v.len() == 40 => {
            Some(Checkpoint { number: u64_of(LAST_BLOCK_KEY, &v[..8])?, hash: B256::from_slice(&v[8..]) })
        }
        Some(v) => return Err(StateError::Malformed { key: LAST_BLOCK_KEY, len: v.len() }),
        None => None,
    };
    let sync_rate =
        get(txn, SYNC_RATE_KEY)?.map(|v| u64_of(SYNC_RATE_KEY, &v).map(f64::from_bits)).transpose()?;
    Ok(IndexerState { format_version, chain, classifiers, db_state, checkpoint, sync_rate })
}

/// Refuses a database this build must not touch: another format version, or left inconsistent.
/// A fresh database passes.
pub fn check_usable(state: &IndexerState) -> Result<(), StateError> {
    if let Some(found) = state.format_version {
        if UPGRADABLE_FORMATS.contains(&found) {
            return Err(StateError::Upgradable { found, expected: FORMAT_VERSION });
        }
        if found != FORMAT_VERSION {
            return Err(StateError::FormatVersion { found, expected: FORMAT_VERSION });
        }
    }
    if state.db_state == Some(DbState::Inconsistent) {
        return Err(StateError::Inconsistent);
    }
    Ok(())
}

/// Refuses a database made for another chain or classifier set; initialises a fresh one.
pub fn bind(
    txn: &WriteTxn,
    chain: ChainIdentity,
    classifiers: &[String],
) -> Result<IndexerState, StateError> {
    let state = read_state(txn)?;
    check_usable(&state)?;
    let requested = classifiers.join(",");
    match state.chain {
        None => {
            put(txn, FORMAT_VERSION_KEY, &FORMAT_VERSION.to_be_bytes())?;
            put(txn, CHAIN_ID_KEY, &chain.chain_id.to_be_bytes())?;
            put(txn, GENESIS_HASH_KEY, chain.genesis_hash.as_slice())?;
            put(txn, CLASSIFIERS_KEY, requested.as_bytes())?;
        }
        Some(stored) => {
            if stored != chain {
                return Err(StateError::ChainMismatch { stored, node: chain });
            }
            let stored_set = state.classifiers.join(",");
            if stored_set != requested {
                return Err(StateError::ClassifiersMismatch { stored: stored_set, requested });
            }
        }
    }
    read_state(txn)
}

/// Marks the database as written in this build's format (the last step of an upgrade).
pub fn set_format_version(txn: &WriteTxn) -> DbResult<()> {
    put(txn, FORMAT_VERSION_KEY, &FORMAT_VERSION.to_be_bytes())
}

/// Records the writer's state.
pub fn set_db_state(txn: &WriteTxn, db_state: DbState) -> DbResult<()> {
    put(txn, DB_STATE_KEY, db_state.as_str().as_bytes())
}

/// Records `stats` as the size of its table when last left with full pages (appended in key
/// order or repacked): what a later stage's and the catch-up's end measure its swelling against
/// (`index::packing`).
pub fn set_packed(txn: &WriteTxn, stats: &TableStats) -> DbResult<()> {
    let mut value = [0u8; 16];
    value[..8].copy_from_slice(&stats.bytes.to_be_bytes());
    value[8..].copy_from_slice(&stats.entries.to_be_bytes());
    put(txn, &format!("{PACKED_KEY_PREFIX}{}", stats.table.name()), &value)
}

/// The size `table` had when last left packed ([`set_packed`]), if recorded. A value of another
/// length counts as none: the record only steers when a table is repacked.
pub fn read_packed<K: TransactionKind>(txn: &Txn<K>, table: TableId) -> DbResult<Option<TableStats>> {
    let value = get(txn, &format!("{PACKED_KEY_PREFIX}{}", table.name()))?;
    Ok(value.and_then(|v| <[u8; 16]>::try_from(v.as_slice()).ok()).map(|v| {
        let (bytes, entries) = v.split_at(8);
        let u64_at = |b: &[u8]| u64::from_be_bytes(b.try_into().unwrap_or_default());
        TableStats { table, bytes: u64_at(bytes), entries: u64_at(entries) }
    }))
}

/// Records whether some token with holders has no ranking in `OtsTokenHolderRanks`: a bulk
/// stage defers the rankings of the tokens it changes, the catch-up's end ranks them
/// (`index::balances`).
pub fn set_rankings_deferred(txn: &WriteTxn, deferred: bool) -> DbResult<()> {
    let key = StateKey(RANKINGS_DEFERRED_KEY.to_owned());
    if deferred {
        txn.put::<OtsIndexerState>(&key, &Vec::new())
    } else {
        txn.delete::<OtsIndexerState>(&key, None).map(drop)
    }
}

/// Whether a catch-up left rankings to build ([`set_rankings_deferred`]).
pub fn rankings_deferred<K: TransactionKind>(txn: &Txn<K>) -> DbResult<bool> {
    Ok(get(txn, RANKINGS_DEFERRED_KEY)?.is_some())
}

/// Records the speed of the batch being written (for `status` in another process).
pub fn set_sync_rate(txn: &WriteTxn, blocks_per_second: f64) -> DbResult<()> {
    put(txn, SYNC_RATE_KEY, &blocks_per_second.to_bits().to_be_bytes())
}

/// Whether the indexed blocks came with call frames (from the node's tracer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum CallFrames {
    /// Nothing indexed yet.
    Unknown,
    /// Every block: internal calls and value moves at any depth are counted.
    All,
    /// No block: only transactions' own values and parties are counted.
    None,
    /// Some blocks did, some did not (the node's tracer changed, or `--traces`).
    Partial,
}

/// Notes that blocks with call frames (`with`) and blocks without (`without`) were indexed.
pub fn note_call_frames(txn: &WriteTxn, with: bool, without: bool) -> DbResult<()> {
    let old = get(txn, CALL_FRAMES_KEY)?.and_then(|v| v.first().copied()).unwrap_or(0);
    let new = old | u8::from(with) | (u8::from(without) << 1);
    if new != old {
        put(txn, CALL_FRAMES_KEY, &[new])?;
    }
    Ok(())
}

/// Whether the indexed blocks came with call frames.
pub fn read_call_frames<K: TransactionKind>(txn: &Txn<K>) -> DbResult<CallFrames> {
    Ok(match get(txn, CALL_FRAMES_KEY)?.and_then(|v| v.first().copied()).unwrap_or(0) & 3 {
        0 => CallFrames::Unknown,
        1 => CallFrames::All,
        2 => CallFrames::None,
        _ => CallFrames::Partial,
    })
}

/// Records why the sync loop stopped and waits (`None`: it runs), for `status` in another
/// process; UTF-8, at most a few hundred bytes.
pub fn set_stopped(txn: &WriteTxn, why: Option<&str>) -> DbResult<()> {
    match why {
        Some(why) => put(txn, STOPPED_KEY, why.as_bytes()),
        None => txn.delete::<OtsIndexerState>(&StateKey(STOPPED_KEY.to_owned()), None).map(drop),
    }
}

/// Why the sync loop stopped and waits, if it does.
pub fn read_stopped<K: TransactionKind>(txn: &Txn<K>) -> DbResult<Option<String>> {
    Ok(get(txn, STOPPED_KEY)?.map(|v| String::from_utf8_lossy(&v).into_owned()))
}

/// Records the classifier probes the node refused (`notices::Notices`' count and newest ones, as
/// JSON), for `status` in another process and the next start.
pub fn set_refused_probes(txn: &WriteTxn, json: &[u8]) -> DbResult<()> {
    put(txn, REFUSED_PROBES_KEY, json)
}

/// What [`set_refused_probes`] stored.
pub fn read_refused_probes<K: TransactionKind>(txn: &Txn<K>) -> DbResult<Option<Vec<u8>>> {
    get(txn, REFUSED_PROBES_KEY)
}

/// Records that the appearance lists mark received transactions only from TxId `from` on: a
/// database upgraded from a format without the marks has them for the blocks indexed after.
pub fn set_received_marks_from(txn: &WriteTxn, from: u64) -> DbResult<()> {
    put(txn, RECEIVED_MARKS_FROM_KEY, &from.to_be_bytes())
}

/// The first TxId whose received marks the appearance lists hold (0: every one).
pub fn read_received_marks_from<K: TransactionKind>(txn: &Txn<K>) -> DbResult<u64> {
    read_tx_id(txn, RECEIVED_MARKS_FROM_KEY)
}

/// What `internal_txs_from` holds while the newest indexed block came without call frames: the
/// internal-transaction index holds no range up to the tip.
pub const INTERNAL_TXS_NOWHERE: u64 = u64::MAX;

/// Records that `OtsInternalTxIndex` holds every internal transaction from TxId `from` on (or,
/// [`INTERNAL_TXS_NOWHERE`], none up to the tip).
pub fn set_internal_txs_from(txn: &WriteTxn, from: u64) -> DbResult<()> {
    put(txn, INTERNAL_TXS_FROM_KEY, &from.to_be_bytes())
}

/// Records that `OtsInternalTxIndex` holds nothing below TxId `from`, if that is later than what
/// was recorded: a database upgraded from a format without the index has none of the blocks it
/// had indexed.
pub fn raise_internal_txs_from(txn: &WriteTxn, from: u64) -> DbResult<()> {
    if from > read_internal_txs_from(txn)? {
        set_internal_txs_from(txn, from)?;
    }
    Ok(())
}

/// The first TxId from which `OtsInternalTxIndex` holds every internal transaction (0: all;
/// [`INTERNAL_TXS_NOWHERE`]: none up to the tip).
pub fn read_internal_txs_from<K: TransactionKind>(txn: &Txn<K>) -> DbResult<u64> {
    read_tx_id(txn, INTERNAL_TXS_FROM_KEY)
}

/// Records that `OtsTransferRowsIndex` holds the extra rows of every transaction from TxId
/// `from` on: a database upgraded from a format without it has none of the blocks it had indexed.
pub fn set_transfer_rows_from(txn: &WriteTxn, from: u64) -> DbResult<()> {
    put(txn, TRANSFER_ROWS_FROM_KEY, &from.to_be_bytes())
}

/// The first TxId from which `OtsTransferRowsIndex` holds every transaction's extra rows (0:
/// all).
pub fn read_transfer_rows_from<K: TransactionKind>(txn: &Txn<K>) -> DbResult<u64> {
    read_tx_id(txn, TRANSFER_ROWS_FROM_KEY)
}

/// Records that `OtsTokenTransfersIndex` holds every transaction that moves a token from TxId
/// `from` on: a database upgraded from a format without it has none of the blocks it had indexed.
pub fn set_token_transfers_from(txn: &WriteTxn, from: u64) -> DbResult<()> {
    put(txn, TOKEN_TRANSFERS_FROM_KEY, &from.to_be_bytes())
}

/// The first TxId from which `OtsTokenTransfersIndex` holds every transaction that moves a token
/// (0: all).
pub fn read_token_transfers_from<K: TransactionKind>(txn: &Txn<K>) -> DbResult<u64> {
    read_tx_id(txn, TOKEN_TRANSFERS_FROM_KEY)
}

/// Records that `OtsInternalRowsIndex` holds the extra rows of every transaction from TxId `from`
/// on: a database upgraded from a format without it has none of the blocks it had indexed.
pub fn set_internal_rows_from(txn: &WriteTxn, from: u64) -> DbResult<()> {
    put(txn, INTERNAL_ROWS_FROM_KEY, &from.to_be_bytes())
}

/// The first TxId from which `OtsInternalRowsIndex` holds every transaction's extra rows (0: all;
/// where the internal-transaction index holds them: `internal_txs_from` bounds both).
pub fn read_internal_rows_from<K: TransactionKind>(txn: &Txn<K>) -> DbResult<u64> {
    read_tx_id(txn, INTERNAL_ROWS_FROM_KEY)
}

/// `party_token_from` of a database that does not keep `OtsPartyTokenIndex` (the default: it is
/// kept only where the operator asks for it).
pub const PARTY_TOKEN_NOT_KEPT: u64 = u64::MAX;

/// Records that `OtsPartyTokenIndex` holds every transaction in which a party moved a token from
/// TxId `from` on ([`PARTY_TOKEN_NOT_KEPT`]: none): a database that starts keeping it has none of
/// the blocks it had indexed.
pub fn set_party_token_from(txn: &WriteTxn, from: u64) -> DbResult<()> {
    put(txn, PARTY_TOKEN_FROM_KEY, &from.to_be_bytes())
}

/// The first TxId from which `OtsPartyTokenIndex` holds every transaction in which a party moved a
/// token (0: all; [`PARTY_TOKEN_NOT_KEPT`]: none, the index not kept).
pub fn read_party_token_from<K: TransactionKind>(txn: &Txn<K>) -> DbResult<u64> {
    read_tx_id(txn, PARTY_TOKEN_FROM_KEY)
}

/// Whether the writers fill `OtsPartyTokenIndex`.
pub fn party_token_kept<K: TransactionKind>(txn: &Txn<K>) -> DbResult<bool> {
    Ok(read_party_token_from(txn)? != PARTY_TOKEN_NOT_KEPT)
}

fn read_tx_id<K: TransactionKind>(txn: &Txn<K>, key: &'static str) -> DbResult<u64> {
    match get(txn, key)? {
        None => Ok(0),
        Some(v) => u64_of(key, &v).map_err(|e| crate::db::DbError::Corrupt {
            table: "OtsIndexerState",
            key: key.to_owned(),
            reason: e.to_string(),
        }),
    }
}

/// Moves the checkpoint (in the same transaction as the batch it covers).
pub fn set_checkpoint(txn: &WriteTxn, checkpoint: Checkpoint) -> DbResult<()> {
    let mut v = Vec::with_capacity(40);
    v.extend_from_slice(&checkpoint.number.to_be_bytes());
    v.extend_from_slice(checkpoint.hash.as_slice());
    put(txn, LAST_BLOCK_KEY, &v)
}
