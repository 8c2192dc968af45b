//! On a terminal, `sync` draws a progress line (block, percentage, rate, ETA) that log lines
//! clear before they print; into a file or pipe it writes plain log lines only.
//!
//! The terminal is a real pseudo-terminal from util-linux `script`; the node is Anvil behind a
//! proxy that answers slowly, so that catching up lasts long enough for the line to be drawn.

use crate::common;

use std::{
    os::unix::process::CommandExt,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use common::{anvil::Anvil, fault_proxy::FaultProxy, Client};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_ots-indexer");
const BLOCKS: u64 = 40;
const CLEAR_LINE: &str = "\r\x1b[2K";

/// Ends the whole process group (`script` and the indexer under it), also when a test fails.
struct GroupGuard(std::process::Child);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", "--", &format!("-{}", self.0.id())])
            .stderr(Stdio::null())
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while matches!(self.0.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.0.id())])
            .stderr(Stdio::null())
            .status();
        let _ = self.0.wait();
    }
}

/// True for a drawn progress line such as `block 12/40 (30.0%)  9 blocks/s  ETA 0:00:03`.
fn is_catch_up_line(segment: &str) -> bool {
    let Some(rest) = segment.strip_prefix("block ") else { return false };
    let Some((numbers, rest)) = rest.split_once(" (") else { return false };
    let Some((done, total)) = numbers.split_once('/') else { return false };
    done.parse::<u64>().is_ok()
        && total.parse::<u64>().is_ok_and(|t| t >= BLOCKS)
        && rest.contains("%)  ")
        && rest.contains(" blocks/s  ETA ")
}

async fn wait_for_screen(screen: &std::path::Path, text: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let output = String::from_utf8_lossy(&std::fs::read(screen).expect("read screen")).into_owned();
        if output.contains(text) {
            return output;
        }
        assert!(Instant::now() < deadline, "no `{text}` line on the terminal:\n{output}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_line_on_a_terminal_only() {
    let anvil = Anvil::start(&[]);
    Client::new(&anvil.url).call("anvil_mine", json!([format!("{BLOCKS:#x}")])).await;
    let proxy = FaultProxy::start(&anvil.url).await;
    proxy.slow_down(Duration::from_millis(60));

    let dir = tempfile::tempdir().expect("tempdir");
    let datadir = dir.path().join("db");
    let screen = dir.path().join("screen.txt");
    let command = format!(
        "{BIN} sync --rpc-url {} --datadir {} --batch-blocks 1 --fetch-concurrency 1 --poll-interval-ms 100",
        proxy.url,
        datadir.display()
    );
    let child = Command::new("script")
        .args(["-qfec", &command, "/dev/null"])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&screen).expect("screen file"))
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("util-linux `script` must be installed");
    let guard = GroupGuard(child);

    wait_for_screen(&screen, &format!("block {BLOCKS} (following the head)")).await;
    // A new block makes a log line while the progress line is drawn.
    Client::new(&anvil.url).call("anvil_mine", json!(["0x1"])).await;
    let output = wait_for_screen(&screen, &format!("block {} (following the head)", BLOCKS + 1)).await;
    drop(guard);

    let segments: Vec<&str> = output.split(CLEAR_LINE).collect();
    assert!(
        segments.iter().any(|s| is_catch_up_line(s)),
        "no progress line with rate and ETA while catching up:\n{output:?}"
    );
    for segment in segments.iter().filter(|s| s.starts_with("block ")) {
        assert!(!segment.contains('\n'), "a log line was written over the progress line: {segment:?}");
    }
    assert!(output.contains("indexed batch"), "log lines still reach the terminal:\n{output}");

    // Not a terminal: the same command (now to the head and out) writes no progress line.
    let plain = Command::new(BIN)
        .args(["sync", "--rpc-url", &proxy.url, "--datadir"])
        .arg(&datadir)
        .arg("--exit-at-head")
        .stdin(Stdio::null())
        .output()
        .expect("run sync");
    assert!(plain.status.success(), "{}", String::from_utf8_lossy(&plain.stderr));
    let stderr = String::from_utf8_lossy(&plain.stderr);
    assert!(!stderr.contains('\x1b') && !stderr.contains("ETA"), "terminal codes in a pipe: {stderr:?}");
}
