//! Second chances for contracts that were not tokens when deployed: a proxy or clone initialised
//! in a later block, or a token created where the node gave no call frames. Such a contract is
//! re-probed once, at the first block in which it emits a Transfer-shaped log while unknown; if
//! that fails too it is remembered (`OtsTransferProbes`) and never probed again.

use std::collections::HashSet;

use alloy_primitives::Address;
use futures::future::try_join_all;
use ots_classifiers::{classify_block, ChainError, ChainView, Classifier, Fact, Standard};

use crate::index::ClassifiedBlock;

fn is_token_fact(fact: &Fact) -> Option<Address> {
    match fact {
        Fact::Matched { standard: Standard::Erc20 | Standard::Erc721, address } => Some(*address),
        _ => None,
    }
}

/// For each block, the Transfer emitters to re-probe there (`emitters[i]` are `blocks[i]`'s, as
/// [`super::known::emitters_per_block`] gives them): each address at its first block in
/// `blocks`, unless it was created in that block (it was just judged), matched as a token by an
/// earlier fact of the batch, or `known` (a token, or re-probed before).
pub fn emitters_to_reprobe<E>(
    blocks: &[ClassifiedBlock],
    emitters: &[Vec<Address>],
    mut known: impl FnMut(&Address) -> Result<bool, E>,
) -> Result<Vec<Vec<Address>>, E> {
    let mut seen: foldhash::HashSet<Address> = foldhash::HashSet::default();
    let mut out = Vec::with_capacity(blocks.len());
    for (b, emitters) in blocks.iter().zip(emitters) {
        seen.extend(b.facts.iter().filter_map(is_token_fact));
        let created = b.block.created_contracts();
        let mut todo = Vec::new();
        for &emitter in emitters {
            if created.contains(&emitter) || !seen.insert(emitter) {
                continue;
            }
            if !known(&emitter)? {
                todo.push(emitter);
            }
        }
        out.push(todo);
    }
    Ok(out)
}

/// Re-probes `todo[i]` at `blocks[i]` (all blocks at once), adding the facts found and noting
/// the emitters that are still no token as the block's `probe_misses`.
pub async fn reprobe(
    classifiers: &[Box<dyn Classifier>],
    blocks: &mut [ClassifiedBlock],
    todo: &[Vec<Address>],
    chain: &dyn ChainView,
) -> Result<(), ChainError> {
    let found = try_join_all(blocks.iter().zip(todo).map(|(b, emitters)| async move {
        if emitters.is_empty() {
            return Ok(Vec::new());
        }
        classify_block(classifiers, &b.block, &[], emitters, chain).await
    }))
    .await?;
    // Where blocks come without call frames, a token found this late was not seen when it was
    // created (a factory made it): every other classifier judges it now too, so it gets every
    // class its code shows (a clone's EIP-1167 pattern, ERC165, …). With frames it was judged
    // at its creation, and only its token class was missed.
    let tokens: Vec<Vec<Address>> = found
        .iter()
        .zip(blocks.iter())
        .map(|(facts, b)| {
            if b.block.frames.is_some() {
                return Vec::new();
            }
            let mut t: Vec<Address> = facts.iter().filter_map(is_token_fact).collect();
            t.sort_unstable();
            t.dedup();
            t
        })
        .collect();
    let more = try_join_all(blocks.iter().zip(&tokens).map(|(b, tokens)| async move {
        if tokens.is_empty() {
            return Ok(Vec::new());
        }
        classify_block(classifiers, &b.block, tokens, &[], chain).await
    }))
    .await?;
    for (((b, emitters), mut facts), more) in blocks.iter_mut().zip(todo).zip(found).zip(more) {
        let tokens: HashSet<Address> = facts.iter().filter_map(is_token_fact).collect();
        b.probe_misses.extend(emitters.iter().filter(|a| !tokens.contains(*a)));
        for fact in more {
            if !facts.contains(&fact) {
                facts.push(fact);
            }
        }
        b.facts.extend(facts);
    }
    Ok(())
}
