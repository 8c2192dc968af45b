//! Keys and values of the reorg window's own tables: what the newest blocks added to the address
//! and appearance lists, kept apart from the large tables until those blocks leave the window,
//! by block (`OtsRecentIds`, `OtsRecentSent`) and by address (`OtsRecentIdsByAddress`,
//! `OtsRecentSentBySender`).

use alloy_primitives::Address;

use super::{address, be_u64, CodecError, IndexKind, KeyCodec, ValueCodec};

/// Key of `OtsRecentIdsByAddress`: the list's journal kind (1) ‖ address (20).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RecentKey {
    /// Which list (the undo journal's row kind of it).
    pub kind: IndexKind,
    /// Whose list.
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
            return Err(CodecError::new("window key", "expected 21 bytes", bytes.len()));
        };
        let kind = IndexKind::from_byte(*kind)
            .ok_or_else(|| CodecError::new("window key", "unknown list kind", bytes.len()))?;
        Ok(Self { kind, address: address(rest, "window key")? })
    }
}

/// One id of a list in the window, by address: 8 bytes big-endian, so a key's dups sort as the
/// ids do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ListId(pub u64);

impl ValueCodec for ListId {
    fn encode_value(&self) -> Vec<u8> {
        self.0.to_be_bytes().to_vec()
    }
    fn decode_value(bytes: &[u8]) -> Result<Self, CodecError> {
        be_u64(bytes, "window list id").map(Self)
    }
}

/// A window transaction, by its sender: TxId (8, BE) ‖ nonce (8, BE), sorted by TxId.
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
            return Err(CodecError::new("window sent transaction", "expected 16 bytes", bytes.len()));
        }
        Ok(Self {
            tx: be_u64(&bytes[..8], "window sent transaction")?,
            nonce: be_u64(&bytes[8..], "window sent nonce")?,
        })
    }
}

/// One id a window block added to a list: the list's journal kind (1) ‖ address (20) ‖ id (8,
/// BE), so a block's dups sort by list, then address, then id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RecentId {
    /// Which list (the undo journal's row kind of it).
    pub kind: IndexKind,
    /// Whose list.
    pub address: Address,
    /// The id (a TxId, block number or withdrawal index, as the list's ids are).
    pub id: u64,
}

impl ValueCodec for RecentId {
    fn encode_value(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(29);
        out.push(self.kind as u8);
        out.extend_from_slice(self.address.as_slice());
        out.extend_from_slice(&self.id.to_be_bytes());
        out
    }
    fn decode_value(bytes: &[u8]) -> Result<Self, CodecError> {
        if bytes.len() != 29 {
            return Err(CodecError::new("window id", "expected 29 bytes", bytes.len()));
        }
        let kind = IndexKind::from_byte(bytes[0])
            .ok_or_else(|| CodecError::new("window id", "unknown list kind", bytes.len()))?;
        Ok(Self {
            kind,
            address: address(&bytes[1..21], "window id")?,
            id: be_u64(&bytes[21..], "window id")?,
        })
    }
}

/// A transaction a window block holds, by its sender: sender (20) ‖ TxId (8, BE) ‖ nonce (8,
/// BE), so a block's dups sort by sender, then TxId.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RecentSent {
    /// The sender.
    pub sender: Address,
    /// The transaction.
    pub tx: u64,
    /// Its nonce.
    pub nonce: u64,
}

impl ValueCodec for RecentSent {
    fn encode_value(&self) -> Vec<u8> {
        let mut out = self.sender.to_vec();
        out.extend_from_slice(&self.tx.to_be_bytes());
        out.extend_from_slice(&self.nonce.to_be_bytes());
        out
    }
    fn decode_value(bytes: &[u8]) -> Result<Self, CodecError> {
        if bytes.len() != 36 {
            return Err(CodecError::new("window sent transaction", "expected 36 bytes", bytes.len()));
        }
        Ok(Self {
            sender: address(&bytes[..20], "window sent transaction")?,
            tx: be_u64(&bytes[20..28], "window sent transaction")?,
            nonce: be_u64(&bytes[28..], "window sent nonce")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_primitives::hex;

    #[test]
    fn a_window_id_is_the_kind_byte_the_address_and_the_id() {
        let row = RecentId { kind: IndexKind::Withdrawals, address: Address::repeat_byte(0xab), id: 0x0102 };
        let bytes = row.encode_value();
        assert_eq!(bytes[0], 8, "withdrawals are journal kind 8");
        assert_eq!(&bytes[1..21], &[0xab; 20]);
        assert_eq!(&bytes[21..], &hex!("0000000000000102"));
        assert_eq!(RecentId::decode_value(&bytes), Ok(row));
        assert!(RecentId::decode_value(&bytes[..28]).is_err());
        let mut unknown = bytes;
        unknown[0] = 0xff;
        assert!(RecentId::decode_value(&unknown).is_err());
    }

    #[test]
    fn window_ids_sort_by_kind_then_address_then_id() {
        let row = |kind, byte, id| RecentId { kind, address: Address::repeat_byte(byte), id }.encode_value();
        assert!(row(IndexKind::Erc20Transfers, 0xff, 9) < row(IndexKind::Erc721Transfers, 0x00, 0));
        assert!(row(IndexKind::Erc20Transfers, 0x01, 9) < row(IndexKind::Erc20Transfers, 0x02, 0));
        assert!(row(IndexKind::Erc20Transfers, 0x01, 0x0100) > row(IndexKind::Erc20Transfers, 0x01, 0xff));
    }

    #[test]
    fn the_by_address_rows_are_kind_and_address_then_id_or_txid_and_nonce() {
        let key = RecentKey { kind: IndexKind::Appearances, address: Address::repeat_byte(0xab) };
        let bytes = key.encode_key();
        assert_eq!(bytes[0], 0x0b);
        assert_eq!(&bytes[1..], &[0xab; 20]);
        assert_eq!(RecentKey::decode_key(&bytes), Ok(key));
        assert!(RecentKey::decode_key(&bytes[..20]).is_err());
        assert_eq!(ListId(0x0102).encode_value(), hex!("0000000000000102"));
        assert_eq!(ListId::decode_value(&hex!("0000000000000102")), Ok(ListId(0x0102)));
        let sent = SentTx { tx: 0x0102, nonce: 7 };
        assert_eq!(sent.encode_value(), hex!("0000000000000102 0000000000000007"));
        assert_eq!(SentTx::decode_value(&sent.encode_value()), Ok(sent));
        assert!(SentTx::decode_value(&[0; 15]).is_err());
    }

    #[test]
    fn a_window_sent_transaction_is_its_sender_txid_and_nonce() {
        let sent = RecentSent { sender: Address::repeat_byte(1), tx: 0x0102, nonce: 7 };
        let bytes = sent.encode_value();
        assert_eq!(&bytes[..20], &[1; 20]);
        assert_eq!(&bytes[20..], &hex!("0000000000000102 0000000000000007"));
        assert_eq!(RecentSent::decode_value(&bytes), Ok(sent));
        assert!(RecentSent::decode_value(&bytes[..35]).is_err());
    }
}
