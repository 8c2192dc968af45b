//! Writes a mainnet-shaped generated chain as a recording for `sync --source` (issue "Mainnet
//! scale"): `SyntheticChain` with `Shape::MAINNET`, captured with every built-in classifier's
//! probe answers, streamed to the file block by block.
//!
//! Usage: gen_chain TRANSACTIONS SEED OUT (defaults 1000000, 1, chain.rec.zst).

use std::{path::PathBuf, time::Instant};

use ots_indexer::{
    classify::capture::capture,
    source::synthetic::{Shape, SyntheticChain},
};

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let transactions: u64 = args.next().map_or(Ok(1_000_000), |a| a.parse())?;
    let seed: u64 = args.next().map_or(Ok(1), |a| a.parse())?;
    let out = PathBuf::from(args.next().unwrap_or_else(|| "chain.rec.zst".into()));
    let chain = SyntheticChain::new(seed, transactions, Shape::MAINNET);
    let classifiers: Vec<_> =
        ots_classifiers::BUILTIN_NAMES.iter().filter_map(|n| ots_classifiers::builtin(n)).collect();
    let started = Instant::now();
    let stats = capture(&chain, &classifiers, (0, chain.last_block()), &out).await?;
    println!(
        "generated {} blocks ({} probe answers) to {} ({} bytes) in {:.1} s",
        stats.blocks,
        stats.probes,
        out.display(),
        stats.bytes,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
