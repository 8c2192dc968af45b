//! Entry point: the program with the built-in classifiers.

/// mimalloc instead of glibc's malloc: a catch-up allocates and frees millions of small buffers
/// on several threads, and glibc's allocator took about a fifth of its CPU (docs/benchmarks-history.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    ots_indexer::cli::main().await
}
