//! How a recording's bytes are compressed. Recordings are written with zstd unless their name
//! ends in `.gz`; both are read, told apart by their first bytes, so recordings made before zstd
//! (gzip) replay as they did.
//!
//! Why zstd: replaying the 21 M-transaction benchmark chain inflated about 25 GB of gzip on the
//! recording's reader thread, a third of the CPU of a catch-up that is CPU-bound on two cores;
//! zstd reads the same bytes in about a quarter of the time, from a smaller file
//! (docs/benchmarks-history.md).

use std::{
    fs::File,
    io::{BufRead, BufReader, BufWriter, Read, Write},
    path::Path,
};

use flate2::{bufread::GzDecoder, write::GzEncoder};

/// The first bytes of a gzip member.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
/// The first bytes of a zstd frame.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// zstd's fastest level: recordings are mostly hashes and addresses, which higher levels barely
/// shrink further, while generating a large chain waits on the compressor.
const ZSTD_LEVEL: i32 = 1;
/// Bytes the decompressed stream is read in.
const READ_BUFFER: usize = 1 << 20;

/// A compression a recording is written with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    /// zstd: what recordings are written with unless their name asks for gzip.
    Zstd,
    /// gzip, for a name ending in `.gz`.
    Gzip,
}

impl Codec {
    /// The codec a recording named `path` is written with: gzip if the name ends in `.gz`, zstd
    /// otherwise.
    pub fn for_path(path: &Path) -> Self {
        if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("gz")) {
            Self::Gzip
        } else {
            Self::Zstd
        }
    }
}

/// A recording's decompressed bytes.
pub type Decompressed = BufReader<Box<dyn Read + Send>>;

/// Opens `path` and decompresses it with whichever codec its first bytes name. The error says
/// what was wrong, for the caller to put beside the path.
pub fn open(path: &Path) -> Result<Decompressed, String> {
    let mut file = BufReader::new(File::open(path).map_err(|e| e.to_string())?);
    let head = file.fill_buf().map_err(|e| e.to_string())?;
    let inner: Box<dyn Read + Send> = if head.is_empty() {
        return Err("empty file".into());
    } else if head.starts_with(&ZSTD_MAGIC) {
        Box::new(zstd::stream::read::Decoder::with_buffer(file).map_err(|e| e.to_string())?)
    } else if head.starts_with(&GZIP_MAGIC) {
        Box::new(GzDecoder::new(file))
    } else {
        return Err("not an ots-indexer recording (neither zstd nor gzip)".into());
    };
    Ok(BufReader::with_capacity(READ_BUFFER, inner))
}

/// A recording being compressed into a file.
pub enum Compressor {
    /// zstd.
    Zstd(zstd::stream::write::Encoder<'static, BufWriter<File>>),
    /// gzip.
    Gzip(GzEncoder<BufWriter<File>>),
}

impl std::fmt::Debug for Compressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Zstd(_) => "Compressor::Zstd",
            Self::Gzip(_) => "Compressor::Gzip",
        })
    }
}

impl Compressor {
    /// Compresses into `file` with `codec`.
    pub fn new(codec: Codec, file: File) -> std::io::Result<Self> {
        let out = BufWriter::new(file);
        Ok(match codec {
            Codec::Zstd => Self::Zstd(zstd::stream::write::Encoder::new(out, ZSTD_LEVEL)?),
            Codec::Gzip => Self::Gzip(GzEncoder::new(out, flate2::Compression::fast())),
        })
    }

    /// Ends the compressed stream and hands back the file, its bytes flushed to it.
    pub fn finish(self) -> std::io::Result<File> {
        let out = match self {
            Self::Zstd(z) => z.finish()?,
            Self::Gzip(g) => g.finish()?,
        };
        out.into_inner().map_err(|e| e.into_error())
    }
}

impl Write for Compressor {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Self::Zstd(z) => z.write(buf),
            Self::Gzip(g) => g.write(buf),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match self {
            Self::Zstd(z) => z.write_all(buf),
            Self::Gzip(g) => g.write_all(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Self::Zstd(z) => z.flush(),
            Self::Gzip(g) => g.flush(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(dir: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let path = dir.join(name);
        let mut out =
            Compressor::new(Codec::for_path(&path), File::create(&path).expect("create")).expect("new");
        out.write_all(bytes).expect("write");
        out.finish().expect("finish");
        path
    }

    fn read_back(path: &Path) -> Vec<u8> {
        let mut bytes = Vec::new();
        open(path).expect("open").read_to_end(&mut bytes).expect("read");
        bytes
    }

    #[test]
    fn the_name_picks_the_codec_and_the_first_bytes_pick_the_reader() {
        let dir = tempfile::tempdir().expect("tempdir");
        let text = b"{\"kind\":\"header\"}\n".repeat(1000);
        let zstd = written(dir.path(), "chain.rec.zst", &text);
        let gzip = written(dir.path(), "chain.rec.gz", &text);
        let other = written(dir.path(), "chain.rec.part", &text);
        assert_eq!(std::fs::read(&zstd).expect("read")[..4], ZSTD_MAGIC);
        assert_eq!(std::fs::read(&gzip).expect("read")[..2], GZIP_MAGIC);
        assert_eq!(std::fs::read(&other).expect("read")[..4], ZSTD_MAGIC);
        for path in [&zstd, &gzip, &other] {
            assert_eq!(read_back(path), text, "{}", path.display());
        }
    }

    #[test]
    fn a_file_of_neither_codec_is_a_clear_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let plain = dir.path().join("plain.rec");
        std::fs::write(&plain, b"{\"kind\":\"header\"}\n").expect("write");
        let empty = dir.path().join("empty.rec");
        std::fs::write(&empty, b"").expect("write");
        assert_eq!(
            open(&plain).err().as_deref(),
            Some("not an ots-indexer recording (neither zstd nor gzip)")
        );
        assert_eq!(open(&empty).err().as_deref(), Some("empty file"));
        assert!(open(&dir.path().join("missing.rec")).is_err());
    }

    #[test]
    fn a_cut_short_zstd_stream_is_an_error_not_a_short_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let text: Vec<u8> = (0..200_000u32).flat_map(|n| n.to_le_bytes()).collect();
        let path = written(dir.path(), "chain.rec.zst", &text);
        let bytes = std::fs::read(&path).expect("read");
        std::fs::write(&path, &bytes[..bytes.len() / 2]).expect("write");
        let mut back = Vec::new();
        assert!(open(&path).expect("open").read_to_end(&mut back).is_err());
    }
}
