//! The ERC165 classifier (spec §3.3).

use crate::{
    probe::{judge_all, supports_interface},
    BoxFuture, ChainError, ChainView, Classifier, ClassifyInput, Fact, Standard,
};

/// The ERC165 interface id itself.
pub const ERC165_ID: [u8; 4] = [0x01, 0xff, 0xc9, 0xa7];
/// The id EIP-165 reserves as "never supported".
pub const INVALID_ID: [u8; 4] = [0xff; 4];

/// Classifies a new contract as ERC165 when `supportsInterface(0x01ffc9a7)` returns true and
/// `supportsInterface(0xffffffff)` returns false, both as well-formed bools.
#[derive(Debug, Clone, Copy, Default)]
pub struct Erc165Classifier;

impl Erc165Classifier {
    /// Name on the command line and in the database state.
    pub const NAME: &'static str = "erc165";
}

impl Classifier for Erc165Classifier {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn produces(&self) -> &'static [Standard] {
        &[Standard::Erc165]
    }

    fn classify<'a>(
        &'a self,
        input: ClassifyInput<'a>,
        chain: &'a dyn ChainView,
    ) -> BoxFuture<'a, Result<Vec<Fact>, ChainError>> {
        Box::pin(async move {
            let block = input.block.number;
            judge_all(input.contracts, |address| async move {
                let (yes, no) =
                    futures::try_join!(supports_interface(chain, address, ERC165_ID, block), async {
                        // `false` must be an answer, not a revert: call it directly.
                        let mut word = [0u8; 32];
                        word[..4].copy_from_slice(&INVALID_ID);
                        let answer =
                            crate::probe::call1(chain, address, "supportsInterface(bytes4)", word, block)
                                .await?;
                        Ok(answer.and_then(|b| crate::abi::decode_bool(&b)) == Some(false))
                    })?;
                Ok(if yes && no {
                    vec![Fact::Matched { standard: Standard::Erc165, address }]
                } else {
                    vec![]
                })
            })
            .await
        })
    }
}
