//! An indexer following the node's head in a task of its own, until the test stops it.

use ots_indexer::sync::{Indexer, SyncError};
use tokio::{sync::watch, task::JoinHandle};

/// The running follow loop.
#[derive(Debug)]
pub struct Follower {
    stop: watch::Sender<bool>,
    task: JoinHandle<(Indexer, Result<(), SyncError>)>,
}

impl Follower {
    /// Starts `indexer.follow` in a task.
    pub fn start(indexer: Indexer) -> Self {
        let (stop, stop_rx) = watch::channel(false);
        let task = tokio::spawn(async move {
            let result = indexer.follow(stop_rx).await;
            (indexer, result)
        });
        Self { stop, task }
    }

    /// Why the loop ended by itself, if it did (it ends only on an error it does not retry).
    pub async fn ended_with(&mut self) -> Option<String> {
        if !self.task.is_finished() {
            return None;
        }
        Some(match (&mut self.task).await {
            Ok((_, Err(e))) => e.to_string(),
            Ok((_, Ok(()))) => "no error".to_owned(),
            Err(e) => format!("a panic: {e}"),
        })
    }

    /// Stops the loop, checks that it never failed and marks the database closed.
    pub async fn stop(self) {
        self.stop.send(true).expect("stop");
        let (indexer, result) = self.task.await.expect("follower task");
        result.expect("the follower never failed");
        indexer.close().await.expect("close");
    }
}
