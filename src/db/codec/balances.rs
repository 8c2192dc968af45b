//! Codecs of the balance tables (ours): token ‖ holder keys, balances, holder ranks, and the
//! per-block records that undo them.
//!
//! Token ids in keys and balances in values are stored without their leading zero bytes: most
//! ids are small counters and most balances far below 2^256, so 32 fixed bytes were mostly
//! zeros. A key's id keeps its order with a length byte before it (a shorter id is a smaller
//! one). The undo records keep fixed 32-byte fields: their tables are fixed-size dups, and
//! they hold only the reorg window.

use alloy_primitives::{Address, U256};

use super::{address, be_u64, CodecError, KeyCodec, ValueCodec};

/// The bytes of `v` without leading zeros (none for zero).
fn trimmed(v: &U256) -> ([u8; 32], usize) {
    let bytes = v.to_be_bytes::<32>();
    let skip = bytes.iter().take_while(|b| **b == 0).count();
    (bytes, skip)
}

/// Reads a number written as `length (1) ‖ its bytes without leading zeros` (ordered as the
/// numbers are), the whole of `bytes`; canonical only (no leading zero byte).
fn get_ordered_u256(bytes: &[u8], what: &'static str) -> Result<U256, CodecError> {
    let bad = |reason| CodecError::new(what, reason, bytes.len());
    let (&len, rest) = bytes.split_first().ok_or_else(|| bad("expected a length byte"))?;
    if usize::from(len) != rest.len() || len > 32 {
        return Err(bad("its length byte does not match its bytes"));
    }
    if rest.first() == Some(&0) {
        return Err(bad("a number with a leading zero byte"));
    }
    Ok(U256::from_be_slice(rest))
}

/// A key of fixed fields and one ordered 256-bit number, at most `N` bytes, kept on the stack.
#[derive(Debug, Clone, Copy)]
pub struct VarKey<const N: usize> {
    bytes: [u8; N],
    len: usize,
}

impl<const N: usize> AsRef<[u8]> for VarKey<N> {
    fn as_ref(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl<const N: usize> VarKey<N> {
    /// `prefix` (at most N − 33 bytes) ‖ `number`'s length ‖ its bytes without leading zeros.
    fn new(prefix: &[&[u8]], number: &U256) -> Self {
        let mut bytes = [0u8; N];
        let mut len = 0;
        for part in prefix {
            bytes[len..len + part.len()].copy_from_slice(part);
            len += part.len();
        }
        let (be, skip) = trimmed(number);
        bytes[len] = (32 - skip) as u8;
        bytes[len + 1..len + 1 + 32 - skip].copy_from_slice(&be[skip..]);
        Self { bytes, len: len + 1 + 32 - skip }
    }
}

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

/// `token (20) ‖ id length (1) ‖ token id without leading zeros` (21–53 bytes): sorts by
/// token, then id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TokenIdKey {
    /// The ERC721 token.
    pub token: Address,
    /// The token id.
    pub id: U256,
}

impl KeyCodec for TokenIdKey {
    type Encoded = VarKey<53>;
    fn encode_key(&self) -> VarKey<53> {
        VarKey::new(&[self.token.as_slice()], &self.id)
    }
    fn decode_key(bytes: &[u8]) -> Result<Self, CodecError> {
        if bytes.len() < 21 {
            return Err(CodecError::new("token and id", "expected at least 21 bytes", bytes.len()));
        }
        Ok(Self { token: address(&bytes[..20], "token")?, id: get_ordered_u256(&bytes[20..], "token id")? })
    }
}

/// The key of an ERC721 owner in a staged segment (`OtsOwnersStaged`): `segment (8, BE) ‖ tier
/// (1) ‖ token (20) ‖ id length (1) ‖ token id without leading zeros` (30–62 bytes). Segments
/// sort by their newest block, then tier: a stage's segment, or a merge of the newest segments
/// keyed by the newest of them at the next tier, sorts after every key written before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StagedOwnerKey {
    /// The newest block of the stages the segment holds.
    pub segment: u64,
    /// How many merges of segments made the segment (0: a stage wrote it).
    pub tier: u8,
    /// The token and id.
    pub id: TokenIdKey,
}

impl KeyCodec for StagedOwnerKey {
    type Encoded = VarKey<62>;
    fn encode_key(&self) -> VarKey<62> {
        let segment = self.segment.to_be_bytes();
        VarKey::new(&[&segment, &[self.tier], self.id.token.as_slice()], &self.id.id)
    }
    fn decode_key(bytes: &[u8]) -> Result<Self, CodecError> {
        const WHAT: &str = "staged owner key";
        if bytes.len() < 30 {
            return Err(CodecError::new(WHAT, "expected at least 30 bytes", bytes.len()));
        }
        Ok(Self {
            segment: be_u64(&bytes[..8], WHAT)?,
            tier: bytes[8],
            id: TokenIdKey::decode_key(&bytes[9..])?,
        })
    }
}

/// `token (20) ‖ holder (20) ‖ id length (1) ‖ token id without leading zeros` (41–73 bytes):
/// an ERC1155 balance; sorts by token, then holder, then id, so that one holder's ids of a
/// token are one range.
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
    type Encoded = VarKey<73>;
    fn encode_key(&self) -> VarKey<73> {
        VarKey::new(&[self.token.as_slice(), self.holder.as_slice()], &self.id)
    }
    fn decode_key(bytes: &[u8]) -> Result<Self, CodecError> {
        if bytes.len() < 41 {
            return Err(CodecError::new("token, holder and id", "expected at least 41 bytes", bytes.len()));
        }
        Ok(Self {
            token: address(&bytes[..20], "token")?,
            holder: address(&bytes[20..40], "holder")?,
            id: get_ordered_u256(&bytes[40..], "token id")?,
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
        let mut out = Vec::with_capacity(104);
        out.extend_from_slice(self.key.token.as_slice());
        out.extend_from_slice(self.key.holder.as_slice());
        out.extend_from_slice(&self.key.id.to_be_bytes::<32>());
        out.extend_from_slice(&self.old.to_be_bytes::<32>());
        out
    }
    fn decode_value(bytes: &[u8]) -> Result<Self, CodecError> {
        if bytes.len() != 104 {
            return Err(CodecError::new("ERC1155 prior balance", "expected 104 bytes", bytes.len()));
        }
        let key = MultiKey {
            token: address(&bytes[..20], "token")?,
            holder: address(&bytes[20..40], "holder")?,
            id: U256::from_be_slice(&bytes[40..72]),
        };
        Ok(Self { key, old: U256::from_be_slice(&bytes[72..]) })
    }
}

/// A balance: big-endian without leading zeros, 1–32 bytes (zero is one `00` byte, though
/// zero balances have no rows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Balance(pub U256);

impl ValueCodec for Balance {
    fn encode_value(&self) -> Vec<u8> {
        let (bytes, skip) = trimmed(&self.0);
        bytes[skip.min(31)..].to_vec()
    }
    fn decode_value(bytes: &[u8]) -> Result<Self, CodecError> {
        if bytes.is_empty() || bytes.len() > 32 {
            return Err(CodecError::new("balance", "expected 1 to 32 bytes", bytes.len()));
        }
        if bytes.len() > 1 && bytes[0] == 0 {
            return Err(CodecError::new("balance", "a leading zero byte", bytes.len()));
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

impl Rank {
    /// Where it stands in a ranking: the order of its bytes (largest balance first, then holder).
    fn order(&self) -> (U256, Address) {
        (!self.balance, self.holder)
    }
}

impl Ord for Rank {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.order().cmp(&other.order())
    }
}

impl PartialOrd for Rank {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
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
        let mut out = Vec::with_capacity(72);
        out.extend_from_slice(self.key.token.as_slice());
        out.extend_from_slice(&self.key.id.to_be_bytes::<32>());
        out.extend_from_slice(self.old.as_slice());
        out
    }
    fn decode_value(bytes: &[u8]) -> Result<Self, CodecError> {
        if bytes.len() != 72 {
            return Err(CodecError::new("prior owner", "expected 72 bytes", bytes.len()));
        }
        let key =
            TokenIdKey { token: address(&bytes[..20], "token")?, id: U256::from_be_slice(&bytes[20..52]) };
        Ok(Self { key, old: address(&bytes[52..], "owner")? })
    }
}

/// A value as a block in the reorg window left it: `block (8) ‖ value`, the value fixed-size
/// (a balance 32 bytes, an owner 20, the zero address for none), so that a key's dups sort by
/// block and the newest is the last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowValue<V> {
    /// The block.
    pub block: u64,
    /// The value after it.
    pub value: V,
}

impl ValueCodec for WindowValue<U256> {
    fn encode_value(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(40);
        out.extend_from_slice(&self.block.to_be_bytes());
        out.extend_from_slice(&self.value.to_be_bytes::<32>());
        out
    }
    fn decode_value(bytes: &[u8]) -> Result<Self, CodecError> {
        if bytes.len() != 40 {
            return Err(CodecError::new("window balance", "expected 40 bytes", bytes.len()));
        }
        Ok(Self { block: be_u64(&bytes[..8], "block")?, value: U256::from_be_slice(&bytes[8..]) })
    }
}

impl ValueCodec for WindowValue<Address> {
    fn encode_value(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(28);
        out.extend_from_slice(&self.block.to_be_bytes());
        out.extend_from_slice(self.value.as_slice());
        out
    }
    fn decode_value(bytes: &[u8]) -> Result<Self, CodecError> {
        if bytes.len() != 28 {
            return Err(CodecError::new("window owner", "expected 28 bytes", bytes.len()));
        }
        Ok(Self { block: be_u64(&bytes[..8], "block")?, value: address(&bytes[8..], "owner")? })
    }
}

/// A block's change to a token's holder count: block (8) ‖ holders gained less holders lost
/// (8, two's complement), so that a token's dups sort by block.
impl ValueCodec for WindowValue<i64> {
    fn encode_value(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16);
        out.extend_from_slice(&self.block.to_be_bytes());
        out.extend_from_slice(&self.value.to_be_bytes());
        out
    }
    fn decode_value(bytes: &[u8]) -> Result<Self, CodecError> {
        if bytes.len() != 16 {
            return Err(CodecError::new("window holder count", "expected 16 bytes", bytes.len()));
        }
        let value = be_u64(&bytes[8..], "holders gained")?;
        Ok(Self { block: be_u64(&bytes[..8], "block")?, value: i64::from_be_bytes(value.to_be_bytes()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_primitives::hex;

    #[test]
    fn round_trips_and_pins_bytes() {
        let (t, h) = (Address::repeat_byte(0x11), Address::repeat_byte(0x22));
        let key = PairKey { token: t, holder: h };
        assert_eq!(&key.encode_key()[..20], t.as_slice());
        assert_eq!(PairKey::decode_key(&key.encode_key()), Ok(key));
        let id = TokenIdKey { token: t, id: U256::from(0x0102) };
        assert_eq!(&id.encode_key().as_ref()[20..], &[2, 1, 2]);
        assert_eq!(TokenIdKey::decode_key(id.encode_key().as_ref()), Ok(id));
        let zero = TokenIdKey { token: t, id: U256::ZERO };
        assert_eq!(zero.encode_key().as_ref().len(), 21);
        assert_eq!(TokenIdKey::decode_key(zero.encode_key().as_ref()), Ok(zero));
        let max = TokenIdKey { token: t, id: U256::MAX };
        assert_eq!(max.encode_key().as_ref().len(), 53);
        assert_eq!(TokenIdKey::decode_key(max.encode_key().as_ref()), Ok(max));
        // Not canonical: a leading zero, a length that is not the bytes'.
        assert!(TokenIdKey::decode_key(&[t.as_slice(), &[2, 0, 5]].concat()).is_err());
        assert!(TokenIdKey::decode_key(&[t.as_slice(), &[3, 1, 2]].concat()).is_err());
        let staged = StagedOwnerKey { segment: 0x0102, tier: 1, id };
        assert_eq!(
            staged.encode_key().as_ref(),
            [&hex!("0000000000000102 01")[..], t.as_slice(), &[2, 1, 2]].concat()
        );
        assert_eq!(StagedOwnerKey::decode_key(staged.encode_key().as_ref()), Ok(staged));
        let merged = StagedOwnerKey { tier: 2, id: zero, ..staged };
        let next = StagedOwnerKey { segment: 0x0103, tier: 0, id: zero };
        assert!(staged.encode_key().as_ref() < merged.encode_key().as_ref());
        assert!(merged.encode_key().as_ref() < next.encode_key().as_ref());
        let widest = StagedOwnerKey { id: max, ..staged };
        assert_eq!(widest.encode_key().as_ref().len(), 62);
        assert_eq!(StagedOwnerKey::decode_key(widest.encode_key().as_ref()), Ok(widest));
        assert!(StagedOwnerKey::decode_key(&[0; 29]).is_err());
        assert_eq!(Balance(U256::from(5)).encode_value(), vec![5]);
        assert_eq!(Balance(U256::from(0x0100)).encode_value(), vec![1, 0]);
        assert_eq!(Balance(U256::ZERO).encode_value(), vec![0]);
        assert_eq!(Balance(U256::MAX).encode_value(), vec![0xff; 32]);
        for v in [U256::ZERO, U256::from(5), U256::from(0x0100), U256::MAX] {
            assert_eq!(Balance::decode_value(&Balance(v).encode_value()), Ok(Balance(v)));
        }
        assert!(Balance::decode_value(&[]).is_err());
        assert!(Balance::decode_value(&[0, 5]).is_err());
        assert!(Balance::decode_value(&[1; 33]).is_err());
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
        assert_eq!(&bytes[..20], t.as_slice());
        assert_eq!((&bytes[20..50], &bytes[50..52]), (&[0u8; 30][..], &[1u8, 2][..]));
        assert_eq!(&bytes[52..], h.as_slice());
        assert_eq!(OwnerPrior::decode_value(&bytes), Ok(prior));
        assert!(OwnerPrior::decode_value(&[bytes, vec![0]].concat()).is_err());
    }

    #[test]
    fn erc1155_keys_pin_their_bytes() {
        let (t, h) = (Address::repeat_byte(0x11), Address::repeat_byte(0x22));
        let key = MultiKey { token: t, holder: h, id: U256::from(0x0304) };
        let encoded_key = key.encode_key();
        let bytes = encoded_key.as_ref();
        assert_eq!(&bytes[..20], t.as_slice());
        assert_eq!(&bytes[20..40], h.as_slice());
        assert_eq!(&bytes[40..], &[2, 3, 4]);
        assert_eq!(MultiKey::decode_key(bytes), Ok(key));
        assert!(MultiKey::decode_key(&bytes[..42]).is_err());
        let prior = MultiPrior { key, old: U256::from(9) };
        let encoded = prior.encode_value();
        assert_eq!(encoded.len(), 104);
        assert_eq!(&encoded[..40], &bytes[..40]);
        assert_eq!((&encoded[40..70], &encoded[70..72]), (&[0u8; 30][..], &[3u8, 4][..]));
        assert_eq!(encoded[103], 9);
        assert_eq!(MultiPrior::decode_value(&encoded), Ok(prior));
        // A holder's ids of a token are contiguous, in id order, whatever their lengths.
        let encoded = |k: MultiKey| k.encode_key().as_ref().to_vec();
        let ids =
            [U256::ZERO, U256::from(1), U256::from(0xff), U256::from(0x0100), U256::from(0x0304), U256::MAX];
        let in_order: Vec<Vec<u8>> = ids.iter().map(|&id| encoded(MultiKey { id, ..key })).collect();
        assert!(in_order.windows(2).all(|w| w[0] < w[1]), "ids sort as numbers");
        let other_holder = encoded(MultiKey { holder: Address::repeat_byte(0x23), id: U256::ZERO, ..key });
        assert!(in_order.iter().all(|k| *k < other_holder));
    }

    #[test]
    fn larger_balances_rank_first() {
        let h = Address::repeat_byte(0x22);
        let big = Rank { balance: U256::from(1000), holder: h }.encode_value();
        let small = Rank { balance: U256::from(3), holder: Address::ZERO }.encode_value();
        assert!(big < small);
    }

    #[test]
    fn window_values_pin_their_bytes_and_sort_by_block() {
        let balance = WindowValue { block: 0x0102, value: U256::from(9) };
        let bytes = balance.encode_value();
        assert_eq!(bytes.len(), 40);
        assert_eq!(&bytes[..8], &[0, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!((&bytes[8..39], bytes[39]), (&[0u8; 31][..], 9));
        assert_eq!(WindowValue::<U256>::decode_value(&bytes), Ok(balance));
        assert!(WindowValue::<U256>::decode_value(&bytes[..39]).is_err());
        let later = WindowValue { block: 0x0103, value: U256::ZERO }.encode_value();
        assert!(bytes < later, "a later block's dup sorts after, whatever its value");
        let owner = WindowValue { block: 5, value: Address::repeat_byte(0x33) };
        let bytes = owner.encode_value();
        assert_eq!(bytes.len(), 28);
        assert_eq!(&bytes[..8], &5u64.to_be_bytes());
        assert_eq!(&bytes[8..], &[0x33; 20]);
        assert_eq!(WindowValue::<Address>::decode_value(&bytes), Ok(owner));
        assert!(WindowValue::<Address>::decode_value(&bytes[1..]).is_err());
        let lost = WindowValue { block: 7, value: -2i64 };
        let bytes = lost.encode_value();
        assert_eq!(&bytes[..8], &7u64.to_be_bytes());
        assert_eq!(&bytes[8..], &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe]);
        assert_eq!(WindowValue::<i64>::decode_value(&bytes), Ok(lost));
        assert!(WindowValue::<i64>::decode_value(&bytes[..15]).is_err());
        let gained = WindowValue { block: 8, value: i64::MAX }.encode_value();
        assert!(bytes < gained, "a later block's dup sorts after, whatever its change");
    }
}
