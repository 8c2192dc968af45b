//! The one decoder of token logs: ERC20/ERC721 `Transfer` and ERC1155 `TransferSingle` /
//! `TransferBatch`, turned into typed [`TokenLog`]s.
//!
//! The writer (address indexes, holdings, balances), the live events and the API's transfer
//! detail all read token logs through [`TokenLog::decode`], so that what counts as a transfer,
//! which index it goes to and who its parties are is decided in one place
//! (docs/format.md, "Transfer indexes").

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

/// Which transfer index a token's logs go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
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

/// The address in the low 20 bytes of an indexed topic.
fn party(topic: &B256) -> Address {
    Address::from_slice(&topic[12..])
}

/// The 32-byte big-endian word at byte `at` of a log's data.
fn word(data: &[u8], at: usize) -> Option<U256> {
    data.get(at..at.checked_add(32)?).map(U256::from_be_slice)
}

/// The two shapes of token log, told apart by topic0 and topic count alone (before anyone asks
/// how the emitter is classified).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// `Transfer(from, to, …)`: at least 3 topics.
    Transfer,
    /// `TransferSingle`/`TransferBatch(operator, from, to, …)`: exactly 4 topics.
    Multi,
}

fn shape(topics: &[B256]) -> Option<Shape> {
    let topic0 = topics.first()?;
    if *topic0 == TRANSFER_TOPIC && topics.len() >= 3 {
        Some(Shape::Transfer)
    } else if (*topic0 == TRANSFER_SINGLE_TOPIC || *topic0 == TRANSFER_BATCH_TOPIC) && topics.len() == 4 {
        Some(Shape::Multi)
    } else {
        None
    }
}

/// A transfer log of a classified token: which index it goes to, and its parties.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenLog<'a> {
    /// The emitting token.
    pub token: Address,
    /// The index its parties go to.
    pub kind: TokenKind,
    /// ERC1155 only: who moved the tokens (not indexed).
    pub operator: Option<Address>,
    /// Sender (the zero address for a mint).
    pub from: Address,
    /// Receiver (the zero address for a burn).
    pub to: Address,
    topics: &'a [B256],
    data: &'a [u8],
}

impl<'a> TokenLog<'a> {
    /// Decodes a log emitted by `token`; `kinds_of` tells how an emitter is classified and is
    /// only asked for logs shaped like a token transfer. `None`: not a transfer of a token
    /// classified for it (an ERC20-shaped `Transfer` of a contract that is no ERC20/721, a
    /// `TransferSingle` of one that is no ERC1155, any other event).
    pub fn decode<E>(
        token: Address,
        topics: &'a [B256],
        data: &'a [u8],
        kinds_of: impl FnOnce(&Address) -> Result<TokenKinds, E>,
    ) -> Result<Option<Self>, E> {
        let Some(shape) = shape(topics) else { return Ok(None) };
        let kinds = kinds_of(&token)?;
        let log = match shape {
            Shape::Transfer => kinds.transfer.map(|kind| Self {
                token,
                kind,
                operator: None,
                from: party(&topics[1]),
                to: party(&topics[2]),
                topics,
                data,
            }),
            Shape::Multi => kinds.multi.then(|| Self {
                token,
                kind: TokenKind::Erc1155,
                operator: Some(party(&topics[1])),
                from: party(&topics[2]),
                to: party(&topics[3]),
                topics,
                data,
            }),
        };
        Ok(log)
    }

    /// What the log moves, as `(id, units)` pairs in order: an ERC20's amount (id zero, from
    /// the first data word), an ERC721's id (from topic 3, one unit), each id and amount of an
    /// ERC1155 log. `None` when those parts are missing or malformed: the log still names its
    /// parties, but moves no balance.
    pub fn units(&self) -> Option<Vec<(U256, U256)>> {
        match self.kind {
            TokenKind::Erc20 => Some(vec![(U256::ZERO, word(self.data, 0)?)]),
            TokenKind::Erc721 => Some(vec![(U256::from_be_bytes(self.topics.get(3)?.0), U256::from(1))]),
            TokenKind::Erc1155 => erc1155_amounts(&self.topics[0], self.data),
        }
    }

    /// An ERC721's token id as shown to people: topic 3, or for a token that puts it in the
    /// data (an ERC20-shaped log), the first data word.
    pub fn shown_token_id(&self) -> Option<U256> {
        self.topics.get(3).map(|id| U256::from_be_bytes(id.0)).or_else(|| word(self.data, 0))
    }

    /// An ERC20's amount as shown to people: the first data word, zero where there is none.
    pub fn shown_value(&self) -> U256 {
        word(self.data, 0).unwrap_or_default()
    }
}

/// Every token log of `block`'s successful transactions, in log order, with its transaction.
/// Logs of failed transactions are left out (a node never returns any anyway).
pub fn token_logs<E>(
    block: &BlockData,
    mut kinds_of: impl FnMut(&Address) -> Result<TokenKinds, E>,
) -> Result<Vec<(TxId, TokenLog<'_>)>, E>
where
    E: From<TxIdOverflow>,
{
    let mut out = Vec::new();
    for (index, receipt) in block.receipts.iter().enumerate() {
        if !receipt.success {
            continue;
        }
        for log in &receipt.logs {
            if let Some(decoded) = TokenLog::decode(log.address, &log.topics, &log.data, &mut kinds_of)? {
                out.push((TxId::new(block.number, index as u64)?, decoded));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(a: Address) -> B256 {
        B256::left_padding_from(a.as_slice())
    }

    const ERC20: TokenKinds = TokenKinds { transfer: Some(TokenKind::Erc20), multi: false };
    const ERC721: TokenKinds = TokenKinds { transfer: Some(TokenKind::Erc721), multi: false };
    const ERC1155: TokenKinds = TokenKinds { transfer: None, multi: true };

    fn decode(topics: &[B256], data: &[u8], kinds: TokenKinds) -> Option<TokenLog<'static>> {
        let topics: &'static [B256] = Box::leak(topics.to_vec().into_boxed_slice());
        let data: &'static [u8] = Box::leak(data.to_vec().into_boxed_slice());
        TokenLog::decode(Address::repeat_byte(9), topics, data, |_| Ok::<_, ()>(kinds)).expect("infallible")
    }

    #[test]
    fn topics_are_the_event_hashes() {
        let k = |s: &str| alloy_primitives::keccak256(s.as_bytes());
        assert_eq!(k("TransferSingle(address,address,address,uint256,uint256)"), TRANSFER_SINGLE_TOPIC);
        assert_eq!(k("TransferBatch(address,address,address,uint256[],uint256[])"), TRANSFER_BATCH_TOPIC);
    }

    #[test]
    fn erc20_transfer_moves_its_first_data_word() {
        let (a, b) = (Address::repeat_byte(1), Address::repeat_byte(2));
        let log = decode(&[TRANSFER_TOPIC, topic(a), topic(b)], &U256::from(7).to_be_bytes::<32>(), ERC20)
            .expect("a token log");
        assert_eq!((log.kind, log.from, log.to, log.operator), (TokenKind::Erc20, a, b, None));
        assert_eq!(log.units(), Some(vec![(U256::ZERO, U256::from(7))]));
        // Without data it still names its parties but moves nothing.
        let short = decode(&[TRANSFER_TOPIC, topic(a), topic(b)], &[], ERC20).expect("a token log");
        assert_eq!(short.units(), None);
        assert_eq!(short.shown_value(), U256::ZERO);
    }

    #[test]
    fn erc721_takes_its_id_from_topic_3_and_wins_over_erc20() {
        let (a, b) = (Address::repeat_byte(1), Address::repeat_byte(2));
        let id = B256::with_last_byte(42);
        let both = TokenKinds::of(&{
            let mut attrs = Attributes::default();
            attrs.set(AttributeBit::Erc20);
            attrs.set(AttributeBit::Erc721);
            attrs
        });
        let log = decode(&[TRANSFER_TOPIC, topic(a), topic(b), id], &[], both).expect("a token log");
        assert_eq!(log.kind, TokenKind::Erc721);
        assert_eq!(log.units(), Some(vec![(U256::from(42), U256::from(1))]));
        // An ERC20-shaped log of an ERC721: parties, no move, the id shown from the data.
        let three = decode(&[TRANSFER_TOPIC, topic(a), topic(b)], &U256::from(5).to_be_bytes::<32>(), ERC721)
            .expect("a token log");
        assert_eq!(three.units(), None);
        assert_eq!(three.shown_token_id(), Some(U256::from(5)));
    }

    #[test]
    fn erc1155_logs_need_four_topics_and_the_erc1155_attribute() {
        let (op, a, b) = (Address::repeat_byte(3), Address::repeat_byte(1), Address::repeat_byte(2));
        let topics = [TRANSFER_SINGLE_TOPIC, topic(op), topic(a), topic(b)];
        let data = [U256::from(4).to_be_bytes::<32>(), U256::from(10).to_be_bytes::<32>()].concat();
        let log = decode(&topics, &data, ERC1155).expect("a token log");
        assert_eq!((log.operator, log.from, log.to), (Some(op), a, b));
        assert_eq!(log.units(), Some(vec![(U256::from(4), U256::from(10))]));
        assert!(decode(&topics, &data, ERC20).is_none());
        assert!(decode(&topics[..3], &data, ERC1155).is_none());
        // A Transfer of an ERC1155-only contract is not indexed.
        assert!(decode(&[TRANSFER_TOPIC, topic(a), topic(b)], &data, ERC1155).is_none());
    }

    #[test]
    fn the_emitter_is_only_looked_up_for_token_shaped_logs() {
        let mut asked = 0;
        let other = [B256::repeat_byte(7), B256::ZERO, B256::ZERO];
        let got = TokenLog::decode(Address::ZERO, &other, &[], |_| {
            asked += 1;
            Ok::<_, ()>(ERC20)
        });
        assert_eq!((got, asked), (Ok(None), 0));
    }
}
