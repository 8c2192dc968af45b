//! Flag groups shared by several subcommands. Every flag can also come from the environment
//! variable named in `--help`.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use clap::Args;
use ots_classifiers::{Classifier, Registry};

use crate::{
    rpc,
    source::{NodeClient, TraceChoice},
    sync::{RunBudget, RunCompression, StageLimits, SyncConfig, WritePath, DEFAULT_REORG_WINDOW},
};

/// The node.
#[derive(Debug, Clone, Args)]
pub struct NodeArgs {
    /// JSON-RPC URL of the Ethereum node: http:// polls for new blocks, ws:// follows the head
    /// by newHeads subscription (no TLS: run beside the node). Classifying old contracts needs eth_call at old blocks,
    /// i.e. an archive node.
    #[arg(long, env = "OTS_RPC_URL", default_value = "http://127.0.0.1:8545")]
    pub rpc_url: String,

    /// Seconds before a node request is abandoned (and retried).
    #[arg(long, env = "OTS_RPC_TIMEOUT_SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub rpc_timeout_secs: u64,

    /// Where call frames come from: `auto` asks the node (trace_block, else
    /// debug_traceBlockByNumber with callTracer, else struct logs from debug_traceTransaction,
    /// else none). Without frames, contracts created by other contracts are not seen.
    #[arg(long, env = "OTS_TRACES", value_enum, default_value = "auto")]
    pub traces: Traces,

    /// Do not check that each block's hash is the hash of its header (for chains whose headers
    /// are not Ethereum's).
    #[arg(long, env = "OTS_NO_HEADER_CHECK")]
    pub no_header_check: bool,
}

/// `--traces` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Traces {
    /// Detect at start-up.
    Auto,
    /// `trace_block` (Erigon, reth, Nethermind, Anvil).
    Parity,
    /// `debug_traceBlockByNumber` with `callTracer` (geth).
    Geth,
    /// `debug_traceTransaction` with the default struct-log tracer, one transaction at a time,
    /// frames rebuilt from the steps (Hardhat's node; slower: measured in docs/benchmarks-history.md).
    Structlog,
    /// No call frames.
    None,
}

impl NodeArgs {
    /// A client for the node (no tracer chosen: for serving and status).
    pub async fn connect(&self) -> anyhow::Result<NodeClient> {
        Ok(NodeClient::open(&self.rpc_url, Duration::from_secs(self.rpc_timeout_secs)).await?)
    }

    /// What `--traces` asks for.
    pub const fn trace_choice(&self) -> TraceChoice {
        match self.traces {
            Traces::Auto => TraceChoice::Auto,
            Traces::Parity => TraceChoice::Parity,
            Traces::Geth => TraceChoice::Geth,
            Traces::Structlog => TraceChoice::StructLog,
            Traces::None => TraceChoice::None,
        }
    }
}

/// The database.
#[derive(Debug, Clone, Args)]
pub struct DbArgs {
    /// Directory of the index database.
    #[arg(long, env = "OTS_DATADIR", default_value = "ots-data")]
    pub datadir: PathBuf,
}

/// How to index.
#[derive(Debug, Clone, Args)]
pub struct SyncArgs {
    /// Classifiers to run, comma-separated, in order: one that reads another's matches comes
    /// after it (erc721 and erc1155 after erc165, erc4626 after erc20). Fixed for the life of a
    /// database.
    #[arg(
        long,
        env = "OTS_CLASSIFIERS",
        value_delimiter = ',',
        default_value = "erc20,erc165,erc721,erc1155,erc1167,erc4626"
    )]
    pub classifiers: Vec<String>,

    /// The classifiers this program knows by name (not a flag).
    #[arg(skip)]
    pub registry: Registry,

    /// Most blocks written in one database transaction (a bulk stage, one transaction for the whole stage, fetches at most 250 at a time: fewer blocks in flight).
    #[arg(long, env = "OTS_BATCH_BLOCKS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub batch_blocks: u64,

    /// A batch also ends once its blocks hold this many logs (bounds memory on busy chains).
    #[arg(long, env = "OTS_BATCH_MAX_LOGS", default_value_t = 500_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub batch_max_logs: u64,

    /// A batch also ends once fetching it took this many milliseconds (bounds commit latency).
    #[arg(long, env = "OTS_BATCH_MAX_MS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub batch_max_ms: u64,

    /// Blocks fetched from the node at the same time.
    #[arg(long, env = "OTS_FETCH_CONCURRENCY", default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub fetch_concurrency: u64,

    /// Milliseconds between head polls once caught up.
    #[arg(long, env = "OTS_POLL_INTERVAL_MS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(10..))]
    pub poll_interval_ms: u64,

    /// Index a recording made by `capture` instead of the node (no node needed).
    #[arg(long, env = "OTS_SOURCE")]
    pub source: Option<PathBuf>,

    /// Serve Prometheus metrics at http://ADDR/metrics (indexed block, head, lag, speed, batch
    /// write time, node errors by kind).
    #[arg(long, env = "OTS_METRICS_ADDR")]
    pub metrics_addr: Option<SocketAddr>,

    /// Newest blocks kept undoable: the deepest chain reorganisation that can be followed.
    #[arg(long, env = "OTS_REORG_WINDOW", default_value_t = DEFAULT_REORG_WINDOW, value_parser = clap::value_parser!(u64).range(1..))]
    pub reorg_window: u64,

    /// How blocks older than the reorg window are written: `bulk` gathers them in stages whose
    /// rows go to sorted run files under the datadir and are merged into the tables in one
    /// ordered pass per stage (a long catch-up stays linear); `incremental` writes batch by batch;
    /// `auto` takes `bulk` while at least 10,000 such blocks are left. Both give the same tables.
    #[arg(long, env = "OTS_WRITE_PATH", value_enum, default_value_t = WritePathArg::Auto)]
    pub write_path: WritePathArg,

    /// MiB of rows a bulk stage buffers in memory at most before it spills the largest buffers
    /// to run files (the stage's main memory cost). A stage holds 16 MiB at first and a quarter
    /// of what it has spilled later, up to this: its rows are sorted while it gathers, not all
    /// at its commit.
    #[arg(long, env = "OTS_STAGE_BUFFER_MIB", default_value_t = 192, value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub stage_buffer_mib: u64,

    /// A bulk stage merges and commits once its run files hold this many MiB (disk it needs
    /// under the datadir, besides the database). Default: two thirds of the disk's free space
    /// beyond `--stage-keep-free-mib`, measured as each stage begins (at least 256 MiB): fewer,
    /// larger stages are cheaper. A lower bound trades time for disk.
    #[arg(long, env = "OTS_STAGE_MAX_RUN_MIB", value_parser = clap::value_parser!(u64).range(1..))]
    pub stage_max_run_mib: Option<u64>,

    /// MiB of the datadir's disk a bulk stage leaves free for everything else (the node above
    /// all), when its run files' bound comes from the free disk (default: the larger of 4 GiB
    /// and 2 % of the file system).
    #[arg(long, env = "OTS_STAGE_KEEP_FREE_MIB", value_parser = clap::value_parser!(u64))]
    pub stage_keep_free_mib: Option<u64>,

    /// A bulk stage merges and commits once it has gathered blocks for this many seconds
    /// (a stop request commits at once). Default: no bound while the stage journal is kept (a
    /// crash loses nothing of the node's work, and fewer, larger stages are cheaper), 1,200 s
    /// without it (the most a crash can lose).
    #[arg(long, env = "OTS_STAGE_MAX_SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub stage_max_secs: Option<u64>,

    /// Whether a bulk stage keeps the blocks it fetched in a journal beside the database until
    /// it commits (`stage-journal.bin`, compressed): after a crash the next start gathers them
    /// again from it, without the node. `auto`: when fetching from a node, not from a recording
    /// (which is a journal already).
    #[arg(long, env = "OTS_STAGE_JOURNAL", value_enum, default_value_t = StageJournalArg::Auto)]
    pub stage_journal: StageJournalArg,

    /// A bulk stage merges and commits once it holds this many blocks (default: no bound of its
    /// own; the run files' size and the gathering time bound it). Stages of a fixed share of a
    /// chain, for measuring and testing many-stage catch-ups.
    #[arg(long, env = "OTS_STAGE_MAX_BLOCKS", value_parser = clap::value_parser!(u64).range(1..))]
    pub stage_max_blocks: Option<u64>,

    /// Whether a bulk stage writes its run files compressed (zstd, about 45 % of their bytes: a
    /// stage bounded by `--stage-max-run-mib` or the free disk holds about twice the blocks, so a
    /// catch-up longer than the disk holds at once takes fewer stages, each about a tenth slower).
    /// `auto`: once a stage has ended on that bound.
    #[arg(long, env = "OTS_STAGE_COMPRESS_RUNS", value_enum, default_value_t = StageCompressArg::Auto)]
    pub stage_compress_runs: StageCompressArg,

    /// Seconds the loop waits, once stopped on a node answer that retrying at once cannot
    /// change (a block it cannot read, state a pruned node no longer has), before it looks
    /// again; `status` says why it stopped meanwhile (docs/operations.md, "When the indexer
    /// stops").
    #[arg(long, env = "OTS_STOPPED_RECHECK_SECS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    pub stopped_recheck_secs: u64,

    /// Seconds the node may answer the same way that it lacks a block below its head, or that a
    /// block's parts do not add up, before the loop stops on it as above (a lagging replica
    /// behind a load balancer catches up in seconds; a node still syncing its old blocks does
    /// not).
    #[arg(long, env = "OTS_SAME_ANSWER_STOPS_SECS", default_value_t = 120)]
    pub same_answer_stops_secs: u64,

    /// Whether to keep the party-token index: for each address and token, the transactions in
    /// which the address moved that token, so that a deep page of an Etherscan token list of one
    /// token (`address` and `contractaddress`) is counted by the index instead of the node's logs.
    /// About a fifth more disk. Default: as the database has it (a new database without it).
    /// `on` for an existing database keeps it from the next block on; `off` drops it.
    #[arg(long, env = "OTS_PARTY_TOKEN_INDEX", value_enum)]
    pub party_token_index: Option<OnOff>,
}

/// An index the operator turns on or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OnOff {
    /// Kept.
    On,
    /// Not kept.
    Off,
}

/// `--stage-journal`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StageJournalArg {
    /// When fetching from a node.
    Auto,
    /// Always.
    On,
    /// Never.
    Off,
}

/// `--stage-compress-runs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StageCompressArg {
    /// Once a stage has ended on its run files' bound.
    Auto,
    /// Every stage.
    Always,
    /// No stage.
    Never,
}

impl From<StageCompressArg> for RunCompression {
    fn from(arg: StageCompressArg) -> Self {
        match arg {
            StageCompressArg::Auto => Self::Auto,
            StageCompressArg::Always => Self::Always,
            StageCompressArg::Never => Self::Never,
        }
    }
}

/// `--write-path`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WritePathArg {
    /// Bulk stages while far behind the head, then batch by batch.
    Auto,
    /// Bulk stages for every block older than the reorg window.
    Bulk,
    /// Batch by batch only.
    Incremental,
}

impl From<WritePathArg> for WritePath {
    fn from(arg: WritePathArg) -> Self {
        match arg {
            WritePathArg::Auto => Self::Auto,
            WritePathArg::Bulk => Self::Bulk,
            WritePathArg::Incremental => Self::Incremental,
        }
    }
}

impl SyncArgs {
    /// The loop's settings.
    pub fn config(&self) -> SyncConfig {
        let journal = match self.stage_journal {
            StageJournalArg::Auto => self.source.is_none(),
            StageJournalArg::On => true,
            StageJournalArg::Off => false,
        };
        SyncConfig {
            batch_blocks: self.batch_blocks,
            concurrency: usize::try_from(self.fetch_concurrency).unwrap_or(16),
            poll_interval: Duration::from_millis(self.poll_interval_ms),
            reorg_window: self.reorg_window,
            batch_max_logs: usize::try_from(self.batch_max_logs).unwrap_or(usize::MAX),
            batch_max_time: Duration::from_millis(self.batch_max_ms),
            write_path: self.write_path.into(),
            stage: StageLimits {
                buffer_bytes: usize::try_from(self.stage_buffer_mib << 20).unwrap_or(usize::MAX),
                max_run_bytes: self.stage_max_run_mib.map_or(
                    RunBudget::FromFreeDisk {
                        keep_free: self.stage_keep_free_mib.map(|mib| mib.saturating_mul(1 << 20)),
                    },
                    |mib| RunBudget::Fixed(mib.saturating_mul(1 << 20)),
                ),
                max_time: match (self.stage_max_secs, journal) {
                    (Some(secs), _) => Duration::from_secs(secs),
                    (None, true) => Duration::MAX,
                    (None, false) => Duration::from_secs(1200),
                },
                max_blocks: self.stage_max_blocks.unwrap_or(u64::MAX),
                repack_from_bytes: StageLimits::default().repack_from_bytes,
                journal,
                compress_runs: self.stage_compress_runs.into(),
            },
            stopped_recheck: Duration::from_secs(self.stopped_recheck_secs),
            same_answer_stops: Duration::from_secs(self.same_answer_stops_secs),
            party_token_index: self.party_token_index.map(|choice| choice == OnOff::On),
        }
    }

    /// The classifiers named by `--classifiers`, from the built-ins and whatever the program
    /// registered (see [`crate::cli::main_with`]).
    pub fn classifiers(&self) -> anyhow::Result<Vec<Box<dyn Classifier>>> {
        Ok(self.registry.resolve(&self.classifiers)?)
    }
}

/// The API server.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address the JSON-RPC server listens on.
    #[arg(long, env = "OTS_HTTP_ADDR", default_value = "127.0.0.1:8546")]
    pub http_addr: SocketAddr,

    /// Largest `count` accepted by address lists such as ots2_getERC20TransferList.
    #[arg(long, env = "OTS_MAX_PAGE_SIZE", default_value_t = rpc::DEFAULT_MAX_PAGE_SIZE)]
    pub max_page_size: u64,

    /// Most rows one page of an Etherscan API list (`offset`) may ask for, on `/api` and
    /// `/v2/api`. There is no cap on `page × offset`: every page of a list can be read.
    #[arg(long, env = "OTS_ETHERSCAN_MAX_OFFSET", default_value_t = rpc::etherscan::DEFAULT_MAX_OFFSET)]
    pub etherscan_max_offset: u64,

    /// API keys the Etherscan paths admit, comma-separated; a call must then carry one in
    /// `apikey`. Without keys `apikey` is ignored and every call is served. Prefer the
    /// environment variable (or the config file) to keep keys out of the process list.
    #[arg(long, env = "OTS_ETHERSCAN_API_KEYS", value_delimiter = ',', hide_env_values = true)]
    pub etherscan_api_keys: Vec<String>,

    /// Calls a second each Etherscan API key may make (0: no limit); a call over it is refused
    /// with Etherscan's rate-limit answer.
    #[arg(long, env = "OTS_ETHERSCAN_KEY_RATE", default_value_t = rpc::etherscan::DEFAULT_KEY_RATE)]
    pub etherscan_key_rate: u32,

    /// Largest page ots_searchTransactionsBefore/After accept (Erigon's default is 25, what the
    /// Otterscan UI asks for); each transaction of a page costs the node two lookups.
    #[arg(long, env = "OTS_MAX_SEARCH_PAGE_SIZE", default_value_t = rpc::DEFAULT_MAX_SEARCH_PAGE)]
    pub max_search_page_size: u64,

    /// MiB of transactions and receipts kept from the node for pages shown again (the first
    /// page of a busy address, opened by every visitor); 0 turns the cache off. Entries of
    /// blocks in the reorg window are served only while the index holds the same block.
    #[arg(long, env = "OTS_TX_CACHE_MIB", default_value_t = rpc::tx_cache::DEFAULT_TX_CACHE_MIB)]
    pub tx_cache_mib: u64,

    /// Most pending transactions kept in memory from the node's pool (for
    /// ots2_getPendingTransactions and pendingActivity subscriptions); the oldest first seen
    /// leave first. 0 turns following the pool off.
    #[arg(long, env = "OTS_MAX_PENDING_TRANSACTIONS", default_value_t = crate::pending::DEFAULT_MAX_PENDING)]
    pub max_pending_transactions: usize,

    /// Browser origins allowed to call the API: `*` (any; the API is read-only), a
    /// comma-separated list such as `http://localhost:5173,https://explorer.example`, or `none`.
    #[arg(long, env = "OTS_HTTP_CORS", default_value = "*", value_parser = rpc::Cors::parse)]
    pub http_cors: rpc::Cors,

    /// Methods forwarded to the node even though the deny-list blocks them: names (`debug_traceTransaction`),
    /// namespaces (`debug_`) or prefixes (`eth_sign*`); comma-separated. Use with care on a public URL.
    #[arg(long, env = "OTS_PROXY_ALLOW", value_delimiter = ',')]
    pub proxy_allow: Vec<String>,

    /// Methods never forwarded to the node, in addition to the default deny-list (admin_, personal_,
    /// miner_, debug_, anvil_, evm_, hardhat_, txpool_, engine_, eth_sendTransaction, eth_sign*);
    /// `*` forwards nothing.
    #[arg(long, env = "OTS_PROXY_DENY", value_delimiter = ',')]
    pub proxy_deny: Vec<String>,

    /// Largest request body, in bytes.
    #[arg(long, env = "OTS_MAX_REQUEST_BYTES", default_value_t = rpc::server_defaults::MAX_REQUEST_BYTES)]
    pub max_request_bytes: u32,

    /// Largest response body, in bytes.
    #[arg(long, env = "OTS_MAX_RESPONSE_BYTES", default_value_t = rpc::server_defaults::MAX_RESPONSE_BYTES)]
    pub max_response_bytes: u32,

    /// Most calls in one JSON-RPC batch.
    #[arg(long, env = "OTS_MAX_BATCH", default_value_t = rpc::server_defaults::MAX_BATCH_LEN)]
    pub max_batch: u32,

    /// Most open connections, HTTP and WebSocket together; more get HTTP 429.
    #[arg(long, env = "OTS_MAX_CONNECTIONS", default_value_t = rpc::server_defaults::MAX_CONNECTIONS)]
    pub max_connections: u32,

    /// Most subscriptions one WebSocket connection may hold.
    #[arg(long, env = "OTS_MAX_SUBSCRIPTIONS", default_value_t = rpc::server_defaults::MAX_SUBSCRIPTIONS)]
    pub max_subscriptions: u32,

    /// Messages a WebSocket connection may leave unread before its subscriptions are dropped.
    #[arg(long, env = "OTS_MAX_PENDING_MESSAGES", default_value_t = rpc::server_defaults::MAX_PENDING_MESSAGES)]
    pub max_pending_messages: u32,

    /// Longest a call that waits on the node may take (list pages, forwarded calls), in seconds.
    #[arg(long, env = "OTS_REQUEST_TIMEOUT", default_value_t = rpc::server_defaults::REQUEST_TIMEOUT_SECS)]
    pub request_timeout: u64,
}

impl ServeArgs {
    /// The pending pool `--max-pending-transactions` asks for, following `node`.
    pub async fn pending(
        &self,
        node: &crate::source::NodeClient,
        db: &crate::db::Db,
    ) -> Option<crate::pending::PendingPool> {
        if self.max_pending_transactions == 0 {
            return None;
        }
        let config =
            crate::pending::PendingConfig { max: self.max_pending_transactions, ..Default::default() };
        Some(crate::pending::PendingPool::start(node.clone(), db.clone(), config).await)
    }

    /// The page cache `--tx-cache-mib` asks for.
    pub fn tx_cache(&self) -> rpc::tx_cache::TxCache {
        rpc::tx_cache::TxCache::new(
            usize::try_from(self.tx_cache_mib.saturating_mul(1 << 20)).unwrap_or(usize::MAX),
        )
    }

    /// The server's options from the flags.
    pub fn options(&self) -> rpc::ServerOptions {
        rpc::ServerOptions {
            max_request_bytes: self.max_request_bytes,
            max_response_bytes: self.max_response_bytes,
            max_batch_len: self.max_batch,
            max_connections: self.max_connections,
            max_subscriptions_per_connection: self.max_subscriptions,
            max_pending_messages: self.max_pending_messages,
            request_timeout: std::time::Duration::from_secs(self.request_timeout.max(1)),
            cors: self.http_cors.clone(),
            proxy: rpc::ProxyPolicy::new(&self.proxy_allow, &self.proxy_deny),
            etherscan_max_offset: self.etherscan_max_offset.max(1),
            etherscan_keys: self.etherscan_api_keys.clone(),
            etherscan_key_rate: self.etherscan_key_rate,
            walk_marks: None,
        }
    }
}
