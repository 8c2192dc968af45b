//! Balances on the bulk path: a stage's moves spill into sorted runs by token and by their order
//! in the chain, and are replayed token by token into the tables in one ordered pass.
//!
//! Every value this family keeps (a balance, an owner, an ERC1155 balance, a holder count, a
//! ranking) belongs to one token, so a token's moves replayed in chain order give exactly what
//! the incremental path gives, whichever tokens are replayed first. The replay uses the same
//! [`BalanceBook`] as the incremental path, in books of whole tokens: a book's tokens are
//! untouched by the stage's transaction until it writes that book, so a second thread reads
//! and replays each book from a snapshot of the committed state while this one writes the book
//! before. Only a token with more moves than a book holds is cut, and its later books are
//! replayed here, from what the earlier ones wrote.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use alloy_primitives::{Address, U256};
use tracing::debug;

use std::sync::mpsc::SyncSender;

use super::book::{BalanceBook, BalanceMove, Ranking, Resolved, WriteTimes};
use crate::index::{
    error::WriteError,
    gather::{BlockRows, Gatherer, Writing},
    undo::UndoLog,
    window::WindowStart,
};
use crate::{
    db::{Db, DbResult, WriteTxn},
    decode::{TokenKind, TokenLog},
    etl::{Buffer, Record, RecordError, RunDir, Sorted, Sorter},
    txid::TxId,
};

/// A book closes at the first token boundary once it holds this many moves. Up to three books
/// are alive at once (filling, queued, being written), at the merge's memory peak: halving these
/// limits from 2^17 and 2^18 took 35 MiB off the 2 M chain's peak and 141 MiB off the 21 M
/// chain's, for no measured time (docs/benchmarks-history.md, "smaller balance books").
const MOVES_PER_BOOK: usize = 1 << 16;
/// A token with more moves than this is cut into several books, in order, the later ones
/// replayed from what the earlier ones wrote: a bound on the memory a book takes.
const MOST_MOVES_PER_BOOK: usize = 1 << 17;
// The merge reads the next book's moves while this one is replayed only if a whole book fits in
// what it reads ahead.
const _: () = assert!(MOST_MOVES_PER_BOOK < crate::etl::ROWS_AHEAD);

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
    limits: BookLimits,
}

/// How many moves a book takes.
#[derive(Debug, Clone, Copy)]
struct BookLimits {
    /// It closes at the first token boundary once it holds this many.
    per_book: usize,
    /// It closes at this many, cutting a token.
    most: usize,
}

/// A stage's balances: its blocks are older than the reorg window, so nothing of them is kept
/// apart.
impl Gatherer for BulkBalances {
    fn collect(&mut self, block: &BlockRows<'_, '_>, _: &mut UndoLog) -> Result<(), WriteError> {
        Ok(Self::collect(self, block.block.number, block.logs)?)
    }

    fn buffers(&mut self) -> Vec<&mut dyn Buffer> {
        vec![&mut self.moves]
    }

    fn write(self: Box<Self>, writing: &mut Writing<'_>) -> Result<(), WriteError> {
        Ok(Self::write(*self, writing.db, writing.txn)?)
    }
}

impl BulkBalances {
    /// Moves spilling into runs under `runs`, buffering `budget` bytes.
    pub fn spilling(runs: &Arc<RunDir>, budget: usize) -> Self {
        Self {
            moves: Sorter::spilling(runs.clone(), budget),
            next_seq: 0,
            limits: BookLimits { per_book: MOVES_PER_BOOK, most: MOST_MOVES_PER_BOOK },
        }
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
    /// (a stage's blocks are older than the reorg window); `db` gives the snapshot books are
    /// replayed from (`txn` must not have written a balance table yet).
    pub fn write(self, db: &Db, txn: &WriteTxn) -> DbResult<()> {
        let moves = self.moves.into_sorted()?;
        std::thread::scope(|scope| {
            let (books, resolved) = std::sync::mpsc::sync_channel::<DbResult<Book>>(1);
            scope.spawn(move || {
                if let Err(e) = replay_books(db, moves, self.limits, &books) {
                    let _ = books.send(Err(e));
                }
            });
            // Where the family's time goes: waiting for the replay thread (reading the
            // snapshot, replaying) or writing the books (docs/benchmarks.md, "The stage regime
            // again, and where many small stages spend it").
            let (mut books, mut waited, mut writing) = (0u64, Duration::ZERO, Duration::ZERO);
            let mut tables = WriteTimes::default();
            let mut since = Instant::now();
            for book in resolved {
                let book = book?;
                waited += since.elapsed();
                since = Instant::now();
                let resolved = match book {
                    Book::Resolved(resolved) => *resolved,
                    Book::Cut(book) => book.resolve(txn, WindowStart::Closed.first_kept())?,
                };
                tables.add(resolved.write(txn, None, Ranking::Deferred)?);
                writing += since.elapsed();
                since = Instant::now();
                books += 1;
            }
            if books > 0 {
                crate::db::state::set_rankings_deferred(txn, true)?;
            }
            debug!(
                target: "ots::index",
                books,
                replay_wait_seconds = waited.as_secs_f64(),
                write_seconds = writing.as_secs_f64(),
                balances_seconds = tables.balances.as_secs_f64(),
                ranks_seconds = tables.ranks.as_secs_f64(),
                owners_seconds = tables.owners.as_secs_f64(),
                multi_seconds = tables.multi.as_secs_f64(),
                "balance books written"
            );
            Ok(())
        })
    }
}

/// A book ready to be written.
enum Book {
    /// Whole tokens, replayed from the snapshot.
    Resolved(Box<Resolved>),
    /// The continuation of a token cut between books: to be replayed from what the book
    /// before it wrote.
    Cut(BalanceBook),
}

/// Gathers the sorted moves into books and replays each whole-token book from a snapshot.
fn replay_books(
    db: &Db,
    moves: Sorted<MoveRow>,
    limits: BookLimits,
    out: &SyncSender<DbResult<Book>>,
) -> DbResult<()> {
    let snapshot = db.begin_read()?;
    let mut book = BalanceBook::default();
    // The token of the book's last move, and whether the book continues a cut token.
    let mut last: Option<Address> = None;
    let mut continues = false;
    let send = |book: BalanceBook, continues: bool| -> DbResult<bool> {
        let ready = if continues {
            Book::Cut(book)
        } else {
            Book::Resolved(Box::new(book.resolve(&snapshot, WindowStart::Closed.first_kept())?))
        };
        Ok(out.send(Ok(ready)).is_ok())
    };
    for row in moves {
        let MoveRow { block, m, .. } = row?;
        let boundary = last.is_some_and(|t| t != m.token);
        if (boundary && book.len() >= limits.per_book) || book.len() >= limits.most {
            let cut = !boundary;
            if !send(std::mem::take(&mut book), continues)? {
                return Ok(());
            }
            continues = cut;
        }
        last = Some(m.token);
        book.push(block, m);
    }
    if !book.is_empty() {
        send(book, continues)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        db::{AccessMode, Db},
        index::{balances::rank_deferred, check::dump},
    };

    /// Replays `moves` (block, move) into a fresh database through bulk books of the given
    /// limits, or (`None`) through one book resolved in the write transaction; returns the dump.
    fn replayed(
        moves: &[(u64, BalanceMove)],
        limits: Option<(usize, usize)>,
    ) -> Vec<crate::index::check::DumpEntry> {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("db");
        let txn = db.begin_write().expect("write");
        match limits {
            Some((per_book, most)) => {
                let runs = RunDir::create(&dir.path().join("runs")).expect("runs");
                let mut bulk = BulkBalances::spilling(&runs, 4096);
                bulk.limits = BookLimits { per_book, most };
                for &(block, m) in moves {
                    bulk.moves.push(MoveRow { seq: bulk.next_seq, block, m }).expect("push");
                    bulk.next_seq += 1;
                }
                bulk.write(&db, &txn).expect("bulk write");
            }
            None => {
                let mut book = BalanceBook::default();
                for &(block, m) in moves {
                    book.push(block, m);
                }
                book.resolve(&txn, u64::MAX)
                    .expect("resolve")
                    .write(&txn, None, Ranking::Kept)
                    .expect("write");
            }
        }
        txn.commit().expect("commit");
        crate::index::balances::check(&db.begin_read().expect("read")).expect("balances check");
        dump(&db).expect("dump")
    }

    #[test]
    fn books_cut_anywhere_replay_as_one() {
        // Three tokens of each kind, few holders, burns past a balance (saturating), in an order
        // only a chain replay gets right.
        let mut state = 7u64;
        let mut next = |bound: u64| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 33) % bound
        };
        let holder = |i: u64| if i == 0 { Address::ZERO } else { Address::with_last_byte(i as u8) };
        let kinds = [TokenKind::Erc20, TokenKind::Erc721, TokenKind::Erc1155];
        let moves: Vec<(u64, BalanceMove)> = (0..3_000u64)
            .map(|i| {
                let t = next(9);
                let kind = kinds[(t % 3) as usize];
                let m = BalanceMove {
                    token: Address::repeat_byte(0x10 + t as u8),
                    kind,
                    from: holder(next(6)),
                    to: holder(next(6)),
                    id: if kind == TokenKind::Erc20 { U256::ZERO } else { U256::from(next(4)) },
                    amount: if kind == TokenKind::Erc721 { U256::from(1) } else { U256::from(next(1_000)) },
                };
                (i / 10, m)
            })
            .collect();
        let want = replayed(&moves, None);
        assert!(!want.is_empty());
        for limits in [(100_000, 100_000), (50, 1_000), (10, 37), (1, 1)] {
            assert_eq!(replayed(&moves, Some(limits)), want, "books of {limits:?}");
        }
    }

    /// Every token's holders, page by page (pages of 3), as `db` serves them: from the top, and
    /// from each mark a walk leaves every 2 holders.
    fn pages(db: &Db, tokens: &[Address]) -> Vec<Vec<(Address, U256)>> {
        use crate::index::balances::{holders_page, holders_page_marked, WindowHolders};
        let txn = db.begin_read().expect("read");
        let none = WindowHolders::default();
        let mut out = Vec::new();
        for token in tokens {
            for idx in (0..12).step_by(3) {
                out.push(holders_page(&txn, token, idx, 3).expect("page"));
            }
            let (whole, marks) = holders_page_marked(&txn, token, 0, 12, &none, None, 0, 2).expect("marks");
            out.push(whole);
            for mark in marks {
                let from = Some(mark);
                out.push(
                    holders_page_marked(&txn, token, mark.position, 3, &none, from, 0, 0).expect("page").0,
                );
            }
        }
        out
    }

    fn entries<T: crate::db::tables::Table>(db: &Db) -> u64 {
        db.begin_read().expect("read").entries::<T>().expect("entries")
    }

    #[test]
    fn a_stage_defers_the_rankings_it_changes_and_the_catch_up_end_builds_them() {
        use crate::db::{state, tables::OtsTokenHolderRanks};
        let token = |t: u8| Address::repeat_byte(0x10 + t);
        let holder = |h: u8| if h == 0 { Address::ZERO } else { Address::with_last_byte(h) };
        let mint = |t: u8, to: u8, amount: u64| BalanceMove {
            token: token(t),
            kind: TokenKind::Erc20,
            from: Address::ZERO,
            to: holder(to),
            id: U256::ZERO,
            amount: U256::from(amount),
        };
        let first: Vec<(u64, BalanceMove)> =
            (0..30u64).map(|i| (i, mint((i % 3) as u8, 1 + (i % 7) as u8, 10 + i * 7 % 13))).collect();
        // The second stage changes tokens 0 and 1: a transfer, a burn of a whole balance.
        let second: Vec<(u64, BalanceMove)> = vec![
            (40, BalanceMove { from: holder(1), ..mint(0, 5, 3) }),
            (41, BalanceMove { from: holder(3), to: Address::ZERO, ..mint(1, 0, 1_000) }),
        ];
        let tokens = [token(0), token(1), token(2)];
        let dir = tempfile::tempdir().expect("tempdir");
        let (bulk, kept) = (dir.path().join("bulk"), dir.path().join("kept"));
        let open = |path: &std::path::Path| Db::open(path, AccessMode::ReadWrite).expect("db");
        let stage = |db: &Db, moves: &[(u64, BalanceMove)]| {
            let txn = db.begin_write().expect("write");
            let runs = RunDir::create(&db.dir().join("runs")).expect("runs");
            let mut stage = BulkBalances::spilling(&runs, 4096);
            for &(block, m) in moves {
                stage.moves.push(MoveRow { seq: stage.next_seq, block, m }).expect("push");
                stage.next_seq += 1;
            }
            stage.write(db, &txn).expect("bulk write");
            txn.commit().expect("commit");
        };
        let batch = |db: &Db, moves: &[(u64, BalanceMove)]| {
            let txn = db.begin_write().expect("write");
            let mut book = BalanceBook::default();
            for &(block, m) in moves {
                book.push(block, m);
            }
            book.resolve(&txn, u64::MAX).expect("resolve").write(&txn, None, Ranking::Kept).expect("write");
            txn.commit().expect("commit");
        };
        let (bulk, kept) = (open(&bulk), open(&kept));
        batch(&kept, &first);
        let want_first = pages(&kept, &tokens);

        // A first stage writes no ranking; pages sort the balances, `check` accepts it.
        stage(&bulk, &first);
        assert!(state::rankings_deferred(&bulk.begin_read().expect("read")).expect("state"));
        assert_eq!(entries::<OtsTokenHolderRanks>(&bulk), 0);
        crate::index::balances::check(&bulk.begin_read().expect("read")).expect("check, deferred");
        assert_eq!(pages(&bulk, &tokens), want_first);

        // The catch-up's end ranks every token once, as a batch would have.
        let txn = bulk.begin_write().expect("write");
        assert_eq!(rank_deferred(&txn).expect("rank"), 3);
        assert_eq!(rank_deferred(&txn).expect("again"), 0, "nothing is deferred any more");
        txn.commit().expect("commit");
        assert_eq!(dump(&bulk).expect("dump"), dump(&kept).expect("dump"));
        assert_eq!(entries::<OtsTokenHolderRanks>(&bulk), entries::<OtsTokenHolderRanks>(&kept));

        // A later stage drops the rankings of the tokens it changes, and only those.
        batch(&kept, &second);
        stage(&bulk, &second);
        let read = bulk.begin_read().expect("read");
        let ranked = |t| read.cursor::<OtsTokenHolderRanks>().expect("cursor").dups(&t).expect("dups").len();
        assert_eq!((ranked(token(0)), ranked(token(1))), (0, 0));
        assert!(ranked(token(2)) > 0, "an untouched token keeps its ranking");
        drop(read);
        crate::index::balances::check(&bulk.begin_read().expect("read")).expect("check, deferred");
        assert_eq!(pages(&bulk, &tokens), pages(&kept, &tokens));

        // A batch's write ranks what a catch-up left deferred before it moves ranks.
        let third = [(50, BalanceMove { from: holder(2), ..mint(0, 6, 1) })];
        batch(&kept, &third);
        batch(&bulk, &third);
        assert!(!state::rankings_deferred(&bulk.begin_read().expect("read")).expect("state"));
        crate::index::balances::check(&bulk.begin_read().expect("read")).expect("check");
        assert_eq!(dump(&bulk).expect("dump"), dump(&kept).expect("dump"));
        assert_eq!(pages(&bulk, &tokens), pages(&kept, &tokens));
    }

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
