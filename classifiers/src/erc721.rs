//! The ERC721 classifier (docs/classifiers.md, "The built-ins"; plus tokens that skip ERC165).

use alloy_primitives::{Address, B256};
use futures::future::try_join_all;

use crate::{
    abi::{decode_address, decode_text},
    probe::{call0, call1, supports_interface},
    BoxFuture, Candidates, ChainError, ChainView, Classifier, ClassifyInput, Fact, Flag, Metadata, Standard,
    TRANSFER_TOPIC,
};

/// ERC721's interface id.
pub const ERC721_ID: [u8; 4] = [0x80, 0xac, 0x58, 0xcd];
/// The ERC721 metadata extension's interface id.
pub const ERC721_METADATA_ID: [u8; 4] = [0x5b, 0x5e, 0x13, 0x9f];

/// Classifies ERC165 contracts that declare ERC721 (flagging the metadata extension when
/// declared too), and contracts that skip ERC165 but emitted a 4-topic Transfer while
/// unclassified and answer `ownerOf(tokenId)` for its token id with an address.
#[derive(Debug, Clone, Copy, Default)]
pub struct Erc721Classifier;

impl Erc721Classifier {
    /// Name on the command line and in the database state.
    pub const NAME: &'static str = "erc721";
}

/// Optional `name()`/`symbol()`, as text.
pub(crate) async fn names(
    chain: &dyn ChainView,
    address: Address,
    block: u64,
) -> Result<Metadata, ChainError> {
    let (name, symbol) =
        futures::try_join!(call0(chain, address, "name()", block), call0(chain, address, "symbol()", block))?;
    Ok(Metadata {
        name: name.and_then(|b| decode_text(&b)),
        symbol: symbol.and_then(|b| decode_text(&b)),
        ..Metadata::default()
    })
}

/// The token id of the last 4-topic Transfer log `address` emitted in the block.
fn transferred_token_id(input: &ClassifyInput<'_>, address: Address) -> Option<B256> {
    input
        .block
        .successful_logs()
        .filter(|l| l.address == address && l.topics.len() == 4 && l.topics[0] == TRANSFER_TOPIC)
        .map(|l| l.topics[3])
        .last()
}

impl Classifier for Erc721Classifier {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn candidates(&self) -> Candidates {
        Candidates::MatchesOf(Standard::Erc165)
    }

    fn produces(&self) -> &'static [Standard] {
        &[Standard::Erc721]
    }

    fn classify<'a>(
        &'a self,
        input: ClassifyInput<'a>,
        chain: &'a dyn ChainView,
    ) -> BoxFuture<'a, Result<Vec<Fact>, ChainError>> {
        Box::pin(async move {
            let block = input.block.number;
            let declared = try_join_all(input.contracts.iter().map(|&address| async move {
                if !supports_interface(chain, address, ERC721_ID, block).await? {
                    return Ok::<_, ChainError>(vec![]);
                }
                let mut facts = vec![Fact::Matched { standard: Standard::Erc721, address }];
                if supports_interface(chain, address, ERC721_METADATA_ID, block).await? {
                    facts.push(Fact::Flagged { flag: Flag::Erc721Metadata, address });
                    facts.push(Fact::Described { address, metadata: names(chain, address, block).await? });
                }
                Ok(facts)
            }))
            .await?;
            let mut facts: Vec<Fact> = declared.into_iter().flatten().collect();
            let emitters: Vec<(Address, B256)> = input
                .transfer_emitters
                .iter()
                .filter(|a| !input.contracts.contains(a))
                .filter_map(|&a| transferred_token_id(&input, a).map(|id| (a, id)))
                .collect();
            let found = try_join_all(emitters.iter().map(|&(address, id)| async move {
                let (owner, junk) = futures::try_join!(
                    call1(chain, address, "ownerOf(uint256)", id.0, block),
                    call0(chain, address, "junkjunkjunk()", block)
                )?;
                let Some(owner) = owner else { return Ok::<_, ChainError>(vec![]) };
                if decode_address(&owner).is_none() || junk.as_ref() == Some(&owner) {
                    return Ok(vec![]);
                }
                let metadata = names(chain, address, block).await?;
                Ok(vec![
                    Fact::Matched { standard: Standard::Erc721, address },
                    Fact::Described { address, metadata },
                ])
            }))
            .await?;
            facts.extend(found.into_iter().flatten());
            Ok(facts)
        })
    }
}
