//! The sorter: rows in, rows out in order, spilling sorted runs to disk when its buffer is full.

use std::{
    cmp::Reverse,
    collections::{BinaryHeap, VecDeque},
    sync::mpsc::{Receiver, SyncSender},
    sync::Arc,
};

use tracing::debug;

use super::{
    collapse::{collapse, Collapse},
    run::{PendingRun, Run, RunReader},
    EtlError, Record, RunDir,
};

/// The most runs a merge reads at once, each through an open file. A sorter with more merges its
/// oldest runs into one first, as often as it takes: a stage given a large `--stage-max-run-mib`
/// or a small `--stage-buffer-mib` spills thousands of runs, and two sorters merge at once, which
/// must stay under the usual limit of 1,024 open files. A default stage of the 21 M benchmark
/// chain has at most about 230 runs open at once, in two sorters.
const MERGE_WIDTH: usize = 256;

/// Rows gathered in any order, given back sorted (equal rows all kept).
#[derive(Debug)]
pub struct Sorter<R: Record> {
    buffer: Vec<R>,
    /// Rows the buffer holds before it is spilled as a run.
    capacity: usize,
    spill: Option<Spill>,
    /// The most runs merged at once.
    merge_width: usize,
    /// Folds rows of one group into the least of them, see [`Sorter::collapsing`].
    collapse: Option<Collapse<R>>,
    /// How many leading bytes of an encoded row are its key, see [`Sorter::keyed`].
    key_bytes: Option<usize>,
}

#[derive(Debug)]
struct Spill {
    dir: Arc<RunDir>,
    /// Runs being sorted and written on the run directory's spill thread.
    pending: Vec<PendingRun>,
    /// Rows spilled so far.
    rows: u64,
}

impl<R: Record> Default for Sorter<R> {
    fn default() -> Self {
        Self::in_memory()
    }
}

impl<R: Record> Sorter<R> {
    /// A sorter that keeps every row in memory (a batch of the incremental path).
    pub const fn in_memory() -> Self {
        Self {
            buffer: Vec::new(),
            capacity: usize::MAX,
            spill: None,
            merge_width: MERGE_WIDTH,
            collapse: None,
            key_bytes: None,
        }
    }

    /// A sorter that spills a sorted run into `dir` whenever its buffer holds `budget_bytes` of
    /// rows (as laid out in memory; at least one row).
    pub fn spilling(dir: Arc<RunDir>, budget_bytes: usize) -> Self {
        let capacity = (budget_bytes / std::mem::size_of::<R>().max(1)).max(1);
        Self {
            buffer: Vec::new(),
            capacity,
            spill: Some(Spill { dir, pending: Vec::new(), rows: 0 }),
            merge_width: MERGE_WIDTH,
            collapse: None,
            key_bytes: None,
        }
    }

    /// The sorter for a family that needs one row per group of rows (a holding keeps its
    /// pair's first transaction; a stage's totals keep an address's sum): once sorted, the
    /// buffer and every run fold each group into its least row with `absorb`, so the rest are
    /// neither written out nor merged. Rows from different runs are not compared: the sorted
    /// rows may still hold several of a group, least first.
    pub fn collapsing(mut self, absorb: Collapse<R>) -> Self {
        self.collapse = Some(absorb);
        self
    }

    /// Says that a row's key — what the writer groups its rows by — is its first `bytes` bytes
    /// as encoded (an address: 20; an address pair: 40): its runs then count their keys, and
    /// [`Sorted::keys_at_most`] bounds a spilled sorter's keys by them rather than by its rows.
    pub const fn keyed(mut self, bytes: usize) -> Self {
        self.key_bytes = Some(bytes);
        self
    }

    /// Adds a row.
    pub fn push(&mut self, row: R) -> Result<(), EtlError> {
        if self.buffer.capacity() == 0 && self.spill.is_some() {
            // A spilling buffer's whole room is reserved at once: grown by doubling, each step
            // copied the rows into fresh pages the kernel zeroed first, twice the memory touched
            // per run (a fifth of the stage writer's time on the 21 M chain). Pages untouched
            // stay unused address space: what the buffer holds is counted by its rows.
            self.buffer.reserve_exact(self.capacity);
        }
        self.buffer.push(row);
        if self.buffer.len() >= self.capacity {
            self.flush()?;
        }
        Ok(())
    }

    /// Whether no row was added.
    pub fn is_empty(&self) -> bool {
        self.buffer.is_empty() && self.spill.as_ref().is_none_or(|s| s.rows == 0)
    }

    /// Rows added so far.
    pub fn len(&self) -> u64 {
        self.buffer.len() as u64 + self.spill.as_ref().map_or(0, |s| s.rows)
    }

    /// Bytes the buffer's rows take in memory (a spilling buffer's room beyond them is reserved
    /// address space the rows have not touched yet).
    pub fn buffered_bytes(&self) -> usize {
        self.buffer.len() * std::mem::size_of::<R>()
    }

    /// Hands the buffer to the spill thread, which sorts it and writes it out as a run (nothing
    /// for an in-memory sorter). The buffer is freed once written: the memory goes to whichever
    /// sorter fills up next.
    pub fn flush(&mut self) -> Result<(), EtlError> {
        let Some(spill) = &mut self.spill else { return Ok(()) };
        if self.buffer.is_empty() {
            return Ok(());
        }
        let rows = std::mem::take(&mut self.buffer);
        spill.rows += rows.len() as u64;
        spill.pending.push(spill.dir.spill(rows, self.collapse, self.key_bytes));
        Ok(())
    }

    /// Waits for the runs being written, so a test can reach their files.
    #[cfg(test)]
    fn settle(&mut self) {
        if let Some(spill) = self.spill.as_mut() {
            spill.pending = std::mem::take(&mut spill.pending).into_iter().map(PendingRun::settled).collect();
        }
    }

    /// Every row, in order.
    pub fn into_sorted(mut self) -> Result<Sorted<R>, EtlError> {
        self.buffer.sort_unstable();
        collapse(&mut self.buffer, self.collapse);
        let mut runs = Vec::new();
        let dir = self.spill.as_ref().map(|s| s.dir.clone());
        for pending in self.spill.map(|s| s.pending).unwrap_or_default() {
            runs.push(pending.wait()?);
        }
        // One place is kept for the buffer, which the final merge reads beside the runs.
        let width = self.merge_width.max(2);
        if let Some(dir) = dir.filter(|_| runs.len() >= width) {
            let many = runs.len();
            while runs.len() >= width {
                let oldest: Vec<Run> = runs.drain(..width).collect();
                runs.push(merge_runs::<R>(&dir, oldest, self.key_bytes)?);
            }
            debug!(target: "ots::etl", runs = many, width, left = runs.len(), "runs merged in groups first");
        }
        let rows = self.buffer.len() as u64 + runs.iter().map(Run::rows).sum::<u64>();
        // A key may be in several runs: counted once in each.
        let keys = self.buffer.len() as u64 + runs.iter().map(Run::keys).sum::<u64>();
        if runs.is_empty() {
            return Ok(Sorted { inner: Inner::Memory(self.buffer.into_iter()), rows, keys });
        }
        Ok(Sorted { inner: Inner::Merging(prefetch(Merge::start(runs, self.buffer)?)), rows, keys })
    }
}

/// Merges `runs` into one new run under `dir` (their files go once read).
fn merge_runs<R: Record>(
    dir: &Arc<RunDir>,
    runs: Vec<Run>,
    key_bytes: Option<usize>,
) -> Result<Run, EtlError> {
    let mut merge = Merge::<R>::start(runs, Vec::new())?;
    let mut out = dir.writer(key_bytes)?;
    while let Some(row) = merge.next_row()? {
        out.push(&row)?;
    }
    drop(merge);
    out.finish()
}

/// Where the merge's rows come from: a run (its index) or the buffer never spilled.
const MEMORY: usize = usize::MAX;

#[derive(Debug)]
struct Merge<R: Record> {
    heap: BinaryHeap<Reverse<(R, usize)>>,
    readers: Vec<RunReader<R>>,
    memory: std::vec::IntoIter<R>,
}

impl<R: Record> Merge<R> {
    /// The merge of `runs` and the sorted rows of `memory`, each source's first row in the heap.
    fn start(runs: Vec<Run>, memory: Vec<R>) -> Result<Self, EtlError> {
        let mut readers = Vec::with_capacity(runs.len());
        for run in runs {
            readers.push(run.reader()?);
        }
        let mut merge =
            Self { heap: BinaryHeap::with_capacity(readers.len() + 1), readers, memory: memory.into_iter() };
        for source in 0..merge.readers.len() {
            merge.refill(source)?;
        }
        merge.refill(MEMORY)?;
        Ok(merge)
    }

    fn refill(&mut self, source: usize) -> Result<(), EtlError> {
        let next = match source {
            MEMORY => self.memory.next(),
            run => self.readers[run].next_row()?,
        };
        if let Some(row) = next {
            self.heap.push(Reverse((row, source)));
        }
        Ok(())
    }

    /// The least row of all sources. Its source's next row takes its place at the top of the
    /// heap, sifted down once (a pop and a push would sift twice: the merge's main cost).
    fn next_row(&mut self) -> Result<Option<R>, EtlError> {
        let Some(mut top) = self.heap.peek_mut() else { return Ok(None) };
        let source = top.0 .1;
        let next = match source {
            MEMORY => self.memory.next(),
            run => self.readers[run].next_row()?,
        };
        let Reverse((row, _)) = match next {
            Some(next) => std::mem::replace(&mut *top, Reverse((next, source))),
            None => std::collections::binary_heap::PeekMut::pop(top),
        };
        Ok(Some(row))
    }
}

/// Rows the merge thread hands over at a time.
const PREFETCH_ROWS: usize = 8192;

/// Chunks the merge thread fills ahead of the reader: more than a balance book's moves (at most
/// 131,072), so that the merge goes on while its reader replays a book instead of waiting for it.
/// With 4 the balances' merge alternated the two (21 M chain: 14.0-14.2 s, 11.7-12.2 s with 20;
/// docs/benchmarks-history.md, "Merging ahead of the balance books").
const PREFETCH_CHUNKS: usize = 20;

/// Rows a merge reads ahead of its reader, at most (a reader that replays rows in groups keeps
/// its groups smaller than this to overlap with the merge).
pub const ROWS_AHEAD: usize = PREFETCH_ROWS * PREFETCH_CHUNKS;

/// The merged rows, as a thread of their own merges them ahead of the reader (the heap merge and
/// the decoding take a core; the reader writes the rows into MDBX on another). An empty chunk
/// ends them: a thread that stopped without one is an error, never a short stream.
///
/// Read chunks go back to the merge thread to be filled again: a chunk allocated anew each time
/// lands on fresh pages the kernel zeroes first, which took a third of the merge thread's time
/// in the balances' merge (docs/benchmarks-history.md).
#[derive(Debug)]
struct Prefetched<R> {
    chunks: Receiver<Result<VecDeque<R>, EtlError>>,
    spent: SyncSender<VecDeque<R>>,
    current: VecDeque<R>,
    ended: bool,
}

/// Sends the merge's rows in chunks: `Ok(true)` once all are sent, `Ok(false)` if the reader
/// stopped reading.
fn pump<R: Record>(
    merge: &mut Merge<R>,
    out: &SyncSender<Result<VecDeque<R>, EtlError>>,
    spent: &Receiver<VecDeque<R>>,
) -> Result<bool, EtlError> {
    loop {
        let mut chunk = spent.try_recv().unwrap_or_else(|_| VecDeque::with_capacity(PREFETCH_ROWS));
        while chunk.len() < PREFETCH_ROWS {
            match merge.next_row()? {
                Some(row) => chunk.push_back(row),
                None if chunk.is_empty() => return Ok(true),
                None => break,
            }
        }
        if out.send(Ok(chunk)).is_err() {
            return Ok(false);
        }
    }
}

fn prefetch<R: Record>(mut merge: Merge<R>) -> Prefetched<R> {
    let (out, chunks) = std::sync::mpsc::sync_channel(PREFETCH_CHUNKS);
    let (spent, refill) = std::sync::mpsc::sync_channel(PREFETCH_CHUNKS);
    let spawned = std::thread::Builder::new().name("ots-merge".into()).spawn(move || {
        let pumped = pump(&mut merge, &out, &refill);
        // The runs are removed before the reader hears the end.
        drop(merge);
        let _ = match pumped {
            Ok(true) => out.send(Ok(VecDeque::new())),
            Ok(false) => Ok(()),
            Err(e) => out.send(Err(e)),
        };
    });
    if let Err(e) = spawned {
        // No thread to be had: the reader sees the error where it would see a run's.
        let (failed, chunks) = std::sync::mpsc::sync_channel(1);
        let _ = failed.send(Err(EtlError::Io { path: std::path::PathBuf::new(), error: e }));
        return Prefetched { chunks, spent, current: VecDeque::new(), ended: false };
    }
    Prefetched { chunks, spent, current: VecDeque::new(), ended: false }
}

impl<R> Prefetched<R> {
    fn next_row(&mut self) -> Option<Result<R, EtlError>> {
        loop {
            if let Some(row) = self.current.pop_front() {
                return Some(Ok(row));
            }
            if self.ended {
                return None;
            }
            match self.chunks.recv() {
                Ok(Ok(chunk)) if chunk.is_empty() => self.ended = true,
                Ok(Ok(chunk)) => {
                    // A full queue of spent chunks (or a finished thread) drops this one.
                    let _ = self.spent.try_send(std::mem::replace(&mut self.current, chunk));
                }
                Ok(Err(e)) => {
                    self.ended = true;
                    return Some(Err(e));
                }
                Err(_) => {
                    self.ended = true;
                    let stopped =
                        std::io::Error::other("the merge thread stopped before the end of the runs");
                    return Some(Err(EtlError::Io { path: std::path::PathBuf::new(), error: stopped }));
                }
            }
        }
    }
}

#[derive(Debug)]
enum Inner<R: Record> {
    Memory(std::vec::IntoIter<R>),
    Merging(Prefetched<R>),
}

/// A sorter's rows in order.
#[derive(Debug)]
pub struct Sorted<R: Record> {
    inner: Inner<R>,
    /// Rows in all.
    rows: u64,
    /// At least the keys the rows hold: those of each run (its rows where the sorter was not
    /// [`Sorter::keyed`]) and the rows never spilled.
    keys: u64,
}

impl<R: Record> Iterator for Sorted<R> {
    type Item = Result<R, EtlError>;

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.inner {
            Inner::Memory(rows) => rows.next().map(Ok),
            Inner::Merging(rows) => rows.next_row(),
        }
    }
}

impl<R: Record> Sorted<R> {
    /// How many distinct keys the rows hold, for choosing how to write them before reading
    /// them: exact when they never left memory; else an upper bound, the sum of each run's
    /// keys for a [`Sorter::keyed`] sorter whose `key` is the one it was keyed by, the rows
    /// for any other.
    pub fn keys_at_most<K: PartialEq>(&self, key: impl Fn(&R) -> K) -> u64 {
        match &self.inner {
            Inner::Memory(rows) => rows.as_slice().chunk_by(|a, b| key(a) == key(b)).count() as u64,
            Inner::Merging(_) => self.keys.min(self.rows),
        }
    }

    /// How many rows there are (repeats included).
    pub const fn rows(&self) -> u64 {
        self.rows
    }

    /// The rows, each split into a key and a value, grouped by key: each group's values in
    /// order, equal ones once (rows must sort by key, then value, as tuples do).
    pub fn groups<K: PartialEq, V: PartialEq, F: Fn(R) -> (K, V)>(self, split: F) -> Groups<R, K, V, F> {
        self.groups_in_pieces(split, usize::MAX, |_, _| false)
    }

    /// As [`Sorted::groups`], but a group of more than `most` values comes as several pieces of
    /// at most `most` each (and of more where `together` holds for values on both sides of the
    /// cut: a piece never parts them), one after the other with the same key: what a write
    /// takes when one key may hold more values than it should hold in memory at once (the
    /// busiest address of a large stage). A value repeated across a piece's end is still given
    /// once.
    pub fn groups_in_pieces<K: PartialEq, V: PartialEq, F: Fn(R) -> (K, V)>(
        self,
        split: F,
        most: usize,
        together: fn(&V, &V) -> bool,
    ) -> Groups<R, K, V, F> {
        Groups { sorted: self, split, pending: None, error: None, rows: 0, most: most.max(1), together }
    }
}

/// A sorted stream's groups of values that share a key (see [`Sorted::groups`]). An error ends
/// the groups; [`Groups::finish`] gives it back.
#[derive(Debug)]
pub struct Groups<R: Record, K, V, F> {
    sorted: Sorted<R>,
    split: F,
    pending: Option<(K, V)>,
    error: Option<EtlError>,
    rows: u64,
    /// The most values a group gives at once.
    most: usize,
    /// Whether two values must come in the same piece.
    together: fn(&V, &V) -> bool,
}

impl<R: Record, K: PartialEq, V: PartialEq, F: Fn(R) -> (K, V)> Groups<R, K, V, F> {
    fn next_row(&mut self) -> Option<(K, V)> {
        if let Some(row) = self.pending.take() {
            return Some(row);
        }
        match self.sorted.next()? {
            Ok(row) => Some((self.split)(row)),
            Err(e) => {
                self.error = Some(e);
                None
            }
        }
    }

    /// The distinct rows the groups held, or the error that cut them short.
    pub fn finish(self) -> Result<u64, EtlError> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(self.rows),
        }
    }
}

impl<R: Record, K: PartialEq, V: PartialEq, F: Fn(R) -> (K, V)> Iterator for Groups<R, K, V, F> {
    type Item = (K, Vec<V>);

    fn next(&mut self) -> Option<Self::Item> {
        let (key, first) = self.next_row()?;
        let mut values = vec![first];
        while let Some((k, value)) = self.next_row() {
            if k != key {
                self.pending = Some((k, value));
                break;
            }
            if values.last() == Some(&value) {
                continue;
            }
            // Cut only before a new value: one repeated across the cut would be given twice.
            if values.len() >= self.most && values.last().is_none_or(|last| !(self.together)(last, &value)) {
                self.pending = Some((k, value));
                break;
            }
            values.push(value);
        }
        self.rows += values.len() as u64;
        Some((key, values))
    }
}

/// A sorter's buffer, whatever its rows: what a stage weighs and spills to stay in its budget.
pub trait Buffer {
    /// Bytes the buffer holds in memory.
    fn buffered_bytes(&self) -> usize;
    /// Spills it as a sorted run.
    fn flush(&mut self) -> Result<(), EtlError>;
}

impl<R: Record> Buffer for Sorter<R> {
    fn buffered_bytes(&self) -> usize {
        Sorter::buffered_bytes(self)
    }
    fn flush(&mut self) -> Result<(), EtlError> {
        Sorter::flush(self)
    }
}

/// Spills the largest of `buffers` until together they hold at most `budget` bytes.
pub fn spill_over(mut buffers: Vec<&mut dyn Buffer>, budget: usize) -> Result<(), EtlError> {
    let mut total: usize = buffers.iter().map(|b| b.buffered_bytes()).sum();
    buffers.sort_by_key(|b| std::cmp::Reverse(b.buffered_bytes()));
    for buffer in buffers {
        if total <= budget {
            break;
        }
        total -= buffer.buffered_bytes();
        buffer.flush()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use alloy_primitives::Address;

    use super::*;

    fn rows(n: u64) -> Vec<(Address, u64)> {
        // A fixed scramble: addresses and ids in no order, with repeats.
        (0..n).map(|i| (Address::with_last_byte((i * 37 % 11) as u8), i * 7919 % 1009)).collect()
    }

    /// Pieces of at most 4 values: each key's values come in order, each once (the repeats of
    /// `rows` included, across a piece's end too), and joined they are the key's whole group.
    #[test]
    fn groups_in_pieces_join_into_the_whole_groups() {
        let sorted = |rows: Vec<(Address, u64)>| {
            let mut sorter = Sorter::in_memory();
            for row in rows {
                sorter.push(row).expect("push");
            }
            sorter.into_sorted().expect("sorted")
        };
        // Repeats on both sides of where the pieces are cut.
        let mut input = rows(2_500);
        input.extend([(Address::with_last_byte(3), 4), (Address::with_last_byte(3), 4)]);
        let mut whole = sorted(input.clone()).groups(|r| r);
        let want: Vec<(Address, Vec<u64>)> = whole.by_ref().collect();
        let distinct = whole.finish().expect("no error");
        let mut pieces = sorted(input.clone()).groups_in_pieces(|r| r, 4, |_, _| false);
        let got: Vec<(Address, Vec<u64>)> = pieces.by_ref().collect();
        assert_eq!(pieces.finish().expect("no error"), distinct);
        assert!(got.iter().all(|(_, values)| (1..=4).contains(&values.len())));
        assert!(got.len() > want.len() * 10, "{} pieces of {} groups", got.len(), want.len());
        let mut joined: Vec<(Address, Vec<u64>)> = Vec::new();
        for (key, values) in got {
            match joined.last_mut() {
                Some((last, all)) if *last == key => all.extend(values),
                _ => joined.push((key, values)),
            }
        }
        assert_eq!(joined, want);
        // Values kept together (here those of one tenth) are never parted by a cut.
        let mut pieces = sorted(input).groups_in_pieces(|r| r, 4, |a, b| a / 10 == b / 10);
        let got: Vec<(Address, Vec<u64>)> = pieces.by_ref().collect();
        pieces.finish().expect("no error");
        for pair in got.windows(2) {
            let [(a, first), (b, second)] = pair else { unreachable!() };
            if a == b {
                assert_ne!(first.last().map(|v| v / 10), second.first().map(|v| v / 10), "{a}");
            }
        }
    }

    #[test]
    fn spilled_rows_come_back_sorted_and_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        let runs = RunDir::create(&dir.path().join("etl-tmp")).expect("run dir");
        let mut sorter = Sorter::spilling(runs.clone(), 100 * std::mem::size_of::<(Address, u64)>());
        for row in rows(2_500) {
            sorter.push(row).expect("push");
        }
        assert_eq!(sorter.len(), 2_500);
        let sorted = sorter.into_sorted().expect("merge");
        // The peak, not the bytes now: the merge thread may have read (and removed) every run
        // of so few rows before this line runs.
        assert!(runs.peak_bytes() > 0, "24 runs spilled");
        // Shared prefixes: a run is smaller than its rows' 28 bytes each.
        assert!(runs.peak_bytes() < 2_500 * 28);
        let got: Vec<_> = sorted.collect::<Result<_, _>>().expect("rows");
        let mut want = rows(2_500);
        want.sort_unstable();
        assert_eq!(got, want);
        assert_eq!(runs.bytes(), 0, "run files are removed once read");
    }

    /// Spilled, a keyed sorter bounds its keys by each run's (11 addresses in each of 25 runs),
    /// not by its rows; in memory the count is exact.
    #[test]
    fn a_keyed_sorter_counts_the_keys_of_its_runs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let runs = RunDir::create(dir.path()).expect("run dir");
        let budget = 100 * std::mem::size_of::<(Address, u64)>();
        let spilled = |keyed: bool| {
            let sorter = Sorter::spilling(runs.clone(), budget);
            let mut sorter = if keyed { sorter.keyed(super::super::ADDRESS_KEY) } else { sorter };
            for row in rows(2_500) {
                sorter.push(row).expect("push");
            }
            sorter.into_sorted().expect("merge").keys_at_most(|row| row.0)
        };
        assert_eq!(spilled(true), 25 * 11);
        assert_eq!(spilled(false), 2_500);
        let mut in_memory = Sorter::in_memory().keyed(super::super::ADDRESS_KEY);
        for row in rows(2_500) {
            in_memory.push(row).expect("push");
        }
        assert_eq!(in_memory.into_sorted().expect("sort").keys_at_most(|row| row.0), 11);
    }

    #[test]
    fn a_collapsing_sorter_keeps_the_least_of_each_group_in_every_run() {
        let dir = tempfile::tempdir().expect("tempdir");
        let runs = RunDir::create(dir.path()).expect("run dir");
        let same = |a: &mut (Address, u64), b: &(Address, u64)| a.0 == b.0;
        let mut sorter =
            Sorter::spilling(runs.clone(), 100 * std::mem::size_of::<(Address, u64)>()).collapsing(same);
        // 1,000 rows over 4 addresses, ids falling: every run holds each address many times.
        for i in 0..1_000_u64 {
            sorter.push((Address::with_last_byte((i % 4) as u8), 1_000 - i)).expect("push");
        }
        let got: Vec<_> = sorter.into_sorted().expect("merge").collect::<Result<_, _>>().expect("rows");
        // Ten runs of at most four rows each: one per address and run, the least first.
        assert!(runs.peak_bytes() > 0, "spilled");
        assert!(got.len() <= 40, "{} rows", got.len());
        assert!(got.windows(2).all(|w| w[0] <= w[1]));
        // Address a's least id is 4 - a (its last row pushed), and it comes first.
        for a in 0..4_u8 {
            let first = got.iter().find(|r| r.0 == Address::with_last_byte(a)).copied();
            assert_eq!(first, Some((Address::with_last_byte(a), 4 - u64::from(a))));
        }
        let mut memory = Sorter::in_memory().collapsing(same);
        for row in [(Address::ZERO, 5_u64), (Address::ZERO, 3), (Address::repeat_byte(1), 9)] {
            memory.push(row).expect("push");
        }
        let got: Vec<_> = memory.into_sorted().expect("sort").collect::<Result<_, _>>().expect("rows");
        assert_eq!(got, [(Address::ZERO, 3), (Address::repeat_byte(1), 9)]);
    }

    #[test]
    fn a_spilling_buffer_takes_its_room_at_once_and_counts_its_rows() {
        let dir = tempfile::tempdir().expect("tempdir");
        let runs = RunDir::create(dir.path()).expect("run dir");
        let size = std::mem::size_of::<(Address, u64)>();
        let mut sorter = Sorter::spilling(runs, 1_000 * size);
        for row in rows(10) {
            sorter.push(row).expect("push");
        }
        // No reallocation (and copy into fresh pages) as it fills up to its spill.
        assert!(sorter.buffer.capacity() >= 1_000, "room for {} rows", sorter.buffer.capacity());
        // The budget weighs rows, not the room reserved for them.
        assert_eq!(sorter.buffered_bytes(), 10 * size);
        let mut memory = Sorter::in_memory();
        memory.push((Address::ZERO, 1_u64)).expect("push");
        assert!(memory.buffer.capacity() < 1_000, "an in-memory sorter grows as it goes");
    }

    #[test]
    fn runs_larger_than_the_read_buffer_merge_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        let runs = RunDir::create(dir.path()).expect("run dir");
        let rows_per_run = 20_000;
        let mut sorter = Sorter::spilling(runs.clone(), rows_per_run * std::mem::size_of::<(Address, u64)>());
        // Scattered addresses and ids: rows share short prefixes, so each run spans several
        // read buffers and rows straddle a buffer's end.
        let scrambled = |i: u64| {
            let x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            (Address::with_last_byte((x >> 56) as u8), x % 1_000_003)
        };
        let n = 3 * rows_per_run as u64 + 7;
        for i in 0..n {
            sorter.push(scrambled(i)).expect("push");
        }
        let got: Vec<_> = sorter.into_sorted().expect("merge").collect::<Result<_, _>>().expect("rows");
        let mut want: Vec<_> = (0..n).map(scrambled).collect();
        want.sort_unstable();
        assert!(runs.peak_bytes() > 3 * 64 * 1024, "each run is larger than a read buffer");
        assert_eq!(got.len(), want.len());
        assert!(got == want, "the merge gives every row back in order");
    }

    /// The same rows through compressed and plain run files: the same rows back, in order,
    /// through runs larger than a read buffer and through the merges of groups of runs, from
    /// files that are zstd frames and smaller than the plain ones.
    #[test]
    fn compressed_runs_give_the_rows_back_from_fewer_bytes() {
        let scrambled = |i: u64| {
            let x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            (Address::with_last_byte((x >> 58) as u8), x % 1_000_003)
        };
        let n = 200_000;
        let mut want: Vec<_> = (0..n).map(scrambled).collect();
        want.sort_unstable();
        let through = |compress: bool| {
            let dir = tempfile::tempdir().expect("tempdir");
            let runs = RunDir::compressing(dir.path(), compress).expect("run dir");
            assert_eq!(runs.compresses(), compress);
            let mut sorter = Sorter::spilling(runs.clone(), 20_000 * std::mem::size_of::<(Address, u64)>());
            sorter.merge_width = 4;
            for i in 0..n {
                sorter.push(scrambled(i)).expect("push");
            }
            let sorted = sorter.into_sorted().expect("merge");
            let first_bytes = std::fs::read_dir(runs.path())
                .expect("dir")
                .filter_map(|e| std::fs::read(e.ok()?.path()).ok())
                .map(|bytes| bytes[..4].to_vec())
                .collect::<Vec<_>>();
            let got: Vec<_> = sorted.collect::<Result<_, _>>().expect("rows");
            assert_eq!(runs.bytes(), 0, "run files are removed once read");
            (got, runs.peak_bytes(), first_bytes)
        };
        let (plain, plain_bytes, plain_heads) = through(false);
        let (packed, packed_bytes, packed_heads) = through(true);
        assert!(plain == want && packed == want, "both give every row back in order");
        assert!(!packed_heads.is_empty() && !plain_heads.is_empty(), "runs are left for the last merge");
        assert!(packed_heads.iter().all(|h| h == &[0x28, 0xb5, 0x2f, 0xfd]), "zstd frames");
        assert!(plain_heads.iter().all(|h| h != &[0x28, 0xb5, 0x2f, 0xfd]));
        assert!(packed_bytes * 10 < plain_bytes * 8, "{packed_bytes} bytes compressed, {plain_bytes} plain");
    }

    #[test]
    fn more_runs_than_a_merge_reads_at_once_merge_in_groups_first() {
        let dir = tempfile::tempdir().expect("tempdir");
        let runs = RunDir::create(dir.path()).expect("run dir");
        let mut sorter = Sorter::spilling(runs.clone(), 40 * std::mem::size_of::<(Address, u64)>());
        sorter.merge_width = 4;
        let n = 1_000;
        for row in rows(n) {
            sorter.push(row).expect("push");
        }
        // 25 runs, and one row still in the buffer.
        sorter.push((Address::repeat_byte(9), 1)).expect("push");
        let files = || std::fs::read_dir(runs.path()).expect("dir").count();
        let sorted = sorter.into_sorted().expect("merge");
        // The final merge reads at most three runs beside the buffer; the merged groups' runs are
        // gone (without the groups, all 25 would be open here).
        assert!(files() <= 3, "{} run files left to merge", files());
        let got: Vec<_> = sorted.collect::<Result<_, _>>().expect("rows");
        let mut want = rows(n);
        want.push((Address::repeat_byte(9), 1));
        want.sort_unstable();
        assert_eq!(got, want);
        assert_eq!(runs.bytes(), 0, "run files are removed once read");
        assert_eq!(files(), 0);
    }

    #[test]
    fn in_memory_and_spilling_agree_and_group() {
        let dir = tempfile::tempdir().expect("tempdir");
        let runs = RunDir::create(dir.path()).expect("run dir");
        let mut memory = Sorter::in_memory();
        let mut spilling = Sorter::spilling(runs, 1);
        for row in rows(300) {
            memory.push(row).expect("push");
            spilling.push(row).expect("push");
        }
        let groups = |sorter: Sorter<(Address, u64)>| {
            let mut groups = sorter.into_sorted().expect("sorted").groups(|r| r);
            let out: Vec<(Address, usize)> = groups.by_ref().map(|(a, ids)| (a, ids.len())).collect();
            let distinct = groups.finish().expect("no error");
            (out, distinct)
        };
        let from_memory = groups(memory);
        assert_eq!(from_memory.0.len(), 11);
        assert_eq!(from_memory.1, from_memory.0.iter().map(|g| g.1 as u64).sum::<u64>());
        assert_eq!(from_memory, groups(spilling));
    }

    #[test]
    fn a_damaged_run_is_an_error_not_a_wrong_row() {
        let dir = tempfile::tempdir().expect("tempdir");
        let runs = RunDir::create(dir.path()).expect("run dir");
        let mut sorter = Sorter::spilling(runs.clone(), 1);
        sorter.push((Address::ZERO, 1_u64)).expect("push");
        sorter.push((Address::ZERO, 2_u64)).expect("push");
        // Damage written while the spill thread still writes the run would be overwritten.
        sorter.settle();
        let file = std::fs::read_dir(runs.path()).expect("dir").next().expect("a run").expect("entry");
        std::fs::write(file.path(), [0u8, 3, 1, 2, 3]).expect("damage");
        let result: Result<Vec<_>, _> = sorter.into_sorted().and_then(|s| s.collect());
        assert!(matches!(result, Err(EtlError::Malformed { .. })), "{result:?}");
    }

    #[test]
    fn a_new_stage_empties_what_a_dead_one_left() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("etl-tmp");
        std::fs::create_dir_all(&path).expect("mkdir");
        std::fs::write(path.join("run-000000.bin"), b"left by a killed stage").expect("write");
        let runs = RunDir::create(&path).expect("run dir");
        assert_eq!(std::fs::read_dir(runs.path()).expect("dir").count(), 0);
        drop(runs);
        assert!(!path.exists(), "a finished stage leaves no directory");
    }
}
