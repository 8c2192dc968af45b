//! Letting go of the database pages this process has read through MDBX's memory map.
//!
//! MDBX reads the data file through a shared, read-only memory map (this project never opens it
//! with `WRITEMAP`: pages are written with `pwrite`). Every page a transaction reads stays mapped
//! into the process afterwards, and the kernel counts it as resident memory (`RssFile`): while
//! catching up, batches that read most of the database leave the process looking as large as the
//! database. Dropping those pages from the process's page tables (`MADV_DONTNEED`, as libmdbx
//! does itself for the file's unused tail) keeps them in the page cache: the next read maps the
//! same page again without I/O, and no content can change, because a read-only shared file map
//! only ever shows the file.

use std::{io, path::Path};

use tracing::debug;

/// Releases `file`'s pages (`MappedFile::release`), if there is a file; a failure only costs
/// memory, so it is logged and nothing else.
pub(crate) fn release_mapped(file: Option<&MappedFile>) {
    let Some(file) = file else { return };
    if let Err(error) = file.release() {
        debug!(target: "ots::db", %error, "could not release mapped database pages");
    }
}

/// The data file's identity, to find its mappings in `/proc/self/maps`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MappedFile {
    major: u64,
    minor: u64,
    inode: u64,
}

impl MappedFile {
    /// The identity of the file at `path`.
    pub(crate) fn of(path: &Path) -> io::Result<Self> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let meta = std::fs::metadata(path)?;
            let dev = meta.dev();
            // glibc's major()/minor() split of a Linux dev_t.
            let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
            let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
            Ok(Self { major, minor, inode: meta.ino() })
        }
        #[cfg(not(unix))]
        {
            let _ = path;
            Err(io::Error::new(io::ErrorKind::Unsupported, "no memory-map accounting here"))
        }
    }

    /// Whether a `/proc/self/maps` line maps this file; its address range if so.
    fn range_in(&self, line: &str) -> Option<(usize, usize)> {
        let mut fields = line.split_ascii_whitespace();
        let range = fields.next()?;
        let _perms = fields.next()?;
        let _offset = fields.next()?;
        let (major, minor) = fields.next()?.split_once(':')?;
        let inode: u64 = fields.next()?.parse().ok()?;
        let same = inode == self.inode
            && u64::from_str_radix(major, 16).ok()? == self.major
            && u64::from_str_radix(minor, 16).ok()? == self.minor;
        if !same {
            return None;
        }
        let (start, end) = range.split_once('-')?;
        Some((usize::from_str_radix(start, 16).ok()?, usize::from_str_radix(end, 16).ok()?))
    }

    /// The address ranges this process maps the file at.
    fn mappings(&self) -> io::Result<Vec<(usize, usize)>> {
        let maps = std::fs::read_to_string("/proc/self/maps")?;
        Ok(maps.lines().filter_map(|line| self.range_in(line)).collect())
    }

    /// Drops every page of the file from this process's page tables; returns how many bytes of
    /// address space were released. The pages stay in the page cache.
    ///
    /// Call only while the MDBX environment that maps the file is open, and only for an
    /// environment opened without `WRITEMAP` (see the module's comment).
    pub(crate) fn release(&self) -> io::Result<usize> {
        if !cfg!(target_os = "linux") {
            return Ok(0);
        }
        let mut released = 0;
        for (start, end) in self.mappings()? {
            advise_dont_need(start, end - start)?;
            released += end - start;
        }
        Ok(released)
    }
}

/// `madvise(MADV_DONTNEED)` over a mapping of the database file.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn advise_dont_need(start: usize, len: usize) -> io::Result<()> {
    // SAFETY: [start, start + len) is a mapping of the database file taken from /proc/self/maps
    // (matched by device and inode). MDBX maps it shared and read-only, so MADV_DONTNEED loses
    // nothing: a later access maps the file's page again, with the same bytes, and readers
    // holding pointers into the map keep seeing valid memory. The mapping cannot be replaced by
    // something else in between: MDBX reserves address space for the size limit when the
    // environment opens and moves the map only when that limit is changed explicitly on an open
    // environment, which this project never does, and the caller keeps the environment open.
    let rc = unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_DONTNEED) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_dont_need(_start: usize, _len: usize) -> io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_file_by_device_and_inode() {
        let file = MappedFile { major: 0xfd, minor: 1, inode: 4_242 };
        let line = "7f00a0000000-7f00b0000000 r--s 00000000 fd:01 4242        /data/db/mdbx.dat";
        assert_eq!(file.range_in(line), Some((0x7f00_a000_0000, 0x7f00_b000_0000)));
        let other_inode = "7f00a0000000-7f00b0000000 r--s 00000000 fd:01 4243   /data/db/mdbx.dat";
        assert_eq!(file.range_in(other_inode), None);
        let other_device = "7f00a0000000-7f00b0000000 r--s 00000000 fd:02 4242   /data/db/mdbx.dat";
        assert_eq!(file.range_in(other_device), None);
        let anonymous = "7f00a0000000-7f00b0000000 rw-p 00000000 00:00 0";
        assert_eq!(file.range_in(anonymous), None);
    }
}
