//! Pending pool benchmark: fills the pool to its bound with transactions shaped as a node sends
//! them (an EIP-1559 transaction object, half of them ERC20 transfers with their decoded
//! transfer), then keeps inserting past the bound; prints the bytes the allocator counts for the
//! pool at its bound beside the pool's own estimate, insert rate, and the time of one address's
//! page. Run by `scripts/bench-pending.sh`.
//!
//! Usage: bench_pending [MAX] [ROUNDS]

use std::{
    alloc::{GlobalAlloc, Layout, System},
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Instant,
};

use alloy_primitives::{Address, B256, U256};
use ots_indexer::pending::{
    calldata::{PendingTransfer, TransferStandard},
    PendingTx, Pool,
};
use serde_json::{json, value::RawValue};

/// Counts live heap bytes.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator and only counts.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's layout is passed on unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn address(n: u64) -> Address {
    let mut bytes = [0u8; 20];
    bytes[12..].copy_from_slice(&n.to_be_bytes());
    bytes[0] = 0x5a;
    Address::from(bytes)
}

/// Transaction `n` as a node's pool shows it.
fn transaction(n: u64) -> PendingTx {
    let hash = B256::from(U256::from(n).wrapping_mul(U256::from(0x9e37_79b9_7f4a_7c15u64)));
    let from = address(n % 5_000);
    let to = address(1_000_000 + n % 300);
    let is_transfer = n.is_multiple_of(2);
    let input = if is_transfer {
        format!("0xa9059cbb000000000000000000000000{}{:064x}", hex_of(address(n + 7)), n * 1000)
    } else {
        "0x".to_owned()
    };
    let object = json!({
        "type": "0x2", "chainId": "0x1", "nonce": format!("{:#x}", n / 5_000), "gas": "0x186a0",
        "maxFeePerGas": "0x77359400", "maxPriorityFeePerGas": "0x3b9aca00", "to": to,
        "value": "0x0", "accessList": [], "input": input,
        "r": format!("{:#066x}", U256::from(n) * U256::from(31)),
        "s": format!("{:#066x}", U256::from(n) * U256::from(37)),
        "yParity": "0x0", "v": "0x0", "hash": hash, "blockHash": null, "blockNumber": null,
        "transactionIndex": null, "from": from, "gasPrice": "0x77359400",
    });
    let transfers = if is_transfer {
        vec![PendingTransfer {
            token: to,
            standard: TransferStandard::Erc20,
            from,
            to: address(n + 7),
            token_id: None,
            value: U256::from(n * 1000),
        }]
    } else {
        Vec::new()
    };
    PendingTx {
        hash,
        from,
        nonce: n / 5_000,
        to: Some(to),
        transaction: Arc::from(RawValue::from_string(object.to_string()).expect("json")),
        first_seen_ms: n,
        transfers,
    }
}

fn hex_of(a: Address) -> String {
    a.as_slice().iter().map(|b| format!("{b:02x}")).collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let max: usize =
        args.get(1).and_then(|s| s.parse().ok()).unwrap_or(ots_indexer::pending::DEFAULT_MAX_PENDING);
    let rounds: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(5);
    let mut allocated = Vec::new();
    let mut estimated = 0;
    let mut json_bytes = 0;
    let mut insert_rate = Vec::new();
    let mut page_us = Vec::new();
    for _ in 0..rounds {
        // Memory: every transaction built and handed to the pool, twice the bound, so that the
        // second half pushes the first out as a busy pool does; what stays allocated is the
        // pool's.
        let before = LIVE.load(Ordering::Relaxed);
        let mut pool = Pool::new(max);
        for n in 0..(2 * max) as u64 {
            pool.insert(transaction(n));
        }
        allocated.push((LIVE.load(Ordering::Relaxed) - before) as f64);
        json_bytes = pool
            .of_address(&address(1_000_000), usize::MAX)
            .iter()
            .map(|t| t.transaction.get().len())
            .sum::<usize>()
            / pool.of_address(&address(1_000_000), usize::MAX).len().max(1);
        // Speed: inserts of transactions built beforehand.
        let txs: Vec<PendingTx> = (0..(2 * max) as u64).map(transaction).collect();
        let mut timed = Pool::new(max);
        let started = Instant::now();
        for tx in txs {
            timed.insert(tx);
        }
        insert_rate.push((2 * max) as f64 / started.elapsed().as_secs_f64());
        drop(timed);
        estimated = pool.bytes();
        let busy = address(1_000_000 + 17);
        let started = Instant::now();
        let page = pool.of_address(&busy, 25);
        page_us.push(started.elapsed().as_secs_f64() * 1e6);
        assert_eq!(page.len(), 25.min(pool.len()));
        assert_eq!(pool.len(), max);
        drop(pool);
    }
    let allocated = median(allocated);
    println!(
        "{}",
        json!({
            "max_pending": max,
            "allocated_bytes_at_bound": allocated as u64,
            "allocated_bytes_per_tx": (allocated / max as f64).round() as u64,
            "transaction_json_bytes_per_tx": json_bytes,
            "estimated_bytes_at_bound": estimated,
            "estimate_vs_allocated": ((estimated as f64 / allocated) * 1000.0).round() / 1000.0,
            "inserts_per_s": median(insert_rate).round() as u64,
            "address_page_25_us": (median(page_us) * 10.0).round() / 10.0,
            "rounds": rounds,
        })
    );
}
