//! The `gastracker` module: gas price suggestions and a confirmation-time estimate, from the
//! node's fee history (`eth_feeHistory`) of its newest blocks. Etherscan does not publish how it
//! computes either; what these do is stated once, in docs/etherscan.md ("`gastracker`").

use alloy_primitives::U256;
use serde_json::{json, Value};

use super::{envelope::Answer, params::Params, Etherscan};

/// Blocks `gasoracle` reads: Etherscan's `gasUsedRatio` lists five.
const ORACLE_BLOCKS: u64 = 5;

/// Priority-fee percentiles of each block behind the safe, proposed and fast prices.
const ORACLE_PERCENTILES: [f64; 3] = [25.0, 50.0, 75.0];

/// Blocks `gasestimate` reads.
const ESTIMATE_BLOCKS: u64 = 20;

/// The priority fee a block's cheapest included transactions paid: the percentile `gasestimate`
/// takes as the least a transaction had to offer to get into that block.
const ESTIMATE_PERCENTILE: f64 = 10.0;

/// Wei in a gwei.
const GWEI: u64 = 1_000_000_000;

/// What the node's `eth_feeHistory` said of its newest blocks.
#[derive(Debug, Clone, PartialEq)]
struct FeeHistory {
    /// The oldest block of the answer.
    oldest: u64,
    /// Each block's base fee, oldest first, and then the next block's.
    base_fees: Vec<U256>,
    /// Each block's gas used over its gas limit.
    used_ratios: Vec<f64>,
    /// Each block's priority fees at the percentiles asked for.
    rewards: Vec<Vec<U256>>,
}

impl FeeHistory {
    /// Reads the node's answer; `None` when it is not one.
    fn read(v: &Value) -> Option<Self> {
        let quantity =
            |x: &Value| x.as_str().and_then(|s| U256::from_str_radix(s.strip_prefix("0x")?, 16).ok());
        let oldest = u64::try_from(quantity(v.get("oldestBlock")?)?).ok()?;
        let base_fees =
            v.get("baseFeePerGas")?.as_array()?.iter().map(quantity).collect::<Option<Vec<_>>>()?;
        let used_ratios =
            v.get("gasUsedRatio")?.as_array()?.iter().map(Value::as_f64).collect::<Option<Vec<_>>>()?;
        let rewards = match v.get("reward") {
            Some(Value::Array(blocks)) => blocks
                .iter()
                .map(|b| b.as_array().and_then(|r| r.iter().map(quantity).collect::<Option<Vec<_>>>()))
                .collect::<Option<Vec<_>>>()?,
            _ => Vec::new(),
        };
        let blocks = used_ratios.len();
        (blocks > 0 && base_fees.len() == blocks + 1 && rewards.len() == blocks).then_some(Self {
            oldest,
            base_fees,
            used_ratios,
            rewards,
        })
    }

    /// The newest block it covers.
    fn newest(&self) -> u64 {
        self.oldest + self.used_ratios.len() as u64 - 1
    }

    /// The base fee of the block after the newest.
    fn next_base_fee(&self) -> U256 {
        self.base_fees.last().copied().unwrap_or_default()
    }

    /// The median over its blocks of the priority fee at percentile number `p` (an index into
    /// the percentiles asked for); blocks with no transactions (all zero) count as they are.
    fn median_reward(&self, p: usize) -> U256 {
        let mut fees: Vec<U256> = self.rewards.iter().filter_map(|r| r.get(p).copied()).collect();
        fees.sort_unstable();
        fees.get(fees.len() / 2).copied().unwrap_or_default()
    }
}

/// Asks the node for the fee history of its newest `blocks` at `percentiles`.
async fn fee_history(api: &Etherscan, blocks: u64, percentiles: &[f64]) -> Result<FeeHistory, Answer> {
    let answer: Value = api
        .ctx
        .node
        .raw("eth_feeHistory", json!([format!("{blocks:#x}"), "latest", percentiles]))
        .await
        .map_err(|e| Answer::refuse(format!("Error! The node did not answer eth_feeHistory: {e}")))?;
    FeeHistory::read(&answer)
        .ok_or_else(|| Answer::refuse("Error! The node's eth_feeHistory answer is not one"))
}

/// `wei` in gwei, in decimal with up to 9 fractional digits, trailing zeros dropped.
fn gwei(wei: U256) -> String {
    let unit = U256::from(GWEI);
    let (whole, fraction) = (wei / unit, (wei % unit).to::<u64>());
    if fraction == 0 {
        return whole.to_string();
    }
    let digits = format!("{fraction:09}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

/// `gasoracle`: the next block's base fee plus the median over the newest five blocks of each
/// block's 25th, 50th and 75th percentile priority fee, in gwei, with those blocks' gas used
/// ratios.
pub(super) async fn oracle(api: &Etherscan) -> Answer {
    let history = match fee_history(api, ORACLE_BLOCKS, &ORACLE_PERCENTILES).await {
        Ok(history) => history,
        Err(refusal) => return refusal,
    };
    let base = history.next_base_fee();
    let price = |p| gwei(base + history.median_reward(p));
    let ratios: Vec<String> = history.used_ratios.iter().map(f64::to_string).collect();
    Answer::Ok(json!({
        "LastBlock": history.newest().to_string(),
        "SafeGasPrice": price(0),
        "ProposeGasPrice": price(1),
        "FastGasPrice": price(2),
        "suggestBaseFee": gwei(base),
        "gasUsedRatio": ratios.join(","),
    }))
}

/// `gasestimate`: the seconds a transaction paying `gasprice` wei per gas waits, on average, to
/// be included — the newest blocks' mean block time over the share of those blocks whose base
/// fee plus their cheapest tenth of priority fees it would have paid.
pub(super) async fn estimate(api: &Etherscan, params: &Params) -> Answer {
    let Some(price) = params.get("gasprice").and_then(|p| p.parse::<U256>().ok()) else {
        return Answer::refuse("Error! Missing Or invalid gasprice");
    };
    let history = match fee_history(api, ESTIMATE_BLOCKS, &[ESTIMATE_PERCENTILE]).await {
        Ok(history) => history,
        Err(refusal) => return refusal,
    };
    let blocks = history.used_ratios.len();
    let accepting = (0..blocks)
        .filter(|&b| history.base_fees[b] + history.rewards[b].first().copied().unwrap_or_default() <= price)
        .count();
    if accepting == 0 {
        return Answer::refuse(format!(
            "Error! No block of the newest {blocks} would have included a gas price of {price} wei"
        ));
    }
    let (first, last) = (history.oldest, history.newest());
    let calls = [
        ("eth_getBlockByNumber", json!([format!("{first:#x}"), false])),
        ("eth_getBlockByNumber", json!([format!("{last:#x}"), false])),
    ];
    let stamps: Option<Vec<u64>> = match api.ctx.node.batch(&calls).await {
        Ok(headers) => headers.iter().map(|h| crate::rpc::materialize::hex_field(h, "timestamp")).collect(),
        Err(e) => return Answer::refuse(format!("Error! The node did not answer eth_getBlockByNumber: {e}")),
    };
    let Some([then, now]) = stamps.and_then(|s| <[u64; 2]>::try_from(s).ok()) else {
        return Answer::refuse("Error! The node's blocks have no valid timestamp");
    };
    #[allow(clippy::cast_precision_loss)] // seconds and block counts far below 2^52
    let block_time = if last > first { now.saturating_sub(then) as f64 / (last - first) as f64 } else { 0.0 };
    #[allow(clippy::cast_precision_loss)]
    let seconds = block_time * blocks as f64 / accepting as f64;
    Answer::Ok(Value::String(format!("{seconds:.0}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gwei_keeps_nine_decimals_without_trailing_zeros() {
        assert_eq!(gwei(U256::ZERO), "0");
        assert_eq!(gwei(U256::from(20 * GWEI)), "20");
        assert_eq!(gwei(U256::from(19_230_609_716u64)), "19.230609716");
        assert_eq!(gwei(U256::from(1_500_000_000u64)), "1.5");
        assert_eq!(gwei(U256::from(7u64)), "0.000000007");
    }

    #[test]
    fn a_fee_history_is_read_and_its_medians_taken() {
        let answer = json!({
            "oldestBlock": "0x10",
            "baseFeePerGas": ["0x1", "0x2", "0x3", "0x4"],
            "gasUsedRatio": [0.5, 0.25, 1.0],
            "reward": [["0x5", "0x9"], ["0x1", "0x3"], ["0x0", "0x7"]],
        });
        let history = FeeHistory::read(&answer).expect("read");
        assert_eq!(history.newest(), 0x12);
        assert_eq!(history.next_base_fee(), U256::from(4));
        assert_eq!(history.median_reward(0), U256::from(1));
        assert_eq!(history.median_reward(1), U256::from(7));
        // A base fee list that is not one longer than the blocks is not an answer.
        let mut short = answer;
        short["baseFeePerGas"] = json!(["0x1", "0x2", "0x3"]);
        assert!(FeeHistory::read(&short).is_none());
        assert!(FeeHistory::read(&json!({"oldestBlock": "0x1"})).is_none());
    }
}
