//! The EIP-1167 minimal proxy classifier (docs/classifiers.md, "The built-ins"): bytecode only, no calls.

use alloy_primitives::Address;

use crate::{ChainError, ChainView, ContractClassifier, Fact, Metadata, Standard};

const PREFIX: [u8; 10] = [0x36, 0x3d, 0x3d, 0x37, 0x3d, 0x3d, 0x3d, 0x36, 0x3d, 0x73];
const SUFFIX: [u8; 15] =
    [0x5a, 0xf4, 0x3d, 0x82, 0x80, 0x3e, 0x90, 0x3d, 0x91, 0x60, 0x2b, 0x57, 0xfd, 0x5b, 0xf3];

/// The implementation a minimal proxy delegates to, if `code` is exactly the 45-byte EIP-1167
/// runtime code (the push-optimised vanity variants are not recognised).
pub fn minimal_proxy_target(code: &[u8]) -> Option<Address> {
    (code.len() == 45 && code.starts_with(&PREFIX) && code.ends_with(&SUFFIX))
        .then(|| Address::from_slice(&code[10..30]))
}

/// The 45-byte EIP-1167 runtime code of a minimal proxy delegating to `target`.
pub fn minimal_proxy_code(target: Address) -> Vec<u8> {
    let mut code = Vec::with_capacity(45);
    code.extend_from_slice(&PREFIX);
    code.extend_from_slice(target.as_slice());
    code.extend_from_slice(&SUFFIX);
    code
}

/// Classifies new contracts whose runtime code is an EIP-1167 minimal proxy, recording the
/// implementation.
#[derive(Debug, Clone, Copy, Default)]
pub struct Erc1167Classifier;

impl Erc1167Classifier {
    /// Name on the command line and in the database state.
    pub const NAME: &'static str = "erc1167";
}

impl ContractClassifier for Erc1167Classifier {
    const NAME: &'static str = Self::NAME;
    const PRODUCES: &'static [Standard] = &[Standard::Erc1167];

    async fn judge(
        &self,
        chain: &dyn ChainView,
        address: Address,
        block: u64,
    ) -> Result<Vec<Fact>, ChainError> {
        let code = chain.code_at(address, block).await?;
        let Some(implementation) = minimal_proxy_target(&code) else { return Ok(vec![]) };
        let metadata = Metadata { implementation: Some(implementation), ..Metadata::default() };
        Ok(vec![
            Fact::Matched { standard: Standard::Erc1167, address },
            Fact::Described { address, metadata },
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_code_only() {
        let target = Address::repeat_byte(0x42);
        assert_eq!(minimal_proxy_target(&minimal_proxy_code(target)), Some(target));
        let mut longer = minimal_proxy_code(target);
        longer.push(0);
        assert_eq!(minimal_proxy_target(&longer), None);
        let mut other = minimal_proxy_code(target);
        other[0] = 0x00;
        assert_eq!(minimal_proxy_target(&other), None);
        // An EIP-7702 delegation designator is 23 bytes: never a minimal proxy.
        let mut delegation = vec![0xef, 0x01, 0x00];
        delegation.extend_from_slice(target.as_slice());
        assert_eq!(minimal_proxy_target(&delegation), None);
    }
}
