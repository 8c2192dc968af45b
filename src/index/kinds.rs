//! How each token's transfer logs are indexed, looked up as a write goes.

use alloy_primitives::Address;

use super::{attributes::attributes, error::WriteError};
use crate::{db::WriteTxn, decode::TokenKinds};

/// How each token's logs are indexed, as the writes go: from its attributes, updated by the
/// matches written meanwhile (inside a write transaction only matches change the bits a
/// `TokenKinds` reads). A batch of the incremental path starts with none; a bulk stage keeps
/// them across its batches, which would otherwise read the same busy tokens' attributes again
/// every 250 blocks.
#[derive(Debug, Default)]
pub(super) struct Kinds {
    all: foldhash::HashMap<Address, TokenKinds>,
    /// The last token seen in each slot (by its address's last bits), in front of `all`: a
    /// stage looks a token up for each of its transfer logs (51 M on the 21 M chain) and most
    /// are of a few busy tokens, found here in a table that stays in the core's cache, where
    /// the map's look-up missed it (docs/benchmarks-history.md).
    recent: Vec<Option<(Address, TokenKinds)>>,
}

impl Kinds {
    /// Tokens remembered at most; past that all are forgotten (a mainnet stage sees millions of
    /// log emitters, most of them once).
    const MOST: usize = 1 << 20;
    /// 65,536 slots, under 2 MiB: with 4,096 the stage writer took 1.5 s more CPU on the 21 M
    /// chain (docs/benchmarks-history.md).
    const RECENT_BITS: u32 = 16;

    fn slot(token: &Address) -> usize {
        usize::from(u16::from_le_bytes([token.0[18], token.0[19]])) & ((1 << Self::RECENT_BITS) - 1)
    }

    pub(super) fn of(&mut self, txn: &WriteTxn, token: &Address) -> Result<TokenKinds, WriteError> {
        if self.recent.is_empty() {
            self.recent = vec![None; 1 << Self::RECENT_BITS];
        }
        let slot = Self::slot(token);
        if let Some((address, kind)) = self.recent[slot] {
            if address == *token {
                return Ok(kind);
            }
        }
        let kind = match self.all.get(token) {
            Some(kind) => *kind,
            None => {
                if self.all.len() >= Self::MOST {
                    self.all.clear();
                }
                let kind = TokenKinds::of(&attributes(txn, token)?);
                self.all.insert(*token, kind);
                kind
            }
        };
        self.recent[slot] = Some((*token, kind));
        Ok(kind)
    }

    /// `address` is now indexed as `kind` (a match written).
    pub(super) fn set(&mut self, address: Address, kind: TokenKinds) {
        self.all.insert(address, kind);
        if let Some(Some((cached, known))) = self.recent.get_mut(Self::slot(&address)) {
            if *cached == address {
                *known = kind;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::TokenKind;

    #[test]
    fn a_match_written_reaches_the_recent_token_in_front_of_the_map() {
        let erc20 = TokenKinds { transfer: Some(TokenKind::Erc20), multi: false };
        let erc721 = TokenKinds { transfer: Some(TokenKind::Erc721), multi: false };
        let token = Address::repeat_byte(0x11);
        // Another address in the same slot: the slot is the address's last bits.
        let mut rival = Address::repeat_byte(0x22);
        rival.0[18..].copy_from_slice(&token.0[18..]);
        let mut kinds = Kinds { recent: vec![None; 1 << Kinds::RECENT_BITS], ..Kinds::default() };
        kinds.recent[Kinds::slot(&token)] = Some((token, TokenKinds::default()));
        kinds.set(token, erc20);
        assert_eq!(kinds.recent[Kinds::slot(&token)], Some((token, erc20)));
        assert_eq!(kinds.all.get(&token), Some(&erc20));
        // A match of another address leaves the slot's token as it is.
        kinds.set(rival, erc721);
        assert_eq!(kinds.recent[Kinds::slot(&rival)], Some((token, erc20)));
        assert_eq!(kinds.all.get(&rival), Some(&erc721));
    }
}
