//! What a new user meets on the command line when something is wrong: each mistake gets one
//! clear message and the right exit status, never a retry loop or a raw MDBX error code.

use crate::common;

use std::{
    process::{Command, Output, Stdio},
    time::{Duration, Instant},
};

use common::transfer_chain;
use ots_indexer::{
    db::{AccessMode, Db, DATA_FILE},
    status::read_status,
};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_ots-indexer");

/// Runs the binary with `args`, killing it if it is still running after `limit`.
fn run_bounded(args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("OTS_RPC_URL")
        .spawn()
        .expect("spawn ots-indexer");
    let started = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "`ots-indexer {}` still ran after {limit:?}; stderr:\n{}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("output")
}

/// A small indexed database in a new temporary directory.
fn small_database(to: u64, per_batch: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
    transfer_chain::index(&db, 0, to, per_batch);
    dir
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_node_url_that_can_never_work_stops_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let datadir = dir.path().to_str().expect("utf-8 path");
    let out = run_bounded(
        &["run", "--rpc-url", "foo://bar", "--datadir", datadir, "--http-addr", "127.0.0.1:0"],
        Duration::from_secs(30),
    );
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "exit status {:?}", out.status);
    assert!(stderr.contains("scheme foo is not supported"), "{stderr}");
    assert!(!stderr.contains("retrying"), "a bad URL is not retried: {stderr}");
}

/// A URL that reaches an HTTP server but no JSON-RPC (here a static file server, which answers
/// POST with 501; a consensus client's REST port answers 404) was retried every 2 s for ever.
/// Now it stops at start with what the server said and which URL is wanted.
#[test]
fn a_url_that_answers_no_json_rpc_stops_at_start() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("port").port();
    let files = tempfile::tempdir().expect("tempdir");
    let mut server = Command::new("python3")
        .args(["-m", "http.server", "--bind", "127.0.0.1", &port.to_string()])
        .current_dir(files.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3's http.server");
    let url = format!("http://127.0.0.1:{port}");
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(started.elapsed() < Duration::from_secs(20), "http.server did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let datadir = dir.path().to_str().expect("utf-8 path");
    let out = run_bounded(
        &["run", "--rpc-url", &url, "--datadir", datadir, "--http-addr", "127.0.0.1:0"],
        Duration::from_secs(30),
    );
    let _ = server.kill();
    let _ = server.wait();
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "exit status {:?}", out.status);
    assert!(stderr.contains(&format!("{url} is not an Ethereum node's JSON-RPC endpoint")), "{stderr}");
    assert!(stderr.contains("HTTP 501"), "{stderr}");
    assert!(!stderr.contains("retrying"), "not retried: {stderr}");
}

#[test]
fn serving_a_directory_without_a_database_says_which_command_creates_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("nothing-here");
    let out = run_bounded(
        &["serve", "--datadir", missing.to_str().expect("utf-8"), "--http-addr", "127.0.0.1:0"],
        Duration::from_secs(30),
    );
    let stderr = text(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("there is no database in"), "{stderr}");
    assert!(stderr.contains("ots-indexer run"), "{stderr}");
    assert!(!stderr.contains("unknown error code"), "{stderr}");
    assert!(!missing.exists(), "a read-only command created {}", missing.display());
}

#[test]
fn a_file_that_is_not_a_database_is_named_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join(DATA_FILE), vec![0x5a_u8; 64 << 10]).expect("write");
    let datadir = dir.path().to_str().expect("utf-8");
    let out = run_bounded(&["status", "--datadir", datadir], Duration::from_secs(60));
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("cannot open the database at"), "{stderr}");
    // MDBX's reason, once: the message quotes its cause, which the error chain also holds.
    assert_eq!(stderr.matches("not an MDBX file").count(), 1, "{stderr}");
}

#[test]
fn unwinding_to_a_block_at_or_above_the_tip_says_there_is_nothing_to_unwind() {
    let dir = small_database(6, 3);
    let datadir = dir.path().to_str().expect("utf-8 path");
    for to in ["5", "900"] {
        let out = run_bounded(&["unwind", "--datadir", datadir, "--to", to], Duration::from_secs(30));
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(stdout.contains("nothing to unwind"), "{stdout}");
        assert!(stdout.contains("newest indexed block is 5"), "{stdout}");
    }
    // Below the tip it still unwinds.
    let out = run_bounded(&["unwind", "--datadir", datadir, "--to", "4"], Duration::from_secs(30));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("the newest indexed block is now 4"), "{}", text(&out.stdout));
}

#[test]
fn status_reports_the_file_size_and_the_bytes_in_use_not_the_map_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
        transfer_chain::index(&db, 0, 20, 5);
    }
    let on_disk = std::fs::metadata(dir.path().join(DATA_FILE)).expect("data file").len();
    let db = Db::open(dir.path(), AccessMode::ReadOnly).expect("open");
    let status = read_status(&db, None, None).expect("status");
    assert_eq!(status.file_bytes, on_disk);
    assert!(status.file_bytes < 1 << 30, "file size {} is the map's upper bound", status.file_bytes);
    assert!(status.used_bytes > 0 && status.used_bytes <= status.file_bytes, "{status:?}");
    let tables: u64 = status.tables.iter().map(|t| t.bytes).sum();
    assert!(status.used_bytes >= tables, "in use {} < tables {tables}", status.used_bytes);
    drop(db);

    let datadir = dir.path().to_str().expect("utf-8 path");
    let out = run_bounded(
        &["status", "--datadir", datadir, "--json", "--rpc-url", "http://127.0.0.1:1"],
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: Value = serde_json::from_slice(&out.stdout).expect("status --json is JSON");
    assert_eq!(json["fileBytes"], Value::from(on_disk));
    assert_eq!(json["usedBytes"], Value::from(status.used_bytes));
}

#[test]
fn status_without_a_node_says_none_was_given() {
    let dir = small_database(5, 2);
    let datadir = dir.path().to_str().expect("utf-8 path");
    let out = run_bounded(&["status", "--datadir", datadir], Duration::from_secs(60));
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(stdout.contains("no node given"), "{stdout}");
    assert!(!stdout.contains("8545"), "a default URL is not the database's node: {stdout}");
}

#[test]
fn a_node_not_there_at_start_up_is_named_by_its_url_not_by_a_probe() {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let url = format!("http://127.0.0.1:{port}");
    let log = dir.path().join("stderr.log");
    let mut child = Command::new(BIN)
        .args(["sync", "--rpc-url", &url, "--datadir"])
        .arg(dir.path().join("db"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .env_remove("OTS_RPC_URL")
        .spawn()
        .expect("spawn ots-indexer");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut stderr = String::new();
    while Instant::now() < deadline && !stderr.contains("retrying") {
        std::thread::sleep(Duration::from_millis(100));
        stderr = std::fs::read_to_string(&log).unwrap_or_default();
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(stderr.contains("the node cannot be reached at this URL"), "{stderr}");
    assert!(stderr.contains(&url), "{stderr}");
    assert!(!stderr.contains("trace_block"), "the probe that went first is not the news: {stderr}");
}

#[test]
fn status_into_a_closed_pipe_ends_quietly() {
    let dir = small_database(5, 2);
    let mut child = Command::new(BIN)
        .args(["status", "--datadir"])
        .arg(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("OTS_RPC_URL")
        .spawn()
        .expect("spawn ots-indexer");
    drop(child.stdout.take()); // the reader is gone before the first line
    let out = child.wait_with_output().expect("output");
    let stderr = text(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
}
