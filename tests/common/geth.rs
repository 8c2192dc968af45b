//! geth itself, the node most people run beside an explorer: `geth --dev` built at a pinned
//! version by `testbed/setup.sh`. It seals a block as soon as a transaction arrives, has one
//! funded, unlocked account, `eth_getBlockReceipts`, `debug_traceBlockByNumber` and
//! `debug_traceTransaction` with the native `callTracer` and with struct logs, `txpool_content`,
//! and no `trace_`, `ots_` or `erigon_`.

use std::{
    process::{Child, Command, Stdio},
    time::Duration,
};

use alloy::primitives::{Address, Bytes, B256};
use serde_json::{json, Value};

use super::{
    anvil::{bytecode, ensure_testbed, spawn_node, testbed_dir},
    Client,
};

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
        Self::start_with(&[])
    }

    /// Starts a fresh dev chain with geth's flags `extra` beside the usual ones.
    pub fn start_with(extra: &[&str]) -> Self {
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
                    .args(extra)
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

/// geth's one unlocked account, sending and waiting for each transaction's receipt (the dev
/// chain seals a block per transaction).
#[derive(Debug, Clone)]
pub struct Dev {
    /// The node.
    pub node: Client,
    /// The dev account.
    pub from: Address,
}

impl Dev {
    /// The dev account of `geth`.
    pub async fn of(geth: &Geth) -> Self {
        let node = Client::new(&geth.url);
        let from = serde_json::from_value(node.call("eth_accounts", json!([])).await[0].clone())
            .expect("dev account");
        Self { node, from }
    }

    /// Sends `value` wei and `data` to `to` (a creation without it); its hash and receipt.
    pub async fn send(&self, to: Option<Address>, value: u64, data: Bytes) -> (B256, Value) {
        let hash = self.submit(to, value, data).await;
        (hash, self.mined(hash).await)
    }

    /// Sends `value` wei and `data` to `to` (a creation without it), not waiting for a block.
    pub async fn submit(&self, to: Option<Address>, value: u64, data: Bytes) -> B256 {
        let mut tx =
            json!({"from": self.from, "value": format!("{value:#x}"), "data": data, "gas": "0x7a1200"});
        if let Some(to) = to {
            tx["to"] = json!(to);
        }
        for _ in 0..400 {
            match self.node.try_call("eth_sendTransaction", json!([tx])).await {
                Ok(hash) => return serde_json::from_value(hash).expect("hash"),
                // After `debug_setHead` geth's pool takes back transactions of the dropped
                // blocks and mines them again, and may meanwhile give this one a nonce one of
                // them holds, or one the chain has just passed ("nonce too low": the pool's
                // count lags the new head's for a moment): the next try gets a fresh one.
                Err((_, message))
                    if message.contains("replacement transaction underpriced")
                        || message.contains("already known")
                        || message.contains("nonce too low") =>
                {
                    tokio::time::sleep(Duration::from_millis(25)).await;
                }
                Err(e) => panic!("eth_sendTransaction failed: {e:?}"),
            }
        }
        panic!("geth's pool kept refusing {tx}");
    }

    /// The receipt of `hash`, once a block holds it (ten seconds at most).
    pub async fn mined(&self, hash: B256) -> Value {
        for _ in 0..2000 {
            // A fresh geth answers "transaction indexing is in progress" for a moment.
            match self.node.try_call("eth_getTransactionReceipt", json!([hash])).await {
                Ok(receipt) if !receipt.is_null() => return receipt,
                Ok(_) => {}
                Err((_, message)) => assert!(message.contains("indexing is in progress"), "{message}"),
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("{hash} was never mined");
    }

    /// Deploys artifact `name` with ABI-encoded constructor arguments; its address.
    pub async fn deploy(&self, name: &str, args: Vec<u8>) -> Address {
        let mut code = bytecode(name).to_vec();
        code.extend(args);
        let (_, receipt) = self.send(None, 0, code.into()).await;
        serde_json::from_value(receipt["contractAddress"].clone()).expect("created")
    }
}
