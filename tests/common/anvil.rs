//! A real Anvil node from the npm test bed, started on a free loopback port and killed by PID
//! when dropped (also while a failing test unwinds).

use std::{
    net::TcpListener,
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::Mutex,
    time::{Duration, Instant},
};

use alloy::primitives::Bytes;
use serde_json::Value;

/// The test bed folder of this checkout.
pub fn testbed_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testbed")
}

/// The creation code of testbed artifact `name`.
pub fn bytecode(name: &str) -> Bytes {
    let path = testbed_dir().join("build/artifacts.json");
    let artifacts: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("artifacts")).expect("json");
    serde_json::from_value(artifacts[name]["bytecode"].clone()).expect("hex")
}

static SETUP: Mutex<bool> = Mutex::new(false);

/// Installs the test bed (npm packages, compiled contracts) unless already there.
pub fn ensure_testbed() {
    let mut done = SETUP.lock().unwrap_or_else(|e| e.into_inner());
    if *done {
        return;
    }
    let status = Command::new("bash")
        .arg(testbed_dir().join("setup.sh"))
        .status()
        .expect("cannot run testbed/setup.sh (is bash installed?)");
    assert!(status.success(), "testbed/setup.sh failed: {status}");
    *done = true;
}

/// A running Anvil.
#[derive(Debug)]
pub struct Anvil {
    child: Child,
    /// Its HTTP URL.
    pub url: String,
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("no free port")
}

pub fn answers(url: &str) -> bool {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}"#;
    let Ok(addr) = url.trim_start_matches("http://").parse::<std::net::SocketAddr>() else { return false };
    let Ok(mut stream) = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    use std::io::{Read, Write};
    let req = format!(
        "POST / HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    if stream.write_all(req.as_bytes()).is_err() {
        return false;
    }
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let mut out = String::new();
    let _ = stream.read_to_string(&mut out);
    out.contains("\"result\"")
}

/// Starts a node with `spawn(port)` on `port` (or a free one) and waits until it answers
/// JSON-RPC; tries another free port if it exits first (it lost the port to someone else).
pub fn spawn_node(
    name: &str,
    patience: Duration,
    mut spawn: impl FnMut(u16) -> Child,
    port: Option<u16>,
) -> (Child, String) {
    for _attempt in 0..3 {
        let port = port.unwrap_or_else(free_port);
        let mut child = spawn(port);
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + patience;
        while Instant::now() < deadline {
            if answers(&url) {
                return (child, url);
            }
            if let Ok(Some(_)) = child.try_wait() {
                break; // lost the port race; try another
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("{name} did not start");
}

impl Anvil {
    /// Starts Anvil with 30 funded accounts, a fixed start time and manual mining (the workload
    /// mines with `evm_mine`), plus `extra` arguments.
    pub fn start(extra: &[&str]) -> Self {
        Self::start_on(None, extra)
    }

    /// As [`Anvil::start`], on `port` if given (to restart a node where clients expect it).
    pub fn start_on(port: Option<u16>, extra: &[&str]) -> Self {
        ensure_testbed();
        let bin = testbed_dir().join("node_modules/.bin/anvil");
        let (child, url) = spawn_node(
            "anvil",
            Duration::from_secs(30),
            |port| {
                Command::new(&bin)
                    .args(["--port", &port.to_string(), "--host", "127.0.0.1", "--accounts", "30"])
                    .args(["--no-mining", "--order", "fifo", "--timestamp", "1700000000", "--silent"])
                    .args(extra)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::inherit())
                    .spawn()
                    .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()))
            },
            port,
        );
        Self { child, url }
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.url.rsplit(':').next().and_then(|p| p.parse().ok()).expect("port in URL")
    }

    /// Stops the node with SIGTERM (so that `--dump-state` is written) and waits for it.
    pub fn terminate(&mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let _ = self.child.wait();
    }

    /// Kills the node now.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Anvil {
    fn drop(&mut self) {
        self.stop();
    }
}
