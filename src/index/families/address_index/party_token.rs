//! Whether a database keeps the party–token index (`OtsPartyTokenIndex`): the operator's choice
//! (`--party-token-index`), kept in the state's `party_token_from`. The index costs about a fifth
//! of the database for one query form — an Etherscan token list of one address and one token,
//! counted by the index instead of the node's logs at depth — so a new database goes without it.

use signet_libmdbx::tx::TransactionKind;
use tracing::info;

use super::IdList;
use crate::{
    db::{
        state::{self, PARTY_TOKEN_NOT_KEPT},
        tables::{
            OtsPartyTokenCounter, OtsPartyTokenCounterYoung, OtsPartyTokenIndex, OtsPartyTokenIndexYoung,
        },
        DbResult, Txn, WriteTxn,
    },
    index::{integrity::broken, recent},
    txid::TxId,
};

/// What applying the choice changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartyTokenChange {
    /// Nothing.
    Unchanged,
    /// The index is kept from this block on (the blocks indexed before it are not in it).
    StartedAt(u64),
    /// The index was dropped.
    Dropped,
}

/// Applies `keep` (`None`: as the database has it) to a database whose state `txn` reads; `new`
/// for one that was never written (it then keeps the index only when asked to).
pub fn choose(txn: &WriteTxn, new: bool, keep: Option<bool>) -> DbResult<PartyTokenChange> {
    let kept = state::party_token_kept(txn)?;
    let change = match (new, keep, kept) {
        (true, Some(true), _) => {
            state::set_party_token_from(txn, 0)?;
            PartyTokenChange::Unchanged
        }
        (true, _, _) => {
            state::set_party_token_from(txn, PARTY_TOKEN_NOT_KEPT)?;
            PartyTokenChange::Unchanged
        }
        (false, Some(true), false) => {
            let from = state::read_tip(txn)?.map_or(0, |tip| tip + 1);
            state::set_party_token_from(txn, TxId::first_of_block(from).0)?;
            PartyTokenChange::StartedAt(from)
        }
        (false, Some(false), true) => {
            txn.clear::<OtsPartyTokenIndex>()?;
            txn.clear::<OtsPartyTokenCounter>()?;
            txn.clear::<OtsPartyTokenIndexYoung>()?;
            txn.clear::<OtsPartyTokenCounterYoung>()?;
            recent::drop_list(txn, IdList::PartyToken.journal_kind())?;
            state::set_party_token_from(txn, PARTY_TOKEN_NOT_KEPT)?;
            PartyTokenChange::Dropped
        }
        _ => PartyTokenChange::Unchanged,
    };
    match change {
        PartyTokenChange::StartedAt(block) => {
            info!(target: "ots::index", from_block = block, "keeping the party-token index from this block on (earlier blocks: index anew to have them)");
        }
        PartyTokenChange::Dropped => info!(target: "ots::index", "dropped the party-token index"),
        PartyTokenChange::Unchanged => {}
    }
    Ok(change)
}

/// A database that does not keep the index holds none of it.
pub fn check<K: TransactionKind>(txn: &Txn<K>) -> DbResult<()> {
    if state::party_token_kept(txn)? {
        return Ok(());
    }
    let unkept = |pair: alloy_primitives::Address| {
        broken::<OtsPartyTokenCounter>(
            pair.as_slice(),
            "holds a pair where the state says the index is not kept".into(),
        )
    };
    if let Some((pair, _)) = txn.cursor::<OtsPartyTokenCounter>()?.first()? {
        return Err(unkept(pair));
    }
    match txn.cursor::<OtsPartyTokenCounterYoung>()?.first()? {
        Some((pair, _)) => Err(unkept(pair)),
        None => Ok(()),
    }
}
