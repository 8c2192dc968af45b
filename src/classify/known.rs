//! What the index already knows of the batch's Transfer emitters, read once per batch: whether
//! each is a token, was re-probed before, has a name. Read from a snapshot on the incremental
//! path, from the stage's own transaction on the bulk path (whose blocks are not committed yet;
//! the stage's writer keeps the answers across its batches), so that both paths ask the node the
//! same questions and store the same answers.

use std::collections::HashMap;

use alloy_primitives::Address;
use signet_libmdbx::tx::TransactionKind;

use super::late_metadata::{is_named, Stored};
use crate::{
    db::{codec::AttributeBit, tables::OtsTransferProbes, DbError, Txn},
    index::{attributes::attributes, contract_info::contract_info, ClassifiedBlock},
};

/// What the index holds of one address.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Known {
    /// An ERC20 or ERC721 token.
    pub token: bool,
    /// Re-probed before, and no token then.
    pub probed: bool,
    /// A token with a stored name and symbol.
    pub named: bool,
}

impl Known {
    /// Whether a Transfer emitter needs no re-probe.
    pub const fn settled_as_emitter(self) -> bool {
        self.token || self.probed
    }

    /// What late metadata reading needs to know.
    pub const fn stored(self) -> Stored {
        Stored { token: self.token, named: self.named }
    }
}

/// Each block's Transfer emitters, in order of first appearance: found once per batch, since
/// the lookup of what is known, the re-probes and the late metadata all walk them.
pub fn emitters_per_block(blocks: &[ClassifiedBlock]) -> Vec<Vec<Address>> {
    blocks.iter().map(|b| b.block.transfer_log_emitters()).collect()
}

/// Every emitter of `per_block`, once.
pub fn distinct(per_block: &[Vec<Address>]) -> Vec<Address> {
    let mut seen = foldhash::HashSet::default();
    per_block.iter().flatten().filter(|a| seen.insert(**a)).copied().collect()
}

/// What `txn` holds of each of `addresses`.
pub fn known<K: TransactionKind>(
    txn: &Txn<K>,
    addresses: &[Address],
) -> Result<HashMap<Address, Known>, DbError> {
    let mut out = HashMap::with_capacity(addresses.len());
    for address in addresses {
        let attrs = attributes(txn, address)?;
        let token = attrs.has(AttributeBit::Erc20) || attrs.has(AttributeBit::Erc721);
        let probed = txn.get::<OtsTransferProbes>(address)?.is_some();
        let named = token
            && contract_info(txn, address)?.is_some_and(|i| is_named(i.name.as_deref(), i.symbol.as_deref()));
        out.insert(*address, Known { token, probed, named });
    }
    Ok(out)
}
