//! Entry point: parse flags, set up logging, dispatch.

use clap::Parser;
use ots_indexer::cli::{dispatch, progress::LogWriter, Cli, LogFormat};
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if let Some(path) = ots_indexer::config::config_path(&args) {
        if let Err(e) = ots_indexer::config::apply_config_file(std::path::Path::new(&path)) {
            eprintln!("error: {e}");
            return std::process::ExitCode::FAILURE;
        }
    }
    let cli = Cli::parse();
    let filter = EnvFilter::try_new(&cli.log).unwrap_or_else(|_| EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder =
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(LogWriter::default).with_ansi(ansi);
    match cli.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
    match dispatch(cli.command).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
