//! glibc's heap, where libmdbx keeps its copies of the pages a write transaction changes.
//!
//! libmdbx copies every page a write transaction changes into memory from `malloc` (glibc's:
//! the binary allocates with mimalloc, but the C library calls `malloc` itself) and frees the
//! copies at the commit. In a process that has just started, each copy lands on heap the kernel
//! has never handed out, so every 4 KiB of it faults once and is zeroed, inside the transaction.
//! This module tunes that heap: keep what was freed ([`keep_freed_heap`]), give it back after a
//! large batch ([`trim_heap`]), and fault a short command's heap in ahead of it on the other core
//! ([`prefault_page_heap`]).

/// Gives the heap's free pages back to the kernel (glibc keeps what a batch freed in its arenas).
/// The binary allocates with mimalloc, which does this by itself; glibc's heap still holds
/// libmdbx's allocations, and the library's whenever a program embeds it without mimalloc.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub(crate) fn trim_heap() {
    // SAFETY: malloc_trim only returns free memory to the kernel; it touches no live allocation.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Nothing to do where the allocator is not glibc's.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn trim_heap() {}

/// Free heap glibc keeps for reuse before it gives the top of its heap back by itself.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const KEPT_FREE_HEAP: usize = 64 << 20;

/// Lets glibc's heap keep up to [`KEPT_FREE_HEAP`] of freed memory instead of returning it at
/// every free: with glibc's default (128 KiB, then adaptive) each transaction faults its page
/// copies in anew, and a process that exits after one (`unwind`) spends its last milliseconds in
/// a `brk` call per page. Large batches still trim explicitly ([`trim_heap`]). Process-wide: the
/// binary calls it once at start, before [`prefault_page_heap`].
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn keep_freed_heap() {
    // SAFETY: mallopt only sets a tuning parameter of glibc's allocator.
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, KEPT_FREE_HEAP as libc::c_int);
    }
}

/// Nothing to do where the allocator is not glibc's.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn keep_freed_heap() {}

/// The most [`prefault_page_heap`] readies: under [`KEPT_FREE_HEAP`], so that freeing the
/// blocks that grew the heap does not give the growth straight back.
pub(crate) const MOST_PREFAULTED: usize = 48 << 20;

/// Heap to ready for page copies before a transaction that changes `pages` pages of 16 KiB
/// (rounded to whole MiB, at most [`MOST_PREFAULTED`]).
pub fn prefault_size(pages: u64) -> usize {
    let bytes = usize::try_from(pages.saturating_mul(16 << 10)).unwrap_or(usize::MAX);
    bytes.div_ceil(1 << 20).saturating_mul(1 << 20).min(MOST_PREFAULTED)
}

/// Grows glibc's main heap by `bytes` and has a helper thread fault it in (`MADV_POPULATE_WRITE`)
/// while this thread goes on: the page copies of the write transaction this thread runs next then
/// land on memory that is already there. For a one-transaction command on a fresh process (the
/// 64-block unwind of docs/benchmarks.md) this moves about 7,000 page faults off the
/// transaction's path onto the other core. Does nothing on a single core, off the main thread
/// (glibc's other arenas are not grown by `brk`), or when the heap cannot be grown; populating
/// writes nothing, so a failure only means the faults happen in the transaction as before.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn prefault_page_heap(bytes: usize) {
    let bytes = bytes.min(MOST_PREFAULTED);
    if bytes == 0 || std::thread::available_parallelism().map_or(true, |n| n.get() < 2) {
        return;
    }
    let Some((start, end)) = grow_main_heap(bytes) else {
        tracing::debug!(target: "ots::db", bytes, "heap not grown: page copies fault in the transaction");
        return;
    };
    let spawned =
        std::thread::Builder::new().name("heap-prefault".into()).spawn(move || populate(start, end));
    if let Err(error) = spawned {
        tracing::debug!(target: "ots::db", %error, "no thread to fault the heap in");
    }
}

/// Nothing to do where the allocator is not glibc's.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn prefault_page_heap(_bytes: usize) {}

/// glibc's own default for how much more than asked it grows its heap by.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const DEFAULT_TOP_PAD: libc::c_int = 128 << 10;

/// Blocks allocated to make glibc grow its heap: under its `mmap` threshold (128 KiB at least),
/// so that they come from the `brk` heap.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const GROWING_BLOCK: usize = 32 << 10;

/// Grows the main heap by `bytes` (glibc's top pad), then frees what grew it: the growth stays
/// as the heap's free top. Returns the page-aligned range to fault in, or `None` when the break
/// did not move (another arena, a refused `brk`).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn grow_main_heap(bytes: usize) -> Option<(usize, usize)> {
    let pad = libc::c_int::try_from(bytes).ok()?;
    let most_blocks = 2 * (DEFAULT_TOP_PAD as usize / GROWING_BLOCK) + 2;
    let mut held = Vec::with_capacity(most_blocks);
    // SAFETY: mallopt sets tuning parameters; sbrk(0) only reads the break; every block malloc
    // returns is freed below and never read or written.
    let (before, after) = unsafe {
        libc::mallopt(libc::M_TOP_PAD, pad);
        let before = libc::sbrk(0) as usize;
        while libc::sbrk(0) as usize == before && held.len() < most_blocks {
            let block = libc::malloc(GROWING_BLOCK);
            if block.is_null() {
                break;
            }
            held.push(block);
        }
        let after = libc::sbrk(0) as usize;
        for block in held {
            libc::free(block);
        }
        libc::mallopt(libc::M_TOP_PAD, DEFAULT_TOP_PAD);
        (before, after)
    };
    const PAGE: usize = 4096;
    let start = after.saturating_sub(bytes).max(before).next_multiple_of(PAGE);
    let end = after & !(PAGE - 1);
    (after > before && end > start).then_some((start, end))
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn populate(start: usize, end: usize) {
    // SAFETY: the range is this process's heap, below the break and above where it stood before
    // the growth; MADV_POPULATE_WRITE faults its pages in as a write would, without writing, so
    // memory another thread may already use keeps its contents.
    let rc = unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_POPULATE_WRITE) };
    if rc != 0 {
        let error = std::io::Error::last_os_error();
        tracing::debug!(target: "ots::db", %error, "heap not faulted in ahead");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefault_size_is_whole_mib_up_to_the_most() {
        assert_eq!(prefault_size(0), 0);
        assert_eq!(prefault_size(1), 1 << 20);
        assert_eq!(prefault_size(64), 1 << 20);
        assert_eq!(prefault_size(65), 2 << 20);
        assert_eq!(prefault_size(2_048), 32 << 20);
        assert_eq!(prefault_size(u64::MAX), MOST_PREFAULTED);
    }

    #[test]
    fn prefaulting_off_the_main_thread_leaves_the_heap_usable() {
        // The test harness runs tests on threads of their own: glibc serves them from another
        // arena, so nothing grows; allocations still work afterwards.
        prefault_page_heap(4 << 20);
        let kept: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8; 16 << 10]).collect();
        assert!(kept.iter().enumerate().all(|(i, page)| page.iter().all(|b| *b == i as u8)));
    }
}
