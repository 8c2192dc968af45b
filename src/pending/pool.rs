//! The pending transactions kept in memory: bounded (the oldest first seen leave first), found
//! by hash, by (sender, nonce) and by address, and the notices each change gives. No I/O here:
//! the tracker feeds it what the node and the index say.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap, HashSet},
    sync::Arc,
};

use alloy_primitives::{Address, B256};
use serde_json::value::RawValue;

use super::calldata::PendingTransfer;

/// A transaction seen in the node's pool.
#[derive(Debug, Clone)]
pub struct PendingTx {
    /// Its hash.
    pub hash: B256,
    /// Its sender.
    pub from: Address,
    /// Its nonce.
    pub nonce: u64,
    /// Its recipient (none for a creation).
    pub to: Option<Address>,
    /// The node's JSON object of it, as it came.
    pub transaction: Arc<RawValue>,
    /// When this process first saw it, in milliseconds since the Unix epoch.
    pub first_seen_ms: u64,
    /// The token transfers its calldata asks for.
    pub transfers: Vec<PendingTransfer>,
}

impl PendingTx {
    /// Every address it concerns: sender, recipient, token transfer parties; each once.
    pub fn parties(&self) -> BTreeSet<Address> {
        let mut out = BTreeSet::from([self.from]);
        out.extend(self.to);
        for t in &self.transfers {
            out.insert(t.from);
            out.insert(t.to);
        }
        out
    }

    /// Heap and inline bytes it holds, for the pool's accounting.
    pub fn bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.transaction.get().len()
            + self.transfers.capacity() * std::mem::size_of::<PendingTransfer>()
    }
}

/// What happened to a pending transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoticeKind {
    /// Seen in the pool (again, after a reorg put it back).
    Pending,
    /// Mined in an indexed block.
    Mined {
        /// The block.
        block: u64,
        /// Its hash.
        block_hash: B256,
        /// The transaction's index in it.
        index: u64,
    },
    /// Another transaction of the same sender and nonce took its place (in the pool, or
    /// mined); its hash when known.
    Replaced {
        /// The transaction that took its place.
        by: Option<B256>,
    },
    /// Left the pool unmined.
    Dropped,
}

/// A change to one pending transaction, for `pendingActivity` subscribers.
#[derive(Debug, Clone)]
pub struct Notice {
    /// What happened.
    pub kind: NoticeKind,
    /// The transaction (as it was seen).
    pub tx: Arc<PendingTx>,
}

/// Where an entry stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// In the node's pool.
    InPool,
    /// No longer in the node's pool (or put back by a reorg) and not yet accounted for:
    /// mined in a block the index has not reached, replaced, or dropped. Not listed.
    Left {
        /// The tick it left at.
        since: u64,
    },
}

#[derive(Debug)]
struct Entry {
    tx: Arc<PendingTx>,
    seq: u64,
    standing: Standing,
}

/// The pool.
#[derive(Debug)]
pub struct Pool {
    max: usize,
    next_seq: u64,
    by_hash: HashMap<B256, Entry>,
    by_seq: BTreeMap<u64, B256>,
    by_sender: HashMap<(Address, u64), B256>,
    /// Per address, the sequence numbers of its transactions, ascending (a short vector: most
    /// addresses have one or two, where a tree's node would cost hundreds of bytes).
    by_address: HashMap<Address, Vec<u64>>,
    /// Transactions that left for the bound while still in the node's pool: a snapshot that
    /// shows them again must not bring them back as new (they would push out newer ones).
    evicted: HashSet<B256>,
    bytes: usize,
}

/// Bytes one index entry costs beside the transaction itself (hash map and tree slots), an
/// estimate that the pool benchmark checks against the allocator's count.
const INDEX_BYTES_PER_ENTRY: usize = 160;
/// Bytes one address index entry costs.
const INDEX_BYTES_PER_PARTY: usize = 96;
/// Bytes one remembered evicted hash costs.
const EVICTED_BYTES: usize = 48;

impl Pool {
    /// An empty pool keeping at most `max` transactions.
    pub fn new(max: usize) -> Self {
        Self {
            max,
            next_seq: 0,
            by_hash: HashMap::new(),
            by_seq: BTreeMap::new(),
            by_sender: HashMap::new(),
            by_address: HashMap::new(),
            evicted: HashSet::new(),
            bytes: 0,
        }
    }

    /// Transactions kept (in the pool or left and unresolved).
    pub fn len(&self) -> usize {
        self.by_hash.len()
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }

    /// The bound.
    pub const fn max(&self) -> usize {
        self.max
    }

    /// Bytes the kept transactions and their indexes take, estimated.
    pub fn bytes(&self) -> usize {
        self.bytes + self.evicted.len() * EVICTED_BYTES
    }

    /// Whether `hash` left for the bound and is still in the node's pool.
    pub fn was_evicted(&self, hash: &B256) -> bool {
        self.evicted.contains(hash)
    }

    /// Forgets evicted transactions no longer in the node's pool (`present`).
    pub fn forget_evicted_absent(&mut self, present: &HashSet<B256>) {
        self.evicted.retain(|h| present.contains(h));
    }

    /// Whether `hash` is kept, and where it stands.
    pub fn standing(&self, hash: &B256) -> Option<Standing> {
        self.by_hash.get(hash).map(|e| e.standing)
    }

    /// The kept transaction of `sender` with `nonce`, if any.
    pub fn by_sender_nonce(&self, sender: Address, nonce: u64) -> Option<B256> {
        self.by_sender.get(&(sender, nonce)).copied()
    }

    /// Adds `tx`, seen in the pool. Another kept transaction of the same sender and nonce is
    /// replaced by it; past the bound, the oldest first seen leave without notice (they are
    /// still in the node's pool, only no longer kept here).
    pub fn insert(&mut self, tx: PendingTx) -> Vec<Notice> {
        let mut notices = Vec::new();
        if self.evicted.contains(&tx.hash) {
            return notices;
        }
        if let Some(entry) = self.by_hash.get_mut(&tx.hash) {
            if matches!(entry.standing, Standing::Left { .. }) {
                entry.standing = Standing::InPool;
                notices.push(Notice { kind: NoticeKind::Pending, tx: entry.tx.clone() });
            }
            return notices;
        }
        if let Some(old) = self.by_sender_nonce(tx.from, tx.nonce) {
            if let Some(gone) = self.remove(&old) {
                notices.push(Notice { kind: NoticeKind::Replaced { by: Some(tx.hash) }, tx: gone });
            }
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let tx = Arc::new(tx);
        for party in tx.parties() {
            self.by_address.entry(party).or_default().push(seq);
            self.bytes += INDEX_BYTES_PER_PARTY;
        }
        self.bytes += tx.bytes() + INDEX_BYTES_PER_ENTRY;
        self.by_seq.insert(seq, tx.hash);
        self.by_sender.insert((tx.from, tx.nonce), tx.hash);
        self.by_hash.insert(tx.hash, Entry { tx: tx.clone(), seq, standing: Standing::InPool });
        notices.push(Notice { kind: NoticeKind::Pending, tx });
        while self.by_hash.len() > self.max {
            let Some((_, oldest)) = self.by_seq.first_key_value().map(|(s, h)| (*s, *h)) else { break };
            self.remove(&oldest);
            self.evicted.insert(oldest);
        }
        notices
    }

    /// Puts back a transaction a reorg took out of a block: kept as left until the pool or a
    /// block accounts for it.
    pub fn put_back(&mut self, tx: &PendingTx, tick: u64) {
        if self.by_hash.contains_key(&tx.hash) {
            return;
        }
        self.insert(tx.clone());
        if let Some(e) = self.by_hash.get_mut(&tx.hash) {
            e.standing = Standing::Left { since: tick };
        }
    }

    /// Marks every transaction in the pool but not in `present` as left, at `tick`.
    pub fn mark_absent(&mut self, present: &HashSet<B256>, tick: u64) {
        for (hash, entry) in &mut self.by_hash {
            if entry.standing == Standing::InPool && !present.contains(hash) {
                entry.standing = Standing::Left { since: tick };
            }
        }
    }

    /// Marks `hash` left at `tick` (a check found it gone from the node).
    pub fn mark_left(&mut self, hash: &B256, tick: u64) {
        if let Some(e) = self.by_hash.get_mut(hash) {
            if e.standing == Standing::InPool {
                e.standing = Standing::Left { since: tick };
            }
        }
    }

    /// Left transactions that left at or before `tick`, oldest first seen first, at most `n`.
    pub fn left_since(&self, tick: u64, n: usize) -> Vec<Arc<PendingTx>> {
        self.by_seq
            .values()
            .filter_map(|h| self.by_hash.get(h))
            .filter(|e| matches!(e.standing, Standing::Left { since } if since <= tick))
            .take(n)
            .map(|e| e.tx.clone())
            .collect()
    }

    /// The `n` oldest first seen transactions still in the pool.
    pub fn oldest_in_pool(&self, n: usize) -> Vec<Arc<PendingTx>> {
        self.by_seq
            .values()
            .filter_map(|h| self.by_hash.get(h))
            .filter(|e| e.standing == Standing::InPool)
            .take(n)
            .map(|e| e.tx.clone())
            .collect()
    }

    /// Resolves `hash` as `kind` (mined, replaced or dropped): it leaves the pool.
    pub fn resolve(&mut self, hash: &B256, kind: NoticeKind) -> Option<Notice> {
        self.remove(hash).map(|tx| Notice { kind, tx })
    }

    /// Up to `n` transactions in the pool concerning `address`, newest first seen first.
    pub fn of_address(&self, address: &Address, n: usize) -> Vec<Arc<PendingTx>> {
        let Some(mine) = self.by_address.get(address) else { return Vec::new() };
        mine.iter()
            .rev()
            .filter_map(|seq| self.by_seq.get(seq))
            .filter_map(|h| self.by_hash.get(h))
            .filter(|e| e.standing == Standing::InPool)
            .take(n)
            .map(|e| e.tx.clone())
            .collect()
    }

    fn remove(&mut self, hash: &B256) -> Option<Arc<PendingTx>> {
        let entry = self.by_hash.remove(hash)?;
        self.by_seq.remove(&entry.seq);
        if self.by_sender.get(&(entry.tx.from, entry.tx.nonce)) == Some(hash) {
            self.by_sender.remove(&(entry.tx.from, entry.tx.nonce));
        }
        for party in entry.tx.parties() {
            if let Some(mine) = self.by_address.get_mut(&party) {
                if let Ok(at) = mine.binary_search(&entry.seq) {
                    mine.remove(at);
                }
                if mine.is_empty() {
                    self.by_address.remove(&party);
                }
            }
            self.bytes = self.bytes.saturating_sub(INDEX_BYTES_PER_PARTY);
        }
        self.bytes = self.bytes.saturating_sub(entry.tx.bytes() + INDEX_BYTES_PER_ENTRY);
        Some(entry.tx)
    }
}

#[cfg(test)]
mod tests {
    use alloy_primitives::address;

    use super::*;

    const A: Address = address!("00000000000000000000000000000000000000aa");
    const B: Address = address!("00000000000000000000000000000000000000bb");

    fn tx(n: u8, from: Address, nonce: u64) -> PendingTx {
        PendingTx {
            hash: B256::repeat_byte(n),
            from,
            nonce,
            to: Some(B),
            transaction: Arc::from(RawValue::from_string("{}".into()).expect("json")),
            first_seen_ms: u64::from(n),
            transfers: Vec::new(),
        }
    }

    fn kinds(notices: &[Notice]) -> Vec<(NoticeKind, B256)> {
        notices.iter().map(|n| (n.kind.clone(), n.tx.hash)).collect()
    }

    #[test]
    fn newest_first_per_address_and_bounded() {
        let mut pool = Pool::new(3);
        for n in 1..=4 {
            pool.insert(tx(n, A, u64::from(n)));
        }
        assert_eq!(pool.len(), 3);
        let got: Vec<B256> = pool.of_address(&B, 10).iter().map(|t| t.hash).collect();
        assert_eq!(got, vec![B256::repeat_byte(4), B256::repeat_byte(3), B256::repeat_byte(2)]);
        assert_eq!(pool.of_address(&A, 1).len(), 1);
        assert!(pool.standing(&B256::repeat_byte(1)).is_none(), "the oldest first seen left first");
        assert!(pool.insert(tx(1, A, 1)).is_empty(), "seen again, an evicted one stays out");
        pool.forget_evicted_absent(&HashSet::new());
        assert!(!pool.insert(tx(1, A, 1)).is_empty(), "gone from the node and back: new");
    }

    #[test]
    fn same_sender_and_nonce_replaces() {
        let mut pool = Pool::new(10);
        pool.insert(tx(1, A, 0));
        let notices = pool.insert(tx(2, A, 0));
        assert_eq!(
            kinds(&notices),
            vec![
                (NoticeKind::Replaced { by: Some(B256::repeat_byte(2)) }, B256::repeat_byte(1)),
                (NoticeKind::Pending, B256::repeat_byte(2))
            ]
        );
        assert_eq!(pool.len(), 1);
        assert_eq!(pool.by_sender_nonce(A, 0), Some(B256::repeat_byte(2)));
    }

    #[test]
    fn left_entries_are_not_listed_and_come_back_pending() {
        let mut pool = Pool::new(10);
        pool.insert(tx(1, A, 0));
        pool.insert(tx(2, A, 1));
        pool.mark_absent(&[B256::repeat_byte(2)].into_iter().collect(), 5);
        assert_eq!(pool.of_address(&A, 10).len(), 1);
        assert_eq!(pool.left_since(5, 10).len(), 1);
        assert!(pool.left_since(4, 10).is_empty());
        let back = pool.insert(tx(1, A, 0));
        assert_eq!(kinds(&back), vec![(NoticeKind::Pending, B256::repeat_byte(1))]);
        let mined = NoticeKind::Mined { block: 3, block_hash: B256::ZERO, index: 0 };
        assert!(pool.resolve(&B256::repeat_byte(1), mined).is_some());
        assert_eq!(pool.len(), 1);
    }

    #[test]
    fn bytes_return_to_zero() {
        let mut pool = Pool::new(10);
        pool.insert(tx(1, A, 0));
        assert!(pool.bytes() > 0);
        pool.resolve(&B256::repeat_byte(1), NoticeKind::Dropped);
        assert_eq!(pool.bytes(), 0);
        assert!(pool.by_address.is_empty() && pool.by_sender.is_empty() && pool.by_seq.is_empty());
    }
}
