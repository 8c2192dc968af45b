//! Property test of the address indexes, holdings and balances: random mints, transfers, burns
//! and self-transfers over two ERC20s, an ERC721 and an ERC1155 (single and batch moves, burns of
//! more than is held), written in random batches with random
//! unwinds (and different blocks after them, as a reorg brings), always equal a plain in-memory
//! model. One busy address makes its lists pass through every counter form (1 byte, 16 bytes,
//! several chunks).

use crate::common;

use std::collections::{BTreeMap, BTreeSet};

use alloy::primitives::{keccak256, Address, Bytes, B256, U256};
use common::transfer_chain::{block_data, raw_tables};
use ots_classifiers::{Fact, LogData, ReceiptData, Standard, TxData, TRANSFER_TOPIC};
use ots_indexer::decode::{TRANSFER_BATCH_TOPIC, TRANSFER_SINGLE_TOPIC};
use ots_indexer::{
    db::{
        compact::compact_into,
        state::{read_checkpoint, Checkpoint},
        tables::*,
        AccessMode, Db,
    },
    index::{
        address_index::{page, IdList},
        balances::{
            holder_count, holders_page, holders_page_knowing, holders_page_marked, multi_balances, owned_ids,
            owner, rank_moves_since, RankingMark, WindowHolders,
        },
        check::check,
        journal::{journal_start, unwind_to},
        write_batch, BatchOptions, ClassifiedBlock,
    },
    txid::TxId,
};

const WINDOW: u64 = 64;

/// A small deterministic generator.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, bound: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % bound
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Erc20,
    Erc721,
    Erc1155,
}

/// What the index must hold, computed the plain way.
#[derive(Debug, Clone, Default, PartialEq)]
struct Model {
    transfers: BTreeMap<(Kind, Address), BTreeSet<u64>>,
    holdings: BTreeMap<(Kind, Address), BTreeMap<Address, u64>>,
    balances: BTreeMap<(Address, Address), U256>,
    owners: BTreeMap<(Address, U256), Address>,
    /// ERC1155: (token, holder, id) → balance.
    multi: BTreeMap<(Address, Address, U256), U256>,
}

impl Model {
    fn apply(&mut self, kind: Kind, token: Address, from: Address, to: Address, value: U256, tx: u64) {
        for party in [from, to] {
            self.transfers.entry((kind, party)).or_default().insert(tx);
            self.holdings.entry((kind, party)).or_default().entry(token).or_insert(tx);
        }
        let amount = match kind {
            Kind::Erc20 => value,
            Kind::Erc721 => {
                if to == Address::ZERO {
                    self.owners.remove(&(token, value));
                } else {
                    self.owners.insert((token, value), to);
                }
                U256::from(1)
            }
            Kind::Erc1155 => unreachable!("ERC1155 moves go through apply_multi"),
        };
        self.shift_total(token, from, to, amount, amount);
    }

    fn shift_total(&mut self, token: Address, from: Address, to: Address, out: U256, into: U256) {
        if from != Address::ZERO {
            let b = self.balances.entry((token, from)).or_default();
            *b = b.saturating_sub(out);
        }
        if to != Address::ZERO {
            let b = self.balances.entry((token, to)).or_default();
            *b = b.saturating_add(into);
        }
        self.balances.retain(|_, b| !b.is_zero());
    }

    /// An ERC1155 move of `moves` (id, amount): an outflow takes at most what is held.
    fn apply_multi(&mut self, token: Address, from: Address, to: Address, moves: &[(U256, U256)], tx: u64) {
        for party in [from, to] {
            self.transfers.entry((Kind::Erc1155, party)).or_default().insert(tx);
            self.holdings.entry((Kind::Erc1155, party)).or_default().entry(token).or_insert(tx);
        }
        for &(id, amount) in moves {
            let mut out = amount;
            if from != Address::ZERO {
                let held = self.multi.get(&(token, from, id)).copied().unwrap_or_default();
                out = amount.min(held);
                self.multi.insert((token, from, id), held - out);
            }
            if to != Address::ZERO {
                let b = self.multi.entry((token, to, id)).or_default();
                *b = b.saturating_add(amount);
            }
            self.multi.retain(|_, b| !b.is_zero());
            self.shift_total(token, from, to, out, amount);
        }
    }
}

fn uint(n: U256) -> Vec<u8> {
    n.to_be_bytes::<32>().to_vec()
}

/// `TransferBatch` data: `(uint256[] ids, uint256[] values)`.
fn batch_data(moves: &[(U256, U256)]) -> Vec<u8> {
    let n = moves.len() as u64;
    let mut out = uint(U256::from(0x40));
    out.extend(uint(U256::from(0x40 + 32 + 32 * n)));
    out.extend(uint(U256::from(n)));
    moves.iter().for_each(|(id, _)| out.extend(uint(*id)));
    out.extend(uint(U256::from(n)));
    moves.iter().for_each(|(_, v)| out.extend(uint(*v)));
    out
}

struct World {
    rng: Lcg,
    tokens: [Address; 4], // ERC20, ERC20, ERC721, ERC1155
    people: Vec<Address>,
    generation: u64,
}

fn word(a: Address) -> B256 {
    B256::left_padding_from(a.as_slice())
}

impl World {
    fn pick_person(&mut self) -> Address {
        // The first person is in most transfers: their lists grow past every counter form.
        if self.rng.next(10) < 6 {
            self.people[0]
        } else {
            self.people[self.rng.next(self.people.len() as u64) as usize]
        }
    }

    /// A random `TransferSingle` or `TransferBatch` of the ERC1155, applied to `model`.
    fn multi_log(&mut self, token: Address, tx: u64, model: &mut Model) -> LogData {
        let from = if self.rng.next(4) == 0 { Address::ZERO } else { self.pick_person() };
        let to = match self.rng.next(7) {
            0 => Address::ZERO,
            1 => from,
            _ => self.pick_person(),
        };
        let ids: Vec<u64> = if self.rng.next(2) == 0 { vec![1 + self.rng.next(4)] } else { vec![1, 3] };
        let moves: Vec<(U256, U256)> = ids
            .iter()
            .map(|&id| {
                let held = model.multi.get(&(token, from, U256::from(id))).copied().unwrap_or_default();
                let amount = match self.rng.next(5) {
                    // Now and then more than is held: logs cannot be trusted to balance.
                    0 => held + U256::from(5),
                    _ if held.is_zero() || from == Address::ZERO => U256::from(1 + self.rng.next(50)),
                    _ => U256::from(1 + self.rng.next(held.to::<u64>())),
                };
                (U256::from(id), amount)
            })
            .collect();
        model.apply_multi(token, from, to, &moves, tx);
        let operator = word(self.people[0]);
        if moves.len() == 1 {
            let data = [uint(moves[0].0), uint(moves[0].1)].concat();
            LogData {
                address: token,
                topics: vec![TRANSFER_SINGLE_TOPIC, operator, word(from), word(to)],
                data: data.into(),
            }
        } else {
            let data = batch_data(&moves);
            LogData {
                address: token,
                topics: vec![TRANSFER_BATCH_TOPIC, operator, word(from), word(to)],
                data: data.into(),
            }
        }
    }

    fn hash(&self, n: u64) -> B256 {
        keccak256([n.to_be_bytes(), self.generation.to_be_bytes()].concat())
    }

    /// Block `n` on top of `parent`, applying its logs to `model`.
    fn block(&mut self, n: u64, parent: B256, model: &mut Model) -> ClassifiedBlock {
        let hash = self.hash(n);
        let mut facts = Vec::new();
        let mut receipts = Vec::new();
        let mut transactions = Vec::new();
        if n == 0 {
            for (i, token) in self.tokens.iter().enumerate() {
                let standard = [Standard::Erc20, Standard::Erc20, Standard::Erc721, Standard::Erc1155][i];
                facts.push(Fact::Matched { standard, address: *token });
            }
        } else {
            let txs = 1 + self.rng.next(8);
            for index in 0..txs {
                let tx = TxId::new(n, index).expect("txid").0;
                let mut logs = Vec::new();
                for _ in 0..1 + self.rng.next(3) {
                    let t = self.rng.next(4) as usize;
                    let token = self.tokens[t];
                    if t == 3 {
                        logs.push(self.multi_log(token, tx, model));
                        continue;
                    }
                    let (kind, from, to, value) = if t < 2 {
                        let from = if self.rng.next(5) == 0 { Address::ZERO } else { self.pick_person() };
                        let to = match self.rng.next(7) {
                            0 => Address::ZERO,
                            1 => from, // a self-transfer
                            _ => self.pick_person(),
                        };
                        let held = model.balances.get(&(token, from)).copied().unwrap_or_default();
                        let value = if from == Address::ZERO || held.is_zero() {
                            U256::from(1 + self.rng.next(1000))
                        } else {
                            U256::from(1 + self.rng.next(held.to::<u64>().max(1)))
                        };
                        (Kind::Erc20, from, to, value)
                    } else {
                        let owned: Vec<(U256, Address)> = model
                            .owners
                            .iter()
                            .filter(|((tk, _), _)| *tk == token)
                            .map(|((_, id), o)| (*id, *o))
                            .collect();
                        if owned.is_empty() || self.rng.next(3) == 0 {
                            let id = U256::from(1 + self.rng.next(1_000_000));
                            if model.owners.contains_key(&(token, id)) {
                                continue;
                            }
                            (Kind::Erc721, Address::ZERO, self.pick_person(), id)
                        } else {
                            let (id, owner) = owned[self.rng.next(owned.len() as u64) as usize];
                            let to = if self.rng.next(6) == 0 { Address::ZERO } else { self.pick_person() };
                            (Kind::Erc721, owner, to, id)
                        }
                    };
                    model.apply(kind, token, from, to, value, tx);
                    let (topics, data) = match kind {
                        Kind::Erc20 => (
                            vec![TRANSFER_TOPIC, word(from), word(to)],
                            Bytes::from(value.to_be_bytes::<32>().to_vec()),
                        ),
                        Kind::Erc721 => {
                            (vec![TRANSFER_TOPIC, word(from), word(to), B256::from(value)], Bytes::new())
                        }
                        Kind::Erc1155 => unreachable!("ERC1155 logs are made by multi_log"),
                    };
                    logs.push(LogData { address: token, topics, data });
                }
                // Each transaction from its own sender, so every nonce is 0 and right.
                transactions.push(TxData {
                    hash: keccak256(tx.to_be_bytes()),
                    from: Address::from_slice(&keccak256(tx.to_be_bytes())[12..]),
                    to: Some(self.tokens[0]),
                    nonce: 0,
                    value: U256::ZERO,
                    mint: None,
                });
                receipts.push(ReceiptData { success: true, contract_address: None, logs, fee: U256::ZERO });
            }
        }
        let block = block_data(n, hash, parent, transactions, receipts);
        ClassifiedBlock { block, facts, probe_misses: vec![] }
    }
}

fn compare(db: &Db, model: &Model, world: &World, what: &str) {
    let txn = db.begin_read().expect("read");
    check(&txn).unwrap_or_else(|e| panic!("{what}: check: {e}"));
    let mut everyone = world.people.clone();
    everyone.push(Address::ZERO);
    for person in &everyone {
        let want =
            |k: Kind| model.transfers.get(&(k, *person)).map(|s| s.iter().copied().collect::<Vec<_>>());
        let erc20 = page(&txn, IdList::Erc20Transfers, person, 0, 100_000).expect("erc20 ids");
        assert_eq!(erc20, want(Kind::Erc20).unwrap_or_default(), "{what}: ERC20 ids of {person}");
        let erc721 = page(&txn, IdList::Erc721Transfers, person, 0, 100_000).expect("erc721 ids");
        assert_eq!(erc721, want(Kind::Erc721).unwrap_or_default(), "{what}: ERC721 ids of {person}");
        let erc1155 = page(&txn, IdList::Erc1155Transfers, person, 0, 100_000).expect("erc1155 ids");
        assert_eq!(erc1155, want(Kind::Erc1155).unwrap_or_default(), "{what}: ERC1155 ids of {person}");
        let multi_token = world.tokens[3];
        let held: Vec<(U256, U256)> = model
            .multi
            .iter()
            .filter(|((t, h, _), _)| *t == multi_token && h == person)
            .map(|((_, _, id), b)| (*id, *b))
            .collect();
        assert_eq!(
            multi_balances(&txn, multi_token, *person).expect("ERC1155 balances"),
            held,
            "{what}: ERC1155 balances of {person}"
        );
        let nft_tokens: BTreeSet<Address> = model.owners.keys().map(|(t, _)| *t).collect();
        for nft in nft_tokens {
            let want: Vec<U256> = model
                .owners
                .iter()
                .filter(|((t, _), o)| *t == nft && *o == person)
                .map(|((_, id), _)| *id)
                .collect();
            assert_eq!(
                owned_ids(&txn, nft, *person).expect("owned ids"),
                want,
                "{what}: ids of {nft} owned by {person}"
            );
        }
        for (kind, table) in [(Kind::Erc20, "erc20"), (Kind::Erc721, "erc721"), (Kind::Erc1155, "erc1155")] {
            let dups = match kind {
                Kind::Erc20 => txn.cursor::<OtsERC20Holdings>().expect("cursor").dups(person),
                Kind::Erc721 => txn.cursor::<OtsERC721Holdings>().expect("cursor").dups(person),
                Kind::Erc1155 => txn.cursor::<OtsERC1155Holdings>().expect("cursor").dups(person),
            }
            .expect("holdings");
            let got: BTreeMap<Address, u64> = dups.iter().map(|h| (h.token, h.first.0)).collect();
            assert_eq!(got.len(), dups.len(), "{what}: one dup per token");
            let want = model.holdings.get(&(kind, *person)).cloned().unwrap_or_default();
            assert_eq!(got, want, "{what}: {table} holdings of {person}");
        }
    }
    for token in &world.tokens {
        let want = ranking(model, token);
        assert_eq!(
            holder_count(&txn, token).expect("count"),
            want.len() as u64,
            "{what}: holders of {token}"
        );
        assert_eq!(holders_page(&txn, token, 0, 10_000).expect("holders"), want, "{what}: ranks of {token}");
        let changed = WindowHolders::of(&txn, token).expect("window holders");
        let knowing = holders_page_knowing(&txn, token, 0, 10_000, &changed).expect("holders");
        assert_eq!(knowing, want, "{what}: ranks of {token}, the window's holders known");
        if want.len() > 2 {
            assert_eq!(holders_page(&txn, token, 1, 1).expect("page"), want[1..2].to_vec());
            let page = holders_page_knowing(&txn, token, 1, 1, &changed).expect("page");
            assert_eq!(page, want[1..2].to_vec());
        }
        // Pages from the marks earlier pages left, a mark every 2 holders: a walk to the end
        // leaves them all; every page from the nearest mark before it is the model's.
        let (whole, marks) =
            holders_page_marked(&txn, token, 0, 10_000, &changed, None, 0, 2).expect("marked walk");
        assert_eq!(whole, want, "{what}: ranks of {token}, walked leaving marks");
        assert_eq!(marks.len(), want.len() / 2, "{what}: a mark every 2 holders");
        for idx in 0..=want.len() as u64 {
            for count in [1, 3] {
                let from = marks.iter().rev().find(|m| m.position <= idx).copied();
                let (page, left) =
                    holders_page_marked(&txn, token, idx, count, &changed, from, u64::MAX, 2).expect("page");
                let start = (idx as usize).min(want.len());
                let end = (start + count as usize).min(want.len());
                assert_eq!(
                    page,
                    want[start..end].to_vec(),
                    "{what}: {token} page {idx}+{count} from {from:?}"
                );
                assert!(left.is_empty());
            }
        }
    }
    for ((token, id), want) in &model.owners {
        let got = owner(&txn, *token, *id);
        assert_eq!(got.expect("owner"), Some(*want), "{what}: owner of {id}");
    }
}

/// The model's holders of `token`, largest balance first, then by address.
fn ranking(model: &Model, token: &Address) -> Vec<(Address, U256)> {
    let mut want: Vec<(Address, U256)> =
        model.balances.iter().filter(|((t, _), _)| t == token).map(|((_, h), b)| (*h, *b)).collect();
    want.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    want
}

/// Each token's ranking marks.
type TokenMarks = Vec<(Address, Vec<RankingMark>)>;

/// Marks of every token's ranking left at an earlier tip, carried into each newer snapshot.
#[derive(Default)]
struct MarksCarrier {
    earlier: Option<(Checkpoint, TokenMarks)>,
    /// How often marks were carried into the newest snapshot, and dropped.
    carried: u32,
    dropped: u32,
}

impl MarksCarrier {
    /// Carries the marks left earlier into the newest snapshot, moved by what the blocks since
    /// did to each ranking, and checks every page read from them against the model; then leaves
    /// marks of this snapshot (one every 2 holders) for the next call.
    fn carry(&mut self, db: &Db, model: &Model, world: &World, what: &str) {
        let txn = db.begin_read().expect("read");
        if let Some((since, marks)) = self.earlier.take() {
            let tokens = world.tokens.iter().copied().collect();
            match rank_moves_since(&txn, since, &tokens).expect("moves") {
                None => self.dropped += 1,
                Some(mut moves) => {
                    self.carried += 1;
                    for (token, marks) in marks {
                        let moves = moves.remove(&token).unwrap_or_default();
                        let carried: Vec<RankingMark> = marks
                            .iter()
                            .map(|m| {
                                m.moved(&moves)
                                    .unwrap_or_else(|| panic!("{what}: {token}: {m:?} cannot move"))
                            })
                            .collect();
                        let want = ranking(model, &token);
                        let changed = WindowHolders::of(&txn, &token).expect("window holders");
                        for idx in 0..=want.len() as u64 + 1 {
                            let from = carried.iter().rev().find(|m| m.position <= idx).copied();
                            let (page, _) =
                                holders_page_marked(&txn, &token, idx, 2, &changed, from, u64::MAX, 2)
                                    .expect("page");
                            let start = (idx as usize).min(want.len());
                            let end = (start + 2).min(want.len());
                            assert_eq!(
                                page,
                                want[start..end].to_vec(),
                                "{what}: {token} page {idx} from carried {from:?}"
                            );
                        }
                    }
                }
            }
        }
        let Some(tip) = read_checkpoint(&txn).expect("tip") else { return };
        let mut marks = Vec::new();
        for token in &world.tokens {
            let changed = WindowHolders::of(&txn, token).expect("window holders");
            let (_, left) = holders_page_marked(&txn, token, 0, 10_000, &changed, None, 0, 2).expect("walk");
            marks.push((*token, left));
        }
        self.earlier = Some((tip, marks));
    }
}

fn run(seed: u64) {
    let mut world = World {
        rng: Lcg(seed),
        tokens: [
            Address::repeat_byte(0x20),
            Address::repeat_byte(0x21),
            Address::repeat_byte(0x72),
            Address::repeat_byte(0x11),
        ],
        people: (1..=6u8).map(Address::repeat_byte).collect(),
        generation: 0,
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("db");
    // Model state after each block, to go back to on an unwind.
    let mut history: Vec<(Model, B256)> = Vec::new();
    let mut model = Model::default();
    let mut unwinds = 0;
    let mut marks = MarksCarrier::default();
    while history.len() < 240 {
        let next = history.len() as u64;
        let batch_len = 1 + world.rng.next(6);
        let mut batch = Vec::new();
        for n in next..next + batch_len {
            let parent = if n == 0 { B256::ZERO } else { history[n as usize - 1].1 };
            let block = world.block(n, parent, &mut model);
            history.push((model.clone(), block.block.hash));
            batch.push(block);
        }
        // Now and then a window shorter than the batch: its oldest blocks leave the window with
        // the batch itself, so nothing that would undo them is written.
        let window = if world.rng.next(4) == 0 { 1 + world.rng.next(batch_len) } else { WINDOW };
        write_batch(&db, &batch, BatchOptions::window(window)).expect("write");
        marks.carry(&db, &model, &world, &format!("seed {seed}, block {}", history.len() - 1));
        let tip = history.len() as u64 - 1;
        if tip > 10 && world.rng.next(6) == 0 {
            let txn = db.begin_write().expect("write");
            // Anywhere the undo journal still covers (it keeps the newest blocks ever written).
            let oldest = journal_start(&txn).expect("journal").expect("a journal");
            if oldest == tip {
                continue; // a window of one block: nothing to unwind to
            }
            let to = oldest + world.rng.next(tip - oldest);
            unwind_to(&txn, to).expect("unwind");
            txn.commit().expect("commit");
            history.truncate(to as usize + 1);
            model = history[to as usize].0.clone();
            world.generation += 1; // the blocks that follow differ, as after a reorg
            unwinds += 1;
            compare(&db, &model, &world, &format!("seed {seed}, after unwind to {to}"));
            marks.carry(&db, &model, &world, &format!("seed {seed}, after unwind to {to}"));
        }
    }
    assert!(unwinds >= 3, "seed {seed}: only {unwinds} unwinds");
    // Most blocks carry the marks of the one before; unwinds below them and blocks that leave
    // the window at once drop them.
    assert!(
        marks.carried > 20 && marks.dropped > 0,
        "seed {seed}: {} carried, {} dropped",
        marks.carried,
        marks.dropped
    );
    compare(&db, &model, &world, &format!("seed {seed}, at the end"));
    let busiest = model.transfers.get(&(Kind::Erc20, world.people[0])).map_or(0, BTreeSet::len);
    assert!(busiest > 2 * 244, "seed {seed}: the busy address has only {busiest} ids");
    compacted_copy_goes_on(&db, &mut world, history, model, seed);
}

/// A compacted copy holds every table byte for byte, and takes batches and unwinds exactly as
/// the database it was made from.
fn compacted_copy_goes_on(
    db: &Db,
    world: &mut World,
    mut history: Vec<(Model, B256)>,
    mut model: Model,
    seed: u64,
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let copies = compact_into(db, &dir.path().join("copy")).expect("compact");
    assert!(copies.iter().all(|c| c.bytes_after <= c.bytes_before), "seed {seed}: a table grew: {copies:?}");
    assert!(compact_into(db, &dir.path().join("copy")).is_err(), "the copy must not overwrite a database");
    let copy = Db::open(&dir.path().join("copy"), AccessMode::ReadWrite).expect("copy");
    assert_eq!(raw_tables(db), raw_tables(&copy), "seed {seed}: the copy differs");
    compare(&copy, &model, world, &format!("seed {seed}, compacted"));
    for _ in 0..3 {
        let next = history.len() as u64;
        let mut batch = Vec::new();
        for n in next..next + 4 {
            let block = world.block(n, history[n as usize - 1].1, &mut model);
            history.push((model.clone(), block.block.hash));
            batch.push(block);
        }
        write_batch(db, &batch, BatchOptions::window(WINDOW)).expect("write");
        write_batch(&copy, &batch, BatchOptions::window(WINDOW)).expect("write the copy");
    }
    let to = history.len() as u64 - 7;
    for d in [db, &copy] {
        let txn = d.begin_write().expect("write");
        unwind_to(&txn, to).expect("unwind");
        txn.commit().expect("commit");
    }
    model = history[to as usize].0.clone();
    assert_eq!(raw_tables(db), raw_tables(&copy), "seed {seed}: the copy went another way");
    compare(&copy, &model, world, &format!("seed {seed}, compacted, written on and unwound"));
}

#[test]
fn indexes_equal_a_plain_model() {
    for seed in [1, 7, 42] {
        run(seed);
    }
}
