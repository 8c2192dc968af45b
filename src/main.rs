//! Entry point: the program with the built-in classifiers.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    ots_indexer::cli::main().await
}
