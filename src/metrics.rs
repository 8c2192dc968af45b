//! Prometheus metrics on `--metrics-addr`: a plain-text `/metrics` page over a minimal HTTP
//! responder (loopback or a scrape network; it serves nothing else).

use std::{fmt::Write as _, net::SocketAddr};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpListener,
};
use tracing::{info, warn};

use crate::status::{SharedProgress, ERROR_KINDS};

/// The metrics page.
pub fn render(progress: &SharedProgress) -> String {
    let p = progress.get();
    let mut out = String::new();
    let mut gauge = |name: &str, help: &str, kind: &str, value: String| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}");
    };
    gauge("ots_indexed_block", "Last indexed block.", "gauge", p.indexed.to_string());
    gauge("ots_node_head", "The node's head as last seen.", "gauge", p.head.to_string());
    gauge(
        "ots_lag_blocks",
        "Blocks the index is behind the node.",
        "gauge",
        p.head.saturating_sub(p.indexed).to_string(),
    );
    gauge(
        "ots_blocks_per_second",
        "Indexing speed of the latest batch.",
        "gauge",
        format!("{:.3}", p.blocks_per_second),
    );
    gauge("ots_batches_total", "Batches committed.", "counter", p.batches.to_string());
    gauge(
        "ots_batch_write_seconds_total",
        "Time spent writing batches.",
        "counter",
        format!("{:.6}", p.write_seconds_total),
    );
    gauge(
        "ots_batch_write_seconds_last",
        "Write time of the latest batch.",
        "gauge",
        format!("{:.6}", p.write_seconds_last),
    );
    let _ = writeln!(
        out,
        "# HELP ots_rpc_errors_total Node failures, by kind.\n# TYPE ots_rpc_errors_total counter"
    );
    for (kind, n) in ERROR_KINDS.iter().zip(p.errors) {
        let _ = writeln!(out, "ots_rpc_errors_total{{kind=\"{kind}\"}} {n}");
    }
    let notices = progress.notices().get();
    let _ = writeln!(
        out,
        "# HELP ots_refused_probes_total Classifier probes the node answered with an error twice, taken as no.\n# TYPE ots_refused_probes_total counter\nots_refused_probes_total {}",
        notices.refused_probes
    );
    let _ = writeln!(
        out,
        "# HELP ots_sync_stopped 1 while indexing is stopped on an answer retrying cannot change (see status).\n# TYPE ots_sync_stopped gauge\nots_sync_stopped {}",
        u8::from(notices.stopped.is_some())
    );
    out
}

/// Serves `/metrics` on `addr` until the task is dropped; returns the bound address.
pub async fn serve_metrics(addr: SocketAddr, progress: SharedProgress) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    info!(target: "ots::metrics", addr = %bound, "serving Prometheus metrics at /metrics");
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = match listener.accept().await {
                Ok(s) => s,
                Err(e) => {
                    warn!(target: "ots::metrics", error = %e, "accept failed");
                    continue;
                }
            };
            let progress = progress.clone();
            tokio::spawn(async move {
                // Read the request head (it may arrive in pieces), at most 8 KiB.
                let mut buf = Vec::with_capacity(1024);
                let mut chunk = [0u8; 1024];
                while buf.len() < 8192 && !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let request = String::from_utf8_lossy(&buf);
                let (status, body) = if request.starts_with("GET /metrics ") || request.starts_with("GET / ")
                {
                    ("200 OK", render(&progress))
                } else {
                    ("404 Not Found", "only /metrics is served here\n".to_owned())
                };
                let head = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(head.as_bytes()).await;
                let _ = stream.write_all(body.as_bytes()).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    Ok(bound)
}
