//! Where a list or search page's time goes: the index's part (finding the page's transaction ids
//! in MDBX) apart from the rest (the node's transactions and receipts, and building the answer).
//! Each page logs one debug event on target `ots::rpc::timing`, so that an operator (or
//! `scripts/bench-scale.sh`) can tell our part from the node's with
//! `--log ots::rpc::timing=debug,info`.

use std::time::{Duration, Instant};

use tracing::debug;

/// Times one page; logs when dropped, whether the page was answered or failed.
#[derive(Debug)]
pub(crate) struct PageTimer {
    method: &'static str,
    started: Instant,
    index: Option<Duration>,
    ids: usize,
}

impl PageTimer {
    /// Starts timing a page of `method`.
    pub(crate) fn start(method: &'static str) -> Self {
        Self { method, started: Instant::now(), index: None, ids: 0 }
    }

    /// The index's part is done: it found `ids` transactions.
    pub(crate) fn index_done(&mut self, ids: usize) {
        self.index = Some(self.started.elapsed());
        self.ids = ids;
    }

    /// One more part of the index's work of a page whose reads alternate with the node's
    /// (a walked list): `spent` reading `ids` transactions' ids.
    pub(crate) fn index_part(&mut self, spent: Duration, ids: usize) {
        self.index = Some(self.index.unwrap_or_default() + spent);
        self.ids += ids;
    }
}

impl Drop for PageTimer {
    fn drop(&mut self) {
        let total = self.started.elapsed();
        let index = self.index.unwrap_or(total);
        debug!(
            target: "ots::rpc::timing",
            method = self.method,
            ids = self.ids,
            index_us = index.as_micros() as u64,
            rest_us = total.saturating_sub(index).as_micros() as u64,
            "page timing"
        );
    }
}
