//! The little ABI decoding probes need, written out so that its strictness is ours to state
//! (docs/classifiers.md): a return value must be a well-formed encoding of the expected type.

use alloy_primitives::{keccak256, U256};

/// The 4-byte selector of a function signature such as `"decimals()"`.
pub fn selector(signature: &str) -> [u8; 4] {
    let hash = keccak256(signature.as_bytes());
    [hash[0], hash[1], hash[2], hash[3]]
}

fn word(data: &[u8], at: usize) -> Option<U256> {
    let end = at.checked_add(32)?;
    data.get(at..end).map(U256::from_be_slice)
}

/// A `uint8` return value: at least one word, whose value is at most 255.
pub fn decode_uint8(data: &[u8]) -> Option<u8> {
    let value = word(data, 0)?;
    u8::try_from(value).ok()
}

/// A dynamic `string` return value: an offset word pointing at a length word followed by that
/// many bytes, all inside the returned data. Invalid UTF-8 is replaced, not rejected (Solidity
/// does not check it either).
pub fn decode_string(data: &[u8]) -> Option<String> {
    let offset = usize::try_from(word(data, 0)?).ok()?;
    let len = usize::try_from(word(data, offset)?).ok()?;
    let start = offset.checked_add(32)?;
    let bytes = data.get(start..start.checked_add(len)?)?;
    Some(String::from_utf8_lossy(bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode_string(s: &str) -> Vec<u8> {
        let mut out = vec![0u8; 64];
        out[31] = 0x20;
        out[63] = s.len() as u8;
        let mut body = s.as_bytes().to_vec();
        body.resize(s.len().div_ceil(32) * 32, 0);
        out.extend(body);
        out
    }

    #[test]
    fn selectors_match_the_spec() {
        assert_eq!(selector("decimals()"), [0x31, 0x3c, 0xe5, 0x67]);
        assert_eq!(selector("name()"), [0x06, 0xfd, 0xde, 0x03]);
        assert_eq!(selector("symbol()"), [0x95, 0xd8, 0x9b, 0x41]);
        assert_eq!(selector("junkjunkjunk()"), [0x12, 0x00, 0xe2, 0x6a]);
    }

    #[test]
    fn uint8_must_fit() {
        let mut w = [0u8; 32];
        w[31] = 18;
        assert_eq!(decode_uint8(&w), Some(18));
        w[30] = 1;
        assert_eq!(decode_uint8(&w), None);
        assert_eq!(decode_uint8(&[0u8; 31]), None);
        assert_eq!(decode_uint8(&[]), None);
    }

    #[test]
    fn strings_round_trip_and_bounds_are_checked() {
        assert_eq!(decode_string(&encode_string("Demo Token")).as_deref(), Some("Demo Token"));
        assert_eq!(decode_string(&encode_string("")).as_deref(), Some(""));
        let mut truncated = encode_string("Demo Token");
        truncated.truncate(70);
        assert_eq!(decode_string(&truncated), None);
        // A bytes32 symbol (MKR style) is not an ABI string.
        let mut bytes32 = [0u8; 32];
        bytes32[..3].copy_from_slice(b"MKR");
        assert_eq!(decode_string(&bytes32), None);
        // An offset pointing past the end.
        let mut far = encode_string("x");
        far[31] = 0xff;
        assert_eq!(decode_string(&far), None);
    }
}
