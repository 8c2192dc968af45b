//! Which addresses a block's transfer logs touch (spec §3.3, "log analyzer"), for ERC20 and
//! ERC721 `Transfer` and ERC1155 `TransferSingle`/`TransferBatch`.

use alloy_primitives::{b256, Address, B256, U256};
pub use ots_classifiers::TRANSFER_TOPIC;
use ots_classifiers::{decode_uint256, decode_uint256_array, BlockData};

use crate::{
    db::codec::{AttributeBit, Attributes},
    txid::{TxId, TxIdOverflow},
};

/// topic0 of `TransferSingle(address,address,address,uint256,uint256)`.
pub const TRANSFER_SINGLE_TOPIC: B256 =
    b256!("c3d58168c5ae7397731d063d5bbf3d657854427343f4c083240f7aacaa2d0f62");
/// topic0 of `TransferBatch(address,address,address,uint256[],uint256[])`.
pub const TRANSFER_BATCH_TOPIC: B256 =
    b256!("4a39dc06d4c0dbc64b70af90fd698a233a518aa5d07e595d983b8c0526c8f7fb");

/// The `(id, amount)` pairs of an ERC1155 `TransferSingle` or `TransferBatch` log's data, in
/// order; `None` for another topic or data that does not decode (arrays of unequal length too).
pub fn erc1155_amounts(topic0: &B256, data: &[u8]) -> Option<Vec<(U256, U256)>> {
    if *topic0 == TRANSFER_SINGLE_TOPIC {
        Some(vec![(decode_uint256(data)?, decode_uint256(data.get(32..)?)?)])
    } else if *topic0 == TRANSFER_BATCH_TOPIC {
        let (ids, amounts) = (decode_uint256_array(data, 0)?, decode_uint256_array(data, 1)?);
        (ids.len() == amounts.len()).then(|| ids.into_iter().zip(amounts).collect())
    } else {
        None
    }
}

/// Which transfer index a token's logs go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    /// `OtsERC20TransferIndex`.
    Erc20,
    /// `OtsERC721TransferIndex` (wins when a token has both attributes, as in ots2).
    Erc721,
    /// `OtsERC1155TransferIndex` (ours).
    Erc1155,
}

/// How a classified contract's logs are indexed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TokenKinds {
    /// Where its `Transfer` logs go, if anywhere.
    pub transfer: Option<TokenKind>,
    /// Whether its `TransferSingle`/`TransferBatch` logs count (an ERC1155).
    pub multi: bool,
}

impl TokenKinds {
    /// How a contract with `attrs` is indexed: ERC721 wins over ERC20 for `Transfer` logs, as in
    /// ots2.
    pub fn of(attrs: &Attributes) -> Self {
        let transfer = if attrs.has(AttributeBit::Erc721) {
            Some(TokenKind::Erc721)
        } else if attrs.has(AttributeBit::Erc20) {
            Some(TokenKind::Erc20)
        } else {
            None
        };
        Self { transfer, multi: attrs.has(AttributeBit::Erc1155) }
    }
}

/// An address that was `from` or `to` of a classified token's transfer in a transaction.
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

/// Every touch in `block`, in log order. `kinds_of` tells how an emitter is classified; logs of
/// anything else are ignored, as are logs of failed transactions (which a node never returns
/// anyway). ERC1155's operator is not indexed.
pub fn touches<E>(
    block: &BlockData,
    mut kinds_of: impl FnMut(&Address) -> Result<TokenKinds, E>,
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
            let Some(topic0) = log.topics.first() else { continue };
            let (kind, parties) = if *topic0 == TRANSFER_TOPIC && log.topics.len() >= 3 {
                let Some(kind) = kinds_of(&log.address)?.transfer else { continue };
                (kind, &log.topics[1..3])
            } else if (*topic0 == TRANSFER_SINGLE_TOPIC || *topic0 == TRANSFER_BATCH_TOPIC)
                && log.topics.len() == 4
            {
                if !kinds_of(&log.address)?.multi {
                    continue;
                }
                (TokenKind::Erc1155, &log.topics[2..4])
            } else {
                continue;
            };
            let tx = TxId::new(block.number, index as u64)?;
            for topic in parties {
                let address = Address::from_slice(&topic[12..]);
                out.push(Touch { kind, token: log.address, address, tx });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_are_the_event_hashes() {
        let k = |s: &str| alloy_primitives::keccak256(s.as_bytes());
        assert_eq!(k("TransferSingle(address,address,address,uint256,uint256)"), TRANSFER_SINGLE_TOPIC);
        assert_eq!(k("TransferBatch(address,address,address,uint256[],uint256[])"), TRANSFER_BATCH_TOPIC);
    }
}
