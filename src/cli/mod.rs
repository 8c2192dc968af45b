//! Command-line interface: one file per subcommand.

pub mod run;

use clap::{Parser, Subcommand};

/// Otterscan V2 token-attribution indexer: runs beside an Ethereum node, indexes contracts and
/// token transfers into MDBX, and serves them over the `ots_`/`ots2_` JSON-RPC namespaces.
#[derive(Debug, Parser)]
#[command(name = "ots-indexer", version, about, long_about = None)]
pub struct Cli {
    /// Log filter, e.g. `info` or `ots::sync=debug,info` (env: RUST_LOG).
    #[arg(long, global = true, env = "RUST_LOG", default_value = "info")]
    pub log: String,

    /// Log format.
    #[arg(long, global = true, env = "OTS_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Index the node's chain up to its head, keep following it, and serve the API meanwhile.
    Run(run::RunArgs),
}
