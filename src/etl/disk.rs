//! The free space of the file system under the run files (and the database beside them).

use std::path::Path;

/// Free and total bytes of a file system.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskSpace {
    /// Bytes an unprivileged writer may still use.
    pub available: u64,
    /// Bytes of the whole file system.
    pub total: u64,
}

/// The free and total space of the file system holding `dir`.
#[allow(unsafe_code)]
pub fn disk_space(dir: &Path) -> std::io::Result<DiskSpace> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path holds a NUL byte"))?;
    // SAFETY: `path` is a NUL-terminated string that outlives the call, and `stats` is a plain
    // C struct statvfs fills in whole when it returns 0.
    let stats = unsafe {
        let mut stats: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(path.as_ptr(), &raw mut stats) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        stats
    };
    Ok(DiskSpace {
        available: blocks(stats.f_bavail, stats.f_frsize),
        total: blocks(stats.f_blocks, stats.f_frsize),
    })
}

/// Bytes of `count` blocks of `size` bytes (the C types are narrower on some targets).
#[allow(clippy::useless_conversion)]
fn blocks(count: libc::fsblkcnt_t, size: libc::c_ulong) -> u64 {
    u64::from(count).saturating_mul(u64::from(size).max(1))
}
