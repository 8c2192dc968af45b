//! Value codec of `OtsContractInfo`: what classifiers read about a contract.

use alloy_primitives::Address;

use super::{address, be_u64, CodecError, ValueCodec};

/// Longest name or symbol kept, in bytes (cut at a character boundary): a token chooses its
/// own name, and a list row must stay small.
pub(super) const MAX_TEXT_BYTES: usize = 256;

/// A contract's metadata as classified, and the block whose classification wrote it (an
/// unwind below that block removes the row).
///
/// Bytes: block (8) ‖ presence flags (1: bit 0 name, 1 symbol, 2 decimals, 3 asset,
/// 4 implementation) ‖ [decimals (1)] ‖ [asset (20)] ‖ [implementation (20)] ‖
/// [name length (2) ‖ name UTF-8] ‖ [symbol length (2) ‖ symbol UTF-8], each part present only
/// when its flag is set.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContractInfo {
    /// The block that wrote the row.
    pub block: u64,
    /// `name()`.
    pub name: Option<String>,
    /// `symbol()`.
    pub symbol: Option<String>,
    /// `decimals()`.
    pub decimals: Option<u8>,
    /// ERC4626 `asset()`.
    pub asset: Option<Address>,
    /// EIP-1167 implementation.
    pub implementation: Option<Address>,
}

fn clip(text: &str) -> &str {
    let mut end = text.len().min(MAX_TEXT_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

const NAME: u8 = 1;
const SYMBOL: u8 = 2;
const DECIMALS: u8 = 4;
const ASSET: u8 = 8;
const IMPLEMENTATION: u8 = 16;

impl ValueCodec for ContractInfo {
    fn encode_value(&self) -> Vec<u8> {
        let mut out = self.block.to_be_bytes().to_vec();
        let flags = [
            (self.name.is_some(), NAME),
            (self.symbol.is_some(), SYMBOL),
            (self.decimals.is_some(), DECIMALS),
            (self.asset.is_some(), ASSET),
            (self.implementation.is_some(), IMPLEMENTATION),
        ]
        .iter()
        .filter(|(present, _)| *present)
        .fold(0u8, |acc, (_, bit)| acc | bit);
        out.push(flags);
        out.extend(self.decimals);
        for a in [self.asset, self.implementation].into_iter().flatten() {
            out.extend_from_slice(a.as_slice());
        }
        for text in [&self.name, &self.symbol].into_iter().flatten() {
            let text = clip(text);
            out.extend_from_slice(&(text.len() as u16).to_be_bytes());
            out.extend_from_slice(text.as_bytes());
        }
        out
    }

    fn decode_value(bytes: &[u8]) -> Result<Self, CodecError> {
        let short = || CodecError::new("contract info", "truncated", bytes.len());
        let block = be_u64(bytes.get(..8).ok_or_else(short)?, "contract info")?;
        let flags = *bytes.get(8).ok_or_else(short)?;
        if flags & !(NAME | SYMBOL | DECIMALS | ASSET | IMPLEMENTATION) != 0 {
            return Err(CodecError::new("contract info", "unknown presence flag", bytes.len()));
        }
        let mut rest = &bytes[9..];
        let mut take = |n: usize| -> Result<&[u8], CodecError> {
            let (head, tail) = rest.split_at_checked(n).ok_or_else(short)?;
            rest = tail;
            Ok(head)
        };
        let mut info = Self { block, ..Self::default() };
        if flags & DECIMALS != 0 {
            info.decimals = Some(take(1)?[0]);
        }
        if flags & ASSET != 0 {
            info.asset = Some(address(take(20)?, "contract info")?);
        }
        if flags & IMPLEMENTATION != 0 {
            info.implementation = Some(address(take(20)?, "contract info")?);
        }
        for (flag, slot) in [(NAME, &mut info.name), (SYMBOL, &mut info.symbol)] {
            if flags & flag != 0 {
                let len = take(2)?;
                let len = usize::from(u16::from_be_bytes([len[0], len[1]]));
                let text = std::str::from_utf8(take(len)?)
                    .map_err(|_| CodecError::new("contract info", "text is not UTF-8", bytes.len()))?;
                *slot = Some(text.to_owned());
            }
        }
        if !rest.is_empty() {
            return Err(CodecError::new("contract info", "trailing bytes", bytes.len()));
        }
        Ok(info)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_pins_bytes() {
        let info = ContractInfo {
            block: 0x0102,
            name: Some("Maker".into()),
            symbol: Some("MKR".into()),
            decimals: Some(18),
            asset: None,
            implementation: Some(Address::repeat_byte(0xaa)),
        };
        let bytes = info.encode_value();
        let mut expected = vec![0, 0, 0, 0, 0, 0, 0x01, 0x02, NAME | SYMBOL | DECIMALS | IMPLEMENTATION, 18];
        expected.extend_from_slice(&[0xaa; 20]);
        expected.extend_from_slice(&[0, 5]);
        expected.extend_from_slice(b"Maker");
        expected.extend_from_slice(&[0, 3]);
        expected.extend_from_slice(b"MKR");
        assert_eq!(bytes, expected);
        assert_eq!(ContractInfo::decode_value(&bytes), Ok(info));

        let empty = ContractInfo { block: 7, ..ContractInfo::default() };
        assert_eq!(empty.encode_value(), vec![0, 0, 0, 0, 0, 0, 0, 7, 0]);
        assert_eq!(ContractInfo::decode_value(&empty.encode_value()), Ok(empty));
    }

    #[test]
    fn long_names_are_clipped_at_a_character_boundary() {
        let info = ContractInfo { name: Some("é".repeat(200)), ..ContractInfo::default() };
        let back = ContractInfo::decode_value(&info.encode_value()).expect("decode");
        assert_eq!(back.name.as_deref(), Some("é".repeat(128).as_str()));
    }

    #[test]
    fn malformed_bytes_are_errors() {
        assert!(ContractInfo::decode_value(&[0; 8]).is_err());
        assert!(ContractInfo::decode_value(&[0, 0, 0, 0, 0, 0, 0, 0, 0x80]).is_err());
        assert!(ContractInfo::decode_value(&[0, 0, 0, 0, 0, 0, 0, 0, DECIMALS]).is_err());
        assert!(ContractInfo::decode_value(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 1]).is_err());
    }
}
