//! Run files: one sorted buffer each, written under a directory of the database that the
//! indexer empties whenever it opens one (a stage that did not commit left nothing to keep).
//!
//! A run is a sequence of rows, each as `shared ‖ suffix length ‖ suffix`: the number of leading
//! bytes it shares with the row before it (at most 255), then the rest. Sorted rows share long
//! prefixes (one address's many ids), so a run is a fraction of its rows' size. A directory may
//! write its runs as one zstd frame each ([`RunDir::compressing`]), under half the bytes again.

use std::{
    fs::File,
    io::{BufReader, BufWriter, Read, Write},
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
};

use super::{
    collapse::{collapse, Collapse},
    EtlError, Record,
};

/// The directory, inside a database directory, that holds a stage's run files.
pub const RUN_DIR_NAME: &str = "etl-tmp";

/// Bytes buffered per run file read or written.
const IO_BUFFER: usize = 64 << 10;

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> EtlError + '_ {
    move |error| EtlError::Io { path: path.to_path_buf(), error }
}

/// Work for the spill thread.
type SpillJob = Box<dyn FnOnce() + Send>;

/// The directory of one stage's run files, with the bytes they hold, and the thread that sorts
/// full buffers and writes them out while the stage goes on gathering.
#[derive(Debug)]
pub struct RunDir {
    path: PathBuf,
    /// Whether run files are written compressed (zstd), see [`RunDir::compressing`].
    compress: bool,
    next: AtomicU64,
    bytes: AtomicU64,
    peak: AtomicU64,
    /// Hands a job to the spill thread, waiting while it is busy with the one before: at most
    /// one buffer is being spilled at a time.
    spill_thread: std::sync::Mutex<Option<std::sync::mpsc::SyncSender<SpillJob>>>,
}

/// A run the spill thread is sorting and writing.
#[derive(Debug)]
pub(super) struct PendingRun(std::sync::mpsc::Receiver<Result<Run, EtlError>>);

impl PendingRun {
    /// The run, once written.
    pub(super) fn wait(self) -> Result<Run, EtlError> {
        self.0.recv().unwrap_or_else(|_| {
            Err(EtlError::Io {
                path: PathBuf::new(),
                error: std::io::Error::other("the spill thread stopped"),
            })
        })
    }

    /// The same run, waited for: its file is whole on disk when this returns.
    #[cfg(test)]
    pub(super) fn settled(self) -> Self {
        let (done, run) = std::sync::mpsc::channel();
        let _ = done.send(self.wait());
        Self(run)
    }
}

/// Threads sorting and writing full buffers as runs. The hand-over is a rendezvous, so a stage's
/// writer waits whenever every one is busy: with one, the gathering waited on its sorts although
/// the cores were not both busy; a second took the 21 M chain's gathering from 84.6–87.4 s to
/// 78.5–78.7 s, for one more buffer in flight (docs/benchmarks-history.md, "two spill threads").
const SPILL_THREADS: usize = 2;

impl RunDir {
    /// Empties (or makes) `path` for a new stage's runs: whatever a stage that never committed
    /// left there is worthless.
    pub fn create(path: &Path) -> Result<Arc<Self>, EtlError> {
        Self::compressing(path, false)
    }

    /// As [`RunDir::create`], its run files written compressed when `compress` says so: zstd's
    /// fastest level takes the prefix-coded rows to under half their bytes, so a stage bounded
    /// by its run files holds about twice the blocks, for the CPU of compressing every row once
    /// and reading it back (docs/operations.md, "Catching up: bulk stages").
    pub fn compressing(path: &Path, compress: bool) -> Result<Arc<Self>, EtlError> {
        Self::clean(path)?;
        std::fs::create_dir_all(path).map_err(io_err(path))?;
        let (jobs, queue) = std::sync::mpsc::sync_channel::<SpillJob>(0);
        let queue = Arc::new(std::sync::Mutex::new(queue));
        let mut spawned = 0;
        for _ in 0..SPILL_THREADS {
            let queue = queue.clone();
            let thread = std::thread::Builder::new().name("ots-spill".into()).spawn(move || loop {
                let job = match queue.lock() {
                    Ok(queue) => queue.recv(),
                    Err(_) => return,
                };
                match job {
                    Ok(job) => job(),
                    Err(_) => return,
                }
            });
            spawned += usize::from(thread.is_ok());
        }
        // Without the thread, spills run inline (see `spill`).
        let spill_thread = (spawned > 0).then_some(jobs);
        Ok(Arc::new(Self {
            path: path.to_path_buf(),
            compress,
            next: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            peak: AtomicU64::new(0),
            spill_thread: std::sync::Mutex::new(spill_thread),
        }))
    }

    /// Sorts `rows` (collapsed by `absorb`, [`super::Sorter::collapsing`]) and writes them as a run
    /// on the spill thread (here, if it is gone).
    pub(super) fn spill<R: Record>(
        self: &Arc<Self>,
        mut rows: Vec<R>,
        absorb: Option<Collapse<R>>,
        key_bytes: Option<usize>,
    ) -> PendingRun {
        let (done, run) = std::sync::mpsc::channel();
        let dir = self.clone();
        let job: SpillJob = Box::new(move || {
            rows.sort_unstable();
            collapse(&mut rows, absorb);
            let _ = done.send(dir.write_run(&rows, key_bytes));
        });
        let job = match self.spill_thread.lock().ok().as_ref().and_then(|t| t.as_ref()) {
            Some(thread) => thread.send(job).err().map(|returned| returned.0),
            None => Some(job),
        };
        if let Some(job) = job {
            job();
        }
        PendingRun(run)
    }

    /// Whether its run files are compressed.
    pub fn compresses(&self) -> bool {
        self.compress
    }

    /// Removes `path` and every run file in it, if it exists.
    pub fn clean(path: &Path) -> Result<(), EtlError> {
        match std::fs::remove_dir_all(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_err(path)(e)),
            _ => Ok(()),
        }
    }

    /// Bytes of the run files in `path`, as another process sees them (0 without any).
    pub fn bytes_in(path: &Path) -> u64 {
        let Ok(entries) = std::fs::read_dir(path) else { return 0 };
        entries.filter_map(|e| e.ok()?.metadata().ok()).map(|m| m.len()).sum()
    }

    /// Bytes the run files hold now.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// The most bytes they held at once.
    pub fn peak_bytes(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn grew(&self, by: u64) {
        let now = self.bytes.fetch_add(by, Ordering::Relaxed) + by;
        self.peak.fetch_max(now, Ordering::Relaxed);
    }

    /// Writes `rows` (sorted) as a new run file.
    fn write_run<R: Record>(self: &Arc<Self>, rows: &[R], key_bytes: Option<usize>) -> Result<Run, EtlError> {
        let mut run = self.writer(key_bytes)?;
        for row in rows {
            run.push(row)?;
        }
        run.finish()
    }

    /// A new run file, to write rows into in order; with `key_bytes`, it counts the keys its
    /// rows hold, a row's key being its first `key_bytes` bytes as encoded (at most 255).
    pub(super) fn writer(self: &Arc<Self>, key_bytes: Option<usize>) -> Result<RunWriter, EtlError> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let path = self.path.join(format!("run-{n:06}.bin"));
        let file = File::create(&path).map_err(io_err(&path))?;
        let sink = Sink::new(file, self.compress).map_err(io_err(&path))?;
        Ok(RunWriter {
            dir: self.clone(),
            out: BufWriter::with_capacity(IO_BUFFER, sink),
            path,
            previous: Vec::new(),
            row: Vec::new(),
            rows: 0,
            key_bytes,
            keys: 0,
        })
    }
}

/// How many leading bytes `a` and `b` share, at most 255 (what a row's header can say). Eight
/// bytes at a time: byte by byte, rows of up to 168 bytes took an eighth longer to write
/// (docs/benchmarks-history.md, "run rows' shared prefixes").
fn shared_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len()).min(255);
    let (a, b) = (&a[..n], &b[..n]);
    let word = |w: &[u8]| {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(w);
        u64::from_le_bytes(bytes)
    };
    let mut shared = 0;
    for (x, y) in a.chunks_exact(8).zip(b.chunks_exact(8)) {
        let differ = word(x) ^ word(y);
        if differ != 0 {
            // Little-endian: the first differing byte holds the lowest set bit.
            return shared + (differ.trailing_zeros() / 8) as usize;
        }
        shared += 8;
    }
    shared + a[shared..].iter().zip(&b[shared..]).take_while(|(x, y)| x == y).count()
}

/// Where a run file's bytes go: the file, or a zstd stream into it.
enum Sink {
    Plain(File),
    Zstd(zstd::stream::write::Encoder<'static, File>),
}

/// zstd's fastest level: the rows are already prefix-coded, and the spill thread that writes
/// them runs beside the gathering on two cores.
const RUN_ZSTD_LEVEL: i32 = 1;

/// zstd's window, as a power of two: what each reader of a run holds in memory (a window and a
/// block), and a merge reads up to two sorters' 256 runs at once. 64 KiB instead of the level's
/// default 512 KiB: the 2 M benchmark chain's runs came to 47.7 % of their bytes against 43.6 %
/// (docs/benchmarks.md, "Compressed run files").
const RUN_ZSTD_WINDOW_LOG: u32 = 16;

/// Bytes buffered on each side of a compressed run's decoder: the decoder holds a window and
/// a block of its own.
const ZSTD_IO_BUFFER: usize = 16 << 10;

impl Sink {
    fn new(file: File, compress: bool) -> std::io::Result<Self> {
        if !compress {
            return Ok(Self::Plain(file));
        }
        let mut encoder = zstd::stream::write::Encoder::new(file, RUN_ZSTD_LEVEL)?;
        encoder.window_log(RUN_ZSTD_WINDOW_LOG)?;
        Ok(Self::Zstd(encoder))
    }

    /// Ends the stream; gives the file back.
    fn finish(self) -> std::io::Result<File> {
        let mut file = match self {
            Self::Plain(file) => file,
            Self::Zstd(encoder) => encoder.finish()?,
        };
        file.flush()?;
        Ok(file)
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Self::Plain(file) => file.write(buf),
            Self::Zstd(encoder) => encoder.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Self::Plain(file) => file.flush(),
            Self::Zstd(encoder) => encoder.flush(),
        }
    }
}

/// A run file being written, row by row in order. One dropped unfinished stays in the
/// directory, which the next stage empties.
pub(super) struct RunWriter {
    dir: Arc<RunDir>,
    path: PathBuf,
    out: BufWriter<Sink>,
    previous: Vec<u8>,
    row: Vec<u8>,
    rows: u64,
    key_bytes: Option<usize>,
    keys: u64,
}

impl RunWriter {
    /// Appends `r`, which must not sort before the row pushed last.
    pub(super) fn push<R: Record>(&mut self, r: &R) -> Result<(), EtlError> {
        self.row.clear();
        r.encode(&mut self.row);
        let shared = shared_prefix(&self.previous, &self.row);
        let suffix = &self.row[shared..];
        // Rows are tens of bytes; a longer one is a bug in its encoder, not bad input.
        let suffix_len = u8::try_from(suffix.len()).map_err(|_| EtlError::Io {
            path: self.path.clone(),
            error: std::io::Error::other("a row longer than 255 bytes"),
        })?;
        self.out.write_all(&[shared as u8, suffix_len]).map_err(io_err(&self.path))?;
        self.out.write_all(suffix).map_err(io_err(&self.path))?;
        // A row that does not share its key's bytes with the one before starts a key (the
        // first row shares nothing).
        if self.key_bytes.is_none_or(|key| shared < key) {
            self.keys += 1;
        }
        self.rows += 1;
        std::mem::swap(&mut self.previous, &mut self.row);
        Ok(())
    }

    /// Ends the file and gives the run, counted at its size on disk.
    pub(super) fn finish(self) -> Result<Run, EtlError> {
        let sink = self.out.into_inner().map_err(|e| io_err(&self.path)(e.into_error()))?;
        let file = sink.finish().map_err(io_err(&self.path))?;
        let bytes = file.metadata().map_err(io_err(&self.path))?.len();
        self.dir.grew(bytes);
        Ok(Run { dir: self.dir, path: self.path, bytes, rows: self.rows, keys: self.keys })
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        // Best effort: a directory left behind is emptied when the next stage begins.
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// One run file; removed once dropped.
#[derive(Debug)]
pub(super) struct Run {
    dir: Arc<RunDir>,
    path: PathBuf,
    bytes: u64,
    rows: u64,
    /// Keys its rows hold (its rows, where the writer was given no key).
    keys: u64,
}

impl Run {
    /// Rows in the run.
    pub(super) const fn rows(&self) -> u64 {
        self.rows
    }

    /// Keys in the run (see [`RunDir::writer`]).
    pub(super) const fn keys(&self) -> u64 {
        self.keys
    }

    /// Reads the run back, row by row.
    pub(super) fn reader<R: Record>(self) -> Result<RunReader<R>, EtlError> {
        let file = File::open(&self.path).map_err(io_err(&self.path))?;
        let (source, buffer) = if self.dir.compress {
            let file = BufReader::with_capacity(ZSTD_IO_BUFFER, file);
            let mut decoder = zstd::stream::read::Decoder::with_buffer(file).map_err(io_err(&self.path))?;
            decoder.window_log_max(RUN_ZSTD_WINDOW_LOG).map_err(io_err(&self.path))?;
            (Source::Zstd(decoder), ZSTD_IO_BUFFER)
        } else {
            (Source::Plain(file), IO_BUFFER)
        };
        Ok(RunReader {
            input: BufReader::with_capacity(buffer, source),
            row: Vec::new(),
            left: self.rows,
            run: self,
            _row: std::marker::PhantomData,
        })
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if std::fs::remove_file(&self.path).is_ok() {
            self.dir.bytes.fetch_sub(self.bytes, Ordering::Relaxed);
        }
    }
}

/// Where a run file's bytes come from: the file, or a zstd stream out of it.
enum Source {
    Plain(File),
    Zstd(zstd::stream::read::Decoder<'static, BufReader<File>>),
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Plain(_) => "Source::Plain",
            Self::Zstd(_) => "Source::Zstd",
        })
    }
}

impl Read for Source {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Self::Plain(file) => file.read(buf),
            Self::Zstd(decoder) => decoder.read(buf),
        }
    }
}

/// The rows of one run, in order.
#[derive(Debug)]
pub(super) struct RunReader<R> {
    input: BufReader<Source>,
    row: Vec<u8>,
    left: u64,
    run: Run,
    _row: std::marker::PhantomData<R>,
}

impl<R: Record> RunReader<R> {
    /// The next row, or `None` after the last.
    pub(super) fn next_row(&mut self) -> Result<Option<R>, EtlError> {
        if self.left == 0 {
            return Ok(None);
        }
        let path = &self.run.path;
        let mut header = [0u8; 2];
        self.input.read_exact(&mut header).map_err(io_err(path))?;
        let [shared, suffix] = header.map(usize::from);
        if shared > self.row.len() {
            return Err(EtlError::Malformed {
                path: path.clone(),
                problem: super::RecordError("a row shares more bytes than the row before it has"),
            });
        }
        self.row.truncate(shared);
        self.row.resize(shared + suffix, 0);
        self.input.read_exact(&mut self.row[shared..]).map_err(io_err(path))?;
        let mut bytes = self.row.as_slice();
        let row =
            R::decode(&mut bytes).map_err(|problem| EtlError::Malformed { path: path.clone(), problem })?;
        self.left -= 1;
        Ok(Some(row))
    }
}

#[cfg(test)]
mod tests {
    use super::shared_prefix;

    fn bytewise(a: &[u8], b: &[u8]) -> usize {
        a.iter().zip(b).take(255).take_while(|(x, y)| x == y).count()
    }

    #[test]
    fn the_shared_prefix_counts_bytes_not_words() {
        let base: Vec<u8> = (0..300_u32).map(|i| (i * 7 % 251) as u8).collect();
        // Every length up to past the cap, and a difference at every place within it.
        for len in [0, 1, 7, 8, 9, 15, 16, 17, 20, 28, 32, 144, 168, 255, 256, 300] {
            let a = &base[..len];
            assert_eq!(shared_prefix(a, a), len.min(255), "equal rows of {len} bytes");
            for at in 0..len {
                let mut b = a.to_vec();
                b[at] ^= 0x80;
                assert_eq!(shared_prefix(a, &b), bytewise(a, &b), "{len} bytes, differing at {at}");
            }
            // One row a prefix of the other.
            assert_eq!(shared_prefix(a, &base[..len / 2]), (len / 2).min(255));
        }
    }
}
