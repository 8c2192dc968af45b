//! Ether a proof-of-work block created, for `ots_getBlockDetails`'s `issuance` (docs/api.md):
//! the miner's reward (with 1/32 of it per uncle included) and each uncle's reward, as Erigon's
//! ethash rules give them. Known for Ethereum mainnet's schedule; a proof-of-stake block
//! (difficulty 0) and other chains issue nothing here.

use alloy_primitives::U256;

/// Ethereum mainnet's chain id.
pub const MAINNET: u64 = 1;

/// Mainnet's block reward at `block`, in wei: 5 ETH from Frontier, 3 from Byzantium, 2 from
/// Constantinople.
fn mainnet_reward(block: u64) -> U256 {
    let ether = U256::from(10u64).pow(U256::from(18));
    let whole = match block {
        0..4_370_000 => 5,
        4_370_000..7_280_000 => 3,
        _ => 2,
    };
    U256::from(whole) * ether
}

/// What a block issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Issuance {
    /// To the miner: the block reward plus 1/32 of it per included uncle.
    pub block_reward: U256,
    /// To the uncles' miners, together.
    pub uncle_reward: U256,
}

impl Issuance {
    /// Both together.
    pub fn total(self) -> U256 {
        self.block_reward + self.uncle_reward
    }
}

/// The issuance of block `number` on chain `chain_id` with the given difficulty and uncles
/// (their block numbers).
pub fn issuance(chain_id: u64, number: u64, difficulty: U256, uncles: &[u64]) -> Issuance {
    if chain_id != MAINNET || difficulty.is_zero() {
        return Issuance::default();
    }
    let reward = mainnet_reward(number);
    let mut out = Issuance { block_reward: reward, uncle_reward: U256::ZERO };
    for &uncle in uncles {
        // An uncle k blocks older than its nephew gets (8 − k)/8 of the reward.
        let share = (uncle + 8).saturating_sub(number);
        out.uncle_reward += U256::from(share) * reward / U256::from(8);
        out.block_reward += reward / U256::from(32);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ether(milli: u64) -> U256 {
        U256::from(milli) * U256::from(10u64).pow(U256::from(15))
    }

    #[test]
    fn follows_mainnets_schedule() {
        let one = U256::from(1);
        assert_eq!(issuance(1, 1, one, &[]).total(), ether(5000));
        assert_eq!(issuance(1, 4_369_999, one, &[]).block_reward, ether(5000));
        assert_eq!(issuance(1, 4_370_000, one, &[]).block_reward, ether(3000));
        assert_eq!(issuance(1, 7_280_000, one, &[]).block_reward, ether(2000));
        // Two uncles, one and two blocks older: 2 + 2·(2/32) to the miner, 7/8·2 + 6/8·2 to them.
        let i = issuance(1, 10_000_000, one, &[9_999_999, 9_999_998]);
        assert_eq!(i.block_reward, ether(2125));
        assert_eq!(i.uncle_reward, ether(1750 + 1500));
        assert_eq!(i.total(), ether(2125 + 3250));
    }

    #[test]
    fn proof_of_stake_and_other_chains_issue_nothing() {
        assert_eq!(issuance(1, 20_000_000, U256::ZERO, &[]), Issuance::default());
        assert_eq!(issuance(31337, 5, U256::from(1), &[]), Issuance::default());
    }
}
