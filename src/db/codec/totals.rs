//! Codecs of the address totals (ours): what an address received, sent, paid in fees and was
//! withdrawn in all, and how many transactions it was the top-level recipient of; and the
//! per-block records that undo them.

use alloy_primitives::{Address, U256};

use super::{
    address,
    appearances::{get_varint, put_varint},
    CodecError, ValueCodec,
};

/// An address's totals, as sums over the indexed chain. All zero is no row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PartialOrd, Ord)]
pub struct AddressTotals {
    /// Wei received by successful value transfers at any depth (calls, creations, selfdestruct
    /// beneficiaries), or at the top level only where the node gave no call frames.
    pub received: U256,
    /// Wei sent the same way.
    pub sent: U256,
    /// Wei paid in fees as a transaction's sender.
    pub fees: U256,
    /// Wei received by consensus-layer withdrawals.
    pub withdrawn: U256,
    /// Transactions it was the recipient (or created contract) of at the top level without
    /// being their sender.
    pub top_level_in: u64,
}

/// Which fields a row holds, one bit each, in the order they follow.
const RECEIVED: u8 = 1;
const SENT: u8 = 2;
const FEES: u8 = 4;
const WITHDRAWN: u8 = 8;
const TOP_LEVEL_IN: u8 = 16;

fn put_u256(out: &mut Vec<u8>, v: U256) {
    let bytes = v.to_be_bytes::<32>();
    let skip = bytes.iter().take_while(|b| **b == 0).count();
    out.push((32 - skip) as u8);
    out.extend_from_slice(&bytes[skip..]);
}

fn get_u256(bytes: &[u8], at: &mut usize) -> Result<U256, CodecError> {
    let bad = |reason| CodecError::new("address totals", reason, bytes.len());
    let len = usize::from(*bytes.get(*at).ok_or_else(|| bad("a sum runs past the end"))?);
    if len == 0 || len > 32 {
        return Err(bad("a sum of 0 or more than 32 bytes"));
    }
    let start = *at + 1;
    let field = bytes.get(start..start + len).ok_or_else(|| bad("a sum runs past the end"))?;
    if field[0] == 0 {
        return Err(bad("a sum with a leading zero byte"));
    }
    *at = start + len;
    Ok(U256::from_be_slice(field))
}

impl AddressTotals {
    /// Whether every field is zero (such a row is not stored).
    pub fn is_zero(&self) -> bool {
        *self == Self::default()
    }

    /// `self + other`, field by field; `None` past 2^256 (no real chain gets there).
    pub fn checked_add(&self, other: &Self) -> Option<Self> {
        Some(Self {
            received: self.received.checked_add(other.received)?,
            sent: self.sent.checked_add(other.sent)?,
            fees: self.fees.checked_add(other.fees)?,
            withdrawn: self.withdrawn.checked_add(other.withdrawn)?,
            top_level_in: self.top_level_in.checked_add(other.top_level_in)?,
        })
    }

    /// `self - other`, field by field; `None` below zero (an undo record that was never added).
    pub fn checked_sub(&self, other: &Self) -> Option<Self> {
        Some(Self {
            received: self.received.checked_sub(other.received)?,
            sent: self.sent.checked_sub(other.sent)?,
            fees: self.fees.checked_sub(other.fees)?,
            withdrawn: self.withdrawn.checked_sub(other.withdrawn)?,
            top_level_in: self.top_level_in.checked_sub(other.top_level_in)?,
        })
    }

    fn encode_into(&self, out: &mut Vec<u8>) {
        let sums =
            [(RECEIVED, self.received), (SENT, self.sent), (FEES, self.fees), (WITHDRAWN, self.withdrawn)];
        let mut mask = 0;
        for (bit, v) in sums {
            if !v.is_zero() {
                mask |= bit;
            }
        }
        if self.top_level_in != 0 {
            mask |= TOP_LEVEL_IN;
        }
        out.push(mask);
        for (_, v) in sums.into_iter().filter(|(_, v)| !v.is_zero()) {
            put_u256(out, v);
        }
        if self.top_level_in != 0 {
            put_varint(out, self.top_level_in);
        }
    }

    fn decode_from(bytes: &[u8], at: &mut usize) -> Result<Self, CodecError> {
        let bad = |reason| CodecError::new("address totals", reason, bytes.len());
        let mask = *bytes.get(*at).ok_or_else(|| bad("empty"))?;
        *at += 1;
        if mask & !(RECEIVED | SENT | FEES | WITHDRAWN | TOP_LEVEL_IN) != 0 {
            return Err(bad("unknown fields"));
        }
        let mut sum = |bit| if mask & bit != 0 { get_u256(bytes, at) } else { Ok(U256::ZERO) };
        let received = sum(RECEIVED)?;
        let sent = sum(SENT)?;
        let fees = sum(FEES)?;
        let withdrawn = sum(WITHDRAWN)?;
        let top_level_in = if mask & TOP_LEVEL_IN != 0 { get_varint(bytes, at)? } else { 0 };
        if mask & TOP_LEVEL_IN != 0 && top_level_in == 0 {
            return Err(bad("a zero count marked present"));
        }
        Ok(Self { received, sent, fees, withdrawn, top_level_in })
    }
}

/// A presence mask (1: received, 2: sent, 4: fees, 8: withdrawn, 16: top-level count), then each
/// present sum as a length byte and its big-endian bytes without leading zeros, then the count
/// as a LEB128 varint.
impl ValueCodec for AddressTotals {
    fn encode_value(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(24);
        self.encode_into(&mut out);
        out
    }
    fn decode_value(bytes: &[u8]) -> Result<Self, CodecError> {
        let mut at = 0;
        let totals = Self::decode_from(bytes, &mut at)?;
        if at != bytes.len() {
            return Err(CodecError::new("address totals", "bytes after the last field", bytes.len()));
        }
        Ok(totals)
    }
}

/// What one block added to one address's totals: undone by subtracting it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TotalsDelta {
    /// The address.
    pub address: Address,
    /// What the block added.
    pub added: AddressTotals,
}

/// `address (20) ‖ AddressTotals`: dups of a block sort by address.
impl ValueCodec for TotalsDelta {
    fn encode_value(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(44);
        out.extend_from_slice(self.address.as_slice());
        self.added.encode_into(&mut out);
        out
    }
    fn decode_value(bytes: &[u8]) -> Result<Self, CodecError> {
        let head = bytes
            .get(..20)
            .ok_or_else(|| CodecError::new("totals delta", "shorter than an address", bytes.len()))?;
        let mut at = 20;
        let added = AddressTotals::decode_from(bytes, &mut at)?;
        if at != bytes.len() {
            return Err(CodecError::new("totals delta", "bytes after the last field", bytes.len()));
        }
        Ok(Self { address: address(head, "address")?, added })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_round_trip_with_pinned_bytes() {
        let t = AddressTotals {
            received: U256::from(0x0102),
            sent: U256::ZERO,
            fees: U256::from(5),
            withdrawn: U256::ZERO,
            top_level_in: 300,
        };
        let bytes = t.encode_value();
        assert_eq!(bytes, vec![RECEIVED | FEES | TOP_LEVEL_IN, 2, 0x01, 0x02, 1, 5, 0xac, 0x02]);
        assert_eq!(AddressTotals::decode_value(&bytes), Ok(t));
        assert_eq!(AddressTotals::default().encode_value(), vec![0]);
        let max = AddressTotals { sent: U256::MAX, ..Default::default() };
        assert_eq!(AddressTotals::decode_value(&max.encode_value()), Ok(max));
        let d = TotalsDelta { address: Address::repeat_byte(0xaa), added: t };
        let bytes = d.encode_value();
        assert_eq!(&bytes[..20], &[0xaa; 20]);
        assert_eq!(&bytes[20..], &t.encode_value()[..]);
        assert_eq!(TotalsDelta::decode_value(&bytes), Ok(d));
    }

    #[test]
    fn malformed_totals_are_errors() {
        for bad in [
            &[][..],
            &[0x20],
            &[RECEIVED],
            &[RECEIVED, 0],
            &[RECEIVED, 33],
            &[RECEIVED, 1, 0],
            &[0, 0],
            &[TOP_LEVEL_IN, 0],
        ] {
            assert!(AddressTotals::decode_value(bad).is_err(), "{bad:?}");
        }
        assert!(TotalsDelta::decode_value(&[0; 10]).is_err());
    }

    #[test]
    fn sums_add_and_subtract() {
        let a = AddressTotals { received: U256::from(3), top_level_in: 2, ..Default::default() };
        let b = AddressTotals { received: U256::from(1), fees: U256::from(4), ..Default::default() };
        let c = a.checked_add(&b).expect("sum");
        assert_eq!(c.checked_sub(&b), Some(a));
        assert_eq!(b.checked_sub(&a), None);
        assert!(c.checked_sub(&c).expect("zero").is_zero());
    }
}
