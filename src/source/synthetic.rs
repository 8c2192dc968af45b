//! A generated chain shaped like Ethereum mainnet, deterministic from a seed, for benchmarks at
//! scale: recorded with `capture` (examples/gen_chain.rs), it replays with `sync --source`.
//!
//! The ratios ([`Shape::MAINNET`]) and where they come from are in docs/benchmarks-history.md. Blocks
//! must be asked for in order (the generator keeps the senders' nonces and the populations of
//! addresses and contracts as it goes). Every contract answers the classifiers' probes as its
//! kind would, the kind being written into its address's first byte, so probing needs no state.

use std::sync::Mutex;

use alloy_primitives::{keccak256, Address, Bytes, B256, U256};
use ots_classifiers::{
    minimal_proxy_code, selector, BlockData, BoxFuture, CallFrame, CallOutcome, ChainError, ChainView,
    FrameKind, LogData, ReceiptData, TxData, Withdrawal, ERC1155_ID, ERC165_ID, ERC721_ID,
    ERC721_METADATA_ID, TRANSFER_TOPIC,
};

use super::{BlockSource, SourceError};
use crate::{
    db::state::ChainIdentity,
    decode::{TRANSFER_BATCH_TOPIC, TRANSFER_SINGLE_TOPIC},
};

/// Chain id of generated chains (no public chain uses it).
pub const SYNTHETIC_CHAIN_ID: u64 = 7_770_001;

/// How often each kind of thing happens; see docs/benchmarks-history.md for the sources.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    /// Transactions a block holds, on average (blocks hold 2/3 to 4/3 of it).
    pub transactions_per_block: u64,
    /// Share of transactions that create at least one contract.
    pub creating: f64,
    /// Share of those created by a factory inside a transaction (the rest are deployments).
    pub by_factory: f64,
    /// Shares of created contracts: EIP-1167 clones, ERC20, ERC721, ERC1155, ERC4626 (the rest
    /// plain contracts).
    pub clones: f64,
    /// See [`Shape::clones`].
    pub erc20: f64,
    /// See [`Shape::clones`].
    pub erc721: f64,
    /// See [`Shape::clones`].
    pub erc1155: f64,
    /// See [`Shape::clones`].
    pub erc4626: f64,
    /// Share of transactions with token transfers.
    pub with_transfers: f64,
    /// Transfer logs per such transaction, on average.
    pub logs_per_transfer_tx: f64,
    /// Shares of transfer logs of ERC721 and ERC1155 tokens (the rest ERC20).
    pub erc721_logs: f64,
    /// See [`Shape::erc721_logs`].
    pub erc1155_logs: f64,
    /// Share of transactions whose contract passes ETH on in an internal call.
    pub internal_value: f64,
    /// Share of transactions that revert.
    pub reverted: f64,
    /// Share of transactions that selfdestruct a contract.
    pub selfdestructs: f64,
    /// Chance that a transaction's sender is a new address.
    pub new_sender: f64,
    /// Chance that a recipient is a new address.
    pub new_recipient: f64,
    /// Chance that a token transfer's sender or receiver is new to that token (a new (holder,
    /// token) pair); otherwise one of the token's earlier holders, Zipf-ranked by arrival.
    pub new_holding: f64,
    /// Withdrawals per block.
    pub withdrawals_per_block: u64,
}

impl Shape {
    /// Mainnet around block 18.08 M.
    pub const MAINNET: Self = Self {
        transactions_per_block: 150,
        creating: 0.0275,
        by_factory: 0.6,
        clones: 0.237,
        erc20: 0.0156,
        erc721: 0.057,
        erc1155: 0.003,
        erc4626: 0.0002,
        with_transfers: 0.406,
        logs_per_transfer_tx: 6.2,
        erc721_logs: 0.13,
        erc1155_logs: 0.02,
        internal_value: 0.08,
        reverted: 0.03,
        selfdestructs: 0.0005,
        new_sender: 0.07,
        new_recipient: 0.05,
        new_holding: 0.033,
        withdrawals_per_block: 16,
    };
}

/// What an address is; contracts carry it in their first byte (`0x80 | kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Kind {
    Plain = 0,
    Factory = 1,
    Erc20 = 2,
    Erc721 = 3,
    Erc1155 = 4,
    Clone = 5,
    Vault = 6,
    Router = 7,
}

const KINDS: usize = 8;

impl Kind {
    const fn of(address: &Address) -> Option<Self> {
        let b = address.0 .0[0];
        if b & 0x80 == 0 {
            return None;
        }
        Some(match b & 0x7f {
            1 => Self::Factory,
            2 => Self::Erc20,
            3 => Self::Erc721,
            4 => Self::Erc1155,
            5 => Self::Clone,
            6 => Self::Vault,
            7 => Self::Router,
            _ => Self::Plain,
        })
    }
}

/// SplitMix64: small, fast, and the same everywhere.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }

    /// A rank in `0..n`, Zipf-like (log-uniform: rank r has weight ~1/r), rank 0 the most drawn.
    fn zipf(&mut self, n: u64) -> u64 {
        if n <= 1 {
            return 0;
        }
        let r = (self.unit() * (n as f64).ln()).exp() as u64;
        r.saturating_sub(1).min(n - 1)
    }

    /// 1 + a geometric count with mean `mean − 1`, at most 100.
    fn count(&mut self, mean: f64) -> u64 {
        let p = 1.0 / mean.max(1.0);
        let mut n = 1;
        while n < 100 && !self.chance(p) {
            n += 1;
        }
        n
    }
}

#[derive(Debug)]
struct State {
    rng: Rng,
    next_block: u64,
    parent: B256,
    transactions_left: u64,
    /// Nonce of each sender, by index (senders are EOAs `0..nonces.len()`).
    nonces: Vec<u32>,
    /// EOAs that only ever received.
    receivers: u64,
    /// Contracts of each kind so far.
    contracts: [u64; KINDS],
    /// Holders of each token (EOA numbers), by kind then token number, in order of arrival.
    holders: [Vec<Vec<u64>>; KINDS],
    withdrawal_index: u64,
}

/// The generated chain (see the module's doc).
#[derive(Debug)]
pub struct SyntheticChain {
    seed: u64,
    shape: Shape,
    last_block: u64,
    state: Mutex<State>,
}

fn word(a: &Address) -> B256 {
    a.into_word()
}

fn u256_word(v: u64) -> [u8; 32] {
    U256::from(v).to_be_bytes::<32>()
}

fn abi_string(s: &str) -> Bytes {
    let mut out = u256_word(32).to_vec();
    out.extend_from_slice(&u256_word(s.len() as u64));
    let mut data = s.as_bytes().to_vec();
    data.resize(s.len().div_ceil(32) * 32, 0);
    out.extend_from_slice(&data);
    out.into()
}

impl SyntheticChain {
    /// A chain of at least `transactions` transactions (the last block is whole) shaped as
    /// `shape`, the same for the same `seed`.
    pub fn new(seed: u64, transactions: u64, shape: Shape) -> Self {
        let per_block = shape.transactions_per_block.max(1);
        // Block 0 is the genesis (no transactions); block 1 deploys the factories and routers.
        let last_block = transactions.div_ceil(per_block) + 1;
        let state = State {
            rng: Rng(seed ^ 0x6f74_732d_696e_6478),
            next_block: 0,
            parent: B256::ZERO,
            transactions_left: transactions,
            nonces: Vec::new(),
            receivers: 0,
            contracts: [0; KINDS],
            holders: Default::default(),
            withdrawal_index: 0,
        };
        Self { seed, shape, last_block, state: Mutex::new(state) }
    }

    /// The last block's number.
    pub const fn last_block(&self) -> u64 {
        self.last_block
    }

    fn address(&self, tag: u8, index: u64) -> Address {
        let mut a = Address::from_slice(
            &keccak256([self.seed.to_be_bytes(), [tag; 8], index.to_be_bytes()].concat())[12..],
        );
        a.0 .0[0] = tag;
        a
    }

    fn contract(&self, kind: Kind, index: u64) -> Address {
        self.address(0x80 | kind as u8, index)
    }

    /// Externally owned account `index` (senders and receivers share one numbering: senders
    /// are even, receivers odd).
    fn eoa(&self, index: u64) -> Address {
        self.address((index % 0x7f) as u8, index)
    }

    fn generate(&self, s: &mut State, number: u64) -> BlockData {
        let hash = keccak256([self.seed.to_be_bytes(), number.to_be_bytes()].concat());
        let mut b = BlockData {
            number,
            hash,
            parent_hash: s.parent,
            timestamp: 1_438_269_973 + number * 12,
            coinbase: self.eoa(2 * s.rng.zipf(50) + 1),
            gas_limit: 30_000_000,
            transactions: Vec::new(),
            receipts: Vec::new(),
            frames: Some(Vec::new()),
            withdrawals: Vec::new(),
            code_removed: Vec::new(),
        };
        s.parent = hash;
        if number == 1 {
            // The contracts every later block calls: factories, routers, and the first tokens
            // of each kind (so that even a short chain moves every kind of token).
            for (kind, count) in [
                (Kind::Factory, 8),
                (Kind::Router, 8),
                (Kind::Erc20, 4),
                (Kind::Erc721, 2),
                (Kind::Erc1155, 1),
            ] {
                for _ in 0..count {
                    let to = self.contract(kind, s.contracts[kind as usize]);
                    s.contracts[kind as usize] += 1;
                    self.push_deployment(s, &mut b, to);
                }
            }
        } else if number > 1 {
            let per = self.shape.transactions_per_block;
            let n = (per * 2 / 3 + s.rng.below(per * 2 / 3 + 1)).min(s.transactions_left).max(1);
            for _ in 0..n {
                self.push_transaction(s, &mut b);
            }
            for _ in 0..self.shape.withdrawals_per_block {
                b.withdrawals.push(Withdrawal {
                    index: s.withdrawal_index,
                    validator_index: s.rng.zipf(1_000_000),
                    address: self.eoa(2 * s.rng.zipf(100_000) + 1),
                    amount_gwei: 10_000_000 + s.rng.below(10_000_000),
                });
                s.withdrawal_index += 1;
            }
        }
        s.transactions_left = s.transactions_left.saturating_sub(b.transactions.len() as u64);
        b
    }

    fn sender(&self, s: &mut State) -> (Address, u64) {
        let (a, nonce, _) = self.sender_numbered(s);
        (a, nonce)
    }

    /// A sender, its nonce and its EOA number.
    fn sender_numbered(&self, s: &mut State) -> (Address, u64, u64) {
        let i = if s.nonces.is_empty() || s.rng.chance(self.shape.new_sender) {
            s.nonces.push(0);
            s.nonces.len() - 1
        } else {
            s.rng.zipf(s.nonces.len() as u64) as usize
        };
        let nonce = s.nonces[i];
        s.nonces[i] += 1;
        (self.eoa(2 * i as u64), u64::from(nonce), 2 * i as u64)
    }

    /// Someone receiving: a new address, or one seen before (senders and receivers alike).
    fn recipient(&self, s: &mut State) -> Address {
        let i = self.recipient_number(s);
        self.eoa(i)
    }

    fn recipient_number(&self, s: &mut State) -> u64 {
        if s.receivers == 0 || s.rng.chance(self.shape.new_recipient) {
            s.receivers += 1;
            return 2 * (s.receivers - 1) + 1;
        }
        if s.rng.chance(0.5) && !s.nonces.is_empty() {
            2 * s.rng.zipf(s.nonces.len() as u64)
        } else {
            2 * s.rng.zipf(s.receivers) + 1
        }
    }

    /// A sender or receiver of `token`: mostly one of its earlier holders (so that, as on
    /// mainnet, (holder, token) pairs are far fewer than transfers), sometimes someone new to it.
    fn holder(&self, s: &mut State, kind: Kind, token: u64) -> Address {
        let known = s.holders[kind as usize].get(token as usize).map_or(0, Vec::len) as u64;
        let i = if known == 0 || s.rng.chance(self.shape.new_holding) {
            let i = self.recipient_number(s);
            self.add_holder(s, kind, token, i);
            i
        } else {
            let rank = s.rng.zipf(known) as usize;
            s.holders[kind as usize][token as usize][rank]
        };
        self.eoa(i)
    }

    fn add_holder(&self, s: &mut State, kind: Kind, token: u64, eoa: u64) {
        let tokens = &mut s.holders[kind as usize];
        if tokens.len() <= token as usize {
            tokens.resize_with(token as usize + 1, Vec::new);
        }
        tokens[token as usize].push(eoa);
    }

    /// A contract of `kind`, Zipf-ranked by age, with its number.
    fn pick_numbered(&self, s: &mut State, kind: Kind) -> Option<(Address, u64)> {
        let n = s.contracts[kind as usize];
        (n > 0).then(|| {
            let i = s.rng.zipf(n);
            (self.contract(kind, i), i)
        })
    }

    fn pick(&self, s: &mut State, kind: Kind) -> Option<Address> {
        self.pick_numbered(s, kind).map(|(a, _)| a)
    }

    fn tx_hash(&self, number: u64, index: usize) -> B256 {
        keccak256(
            [self.seed.to_be_bytes(), number.to_be_bytes(), (index as u64).to_be_bytes(), [0x7a; 8]].concat(),
        )
    }

    fn push_deployment(&self, s: &mut State, b: &mut BlockData, contract: Address) {
        let (from, nonce) = self.sender(s);
        let index = b.transactions.len();
        let hash = self.tx_hash(b.number, index);
        b.transactions.push(TxData { hash, from, to: None, nonce, value: U256::ZERO, mint: None });
        let frames = b.frames.get_or_insert_with(Vec::new);
        frames.push(frame(index, 0, FrameKind::Create, from, contract, U256::ZERO));
        b.receipts.push(ReceiptData {
            success: true,
            contract_address: Some(contract),
            logs: Vec::new(),
            fee: fee_of(&hash),
        });
    }

    fn new_contract_kind(&self, s: &mut State) -> Kind {
        let sh = &self.shape;
        let u = s.rng.unit();
        let mut edge = sh.clones;
        for (share, kind) in [
            (0.0, Kind::Clone),
            (sh.erc20, Kind::Erc20),
            (sh.erc721, Kind::Erc721),
            (sh.erc1155, Kind::Erc1155),
            (sh.erc4626, Kind::Vault),
        ] {
            edge += share;
            if u < edge {
                return kind;
            }
        }
        Kind::Plain
    }

    fn push_transaction(&self, s: &mut State, b: &mut BlockData) {
        let index = b.transactions.len();
        let (from, nonce, from_number) = self.sender_numbered(s);
        let hash = self.tx_hash(b.number, index);
        let sh = self.shape;
        let mut frames: Vec<CallFrame> = Vec::new();
        let mut logs: Vec<LogData> = Vec::new();
        let mut contract_address = None;
        let to: Option<Address>;
        let u = s.rng.unit();
        if u < sh.creating {
            let kind = self.new_contract_kind(s);
            let number = s.contracts[kind as usize];
            let created = self.contract(kind, number);
            s.contracts[kind as usize] += 1;
            let factory = self.pick(s, Kind::Factory);
            match factory {
                Some(factory) if kind == Kind::Clone || s.rng.chance(sh.by_factory) => {
                    to = Some(factory);
                    frames.push(frame(index, 0, FrameKind::Call, from, factory, U256::ZERO));
                    let create = if s.rng.chance(0.5) { FrameKind::Create } else { FrameKind::Create2 };
                    frames.push(frame(index, 1, create, factory, created, U256::ZERO));
                }
                _ => {
                    to = None;
                    contract_address = Some(created);
                    frames.push(frame(index, 0, FrameKind::Create, from, created, U256::ZERO));
                }
            }
            if matches!(kind, Kind::Erc20 | Kind::Vault) {
                // The initial supply, minted to the deployer.
                self.add_holder(s, kind, number, from_number);
                logs.push(transfer(created, Address::ZERO, from, u256_word(1_000_000_000)));
            }
        } else if u < sh.creating + sh.with_transfers {
            let router = if s.rng.chance(0.5) { self.pick(s, Kind::Router) } else { None };
            // Half go through a router with several transfers, half move one token directly.
            let n = if router.is_some() { s.rng.count(sh.logs_per_transfer_tx * 2.0 - 1.0) } else { 1 };
            let caller = router.unwrap_or(from);
            let mut first_token = None;
            for _ in 0..n {
                let v = s.rng.unit();
                let log = if v < sh.erc721_logs {
                    let Some((token, t)) = self.pick_numbered(s, Kind::Erc721) else { continue };
                    let id = B256::from(u256_word(s.rng.zipf(10_000)));
                    let (a, c) = (self.holder(s, Kind::Erc721, t), self.holder(s, Kind::Erc721, t));
                    LogData {
                        address: token,
                        topics: vec![TRANSFER_TOPIC, word(&a), word(&c), id],
                        data: Bytes::new(),
                    }
                } else if v < sh.erc721_logs + sh.erc1155_logs {
                    let Some((token, t)) = self.pick_numbered(s, Kind::Erc1155) else { continue };
                    let (a, c) = (self.holder(s, Kind::Erc1155, t), self.holder(s, Kind::Erc1155, t));
                    erc1155_log(&mut s.rng, token, caller, a, c)
                } else {
                    let Some((token, t)) = self.pick_numbered(s, Kind::Erc20) else { continue };
                    let (a, c) = (self.holder(s, Kind::Erc20, t), self.holder(s, Kind::Erc20, t));
                    transfer(token, a, c, u256_word(1 + s.rng.below(1_000_000)))
                };
                if first_token.is_none() {
                    first_token = Some(log.address);
                }
                if router.is_some() {
                    frames.push(frame(index, 1, FrameKind::Call, caller, log.address, U256::ZERO));
                }
                logs.push(log);
            }
            to = router.or(first_token).or_else(|| Some(self.recipient(s)));
            frames.insert(0, frame(index, 0, FrameKind::Call, from, to.unwrap_or_default(), U256::ZERO));
        } else if u < sh.creating + sh.with_transfers + sh.internal_value {
            let contract = self.pick(s, Kind::Router).unwrap_or_default();
            let value = U256::from(1 + s.rng.below(1 << 40));
            let payee = self.recipient(s);
            to = Some(contract);
            frames.push(frame(index, 0, FrameKind::Call, from, contract, value));
            frames.push(frame(index, 1, FrameKind::Call, contract, payee, value));
        } else if u < sh.creating + sh.with_transfers + sh.internal_value + sh.selfdestructs {
            let contract = self.pick(s, Kind::Plain).unwrap_or_else(|| self.contract(Kind::Plain, 0));
            let heir = self.recipient(s);
            to = Some(contract);
            frames.push(frame(index, 0, FrameKind::Call, from, contract, U256::ZERO));
            frames.push(frame(index, 1, FrameKind::SelfDestruct, contract, heir, U256::ZERO));
        } else {
            let payee = self.recipient(s);
            to = Some(payee);
            frames.push(frame(index, 0, FrameKind::Call, from, payee, U256::from(1 + s.rng.below(1 << 50))));
        }
        let success = !s.rng.chance(sh.reverted);
        if !success {
            logs.clear();
            contract_address = None;
            for f in &mut frames {
                f.success = false;
            }
        }
        let value = frames.iter().find(|f| f.depth == 0).map_or(U256::ZERO, |f| f.value);
        b.transactions.push(TxData { hash, from, to, nonce, value, mint: None });
        b.receipts.push(ReceiptData { success, contract_address, logs, fee: fee_of(&hash) });
        // Recorded chains are pre-Cancun: every successful selfdestruct removes the code.
        b.code_removed
            .extend(frames.iter().filter(|f| f.kind == FrameKind::SelfDestruct && f.success).map(|f| f.from));
        b.frames.get_or_insert_with(Vec::new).extend(frames);
    }

    /// What `address` answers to `input`, as its kind would.
    fn answer(&self, address: &Address, input: &[u8]) -> CallOutcome {
        let Some(kind) = Kind::of(address) else { return CallOutcome::Returned(Bytes::new()) };
        let sel = input.get(..4).unwrap_or_default();
        let is = |sig: &str| sel == selector(sig);
        let label = format!("{:02x}{:02x}", address.0 .0[1], address.0 .0[2]);
        let yes = |b: bool| CallOutcome::Returned(Bytes::from(u256_word(u64::from(b)).to_vec()));
        match kind {
            Kind::Erc20 | Kind::Vault if is("decimals()") => {
                CallOutcome::Returned(Bytes::from(u256_word(18).to_vec()))
            }
            Kind::Erc20 | Kind::Vault | Kind::Erc721 if is("name()") => {
                CallOutcome::Returned(abi_string(&format!("Token {label}")))
            }
            Kind::Erc20 | Kind::Vault | Kind::Erc721 if is("symbol()") => {
                CallOutcome::Returned(abi_string(&format!("T{label}")))
            }
            Kind::Vault if is("asset()") => {
                CallOutcome::Returned(Bytes::from(word(&self.contract(Kind::Erc20, 0)).to_vec()))
            }
            Kind::Vault if is("totalAssets()") => {
                CallOutcome::Returned(Bytes::from(u256_word(1_000_000).to_vec()))
            }
            Kind::Erc721 | Kind::Erc1155 if is("supportsInterface(bytes4)") => {
                let id = input.get(4..8).unwrap_or_default();
                let supported: &[[u8; 4]] = if kind == Kind::Erc721 {
                    &[ERC165_ID, ERC721_ID, ERC721_METADATA_ID]
                } else {
                    &[ERC165_ID, ERC1155_ID]
                };
                yes(supported.iter().any(|s| s.as_slice() == id))
            }
            _ => CallOutcome::Reverted,
        }
    }
}

fn frame(tx: usize, depth: u32, kind: FrameKind, from: Address, to: Address, value: U256) -> CallFrame {
    CallFrame { tx_index: tx as u64, depth, kind, from, to, value, success: true }
}

fn transfer(token: Address, from: Address, to: Address, amount: [u8; 32]) -> LogData {
    LogData {
        address: token,
        topics: vec![TRANSFER_TOPIC, word(&from), word(&to)],
        data: Bytes::from(amount.to_vec()),
    }
}

fn erc1155_log(rng: &mut Rng, token: Address, operator: Address, from: Address, to: Address) -> LogData {
    let topics = |t: B256| vec![t, word(&operator), word(&from), word(&to)];
    if rng.chance(0.7) {
        let mut data = u256_word(rng.zipf(1000)).to_vec();
        data.extend_from_slice(&u256_word(1 + rng.below(100)));
        return LogData { address: token, topics: topics(TRANSFER_SINGLE_TOPIC), data: data.into() };
    }
    let n = 1 + rng.below(5);
    let mut data = u256_word(64).to_vec();
    data.extend_from_slice(&u256_word(64 + 32 * (n + 1)));
    for values in [false, true] {
        data.extend_from_slice(&u256_word(n));
        for _ in 0..n {
            data.extend_from_slice(&u256_word(if values { 1 + rng.below(100) } else { rng.zipf(1000) }));
        }
    }
    LogData { address: token, topics: topics(TRANSFER_BATCH_TOPIC), data: data.into() }
}

impl ChainView for SyntheticChain {
    fn call_at(
        &self,
        to: Address,
        input: Bytes,
        _block: u64,
    ) -> BoxFuture<'_, Result<CallOutcome, ChainError>> {
        let answer = self.answer(&to, &input);
        Box::pin(async move { Ok(answer) })
    }

    fn code_at(&self, address: Address, _block: u64) -> BoxFuture<'_, Result<Bytes, ChainError>> {
        let code = match Kind::of(&address) {
            None => Bytes::new(),
            Some(Kind::Clone) => minimal_proxy_code(self.contract(Kind::Plain, 0)).into(),
            Some(_) => Bytes::from_static(&[0x60, 0x80, 0x60, 0x40, 0x52, 0x00]),
        };
        Box::pin(async move { Ok(code) })
    }
}

impl BlockSource for SyntheticChain {
    fn chain_identity(&self) -> BoxFuture<'_, Result<ChainIdentity, SourceError>> {
        let genesis_hash = keccak256([self.seed.to_be_bytes(), 0u64.to_be_bytes()].concat());
        Box::pin(async move { Ok(ChainIdentity { chain_id: SYNTHETIC_CHAIN_ID, genesis_hash }) })
    }
    fn head(&self) -> BoxFuture<'_, Result<u64, SourceError>> {
        let last = self.last_block;
        Box::pin(async move { Ok(last) })
    }
    fn block(&self, number: u64) -> BoxFuture<'_, Result<BlockData, SourceError>> {
        let block = (|| {
            let mut s = self
                .state
                .lock()
                .map_err(|_| SourceError::Missing { what: "generated block", block: number })?;
            if number != s.next_block || number > self.last_block {
                return Err(SourceError::Missing {
                    what: "generated block (asked out of order)",
                    block: number,
                });
            }
            s.next_block += 1;
            Ok(self.generate(&mut s, number))
        })();
        Box::pin(async move { block })
    }
    fn block_hash(&self, number: u64) -> BoxFuture<'_, Result<Option<B256>, SourceError>> {
        let hash = (number <= self.last_block)
            .then(|| keccak256([self.seed.to_be_bytes(), number.to_be_bytes()].concat()));
        Box::pin(async move { Ok(hash) })
    }
    fn tracer(&self) -> &'static str {
        "trace_block"
    }
}

/// A transaction's fee, drawn from its hash rather than the generator's random stream (so that
/// the chain a seed gives is the same with or without fees): 21,000–283,000 gas at 10–61 gwei.
fn fee_of(hash: &B256) -> U256 {
    let gas = 21_000 + u64::from(u16::from_be_bytes([hash[0], hash[1]])) * 4;
    let price = 10_000_000_000 + u64::from(hash[2]) * 200_000_000;
    U256::from(gas) * U256::from(price)
}
