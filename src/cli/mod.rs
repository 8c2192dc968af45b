//! Command-line interface: one file per subcommand.

pub mod args;
pub mod capture;
pub mod check;
pub mod compact;
pub mod config_file;
pub mod heap;
pub mod migrate;
pub mod progress;
pub mod refresh;
pub mod run;
pub mod serve;
pub mod status;
pub mod sync;
pub mod unwind;

use std::time::Duration;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use tokio::sync::watch;
use tracing::{info, warn};

use crate::{
    db::{state, AccessMode, Db},
    source::NodeClient,
    sync::{Indexer, SyncError},
};

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

    /// TOML file whose keys are long flag names (`rpc-url = "…"`, `batch-blocks = 200`);
    /// flags and environment variables override it.
    #[arg(long, global = true, env = "OTS_CONFIG")]
    pub config: Option<std::path::PathBuf>,

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
    /// Index and follow the head without serving (pair it with `serve` in another process).
    Sync(sync::SyncCmdArgs),
    /// Serve the API from an existing database, read-only (another process may be syncing it).
    Serve(serve::ServeCmdArgs),
    /// Print the indexed block, the node's head, the lag and every table's size.
    Status(status::StatusArgs),
    /// Check every invariant of the tables; exits non-zero naming the first broken key.
    Check(check::CheckArgs),
    /// Undo every block above a given one (within the reorg window).
    Unwind(unwind::UnwindArgs),
    /// Rewrite the database with full pages, in place (about a third smaller after a first
    /// sync); every other process using it must be stopped first.
    Compact(compact::CompactArgs),
    /// Upgrade a database of an older format in place (no re-index); every other process using
    /// it must be stopped first.
    Migrate(migrate::MigrateArgs),
    /// Read token names, symbols and decimals from the node again and store what changed
    /// (lists serve what was read at classification).
    RefreshMetadata(refresh::RefreshArgs),
    /// Record a range of the node's chain (blocks, receipts, call frames, probe answers) to a
    /// file that `sync --source` indexes with no node.
    Capture(capture::CaptureArgs),
}

impl Command {
    /// Lets `--classifiers` choose from `registry`.
    pub fn set_registry(&mut self, registry: ots_classifiers::Registry) {
        match self {
            Self::Run(a) => a.sync.registry = registry,
            Self::Sync(a) => a.sync.registry = registry,
            Self::Capture(a) => a.sync.registry = registry,
            Self::Serve(_)
            | Self::Status(_)
            | Self::Check(_)
            | Self::Unwind(_)
            | Self::Compact(_)
            | Self::Migrate(_)
            | Self::RefreshMetadata(_) => {}
        }
    }
}

/// The whole program with the built-in classifiers: what `ots-indexer` runs.
pub async fn main() -> std::process::ExitCode {
    main_with(ots_classifiers::Registry::builtin()).await
}

/// The whole program (config file, flags, logging, the subcommand) with the classifiers of
/// `registry` to choose from: a program with classifiers of its own calls this from its
/// `main` after [`ots_classifiers::Registry::with`], and needs no change to this crate.
pub async fn main_with(registry: ots_classifiers::Registry) -> std::process::ExitCode {
    crate::db::keep_freed_heap();
    heap::huge_pages(false);
    let args: Vec<String> = std::env::args().collect();
    let mut cmd = Cli::command();
    if let Some(path) = config_file::config_path(&args) {
        match config_file::with_config_file(cmd, std::path::Path::new(&path)) {
            Ok(with_file) => cmd = with_file,
            Err(e) => {
                eprintln!("error: {e}");
                return std::process::ExitCode::FAILURE;
            }
        }
    }
    let mut cli = match Cli::from_arg_matches(&cmd.get_matches_from(args)) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let filter = tracing_subscriber::EnvFilter::try_new(&cli.log)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(progress::LogWriter::default)
        .with_ansi(ansi);
    match cli.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
    cli.command.set_registry(registry);
    match dispatch(cli.command).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", describe(&e));
            std::process::ExitCode::FAILURE
        }
    }
}

/// The error and its causes, joined by `: `, each cause left out when the message before it
/// already says it: most errors here put their cause in their own message, and anyhow's `{:#}`
/// printed such a cause twice ("file is not an MDBX file: file is not an MDBX file").
fn describe(error: &anyhow::Error) -> String {
    let mut out = error.to_string();
    let mut before = out.clone();
    for cause in error.chain().skip(1) {
        let text = cause.to_string();
        if !before.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        before = text;
    }
    out
}

/// A read-only report piped into a reader that stops early (`status | head`) ends quietly, as
/// Unix tools do, instead of panicking in `println!` on the closed pipe. Only for the commands
/// that write nothing: the server and the writers keep ignoring SIGPIPE.
#[allow(unsafe_code)]
fn quiet_on_closed_pipe() {
    // SAFETY: restores the default disposition of one signal before any thread writes to the
    // pipe; no handler runs Rust code.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Runs the chosen subcommand.
pub async fn dispatch(command: Command) -> anyhow::Result<()> {
    if matches!(command, Command::Run(_) | Command::Sync(_) | Command::Capture(_) | Command::Migrate(_)) {
        heap::huge_pages(true);
    }
    match command {
        Command::Run(a) => run::run(a).await,
        Command::Sync(a) => sync::sync(a).await,
        Command::Serve(a) => serve::serve(a).await,
        Command::Status(a) => {
            quiet_on_closed_pipe();
            status::status(a).await
        }
        Command::Check(a) => {
            quiet_on_closed_pipe();
            check::check(&a)
        }
        Command::Unwind(a) => unwind::unwind(&a),
        Command::Compact(a) => compact::compact(&a),
        Command::Migrate(a) => migrate::migrate(&a).await,
        Command::Capture(a) => capture::capture(a).await,
        Command::RefreshMetadata(a) => refresh::refresh(a).await,
    }
}

/// Resolves when Ctrl-C or SIGTERM arrives.
pub(crate) async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(e) => {
                warn!(target: "ots::cli", error = %e, "cannot listen for SIGTERM; only Ctrl-C stops");
                let _ = tokio::signal::ctrl_c().await;
                return;
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}

/// A channel that turns true on Ctrl-C or SIGTERM.
pub(crate) fn stop_channel() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        info!(target: "ots::cli", "stop requested; finishing the current batch");
        let _ = tx.send(true);
    });
    rx
}

/// Starts the metrics endpoint and the terminal progress line, as asked.
async fn with_reporting(indexer: Indexer, sync_args: &args::SyncArgs) -> anyhow::Result<Indexer> {
    if let Some(addr) = sync_args.metrics_addr {
        crate::metrics::serve_metrics(addr, indexer.progress()).await?;
    }
    progress::spawn_if_terminal(indexer.progress());
    Ok(indexer)
}

/// The Etherscan walks' counts kept beside the database at `datadir`, for the chain it indexes.
pub(crate) fn walk_marks(
    datadir: &std::path::Path,
    db: &Db,
) -> Option<std::sync::Arc<crate::rpc::etherscan::marks_file::MarksFile>> {
    use crate::rpc::etherscan::marks_file::{MarksFile, FILE_NAME};
    let chain = db.begin_read().ok().and_then(|t| state::read_state(&t).ok()).and_then(|s| s.chain)?;
    Some(MarksFile::open(&datadir.join(FILE_NAME), chain))
}

/// Saves the walks' counts once more as the server stops (a failure is said once, as a WARN).
pub(crate) fn save_walk_marks(marks: Option<&crate::rpc::etherscan::marks_file::MarksFile>) {
    if let Some(marks) = marks {
        let _ = marks.save();
    }
}

/// Opens the database and refuses it if this build must not read or write it (another format,
/// left inconsistent).
pub(crate) fn open_usable(datadir: &std::path::Path, mode: AccessMode) -> anyhow::Result<Db> {
    let db = Db::open(datadir, mode)?;
    state::check_usable(&state::read_state(&db.begin_read()?)?)?;
    Ok(db)
}

/// Marks the database closed once indexing has ended with `result`, and says why it ended. The
/// indexing error comes first: a close that fails after it (on the same full disk, say) only
/// repeats the cause, so it is logged instead of shown in the error's place.
async fn close_after(indexer: Indexer, result: Result<(), SyncError>) -> anyhow::Result<()> {
    let closed = indexer.close().await;
    if let Err(error) = result {
        if let Err(close) = closed {
            warn!(target: "ots::cli", error = %close, "the database could not be marked closed either: the next start finds it as a crash leaves it, intact at its last checkpoint");
        }
        return Err(anyhow::Error::new(error).context("indexing stopped"));
    }
    anyhow::Context::context(closed, "marking the database closed")
}

/// Opens the database for writing and binds it to the node, waiting for the node if it is down.
/// `None` if a stop was requested meanwhile.
pub(crate) async fn start_indexer(
    node_args: &args::NodeArgs,
    db_args: &args::DbArgs,
    sync_args: &args::SyncArgs,
    stop: &watch::Receiver<bool>,
) -> anyhow::Result<Option<Indexer>> {
    sync_args.classifiers()?;
    let db = open_usable(&db_args.datadir, AccessMode::ReadWrite)?;
    if let Some(path) = &sync_args.source {
        let most = crate::source::fixture::MAX_REPLAY_BATCH_BLOCKS;
        anyhow::ensure!(
            sync_args.batch_blocks <= most,
            "--batch-blocks {} is over {most}, the most a replay of a recording keeps at once",
            sync_args.batch_blocks
        );
        let fixture = crate::source::fixture::Fixture::load(path)?;
        crate::source::BlockSource::batches_of(&fixture, sync_args.batch_blocks);
        let mut indexer = Indexer::open(db, fixture, sync_args.classifiers()?, sync_args.config()).await?;
        indexer.stop_on(stop.clone());
        return Ok(Some(with_reporting(indexer, sync_args).await?));
    }
    let timeout = Duration::from_secs(node_args.rpc_timeout_secs);
    loop {
        let classifiers = sync_args.classifiers()?;
        let opened = async {
            let mut node = NodeClient::open(&node_args.rpc_url, timeout).await?;
            if node_args.no_header_check {
                node = node.without_header_check();
            }
            let node = node.with_traces(node_args.trace_choice()).await?;
            Indexer::open(db.clone(), node, classifiers, sync_args.config()).await
        }
        .await;
        match opened {
            Ok(mut i) => {
                i.stop_on(stop.clone());
                return Ok(Some(with_reporting(i, sync_args).await?));
            }
            Err(SyncError::Source(e)) if e.not_a_node().is_some() => {
                let why = e.not_a_node().unwrap_or_default();
                // The answer's first line: an HTTP error quotes the whole page it came with.
                let said: String =
                    e.to_string().lines().next().unwrap_or_default().chars().take(160).collect();
                anyhow::bail!(
                    "{} is not an Ethereum node's JSON-RPC endpoint: {why} ({said}); give --rpc-url the node's HTTP or WebSocket JSON-RPC URL (for example http://127.0.0.1:8545)",
                    node_args.rpc_url
                );
            }
            Err(e) if e.is_transient() => {
                let url = &node_args.rpc_url;
                match e.unreachable_cause() {
                    Some(cause) => {
                        warn!(target: "ots::cli", %url, %cause, "the node cannot be reached at this URL; retrying in 2 s");
                    }
                    None => {
                        warn!(target: "ots::cli", error = %e, %url, "the node failed at start-up; retrying in 2 s")
                    }
                }
                let mut stop = stop.clone();
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(2)) => {}
                    _ = stop.changed() => return Ok(None),
                }
            }
            Err(e) => return Err(anyhow::Error::new(e).context("cannot start indexing")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot open {path}: {source}")]
    struct Quoting {
        path: &'static str,
        source: std::io::Error,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("the run stopped")]
    struct Silent {
        source: std::io::Error,
    }

    #[test]
    fn a_cause_is_said_once_whether_or_not_its_error_quotes_it() {
        let io = || std::io::Error::other("disk on fire");
        let quoted =
            anyhow::Error::new(Quoting { path: "/db", source: io() }).context("opening the database");
        assert_eq!(describe(&quoted), "opening the database: cannot open /db: disk on fire");
        let silent = anyhow::Error::new(Silent { source: io() });
        assert_eq!(describe(&silent), "the run stopped: disk on fire");
    }
}
