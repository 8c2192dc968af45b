//! Hardhat 2's node, the second node implementation of the test bed: it lacks
//! `eth_getBlockReceipts`, every `trace_` method, named tracers, `ots_` and `erigon_`.

use std::{
    process::{Child, Command, Stdio},
    time::Duration,
};

use super::anvil::{ensure_testbed, spawn_node, testbed_dir};

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
        let (child, url) = spawn_node(
            "Hardhat's node",
            Duration::from_secs(60),
            |port| {
                Command::new(&bin)
                    .args(["node", "--hostname", "127.0.0.1", "--port", &port.to_string()])
                    .current_dir(testbed_dir().join("hardhat"))
                    .env("HARDHAT_DISABLE_TELEMETRY_PROMPT", "true")
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::inherit())
                    .spawn()
                    .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()))
            },
            None,
        );
        Self { child, url }
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
