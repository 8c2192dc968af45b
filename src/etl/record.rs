//! How a row is written into a run file: a fixed layout per type, decoded back exactly.

use alloy_primitives::{Address, U256};

use crate::txid::TxId;

/// A run file's bytes end inside a row, or a field has an impossible value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RecordError(pub &'static str);

/// A row a [`super::Sorter`] can spill: ordered (runs are sorted by `Ord`) and encodable.
/// Encoding need not preserve order: runs are compared decoded.
pub trait Record: Ord + Sized + Send + 'static {
    /// Appends the row's bytes to `out`.
    fn encode(&self, out: &mut Vec<u8>);
    /// Reads one row from the front of `input`, advancing it.
    fn decode(input: &mut &[u8]) -> Result<Self, RecordError>;
}

fn take<'a>(input: &mut &'a [u8], n: usize) -> Result<&'a [u8], RecordError> {
    if input.len() < n {
        return Err(RecordError("the row ends early"));
    }
    let (head, tail) = input.split_at(n);
    *input = tail;
    Ok(head)
}

impl Record for u8 {
    fn encode(&self, out: &mut Vec<u8>) {
        out.push(*self);
    }
    fn decode(input: &mut &[u8]) -> Result<Self, RecordError> {
        Ok(take(input, 1)?[0])
    }
}

impl Record for u64 {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_be_bytes());
    }
    fn decode(input: &mut &[u8]) -> Result<Self, RecordError> {
        let mut bytes = [0; 8];
        bytes.copy_from_slice(take(input, 8)?);
        Ok(Self::from_be_bytes(bytes))
    }
}

impl Record for TxId {
    fn encode(&self, out: &mut Vec<u8>) {
        self.0.encode(out);
    }
    fn decode(input: &mut &[u8]) -> Result<Self, RecordError> {
        u64::decode(input).map(Self)
    }
}

impl Record for Address {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.as_slice());
    }
    fn decode(input: &mut &[u8]) -> Result<Self, RecordError> {
        Ok(Self::from_slice(take(input, 20)?))
    }
}

/// A length byte, then the value's big-endian bytes without leading zeros: token amounts and
/// ids are mostly small.
impl Record for U256 {
    fn encode(&self, out: &mut Vec<u8>) {
        let bytes = self.to_be_bytes::<32>();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        out.push((32 - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    fn decode(input: &mut &[u8]) -> Result<Self, RecordError> {
        let len = usize::from(u8::decode(input)?);
        if len > 32 {
            return Err(RecordError("a 256-bit value longer than 32 bytes"));
        }
        Ok(Self::from_be_slice(take(input, len)?))
    }
}

macro_rules! tuple_record {
    ($($name:ident),+) => {
        impl<$($name: Record),+> Record for ($($name,)+) {
            #[allow(non_snake_case)]
            fn encode(&self, out: &mut Vec<u8>) {
                let ($($name,)+) = self;
                $($name.encode(out);)+
            }
            fn decode(input: &mut &[u8]) -> Result<Self, RecordError> {
                Ok(($($name::decode(input)?,)+))
            }
        }
    };
}

tuple_record!(A, B);
tuple_record!(A, B, C);
tuple_record!(A, B, C, D);

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip<R: Record + std::fmt::Debug>(row: &R) -> Vec<u8> {
        let mut bytes = Vec::new();
        row.encode(&mut bytes);
        let mut input = bytes.as_slice();
        assert_eq!(&R::decode(&mut input).expect("decodes"), row);
        assert!(input.is_empty(), "{row:?} left bytes behind");
        bytes
    }

    #[test]
    fn rows_round_trip_with_pinned_bytes() {
        let a = Address::repeat_byte(0xab);
        let bytes = round_trip(&(a, 0x0102_u64));
        assert_eq!(&bytes[..20], a.as_slice());
        assert_eq!(&bytes[20..], &[0, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!(round_trip(&U256::ZERO), vec![0]);
        assert_eq!(round_trip(&U256::from(0x1234)), vec![2, 0x12, 0x34]);
        assert_eq!(round_trip(&U256::MAX).len(), 33);
        round_trip(&(a, Address::ZERO, TxId(7), 3_u8));
    }

    #[test]
    fn truncated_or_bad_rows_are_errors() {
        let mut bytes = Vec::new();
        (Address::ZERO, 5_u64).encode(&mut bytes);
        let mut short = &bytes[..bytes.len() - 1];
        assert!(<(Address, u64)>::decode(&mut short).is_err());
        let mut long_value: &[u8] = &[33, 0];
        assert!(U256::decode(&mut long_value).is_err());
    }
}
