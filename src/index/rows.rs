//! Every family's part of one write, in roster order: what both write paths drive block by
//! block and write at the end, without naming a family (docs/architecture.md, "Two write
//! paths").

use tracing::debug;

use super::{
    error::WriteError,
    family::{Family, ForEachFamily},
    gather::{BlockRows, Gatherer, Gathering, Writing},
    journal,
    kinds::Kinds,
    recent,
    roster::each_family,
    undo::UndoLog,
    window::WindowStart,
};
use crate::{
    db::{Db, DbResult, WriteTxn},
    etl::spill_over,
};

/// What the families gather over one write.
#[derive(Debug)]
pub(super) struct Rows {
    families: Vec<(&'static str, Box<dyn Gatherer>)>,
    /// How each token's logs are indexed: not rows, but kept for as long as the rows are.
    pub(super) kinds: Kinds,
}

/// What a write's end wrote, beyond its rows.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Written {
    /// Ids added to the transfer indexes.
    pub(super) transfer_ids: u64,
    /// (address, transaction) pairs added to the appearance index.
    pub(super) appearances: u64,
}

impl Rows {
    /// Every family's part of a write that gathers as `gathering` says.
    pub(super) fn new(gathering: &Gathering) -> Self {
        struct Start<'a>(&'a Gathering, Vec<(&'static str, Box<dyn Gatherer>)>);
        impl ForEachFamily for Start<'_> {
            type Error = std::convert::Infallible;
            fn family<F: Family>(&mut self) -> Result<(), Self::Error> {
                self.1.extend(F::gatherer(self.0).map(|g| (F::NAME, g)));
                Ok(())
            }
        }
        let mut start = Start(gathering, Vec::new());
        let Ok(()) = each_family(&mut start);
        Self { families: start.1, kinds: Kinds::default() }
    }

    /// Gives `block` to every family.
    pub(super) fn collect(
        &mut self,
        block: &BlockRows<'_, '_>,
        undo: &mut UndoLog,
    ) -> Result<(), WriteError> {
        self.families.iter_mut().try_for_each(|(_, family)| family.collect(block, undo))
    }

    /// Spills the largest buffers until the rows held in memory fit in `budget` bytes.
    pub(super) fn spill_over(&mut self, budget: usize) -> DbResult<()> {
        let buffers = self.families.iter_mut().flat_map(|(_, family)| family.buffers()).collect();
        Ok(spill_over(buffers, budget)?)
    }

    /// Writes every family's rows through `txn`, the undo records `undo` holds, and drops what
    /// the blocks leaving the reorg window (as it starts at `window` once `txn` commits) kept
    /// in it. The families that resolve beside the others do so one after the other on a second
    /// core, against snapshots of the state `txn` started from, while the others write; each
    /// writes, after those, as soon as it is resolved.
    pub(super) fn write(
        self,
        db: &Db,
        txn: &WriteTxn,
        window: WindowStart,
        undo: UndoLog,
    ) -> Result<Written, WriteError> {
        let leaving = recent::take_leaving(txn, window)?;
        let mut writing = Writing { db, txn, window, leaving, undo, transfer_ids: 0, appearances: 0 };
        let (beside, inline): (Vec<_>, Vec<_>) =
            self.families.into_iter().partition(|(_, family)| family.resolves_beside());
        std::thread::scope(|scope| -> Result<(), WriteError> {
            // Each family resolved beside comes back as soon as it is, in roster order: the
            // writer writes it while the next one resolves.
            let (sender, resolved) = std::sync::mpsc::channel();
            let resolving = scope.spawn(move || {
                for (name, mut family) in beside {
                    let (started, cpu) = (std::time::Instant::now(), super::thread_cpu::now());
                    let outcome = family.resolve(db, window).map(|()| (name, family));
                    debug!(
                        target: "ots::index",
                        family = name,
                        seconds = started.elapsed().as_secs_f64(),
                        cpu_seconds = (super::thread_cpu::now() - cpu).as_secs_f64(),
                        "family resolved beside"
                    );
                    let failed = outcome.is_err();
                    // The writer gone (its own error) or this family failed: no use going on.
                    if sender.send(outcome).is_err() || failed {
                        break;
                    }
                }
            });
            for (name, family) in inline {
                timed(name, family, &mut writing)?;
            }
            let mut waited = std::time::Instant::now();
            while let Ok(outcome) = resolved.recv() {
                let (name, family) = outcome?;
                debug!(
                    target: "ots::index",
                    family = name,
                    seconds = waited.elapsed().as_secs_f64(),
                    "family resolved beside waited for"
                );
                timed(name, family, &mut writing)?;
                waited = std::time::Instant::now();
            }
            // Every family sent, or the thread panicked before it could: its panic goes on here.
            resolving.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            Ok(())
        })?;
        let Writing { undo, transfer_ids, appearances, .. } = writing;
        undo.write(txn)?;
        journal::prune(txn, window)?;
        Ok(Written { transfer_ids, appearances })
    }
}

/// Writes one family's rows, saying how long it took.
fn timed(name: &'static str, family: Box<dyn Gatherer>, writing: &mut Writing<'_>) -> Result<(), WriteError> {
    let (started, cpu) = (std::time::Instant::now(), super::thread_cpu::now());
    family.write(writing)?;
    debug!(
        target: "ots::index",
        family = name,
        seconds = started.elapsed().as_secs_f64(),
        cpu_seconds = (super::thread_cpu::now() - cpu).as_secs_f64(),
        "family written"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::{mpsc, Arc, Mutex};
    use std::time::Duration;

    use super::*;
    use crate::db::{AccessMode, Db};

    type Events = Arc<Mutex<Vec<String>>>;

    /// A family that says what it does; resolved beside the others when `beside` says how.
    #[derive(Debug)]
    struct Told {
        name: &'static str,
        events: Events,
        beside: Option<Beside>,
        /// Fired once written.
        written: Option<mpsc::Sender<()>>,
    }

    #[derive(Debug)]
    enum Beside {
        Resolves,
        Fails,
        /// Resolves once signalled.
        Waits(Mutex<mpsc::Receiver<()>>),
    }

    impl Told {
        fn say(&self, what: &str) {
            self.events.lock().expect("events").push(format!("{what} {}", self.name));
        }
    }

    fn marker(name: &str) -> WriteError {
        WriteError::BadLabel { label: name.to_owned(), block: 0 }
    }

    impl Gatherer for Told {
        fn collect(&mut self, _: &BlockRows<'_, '_>, _: &mut UndoLog) -> Result<(), WriteError> {
            Ok(())
        }

        fn resolves_beside(&self) -> bool {
            self.beside.is_some()
        }

        fn resolve(&mut self, _: &Db, _: WindowStart) -> Result<(), WriteError> {
            self.say("resolve");
            match &self.beside {
                Some(Beside::Waits(signal)) => {
                    let signal = signal.lock().expect("signal");
                    // The family before is written while this one resolves, or never.
                    signal.recv_timeout(Duration::from_secs(20)).map_err(|_| marker(self.name))
                }
                Some(Beside::Fails) => Err(marker(self.name)),
                Some(Beside::Resolves) | None => Ok(()),
            }
        }

        fn write(self: Box<Self>, _: &mut Writing<'_>) -> Result<(), WriteError> {
            self.say("write");
            if let Some(written) = &self.written {
                let _ = written.send(());
            }
            Ok(())
        }
    }

    fn write(families: Vec<Told>) -> Result<Written, WriteError> {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("db");
        let txn = db.begin_write().expect("write");
        let families = families.into_iter().map(|f| (f.name, Box::new(f) as Box<dyn Gatherer>)).collect();
        let rows = Rows { families, kinds: Kinds::default() };
        rows.write(&db, &txn, WindowStart::Closed, UndoLog::keeping(WindowStart::Closed))
    }

    #[test]
    fn a_family_resolved_beside_is_written_while_the_next_one_resolves() {
        let events = Events::default();
        let (written, signal) = mpsc::channel();
        let told = |name, beside, written| Told { name, events: events.clone(), beside, written };
        write(vec![
            told("first", Some(Beside::Resolves), Some(written)),
            told("inline", None, None),
            told("second", Some(Beside::Waits(Mutex::new(signal))), None),
        ])
        .expect("the second resolves once the first is written");
        let events = events.lock().expect("events").clone();
        assert_eq!(events.iter().filter(|e| e.starts_with("write")).count(), 3, "{events:?}");
        let at = |e: &str| events.iter().position(|x| x == e).expect(e);
        assert!(at("write inline") < at("write first"), "{events:?}");
        assert!(at("write first") < at("write second"), "{events:?}");
    }

    #[test]
    fn a_family_failing_beside_stops_the_write_and_the_resolves_after_it() {
        let events = Events::default();
        let told = |name, beside| Told { name, events: events.clone(), beside, written: None };
        let error = write(vec![
            told("failing", Some(Beside::Fails)),
            told("inline", None),
            told("after", Some(Beside::Waits(Mutex::new(mpsc::channel().1)))),
        ])
        .expect_err("the failure");
        assert!(matches!(&error, WriteError::BadLabel { label, .. } if label == "failing"), "{error}");
        let events = events.lock().expect("events").clone();
        assert!(!events.iter().any(|e| e == "resolve after" || e == "write failing"), "{events:?}");
    }
}
