//! Entry point: the program with the built-in classifiers.

/// mimalloc instead of glibc's malloc: a catch-up allocates and frees millions of small buffers
/// on several threads, and glibc's allocator took about a fifth of its CPU (docs/benchmarks-history.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Huge pages off before the first allocation: the standard library's start-up and the runtime's
/// threads fault their first heap before `main` could say so (`cli::heap` says why, and which
/// commands turn them back on). A constructor, run by the loader before any Rust code; it only
/// sets a flag of the process and allocates nothing.
#[cfg(target_os = "linux")]
#[used]
#[allow(unsafe_code)]
#[unsafe(link_section = ".init_array")]
static HUGE_PAGES_OFF_AT_LOAD: extern "C" fn() = {
    extern "C" fn off() {
        ots_indexer::cli::heap::huge_pages(false);
    }
    off
};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    ots_indexer::cli::main().await
}
