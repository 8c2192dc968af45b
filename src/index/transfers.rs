//! Which addresses a block's Transfer logs touch (spec §3.3, "log analyzer").

use alloy_primitives::Address;
use ots_classifiers::BlockData;
pub use ots_classifiers::TRANSFER_TOPIC;

use crate::txid::{TxId, TxIdOverflow};

/// Which transfer index a token's logs go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    /// `OtsERC20TransferIndex`.
    Erc20,
    /// `OtsERC721TransferIndex` (wins when a token has both attributes, as in ots2).
    Erc721,
}

/// An address that was `from` or `to` of a classified token's Transfer in a transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Touch {
    /// Which index.
    pub kind: TokenKind,
    /// The emitting token.
    pub token: Address,
    /// `from` or `to`.
    pub address: Address,
    /// The transaction.
    pub tx: TxId,
}

/// Every touch in `block`, in log order. `kind_of` tells whether (and how) an emitter is a
/// classified token; logs of anything else are ignored, as are logs of failed transactions
/// (which a node never returns anyway).
pub fn touches<E>(
    block: &BlockData,
    mut kind_of: impl FnMut(&Address) -> Result<Option<TokenKind>, E>,
) -> Result<Vec<Touch>, E>
where
    E: From<TxIdOverflow>,
{
    let mut out = Vec::new();
    for (index, receipt) in block.receipts.iter().enumerate() {
        if !receipt.success {
            continue;
        }
        for log in &receipt.logs {
            if log.topics.len() < 3 || log.topics[0] != TRANSFER_TOPIC {
                continue;
            }
            let Some(kind) = kind_of(&log.address)? else { continue };
            let tx = TxId::new(block.number, index as u64)?;
            for topic in &log.topics[1..3] {
                let address = Address::from_slice(&topic[12..]);
                out.push(Touch { kind, token: log.address, address, tx });
            }
        }
    }
    Ok(out)
}
