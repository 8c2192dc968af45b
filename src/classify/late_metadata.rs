//! Metadata read again for tokens that had none when they were classified.
//!
//! A token's name, symbol and decimals are read at its deployment block. A lazily initialised
//! token (a clone or proxy whose `initialize` runs in a later block) answers nothing there, and
//! lists would show it nameless for good. So when an ERC20 or ERC721 token without a stored name
//! or symbol first emits a Transfer-shaped log, its metadata is read again at that block, and
//! what it answers now is written as an `OtsContractInfo` dup of that block — journalled with the
//! block, so an unwind drops it like anything else the block wrote. Each token is asked at most
//! once per process (the caller keeps the set of settled tokens), never once per transfer.

use std::collections::HashSet;

use alloy_primitives::Address;
use futures::{stream, StreamExt, TryStreamExt};
use ots_classifiers::{read_token_metadata, ChainError, ChainView, Fact, Metadata, Standard};

use crate::index::ClassifiedBlock;

/// Tokens read in parallel.
const CONCURRENCY: usize = 16;

/// What the index holds of an address before the batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stored {
    /// It is an ERC20 or ERC721 token.
    pub token: bool,
    /// Its stored metadata has a name and a symbol, neither empty.
    pub named: bool,
}

/// Whether a name and a symbol are known: an uninitialised token answers empty strings.
pub fn is_named(name: Option<&str>, symbol: Option<&str>) -> bool {
    name.is_some_and(|n| !n.is_empty()) && symbol.is_some_and(|s| !s.is_empty())
}

fn named(metadata: &Metadata) -> bool {
    is_named(metadata.name.as_deref(), metadata.symbol.as_deref())
}

/// What to read again, and what never needs it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToDescribe {
    /// For each block, the tokens to read again there.
    pub todo: Vec<Vec<Address>>,
    /// Tokens found to have a name and symbol stored: no need to look at them again.
    pub named: Vec<Address>,
}

/// For each block, the tokens to read again there: each Transfer emitter (`emitters[i]` are
/// `blocks[i]`'s, as [`super::known::emitters_per_block`] gives them) at its first block in
/// `blocks`, if it is a token (stored, or matched earlier in the batch) that has no name or
/// symbol yet (stored, or described earlier in the batch), was not created in that block (its
/// deployment read is that block's), and is not `settled` (asked, or named, before).
pub fn tokens_to_describe<E>(
    blocks: &[ClassifiedBlock],
    emitters: &[Vec<Address>],
    settled: &HashSet<Address>,
    mut stored: impl FnMut(&Address) -> Result<Stored, E>,
) -> Result<ToDescribe, E> {
    let mut named_now = Vec::new();
    let mut matched: HashSet<Address> = HashSet::new();
    let mut described: HashSet<Address> = HashSet::new();
    let mut seen: foldhash::HashSet<Address> = foldhash::HashSet::default();
    let mut out = Vec::with_capacity(blocks.len());
    for (b, emitters) in blocks.iter().zip(emitters) {
        for fact in &b.facts {
            match fact {
                Fact::Matched { standard: Standard::Erc20 | Standard::Erc721, address } => {
                    matched.insert(*address);
                }
                Fact::Described { address, metadata } if named(metadata) => {
                    described.insert(*address);
                }
                _ => {}
            }
        }
        let created = b.block.created_contracts();
        let mut todo = Vec::new();
        for &emitter in emitters {
            if created.contains(&emitter)
                || settled.contains(&emitter)
                || described.contains(&emitter)
                || !seen.insert(emitter)
            {
                continue;
            }
            let s = stored(&emitter)?;
            if s.named {
                named_now.push(emitter);
            } else if s.token || matched.contains(&emitter) {
                todo.push(emitter);
            }
        }
        out.push(todo);
    }
    Ok(ToDescribe { todo: out, named: named_now })
}

/// Reads `todo[i]`'s metadata at `blocks[i]` and adds what names a token as a `Described` fact
/// of that block.
pub async fn describe(
    blocks: &mut [ClassifiedBlock],
    todo: &[Vec<Address>],
    chain: &dyn ChainView,
) -> Result<(), ChainError> {
    let asks: Vec<(usize, u64, Address)> = blocks
        .iter()
        .zip(todo)
        .enumerate()
        .flat_map(|(i, (b, tokens))| tokens.iter().map(move |a| (i, b.block.number, *a)))
        .collect();
    let found: Vec<(usize, Address, Metadata)> = stream::iter(asks)
        .map(|(i, block, address)| async move {
            Ok::<_, ChainError>((i, address, read_token_metadata(chain, address, block).await?))
        })
        .buffered(CONCURRENCY)
        .try_collect()
        .await?;
    for (i, address, metadata) in found {
        let says = |text: &Option<String>| text.as_deref().is_some_and(|t| !t.is_empty());
        if says(&metadata.name) || says(&metadata.symbol) {
            blocks[i].facts.push(Fact::Described { address, metadata });
        }
    }
    Ok(())
}
