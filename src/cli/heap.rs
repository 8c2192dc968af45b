//! Whether this process's heap grows in transparent huge pages.
//!
//! mimalloc asks the kernel for huge pages on its arenas. A command that builds a heap of
//! hundreds of MiB and keeps it (a catch-up's sorters and batches) gains from them: fewer TLB
//! misses, and each 2 MiB faulted once. A command that runs one transaction and exits (`unwind`,
//! `status`) loses: every thread's first allocation and each fresh stretch of heap faults a
//! whole 2 MiB page in, zeroed, for a few KiB used — on a virtual machine of the project's kind
//! one such fault took 1.5–4 ms, and a 64-block unwind spent a tenth of its time in them
//! (docs/benchmarks-history.md, "Huge pages off for the short commands"). So the program
//! starts with huge pages off and the commands that build large heaps turn them back on.

/// Turns huge pages off (`false`) or back on (`true`) for the whole process, for memory faulted
/// from now on. A refusal (a kernel without the setting) changes nothing else: it is ignored.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
pub fn huge_pages(on: bool) {
    let disable: libc::c_ulong = if on { 0 } else { 1 };
    // SAFETY: PR_SET_THP_DISABLE only sets a flag of this process's memory map; it takes no
    // pointer and changes no mapping's contents.
    unsafe {
        libc::prctl(
            libc::PR_SET_THP_DISABLE,
            disable,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        );
    }
}

/// Nothing to set where the kernel has no such flag.
#[cfg(not(target_os = "linux"))]
pub fn huge_pages(_on: bool) {}

/// Whether huge pages are on for this process now.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
pub fn huge_pages_on() -> bool {
    // SAFETY: PR_GET_THP_DISABLE reads one flag of this process.
    let disabled = unsafe {
        libc::prctl(
            libc::PR_GET_THP_DISABLE,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    disabled == 0
}

/// Where the kernel has no such flag, whatever the allocator does.
#[cfg(not(target_os = "linux"))]
pub fn huge_pages_on() -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    fn huge_pages_turn_off_and_back_on() {
        let before = huge_pages_on();
        huge_pages(false);
        assert!(!huge_pages_on());
        huge_pages(true);
        assert!(huge_pages_on());
        huge_pages(before);
    }
}
