//! What classifiers tell the indexer.

use alloy_primitives::Address;

/// A token or contract standard with a match table of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Standard {
    /// ERC20 token.
    Erc20,
    /// ERC165 interface detection.
    Erc165,
    /// ERC721 non-fungible token.
    Erc721,
    /// ERC1155 multi-token.
    Erc1155,
    /// EIP-1167 minimal proxy.
    Erc1167,
    /// ERC4626 vault.
    Erc4626,
}

/// One finding about a block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fact {
    /// `address`, deployed in the classified block, implements `standard`.
    Matched {
        /// The standard.
        standard: Standard,
        /// The contract.
        address: Address,
    },
}
