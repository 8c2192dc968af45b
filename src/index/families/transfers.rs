//! The address-index side of a token log: which addresses a classified token's transfer
//! touches in a transaction ("log analyzer" in docs/format.md), from the decoded [`TokenLog`]s.

use alloy_primitives::Address;

use crate::{
    decode::{TokenKind, TokenLog},
    txid::TxId,
};

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

impl Touch {
    /// The two touches of `log` in transaction `tx`: its sender's and its receiver's (ERC1155's
    /// operator is not indexed).
    pub fn of(tx: TxId, log: &TokenLog<'_>) -> [Self; 2] {
        [log.from, log.to].map(|address| Self { kind: log.kind, token: log.token, address, tx })
    }
}
