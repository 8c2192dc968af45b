//! Running a set of classifiers on one block, each shown the contracts it asked for.

use alloy_primitives::Address;

use crate::{
    BlockData, Candidates, ChainError, ChainView, Classifier, ClassifyInput, Fact, LogData, TRANSFER_TOPIC,
};

/// Runs `classifiers` in order on `block`. `contracts` are the contracts to judge (normally
/// [`BlockData::created_contracts`]); a classifier with [`Candidates::MatchesOf`] is shown only
/// those its predecessors matched. `transfer_emitters` go to every classifier unchanged.
pub async fn classify_block(
    classifiers: &[Box<dyn Classifier>],
    block: &BlockData,
    contracts: &[Address],
    transfer_emitters: &[Address],
    chain: &dyn ChainView,
) -> Result<Vec<Fact>, ChainError> {
    let mut facts: Vec<Fact> = Vec::new();
    for classifier in classifiers {
        let matched: Vec<Address>;
        let shown = match classifier.candidates() {
            Candidates::AllContracts => contracts,
            Candidates::MatchesOf(standard) => {
                matched = facts
                    .iter()
                    .filter_map(|f| match f {
                        Fact::Matched { standard: s, address } if *s == standard => Some(*address),
                        _ => None,
                    })
                    .collect();
                &matched
            }
        };
        let input = ClassifyInput { block, contracts: shown, transfer_emitters };
        facts.extend(classifier.classify(input, chain).await?);
    }
    Ok(facts)
}

impl BlockData {
    /// The logs of its successful transactions, in block order (a node returns no others, a
    /// recording might).
    pub fn successful_logs(&self) -> impl Iterator<Item = &LogData> {
        self.receipts.iter().filter(|r| r.success).flat_map(|r| &r.logs)
    }

    /// Addresses that emitted a Transfer-shaped log (topic0 `Transfer`, at least 3 topics) in a
    /// successful transaction, in order of first appearance.
    pub fn transfer_log_emitters(&self) -> Vec<Address> {
        // Sorted rather than searched: a busy block has hundreds of distinct emitters, and a
        // linear search for each log made this quadratic in them (the hottest function of a
        // mainnet-scale catch-up).
        let mut found: Vec<(Address, usize)> = self
            .successful_logs()
            .filter(|log| log.topics.len() >= 3 && log.topics[0] == TRANSFER_TOPIC)
            .enumerate()
            .map(|(i, log)| (log.address, i))
            .collect();
        found.sort_unstable();
        found.dedup_by(|later, first| later.0 == first.0);
        found.sort_unstable_by_key(|&(_, i)| i);
        found.into_iter().map(|(address, _)| address).collect()
    }
}

#[cfg(test)]
mod tests {
    use alloy_primitives::{Address, Bytes, B256, U256};

    use crate::{BlockData, LogData, ReceiptData, TRANSFER_TOPIC};

    fn log(emitter: u8, topics: usize) -> LogData {
        let mut all = vec![TRANSFER_TOPIC];
        all.resize(topics, B256::ZERO);
        LogData { address: Address::repeat_byte(emitter), topics: all, data: Bytes::new() }
    }

    fn receipt(success: bool, logs: Vec<LogData>) -> ReceiptData {
        ReceiptData { success, contract_address: None, logs, fee: U256::ZERO }
    }

    #[test]
    fn emitters_come_once_in_order_of_first_transfer() {
        let block = BlockData {
            receipts: vec![
                receipt(true, vec![log(9, 3), log(2, 2), log(5, 4), log(9, 3)]),
                receipt(false, vec![log(1, 3)]),
                receipt(true, vec![log(2, 3), log(5, 3), log(7, 3), log(9, 3)]),
            ],
            ..BlockData::default()
        };
        // 2's first log has too few topics; 1's transaction failed.
        let expected: Vec<Address> = [9, 5, 2, 7].map(Address::repeat_byte).to_vec();
        assert_eq!(block.transfer_log_emitters(), expected);
    }
}
