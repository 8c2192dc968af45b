//! Hardhat 2's node, the second node implementation of the test bed: it lacks
//! `eth_getBlockReceipts`, every `trace_` method, named tracers, `ots_` and `erigon_`.

use std::{
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use super::anvil::{answers, ensure_testbed, free_port, testbed_dir};

/// A running Hardhat node on a free loopback port, mining only on `evm_mine` (its config is
/// `testbed/hardhat/hardhat.config.js`); stopped when dropped.
#[derive(Debug)]
pub struct Hardhat {
    child: Child,
    /// Its JSON-RPC URL.
    pub url: String,
}

impl Hardhat {
    /// Starts a fresh node.
    pub fn start() -> Self {
        ensure_testbed();
        let bin = testbed_dir().join("node_modules/.bin/hardhat");
        for _attempt in 0..3 {
            let port = free_port();
            let child = Command::new(&bin)
                .args(["node", "--hostname", "127.0.0.1", "--port", &port.to_string()])
                .current_dir(testbed_dir().join("hardhat"))
                .env("HARDHAT_DISABLE_TELEMETRY_PROMPT", "true")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
            let mut node = Self { child, url: format!("http://127.0.0.1:{port}") };
            let deadline = Instant::now() + Duration::from_secs(60);
            while Instant::now() < deadline {
                if answers(&node.url) {
                    return node;
                }
                if let Ok(Some(_)) = node.child.try_wait() {
                    break; // lost the port race; try another
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            node.stop();
        }
        panic!("Hardhat's node did not start");
    }

    /// Stops the node.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Hardhat {
    fn drop(&mut self) {
        self.stop();
    }
}
