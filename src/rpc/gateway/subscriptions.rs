//! `ots2_subscribe` over WebSocket: blocks as they are committed, and the activity of one
//! address, each sent only after its batch is committed; a `removed` notice when a reorg unwinds
//! blocks; and the pending activity of one address (seen in the node's pool, mined once the
//! index has the block, replaced, dropped). A subscriber that cannot keep up is dropped with an error notice, never buffered
//! without bound: the connection holds `--max-pending-messages` unread messages, a notification
//! waits at most [`SLOW_SUBSCRIBER_GRACE`] for room, and a subscriber more than
//! [`crate::events::EVENT_BUFFER`] batches behind is dropped too.

use std::{sync::Arc, time::Duration};

use alloy_primitives::Address;
use jsonrpsee::{
    core::SubscriptionResult,
    proc_macros::rpc,
    server::{PendingSubscriptionSink, SendTimeoutError},
    types::ErrorObjectOwned,
};
use serde_json::{json, Value};
use tokio::sync::broadcast::error::RecvError;

use crate::rpc::{
    errors::{invalid_params, server_error},
    ots2::pending::PendingEntry,
};
use crate::{
    events::{ActivityKind, EventBus, IndexEvent},
    pending::{Notice, NoticeKind, PendingPool},
    txid::TxId,
};

/// How long a notification may wait for room in a connection's queue (`--max-pending-messages`)
/// before its subscriber counts as stalled and is dropped.
pub const SLOW_SUBSCRIBER_GRACE: Duration = Duration::from_secs(5);

/// Subscription kinds `ots2_subscribe` takes.
pub const KINDS: &[&str] = &["newIndexedBlocks", "addressActivity", "pendingActivity"];

/// The subscription namespace.
#[rpc(server, namespace = "ots2")]
pub trait Ots2SubscriptionApi {
    /// `["newIndexedBlocks"]`, `["addressActivity", address]` or `["pendingActivity", address]`;
    /// notifications come as
    /// `ots2_subscription`; `ots2_unsubscribe(id)` ends it.
    #[subscription(name = "subscribe" => "subscription", unsubscribe = "unsubscribe", item = Value)]
    async fn subscribe(&self, kind: String, address: Option<Address>) -> SubscriptionResult;
}

/// What a subscription wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Filter {
    Blocks,
    Address(Address),
    Pending(Address),
}

fn parse(kind: &str, address: Option<Address>) -> Result<Filter, ErrorObjectOwned> {
    match (kind, address) {
        ("newIndexedBlocks", None) => Ok(Filter::Blocks),
        ("newIndexedBlocks", Some(_)) => Err(invalid_params("newIndexedBlocks takes no address")),
        ("addressActivity", Some(a)) => Ok(Filter::Address(a)),
        ("addressActivity", None) => {
            Err(invalid_params("addressActivity needs an address: [\"addressActivity\", \"0x…\"]"))
        }
        ("pendingActivity", Some(a)) => Ok(Filter::Pending(a)),
        ("pendingActivity", None) => {
            Err(invalid_params("pendingActivity needs an address: [\"pendingActivity\", \"0x…\"]"))
        }
        (other, _) => {
            Err(invalid_params(format!("unknown subscription {other:?}; one of {}", KINDS.join(", "))))
        }
    }
}

fn hex(n: u64) -> String {
    format!("{n:#x}")
}

/// The notifications `event` gives a subscription with `filter`, in order.
fn render(event: &IndexEvent, filter: Filter) -> Vec<Value> {
    match event {
        IndexEvent::Removed(blocks) => {
            let blocks: Vec<Value> =
                blocks.iter().map(|(n, h)| json!({"blockNumber": hex(*n), "hash": h})).collect();
            vec![json!({"removed": true, "blocks": blocks})]
        }
        IndexEvent::Indexed(blocks) => match filter {
            Filter::Blocks => blocks
                .iter()
                .map(|b| {
                    json!({
                        "blockNumber": hex(b.number),
                        "hash": b.hash,
                        "contracts": b.contracts,
                        "transferLogs": b.transfer_logs,
                        "activity": b.activity.len(),
                    })
                })
                .collect(),
            Filter::Pending(_) => Vec::new(),
            Filter::Address(address) => blocks
                .iter()
                .flat_map(|b| {
                    b.activity.iter().filter(move |a| a.address == address).map(move |a| {
                        let mut v =
                            json!({"blockNumber": hex(b.number), "blockHash": b.hash, "kind": a.kind});
                        match (a.kind, a.index) {
                            (ActivityKind::Withdrawal, Some(i)) => v["withdrawalIndex"] = json!(hex(i)),
                            (_, Some(i)) => {
                                v["transactionIndex"] = json!(hex(i));
                                if let Ok(id) = TxId::new(b.number, i) {
                                    v["txId"] = json!(id.0);
                                }
                            }
                            (_, None) => {}
                        }
                        v
                    })
                })
                .collect(),
        },
    }
}

/// Implementation of [`Ots2SubscriptionApiServer`].
#[derive(Debug, Clone)]
pub struct Ots2Subscriptions {
    events: Option<EventBus>,
    pending: Option<PendingPool>,
}

impl Ots2Subscriptions {
    /// Subscriptions to `events` (the index's) and `pending` (the node's pool).
    pub const fn new(events: Option<EventBus>, pending: Option<PendingPool>) -> Self {
        Self { events, pending }
    }
}

/// The notification of `notice`.
fn render_notice(notice: &Notice) -> Value {
    let hash = notice.tx.hash;
    match &notice.kind {
        NoticeKind::Pending => {
            let entry = PendingEntry::of(&notice.tx);
            json!({
                "kind": "pending",
                "hash": hash,
                "transaction": entry.transaction,
                "firstSeen": entry.first_seen,
                "transfers": entry.transfers,
            })
        }
        NoticeKind::Mined { block, block_hash, index } => json!({
            "kind": "mined",
            "hash": hash,
            "blockNumber": hex(*block),
            "blockHash": block_hash,
            "transactionIndex": hex(*index),
        }),
        NoticeKind::Replaced { by } => json!({"kind": "replaced", "hash": hash, "replacedBy": by}),
        NoticeKind::Dropped => json!({"kind": "dropped", "hash": hash}),
    }
}

/// Sends `notification`; `Err` ends the subscription (closed: `Ok(None)` inside).
async fn send(
    sink: &jsonrpsee::SubscriptionSink,
    notification: &Value,
) -> Result<bool, jsonrpsee::core::SubscriptionError> {
    let message = serde_json::value::to_raw_value(notification).map_err(|e| e.to_string())?;
    match sink.send_timeout(message, SLOW_SUBSCRIBER_GRACE).await {
        Ok(()) => Ok(true),
        Err(SendTimeoutError::Closed(_)) => Ok(false),
        Err(SendTimeoutError::Timeout(_)) => {
            tracing::info!(target: "ots::rpc", "dropping a subscriber that does not read");
            Err("dropped: this subscriber did not read its notifications fast enough".into())
        }
    }
}

#[jsonrpsee::core::async_trait]
impl Ots2SubscriptionApiServer for Ots2Subscriptions {
    async fn subscribe(
        &self,
        pending: PendingSubscriptionSink,
        kind: String,
        address: Option<Address>,
    ) -> SubscriptionResult {
        let filter = match parse(&kind, address) {
            Ok(f) => f,
            Err(e) => {
                pending.reject(e).await;
                return Ok(());
            }
        };
        if let Filter::Pending(address) = filter {
            let pool = match self.pending.as_ref().map(|p| (p, p.unavailable())) {
                Some((pool, None)) => pool,
                Some((_, Some(why))) => {
                    pending.reject(server_error(why)).await;
                    return Ok(());
                }
                None => {
                    pending
                        .reject(server_error(
                            "pending transactions are off on this server (--max-pending-transactions 0)",
                        ))
                        .await;
                    return Ok(());
                }
            };
            let mut notices = pool.subscribe();
            let sink = pending.accept().await?;
            tracing::debug!(target: "ots::rpc", ?filter, "subscription started");
            loop {
                let notice: Arc<Notice> = tokio::select! {
                    () = sink.closed() => return Ok(()),
                    received = notices.recv() => match received {
                        Ok(notice) => notice,
                        Err(RecvError::Lagged(missed)) => {
                            tracing::info!(target: "ots::rpc", missed, "dropping a subscriber that fell behind");
                            return Err(format!("dropped: this subscriber fell {missed} notices behind").into());
                        }
                        Err(RecvError::Closed) => return Ok(()),
                    },
                };
                if notice.tx.parties().contains(&address) && !send(&sink, &render_notice(&notice)).await? {
                    return Ok(());
                }
            }
        }
        let Some(events) = self.events.as_ref() else {
            pending
                .reject(server_error("this server does not index (serve): only pendingActivity is offered"))
                .await;
            return Ok(());
        };
        let mut events = events.subscribe();
        let sink = pending.accept().await?;
        tracing::debug!(target: "ots::rpc", ?filter, "subscription started");
        loop {
            let event: Arc<IndexEvent> = tokio::select! {
                () = sink.closed() => return Ok(()),
                received = events.recv() => match received {
                    Ok(event) => event,
                    Err(RecvError::Lagged(missed)) => {
                        tracing::info!(target: "ots::rpc", missed, "dropping a subscriber that fell behind");
                        return Err(format!("dropped: this subscriber fell {missed} batches behind").into());
                    }
                    Err(RecvError::Closed) => return Ok(()),
                },
            };
            for notification in render(&event, filter) {
                if !send(&sink, &notification).await? {
                    return Ok(());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use alloy_primitives::{address, B256};

    use super::*;
    use crate::events::{Activity, IndexedBlock};

    #[test]
    fn kinds_and_their_parameters() {
        assert_eq!(parse("newIndexedBlocks", None), Ok(Filter::Blocks));
        let a = address!("00000000000000000000000000000000000000aa");
        assert_eq!(parse("addressActivity", Some(a)), Ok(Filter::Address(a)));
        assert!(parse("addressActivity", None).is_err());
        assert!(parse("newIndexedBlocks", Some(a)).is_err());
        let e = parse("newHeads", None).expect_err("unknown");
        assert!(
            e.message().contains("newIndexedBlocks, addressActivity, pendingActivity"),
            "{}",
            e.message()
        );
        assert_eq!(parse("pendingActivity", Some(a)), Ok(Filter::Pending(a)));
        assert!(parse("pendingActivity", None).is_err());
    }

    #[test]
    fn notifications() {
        let a = address!("00000000000000000000000000000000000000aa");
        let b = address!("00000000000000000000000000000000000000bb");
        let block = IndexedBlock {
            number: 5,
            hash: B256::repeat_byte(1),
            contracts: 1,
            transfer_logs: 2,
            activity: vec![
                Activity { address: a, kind: ActivityKind::Erc20Transfer, index: Some(3) },
                Activity { address: b, kind: ActivityKind::Erc20Transfer, index: Some(3) },
                Activity { address: a, kind: ActivityKind::BlockRewarded, index: None },
                Activity { address: a, kind: ActivityKind::Withdrawal, index: Some(9) },
            ],
        };
        let event = IndexEvent::Indexed(vec![block]);
        assert_eq!(
            render(&event, Filter::Blocks),
            vec![
                json!({"blockNumber": "0x5", "hash": B256::repeat_byte(1), "contracts": 1, "transferLogs": 2, "activity": 4})
            ]
        );
        let mine = render(&event, Filter::Address(a));
        assert_eq!(mine.len(), 3);
        assert_eq!(mine[0]["kind"], json!("erc20Transfer"));
        assert_eq!(mine[0]["transactionIndex"], json!("0x3"));
        assert_eq!(mine[0]["txId"], json!((5u64 << 20) | 3));
        assert_eq!(mine[1]["kind"], json!("blockRewarded"));
        assert_eq!(mine[2]["withdrawalIndex"], json!("0x9"));
        let removed = IndexEvent::Removed(vec![(5, B256::repeat_byte(1))]);
        assert_eq!(render(&removed, Filter::Address(a))[0]["removed"], json!(true));
    }
}
