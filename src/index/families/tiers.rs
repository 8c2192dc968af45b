//! The tiers of a catch-up's staged segments (`staged_holdings`, `balances::staged_owners`): a
//! stage writes a segment of tier 0, and once a tier holds enough segments they merge into one
//! of the next. A tier fills only as the one below it merges, so the segments a merge reads are
//! the newest, and the one it writes, keyed by their newest block at the next tier, sorts after
//! every other.

/// One segment: its tier (how many merges made it) and the newest block of its stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// How many merges made it (0: a stage wrote it).
    pub tier: u8,
    /// The newest block of the stages it holds.
    pub segment: u64,
}

/// A merge the tiers are owed: `merged`, the segments of one tier, into `into`.
#[derive(Debug)]
pub(crate) struct TierMerge {
    pub(crate) merged: Vec<Segment>,
    pub(crate) into: Segment,
}

/// The merge of the lowest tier of `all` holding `fanout` segments or more (`None` when none
/// does), into one segment of the next tier keyed by the newest of them; `Err` with the tier
/// when it is the last one.
pub(crate) fn full_tier(all: &[Segment], fanout: usize) -> Result<Option<TierMerge>, u8> {
    let Some(tier) = (0..=u8::MAX).find(|&t| all.iter().filter(|s| s.tier == t).count() >= fanout) else {
        return Ok(None);
    };
    let merged: Vec<Segment> = all.iter().copied().filter(|s| s.tier == tier).collect();
    let Some(newest) = merged.iter().map(|s| s.segment).max() else { return Ok(None) };
    let next = tier.checked_add(1).ok_or(tier)?;
    Ok(Some(TierMerge { merged, into: Segment { tier: next, segment: newest } }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lowest_full_tier_merges_into_the_next_keyed_by_its_newest() {
        let s = |tier, segment| Segment { tier, segment };
        assert!(full_tier(&[s(1, 8), s(0, 9)], 2).expect("tier").is_none());
        let merge = full_tier(&[s(1, 8), s(1, 16), s(0, 17), s(0, 18)], 2).expect("tier").expect("full");
        assert_eq!((merge.merged, merge.into), (vec![s(0, 17), s(0, 18)], s(1, 18)));
        assert_eq!(full_tier(&[s(u8::MAX, 1), s(u8::MAX, 2)], 2).map(|m| m.is_some()), Err(u8::MAX));
    }
}
