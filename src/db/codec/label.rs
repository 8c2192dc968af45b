//! Dup value codec of `OtsLabels`: a label a (user) classifier gave an address.

use super::{be_u64, CodecError, ValueCodec};

/// Longest label, in bytes.
pub const MAX_LABEL_BYTES: usize = 64;

/// `label` given in `block`.
///
/// Bytes: block (8) ‖ label UTF-8 (1 to 64 bytes). Dups sort by block, then label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    /// The block whose classification gave the label.
    pub block: u64,
    /// The label.
    pub label: String,
}

impl ValueCodec for Label {
    fn encode_value(&self) -> Vec<u8> {
        let mut out = self.block.to_be_bytes().to_vec();
        out.extend_from_slice(self.label.as_bytes());
        out
    }

    fn decode_value(bytes: &[u8]) -> Result<Self, CodecError> {
        if bytes.len() < 9 || bytes.len() > 8 + MAX_LABEL_BYTES {
            return Err(CodecError::new("label", "expected 8 + 1..=64 bytes", bytes.len()));
        }
        let label = std::str::from_utf8(&bytes[8..])
            .map_err(|_| CodecError::new("label", "not UTF-8", bytes.len()))?
            .to_owned();
        Ok(Self { block: be_u64(&bytes[..8], "label")?, label })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_pins_bytes() {
        let label = Label { block: 5, label: "uniswap-v2-pair".into() };
        let bytes = label.encode_value();
        let mut expected = vec![0, 0, 0, 0, 0, 0, 0, 5];
        expected.extend_from_slice(b"uniswap-v2-pair");
        assert_eq!(bytes, expected);
        assert_eq!(Label::decode_value(&bytes), Ok(label));
        assert!(Label::decode_value(&[0; 8]).is_err());
        assert!(Label::decode_value(&[0; 9 + MAX_LABEL_BYTES]).is_err());
        assert!(Label::decode_value(&[0, 0, 0, 0, 0, 0, 0, 0, 0xff]).is_err());
    }
}
