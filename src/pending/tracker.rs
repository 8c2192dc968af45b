//! The loop that keeps the pool: every tick it takes what the feed brought, notes what left the
//! node's pool, scans the blocks the index has newly committed for kept transactions (mined, or
//! replaced by another of the same sender and nonce), checks that blocks it reported stayed in
//! the index (a reorg puts their transactions back), and asks the node what became of the
//! transactions that left. A tick whose node call fails changes nothing and is tried again.

use std::{
    collections::{BTreeMap, HashSet},
    sync::{Arc, Weak},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use alloy_primitives::{Address, Bytes, B256, U256};
use serde_json::{json, value::RawValue, Value};

use super::{
    calldata,
    feed::{self, Feed},
    pool::{NoticeKind, PendingTx, Standing},
    Shared,
};
use crate::{
    db::{
        codec::{BlockNumber, UndoRecordHash},
        state,
        tables::OtsUndoJournal,
        Db, DbError,
    },
    decode::TokenKinds,
    index::attributes::attributes,
    source::{NodeClient, SourceError},
};

/// Newest indexed blocks scanned when the index moved further than this in one tick (a
/// catch-up: what was mined long before is found through the left transactions' lookups).
const SCAN_DEPTH: u64 = 64;
/// Blocks whose mined notices are remembered, to take them back if a reorg unwinds them.
const MINED_MEMORY: u64 = 128;
/// Ticks a transaction stays left before the node is asked what became of it.
const LEFT_GRACE_TICKS: u64 = 2;
/// Ticks a left transaction whose nonce is used waits for the index to show the transaction
/// that used it before it is reported replaced without that hash.
const REPLACEMENT_PATIENCE_TICKS: u64 = 60;
/// Left transactions looked up per tick.
const LOOKUPS_PER_TICK: usize = 256;
/// Under a subscription (which says nothing of departures), ticks between checks that the
/// oldest kept transactions are still in the node's pool.
const RECHECK_EVERY_TICKS: u64 = 10;

/// A tick failed: the node or the index could not answer.
#[derive(Debug, thiserror::Error)]
enum TickError {
    #[error(transparent)]
    Node(#[from] SourceError),
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    State(#[from] state::StateError),
}

/// The tracker's own memory.
struct Tracker {
    node: NodeClient,
    db: Db,
    tick: u64,
    /// The newest indexed block scanned.
    scanned: Option<u64>,
    /// Blocks whose transactions were reported mined: hash and those transactions.
    mined: BTreeMap<u64, (B256, Vec<Arc<PendingTx>>)>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn quantity(v: &Value) -> Option<u64> {
    let s = v.as_str()?;
    u64::from_str_radix(s.strip_prefix("0x")?, 16).ok()
}

fn field<T: serde::de::DeserializeOwned>(tx: &Value, name: &str) -> Option<T> {
    serde_json::from_value(tx.get(name)?.clone()).ok()
}

/// What a kept transaction needs of the node's object.
struct Parsed {
    hash: B256,
    from: Address,
    nonce: u64,
    to: Option<Address>,
    input: Bytes,
}

/// Reads a node's transaction object; `None` for one that lacks a hash, sender or nonce
/// (garbage is skipped, never kept).
fn parse(tx: &Value) -> Option<Parsed> {
    Some(Parsed {
        hash: field(tx, "hash")?,
        from: field(tx, "from")?,
        nonce: quantity(tx.get("nonce")?)?,
        to: field::<Option<Address>>(tx, "to").flatten(),
        input: field::<Bytes>(tx, "input").or_else(|| field(tx, "data")).unwrap_or_default(),
    })
}

/// Runs until every handle of the pool is dropped.
pub(super) async fn run(shared: Weak<Shared>, node: NodeClient, db: Db, mut feed: Feed, poll: Duration) {
    let scanned = db.begin_read().ok().and_then(|txn| state::read_tip(&txn).ok().flatten());
    let mut tracker = Tracker { node, db, tick: 0, scanned, mined: BTreeMap::new() };
    let mut interval = tokio::time::interval(poll);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let mut pushed = Vec::new();
        match &mut feed {
            Feed::Subscription(stream) => {
                tokio::select! {
                    _ = interval.tick() => {}
                    item = futures::StreamExt::next(stream) => match item {
                        Some(item) => pushed.push(item),
                        None => {
                            tracing::warn!(target: "ots::pending", "the node ended the pending subscription; pending transactions are no longer followed");
                            if let Some(shared) = shared.upgrade() {
                                shared.set_ended("the node ended the pending subscription");
                            }
                            return;
                        }
                    },
                }
                let (more, _open) = feed::drain(stream, 10_000);
                pushed.extend(more);
            }
            Feed::Snapshot(_) => {
                interval.tick().await;
            }
        }
        let Some(shared) = shared.upgrade() else { return };
        tracker.tick += 1;
        if let Err(e) = tracker.step(&shared, feed.kind(), pushed).await {
            tracing::debug!(target: "ots::pending", error = %e, "pending tick failed; trying again");
        }
    }
}

impl Tracker {
    async fn step(
        &mut self,
        shared: &Shared,
        kind: feed::FeedKind,
        pushed: Vec<Value>,
    ) -> Result<(), TickError> {
        let (arrivals, snapshot) = match kind {
            feed::FeedKind::Subscription => {
                let mut objects = Vec::new();
                let mut hashes = Vec::new();
                for item in pushed {
                    match serde_json::from_value::<B256>(item.clone()) {
                        Ok(hash) => hashes.push(hash),
                        Err(_) => objects.push(item),
                    }
                }
                let known: Vec<B256> = {
                    let pool = shared.pool();
                    hashes.into_iter().filter(|h| pool.standing(h).is_none()).collect()
                };
                objects.extend(feed::lookup(&self.node, &known).await?);
                (objects, None)
            }
            snapshot_kind => {
                let all = feed::snapshot(&self.node, snapshot_kind).await?;
                let present: HashSet<B256> = all.iter().filter_map(|t| field(t, "hash")).collect();
                (all, Some(present))
            }
        };
        self.take_arrivals(shared, arrivals)?;
        if let Some(present) = snapshot {
            let mut pool = shared.pool();
            pool.mark_absent(&present, self.tick);
            pool.forget_evicted_absent(&present);
        } else if self.tick.is_multiple_of(RECHECK_EVERY_TICKS) {
            self.recheck_oldest(shared).await?;
        }
        let tip = state::read_tip(&self.db.begin_read()?)?;
        self.take_back_unwound(shared, tip)?;
        self.scan_blocks(shared, tip).await?;
        self.resolve_left(shared, tip).await
    }

    /// Keeps the transactions not kept yet (and brings back left ones seen again).
    fn take_arrivals(&self, shared: &Shared, arrivals: Vec<Value>) -> Result<(), TickError> {
        let fresh: Vec<(Value, Parsed)> = {
            let pool = shared.pool();
            arrivals
                .into_iter()
                .filter_map(|t| parse(&t).map(|p| (t, p)))
                .filter(|(_, p)| {
                    pool.standing(&p.hash) != Some(Standing::InPool) && !pool.was_evicted(&p.hash)
                })
                .collect()
        };
        if fresh.is_empty() {
            return Ok(());
        }
        let txn = self.db.begin_read()?;
        let seen = now_ms();
        let mut built = Vec::with_capacity(fresh.len());
        for (object, Parsed { hash, from, nonce, to, input }) in fresh {
            let transfers = match to {
                Some(token) if input.len() >= 4 => {
                    let kinds = TokenKinds::of(&attributes(&txn, &token)?);
                    calldata::decode(from, token, kinds, &input)
                }
                _ => Vec::new(),
            };
            let Ok(transaction) = RawValue::from_string(object.to_string()) else { continue };
            built.push(PendingTx {
                hash,
                from,
                nonce,
                to,
                transaction: Arc::from(transaction),
                first_seen_ms: seen,
                transfers,
            });
        }
        drop(txn);
        let mut notices = Vec::new();
        {
            let mut pool = shared.pool();
            for tx in built {
                notices.extend(pool.insert(tx));
            }
        }
        shared.publish(notices);
        Ok(())
    }

    /// Under a subscription: asks whether the oldest kept transactions are still pending.
    async fn recheck_oldest(&self, shared: &Shared) -> Result<(), TickError> {
        let oldest = shared.pool().oldest_in_pool(LOOKUPS_PER_TICK);
        let calls: Vec<(&'static str, Value)> =
            oldest.iter().map(|t| ("eth_getTransactionByHash", json!([t.hash]))).collect();
        let answers = self.node.batch(&calls).await?;
        let mut pool = shared.pool();
        for (tx, answer) in oldest.iter().zip(answers) {
            if answer.is_null() || !answer.get("blockNumber").is_none_or(Value::is_null) {
                pool.mark_left(&tx.hash, self.tick);
            }
        }
        Ok(())
    }

    fn journal_hash(&self, block: u64) -> Result<Option<B256>, TickError> {
        let txn = self.db.begin_read()?;
        Ok(txn.get_as::<OtsUndoJournal, UndoRecordHash>(&BlockNumber(block))?.map(|UndoRecordHash(h)| h))
    }

    /// Puts back the transactions of reported blocks the index no longer holds.
    fn take_back_unwound(&mut self, shared: &Shared, tip: Option<u64>) -> Result<(), TickError> {
        let tip = tip.unwrap_or(0);
        let mut unwound = Vec::new();
        for (&block, (hash, _)) in &self.mined {
            let gone = block > tip || self.journal_hash(block)?.is_some_and(|h| h != *hash);
            if gone {
                unwound.push(block);
            }
        }
        if let Some(&first) = unwound.first() {
            self.scanned = self.scanned.map(|s| s.min(first.saturating_sub(1)));
            let mut pool = shared.pool();
            for block in unwound {
                if let Some((_, txs)) = self.mined.remove(&block) {
                    for tx in txs {
                        pool.put_back(&tx, self.tick);
                    }
                }
            }
        }
        let keep_from = tip.saturating_sub(MINED_MEMORY);
        self.mined.retain(|b, _| *b >= keep_from);
        Ok(())
    }

    /// Scans the blocks indexed since the last tick for kept transactions.
    async fn scan_blocks(&mut self, shared: &Shared, tip: Option<u64>) -> Result<(), TickError> {
        let Some(tip) = tip else { return Ok(()) };
        let from = match self.scanned {
            Some(s) if s >= tip => return Ok(()),
            Some(s) => (s + 1).max(tip.saturating_sub(SCAN_DEPTH - 1)),
            None => tip,
        };
        if shared.pool().is_empty() {
            self.scanned = Some(tip);
            return Ok(());
        }
        for number in from..=tip {
            let block: Value =
                self.node.raw("eth_getBlockByNumber", json!([format!("{number:#x}"), true])).await?;
            let Some(block_hash) = field::<B256>(&block, "hash") else { return Ok(()) };
            if self.journal_hash(number)?.is_some_and(|h| h != block_hash) {
                // The node moved on from what the index holds: the sync loop unwinds first.
                return Ok(());
            }
            let txs = block.get("transactions").and_then(Value::as_array).cloned().unwrap_or_default();
            let mut notices = Vec::new();
            let mut mined = Vec::new();
            {
                let mut pool = shared.pool();
                for (index, tx) in txs.iter().enumerate() {
                    let Some(Parsed { hash, from, nonce, .. }) = parse(tx) else { continue };
                    let index = index as u64;
                    if pool.standing(&hash).is_some() {
                        let kind = NoticeKind::Mined { block: number, block_hash, index };
                        if let Some(n) = pool.resolve(&hash, kind) {
                            mined.push(n.tx.clone());
                            notices.push(n);
                        }
                    } else if let Some(old) = pool.by_sender_nonce(from, nonce) {
                        notices.extend(pool.resolve(&old, NoticeKind::Replaced { by: Some(hash) }));
                    }
                }
            }
            if !mined.is_empty() {
                self.mined.entry(number).or_insert_with(|| (block_hash, Vec::new())).1.extend(mined);
            }
            shared.publish(notices);
            self.scanned = Some(number);
        }
        Ok(())
    }

    /// Asks the node what became of transactions that left the pool a while ago.
    async fn resolve_left(&mut self, shared: &Shared, tip: Option<u64>) -> Result<(), TickError> {
        let left = shared.pool().left_since(self.tick.saturating_sub(LEFT_GRACE_TICKS), LOOKUPS_PER_TICK);
        if left.is_empty() {
            return Ok(());
        }
        let calls: Vec<(&'static str, Value)> =
            left.iter().map(|t| ("eth_getTransactionByHash", json!([t.hash]))).collect();
        let answers = self.node.batch(&calls).await?;
        let mut gone = Vec::new();
        let mut back = Vec::new();
        let mut notices = Vec::new();
        for (tx, answer) in left.iter().zip(answers) {
            if answer.is_null() {
                gone.push(tx.clone());
                continue;
            }
            let block = answer.get("blockNumber").and_then(quantity);
            let block_hash = field::<B256>(&answer, "blockHash");
            let index = answer.get("transactionIndex").and_then(quantity);
            match (block, block_hash, index) {
                (Some(block), Some(block_hash), Some(index)) => {
                    let indexed = tip.is_some_and(|t| t >= block)
                        && self.scanned.is_some_and(|s| s >= block)
                        && self.journal_hash(block)?.is_none_or(|h| h == block_hash);
                    if indexed {
                        let kind = NoticeKind::Mined { block, block_hash, index };
                        if let Some(n) = shared.pool().resolve(&tx.hash, kind) {
                            self.mined
                                .entry(block)
                                .or_insert_with(|| (block_hash, Vec::new()))
                                .1
                                .push(n.tx.clone());
                            notices.push(n);
                        }
                    }
                }
                _ => back.push(tx.clone()),
            }
        }
        {
            let mut pool = shared.pool();
            for tx in back {
                notices.extend(pool.insert((*tx).clone()));
            }
        }
        if !gone.is_empty() {
            let calls: Vec<(&'static str, Value)> =
                gone.iter().map(|t| ("eth_getTransactionCount", json!([t.from, "latest"]))).collect();
            let counts = self.node.batch(&calls).await?;
            let mut pool = shared.pool();
            for (tx, count) in gone.iter().zip(counts) {
                let used = serde_json::from_value::<U256>(count).is_ok_and(|c| c > U256::from(tx.nonce));
                let since = match pool.standing(&tx.hash) {
                    Some(Standing::Left { since }) => since,
                    _ => continue,
                };
                if !used {
                    notices.extend(pool.resolve(&tx.hash, NoticeKind::Dropped));
                } else if self.tick.saturating_sub(since) > REPLACEMENT_PATIENCE_TICKS {
                    notices.extend(pool.resolve(&tx.hash, NoticeKind::Replaced { by: None }));
                }
            }
        }
        shared.publish(notices);
        Ok(())
    }
}
