//! The token transfers a pending transaction's calldata asks for: `transfer`, `transferFrom`
//! and the `safeTransferFrom`s of ERC20, ERC721 and ERC1155, decoded only when the called
//! contract is one the index classified (the same selector means something else elsewhere).
//! Nothing has run yet, so these are what the sender asked for, not what will happen.

use alloy_primitives::{Address, U256};
use serde::Serialize;

use crate::decode::{TokenKind, TokenKinds};

/// `transfer(address,uint256)`.
const TRANSFER: [u8; 4] = [0xa9, 0x05, 0x9c, 0xbb];
/// `transferFrom(address,address,uint256)`.
const TRANSFER_FROM: [u8; 4] = [0x23, 0xb8, 0x72, 0xdd];
/// `safeTransferFrom(address,address,uint256)` (ERC721).
const SAFE_TRANSFER_FROM: [u8; 4] = [0x42, 0x84, 0x2e, 0x0e];
/// `safeTransferFrom(address,address,uint256,bytes)` (ERC721).
const SAFE_TRANSFER_FROM_DATA: [u8; 4] = [0xb8, 0x8d, 0x4f, 0xde];
/// `safeTransferFrom(address,address,uint256,uint256,bytes)` (ERC1155).
const SAFE_TRANSFER_FROM_1155: [u8; 4] = [0xf2, 0x42, 0x43, 0x2a];
/// `safeBatchTransferFrom(address,address,uint256[],uint256[],bytes)` (ERC1155).
const SAFE_BATCH_TRANSFER_FROM: [u8; 4] = [0x2e, 0xb2, 0xc2, 0xd6];

/// Most ids one decoded ERC1155 batch contributes (a pending transaction is a hint, not a
/// ledger; a huge batch must not blow up the pool's memory).
pub const MAX_BATCH_IDS: usize = 64;

/// Which standard a decoded transfer is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum TransferStandard {
    /// A fungible token.
    #[serde(rename = "ERC20")]
    Erc20,
    /// A non-fungible token.
    #[serde(rename = "ERC721")]
    Erc721,
    /// A multi-token.
    #[serde(rename = "ERC1155")]
    Erc1155,
}

/// One token movement a pending transaction asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingTransfer {
    /// The token contract (the transaction's recipient).
    pub token: Address,
    /// Its standard, as the index classified it.
    pub standard: TransferStandard,
    /// Whose tokens move.
    pub from: Address,
    /// Who receives them.
    pub to: Address,
    /// The token id (ERC721, ERC1155).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_id: Option<U256>,
    /// The amount (an ERC721 moves 1).
    pub value: U256,
}

/// Calldata read as 32-byte words after the selector.
struct Words<'a>(&'a [u8]);

impl Words<'_> {
    fn word(&self, i: usize) -> Option<&[u8]> {
        self.0.get(4 + 32 * i..4 + 32 * (i + 1))
    }

    fn address(&self, i: usize) -> Option<Address> {
        let w = self.word(i)?;
        w[..12].iter().all(|b| *b == 0).then(|| Address::from_slice(&w[12..]))
    }

    fn uint(&self, i: usize) -> Option<U256> {
        self.word(i).map(U256::from_be_slice)
    }

    /// The `uint256[]` whose offset is argument `i`.
    fn uint_array(&self, i: usize) -> Option<Vec<U256>> {
        let offset = usize::try_from(self.uint(i)?).ok()?;
        if offset % 32 != 0 {
            return None;
        }
        let start = offset / 32;
        let len = usize::try_from(self.uint(start)?).ok()?;
        if len > (self.0.len().saturating_sub(4)) / 32 {
            return None;
        }
        (0..len).map(|k| self.uint(start + 1 + k)).collect()
    }
}

/// The transfers `input`, sent by `sender` to the contract `token` of kinds `kinds`, asks for;
/// empty when the selector is none of the six or the arguments do not decode.
pub fn decode(sender: Address, token: Address, kinds: TokenKinds, input: &[u8]) -> Vec<PendingTransfer> {
    let Some(selector) = input.get(..4) else { return Vec::new() };
    let args = Words(input);
    let one =
        |standard, from, to, token_id, value| PendingTransfer { token, standard, from, to, token_id, value };
    let fungible = kinds.transfer == Some(TokenKind::Erc20);
    let nft = kinds.transfer == Some(TokenKind::Erc721);
    let decoded = match <[u8; 4]>::try_from(selector).unwrap_or_default() {
        TRANSFER if fungible => args
            .address(0)
            .zip(args.uint(1))
            .map(|(to, value)| vec![one(TransferStandard::Erc20, sender, to, None, value)]),
        TRANSFER_FROM if fungible => (|| {
            Some(vec![one(TransferStandard::Erc20, args.address(0)?, args.address(1)?, None, args.uint(2)?)])
        })(),
        TRANSFER_FROM | SAFE_TRANSFER_FROM | SAFE_TRANSFER_FROM_DATA if nft => (|| {
            let id = args.uint(2)?;
            Some(vec![one(
                TransferStandard::Erc721,
                args.address(0)?,
                args.address(1)?,
                Some(id),
                U256::from(1),
            )])
        })(),
        SAFE_TRANSFER_FROM_1155 if kinds.multi => (|| {
            let (from, to) = (args.address(0)?, args.address(1)?);
            Some(vec![one(TransferStandard::Erc1155, from, to, Some(args.uint(2)?), args.uint(3)?)])
        })(),
        SAFE_BATCH_TRANSFER_FROM if kinds.multi => (|| {
            let (from, to) = (args.address(0)?, args.address(1)?);
            let (ids, values) = (args.uint_array(2)?, args.uint_array(3)?);
            (ids.len() == values.len()).then(|| {
                ids.into_iter()
                    .zip(values)
                    .take(MAX_BATCH_IDS)
                    .map(|(id, value)| one(TransferStandard::Erc1155, from, to, Some(id), value))
                    .collect()
            })
        })(),
        _ => None,
    };
    decoded.unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use alloy_primitives::address;

    use super::*;

    const A: Address = address!("00000000000000000000000000000000000000aa");
    const B: Address = address!("00000000000000000000000000000000000000bb");
    const T: Address = address!("00000000000000000000000000000000000000cc");

    fn call(selector: [u8; 4], words: &[U256]) -> Vec<u8> {
        let mut out = selector.to_vec();
        for w in words {
            out.extend_from_slice(&w.to_be_bytes::<32>());
        }
        out
    }

    fn addr(a: Address) -> U256 {
        U256::from_be_slice(a.as_slice())
    }

    const ERC20: TokenKinds = TokenKinds { transfer: Some(TokenKind::Erc20), multi: false };
    const ERC721: TokenKinds = TokenKinds { transfer: Some(TokenKind::Erc721), multi: false };
    const ERC1155: TokenKinds = TokenKinds { transfer: None, multi: true };

    #[test]
    fn fungible_transfers() {
        let t = decode(A, T, ERC20, &call(TRANSFER, &[addr(B), U256::from(5)]));
        assert_eq!(
            t,
            vec![PendingTransfer {
                token: T,
                standard: TransferStandard::Erc20,
                from: A,
                to: B,
                token_id: None,
                value: U256::from(5)
            }]
        );
        let t = decode(A, T, ERC20, &call(TRANSFER_FROM, &[addr(B), addr(A), U256::from(7)]));
        assert_eq!((t[0].from, t[0].to, t[0].value), (B, A, U256::from(7)));
    }

    #[test]
    fn nft_and_multi_token_transfers() {
        let t = decode(A, T, ERC721, &call(SAFE_TRANSFER_FROM, &[addr(A), addr(B), U256::from(9)]));
        assert_eq!(
            (t[0].standard, t[0].token_id, t[0].value),
            (TransferStandard::Erc721, Some(U256::from(9)), U256::from(1))
        );
        let t = decode(
            A,
            T,
            ERC1155,
            &call(
                SAFE_TRANSFER_FROM_1155,
                &[addr(A), addr(B), U256::from(3), U256::from(40), U256::from(0xa0)],
            ),
        );
        assert_eq!((t[0].token_id, t[0].value), (Some(U256::from(3)), U256::from(40)));
        // Batch: offsets 0xa0 and 0x100 to two arrays of two, then empty bytes.
        let words = [
            addr(A),
            addr(B),
            U256::from(0xa0),
            U256::from(0x100),
            U256::from(0x160),
            U256::from(2),
            U256::from(1),
            U256::from(2),
            U256::from(2),
            U256::from(10),
            U256::from(20),
            U256::ZERO,
        ];
        let t = decode(A, T, ERC1155, &call(SAFE_BATCH_TRANSFER_FROM, &words));
        let got: Vec<_> = t.iter().map(|x| (x.token_id, x.value)).collect();
        assert_eq!(got, vec![(Some(U256::from(1)), U256::from(10)), (Some(U256::from(2)), U256::from(20))]);
    }

    #[test]
    fn unclassified_or_malformed_calls_give_nothing() {
        let data = call(TRANSFER, &[addr(B), U256::from(5)]);
        assert!(decode(A, T, TokenKinds::default(), &data).is_empty());
        assert!(decode(A, T, ERC20, &data[..20]).is_empty());
        let dirty = call(TRANSFER, &[U256::MAX, U256::from(5)]);
        assert!(decode(A, T, ERC20, &dirty).is_empty());
        assert!(decode(A, T, ERC20, &[]).is_empty());
        // A huge array length is refused, not allocated.
        let words = [addr(A), addr(B), U256::from(0xa0), U256::from(0xa0), U256::ZERO, U256::MAX];
        assert!(decode(A, T, ERC1155, &call(SAFE_BATCH_TRANSFER_FROM, &words)).is_empty());
    }
}
