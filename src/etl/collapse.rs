//! Folding a group of sorted rows into one, as a sorter's buffer is sorted and as a run is
//! written: both the sorter and the run writer fold.

/// Whether `later` belongs to the group of `kept` (which sorts before it) for the family reading
/// them, having folded into `kept` whatever of `later` the family needs: `later` is then left
/// out. A family that keeps a group's least row folds nothing; one that sums folds the sum.
pub type Collapse<R> = fn(&mut R, &R) -> bool;

/// Folds each group of adjacent rows of sorted `rows` into its first (see [`Collapse`]).
pub(super) fn collapse<R>(rows: &mut Vec<R>, absorb: Option<Collapse<R>>) {
    if let Some(absorb) = absorb {
        rows.dedup_by(|later, kept| absorb(kept, later));
    }
}
