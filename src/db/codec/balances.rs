//! Codecs of the balance tables (ours): token ‖ holder keys, balances, holder ranks, and the
//! per-block records that undo them.

use alloy_primitives::{Address, U256};

use super::{address, CodecError, KeyCodec, ValueCodec};

/// `token ‖ holder` (40 bytes): sorts by token, then holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PairKey {
    /// The token.
    pub token: Address,
    /// The holder.
    pub holder: Address,
}

impl KeyCodec for PairKey {
    type Encoded = [u8; 40];
    fn encode_key(&self) -> [u8; 40] {
        let mut out = [0u8; 40];
        out[..20].copy_from_slice(self.token.as_slice());
        out[20..].copy_from_slice(self.holder.as_slice());
        out
    }
    fn decode_key(bytes: &[u8]) -> Result<Self, CodecError> {
        if bytes.len() != 40 {
            return Err(CodecError::new("token and holder", "expected 40 bytes", bytes.len()));
        }
        Ok(Self { token: address(&bytes[..20], "token")?, holder: address(&bytes[20..], "holder")? })
    }
}

/// `token ‖ token id` (52 bytes): sorts by token, then id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TokenIdKey {
    /// The ERC721 token.
    pub token: Address,
    /// The token id.
    pub id: U256,
}

impl KeyCodec for TokenIdKey {
    type Encoded = [u8; 52];
    fn encode_key(&self) -> [u8; 52] {
        let mut out = [0u8; 52];
        out[..20].copy_from_slice(self.token.as_slice());
        out[20..].copy_from_slice(&self.id.to_be_bytes::<32>());
        out
    }
    fn decode_key(bytes: &[u8]) -> Result<Self, CodecError> {
        if bytes.len() != 52 {
            return Err(CodecError::new("token and id", "expected 52 bytes", bytes.len()));
        }
        Ok(Self { token: address(&bytes[..20], "token")?, id: U256::from_be_slice(&bytes[20..]) })
    }
}

/// `token ‖ holder ‖ token id` (72 bytes): an ERC1155 balance; sorts by token, then holder, so
/// that one holder's ids of a token are one range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MultiKey {
    /// The ERC1155 token.
    pub token: Address,
    /// The holder.
    pub holder: Address,
    /// The token id.
    pub id: U256,
}

impl KeyCodec for MultiKey {
    type Encoded = [u8; 72];
    fn encode_key(&self) -> [u8; 72] {
        let mut out = [0u8; 72];
        out[..20].copy_from_slice(self.token.as_slice());
        out[20..40].copy_from_slice(self.holder.as_slice());
        out[40..].copy_from_slice(&self.id.to_be_bytes::<32>());
        out
    }
    fn decode_key(bytes: &[u8]) -> Result<Self, CodecError> {
        if bytes.len() != 72 {
            return Err(CodecError::new("token, holder and id", "expected 72 bytes", bytes.len()));
        }
        Ok(Self {
            token: address(&bytes[..20], "token")?,
            holder: address(&bytes[20..40], "holder")?,
            id: U256::from_be_slice(&bytes[40..]),
        })
    }
}

/// What a block changed in an ERC1155 balance: `token (20) ‖ holder (20) ‖ id (32) ‖ balance
/// before the block (32)`, 104 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MultiPrior {
    /// Which balance.
    pub key: MultiKey,
    /// Its value before the block.
    pub old: U256,
}

impl ValueCodec for MultiPrior {
    fn encode_value(&self) -> Vec<u8> {
        let mut out = self.key.encode_key().to_vec();
        out.extend_from_slice(&self.old.to_be_bytes::<32>());
        out
    }
    fn decode_value(bytes: &[u8]) -> Result<Self, CodecError> {
        if bytes.len() != 104 {
            return Err(CodecError::new("ERC1155 prior balance", "expected 104 bytes", bytes.len()));
        }
        Ok(Self { key: MultiKey::decode_key(&bytes[..72])?, old: U256::from_be_slice(&bytes[72..]) })
    }
}

/// A balance: 32 bytes big-endian.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Balance(pub U256);

impl ValueCodec for Balance {
    fn encode_value(&self) -> Vec<u8> {
        self.0.to_be_bytes::<32>().to_vec()
    }
    fn decode_value(bytes: &[u8]) -> Result<Self, CodecError> {
        if bytes.len() != 32 {
            return Err(CodecError::new("balance", "expected 32 bytes", bytes.len()));
        }
        Ok(Self(U256::from_be_slice(bytes)))
    }
}

/// A holder's place in its token's ranking: `!balance (32) ‖ holder (20)`, so that dups sort by
/// balance, largest first, then by holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rank {
    /// The balance (non-zero).
    pub balance: U256,
    /// The holder.
    pub holder: Address,
}

impl ValueCodec for Rank {
    fn encode_value(&self) -> Vec<u8> {
        let mut out = (!self.balance).to_be_bytes::<32>().to_vec();
        out.extend_from_slice(self.holder.as_slice());
        out
    }
    fn decode_value(bytes: &[u8]) -> Result<Self, CodecError> {
        if bytes.len() != 52 {
            return Err(CodecError::new("holder rank", "expected 52 bytes", bytes.len()));
        }
        Ok(Self { balance: !U256::from_be_slice(&bytes[..32]), holder: address(&bytes[32..], "holder")? })
    }
}

/// What a block changed in a token-wide balance: `token (20) ‖ holder (20) ‖ balance before
/// the block (32)`, 72 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BalancePrior {
    /// Which balance.
    pub key: PairKey,
    /// Its value before the block.
    pub old: U256,
}

impl ValueCodec for BalancePrior {
    fn encode_value(&self) -> Vec<u8> {
        let mut out = self.key.encode_key().to_vec();
        out.extend_from_slice(&self.old.to_be_bytes::<32>());
        out
    }
    fn decode_value(bytes: &[u8]) -> Result<Self, CodecError> {
        if bytes.len() != 72 {
            return Err(CodecError::new("prior balance", "expected 72 bytes", bytes.len()));
        }
        Ok(Self { key: PairKey::decode_key(&bytes[..40])?, old: U256::from_be_slice(&bytes[40..]) })
    }
}

/// What a block changed in an ERC721 id's owner: `token (20) ‖ id (32) ‖ owner before the block
/// (20; the zero address for none)`, 72 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnerPrior {
    /// Which id.
    pub key: TokenIdKey,
    /// Its owner before the block; the zero address when it had none (it is never an owner).
    pub old: Address,
}

impl ValueCodec for OwnerPrior {
    fn encode_value(&self) -> Vec<u8> {
        let mut out = self.key.encode_key().to_vec();
        out.extend_from_slice(self.old.as_slice());
        out
    }
    fn decode_value(bytes: &[u8]) -> Result<Self, CodecError> {
        if bytes.len() != 72 {
            return Err(CodecError::new("prior owner", "expected 72 bytes", bytes.len()));
        }
        Ok(Self { key: TokenIdKey::decode_key(&bytes[..52])?, old: address(&bytes[52..], "owner")? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_pins_bytes() {
        let (t, h) = (Address::repeat_byte(0x11), Address::repeat_byte(0x22));
        let key = PairKey { token: t, holder: h };
        assert_eq!(&key.encode_key()[..20], t.as_slice());
        assert_eq!(PairKey::decode_key(&key.encode_key()), Ok(key));
        let id = TokenIdKey { token: t, id: U256::from(0x0102) };
        assert_eq!(&id.encode_key()[50..], &[1, 2]);
        assert_eq!(TokenIdKey::decode_key(&id.encode_key()), Ok(id));
        assert_eq!(Balance(U256::from(5)).encode_value()[31], 5);
        let rank = Rank { balance: U256::from(1), holder: h };
        let bytes = rank.encode_value();
        assert_eq!(&bytes[..31], &[0xff; 31]);
        assert_eq!(bytes[31], 0xfe);
        assert_eq!(Rank::decode_value(&bytes), Ok(rank));
        let prior = BalancePrior { key, old: U256::from(7) };
        let bytes = prior.encode_value();
        assert_eq!(bytes.len(), 72);
        assert_eq!(&bytes[..40], &key.encode_key()[..]);
        assert_eq!((&bytes[40..71], bytes[71]), (&[0u8; 31][..], 7));
        assert_eq!(BalancePrior::decode_value(&bytes), Ok(prior));
        assert!(BalancePrior::decode_value(&bytes[..71]).is_err());
        let prior = OwnerPrior { key: id, old: h };
        let bytes = prior.encode_value();
        assert_eq!(bytes.len(), 72);
        assert_eq!(&bytes[..52], &id.encode_key()[..]);
        assert_eq!(&bytes[52..], h.as_slice());
        assert_eq!(OwnerPrior::decode_value(&bytes), Ok(prior));
        assert!(OwnerPrior::decode_value(&[bytes, vec![0]].concat()).is_err());
    }

    #[test]
    fn erc1155_keys_pin_their_bytes() {
        let (t, h) = (Address::repeat_byte(0x11), Address::repeat_byte(0x22));
        let key = MultiKey { token: t, holder: h, id: U256::from(0x0304) };
        let bytes = key.encode_key();
        assert_eq!(&bytes[..20], t.as_slice());
        assert_eq!(&bytes[20..40], h.as_slice());
        assert_eq!(&bytes[40..70], &[0u8; 30]);
        assert_eq!(&bytes[70..], &[3, 4]);
        assert_eq!(MultiKey::decode_key(&bytes), Ok(key));
        assert!(MultiKey::decode_key(&bytes[..71]).is_err());
        let prior = MultiPrior { key, old: U256::from(9) };
        let encoded = prior.encode_value();
        assert_eq!(encoded.len(), 104);
        assert_eq!(&encoded[..72], &bytes[..]);
        assert_eq!(encoded[103], 9);
        assert_eq!(MultiPrior::decode_value(&encoded), Ok(prior));
        // A holder's ids of a token are contiguous, in id order.
        let next = MultiKey { id: U256::from(0x0305), ..key }.encode_key();
        let other_holder =
            MultiKey { holder: Address::repeat_byte(0x23), id: U256::ZERO, ..key }.encode_key();
        assert!(bytes < next && next < other_holder);
    }

    #[test]
    fn larger_balances_rank_first() {
        let h = Address::repeat_byte(0x22);
        let big = Rank { balance: U256::from(1000), holder: h }.encode_value();
        let small = Rank { balance: U256::from(3), holder: Address::ZERO }.encode_value();
        assert!(big < small);
    }
}
