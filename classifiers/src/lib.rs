//! Classifiers of ots-indexer: they look at one block and tell what its contracts are.
//!
//! A [`Classifier`] sees a block's data ([`BlockData`]) and the contracts it is to judge, may ask
//! the node about state at that block through a read-only [`ChainView`] (`eth_call`,
//! `eth_getCode`), and returns [`Fact`]s. It knows nothing of storage: the indexer turns facts
//! into table rows. Built-ins live here; a user adds one by implementing the same trait.

// Every dependency is used by the library itself (tests and examples have their own).
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

mod abi;
mod block;
mod chain_view;
mod classifier;
mod erc1155;
mod erc1167;
mod erc165;
mod erc20;
mod erc4626;
mod erc721;
mod facts;
mod per_contract;
mod probe;
mod registry;
mod run;
mod token_metadata;

pub use abi::{
    decode_address, decode_bool, decode_bytes32_text, decode_string, decode_text, decode_uint256,
    decode_uint256_array, decode_uint8, selector,
};
pub use block::{BlockData, CallFrame, FrameKind, LogData, ReceiptData, TxData, Withdrawal};
pub use chain_view::{BoxFuture, CallOutcome, ChainError, ChainView};
pub use classifier::{check_dependencies, Candidates, Classifier, ClassifyInput, DependencyError};
pub use erc1155::{Erc1155Classifier, ERC1155_ID};
pub use erc1167::{minimal_proxy_code, minimal_proxy_target, Erc1167Classifier};
pub use erc165::{Erc165Classifier, ERC165_ID};
pub use erc20::{Erc20Classifier, Erc20Metadata};
pub use erc4626::Erc4626Classifier;
pub use erc721::{Erc721Classifier, ERC721_ID, ERC721_METADATA_ID};
pub use facts::{Fact, Flag, Metadata, Standard};
pub use per_contract::ContractClassifier;
pub use registry::{MakeClassifier, Registry, RegistryError};
pub use run::classify_block;
pub use token_metadata::read_token_metadata;

/// topic0 of `Transfer(address,address,uint256)`, shared by ERC20 and ERC721.
pub const TRANSFER_TOPIC: alloy_primitives::B256 =
    alloy_primitives::b256!("ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef");

/// The built-in classifier called `name`.
pub fn builtin(name: &str) -> Option<Box<dyn Classifier>> {
    Registry::builtin().make(name)
}

/// Names of the built-in classifiers, in an order that satisfies their dependencies.
pub const BUILTIN_NAMES: &[&str] = &[
    Erc20Classifier::NAME,
    Erc165Classifier::NAME,
    Erc721Classifier::NAME,
    Erc1155Classifier::NAME,
    Erc1167Classifier::NAME,
    Erc4626Classifier::NAME,
];

/// The built-in classifier that produces `standard`'s matches.
pub const fn provider_of(standard: Standard) -> &'static str {
    match standard {
        Standard::Erc20 => Erc20Classifier::NAME,
        Standard::Erc165 => Erc165Classifier::NAME,
        Standard::Erc721 => Erc721Classifier::NAME,
        Standard::Erc1155 => Erc1155Classifier::NAME,
        Standard::Erc1167 => Erc1167Classifier::NAME,
        Standard::Erc4626 => Erc4626Classifier::NAME,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_are_in_dependency_order() {
        let all: Vec<Box<dyn Classifier>> = BUILTIN_NAMES.iter().filter_map(|n| builtin(n)).collect();
        assert_eq!(all.len(), BUILTIN_NAMES.len());
        assert_eq!(check_dependencies(&all), Ok(()));
        let reversed: Vec<Box<dyn Classifier>> = all.into_iter().rev().collect();
        let err = check_dependencies(&reversed).expect_err("erc4626 before erc20");
        assert_eq!((err.classifier, err.provider), ("erc4626", "erc20"));
    }

    #[test]
    fn transfer_topic_is_the_event_hash() {
        assert_eq!(alloy_primitives::keccak256("Transfer(address,address,uint256)"), TRANSFER_TOPIC);
    }
}
