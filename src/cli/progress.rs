//! A progress line (block, rate, ETA) on a terminal; log lines print above it.

use std::{
    io::{IsTerminal, Write},
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use crate::status::{SharedProgress, StagePhase};

static BAR_ACTIVE: AtomicBool = AtomicBool::new(false);

fn eta(seconds: f64) -> String {
    if !seconds.is_finite() || seconds <= 0.0 {
        return "-".to_owned();
    }
    let s = seconds.round() as u64;
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// Draws the line every half second while stderr is a terminal (never into a log file).
pub fn spawn_if_terminal(progress: SharedProgress) {
    if !std::io::stderr().is_terminal() {
        return;
    }
    BAR_ACTIVE.store(true, Ordering::SeqCst);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let p = progress.get();
            let left = p.head.saturating_sub(p.indexed);
            let pct = if p.head == 0 { 100.0 } else { p.indexed as f64 * 100.0 / p.head as f64 };
            let stage = p.stage;
            let line = if stage.phase == StagePhase::Merging {
                format!(
                    "bulk stage {}..{}: merging {} MiB of run files into the tables",
                    stage.from.unwrap_or(0),
                    stage.gathered_to.unwrap_or(0),
                    stage.run_bytes >> 20
                )
            } else if stage.phase == StagePhase::Packing {
                format!("block {}: caught up, packing the tables the bulk stages left swollen", p.indexed)
            } else if stage.phase == StagePhase::Collecting {
                let at = stage.gathered_to.unwrap_or(p.indexed);
                format!(
                    "block {at}/{} ({:.1}%)  bulk stage from {} (committed: {}), {} MiB in run files",
                    p.head,
                    if p.head == 0 { 100.0 } else { at as f64 * 100.0 / p.head as f64 },
                    stage.from.unwrap_or(0),
                    p.indexed,
                    stage.run_bytes >> 20
                )
            } else if left == 0 {
                format!("block {} (following the head)", p.indexed)
            } else {
                format!(
                    "block {}/{} ({pct:.1}%)  {:.0} blocks/s  ETA {}",
                    p.indexed,
                    p.head,
                    p.blocks_per_second,
                    eta(left as f64 / p.blocks_per_second)
                )
            };
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K{line}");
            let _ = err.flush();
        }
    });
}

/// A stderr writer for logs that first clears the progress line, if one is drawn.
#[derive(Debug, Default)]
pub struct LogWriter {
    started: bool,
}

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut err = std::io::stderr().lock();
        if !self.started && BAR_ACTIVE.load(Ordering::SeqCst) {
            err.write_all(b"\r\x1b[2K")?;
        }
        self.started = true;
        err.write_all(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}
