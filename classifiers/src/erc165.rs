//! The ERC165 classifier (docs/classifiers.md, "The built-ins").

use alloy_primitives::Address;

use crate::{
    abi::decode_bool,
    probe::{call1, supports_interface},
    ChainError, ChainView, ContractClassifier, Fact, Standard,
};

/// The ERC165 interface id itself.
pub const ERC165_ID: [u8; 4] = [0x01, 0xff, 0xc9, 0xa7];
/// The id EIP-165 reserves as "never supported".
pub(crate) const INVALID_ID: [u8; 4] = [0xff; 4];

/// Classifies a new contract as ERC165 when `supportsInterface(0x01ffc9a7)` returns true and
/// `supportsInterface(0xffffffff)` returns false, both as well-formed bools.
#[derive(Debug, Clone, Copy, Default)]
pub struct Erc165Classifier;

impl Erc165Classifier {
    /// Name on the command line and in the database state.
    pub const NAME: &'static str = "erc165";
}

impl ContractClassifier for Erc165Classifier {
    const NAME: &'static str = Self::NAME;
    const PRODUCES: &'static [Standard] = &[Standard::Erc165];

    async fn judge(
        &self,
        chain: &dyn ChainView,
        address: Address,
        block: u64,
    ) -> Result<Vec<Fact>, ChainError> {
        let mut invalid = [0u8; 32];
        invalid[..4].copy_from_slice(&INVALID_ID);
        // `false` must be an answer, not a revert, so the invalid id is called directly.
        let (yes, no) = futures::try_join!(
            supports_interface(chain, address, ERC165_ID, block),
            call1(chain, address, "supportsInterface(bytes4)", invalid, block),
        )?;
        let no = no.and_then(|b| decode_bool(&b)) == Some(false);
        Ok(if yes && no { vec![Fact::Matched { standard: Standard::Erc165, address }] } else { vec![] })
    }
}
