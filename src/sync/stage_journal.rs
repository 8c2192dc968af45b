//! The stage journal: every batch a bulk stage has fetched and classified, kept on disk beside
//! the database until the stage commits, so that a crash loses no work of the node's. The next
//! start gathers the journalled blocks again from the file, with no node, and fetches from where
//! it ends. A stage can then run for as long as its disk allows rather than for a bounded time
//! (docs/operations.md, "Bulk stages").
//!
//! The file is a header — magic, version, the stage's first block and the hash of the block
//! before it (the committed tip the stage continues, zero before block 0) — then one frame per
//! batch: its length (u32, little-endian) and the batch's blocks, bincode-encoded and compressed
//! with zstd (content checksum on). Each frame is synced before its batch joins the stage. A
//! frame cut short or failing its checksum (a crash mid-write) ends the journal: it is cut off
//! and the stage carries on from the frame before.

use std::{
    fs::{File, OpenOptions},
    io::{BufReader, Read, Seek, SeekFrom, Write},
    path::{Path, PathBuf},
};

use alloy_primitives::B256;
use tracing::{debug, warn};

pub use crate::index::stage::{journal_path, STAGE_JOURNAL_FILE};
use crate::{db::state::Checkpoint, index::ClassifiedBlock};

const MAGIC: &[u8; 8] = b"OTSSTGJ\0";
const VERSION: u32 = 1;
const HEADER_LEN: u64 = 8 + 4 + 8 + 32;
/// zstd level of the frames: the fastest, as the journal is written while the stage gathers.
const LEVEL: i32 = 1;
/// No batch comes near this; a larger length is a damaged frame.
const MAX_FRAME: u32 = 1 << 30;

/// A journal could not be written (reading one that is damaged is never an error: it is cut
/// off where it stops making sense).
#[derive(Debug, thiserror::Error)]
#[error("stage journal {path}: {error}")]
pub struct JournalError {
    /// The file.
    pub path: PathBuf,
    /// What the OS or the encoder said.
    pub error: std::io::Error,
}

/// The journal of the stage being gathered.
#[derive(Debug)]
pub struct StageJournal {
    path: PathBuf,
    file: File,
    bytes: u64,
}

/// What a journal left by an earlier process holds for the stage beginning now.
#[derive(Debug, Default)]
pub struct Journalled {
    /// Its batches, in order.
    pub batches: Vec<Vec<ClassifiedBlock>>,
    /// Frames cut off (a crash mid-write; 0 or 1 unless the file was damaged).
    pub dropped_frames: u64,
    /// Where in the file each batch ends.
    ends: Vec<u64>,
}

impl Journalled {
    /// Blocks in the batches.
    pub fn blocks(&self) -> u64 {
        self.batches.iter().map(|b| b.len() as u64).sum()
    }
}

/// Removes the journal in `dir`, if any (its stage committed, or journalling is off).
pub fn remove_journal(dir: &Path) -> Result<(), JournalError> {
    let path = journal_path(dir);
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(JournalError { path, error }),
    }
}

/// Removes the journal in `dir` unless `keep` and it is the journal of the stage continuing
/// `tip` (the one the next stage resumes): nothing else will ever read it.
pub fn discard_unless_resumable(dir: &Path, tip: Option<Checkpoint>, keep: bool) -> Result<(), JournalError> {
    let resumable = keep
        && File::open(journal_path(dir)).ok().and_then(|f| read_header(&mut BufReader::new(f)))
            == Some(start_of(tip));
    if resumable {
        Ok(())
    } else {
        remove_journal(dir)
    }
}

/// The first block and the parent hash of the stage continuing `tip`.
fn start_of(tip: Option<Checkpoint>) -> (u64, B256) {
    (tip.map_or(0, |t| t.number + 1), tip.map_or(B256::ZERO, |t| t.hash))
}

/// A journal's first block and parent hash, if it is a journal of this version.
fn read_header(r: &mut impl Read) -> Option<(u64, B256)> {
    let mut header = [0u8; HEADER_LEN as usize];
    r.read_exact(&mut header).ok()?;
    let (magic, rest) = header.split_at(8);
    let (version, rest) = rest.split_at(4);
    let (from, hash) = rest.split_at(8);
    if magic != MAGIC || version != VERSION.to_le_bytes() {
        return None;
    }
    Some((u64::from_le_bytes(from.try_into().ok()?), B256::from_slice(hash)))
}

impl StageJournal {
    /// Opens the journal for a stage continuing `tip` (`None`: from block 0) in `dir`: the
    /// batches an earlier process journalled for this very stage, and the journal to add to. A
    /// journal of another stage (the tip moved since, or it belongs to nothing) is replaced.
    pub fn open(dir: &Path, tip: Option<Checkpoint>) -> Result<(Self, Journalled), JournalError> {
        let path = journal_path(dir);
        let (first, parent) = start_of(tip);
        let err = |error| JournalError { path: path.clone(), error };
        let mut journalled = Journalled::default();
        let mut keep = 0;
        if let Ok(file) = File::open(&path) {
            match read_journal(file, first, parent) {
                Some((found, end)) => {
                    (journalled, keep) = (found, end);
                }
                None => {
                    debug!(target: "ots::sync", path = %path.display(), "a stage journal of another stage: replaced")
                }
            }
        }
        let mut file = OpenOptions::new()
            .create(true)
            .read(true)
            .write(true)
            .truncate(false)
            .open(&path)
            .map_err(err)?;
        if keep == 0 {
            file.set_len(0).map_err(err)?;
            let mut header = Vec::with_capacity(HEADER_LEN as usize);
            header.extend_from_slice(MAGIC);
            header.extend_from_slice(&VERSION.to_le_bytes());
            header.extend_from_slice(&first.to_le_bytes());
            header.extend_from_slice(parent.as_slice());
            file.write_all(&header).map_err(err)?;
            keep = HEADER_LEN;
        } else {
            if journalled.dropped_frames > 0 {
                warn!(target: "ots::sync", path = %path.display(), frames = journalled.dropped_frames, "the stage journal's last write was cut short: it is dropped and gathered again");
            }
            file.set_len(keep).map_err(err)?;
        }
        file.seek(SeekFrom::Start(keep)).map_err(err)?;
        file.sync_all().map_err(err)?;
        Ok((Self { path, file, bytes: keep }, journalled))
    }

    /// Adds a batch and syncs it to disk.
    pub fn append(&mut self, batch: &[ClassifiedBlock]) -> Result<(), JournalError> {
        let encoded = self.encode(batch)?;
        self.append_encoded(&encoded)
    }

    /// A batch as [`Self::append_encoded`] takes it: encoding is quick, compressing and syncing
    /// are not, so the caller may do those apart.
    pub fn encode(&self, batch: &[ClassifiedBlock]) -> Result<Vec<u8>, JournalError> {
        bincode::serialize(batch)
            .map_err(|e| JournalError { path: self.path.clone(), error: std::io::Error::other(e) })
    }

    /// Adds a batch [`Self::encode`] gave and syncs it to disk.
    pub fn append_encoded(&mut self, encoded: &[u8]) -> Result<(), JournalError> {
        let err = |error| JournalError { path: self.path.clone(), error };
        let mut compressor = zstd::bulk::Compressor::new(LEVEL).map_err(err)?;
        compressor.include_checksum(true).map_err(err)?;
        let frame = compressor.compress(encoded).map_err(err)?;
        let len = u32::try_from(frame.len())
            .ok()
            .filter(|l| *l < MAX_FRAME)
            .ok_or_else(|| err(std::io::Error::other("a batch too large to journal")))?;
        let mut out = Vec::with_capacity(frame.len() + 4);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&frame);
        self.file.write_all(&out).map_err(err)?;
        self.file.sync_data().map_err(err)?;
        self.bytes += out.len() as u64;
        Ok(())
    }

    /// Keeps only the first `batches` of what `found` read (the stage ends before the rest):
    /// what it adds must follow on from them.
    pub fn keep_first(&mut self, found: &Journalled, batches: usize) -> Result<(), JournalError> {
        let err = |error| JournalError { path: self.path.clone(), error };
        let end = batches.checked_sub(1).and_then(|i| found.ends.get(i)).copied().unwrap_or(HEADER_LEN);
        if end < self.bytes {
            self.file.set_len(end).map_err(err)?;
            self.file.seek(SeekFrom::Start(end)).map_err(err)?;
            self.file.sync_all().map_err(err)?;
            self.bytes = end;
        }
        Ok(())
    }

    /// Bytes the journal holds.
    pub const fn bytes(&self) -> u64 {
        self.bytes
    }
}

/// A journal written beside the stage's gathering: each batch is encoded at once, then
/// compressed and synced on a blocking thread while the next batch is fetched (at most one in
/// flight).
#[derive(Debug)]
pub struct JournalWriter {
    journal: Option<StageJournal>,
    writing: Option<tokio::task::JoinHandle<Result<StageJournal, JournalError>>>,
    bytes: u64,
}

impl JournalWriter {
    /// Writes to `journal`.
    pub const fn new(journal: StageJournal) -> Self {
        let bytes = journal.bytes;
        Self { journal: Some(journal), writing: None, bytes }
    }

    /// Adds a batch: once the batch before it is on disk, this one starts on its way there.
    pub async fn append(&mut self, batch: &[ClassifiedBlock]) -> Result<(), JournalError> {
        let mut journal = self.settled().await?;
        let encoded = journal.encode(batch)?;
        self.writing = Some(tokio::task::spawn_blocking(move || {
            journal.append_encoded(&encoded)?;
            Ok(journal)
        }));
        Ok(())
    }

    /// Waits for the last batch to be on disk; the bytes the journal holds.
    pub async fn finish(mut self) -> Result<u64, JournalError> {
        let journal = self.settled().await?;
        Ok(journal.bytes)
    }

    /// Bytes the journal holds, as of the last batch known to be on disk.
    pub const fn bytes(&self) -> u64 {
        self.bytes
    }

    async fn settled(&mut self) -> Result<StageJournal, JournalError> {
        let journal = match self.writing.take() {
            Some(writing) => writing.await.map_err(|e| JournalError {
                path: PathBuf::from(STAGE_JOURNAL_FILE),
                error: std::io::Error::other(format!("the journal's thread failed: {e}")),
            })??,
            None => self.journal.take().ok_or_else(|| JournalError {
                path: PathBuf::from(STAGE_JOURNAL_FILE),
                error: std::io::Error::other("an earlier write failed"),
            })?,
        };
        self.bytes = journal.bytes;
        Ok(journal)
    }
}

/// The batches of a journal for the stage from `first` after `parent`, and where its last whole
/// frame ends; `None` if it is another stage's (or no journal).
fn read_journal(file: File, first: u64, parent: B256) -> Option<(Journalled, u64)> {
    let mut r = BufReader::new(file);
    if read_header(&mut r)? != (first, parent) {
        return None;
    }
    let mut found = Journalled::default();
    let mut end = HEADER_LEN;
    let mut next = first;
    loop {
        match read_frame(&mut r) {
            Frame::End => break,
            Frame::Damaged => {
                found.dropped_frames += 1;
                break;
            }
            Frame::Batch(batch, len) => {
                // Blocks must follow on from the ones before; anything else is damage.
                let follows = batch.iter().zip(next..).all(|(b, n)| b.block.number == n);
                if batch.is_empty() || !follows {
                    found.dropped_frames += 1;
                    break;
                }
                next += batch.len() as u64;
                end += 4 + len;
                found.batches.push(batch);
                found.ends.push(end);
            }
        }
    }
    Some((found, end))
}

enum Frame {
    End,
    Damaged,
    Batch(Vec<ClassifiedBlock>, u64),
}

fn read_frame(r: &mut impl Read) -> Frame {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Frame::End,
        Err(_) => return Frame::Damaged,
    }
    let len = u32::from_le_bytes(len);
    if len == 0 || len >= MAX_FRAME {
        return Frame::Damaged;
    }
    let mut frame = vec![0u8; len as usize];
    if r.read_exact(&mut frame).is_err() {
        return Frame::Damaged;
    }
    let Ok(encoded) = zstd::stream::decode_all(&frame[..]) else { return Frame::Damaged };
    match bincode::deserialize::<Vec<ClassifiedBlock>>(&encoded) {
        Ok(batch) => Frame::Batch(batch, u64::from(len)),
        Err(_) => Frame::Damaged,
    }
}

#[cfg(test)]
mod tests {
    use alloy_primitives::Address;
    use ots_classifiers::{BlockData, Fact, Standard};

    use super::*;

    fn batch(from: u64, n: u64) -> Vec<ClassifiedBlock> {
        (from..from + n)
            .map(|number| ClassifiedBlock {
                block: BlockData { number, hash: B256::with_last_byte(number as u8), ..Default::default() },
                facts: vec![Fact::Matched { standard: Standard::Erc20, address: Address::with_last_byte(7) }],
                probe_misses: vec![Address::with_last_byte(9)],
            })
            .collect()
    }

    fn tip(number: u64) -> Option<Checkpoint> {
        Some(Checkpoint { number, hash: B256::with_last_byte(0xaa) })
    }

    fn numbers(j: &Journalled) -> Vec<u64> {
        j.batches.iter().flatten().map(|b| b.block.number).collect()
    }

    #[test]
    fn batches_come_back_whole_to_the_same_stage_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut journal, found) = StageJournal::open(dir.path(), tip(9)).expect("open");
        assert_eq!(found.blocks(), 0);
        journal.append(&batch(10, 3)).expect("append");
        journal.append(&batch(13, 2)).expect("append");
        drop(journal);
        let (mut journal, found) = StageJournal::open(dir.path(), tip(9)).expect("reopen");
        assert_eq!(numbers(&found), [10, 11, 12, 13, 14]);
        assert_eq!(found.batches[0][0].facts, batch(10, 1)[0].facts);
        assert_eq!(found.batches[0][0].probe_misses, [Address::with_last_byte(9)]);
        // Adding goes on after what was there.
        journal.append(&batch(15, 1)).expect("append");
        drop(journal);
        let (_, found) = StageJournal::open(dir.path(), tip(9)).expect("reopen");
        assert_eq!(numbers(&found), [10, 11, 12, 13, 14, 15]);
        // Another tip (the stage committed, or the chain moved): a new journal.
        let other = Some(Checkpoint { number: 9, hash: B256::with_last_byte(0xbb) });
        let (journal, found) = StageJournal::open(dir.path(), other).expect("other tip");
        assert_eq!(found.blocks(), 0);
        assert_eq!(journal.bytes(), HEADER_LEN);
        let (_, found) = StageJournal::open(dir.path(), tip(9)).expect("the old stage's");
        assert_eq!(found.blocks(), 0, "its batches went with it");
    }

    #[test]
    fn a_frame_cut_short_is_dropped_and_the_journal_goes_on_before_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut journal, _) = StageJournal::open(dir.path(), None).expect("open");
        journal.append(&batch(0, 4)).expect("append");
        let whole = journal.bytes();
        journal.append(&batch(4, 4)).expect("append");
        drop(journal);
        let path = journal_path(dir.path());
        let len = std::fs::metadata(&path).expect("meta").len();
        let file = OpenOptions::new().write(true).open(&path).expect("open file");
        file.set_len(len - 5).expect("cut");
        drop(file);
        let (mut journal, found) = StageJournal::open(dir.path(), None).expect("reopen");
        assert_eq!(numbers(&found), [0, 1, 2, 3]);
        assert_eq!(found.dropped_frames, 1);
        assert_eq!(journal.bytes(), whole, "cut back to the last whole frame");
        journal.append(&batch(4, 1)).expect("append after the cut");
        drop(journal);
        let (_, found) = StageJournal::open(dir.path(), None).expect("reopen");
        assert_eq!(numbers(&found), [0, 1, 2, 3, 4]);
        assert_eq!(found.dropped_frames, 0);
        remove_journal(dir.path()).expect("remove");
        remove_journal(dir.path()).expect("removing none is fine");
        assert!(!path.exists());
    }

    #[test]
    fn a_stage_that_ends_early_keeps_the_batches_it_took() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut journal, _) = StageJournal::open(dir.path(), tip(4)).expect("open");
        for from in [5, 7, 9] {
            journal.append(&batch(from, 2)).expect("append");
        }
        drop(journal);
        let (mut journal, found) = StageJournal::open(dir.path(), tip(4)).expect("reopen");
        journal.keep_first(&found, 1).expect("keep one");
        journal.append(&batch(7, 1)).expect("append");
        drop(journal);
        let (mut journal, found) = StageJournal::open(dir.path(), tip(4)).expect("reopen");
        assert_eq!(numbers(&found), [5, 6, 7]);
        journal.keep_first(&found, 0).expect("keep none");
        drop(journal);
        let (_, found) = StageJournal::open(dir.path(), tip(4)).expect("reopen");
        assert_eq!(found.blocks(), 0);
    }

    #[test]
    fn only_a_resumable_journal_outlives_a_start() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = journal_path(dir.path());
        let (mut journal, _) = StageJournal::open(dir.path(), tip(4)).expect("open");
        journal.append(&batch(5, 2)).expect("append");
        drop(journal);
        discard_unless_resumable(dir.path(), tip(4), true).expect("keep");
        assert!(path.exists(), "the stage continuing the tip resumes from it");
        discard_unless_resumable(dir.path(), tip(4), false).expect("journalling off");
        assert!(!path.exists());
        let (journal, _) = StageJournal::open(dir.path(), tip(4)).expect("open");
        drop(journal);
        discard_unless_resumable(dir.path(), tip(6), true).expect("tip moved");
        assert!(!path.exists(), "a journal of a stage that can no longer run goes");
        discard_unless_resumable(dir.path(), tip(6), true).expect("no journal is fine");
    }

    #[tokio::test]
    async fn batches_written_beside_the_gathering_come_back_in_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (journal, _) = StageJournal::open(dir.path(), None).expect("open");
        let mut writer = JournalWriter::new(journal);
        for from in (0..40).step_by(4) {
            writer.append(&batch(from, 4)).await.expect("append");
        }
        let bytes = writer.finish().await.expect("finish");
        assert_eq!(bytes, std::fs::metadata(journal_path(dir.path())).expect("meta").len());
        let (_, found) = StageJournal::open(dir.path(), None).expect("reopen");
        assert_eq!(numbers(&found), (0..40).collect::<Vec<_>>());
    }

    #[test]
    fn garbage_is_no_journal() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            journal_path(dir.path()),
            b"not a journal at all, and long enough to read a header from it",
        )
        .expect("write");
        let (journal, found) = StageJournal::open(dir.path(), None).expect("open");
        assert_eq!((found.blocks(), journal.bytes()), (0, HEADER_LEN));
    }
}
