//! The `block` module: a block's reward and a countdown to a block, from the node; a block by
//! its time, from the index; and the rewards of `account`'s `getminedblocks`, computed the
//! same way as a block's.

use alloy_primitives::U256;
use serde_json::{json, Value};

use super::{envelope::Answer, params::Params, Etherscan};
use crate::{
    index::block_times::{closest, Closest},
    rpc::materialize::hex_field,
};

/// Blocks the countdown averages the block time over.
const COUNTDOWN_SAMPLE: u64 = 1_000;

/// What a block paid its fee recipient.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Reward {
    /// Unix seconds.
    pub timestamp: u64,
    /// The fee recipient, lower-case hex.
    pub miner: String,
    /// `Σ gasUsed × (effectiveGasPrice − baseFeePerGas)` over the block's receipts, in wei.
    pub earned: U256,
    /// The block's header, as the node gave it.
    pub header: Value,
}

/// `blockno`: a block number in decimal (or `0x` hex).
pub(super) fn block_number(params: &Params) -> Result<u64, Answer> {
    let text = params.get("blockno").ok_or_else(|| Answer::refuse("Error! Invalid block number"))?;
    let number = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse::<u64>().ok(),
    };
    number.ok_or_else(|| Answer::refuse("Error! Invalid block number"))
}

/// A hex quantity of any size in `v[field]`, zero when absent.
fn wei(v: &Value, field: &str) -> Result<U256, Answer> {
    match v.get(field) {
        None | Some(Value::Null) => Ok(U256::ZERO),
        Some(x) => serde_json::from_value(x.clone())
            .map_err(|_| Answer::refuse(format!("Error! The node's {field} is not a number"))),
    }
}

/// What `blocks` paid their fee recipients, in order: one batch of headers and the blocks'
/// receipts. A block the node does not have yet is `None`.
pub(super) async fn rewards(api: &Etherscan, blocks: &[u64]) -> Result<Vec<Option<Reward>>, Answer> {
    let calls: Vec<_> =
        blocks.iter().map(|n| ("eth_getBlockByNumber", json!([format!("{n:#x}"), false]))).collect();
    let headers =
        api.ctx.node.batch(&calls).await.map_err(|e| {
            Answer::refuse(format!("Error! The node did not answer eth_getBlockByNumber: {e}"))
        })?;
    let (present, present_headers): (Vec<u64>, Vec<Value>) =
        blocks.iter().zip(&headers).filter(|(_, h)| !h.is_null()).map(|(&n, h)| (n, h.clone())).unzip();
    let receipts =
        api.ctx.node.receipts_of_blocks(&present, &present_headers).await.map_err(|e| {
            Answer::refuse(format!("Error! The node did not answer the blocks' receipts: {e}"))
        })?;
    let mut receipts = receipts.into_iter();
    let mut out = Vec::with_capacity(blocks.len());
    for header in headers {
        if header.is_null() {
            out.push(None);
            continue;
        }
        let base_fee = wei(&header, "baseFeePerGas")?;
        let mut earned = U256::ZERO;
        for receipt in receipts.next().unwrap_or_default() {
            earned +=
                wei(&receipt, "gasUsed")? * wei(&receipt, "effectiveGasPrice")?.saturating_sub(base_fee);
        }
        let timestamp = hex_field(&header, "timestamp")
            .ok_or_else(|| Answer::refuse("Error! The node's block has no valid timestamp"))?;
        let miner = header.get("miner").and_then(Value::as_str).unwrap_or_default().to_ascii_lowercase();
        out.push(Some(Reward { timestamp, miner, earned, header }));
    }
    Ok(out)
}

/// `getblockreward`: the block's fee recipient and what it earned from the block's
/// transactions (the base fee is burnt). Proof-of-work issuance (block and uncle rewards)
/// depends on the chain's fork schedule, which the node does not tell: it is left out, and an
/// uncle's reward is "0" (docs/etherscan.md).
pub(super) async fn reward(api: &Etherscan, params: &Params) -> Answer {
    let number = match block_number(params) {
        Ok(number) => number,
        Err(refusal) => return refusal,
    };
    let reward = match rewards(api, &[number]).await {
        Ok(mut rewards) => rewards.pop().flatten(),
        Err(refusal) => return refusal,
    };
    let Some(reward) = reward else { return Answer::refuse("Error! Block number not yet reached") };
    let uncle_count = reward.header.get("uncles").and_then(Value::as_array).map_or(0, Vec::len);
    let calls: Vec<_> = (0..uncle_count)
        .map(|i| ("eth_getUncleByBlockNumberAndIndex", json!([format!("{number:#x}"), format!("{i:#x}")])))
        .collect();
    let uncles = if calls.is_empty() {
        Vec::new()
    } else {
        match api.ctx.node.batch(&calls).await {
            Ok(uncles) => uncles,
            Err(e) => {
                return Answer::refuse(format!("Error! The node did not answer the block's uncles: {e}"))
            }
        }
    };
    let uncles: Vec<Value> = uncles
        .iter()
        .enumerate()
        .map(|(i, uncle)| {
            json!({
                "miner": uncle.get("miner").and_then(Value::as_str).unwrap_or_default().to_ascii_lowercase(),
                "unclePosition": i.to_string(),
                "blockreward": "0",
            })
        })
        .collect();
    Answer::Ok(json!({
        "blockNumber": number.to_string(),
        "timeStamp": reward.timestamp.to_string(),
        "blockMiner": reward.miner,
        "blockReward": reward.earned.to_string(),
        "uncles": uncles,
        "uncleInclusionReward": "0",
    }))
}

/// `getblockcountdown`: blocks and estimated seconds until `blockno`, at the average block time
/// of the last thousand blocks.
pub(super) async fn countdown(api: &Etherscan, params: &Params) -> Answer {
    let target = match block_number(params) {
        Ok(number) => number,
        Err(refusal) => return refusal,
    };
    let head = match api.ctx.node.head().await {
        Ok(head) => head,
        Err(e) => return Answer::refuse(format!("Error! The node did not answer eth_blockNumber: {e}")),
    };
    if target <= head {
        return Answer::refuse("Error! Block number already pass");
    }
    let since = head.saturating_sub(COUNTDOWN_SAMPLE);
    let calls = [
        ("eth_getBlockByNumber", json!([format!("{since:#x}"), false])),
        ("eth_getBlockByNumber", json!([format!("{head:#x}"), false])),
    ];
    let stamps = match api.ctx.node.batch(&calls).await {
        Ok(headers) => headers.iter().map(|h| hex_field(h, "timestamp")).collect::<Option<Vec<u64>>>(),
        Err(e) => return Answer::refuse(format!("Error! The node did not answer eth_getBlockByNumber: {e}")),
    };
    let Some(&[then, now]) = stamps.as_deref() else {
        return Answer::refuse("Error! The node's blocks have no valid timestamp");
    };
    let remaining = target - head;
    #[allow(clippy::cast_precision_loss)] // seconds and blocks far below 2^52
    let seconds = if head > since {
        now.saturating_sub(then) as f64 / (head - since) as f64 * remaining as f64
    } else {
        0.0
    };
    Answer::Ok(json!({
        "CurrentBlock": head.to_string(),
        "CountdownBlock": target.to_string(),
        "RemainingBlock": remaining.to_string(),
        "EstimateTimeInSec": format!("{seconds:.1}"),
    }))
}

/// `timestamp` (Unix seconds, decimal) and `closest` (`before` or `after`).
fn time_and_side(params: &Params) -> Result<(u64, Closest), Answer> {
    let time = params
        .get("timestamp")
        .and_then(|t| t.parse::<u64>().ok())
        .ok_or_else(|| Answer::refuse("Error! Invalid timestamp"))?;
    let side = match params.get("closest").map(str::to_ascii_lowercase).as_deref() {
        Some("before") => Closest::Before,
        Some("after") => Closest::After,
        _ => return Err(Answer::refuse("Error! Invalid closest value: before or after")),
    };
    Ok((time, side))
}

/// `getblocknobytime`: the newest block at or before the time (`closest=before`), or the oldest
/// at or after it (`after`), by a binary search of the index's block times: no node call. The
/// index answers up to its own tip, which may trail the node's head by a block or two.
pub(super) fn by_time(api: &Etherscan, params: &Params) -> Answer {
    let (time, side) = match time_and_side(params) {
        Ok(asked) => asked,
        Err(refusal) => return refusal,
    };
    match api.read(|txn| closest(txn, time, side)) {
        Err(refusal) => refusal,
        Ok(Some(block)) => Answer::Ok(json!(block.to_string())),
        Ok(None) => Answer::refuse("Error! No closest block found"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_is_decimal_seconds_and_a_side_before_or_after() {
        let p = |q: &str| Params::parse([q.as_bytes()]);
        assert_eq!(
            time_and_side(&p("timestamp=1700000000&closest=before")),
            Ok((1_700_000_000, Closest::Before))
        );
        assert_eq!(time_and_side(&p("timestamp=0&closest=AFTER")), Ok((0, Closest::After)));
        for bad in
            ["", "timestamp=&closest=before", "timestamp=-1&closest=before", "timestamp=0x10&closest=after"]
        {
            assert_eq!(time_and_side(&p(bad)), Err(Answer::refuse("Error! Invalid timestamp")), "{bad}");
        }
        for bad in ["timestamp=1", "timestamp=1&closest=nearest"] {
            assert!(time_and_side(&p(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_block_number_is_decimal_or_hex() {
        let p = |q: &str| Params::parse([q.as_bytes()]);
        assert_eq!(block_number(&p("blockno=12")), Ok(12));
        assert_eq!(block_number(&p("blockno=0x12")), Ok(18));
        for bad in ["", "blockno=", "blockno=-1", "blockno=x"] {
            assert!(block_number(&p(bad)).is_err(), "{bad}");
        }
    }
}
