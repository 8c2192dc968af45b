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
        let mut out: Vec<Address> = Vec::new();
        for log in self.successful_logs() {
            if log.topics.len() >= 3 && log.topics[0] == TRANSFER_TOPIC && !out.contains(&log.address) {
                out.push(log.address);
            }
        }
        out
    }
}
