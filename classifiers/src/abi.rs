//! The little ABI decoding probes need, written out so that its strictness is ours to state
//! (docs/classifiers.md): a return value must be a well-formed encoding of the expected type.

use alloy_primitives::{keccak256, Address, U256};

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

/// A `bool` return value: a first word that is exactly 0 or 1.
pub fn decode_bool(data: &[u8]) -> Option<bool> {
    let value = word(data, 0)?;
    if value == U256::ZERO {
        Some(false)
    } else if value == U256::from(1) {
        Some(true)
    } else {
        None
    }
}

/// An `address` return value: a first word whose upper 12 bytes are zero.
pub fn decode_address(data: &[u8]) -> Option<Address> {
    let first = data.get(..32)?;
    first[..12].iter().all(|&b| b == 0).then(|| Address::from_slice(&first[12..]))
}

/// A `uint256` return value: at least one word.
pub fn decode_uint256(data: &[u8]) -> Option<U256> {
    word(data, 0)
}

/// A `uint256[]` among ABI-encoded values, whose offset is head word `slot` (an event's data
/// with dynamic arrays, such as ERC1155 `TransferBatch`): `None` if any part lies outside `data`.
pub fn decode_uint256_array(data: &[u8], slot: usize) -> Option<Vec<U256>> {
    let small = |v: U256| usize::try_from(v).ok();
    let offset = small(word(data, slot.checked_mul(32)?)?)?;
    let len = small(word(data, offset)?)?;
    if len > data.len() / 32 {
        return None;
    }
    (0..len).map(|i| word(data, offset.checked_add(32 + i * 32)?)).collect()
}

/// A `bytes32` used as text (the MKR style of `name()`/`symbol()`): exactly one word, read as
/// UTF-8 up to its first zero byte, with no byte after that other than zero and no control
/// characters.
pub fn decode_bytes32_text(data: &[u8]) -> Option<String> {
    if data.len() != 32 {
        return None;
    }
    let end = data.iter().position(|&b| b == 0).unwrap_or(32);
    if data[end..].iter().any(|&b| b != 0) {
        return None;
    }
    let text = std::str::from_utf8(&data[..end]).ok()?;
    (!text.chars().any(char::is_control)).then(|| text.to_owned())
}

/// A token's `name()` or `symbol()`: an ABI `string`, or else a `bytes32` text.
pub fn decode_text(data: &[u8]) -> Option<String> {
    decode_string(data).or_else(|| decode_bytes32_text(data))
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

    #[test]
    fn uint_arrays_and_their_bounds() {
        let w = |n: u64| U256::from(n).to_be_bytes::<32>().to_vec();
        // ([1, 2], [100, 200]) as a TransferBatch's data.
        let data = [w(0x40), w(0xa0), w(2), w(1), w(2), w(2), w(100), w(200)].concat();
        assert_eq!(decode_uint256_array(&data, 0), Some(vec![U256::from(1), U256::from(2)]));
        assert_eq!(decode_uint256_array(&data, 1), Some(vec![U256::from(100), U256::from(200)]));
        assert_eq!(decode_uint256_array(&data[..data.len() - 1], 1), None, "cut short");
        assert_eq!(decode_uint256_array(&[w(0x20), w(u64::MAX)].concat(), 0), None, "absurd length");
        assert_eq!(decode_uint256_array(&w(1 << 40), 0), None, "offset past the end");
        assert_eq!(decode_uint256_array(&[], 0), None);
    }

    #[test]
    fn bools_are_zero_or_one() {
        let mut w = [0u8; 32];
        assert_eq!(decode_bool(&w), Some(false));
        w[31] = 1;
        assert_eq!(decode_bool(&w), Some(true));
        w[31] = 2;
        assert_eq!(decode_bool(&w), None);
        assert_eq!(decode_bool(&w[..31]), None);
    }

    #[test]
    fn addresses_need_clean_upper_bytes() {
        let mut w = [0u8; 32];
        w[12..].copy_from_slice(&[0x11; 20]);
        assert_eq!(decode_address(&w), Some(Address::repeat_byte(0x11)));
        w[0] = 1;
        assert_eq!(decode_address(&w), None);
        assert_eq!(decode_address(&[]), None);
    }

    #[test]
    fn bytes32_text_is_mkr_style() {
        let mut w = [0u8; 32];
        w[..5].copy_from_slice(b"Maker");
        assert_eq!(decode_bytes32_text(&w).as_deref(), Some("Maker"));
        assert_eq!(decode_text(&w).as_deref(), Some("Maker"));
        assert_eq!(decode_text(&encode_string("Dai")).as_deref(), Some("Dai"));
        // Not one word, bytes after the terminator, control characters, bad UTF-8.
        assert_eq!(decode_bytes32_text(&[0u8; 64]), None);
        w[20] = b'x';
        assert_eq!(decode_bytes32_text(&w), None);
        let mut control = [0u8; 32];
        control[0] = 0x07;
        assert_eq!(decode_bytes32_text(&control), None);
        let mut invalid = [0u8; 32];
        invalid[0] = 0xff;
        assert_eq!(decode_bytes32_text(&invalid), None);
    }
}
