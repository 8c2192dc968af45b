//! The walk marks on disk, beside the database (`walk-marks` in the datadir): what earlier walks
//! counted survives a restart, so the first deep page of a list after one skips the groups
//! counted before it instead of asking the node for every transaction ahead of the page.
//!
//! The file is a cache: a missing, unreadable or foreign one (another chain, another layout)
//! starts the marks afresh and costs time only. The server writes it every
//! [`SAVE_EVERY`] when the marks changed, and once more when it stops; a write goes to a
//! temporary file first and replaces the old one whole, so a kill leaves the old file or the new.
//! A group read from it is checked against the index before its count is used (`Group::loaded`):
//! the database beside it may have been built anew. Its bytes are in docs/format.md.

use std::{
    io::{self, Write},
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::Duration,
};

use alloy_primitives::{Address, B256};
use tracing::{debug, info, warn};

use super::marks::{Group, Stream, WalkMarks, GROUP};
use crate::{
    db::state::ChainIdentity,
    decode::{TokenKind, TokenKinds},
};

/// The file's name in the datadir.
pub const FILE_NAME: &str = "walk-marks";

/// How often the server saves marks that changed.
pub const SAVE_EVERY: Duration = Duration::from_secs(60);

/// The first bytes of the file: its name and layout version.
const MAGIC: &[u8; 8] = b"OTSWALK1";

/// The marks of one server and the file they are kept in.
#[derive(Debug)]
pub struct MarksFile {
    path: PathBuf,
    chain: ChainIdentity,
    marks: Arc<WalkMarks>,
    /// The marks' change count at the last save (or load), and whether a save failed since.
    saved: Mutex<(u64, bool)>,
}

impl MarksFile {
    /// The marks `path` holds for `chain`, or none when it holds none for it (said at INFO or
    /// WARN: the file is a cache).
    pub fn open(path: &Path, chain: ChainIdentity) -> Arc<Self> {
        let groups = match std::fs::read(path) {
            Ok(bytes) => match decode(&bytes, chain) {
                Ok(groups) => {
                    info!(target: "ots::rpc", path = %path.display(), groups = groups.len(), "walk marks read");
                    groups
                }
                Err(why) => {
                    warn!(target: "ots::rpc", path = %path.display(), why, "walk marks file not used; counting afresh");
                    Vec::new()
                }
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => {
                warn!(target: "ots::rpc", path = %path.display(), error = %e, "walk marks file unreadable; counting afresh");
                Vec::new()
            }
        };
        let marks = Arc::new(WalkMarks::from_groups(groups));
        let changes = marks.snapshot().1;
        Arc::new(Self { path: path.to_owned(), chain, marks, saved: Mutex::new((changes, false)) })
    }

    /// The marks, for the server's walks.
    pub fn marks(&self) -> Arc<WalkMarks> {
        self.marks.clone()
    }

    /// Writes the marks if they changed since the last save; whether it wrote.
    pub fn save(&self) -> io::Result<bool> {
        let mut saved = self.saved.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (groups, changes) = self.marks.snapshot();
        if changes == saved.0 {
            return Ok(false);
        }
        let written = write_whole(&self.path, &encode(&groups, self.chain));
        match &written {
            Ok(()) => {
                *saved = (changes, false);
                debug!(target: "ots::rpc", path = %self.path.display(), groups = groups.len(), "walk marks saved");
            }
            Err(e) if !saved.1 => {
                // Once: a read-only datadir would say it every minute otherwise.
                warn!(target: "ots::rpc", path = %self.path.display(), error = %e, "cannot save the walk marks; a restart will count them again");
                saved.1 = true;
            }
            Err(_) => {}
        }
        written.map(|()| true)
    }

    /// Saves every `every` while the server runs.
    pub fn keep_saving(self: &Arc<Self>, every: Duration) {
        let file = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(file) = file.upgrade() else { return };
                let _ = tokio::task::spawn_blocking(move || file.save()).await;
            }
        });
    }
}

/// Replaces `path` with `bytes` whole: a temporary file, synced, renamed over it.
fn write_whole(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".new");
    let temporary = PathBuf::from(temporary);
    {
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    std::fs::rename(&temporary, path)
}

/// 64-bit FNV-1a: the file's check against torn or altered bytes.
fn checksum(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

fn kind_byte(kind: TokenKind) -> u8 {
    match kind {
        TokenKind::Erc20 => 0,
        TokenKind::Erc721 => 1,
        TokenKind::Erc1155 => 2,
    }
}

fn kind_of(byte: u8) -> Option<TokenKind> {
    match byte {
        0 => Some(TokenKind::Erc20),
        1 => Some(TokenKind::Erc721),
        2 => Some(TokenKind::Erc1155),
        _ => None,
    }
}

/// A contract's kinds in one byte: bits 0–1 where its `Transfer` logs go (0 nowhere, else
/// the kind's byte + 1), bit 2 whether its ERC1155 logs count.
fn kinds_byte(kinds: TokenKinds) -> u8 {
    kinds.transfer.map_or(0, |k| kind_byte(k) + 1) | if kinds.multi { 4 } else { 0 }
}

fn kinds_of(byte: u8) -> Option<TokenKinds> {
    if byte > 7 {
        return None;
    }
    let transfer = match byte & 3 {
        0 => None,
        k => Some(kind_of(k - 1)?),
    };
    Some(TokenKinds { transfer, multi: byte & 4 != 0 })
}

fn put_address(out: &mut Vec<u8>, address: Option<Address>) {
    out.extend_from_slice(address.unwrap_or_default().as_slice());
}

/// The file's bytes: the header (magic, chain id, genesis hash, group size, group count), the
/// groups, and the checksum of all before it (integers big-endian).
fn encode(groups: &[(Stream, u64, Arc<Group>)], chain: ChainIdentity) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + groups.len() * 80);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&chain.chain_id.to_be_bytes());
    out.extend_from_slice(chain.genesis_hash.as_slice());
    out.extend_from_slice(&GROUP.to_be_bytes());
    out.extend_from_slice(&(groups.len() as u64).to_be_bytes());
    for (stream, index, group) in groups {
        match *stream {
            Stream::Transactions(address) => {
                out.push(0);
                put_address(&mut out, Some(address));
            }
            Stream::Internal(address) => {
                out.push(1);
                put_address(&mut out, Some(address));
            }
            Stream::InternalTxs(address) => {
                out.push(3);
                put_address(&mut out, Some(address));
            }
            Stream::Movements(kind, party, token) => {
                out.extend_from_slice(&[
                    2,
                    kind_byte(kind),
                    u8::from(party.is_some()) | u8::from(token.is_some()) << 1,
                ]);
                put_address(&mut out, party);
                put_address(&mut out, token);
            }
        }
        for n in [*index, group.first, group.last, group.rows] {
            out.extend_from_slice(&n.to_be_bytes());
        }
        out.extend_from_slice(&(group.emitters.len() as u32).to_be_bytes());
        for (emitter, kinds) in group.emitters.iter() {
            out.extend_from_slice(emitter.as_slice());
            out.push(kinds_byte(*kinds));
        }
    }
    let sum = checksum(&out);
    out.extend_from_slice(&sum.to_be_bytes());
    out
}

/// Reads bytes off the front of a slice.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        if self.0.len() < n {
            return Err("the file ends early");
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn byte(&mut self) -> Result<u8, &'static str> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, &'static str> {
        let mut b = [0; 4];
        b.copy_from_slice(self.take(4)?);
        Ok(u32::from_be_bytes(b))
    }

    fn u64(&mut self) -> Result<u64, &'static str> {
        let mut b = [0; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(u64::from_be_bytes(b))
    }

    fn address(&mut self) -> Result<Address, &'static str> {
        Ok(Address::from_slice(self.take(20)?))
    }
}

/// The groups of a file written by [`encode`] for `chain`, or why it cannot be used.
fn decode(bytes: &[u8], chain: ChainIdentity) -> Result<Vec<(Stream, u64, Group)>, &'static str> {
    let Some(body_len) = bytes.len().checked_sub(8) else { return Err("the file ends early") };
    let (body, sum) = bytes.split_at(body_len);
    if !body.starts_with(MAGIC) {
        return Err("not a walk marks file of this layout");
    }
    if checksum(body).to_be_bytes() != sum {
        return Err("its checksum does not match: a torn or altered file");
    }
    let mut r = Reader(&body[MAGIC.len()..]);
    let stored = ChainIdentity { chain_id: r.u64()?, genesis_hash: B256::from_slice(r.take(32)?) };
    if stored != chain {
        return Err("written for another chain");
    }
    if r.u64()? != GROUP {
        return Err("written with another group size");
    }
    let count = r.u64()?;
    let mut groups = Vec::new();
    for _ in 0..count {
        let stream = match r.byte()? {
            0 => Stream::Transactions(r.address()?),
            1 => Stream::Internal(r.address()?),
            3 => Stream::InternalTxs(r.address()?),
            2 => {
                let kind = kind_of(r.byte()?).ok_or("an unknown token kind")?;
                let present = r.byte()?;
                let (party, token) = (r.address()?, r.address()?);
                Stream::Movements(
                    kind,
                    (present & 1 != 0).then_some(party),
                    (present & 2 != 0).then_some(token),
                )
            }
            _ => return Err("an unknown list"),
        };
        let (index, first, last, rows) = (r.u64()?, r.u64()?, r.u64()?, r.u64()?);
        let emitters = (0..r.u32()?)
            .map(|_| Ok((r.address()?, kinds_of(r.byte()?).ok_or("an unknown token kind")?)))
            .collect::<Result<Arc<[_]>, &'static str>>()?;
        groups.push((stream, index, Group { first, last, rows, emitters, loaded: true }));
    }
    if !r.0.is_empty() {
        return Err("bytes past the last group");
    }
    Ok(groups)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHAIN: ChainIdentity = ChainIdentity { chain_id: 10, genesis_hash: B256::repeat_byte(0xab) };

    fn groups() -> Vec<(Stream, u64, Arc<Group>)> {
        let a = Address::repeat_byte(1);
        let t = Address::repeat_byte(2);
        let group = |first: u64, emitters: Vec<(Address, TokenKinds)>| {
            Arc::new(Group { first, last: first + 99, rows: 7, emitters: emitters.into(), loaded: false })
        };
        let erc20 = TokenKinds { transfer: Some(TokenKind::Erc20), multi: false };
        let both = TokenKinds { transfer: Some(TokenKind::Erc721), multi: true };
        vec![
            (Stream::Transactions(a), 3, group(300, vec![])),
            (Stream::Internal(a), 0, group(1, vec![])),
            (Stream::InternalTxs(a), 0, group(2, vec![])),
            (Stream::Movements(TokenKind::Erc20, Some(a), None), 9, group(900, vec![(t, erc20)])),
            (
                Stream::Movements(TokenKind::Erc1155, None, Some(t)),
                2,
                group(5, vec![(t, both), (a, TokenKinds::default())]),
            ),
        ]
    }

    #[test]
    fn groups_round_trip_and_come_back_unchecked() {
        let written = groups();
        let read = decode(&encode(&written, CHAIN), CHAIN).expect("decode");
        assert_eq!(read.len(), written.len());
        for ((s, i, g), (ws, wi, wg)) in read.iter().zip(&written) {
            assert_eq!((s, i), (ws, wi));
            assert_eq!(Group { loaded: false, ..g.clone() }, **wg);
            assert!(g.loaded, "a group read back is checked against the index before use");
        }
    }

    #[test]
    fn bytes_are_pinned() {
        let a = Address::repeat_byte(1);
        let one = vec![(
            Stream::Transactions(a),
            3,
            Arc::new(Group { first: 0x10, last: 0x20, rows: 5, emitters: Arc::new([]), loaded: false }),
        )];
        let bytes = encode(&one, CHAIN);
        let mut want = b"OTSWALK1".to_vec();
        want.extend_from_slice(&10u64.to_be_bytes());
        want.extend_from_slice(&[0xab; 32]);
        want.extend_from_slice(&100u64.to_be_bytes());
        want.extend_from_slice(&1u64.to_be_bytes());
        want.push(0);
        want.extend_from_slice(&[1; 20]);
        for n in [3u64, 0x10, 0x20, 5] {
            want.extend_from_slice(&n.to_be_bytes());
        }
        want.extend_from_slice(&0u32.to_be_bytes());
        assert_eq!(&bytes[..bytes.len() - 8], want.as_slice());
        assert_eq!(bytes[bytes.len() - 8..], checksum(&want).to_be_bytes());
        assert_eq!(kinds_byte(TokenKinds { transfer: Some(TokenKind::Erc1155), multi: true }), 7);
        for b in 0..8 {
            assert_eq!(kinds_of(b).map(kinds_byte), Some(b), "{b}");
        }
        assert_eq!(kinds_of(8), None);
    }

    #[test]
    fn a_foreign_torn_or_altered_file_is_refused() {
        let bytes = encode(&groups(), CHAIN);
        let other = ChainIdentity { chain_id: 11, ..CHAIN };
        assert_eq!(decode(&bytes, other).err(), Some("written for another chain"));
        assert!(decode(&bytes[..bytes.len() - 1], CHAIN).is_err());
        assert!(decode(&bytes[..20], CHAIN).is_err());
        assert!(decode(&[], CHAIN).is_err());
        let mut altered = bytes;
        altered[70] ^= 1;
        assert!(decode(&altered, CHAIN).is_err());
        assert!(decode(b"something else entirely", CHAIN).is_err());
    }

    #[test]
    fn saves_only_changes_and_reads_back_across_a_restart() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(FILE_NAME);
        let file = MarksFile::open(&path, CHAIN);
        assert!(!file.save().expect("save"), "nothing to save");
        for (stream, index, group) in groups() {
            file.marks().keep(stream, index, (*group).clone());
        }
        assert!(file.save().expect("save"));
        assert!(!file.save().expect("save"), "unchanged since");
        let again = MarksFile::open(&path, CHAIN);
        assert_eq!(again.marks().usage(), file.marks().usage());
        let (stream, index, group) = &groups()[2];
        assert_eq!(again.marks().get(stream, *index).map(|g| g.rows), Some(group.rows));
        assert!(!again.save().expect("save"), "read is not a change");
        let elsewhere = MarksFile::open(&path, ChainIdentity { chain_id: 1, ..CHAIN });
        assert_eq!(elsewhere.marks().usage(), (0, 0), "another chain's marks are not used");
        std::fs::write(&path, b"garbage").expect("write");
        assert_eq!(MarksFile::open(&path, CHAIN).marks().usage(), (0, 0));
    }
}
