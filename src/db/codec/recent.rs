//! Keys and values of the reorg window's own rows (`OtsRecentIds`, `OtsRecentSent`): what the
//! newest blocks added to the address and appearance lists, kept apart from the large tables
//! until those blocks leave the window.

use alloy_primitives::Address;

use super::{address, be_u64, CodecError, IndexKind, KeyCodec, ValueCodec};

/// Key of `OtsRecentIds`: the list's journal kind (1) ‖ address (20), so one list's rows sort
/// together and, within it, by address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RecentKey {
    /// Which list (the undo journal's row kind of it).
    pub kind: IndexKind,
    /// The address whose list it is.
    pub address: Address,
}

impl KeyCodec for RecentKey {
    type Encoded = [u8; 21];
    fn encode_key(&self) -> [u8; 21] {
        let mut out = [0u8; 21];
        out[0] = self.kind as u8;
        out[1..].copy_from_slice(self.address.as_slice());
        out
    }
    fn decode_key(bytes: &[u8]) -> Result<Self, CodecError> {
        let [kind, rest @ ..] = bytes else {
            return Err(CodecError::new("recent key", "expected 21 bytes", bytes.len()));
        };
        let kind = IndexKind::from_byte(*kind)
            .ok_or_else(|| CodecError::new("recent key", "unknown list kind", bytes.len()))?;
        Ok(Self { kind, address: address(rest, "recent key")? })
    }
}

/// One id of an address list (a TxId, block number or withdrawal index, as the list's ids are):
/// 8 bytes big-endian, so a key's dups sort as the ids do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ListId(pub u64);

impl ValueCodec for ListId {
    fn encode_value(&self) -> Vec<u8> {
        self.0.to_be_bytes().to_vec()
    }
    fn decode_value(bytes: &[u8]) -> Result<Self, CodecError> {
        be_u64(bytes, "list id").map(Self)
    }
}

/// A transaction its sender sent, in the reorg window: TxId (8, BE) ‖ nonce (8, BE), so a
/// sender's dups sort by TxId.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SentTx {
    /// The transaction.
    pub tx: u64,
    /// Its nonce.
    pub nonce: u64,
}

impl ValueCodec for SentTx {
    fn encode_value(&self) -> Vec<u8> {
        [self.tx.to_be_bytes(), self.nonce.to_be_bytes()].concat()
    }
    fn decode_value(bytes: &[u8]) -> Result<Self, CodecError> {
        if bytes.len() != 16 {
            return Err(CodecError::new("sent transaction", "expected 16 bytes", bytes.len()));
        }
        Ok(Self { tx: be_u64(&bytes[..8], "sent transaction")?, nonce: be_u64(&bytes[8..], "sent nonce")? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_primitives::hex;

    #[test]
    fn a_recent_key_is_the_kind_byte_then_the_address() {
        let key = RecentKey { kind: IndexKind::Withdrawals, address: Address::repeat_byte(0xab) };
        let bytes = key.encode_key();
        assert_eq!(bytes[0], 8, "withdrawals are journal kind 8");
        assert_eq!(&bytes[1..], &[0xab; 20]);
        assert_eq!(RecentKey::decode_key(&bytes), Ok(key));
        assert!(RecentKey::decode_key(&bytes[..20]).is_err());
        let mut unknown = bytes;
        unknown[0] = 0xff;
        assert!(RecentKey::decode_key(&unknown).is_err());
    }

    #[test]
    fn recent_keys_sort_by_kind_then_address() {
        let key = |kind, byte| RecentKey { kind, address: Address::repeat_byte(byte) }.encode_key();
        assert!(key(IndexKind::Erc20Transfers, 0xff) < key(IndexKind::Erc721Transfers, 0x00));
        assert!(key(IndexKind::Erc20Transfers, 0x01) < key(IndexKind::Erc20Transfers, 0x02));
    }

    #[test]
    fn a_sent_transaction_is_its_txid_then_its_nonce() {
        let sent = SentTx { tx: 0x0102, nonce: 7 };
        assert_eq!(sent.encode_value(), hex!("0000000000000102 0000000000000007"));
        assert_eq!(SentTx::decode_value(&sent.encode_value()), Ok(sent));
        assert!(SentTx::decode_value(&[0; 15]).is_err());
        // Dups sort by TxId whatever the nonces.
        assert!(SentTx { tx: 1, nonce: 9 }.encode_value() < SentTx { tx: 2, nonce: 0 }.encode_value());
    }

    #[test]
    fn a_list_id_is_eight_bytes_big_endian() {
        assert_eq!(ListId(0x0102).encode_value(), hex!("0000000000000102"));
        assert_eq!(ListId::decode_value(&hex!("0000000000000102")), Ok(ListId(0x0102)));
        assert!(ListId::decode_value(&[1, 2]).is_err());
    }
}
