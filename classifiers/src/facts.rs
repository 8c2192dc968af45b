//! What classifiers tell the indexer.

use alloy_primitives::Address;
use serde::{Deserialize, Serialize};

/// A token or contract standard with a match table of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
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

/// An attribute that is not a standard of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Flag {
    /// The ERC721 metadata extension (`name`, `symbol`, `tokenURI`).
    Erc721Metadata,
}

/// What is known about a contract besides its standards; every field is optional, and facts
/// about one contract in one block are merged field by field.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metadata {
    /// `name()` at classification.
    pub name: Option<String>,
    /// `symbol()` at classification.
    pub symbol: Option<String>,
    /// `decimals()` at classification.
    pub decimals: Option<u8>,
    /// An ERC4626 vault's `asset()`.
    pub asset: Option<Address>,
    /// An EIP-1167 proxy's implementation.
    pub implementation: Option<Address>,
}

impl Metadata {
    /// Fills the fields `other` has, keeping the rest.
    pub fn merge(&mut self, other: Self) {
        let Self { name, symbol, decimals, asset, implementation } = other;
        self.name = name.or(self.name.take());
        self.symbol = symbol.or(self.symbol.take());
        self.decimals = decimals.or(self.decimals);
        self.asset = asset.or(self.asset);
        self.implementation = implementation.or(self.implementation);
    }
}

/// One finding about a block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Fact {
    /// `address` implements `standard`, as judged at the classified block.
    Matched {
        /// The standard.
        standard: Standard,
        /// The contract.
        address: Address,
    },
    /// `address` has `flag`.
    Flagged {
        /// The attribute.
        flag: Flag,
        /// The contract.
        address: Address,
    },
    /// `address` carries `label` from the classified block on: a classifier's own category
    /// (a user classifier's "uniswap-v2-pair"), 1 to 64 bytes of UTF-8.
    Labeled {
        /// The label.
        label: String,
        /// The address.
        address: Address,
    },
    /// Metadata about `address`, read at the classified block.
    Described {
        /// The contract.
        address: Address,
        /// What was read.
        metadata: Metadata,
    },
}
