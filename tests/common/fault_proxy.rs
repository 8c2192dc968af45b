//! A loopback HTTP endpoint in front of a real node that can be told to misbehave: garbage
//! bodies, 429s and 500s, a wrong block number, truncated receipts.

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{
        atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use alloy::transports::http::reqwest;
use serde_json::Value;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

/// How the endpoint answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Fault {
    /// Passes everything through.
    Healthy = 0,
    /// 200 with a body that is not JSON.
    Garbage = 1,
    /// 429 Too Many Requests.
    TooManyRequests = 2,
    /// 500 with an HTML body.
    ServerError = 3,
    /// Blocks come back with another number.
    WrongBlockNumber = 4,
    /// Block receipts come back without their last entry.
    TruncatedReceipts = 5,
    /// Blocks come back with a hash that is not their header's.
    ForgedHash = 6,
    /// `eth_call` is answered with the error Hardhat's node gave a probe of a contract created
    /// and destroyed in one transaction: the same on every retry.
    RefusedCall = 7,
    /// `eth_call` is answered as geth answers it for a block whose state it pruned.
    PrunedState = 8,
    /// Transactions come back with a sender that is not an address.
    UnreadableSender = 9,
    /// Transactions and receipts come back as Arbitrum's retry transactions (type `0x68`) look
    /// in its node's answers (its documentation's fields: no signature, `ticketId`, `refundTo`,
    /// `maxRefund`, `submissionFeeRefund`; receipts with `gasUsedForL1` and `l1BlockNumber`).
    ArbitrumShapes = 10,
    /// JSON-RPC batches are refused whole, as by a node or gateway that takes none; single
    /// requests pass.
    NoBatches = 11,
    /// Blocks and their receipts are answered as geth answers them once it pruned the chain's
    /// history (EIP-4444, `--history.chain postmerge`): error 4444.
    PrunedHistory = 12,
    /// `eth_getLogs` answers of more than [`LOGS_LIMIT`] logs are refused as Infura refuses them
    /// ("query returned more than 10000 results", at its own limit).
    LogsOverLimit = 13,
}

/// The most logs one `eth_getLogs` answer holds under [`Fault::LogsOverLimit`].
pub const LOGS_LIMIT: usize = 150;

/// The running endpoint.
#[derive(Debug, Clone)]
pub struct FaultProxy {
    /// Its URL.
    pub url: String,
    fault: Arc<AtomicU8>,
    delay_ms: Arc<AtomicU64>,
    /// Requests served so far.
    pub requests: Arc<AtomicUsize>,
    /// The most requests it has had in hand at one time.
    pub most_at_once: Arc<AtomicUsize>,
    /// Calls served so far by method, a batch's each.
    pub calls: Arc<Mutex<HashMap<String, usize>>>,
}

impl FaultProxy {
    /// Starts forwarding to `upstream`.
    pub async fn start(upstream: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr: SocketAddr = listener.local_addr().expect("addr");
        let fault = Arc::new(AtomicU8::new(Fault::Healthy as u8));
        let requests = Arc::new(AtomicUsize::new(0));
        let delay_ms = Arc::new(AtomicU64::new(0));
        let most_at_once = Arc::new(AtomicUsize::new(0));
        let calls = Arc::new(Mutex::new(HashMap::new()));
        let in_hand = Arc::new(AtomicUsize::new(0));
        let (f, r, d, up) = (fault.clone(), requests.clone(), delay_ms.clone(), upstream.to_owned());
        let (most, by_method) = (most_at_once.clone(), calls.clone());
        tokio::spawn(async move {
            let client = reqwest::Client::new();
            while let Ok((stream, _)) = listener.accept().await {
                let (f, r, up, client) = (f.clone(), r.clone(), up.clone(), client.clone());
                let (in_hand, most, by_method) = (in_hand.clone(), most.clone(), by_method.clone());
                let delay = Duration::from_millis(d.load(Ordering::SeqCst));
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    let _ = serve(stream, &client, &up, &f, &r, (&in_hand, &most), &by_method).await;
                });
            }
        });
        Self { url: format!("http://{addr}"), fault, delay_ms, requests, most_at_once, calls }
    }

    /// Makes every request from now on wait this long before it is answered: a slow node.
    pub fn slow_down(&self, delay: Duration) {
        self.delay_ms.store(u64::try_from(delay.as_millis()).unwrap_or(u64::MAX), Ordering::SeqCst);
    }

    /// Calls of `method` served so far.
    pub fn calls_of(&self, method: &str) -> usize {
        self.calls.lock().expect("calls").get(method).copied().unwrap_or_default()
    }

    /// Changes how it answers from now on.
    pub fn set(&self, fault: Fault) {
        self.fault.store(fault as u8, Ordering::SeqCst);
    }
}

async fn read_request(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:").map(|v| v.trim().parse().unwrap_or(0)))
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                let n = stream.read(&mut chunk).await.ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            return Some(buf[end + 4..end + 4 + len].to_vec());
        }
    }
}

fn methods_by_id(request: &Value) -> Vec<(Value, String)> {
    let one = |r: &Value| (r["id"].clone(), r["method"].as_str().unwrap_or_default().to_owned());
    match request {
        Value::Array(items) => items.iter().map(one).collect(),
        r => vec![one(r)],
    }
}

/// Replaces `response`'s result with a JSON-RPC error.
fn refuse(response: &mut Value, code: i64, message: &str) {
    if let Some(fields) = response.as_object_mut() {
        fields.remove("result");
        fields.insert("error".into(), serde_json::json!({"code": code, "message": message}));
    }
}

fn tamper(response: &mut Value, method: &str, fault: Fault) {
    if fault == Fault::LogsOverLimit {
        let logs = response.get("result").and_then(Value::as_array).map_or(0, Vec::len);
        if method == "eth_getLogs" && logs > LOGS_LIMIT {
            refuse(response, -32005, &format!("query returned more than {LOGS_LIMIT} results"));
        }
        return;
    }
    if fault == Fault::PrunedHistory {
        if matches!(method, "eth_getBlockByNumber" | "eth_getBlockReceipts") {
            refuse(response, 4444, "pruned history unavailable");
        }
        return;
    }
    if matches!(fault, Fault::RefusedCall | Fault::PrunedState) {
        if method == "eth_call" {
            let code_and_message = if fault == Fault::RefusedCall {
                (-32000, "Contract with code hash 0x791c1b0e3b8be2ab5b0aa1a1e3c07a8b0ba1e14c3f3ce4b9fd4d3a4b4cb5a295 does not exist.")
            } else {
                (-32000, "missing trie node 3b4e3c3b0b3e8cda1b1a3e0e4ff8f2e0c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8 (path ) state 0x3b4e is not available")
            };
            refuse(response, code_and_message.0, code_and_message.1);
        }
        return;
    }
    // An error answer has no result to tamper with (indexing would add a null one).
    let Some(result) = response.get_mut("result") else { return };
    match (fault, method) {
        (Fault::WrongBlockNumber, "eth_getBlockByNumber") if result.is_object() => {
            result["number"] = Value::String("0x7777".into());
        }
        (Fault::ForgedHash, "eth_getBlockByNumber") if result.is_object() => {
            result["hash"] = Value::String(format!("0x{}", "ab".repeat(32)));
        }
        (Fault::TruncatedReceipts, "eth_getBlockReceipts") => {
            if let Some(list) = result.as_array_mut() {
                list.pop();
            }
        }
        (Fault::UnreadableSender, "eth_getBlockByNumber") => {
            for tx in result["transactions"].as_array_mut().into_iter().flatten().filter(|t| t.is_object()) {
                tx["from"] = Value::String("0xnot-an-address".into());
            }
        }
        (Fault::ArbitrumShapes, "eth_getBlockByNumber") => {
            for tx in result["transactions"].as_array_mut().into_iter().flatten() {
                if let Some(fields) = tx.as_object_mut() {
                    for gone in ["v", "r", "s", "yParity", "accessList", "chainId", "maxPriorityFeePerGas"] {
                        fields.remove(gone);
                    }
                    fields.insert("type".into(), Value::String("0x68".into()));
                    fields.insert("ticketId".into(), Value::String(format!("0x{}", "11".repeat(32))));
                    fields.insert("refundTo".into(), Value::String(format!("0x{}", "22".repeat(20))));
                    fields.insert("maxRefund".into(), Value::String("0x3b9aca00".into()));
                    fields.insert("submissionFeeRefund".into(), Value::String("0x0".into()));
                }
            }
        }
        (Fault::ArbitrumShapes, "eth_getBlockReceipts" | "eth_getTransactionReceipt") => {
            let receipts = match result {
                Value::Array(list) => list.iter_mut().collect::<Vec<_>>(),
                one => vec![one],
            };
            for receipt in receipts.into_iter().filter_map(Value::as_object_mut) {
                receipt.insert("type".into(), Value::String("0x68".into()));
                receipt.insert("gasUsedForL1".into(), Value::String("0x0".into()));
                receipt.insert("l1BlockNumber".into(), Value::String("0x1".into()));
            }
        }
        _ => {}
    }
}

async fn serve(
    mut stream: TcpStream,
    client: &reqwest::Client,
    upstream: &str,
    fault: &AtomicU8,
    requests: &AtomicUsize,
    (in_hand, most): (&AtomicUsize, &AtomicUsize),
    calls: &Mutex<HashMap<String, usize>>,
) -> Option<()> {
    let body = read_request(&mut stream).await?;
    requests.fetch_add(1, Ordering::SeqCst);
    if let (Ok(request), Ok(mut calls)) = (serde_json::from_slice::<Value>(&body), calls.lock()) {
        for (_, method) in methods_by_id(&request) {
            *calls.entry(method).or_default() += 1;
        }
    }
    most.fetch_max(in_hand.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
    let answered = answer(stream, client, upstream, fault, body).await;
    in_hand.fetch_sub(1, Ordering::SeqCst);
    answered
}

async fn answer(
    mut stream: TcpStream,
    client: &reqwest::Client,
    upstream: &str,
    fault: &AtomicU8,
    body: Vec<u8>,
) -> Option<()> {
    let fault = match fault.load(Ordering::SeqCst) {
        1 => Fault::Garbage,
        2 => Fault::TooManyRequests,
        3 => Fault::ServerError,
        4 => Fault::WrongBlockNumber,
        5 => Fault::TruncatedReceipts,
        6 => Fault::ForgedHash,
        7 => Fault::RefusedCall,
        8 => Fault::PrunedState,
        9 => Fault::UnreadableSender,
        10 => Fault::ArbitrumShapes,
        11 => Fault::NoBatches,
        12 => Fault::PrunedHistory,
        13 => Fault::LogsOverLimit,
        _ => Fault::Healthy,
    };
    let (status, answer) = match fault {
        Fault::Garbage => ("200 OK", b"{\"jsonrpc\":\"2.0\",\"id\":1,\"resu".to_vec()),
        Fault::TooManyRequests => ("429 Too Many Requests", b"rate limited".to_vec()),
        Fault::ServerError => ("500 Internal Server Error", b"<html>oops</html>".to_vec()),
        Fault::NoBatches if body.trim_ascii_start().starts_with(b"[") => (
            "200 OK",
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Batch requests are not supported"}}"#
                .to_vec(),
        ),
        _ => {
            let upstream_answer = client
                .post(upstream)
                .header("content-type", "application/json")
                .body(body.clone())
                .send()
                .await
                .ok()?;
            let bytes = upstream_answer.bytes().await.ok()?.to_vec();
            if matches!(fault, Fault::Healthy | Fault::NoBatches) {
                ("200 OK", bytes)
            } else {
                let request: Value = serde_json::from_slice(&body).ok()?;
                let mut response: Value = serde_json::from_slice(&bytes).ok()?;
                let methods = methods_by_id(&request);
                let method_of = |id: &Value| {
                    methods.iter().find(|(i, _)| i == id).map(|(_, m)| m.clone()).unwrap_or_default()
                };
                match &mut response {
                    Value::Array(items) => {
                        for item in items {
                            let m = method_of(&item["id"]);
                            tamper(item, &m, fault);
                        }
                    }
                    item => {
                        let m = method_of(&item["id"]);
                        tamper(item, &m, fault);
                    }
                }
                ("200 OK", serde_json::to_vec(&response).ok()?)
            }
        }
    };
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        answer.len()
    );
    stream.write_all(head.as_bytes()).await.ok()?;
    stream.write_all(&answer).await.ok()?;
    stream.shutdown().await.ok()
}
