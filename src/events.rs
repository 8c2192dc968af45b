//! What the sync loop tells live subscribers once a batch is committed or blocks are unwound.
//! The writer reports a batch's activity only when someone listens, so an indexer without
//! subscribers pays nothing.

use std::sync::Arc;

use alloy_primitives::B256;
use tokio::sync::broadcast;

pub use crate::index::{Activity, ActivityKind, IndexedBlock};

/// Events buffered per subscriber before it counts as too slow and is dropped.
pub const EVENT_BUFFER: usize = 1024;

/// An event of the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexEvent {
    /// Blocks committed, oldest first.
    Indexed(Vec<IndexedBlock>),
    /// Blocks unwound by a reorg, newest first: `(number, hash)`.
    Removed(Vec<(u64, B256)>),
}

/// The channel from the sync loop to subscribers.
#[derive(Debug, Clone)]
pub struct EventBus {
    sender: broadcast::Sender<Arc<IndexEvent>>,
}

impl Default for EventBus {
    fn default() -> Self {
        Self { sender: broadcast::channel(EVENT_BUFFER).0 }
    }
}

impl EventBus {
    /// A new receiver of every later event.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<IndexEvent>> {
        self.sender.subscribe()
    }

    /// Whether anyone listens (events are only built then).
    pub fn has_subscribers(&self) -> bool {
        self.sender.receiver_count() > 0
    }

    /// Sends `event` to every subscriber.
    pub fn publish(&self, event: IndexEvent) {
        // No receiver is not an error: nobody listens.
        let _ = self.sender.send(Arc::new(event));
    }
}
