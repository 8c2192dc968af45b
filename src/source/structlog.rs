//! Call frames rebuilt from the default (struct-log) tracer, for nodes that have no call tracer
//! (Hardhat's, and any geth-derived node with the named tracers turned off).
//!
//! The struct logs carry what a call tracer gives, step by step: each CALL, CALLCODE,
//! DELEGATECALL, STATICCALL, CREATE, CREATE2 and SELFDESTRUCT with its stack arguments; the depth
//! change that opens and closes a frame; the word the caller finds on its stack after a frame
//! returns (1 or 0 for a call, the new address or 0 for a creation); memory, from which inputs
//! and outputs are read. The rebuild gives the tree in `callTracer`'s JSON shape, so every reader
//! of call frames takes either answer.
//!
//! What the struct logs do not say:
//! * Inputs and outputs need memory, which costs a copy per step: asked for only where they are
//!   shown (`ots_traceTransaction`); without it frames have empty inputs and outputs (the top
//!   call's are the transaction's input and the tracer's `returnValue`).
//! * A SELFDESTRUCT moves the contract's whole balance, which no step shows: it is the balance at
//!   the parent block (asked of the node) plus what the transaction's frames moved in and out of
//!   it so far, reverted frames left out. A transfer to the contract earlier in the same block is
//!   not seen.
//! * A creation that fails leaves no address on the stack: its `to` is the zero address.

use std::collections::HashMap;

use alloy_primitives::{Address, Bytes, B256, U256};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::{NodeClient, SourceError};

/// The default tracer's answer for one transaction (fields not used here are skipped).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StructLogTrace {
    /// Whether the transaction failed.
    #[serde(default)]
    pub failed: bool,
    /// The top call's output (revert data of a failed one), hex with or without `0x`.
    #[serde(default)]
    pub return_value: String,
    /// One entry per executed opcode.
    #[serde(default)]
    pub struct_logs: Vec<Step>,
}

/// One executed opcode.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Step {
    /// The opcode's name.
    pub op: String,
    /// Call depth, 1 for the transaction's own frame.
    pub depth: u64,
    /// The stack before the opcode, bottom first.
    #[serde(default)]
    pub stack: Option<Vec<String>>,
    /// Memory before the opcode, in 32-byte words.
    #[serde(default)]
    pub memory: Option<Vec<String>>,
}

/// The transaction's own call, which the steps do not describe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopCall {
    /// Sender.
    pub from: Address,
    /// Recipient, or the created contract of a creation.
    pub to: Address,
    /// Whether it is a contract creation.
    pub create: bool,
    /// Value sent.
    pub value: U256,
    /// Calldata or init code.
    pub input: Bytes,
}

/// The rebuild cannot go on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the struct-log trace cannot be read: {0}")]
pub struct StructLogError(String);

/// The opcodes that open a frame.
const CALLS: [&str; 6] = ["CALL", "CALLCODE", "DELEGATECALL", "STATICCALL", "CREATE", "CREATE2"];

/// The contracts whose SELFDESTRUCTs need a starting balance: every address whose code ran a
/// SELFDESTRUCT in `trace` (empty for almost every transaction).
pub fn selfdestructing(top: &TopCall, trace: &StructLogTrace) -> Result<Vec<Address>, StructLogError> {
    if !trace.struct_logs.iter().any(|s| s.op == "SELFDESTRUCT") {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    rebuild_with(top, trace, &HashMap::new(), &mut |seen| {
        if let Seen::SelfDestruct(a) = seen {
            out.push(a);
        }
    })?;
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Every storage slot an SSTORE in `trace` wrote, as (whose storage, slot), reverted frames
/// included: what a state diff must look at.
pub fn storage_writes(top: &TopCall, trace: &StructLogTrace) -> Result<Vec<(Address, U256)>, StructLogError> {
    let mut out = Vec::new();
    rebuild_with(top, trace, &HashMap::new(), &mut |seen| {
        if let Seen::Store(a, slot) = seen {
            out.push((a, slot));
        }
    })?;
    // Init code writes under a placeholder: the creation's address once it returned.
    let created = creations(trace)?;
    for (a, _) in &mut out {
        if let Some(real) = created.get(a) {
            *a = *real;
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// The address each creation that ran returned, by the placeholder its frame ran under (zero
/// for a creation that failed).
fn creations(trace: &StructLogTrace) -> Result<HashMap<Address, Address>, StructLogError> {
    let steps = &trace.struct_logs;
    let mut out = HashMap::new();
    for (i, step) in steps.iter().enumerate() {
        if !matches!(step.op.as_str(), "CREATE" | "CREATE2") {
            continue;
        }
        if let Some(back) = steps[i + 1..].iter().find(|s| s.depth <= step.depth) {
            if back.depth == step.depth {
                out.insert(placeholder(i), address_of(arg(back, 0)?));
            }
        }
    }
    Ok(out)
}

/// What the rebuild reports beside the tree.
enum Seen {
    /// A SELFDESTRUCT by code running as this address outside its own creation.
    SelfDestruct(Address),
    /// An SSTORE to this address's slot (a placeholder inside init code).
    Store(Address, U256),
}

/// The transaction's call tree in `callTracer`'s JSON shape. `balances` holds, for each address
/// [`selfdestructing`] names, its balance at the parent block.
pub fn rebuild(
    top: &TopCall,
    trace: &StructLogTrace,
    balances: &HashMap<Address, U256>,
) -> Result<Value, StructLogError> {
    rebuild_with(top, trace, balances, &mut |_| {})
}

/// A frame of the rebuilt tree.
#[derive(Debug, Clone)]
struct Node {
    kind: &'static str,
    from: Address,
    to: Address,
    value: Option<U256>,
    input: Bytes,
    output: Bytes,
    error: Option<&'static str>,
    calls: Vec<Node>,
}

impl Node {
    fn new(kind: &'static str, from: Address, to: Address, value: Option<U256>, input: Bytes) -> Self {
        Self { kind, from, to, value, input, output: Bytes::new(), error: None, calls: Vec::new() }
    }

    /// Puts `real` wherever the placeholder of a creation's address stands.
    fn resolve(&mut self, placeholder: Address, real: Address) {
        for a in [&mut self.from, &mut self.to] {
            if *a == placeholder {
                *a = real;
            }
        }
        for c in &mut self.calls {
            c.resolve(placeholder, real);
        }
    }

    fn into_json(self) -> Value {
        let mut m = Map::new();
        m.insert("type".into(), json!(self.kind));
        m.insert("from".into(), json!(self.from));
        m.insert("to".into(), json!(self.to));
        if let Some(v) = self.value {
            m.insert("value".into(), json!(v));
        }
        if self.kind != "SELFDESTRUCT" {
            m.insert("input".into(), json!(self.input));
            if !self.output.is_empty() || self.error.is_none() {
                m.insert("output".into(), json!(self.output));
            }
        }
        if let Some(e) = self.error {
            m.insert("error".into(), json!(e));
        }
        if !self.calls.is_empty() {
            m.insert("calls".into(), Value::Array(self.calls.into_iter().map(Self::into_json).collect()));
        }
        Value::Object(m)
    }
}

/// A frame not yet closed.
struct Open {
    node: Node,
    /// Whose storage and balance the code runs with (a placeholder inside a creation's init
    /// code, until the creation returns its address).
    context: Address,
    depth: u64,
    /// The placeholder standing for the address a creation will have.
    placeholder: Option<Address>,
    /// Wei into (`true`) and out of (`false`) addresses by this frame and its closed children
    /// that succeeded; dropped if the frame fails.
    deltas: Vec<(Address, U256, bool)>,
}

/// An address that stands for a creation's until it is known: no key hashes to it in practice.
fn placeholder(step: usize) -> Address {
    let mut seed = b"ots-indexer structlog placeholder".to_vec();
    seed.extend_from_slice(&(step as u64).to_be_bytes());
    Address::from_word(alloy_primitives::keccak256(seed))
}

fn word(hex: &str) -> Result<U256, StructLogError> {
    let digits = hex.trim_start_matches("0x");
    U256::from_str_radix(if digits.is_empty() { "0" } else { digits }, 16)
        .map_err(|e| StructLogError(format!("stack word {hex:?}: {e}")))
}

fn address_of(word: U256) -> Address {
    Address::from_word(word.to_be_bytes::<32>().into())
}

/// The `n`th word from the top of a step's stack (0 = top).
fn arg(step: &Step, n: usize) -> Result<U256, StructLogError> {
    let stack = step
        .stack
        .as_ref()
        .ok_or_else(|| StructLogError("the node left out the stack (disableStack)".into()))?;
    let at = stack
        .len()
        .checked_sub(n + 1)
        .ok_or_else(|| StructLogError(format!("{} with {} stack words", step.op, stack.len())))?;
    word(&stack[at])
}

/// Most bytes read from memory for one input or output: more than a block's gas can pay for.
const MAX_SLICE: u64 = 64 << 20;

/// `len` bytes of the step's memory from `offset`, zero past its end; empty when the node left
/// memory out.
fn memory(step: &Step, offset: U256, len: U256) -> Result<Bytes, StructLogError> {
    let Some(words) = &step.memory else { return Ok(Bytes::new()) };
    if len.is_zero() {
        return Ok(Bytes::new());
    }
    let (Ok(offset), Ok(len)) = (u64::try_from(offset), u64::try_from(len)) else {
        return Err(StructLogError(format!("{} reads memory past 2^64", step.op)));
    };
    if len > MAX_SLICE {
        return Err(StructLogError(format!("{} reads {len} bytes of memory", step.op)));
    }
    let mut out = vec![0u8; len as usize];
    for (i, w) in words.iter().enumerate() {
        let start = i as u64 * 32;
        if start >= offset + len || start + 32 <= offset {
            continue;
        }
        let bytes = alloy_primitives::hex::decode(w.trim_start_matches("0x"))
            .map_err(|e| StructLogError(format!("memory word {w:?}: {e}")))?;
        for (j, b) in bytes.iter().enumerate() {
            let at = start + j as u64;
            if at >= offset && at < offset + len {
                out[(at - offset) as usize] = *b;
            }
        }
    }
    Ok(out.into())
}

/// Precompiles answer without a frame of their own; any other callee that opens none has no
/// code and returns nothing.
fn is_precompile(a: Address) -> bool {
    let n = U256::from_be_slice(a.as_slice());
    (n >= U256::from(1) && n <= U256::from(0x11)) || n == U256::from(0x100)
}

/// The balance of `who` now: the parent block's plus every open frame's deltas.
fn balance_now(who: Address, open: &[Open], balances: &HashMap<Address, U256>) -> U256 {
    let mut v = balances.get(&who).copied().unwrap_or_default();
    for (a, amount, incoming) in open.iter().flat_map(|f| f.deltas.iter()) {
        if *a == who {
            v = if *incoming { v.saturating_add(*amount) } else { v.saturating_sub(*amount) };
        }
    }
    v
}

fn moved(deltas: &mut Vec<(Address, U256, bool)>, from: Address, to: Address, value: U256) {
    if !value.is_zero() {
        deltas.push((from, value, false));
        deltas.push((to, value, true));
    }
}

/// Closes the innermost frame with `result`, the word its caller finds on the stack (`None`
/// when the transaction ended inside it).
fn close(open: &mut Vec<Open>, result: Option<U256>) {
    let Some(mut child) = open.pop() else { return };
    let Some(parent) = open.last_mut() else { return };
    let ok = result.is_some_and(|r| !r.is_zero());
    if let Some(p) = child.placeholder {
        // A creation's address is known now (a failed one leaves none).
        let real = result.filter(|_| ok).map(address_of).unwrap_or_default();
        child.node.resolve(p, real);
        for d in &mut child.deltas {
            if d.0 == p {
                d.0 = real;
            }
        }
    }
    if ok {
        parent.deltas.append(&mut child.deltas);
    } else {
        child.node.error = Some("execution reverted");
    }
    parent.node.calls.push(child.node);
}

fn rebuild_with(
    top: &TopCall,
    trace: &StructLogTrace,
    balances: &HashMap<Address, U256>,
    on_seen: &mut dyn FnMut(Seen),
) -> Result<Value, StructLogError> {
    let steps = &trace.struct_logs;
    let mut root = Node::new(
        if top.create { "CREATE" } else { "CALL" },
        top.from,
        top.to,
        Some(top.value),
        top.input.clone(),
    );
    root.output = alloy_primitives::hex::decode(trace.return_value.trim_start_matches("0x"))
        .map_err(|e| StructLogError(format!("returnValue: {e}")))?
        .into();
    let mut open = vec![Open {
        node: root,
        context: top.to,
        depth: steps.first().map_or(1, |s| s.depth),
        placeholder: None,
        deltas: Vec::new(),
    }];
    moved(&mut open[0].deltas, top.from, top.to, top.value);
    for (i, step) in steps.iter().enumerate() {
        while open.len() > 1 && open.last().is_some_and(|f| step.depth < f.depth) {
            close(&mut open, Some(arg(step, 0)?));
        }
        let Some(current) = open.last() else { break };
        let (context, depth) = (current.context, current.depth);
        match step.op.as_str() {
            op if CALLS.contains(&op) => {
                let kind = CALLS.iter().find(|c| **c == op).copied().unwrap_or("CALL");
                let create = matches!(kind, "CREATE" | "CREATE2");
                let new_address = create.then(|| placeholder(i));
                let (to, value, input) = match kind {
                    "CREATE" | "CREATE2" => (
                        new_address.unwrap_or_default(),
                        arg(step, 0)?,
                        memory(step, arg(step, 1)?, arg(step, 2)?)?,
                    ),
                    "CALL" | "CALLCODE" => (
                        address_of(arg(step, 1)?),
                        arg(step, 2)?,
                        memory(step, arg(step, 3)?, arg(step, 4)?)?,
                    ),
                    _ => (address_of(arg(step, 1)?), U256::ZERO, memory(step, arg(step, 2)?, arg(step, 3)?)?),
                };
                let carries_value = matches!(kind, "CALL" | "CALLCODE" | "CREATE" | "CREATE2");
                let mut child = Open {
                    node: Node::new(kind, context, to, carries_value.then_some(value), input),
                    context: if matches!(kind, "CALLCODE" | "DELEGATECALL") { context } else { to },
                    depth: depth + 1,
                    placeholder: new_address,
                    deltas: Vec::new(),
                };
                if matches!(kind, "CALL" | "CREATE" | "CREATE2") {
                    moved(&mut child.deltas, context, to, value);
                }
                let next = steps.get(i + 1);
                let entered = next.is_some_and(|n| n.depth == depth + 1);
                if !entered {
                    // No frame of its own: a precompile, an account without code, or a call
                    // refused before it began (depth, balance).
                    if let (Some(n), true) = (next, !create && is_precompile(to)) {
                        let (ret_offset, ret_len) = match kind {
                            "CALL" | "CALLCODE" => (arg(step, 5)?, arg(step, 6)?),
                            _ => (arg(step, 4)?, arg(step, 5)?),
                        };
                        child.node.output = memory(n, ret_offset, ret_len)?;
                    }
                }
                open.push(child);
                if !entered {
                    close(&mut open, next.map(|n| arg(n, 0)).transpose()?);
                }
            }
            "SELFDESTRUCT" => {
                if open.iter().all(|f| f.placeholder != Some(context)) {
                    on_seen(Seen::SelfDestruct(context));
                }
                let beneficiary = address_of(arg(step, 0)?);
                let value = balance_now(context, &open, balances);
                if let Some(current) = open.last_mut() {
                    moved(&mut current.deltas, context, beneficiary, value);
                    current.node.calls.push(Node::new(
                        "SELFDESTRUCT",
                        context,
                        beneficiary,
                        Some(value),
                        Bytes::new(),
                    ));
                }
            }
            "SSTORE" => on_seen(Seen::Store(context, arg(step, 0)?)),
            "RETURN" | "REVERT" if open.len() > 1 => {
                let out = memory(step, arg(step, 0)?, arg(step, 1)?)?;
                if let Some(current) = open.last_mut() {
                    current.node.output = out;
                }
            }
            _ => {}
        }
    }
    // Frames still open when the steps end failed with the transaction.
    while open.len() > 1 {
        close(&mut open, None);
    }
    let mut root = open.pop().ok_or_else(|| StructLogError("no frame".into()))?.node;
    if trace.failed {
        root.error = Some("execution reverted");
    }
    Ok(root.into_json())
}

/// Reads a quantity or data field of a node's JSON object.
fn field<T: serde::de::DeserializeOwned>(v: &Value, key: &str) -> Option<T> {
    v.get(key).cloned().and_then(|f| serde_json::from_value(f).ok())
}

/// The call tree of transaction `hash` in `callTracer`'s shape, rebuilt from the node's default
/// tracer; `None` if the node knows no such transaction. `with_memory` asks for memory too, so
/// that frames carry their inputs and outputs (a copy of memory per step: only where shown).
pub async fn call_tree(
    node: &NodeClient,
    hash: B256,
    with_memory: bool,
) -> Result<Option<Value>, SourceError> {
    let Some((top, block)) = top_call(node, hash).await? else { return Ok(None) };
    tree_of(node, hash, &top, block, with_memory).await.map(Some)
}

/// What a transaction touched, from its struct logs.
#[derive(Debug, Clone)]
pub struct Touched {
    /// Its block.
    pub block: u64,
    /// Its call tree in `callTracer`'s shape, without inputs and outputs below the top.
    pub tree: Value,
    /// The storage slots it wrote (see [`storage_writes`]).
    pub stores: Vec<(Address, U256)>,
}

/// The call tree and storage writes of transaction `hash`; `None` if the node knows no such
/// transaction.
pub async fn touched(node: &NodeClient, hash: B256) -> Result<Option<Touched>, SourceError> {
    let Some((top, block)) = top_call(node, hash).await? else { return Ok(None) };
    let trace = trace_of(node, hash, false).await?;
    let stores = storage_writes(&top, &trace).map_err(|e| inconsistent(block, hash, &e))?;
    let tree = tree_from(node, hash, &top, block, &trace).await?;
    Ok(Some(Touched { block, tree, stores }))
}

/// Transaction `hash`'s own call and block, from the node; `None` if it knows no such one.
async fn top_call(node: &NodeClient, hash: B256) -> Result<Option<(TopCall, u64)>, SourceError> {
    let answers = node
        .batch(&[("eth_getTransactionByHash", json!([hash])), ("eth_getTransactionReceipt", json!([hash]))])
        .await?;
    let (tx, receipt) = (&answers[0], &answers[1]);
    if tx.is_null() || receipt.is_null() {
        return Ok(None);
    }
    let block: u64 = field::<U256>(receipt, "blockNumber").map_or(0, |n| n.saturating_to());
    let from = field(tx, "from").ok_or_else(|| SourceError::Inconsistent {
        block,
        reason: format!("transaction {hash} has no sender"),
    })?;
    let called: Option<Address> = field(tx, "to");
    let top = TopCall {
        from,
        to: called.or_else(|| field(receipt, "contractAddress")).unwrap_or_default(),
        create: called.is_none(),
        value: field(tx, "value").unwrap_or_default(),
        input: field(tx, "input").unwrap_or_default(),
    };
    Ok(Some((top, block)))
}

/// The call tree of transaction `hash` of block `block`, whose own call is `top`.
pub async fn tree_of(
    node: &NodeClient,
    hash: B256,
    top: &TopCall,
    block: u64,
    with_memory: bool,
) -> Result<Value, SourceError> {
    let trace = trace_of(node, hash, with_memory).await?;
    tree_from(node, hash, top, block, &trace).await
}

/// The default tracer's steps of transaction `hash`, with the stack, without storage.
async fn trace_of(node: &NodeClient, hash: B256, with_memory: bool) -> Result<StructLogTrace, SourceError> {
    // geth turns memory on with `enableMemory`, Hardhat and older nodes off with `disableMemory`.
    let config = json!({
        "disableStack": false,
        "disableMemory": !with_memory,
        "enableMemory": with_memory,
        "disableStorage": true,
    });
    node.raw("debug_traceTransaction", json!([hash, config])).await
}

fn inconsistent(block: u64, hash: B256, e: &StructLogError) -> SourceError {
    SourceError::Inconsistent { block, reason: format!("transaction {hash}: {e}") }
}

/// The call tree rebuilt from `trace`, with the parent block's balances its SELFDESTRUCTs need.
async fn tree_from(
    node: &NodeClient,
    hash: B256,
    top: &TopCall,
    block: u64,
    trace: &StructLogTrace,
) -> Result<Value, SourceError> {
    let mut balances = HashMap::new();
    for contract in selfdestructing(top, trace).map_err(|e| inconsistent(block, hash, &e))? {
        let parent = format!("{:#x}", block.saturating_sub(1));
        let balance: U256 = node.raw("eth_getBalance", json!([contract, parent])).await?;
        balances.insert(contract, balance);
    }
    rebuild(top, trace, &balances).map_err(|e| inconsistent(block, hash, &e))
}
