//! Balances on the bulk path: a stage's moves spill into sorted runs by token and by their order
//! in the chain, and are replayed token by token into the tables in one ordered pass.
//!
//! Every value this family keeps (a balance, an owner, an ERC1155 balance, a holder count, a
//! ranking) belongs to one token, so a token's moves replayed in chain order give exactly what
//! the incremental path gives, whichever tokens are replayed first. The replay reads and writes
//! through the stage's own transaction with the same [`BalanceBook`] the incremental path uses.

use std::sync::Arc;

use alloy_primitives::{Address, U256};

use super::book::{BalanceBook, BalanceMove};
use crate::{
    db::{DbResult, WriteTxn},
    decode::{TokenKind, TokenLog},
    etl::{Buffer, Record, RecordError, RunDir, Sorter},
    txid::TxId,
};

/// Moves replayed per book: a bound on the memory the replay takes (a token with more moves is
/// replayed in several books, in order, each from what the one before wrote).
const MOVES_PER_BOOK: usize = 1 << 18;

/// One move with its place in the stage: sorted by token, then by `seq`, the order the chain made
/// it in.
#[derive(Debug, Clone, Copy)]
struct MoveRow {
    seq: u64,
    block: u64,
    m: BalanceMove,
}

impl MoveRow {
    fn key(&self) -> (Address, u64) {
        (self.m.token, self.seq)
    }
}

impl PartialEq for MoveRow {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for MoveRow {}

impl PartialOrd for MoveRow {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for MoveRow {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

const fn kind_byte(kind: TokenKind) -> u8 {
    match kind {
        TokenKind::Erc20 => 0,
        TokenKind::Erc721 => 1,
        TokenKind::Erc1155 => 2,
    }
}

/// token (20) ‖ seq (8) ‖ block (8) ‖ kind (1) ‖ from (20) ‖ to (20) ‖ id ‖ amount (each a
/// length byte and the value's significant bytes).
impl Record for MoveRow {
    fn encode(&self, out: &mut Vec<u8>) {
        (self.m.token, self.seq, self.block, kind_byte(self.m.kind)).encode(out);
        (self.m.from, self.m.to, self.m.id, self.m.amount).encode(out);
    }

    fn decode(input: &mut &[u8]) -> Result<Self, RecordError> {
        let (token, seq, block, kind) = <(Address, u64, u64, u8)>::decode(input)?;
        let (from, to, id, amount) = <(Address, Address, U256, U256)>::decode(input)?;
        let kind = match kind {
            0 => TokenKind::Erc20,
            1 => TokenKind::Erc721,
            2 => TokenKind::Erc1155,
            _ => return Err(RecordError("an unknown token kind")),
        };
        Ok(Self { seq, block, m: BalanceMove { token, kind, from, to, id, amount } })
    }
}

/// A bulk stage's balance moves.
#[derive(Debug)]
pub struct BulkBalances {
    moves: Sorter<MoveRow>,
    next_seq: u64,
}

impl BulkBalances {
    /// Moves spilling into runs under `runs`, buffering `budget` bytes.
    pub fn spilling(runs: &Arc<RunDir>, budget: usize) -> Self {
        Self { moves: Sorter::spilling(runs.clone(), budget), next_seq: 0 }
    }

    /// The moves' buffer.
    pub fn buffer(&mut self) -> &mut dyn Buffer {
        &mut self.moves
    }

    /// Collects the moves of block `block`'s token logs, in log order (blocks in chain order).
    pub fn collect(&mut self, block: u64, logs: &[(TxId, TokenLog<'_>)]) -> DbResult<()> {
        for (_, log) in logs {
            for m in BalanceMove::of(log) {
                self.moves.push(MoveRow { seq: self.next_seq, block, m })?;
                self.next_seq += 1;
            }
        }
        Ok(())
    }

    /// Replays every move into the tables through `txn`, token by token, keeping no undo rows
    /// (a stage's blocks are older than the reorg window).
    pub fn write(self, txn: &WriteTxn) -> DbResult<()> {
        let mut book = BalanceBook::default();
        for row in self.moves.into_sorted()? {
            let MoveRow { block, m, .. } = row?;
            book.push(block, m);
            if book.len() >= MOVES_PER_BOOK {
                std::mem::take(&mut book).resolve(txn, u64::MAX)?.write(txn, None)?;
            }
        }
        if !book.is_empty() {
            book.resolve(txn, u64::MAX)?.write(txn, None)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_move_round_trips_and_sorts_by_token_then_order() {
        let m = BalanceMove {
            token: Address::repeat_byte(2),
            kind: TokenKind::Erc1155,
            from: Address::repeat_byte(3),
            to: Address::ZERO,
            id: U256::from(7),
            amount: U256::from(1_000_000),
        };
        let row = MoveRow { seq: 9, block: 4, m };
        let mut bytes = Vec::new();
        row.encode(&mut bytes);
        assert_eq!(bytes.len(), 20 + 8 + 8 + 1 + 20 + 20 + 2 + 4);
        assert_eq!(&bytes[28..37], &[0, 0, 0, 0, 0, 0, 0, 4, 2]);
        let back = MoveRow::decode(&mut bytes.as_slice()).expect("decodes");
        assert_eq!((back.seq, back.block, back.m), (9, 4, m));
        let earlier_token =
            MoveRow { seq: 10, block: 5, m: BalanceMove { token: Address::repeat_byte(1), ..m } };
        assert!(earlier_token < row);
        assert!(MoveRow { seq: 8, ..row } < row);
    }
}
