//! What the indexer has to tell its operator about the node — what it lacks, the probes it
//! refused: met by the node client, shown by `status` and `ots2_getIndexerStatus`.

use std::sync::{Arc, Mutex};

use serde::Serialize;

use crate::db::{state, Db, DbError};

/// Probes whose error answers [`Notices`] keeps, newest last.
const RECENT_REFUSED_PROBES: usize = 100;

/// What the indexer has to tell its operator about the node: shared by the node client (which
/// meets the answers), the sync loop and the API of the same process.
#[derive(Debug, Clone, Default)]
pub struct SharedNotices(Arc<Mutex<Notices>>);

/// See [`SharedNotices`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Notices {
    /// Why the sync loop stopped and waits ("stopped at block N: why"), while it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// What the node does not offer, and what goes missing for it (with the flag that fixes it).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub node_lacks: Vec<String>,
    /// Classifier probes the node answered with an error twice, taken as "no" (over the
    /// database's life: the sync loop stores them).
    pub refused_probes: u64,
    /// The newest of them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub recent_refused_probes: Vec<RefusedProbe>,
    /// How many of them the database holds: the sync loop writes only when there are more.
    #[serde(skip)]
    pub(crate) stored_refused_probes: u64,
}

/// A classifier's `eth_call` that the node answered with an error, the same on a retry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RefusedProbe {
    /// The contract probed.
    pub address: alloy_primitives::Address,
    /// The block the probe ran at.
    pub block: u64,
    /// The node's error message.
    pub message: String,
}

/// The refused probes as the database keeps them.
#[derive(Debug, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StoredRefusals {
    /// Probes refused since the database was made.
    pub(crate) count: u64,
    /// The newest of them.
    pub(crate) recent: Vec<RefusedProbe>,
}

/// The refused probes the database keeps, `(0, [])` when none (or unreadable: they are a note
/// for the operator, not index data).
pub(crate) fn stored_refusals<K: signet_libmdbx::tx::TransactionKind>(
    txn: &crate::db::Txn<K>,
) -> Result<StoredRefusals, DbError> {
    Ok(state::read_refused_probes(txn)?
        .and_then(|json| serde_json::from_slice(&json).ok())
        .unwrap_or_default())
}

impl SharedNotices {
    /// Takes over the refused probes a previous run stored, so that the count goes on.
    pub fn load(&self, db: &Db) -> Result<(), DbError> {
        let stored = stored_refusals(&db.begin_read()?)?;
        self.update(|n| {
            n.refused_probes = stored.count;
            n.recent_refused_probes = stored.recent;
            n.stored_refused_probes = stored.count;
        });
        Ok(())
    }

    /// Stores the refused probes when there are more than `db` holds (no write otherwise).
    pub fn save(&self, db: &Db) -> Result<(), DbError> {
        let now = self.get();
        if now.refused_probes == now.stored_refused_probes {
            return Ok(());
        }
        let txn = db.begin_write()?;
        let stored = StoredRefusals { count: now.refused_probes, recent: now.recent_refused_probes };
        let json = serde_json::to_vec(&stored).map_err(|e| DbError::Corrupt {
            table: "OtsIndexerState",
            key: "refused_probes".into(),
            reason: e.to_string(),
        })?;
        state::set_refused_probes(&txn, &json)?;
        txn.commit()?;
        self.update(|n| n.stored_refused_probes = n.stored_refused_probes.max(stored.count));
        Ok(())
    }

    /// Changes the notices.
    pub fn update(&self, f: impl FnOnce(&mut Notices)) {
        if let Ok(mut n) = self.0.lock() {
            f(&mut n);
        }
    }

    /// The notices now.
    pub fn get(&self) -> Notices {
        self.0.lock().map(|n| n.clone()).unwrap_or_default()
    }

    /// Counts a refused probe and keeps it among the newest.
    pub fn refused_probe(&self, probe: RefusedProbe) {
        self.update(|n| {
            n.refused_probes += 1;
            if n.recent_refused_probes.len() == RECENT_REFUSED_PROBES {
                n.recent_refused_probes.remove(0);
            }
            n.recent_refused_probes.push(probe);
        });
    }
}
