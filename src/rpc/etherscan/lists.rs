//! The `account` lists that are id lists of the index, paged by position so that a page costs
//! its rows: the blocks an address was paid as fee recipient (`getminedblocks`) and the
//! consensus-layer withdrawals to it (`txsBeaconWithdrawal`). What the index does not hold (a
//! block's timestamp and fees, a withdrawal's validator and amount) comes from the node, one
//! batch per page.

use alloy_primitives::Address;
use serde_json::{json, Value};

use super::{
    block::rewards,
    envelope::Answer,
    params::{Params, Sort},
    token::lower_hex,
    Etherscan,
};
use crate::{
    db::state,
    index::families::address_index::{count, first_withdrawal_from, page, rank, withdrawal_blocks, IdList},
};

/// Rows of a list when `offset` is not given: Etherscan answers up to 10,000.
pub(super) const LIST_ROWS: u64 = 10_000;

/// `getminedblocks`: the blocks whose fee recipient the address was, newest first (Etherscan's
/// order; `sort=asc` reverses it), with what each paid it. Uncles are not indexed:
/// `blocktype=uncles` finds none.
pub(super) async fn mined_blocks(api: &Etherscan, params: &Params) -> Answer {
    let address = match params.address("address") {
        Ok(address) => address,
        Err(refusal) => return refusal,
    };
    match params.get("blocktype").unwrap_or("blocks") {
        "blocks" => {}
        "uncles" => return Answer::NoRows("No transactions found"),
        _ => return Answer::refuse("Error! Invalid blocktype: blocks or uncles"),
    }
    let (window, sort) = match (params.window(LIST_ROWS, api.max_offset), params.sort(Sort::Desc)) {
        (Ok(window), Ok(sort)) => (window, sort),
        (Err(refusal), _) | (_, Err(refusal)) => return refusal,
    };
    let blocks = api.read(|t| {
        let (first, rows) = window.positions(sort, 0, count(t, IdList::BlocksRewarded, &address)?);
        page(t, IdList::BlocksRewarded, &address, first, rows)
    });
    let mut blocks = match blocks {
        Ok(blocks) if blocks.is_empty() => return Answer::NoRows("No transactions found"),
        Ok(blocks) => blocks,
        Err(refusal) => return refusal,
    };
    if sort == Sort::Desc {
        blocks.reverse();
    }
    let paid = match rewards(api, &blocks).await {
        Ok(paid) => paid,
        Err(refusal) => return refusal,
    };
    let mut rows = Vec::with_capacity(blocks.len());
    for (block, reward) in blocks.iter().zip(paid) {
        let Some(reward) = reward else {
            return Answer::refuse(format!(
                "Error! The node has no block {block}: is it serving the indexed chain?"
            ));
        };
        rows.push(json!({
            "blockNumber": block.to_string(),
            "timeStamp": reward.timestamp.to_string(),
            "blockReward": reward.earned.to_string(),
        }));
    }
    Answer::Ok(Value::Array(rows))
}

/// The withdrawals `(index, block)` of one page, in `sort`'s order, and the indexed tip.
type WithdrawalPage = (Vec<(u64, u64)>, Option<u64>);

/// The withdrawals `(index, block)` of `address` on one page, in `sort`'s order.
fn withdrawal_page(
    api: &Etherscan,
    address: &Address,
    (start, end): (u64, u64),
    window: super::params::Window,
    sort: Sort,
) -> Result<WithdrawalPage, Answer> {
    api.read(|t| {
        let first = first_withdrawal_from(t, start)?;
        let past = match end.checked_add(1) {
            Some(after) => first_withdrawal_from(t, after)?,
            None => u64::MAX,
        };
        let from = rank(t, IdList::Withdrawals, address, first)?;
        let to = rank(t, IdList::Withdrawals, address, past)?;
        let (at, rows) = window.positions(sort, from, to);
        let mut indexes = page(t, IdList::Withdrawals, address, at, rows)?;
        if sort == Sort::Desc {
            indexes.reverse();
        }
        Ok((withdrawal_blocks(t, indexes)?, state::read_tip(t)?))
    })
}

/// `txsBeaconWithdrawal`: the consensus-layer withdrawals to the address in blocks
/// `startblock..=endblock`, oldest first (`sort=desc` for newest), amounts in Gwei.
pub(super) async fn beacon_withdrawals(api: &Etherscan, params: &Params) -> Answer {
    let address = match params.address("address") {
        Ok(address) => address,
        Err(refusal) => return refusal,
    };
    let (range, window, sort) = match params.list_request(LIST_ROWS, api.max_offset, Sort::Asc) {
        Ok(asked) => asked,
        Err(refusal) => return refusal,
    };
    let (wanted, tip) = match withdrawal_page(api, &address, range, window, sort) {
        Ok((wanted, _)) if wanted.is_empty() => return Answer::NoRows("No transactions found"),
        Ok(page) => page,
        Err(refusal) => return refusal,
    };
    let (summaries, rows) = match api.pages.withdrawal_rows(&wanted, tip).await {
        Ok(found) => found,
        Err(e) => return Answer::refuse(format!("Error! {}", e.message())),
    };
    let address = lower_hex(&address);
    Answer::Ok(Value::Array(
        rows.iter()
            .map(|w| {
                let block = w.block_number.to::<u64>();
                let timestamp =
                    summaries.get(&format!("{block:#x}")).map(|s| s.timestamp).unwrap_or_default();
                json!({
                    "withdrawalIndex": w.index.to::<u64>().to_string(),
                    "validatorIndex": w.validator_index.to::<u64>().to_string(),
                    "address": address,
                    "amount": w.amount.to::<u64>().to_string(),
                    "blockNumber": block.to_string(),
                    "timestamp": timestamp.to_string(),
                })
            })
            .collect(),
    ))
}
