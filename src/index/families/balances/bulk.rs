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
//! replayed here, from what the earlier ones wrote. The replay starts beside the other
//! families' writes ([`Gatherer::resolve`]): the runs' merge and the first books' reads are done
//! by the time this family writes.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use alloy_primitives::{Address, U256};
use signet_libmdbx::tx::TransactionKind;
use tracing::{debug, warn};

use std::sync::mpsc::SyncSender;

use super::book::{BalanceBook, BalanceMove, Ranking, Resolved, WriteTimes};
use super::staged_owners;
use crate::index::{
    error::WriteError,
    gather::{BlockRows, Gatherer, Writing},
    undo::UndoLog,
    window::WindowStart,
};
use crate::{
    db::{Db, DbResult, Txn, WriteTxn},
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
/// Books replayed beside the other families' writes, held until this family writes: the
/// replay's start (the runs' merge, the first snapshot reads) is then not waited for. Each
/// costs its moves' memory until written, over the three books the write keeps alive. Four
/// rather than two halved an early stage's wait, at no measured heap (docs/benchmarks-history.md,
/// "four balance books replayed ahead").
const BOOKS_AHEAD: usize = 4;

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
    /// The stage's newest block: its owners' segment's (`staged_owners`).
    newest: Option<u64>,
    limits: BookLimits,
    /// Once resolved beside the other families: the books replayed so far, and the replay.
    ahead: Option<(Vec<Book>, Replay)>,
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

    fn resolves_beside(&self) -> bool {
        true
    }

    /// The snapshot is the state the stage's transaction started from: it holds the writer
    /// lock, and no other family writes a balance table.
    fn resolve(&mut self, db: &Db, _: WindowStart) -> Result<(), WriteError> {
        Ok(self.replay_ahead(db)?)
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
            newest: None,
            limits: BookLimits { per_book: MOVES_PER_BOOK, most: MOST_MOVES_PER_BOOK },
            ahead: None,
        }
    }

    /// Sorts the moves and replays the first [`BOOKS_AHEAD`] books from a snapshot of `db`
    /// (the state the stage's transaction started from, which must not have written a balance
    /// table yet). Without a snapshot (every reader slot taken) nothing is replayed ahead, and
    /// the owners are staged, which is right whatever the tables hold.
    fn replay_ahead(&mut self, db: &Db) -> DbResult<()> {
        let started = Instant::now();
        let moves = std::mem::take(&mut self.moves).into_sorted()?;
        let sorted = started.elapsed();
        let mut books = Vec::with_capacity(BOOKS_AHEAD);
        let snapshot = db.begin_read();
        let staged = match &snapshot {
            Ok(snapshot) => staged_owners::stages(snapshot)?,
            Err(_) => true,
        };
        let mut replay = Replay::new(moves, self.limits, staged);
        match snapshot {
            Ok(snapshot) => {
                while books.len() < BOOKS_AHEAD {
                    match replay.next_book(&snapshot)? {
                        Some(book) => books.push(book),
                        None => break,
                    }
                }
            }
            Err(error) => {
                warn!(target: "ots::index", %error, "no read snapshot for balances; replaying them when they are written");
            }
        }
        // Where the writer's wait for this thread goes, when the other families are written
        // first (docs/benchmarks.md, "Stage commits that do not wait for the disk").
        debug!(
            target: "ots::index",
            books = books.len(),
            sort_seconds = sorted.as_secs_f64(),
            replay_seconds = (started.elapsed() - sorted).as_secs_f64(),
            "balance books replayed ahead"
        );
        self.ahead = Some((books, replay));
        Ok(())
    }

    /// Collects the moves of block `block`'s token logs, in log order (blocks in chain order).
    pub fn collect(&mut self, block: u64, logs: &[(TxId, TokenLog<'_>)]) -> DbResult<()> {
        self.newest = self.newest.max(Some(block));
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
    /// replayed from (`txn` must not have written a balance table yet). The ERC721 owners of
    /// a stage after a catch-up's first go to a segment of the stage's own (`staged_owners`).
    pub fn write(self, db: &Db, txn: &WriteTxn) -> DbResult<()> {
        let (ahead, replay) = match self.ahead {
            Some(ahead) => ahead,
            None => {
                let staged = staged_owners::stages(txn)?;
                (Vec::new(), Replay::new(self.moves.into_sorted()?, self.limits, staged))
            }
        };
        let mut segment = match (replay.owners_staged, self.newest) {
            (true, Some(newest)) => Some(staged_owners::Appending::begin(txn, newest)?),
            _ => None,
        };
        std::thread::scope(|scope| {
            let (books, resolved) = std::sync::mpsc::sync_channel::<DbResult<Book>>(1);
            scope.spawn(move || {
                if let Err(e) = replay_books(db, replay, &books) {
                    let _ = books.send(Err(e));
                }
            });
            // The books replayed ahead come first: the replay goes on from where they end.
            let resolved = ahead.into_iter().map(Ok).chain(resolved);
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
                tables.add(resolved.write(txn, None, Ranking::Deferred, segment.as_mut())?);
                writing += since.elapsed();
                since = Instant::now();
                books += 1;
            }
            if books > 0 {
                crate::db::state::set_rankings_deferred(txn, true)?;
            }
            let merged_owners = match segment {
                Some(segment) => segment.finish()?,
                None => 0,
            };
            debug!(
                target: "ots::index",
                books,
                replay_wait_seconds = waited.as_secs_f64(),
                write_seconds = writing.as_secs_f64(),
                balances_seconds = tables.balances.as_secs_f64(),
                ranks_seconds = tables.ranks.as_secs_f64(),
                owners_seconds = tables.owners.as_secs_f64(),
                multi_seconds = tables.multi.as_secs_f64(),
                merged_owners,
                "balance books written"
            );
            Ok(())
        })
    }
}

/// A book ready to be written.
#[derive(Debug)]
enum Book {
    /// Whole tokens, replayed from the snapshot.
    Resolved(Box<Resolved>),
    /// The continuation of a token cut between books: to be replayed from what the book
    /// before it wrote.
    Cut(BalanceBook),
}

/// The sorted moves being gathered into books, each whole-token book replayed from a snapshot.
#[derive(Debug)]
struct Replay {
    moves: Sorted<MoveRow>,
    limits: BookLimits,
    /// Whether the books' owners go to the stage's segment, unread.
    owners_staged: bool,
    /// The book being filled.
    book: BalanceBook,
    /// The token of the book's last move.
    last: Option<Address>,
    /// Whether the book being filled continues a token cut at the end of the one before.
    continues: bool,
    /// Whether every move has gone into a book.
    done: bool,
}

impl Replay {
    fn new(moves: Sorted<MoveRow>, limits: BookLimits, owners_staged: bool) -> Self {
        let book = if owners_staged { BalanceBook::staging_owners() } else { BalanceBook::default() };
        Self { moves, limits, owners_staged, book, last: None, continues: false, done: false }
    }

    fn empty_book(&self) -> BalanceBook {
        if self.owners_staged {
            BalanceBook::staging_owners()
        } else {
            BalanceBook::default()
        }
    }

    /// The next book: replayed from `snapshot` (the state the stage started from), or, where it
    /// continues a cut token, left for the write to replay from what the book before wrote.
    fn next_book<K: TransactionKind>(&mut self, snapshot: &Txn<K>) -> DbResult<Option<Book>> {
        if self.done {
            return Ok(None);
        }
        let full = loop {
            let Some(row) = self.moves.next() else {
                self.done = true;
                let empty = self.empty_book();
                break std::mem::replace(&mut self.book, empty);
            };
            let MoveRow { block, m, .. } = row?;
            let boundary = self.last.is_some_and(|t| t != m.token);
            self.last = Some(m.token);
            if (boundary && self.book.len() >= self.limits.per_book) || self.book.len() >= self.limits.most {
                let empty = self.empty_book();
                let full = std::mem::replace(&mut self.book, empty);
                self.book.push(block, m);
                let continues = std::mem::replace(&mut self.continues, !boundary);
                return Self::ready(full, continues, snapshot).map(Some);
            }
            self.book.push(block, m);
        };
        if full.is_empty() {
            return Ok(None);
        }
        Self::ready(full, self.continues, snapshot).map(Some)
    }

    fn ready<K: TransactionKind>(book: BalanceBook, continues: bool, snapshot: &Txn<K>) -> DbResult<Book> {
        Ok(if continues {
            Book::Cut(book)
        } else {
            Book::Resolved(Box::new(book.resolve(snapshot, WindowStart::Closed.first_kept())?))
        })
    }
}

/// Replays the books `replay` has left from a snapshot of `db`, sending each to `out` in order.
fn replay_books(db: &Db, mut replay: Replay, out: &SyncSender<DbResult<Book>>) -> DbResult<()> {
    let snapshot = db.begin_read()?;
    while let Some(book) = replay.next_book(&snapshot)? {
        if out.send(Ok(book)).is_err() {
            break;
        }
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

    const DEFAULT_LIMITS: BookLimits = BookLimits { per_book: MOVES_PER_BOOK, most: MOST_MOVES_PER_BOOK };

    /// A stage's balances holding `moves` (block, move; blocks in chain order), in books of
    /// `limits`.
    fn stage_of(runs: &Arc<RunDir>, moves: &[(u64, BalanceMove)], limits: BookLimits) -> BulkBalances {
        let mut stage = BulkBalances::spilling(runs, 4096);
        stage.limits = limits;
        for &(block, m) in moves {
            stage.newest = stage.newest.max(Some(block));
            stage.moves.push(MoveRow { seq: stage.next_seq, block, m }).expect("push");
            stage.next_seq += 1;
        }
        stage
    }

    /// Writes `moves` (block, move) as one batch does, every block settled.
    fn batch(db: &Db, moves: &[(u64, BalanceMove)]) {
        let txn = db.begin_write().expect("write");
        let mut book = BalanceBook::default();
        for &(block, m) in moves {
            book.push(block, m);
        }
        book.resolve(&txn, u64::MAX).expect("resolve").write(&txn, None, Ranking::Kept, None).expect("write");
        txn.commit().expect("commit");
    }

    /// Numbers from `seed`, each below the bound it is asked with.
    fn numbers(mut state: u64) -> impl FnMut(u64) -> u64 {
        move |bound| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 33) % bound
        }
    }

    /// Holder `i`, the zero address for 0.
    fn holder(i: u64) -> Address {
        if i == 0 {
            Address::ZERO
        } else {
            Address::with_last_byte(i as u8)
        }
    }

    /// Replays `moves` (block, move) into a fresh database through bulk books of the given
    /// limits, or (`None`) through one book resolved in the write transaction; returns the dump.
    fn replayed(
        moves: &[(u64, BalanceMove)],
        limits: Option<(usize, usize)>,
        ahead: bool,
    ) -> Vec<crate::index::check::DumpEntry> {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("db");
        let txn = db.begin_write().expect("write");
        match limits {
            Some((per_book, most)) => {
                let runs = RunDir::create(&dir.path().join("runs")).expect("runs");
                let mut bulk = stage_of(&runs, moves, BookLimits { per_book, most });
                if ahead {
                    // As a stage does: the first books replayed while other families write.
                    bulk.replay_ahead(&db).expect("replay ahead");
                    let held = bulk.ahead.as_ref().map_or(0, |(books, _)| books.len());
                    assert!(held <= BOOKS_AHEAD && (held > 0 || moves.is_empty()));
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
                    .write(&txn, None, Ranking::Kept, None)
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
        let mut next = numbers(7);
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
        let want = replayed(&moves, None, false);
        assert!(!want.is_empty());
        for limits in [(100_000, 100_000), (50, 1_000), (10, 37), (1, 1)] {
            for ahead in [false, true] {
                assert_eq!(replayed(&moves, Some(limits), ahead), want, "books of {limits:?}, ahead {ahead}");
            }
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
            stage_of(&runs, moves, DEFAULT_LIMITS).write(db, &txn).expect("bulk write");
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
    fn later_stages_stage_owners_that_read_and_fold_as_written_in_place() {
        use crate::db::tables::{OtsERC721Owners, OtsOwnersStaged};
        use crate::index::balances::{owned_ids, owner};
        let mut next = numbers(11);
        let tokens = [Address::repeat_byte(0x31), Address::repeat_byte(0x32)];
        // 274 stages of 40 moves: ERC721 mints, transfers and burns of few ids, so that later
        // stages move ids earlier ones set; an ERC20 beside them.
        let stages: Vec<Vec<(u64, BalanceMove)>> = (0..274u64)
            .map(|stage| {
                (0..40u64)
                    .map(|i| {
                        let block = stage * 10 + i / 4;
                        let erc20 = next(5) == 0;
                        let m = BalanceMove {
                            token: if erc20 { Address::repeat_byte(0x20) } else { tokens[next(2) as usize] },
                            kind: if erc20 { TokenKind::Erc20 } else { TokenKind::Erc721 },
                            from: holder(next(5)),
                            to: holder(next(5)),
                            id: if erc20 { U256::ZERO } else { U256::from(next(300)) },
                            amount: U256::from(if erc20 { 1 + next(9) } else { 1 }),
                        };
                        (block, m)
                    })
                    .collect()
            })
            .collect();
        let dir = tempfile::tempdir().expect("tempdir");
        let open = |name: &str| Db::open(&dir.path().join(name), AccessMode::ReadWrite).expect("db");
        let (bulk, kept) = (open("bulk"), open("kept"));
        let runs = RunDir::create(&dir.path().join("runs")).expect("runs");
        // Every owner and every holder's ids, as `db` serves them.
        let owners = |db: &Db| {
            let txn = db.begin_read().expect("read");
            let mut out = Vec::new();
            for token in tokens {
                for id in 0..300u64 {
                    out.push(owner(&txn, token, U256::from(id)).expect("owner"));
                }
                for h in 1..5u64 {
                    out.push(
                        owned_ids(&txn, token, holder(h)).expect("owned").first().map(|_| Address::ZERO),
                    );
                    let ids = owned_ids(&txn, token, holder(h)).expect("owned");
                    out.extend(ids.into_iter().map(|id| Some(Address::from_word(id.into()))));
                }
            }
            out
        };
        for (n, moves) in stages.iter().enumerate() {
            let txn = bulk.begin_write().expect("write");
            // Small books, a token cut across several of them: later books set ids again.
            let mut stage = stage_of(&runs, moves, BookLimits { per_book: 7, most: 11 });
            if n % 2 == 1 {
                stage.replay_ahead(&bulk).expect("replay ahead");
            }
            stage.write(&bulk, &txn).expect("bulk write");
            txn.commit().expect("commit");
            batch(&kept, moves);
            let read = bulk.begin_read().expect("read");
            let segments = staged_owners::segments(&read).expect("segments");
            if n == 0 {
                assert!(segments.is_empty(), "the first stage fills the table");
            } else {
                assert!(!segments.is_empty(), "stage {n} staged its owners");
            }
            staged_owners::check(&read, Some(moves[moves.len() - 1].0)).expect("segments check");
            drop(read);
            if n % 15 == 0 || n + 3 >= stages.len() {
                assert_eq!(owners(&bulk), owners(&kept), "owners after stage {n}");
            }
        }
        // 273 staged stages: one segment of tier 2 (256 stages), one of tier 1, one of tier 0.
        let read = bulk.begin_read().expect("read");
        let tiers: Vec<u8> =
            staged_owners::segments(&read).expect("segments").iter().map(|s| s.tier).collect();
        assert_eq!(tiers, [2, 1, 0]);
        drop(read);
        assert_eq!(dump(&bulk).expect("dump"), dump(&kept).expect("dump"), "folded as written in place");
        // The fold a catch-up's end makes, and a batch's write after it.
        let txn = bulk.begin_write().expect("write");
        let before = bulk.begin_read().expect("read");
        let staged = entries::<OtsOwnersStaged>(&bulk);
        assert!(staged * 2 >= entries::<OtsERC721Owners>(&bulk), "the fold rewrites the table");
        assert_eq!(staged_owners::fold(&txn, Some(&before)).expect("fold"), staged);
        drop(before);
        txn.commit().expect("commit");
        assert_eq!(entries::<OtsOwnersStaged>(&bulk), 0);
        assert_eq!(entries::<OtsERC721Owners>(&bulk), entries::<OtsERC721Owners>(&kept));
        assert_eq!(owners(&bulk), owners(&kept));
    }

    #[test]
    fn a_batch_after_staged_stages_folds_them_before_it_writes() {
        use crate::db::tables::OtsOwnersStaged;
        use crate::index::balances::owner;
        let token = Address::repeat_byte(0x31);
        let nft = |from: u8, to: u8, id: u64| BalanceMove {
            token,
            kind: TokenKind::Erc721,
            from: if from == 0 { Address::ZERO } else { Address::with_last_byte(from) },
            to: if to == 0 { Address::ZERO } else { Address::with_last_byte(to) },
            id: U256::from(id),
            amount: U256::from(1),
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("db");
        let runs = RunDir::create(&dir.path().join("runs")).expect("runs");
        let stage = |moves: &[(u64, BalanceMove)]| {
            let txn = db.begin_write().expect("write");
            stage_of(&runs, moves, DEFAULT_LIMITS).write(&db, &txn).expect("bulk write");
            txn.commit().expect("commit");
        };
        stage(&[(1, nft(0, 1, 1)), (1, nft(0, 1, 2))]);
        // Id 1 burnt, id 2 moved, in a segment.
        stage(&[(2, nft(1, 0, 1)), (2, nft(1, 2, 2))]);
        assert!(entries::<OtsOwnersStaged>(&db) > 0);
        let read = db.begin_read().expect("read");
        assert_eq!(owner(&read, token, U256::from(1)).expect("owner"), None);
        assert_eq!(owner(&read, token, U256::from(2)).expect("owner"), Some(Address::with_last_byte(2)));
        drop(read);
        // A batch reads id 2's owner through the segment (the burn of id 1 too), then folds.
        let txn = db.begin_write().expect("write");
        let mut book = BalanceBook::default();
        book.push(3, nft(2, 3, 2));
        book.push(3, nft(0, 4, 1));
        let resolved = book.resolve(&txn, u64::MAX).expect("resolve");
        staged_owners::fold(&txn, None).expect("fold");
        resolved.write(&txn, None, Ranking::Kept, None).expect("write");
        txn.commit().expect("commit");
        assert_eq!(entries::<OtsOwnersStaged>(&db), 0);
        let read = db.begin_read().expect("read");
        assert_eq!(owner(&read, token, U256::from(1)).expect("owner"), Some(Address::with_last_byte(4)));
        assert_eq!(owner(&read, token, U256::from(2)).expect("owner"), Some(Address::with_last_byte(3)));
        crate::index::balances::check(&read).expect("check");
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
