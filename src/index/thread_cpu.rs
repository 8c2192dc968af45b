//! The CPU time of the calling thread: what a family's write or look-up costs, apart from the
//! time it waited for a core. A stage's merge runs three threads on two cores in the benchmarks
//! (docs/benchmarks.md), so their wall times include each other's.

use std::time::Duration;

/// The calling thread's CPU time so far (zero where the clock is not there).
#[allow(unsafe_code)]
pub(crate) fn now() -> Duration {
    // SAFETY: `spec` is a plain C struct that clock_gettime fills in whole when it returns 0.
    let spec = unsafe {
        let mut spec: libc::timespec = std::mem::zeroed();
        if libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &raw mut spec) != 0 {
            return Duration::ZERO;
        }
        spec
    };
    Duration::new(u64::try_from(spec.tv_sec).unwrap_or(0), u32::try_from(spec.tv_nsec).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_thread_that_works_spends_cpu_time() {
        let before = super::now();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        assert!(super::now() > before, "{x}");
    }
}
