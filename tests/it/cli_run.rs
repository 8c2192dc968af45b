//! The `ots-indexer run` binary against a real node: it indexes to the head, serves over HTTP
//! while following, stops cleanly on SIGTERM, and refuses a database made for another chain.

use crate::common;

use std::{
    net::TcpListener,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use alloy::primitives::B256;
use common::{anvil::Anvil, workload, Client};
use ots_indexer::db::{
    state::{self, ChainIdentity, DbState},
    AccessMode, Db,
};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_ots-indexer");

fn free_addr() -> String {
    let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("port").port();
    format!("127.0.0.1:{port}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_indexes_follows_and_stops_cleanly() {
    let anvil = Anvil::start(&[]);
    let work = workload::run(&anvil.url).await;
    let expected = work.expected_transfer_txs();
    let a0 = work.accounts[0];

    let dir = tempfile::tempdir().expect("tempdir");
    let http = free_addr();
    let metrics = free_addr();
    let child = Command::new(BIN)
        .args(["run", "--datadir"])
        .arg(dir.path())
        .args([
            "--http-addr",
            &http,
            "--poll-interval-ms",
            "100",
            "--batch-blocks",
            "4",
            "--metrics-addr",
            &metrics,
            "--reorg-window",
            "8",
        ])
        .env("OTS_RPC_URL", &anvil.url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn ots-indexer");
    let mut child = KillOnDrop(child);

    let client = Client::new(&format!("http://{http}"));
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let done = client.try_call("ots2_getERC20TransferCount", json!([a0])).await
            == Ok(json!(expected[&a0].len()));
        if done {
            break;
        }
        assert!(child.try_wait().expect("wait").is_none(), "ots-indexer exited early");
        assert!(Instant::now() < deadline, "ots-indexer did not reach the head in time");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(client.call("ots2_getERC20Count", json!([])).await, json!(2));

    // It keeps following: a new transfer block shows up.
    let mut chain = workload::Chain::connect(&anvil.url);
    let before = expected[&work.accounts[2]].len();
    chain.transfer(work.tokens[0].address, a0, work.accounts[2], 1).await;
    chain.mine().await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while client.call("ots2_getERC20TransferCount", json!([work.accounts[2]])).await != json!(before + 1) {
        assert!(Instant::now() < deadline, "the new block was not indexed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Prometheus metrics, and the status method scripts wait on.
    let head_now = client_for(&anvil.url).call("eth_blockNumber", json!([])).await;
    let head_now =
        u64::from_str_radix(head_now.as_str().expect("hex").trim_start_matches("0x"), 16).expect("hex");
    // The progress the metrics read is published just after the commit that readers see.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut page = http_get(&metrics, "/metrics");
    while !page.contains(&format!("\nots_indexed_block {head_now}\n")) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        page = http_get(&metrics, "/metrics");
    }
    assert!(page.contains(&format!("\nots_indexed_block {head_now}\n")), "{page}");
    assert!(
        page.contains("ots_lag_blocks 0") && page.contains("ots_rpc_errors_total{kind=\"request\"} 0"),
        "{page}"
    );
    assert!(page.contains("ots_batch_write_seconds_total"), "{page}");
    assert!(http_get(&metrics, "/other").starts_with("HTTP/1.1 404"));
    let status = client.call("ots2_getIndexerStatus", json!([])).await;
    assert_eq!(status["indexedBlock"], json!(head_now));
    assert_eq!(status["headBlock"], json!(head_now));
    assert_eq!(status["lag"], json!(0));
    assert_eq!(status["tracer"], json!("trace_block"));
    assert_eq!(status["dbState"], json!("open"));
    assert!(status["tables"]
        .as_array()
        .expect("tables")
        .iter()
        .any(|t| t["name"] == "OtsERC20TransferIndex" && t["entries"].as_u64() > Some(0)));

    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("kill");
    assert!(status.success());
    let exit = child.wait().expect("wait");
    assert!(exit.success(), "ots-indexer exited with {exit}");

    let db = Db::open(dir.path(), AccessMode::ReadOnly).expect("reopen");
    let s = state::read_state(&db.begin_read().expect("read")).expect("state");
    assert_eq!(s.db_state, Some(DbState::Closed));
    let head: serde_json::Value = client_for(&anvil.url).call("eth_blockNumber", json!([])).await;
    let head = u64::from_str_radix(head.as_str().expect("hex").trim_start_matches("0x"), 16).expect("hex");
    assert_eq!(s.checkpoint.map(|c| c.number), Some(head));
    drop(db);

    // status, check and unwind on the stopped database.
    let cli = |args: &[&str]| {
        let out = Command::new(BIN)
            .args(args)
            .arg("--datadir")
            .arg(dir.path())
            .env("OTS_RPC_URL", &anvil.url)
            .output()
            .expect("cli");
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let status: serde_json::Value = serde_json::from_str(&cli(&["status", "--json"])).expect("json");
    assert_eq!((status["indexedBlock"].as_u64(), status["lag"].as_u64()), (Some(head), Some(0)));
    assert_eq!(status["dbState"], json!("closed"));
    assert!(status["blocksPerSecond"].as_f64().is_some_and(|r| r > 0.0), "{status}");
    assert!(cli(&["status"]).contains("OtsERC20TransferCounter"));
    assert!(cli(&["check"]).starts_with("ok: "));
    let hash = |out: String| {
        out.lines().find_map(|l| l.strip_prefix("tables hash 0x").map(str::to_owned)).expect("a hash line")
    };
    let whole = hash(cli(&["check", "--hash"]));
    assert_eq!(whole.len(), 64, "{whole}");
    assert!(cli(&["unwind", "--to", &(head - 2).to_string()]).contains(&format!("block is now {}", head - 2)));
    let status: serde_json::Value = serde_json::from_str(&cli(&["status", "--json"])).expect("json");
    assert_eq!(status["indexedBlock"].as_u64(), Some(head - 2));
    assert!(cli(&["check"]).starts_with("ok: "));
    assert_ne!(hash(cli(&["check", "--hash"])), whole, "two blocks fewer, other tables");
    let out = Command::new(BIN)
        .args(["unwind", "--to", "0", "--datadir"])
        .arg(dir.path())
        .output()
        .expect("unwind");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("reorg window"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Kills the child process if the test ends early (a panic), so it never outlives the test.
struct KillOnDrop(std::process::Child);

impl std::ops::Deref for KillOnDrop {
    type Target = std::process::Child;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for KillOnDrop {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn http_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).expect("write");
    let mut out = String::new();
    stream.read_to_string(&mut out).expect("read");
    out
}

fn client_for(url: &str) -> Client {
    Client::new(url)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_refuses_a_database_of_another_chain() {
    let anvil = Anvil::start(&[]);
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
        let txn = db.begin_write().expect("write");
        let mainnet = ChainIdentity { chain_id: 1, genesis_hash: B256::repeat_byte(0xd4) };
        state::bind(&txn, mainnet, &["erc20".to_owned()]).expect("bind");
        txn.commit().expect("commit");
    }
    let out = Command::new(BIN)
        .args(["run", "--rpc-url", &anvil.url, "--http-addr", &free_addr(), "--datadir"])
        .arg(dir.path())
        .output()
        .expect("run");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("chain id 1 ") && stderr.contains("chain id 31337"), "{stderr}");
}

#[test]
fn help_explains_every_flag() {
    let out = Command::new(BIN).args(["run", "--help"]).output().expect("help");
    let text = String::from_utf8_lossy(&out.stdout);
    for flag in ["--rpc-url", "--datadir", "--http-addr", "--batch-blocks", "--max-page-size", "OTS_RPC_URL"]
    {
        assert!(text.contains(flag), "--help lacks {flag}:\n{text}");
    }
}

#[test]
fn unknown_classifier_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(BIN)
        .args(["run", "--classifiers", "erc20,nope", "--datadir"])
        .arg(dir.path())
        .output()
        .expect("run");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unknown classifier \"nope\""), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_file_sets_flags_and_flags_override_it() {
    let anvil = Anvil::start(&[]);
    workload::run(&anvil.url).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("ots.toml");
    let datadir = dir.path().join("from-config");
    std::fs::write(
        &config,
        format!(
            "rpc-url = \"{}\"\ndatadir = \"{}\"\nbatch-blocks = 2\nclassifiers = [\"erc20\"]\n",
            anvil.url,
            datadir.display()
        ),
    )
    .expect("write config");
    let out = Command::new(BIN)
        .args(["sync", "--exit-at-head", "--config"])
        .arg(&config)
        .env_remove("OTS_RPC_URL")
        .env_remove("OTS_DATADIR")
        .output()
        .expect("sync");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Caught up, `sync --exit-at-head` says what the run did in one line.
    let logs = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let summary = logs.lines().find(|l| l.contains("run summary")).expect("a run summary line");
    assert!(summary.contains(" transactions=") && summary.contains(" write_seconds="), "{summary}");
    let db = Db::open(&datadir, AccessMode::ReadOnly).expect("the config's datadir was used");
    assert!(state::read_state(&db.begin_read().expect("read")).expect("state").checkpoint.is_some());

    // A flag beats the file.
    let other = dir.path().join("from-flag");
    let out = Command::new(BIN)
        .args(["sync", "--exit-at-head", "--datadir"])
        .arg(&other)
        .arg("--config")
        .arg(&config)
        .output()
        .expect("sync");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(other.join("mdbx.dat").exists());

    // Unknown keys are refused, naming the key.
    std::fs::write(&config, "rpc-ulr = \"x\"\n").expect("write");
    let out = Command::new(BIN).args(["status", "--config"]).arg(&config).output().expect("status");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown key `rpc-ulr`"));
}
