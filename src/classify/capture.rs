//! `capture`: recording a range of the node's chain with every answer classifying it needs, so
//! that `sync --source` indexes it with no node and gets the index the node would give.

use std::{
    collections::{BTreeMap, HashSet},
    convert::Infallible,
    path::Path,
    sync::Mutex,
};

use alloy_primitives::{Address, Bytes};
use ots_classifiers::{
    classify_block, BoxFuture, CallOutcome, ChainError, ChainView, Classifier, Fact, Standard,
};

use super::{
    known::emitters_per_block,
    late_metadata::{describe, is_named, tokens_to_describe, Stored},
    reprobe::{emitters_to_reprobe, reprobe},
};
use crate::{
    index::ClassifiedBlock,
    source::{
        fixture::{CaptureError, RecordingWriter},
        BlockSource,
    },
};

/// A call as recorded: target, input, block.
type CallKey = (Address, Bytes, u64);

/// Records every answer a classifier got.
#[derive(Debug)]
struct RecordingView<'a, S: ?Sized> {
    node: &'a S,
    calls: Mutex<BTreeMap<CallKey, CallOutcome>>,
    codes: Mutex<BTreeMap<(Address, u64), Bytes>>,
}

impl<S: ChainView + ?Sized> ChainView for RecordingView<'_, S> {
    fn call_at(
        &self,
        to: Address,
        input: Bytes,
        block: u64,
    ) -> BoxFuture<'_, Result<CallOutcome, ChainError>> {
        Box::pin(async move {
            let outcome = self.node.call_at(to, input.clone(), block).await?;
            if let Ok(mut calls) = self.calls.lock() {
                calls.insert((to, input, block), outcome.clone());
            }
            Ok(outcome)
        })
    }

    fn code_at(&self, address: Address, block: u64) -> BoxFuture<'_, Result<Bytes, ChainError>> {
        Box::pin(async move {
            let code = self.node.code_at(address, block).await?;
            if let Ok(mut codes) = self.codes.lock() {
                codes.insert((address, block), code.clone());
            }
            Ok(code)
        })
    }
}

/// What a capture wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaptureStats {
    /// Blocks recorded.
    pub blocks: u64,
    /// Probe answers recorded.
    pub probes: u64,
    /// Bytes of the file.
    pub bytes: u64,
}

/// Records blocks `from..=to` of `node` (a node, or a generated chain), and every probe
/// `classifiers` make on them (second probes and late metadata reads included, as the indexer
/// will make them), to `out` (written to a temporary name and renamed when complete).
pub async fn capture<S: BlockSource + ?Sized>(
    node: &S,
    classifiers: &[Box<dyn Classifier>],
    (from, to): (u64, u64),
    out: &Path,
) -> Result<CaptureStats, CaptureError> {
    let chain = node.chain_identity().await?;
    let mut w = RecordingWriter::create(out, chain, (from, to), node.tracer())?;
    let mut stats = CaptureStats { blocks: 0, probes: 0, bytes: 0 };
    // Tokens and failed re-probes seen so far: the indexer, starting from the same block, knows
    // no more than this, so it never asks for a probe this file lacks.
    let mut known: HashSet<Address> = HashSet::new();
    let (mut tokens, mut named, mut settled) = (HashSet::new(), HashSet::new(), HashSet::new());
    for number in from..=to {
        let block = node.block(number).await?;
        let view = RecordingView { node, calls: Mutex::default(), codes: Mutex::default() };
        let created = block.created_contracts();
        let facts = classify_block(classifiers, &block, &created, &[], &view).await?;
        let mut batch = [ClassifiedBlock { block, facts, probe_misses: Vec::new() }];
        let emitters = emitters_per_block(&batch);
        let todo = emitters_to_reprobe(&batch, &emitters, |a| Ok::<_, Infallible>(known.contains(a)))
            .unwrap_or_else(|never| match never {});
        reprobe(classifiers, &mut batch, &todo, &view).await?;
        // Tokens whose metadata the indexer reads again at their first transfer, as it will.
        let late = tokens_to_describe(&batch, &emitters, &settled, |a| {
            Ok::<_, Infallible>(Stored { token: tokens.contains(a), named: named.contains(a) })
        })
        .unwrap_or_else(|never| match never {});
        describe(&mut batch, &late.todo, &view).await?;
        settled.extend(late.named.into_iter().chain(late.todo.into_iter().flatten()));
        let [ClassifiedBlock { block, facts, probe_misses }] = batch;
        known.extend(probe_misses);
        for fact in &facts {
            match fact {
                Fact::Matched { standard: Standard::Erc20 | Standard::Erc721, address } => {
                    known.insert(*address);
                    tokens.insert(*address);
                }
                Fact::Described { address, metadata }
                    if is_named(metadata.name.as_deref(), metadata.symbol.as_deref()) =>
                {
                    named.insert(*address);
                }
                _ => {}
            }
        }
        w.block(&block)?;
        for ((to, input, block), outcome) in view.calls.into_inner().unwrap_or_default() {
            w.call(to, input, block, outcome)?;
            stats.probes += 1;
        }
        for ((address, block), code) in view.codes.into_inner().unwrap_or_default() {
            w.code(address, block, code)?;
            stats.probes += 1;
        }
        stats.blocks += 1;
    }
    stats.bytes = w.finish()?;
    Ok(stats)
}
