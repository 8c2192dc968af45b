//! geth itself, the node most people run beside an explorer: `geth --dev` built at a pinned
//! version by `testbed/setup.sh`. It seals a block as soon as a transaction arrives, has one
//! funded, unlocked account, `eth_getBlockReceipts`, `debug_traceBlockByNumber` and
//! `debug_traceTransaction` with the native `callTracer` and with struct logs, `txpool_content`,
//! and no `trace_`, `ots_` or `erigon_`.

use std::{
    process::{Child, Command, Stdio},
    time::Duration,
};

use super::anvil::{ensure_testbed, spawn_node, testbed_dir};

/// A running `geth --dev` on a free loopback port (HTTP and WebSocket on the same port), its
/// data in a temporary directory; stopped when dropped.
#[derive(Debug)]
pub struct Geth {
    child: Child,
    _data: tempfile::TempDir,
    /// Its JSON-RPC URL.
    pub url: String,
}

impl Geth {
    /// Starts a fresh dev chain.
    pub fn start() -> Self {
        ensure_testbed();
        let bin = testbed_dir().join("bin/geth");
        let data = tempfile::tempdir().expect("tempdir");
        let dir = data.path().to_str().expect("utf-8 path").to_owned();
        let (child, url) = spawn_node(
            "geth --dev",
            Duration::from_secs(60),
            |port| {
                let port = port.to_string();
                Command::new(&bin)
                    .args([
                        "--dev",
                        "--dev.period",
                        "0",
                        "--datadir",
                        &dir,
                        // Classifying a contract calls it at its deployment block: geth
                        // keeps only the last 128 blocks' state unless it is an archive node.
                        "--gcmode",
                        "archive",
                        "--state.scheme",
                        "hash",
                        "--nodiscover",
                        "--maxpeers",
                        "0",
                    ])
                    .args(["--http", "--http.addr", "127.0.0.1", "--http.port", &port])
                    .args(["--http.api", "eth,net,web3,debug,txpool"])
                    .args([
                        "--ws",
                        "--ws.addr",
                        "127.0.0.1",
                        "--ws.port",
                        &port,
                        "--ws.api",
                        "eth,net,web3,debug,txpool",
                    ])
                    .args(["--authrpc.port", "0", "--port", "0", "--verbosity", "1"])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::inherit())
                    .spawn()
                    .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()))
            },
            None,
        );
        Self { child, _data: data, url }
    }
}

impl Drop for Geth {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
