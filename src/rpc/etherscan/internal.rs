//! `account`'s `txlistinternal`: the frames below a transaction's top call that move ether or
//! create or destroy a contract, from the node's call tracer — of one transaction (`txhash`), of
//! an address (the transactions it appears in, from the index), or of the transactions of a
//! block range (`startblock`..`endblock`); a list is walked from the end `sort` starts at until
//! the page is full.

use alloy_primitives::{Address, B256};
use futures::future::try_join_all;
use serde_json::{json, Value};

use super::{
    envelope::{reasons, Answer},
    lists::LIST_ROWS,
    marks::Stream,
    params::{Params, Sort},
    token::lower_hex,
    walk::{first_id, page_of, Source, Walk},
    Etherscan,
};
use crate::{
    db::{codec::BlockNumber, state, tables::OtsUndoJournal, DbResult, ReadTxn},
    index::families::block_internal_rows,
    rpc::{
        call_tree::{self, Placed},
        materialize::hex_field,
    },
};

/// Blocks whose headers one step of a range walk asks for.
const BLOCKS_PER_STEP: u64 = 64;

/// Etherscan's name for a frame's kind, for the frames it lists.
fn kind_of(p: &Placed) -> Option<&'static str> {
    let moves_value = p.frame.value.is_some_and(|v| !v.is_zero());
    match p.frame.kind.as_str() {
        "CALL" if moves_value => Some("call"),
        "CREATE" => Some("create"),
        "CREATE2" => Some("create2"),
        "SELFDESTRUCT" => Some("suicide"),
        _ => None,
    }
}

/// One row; `hash` and `traceId` only in the lists by block range.
fn row(p: &Placed, kind: &str, block: u64, timestamp: u64, hash: Option<&B256>) -> Value {
    let f = &p.frame;
    let creates = kind.starts_with("create");
    let to = f.to.filter(|_| !creates).map(|a| lower_hex(&a)).unwrap_or_default();
    let created = f.to.filter(|_| creates).map(|a| lower_hex(&a)).unwrap_or_default();
    let number = |n: Option<alloy_primitives::U64>| n.map(|n| n.to::<u64>()).unwrap_or_default().to_string();
    let mut row = json!({
        "blockNumber": block.to_string(),
        "timeStamp": timestamp.to_string(),
        "from": lower_hex(&f.from),
        "to": to,
        "value": f.value.unwrap_or_default().to_string(),
        "contractAddress": created,
        "input": "",
        "type": kind,
        "gas": number(f.gas),
        "gasUsed": number(f.gas_used),
        "isError": if p.undone { "1" } else { "0" },
        "errCode": p.error.clone().unwrap_or_default(),
    });
    if let (Some(hash), Value::Object(map)) = (hash, &mut row) {
        map.insert("hash".into(), json!(hash));
        let trace_id = p.path.iter().map(ToString::to_string).collect::<Vec<_>>().join("_");
        map.insert("traceId".into(), json!(trace_id));
    }
    row
}

/// The listed frames of one transaction, in execution order.
async fn rows_of(
    api: &Etherscan,
    hash: B256,
    block: u64,
    timestamp: u64,
    with_hash: bool,
) -> Result<Vec<Value>, Answer> {
    let tree = call_tree::of(&api.ctx, hash, false)
        .await
        .map_err(|e| Answer::refuse(format!("Error! {}", e.message())))?;
    Ok(tree
        .placed()
        .iter()
        .filter(|p| !p.path.is_empty())
        .filter_map(|p| kind_of(p).map(|kind| row(p, kind, block, timestamp, with_hash.then_some(&hash))))
        .collect())
}

/// `txlistinternal`.
pub(super) async fn internal_list(api: &Etherscan, params: &Params) -> Answer {
    if let Some(hash) = params.get("txhash") {
        let Ok(hash) = hash.parse::<B256>() else { return Answer::refuse(reasons::TX_HASH) };
        return by_hash(api, hash).await;
    }
    let address = match params.get("address").map(|_| params.address("address")).transpose() {
        Ok(address) => address,
        Err(refusal) => return refusal,
    };
    if address.is_none() && (params.get("startblock").is_none() || params.get("endblock").is_none()) {
        return Answer::refuse("Error! Missing address, txhash, or startblock and endblock");
    }
    let (range, window, sort) = match params.list_request(LIST_ROWS, api.max_offset, Sort::Asc) {
        Ok(asked) => asked,
        Err(refusal) => return refusal,
    };
    let rows = match address {
        Some(address) => by_address(api, address, range, window, sort).await,
        None => by_range(api, range, window, sort).await,
    };
    match rows {
        Ok(rows) if rows.is_empty() => Answer::NoRows("No transactions found"),
        Ok(rows) => Answer::Ok(Value::Array(rows)),
        Err(refusal) => refusal,
    }
}

async fn by_hash(api: &Etherscan, hash: B256) -> Answer {
    let tx = match api.ctx.node.raw::<_, Value>("eth_getTransactionByHash", json!([hash])).await {
        Ok(tx) => tx,
        Err(e) => {
            return Answer::refuse(format!("Error! The node did not answer eth_getTransactionByHash: {e}"))
        }
    };
    let Some(block) = hex_field(&tx, "blockNumber") else { return Answer::NoRows("No transactions found") };
    let header = match api
        .ctx
        .node
        .raw::<_, Value>("eth_getBlockByNumber", json!([format!("{block:#x}"), false]))
        .await
    {
        Ok(header) => header,
        Err(e) => return Answer::refuse(format!("Error! The node did not answer eth_getBlockByNumber: {e}")),
    };
    let timestamp = hex_field(&header, "timestamp").unwrap_or_default();
    match rows_of(api, hash, block, timestamp, false).await {
        Ok(rows) if rows.is_empty() => Answer::NoRows("No transactions found"),
        Ok(rows) => Answer::Ok(Value::Array(rows)),
        Err(refusal) => refusal,
    }
}

/// The rows of the blocks `from..=to`, read from the end `sort` names, until `skip + rows` are
/// found or the range (cut at the node's head) ends. Settled blocks wholly before the page are
/// passed by the index's count of their rows ([`pass_counted`]), not traced.
async fn by_range(
    api: &Etherscan,
    (from, to): (u64, u64),
    window: super::params::Window,
    sort: Sort,
) -> Result<Vec<Value>, Answer> {
    let head = api
        .ctx
        .node
        .head()
        .await
        .map_err(|e| Answer::refuse(format!("Error! The node did not answer eth_blockNumber: {e}")))?;
    let to = to.min(head);
    let wanted = window.skip.saturating_add(window.rows);
    let counted = api.read(|t| counted_blocks(t, (from, to)))?;
    let in_counted =
        |block: Option<u64>| block.zip(counted).is_some_and(|(b, (low, high))| low <= b && b <= high);
    let mut found: Vec<Value> = Vec::new();
    let mut passed = 0u64;
    let mut next = match sort {
        Sort::Asc => Some(from),
        Sort::Desc => Some(to),
    };
    while let Some(at) = next.filter(|&at| from <= at && at <= to && found.len() as u64 + passed < wanted) {
        let short = window.skip.saturating_sub(found.len() as u64 + passed);
        if short > 0 && in_counted(Some(at)) {
            if let Some((last, rows)) = api.read(|t| pass_counted(t, counted, at, sort, short))? {
                passed += rows;
                next = match sort {
                    Sort::Asc => last.checked_add(1),
                    Sort::Desc => last.checked_sub(1),
                };
                continue;
            }
        }
        let blocks: Vec<u64> = match sort {
            Sort::Asc => (at..=to.min(at.saturating_add(BLOCKS_PER_STEP - 1))).collect(),
            Sort::Desc => (at.saturating_sub(BLOCKS_PER_STEP - 1).max(from)..=at).rev().collect(),
        };
        next = match sort {
            Sort::Asc => blocks.last().and_then(|b| b.checked_add(1)),
            Sort::Desc => blocks.last().and_then(|b| b.checked_sub(1)),
        };
        let calls: Vec<_> =
            blocks.iter().map(|n| ("eth_getBlockByNumber", json!([format!("{n:#x}"), false]))).collect();
        let headers = api.ctx.node.batch(&calls).await.map_err(|e| {
            Answer::refuse(format!("Error! The node did not answer eth_getBlockByNumber: {e}"))
        })?;
        for (&block, header) in blocks.iter().zip(&headers) {
            let timestamp = hex_field(header, "timestamp").unwrap_or_default();
            let hashes: Vec<B256> = header
                .get("transactions")
                .and_then(|t| serde_json::from_value(t.clone()).ok())
                .unwrap_or_default();
            let per_tx = try_join_all(hashes.iter().map(|&h| rows_of(api, h, block, timestamp, true))).await;
            let mut rows: Vec<Value> = per_tx?.into_iter().flatten().collect();
            if sort == Sort::Desc {
                rows.reverse();
            }
            found.extend(rows);
            if found.len() as u64 + passed >= wanted {
                break;
            }
            // Still short of the page, with counted blocks next: those may be passed.
            let after = match sort {
                Sort::Asc => block.checked_add(1),
                Sort::Desc => block.checked_sub(1),
            };
            if window.skip > found.len() as u64 + passed && in_counted(after) {
                next = after;
                break;
            }
        }
    }
    Ok(page_of(found, super::params::Window { skip: window.skip - passed, rows: window.rows }))
}

/// The blocks of `from..=to` whose rows the index counts: those older than the reorg window
/// from where every block was indexed with call frames ([`block_internal_rows::counted_from`]),
/// as `(low, high)`.
fn counted_blocks(t: &ReadTxn, (from, to): (u64, u64)) -> DbResult<Option<(u64, u64)>> {
    let Some(counted) = block_internal_rows::counted_from(t)? else { return Ok(None) };
    let settled_below = match t.cursor::<OtsUndoJournal>()?.first()? {
        Some((BlockNumber(first), _)) => first,
        None => state::read_tip(t)?.map_or(0, |tip| tip + 1),
    };
    let (low, high) = (from.max(counted), to.min(settled_below.saturating_sub(1)));
    Ok((settled_below > 0 && low <= high).then_some((low, high)))
}

/// The blocks from `at` on in `sort`'s direction, inside the `counted` blocks, whose rows all lie
/// before the page (`short` rows away), as the last of them and their rows; `None` when `at`'s
/// own rows reach the page or are not counted. Their rows are found with a binary search of the
/// cumulative counts.
fn pass_counted(
    t: &ReadTxn,
    counted: Option<(u64, u64)>,
    at: u64,
    sort: Sort,
    short: u64,
) -> DbResult<Option<(u64, u64)>> {
    let Some((low, high)) = counted.filter(|&(low, high)| low <= at && at <= high) else { return Ok(None) };
    let through = |b: Option<u64>| b.map_or(Ok(0), |b| block_internal_rows::through(t, b));
    match sort {
        Sort::Asc => {
            // The last block `b` in `at..=high` with the rows of `at..=b` at most `short`.
            let base = through(at.checked_sub(1))?;
            if through(Some(at))? - base > short {
                return Ok(None);
            }
            let (mut lo, mut hi) = (at, high);
            while lo < hi {
                let mid = lo + (hi - lo).div_ceil(2);
                if through(Some(mid))? - base <= short {
                    lo = mid;
                } else {
                    hi = mid - 1;
                }
            }
            Ok(Some((lo, through(Some(lo))? - base)))
        }
        Sort::Desc => {
            // The first block `b` in `low..=at` with the rows of `b..=at` at most `short`.
            let top = through(Some(at))?;
            if top - through(at.checked_sub(1))? > short {
                return Ok(None);
            }
            let (mut lo, mut hi) = (low, at);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if top - through(mid.checked_sub(1))? <= short {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            Ok(Some((lo, top - through(lo.checked_sub(1))?)))
        }
    }
}

/// The rows of the transactions of `address` in blocks `range` whose frames it is a party of
/// (`from`, `to`, the created contract or the beneficiary): a walk of its internal-transaction
/// index — or, where that does not reach the range's first block (blocks indexed without call
/// frames, or before an upgrade), of every transaction it appears in — each step's
/// transactions traced in parallel, until `skip + rows` are found.
async fn by_address(
    api: &Etherscan,
    address: Address,
    range: (u64, u64),
    window: super::params::Window,
    sort: Sort,
) -> Result<Vec<Value>, Answer> {
    let listed_from = api.read(state::read_internal_txs_from)?;
    let (source, stream) = if listed_from <= first_id(range.0) {
        (Source::InternalTxs(address), Stream::InternalTxs(address))
    } else {
        (Source::Appearances(address), Stream::Internal(address))
    };
    let mut walk = Walk::new(source, stream, range, window, sort);
    let mut found: Vec<Value> = Vec::new();
    let party = json!(lower_hex(&address));
    while let Some(step) = walk.next(api)? {
        let (summaries, txs) = api.transactions(&step.ids).await?;
        let mut hashes = Vec::with_capacity(step.ids.len());
        for tx in &txs {
            let hash = tx.hash.as_str().and_then(|h| h.parse::<B256>().ok());
            hashes.push(hash.ok_or_else(|| Answer::refuse("Error! The node's transaction has no hash"))?);
        }
        let traced = try_join_all(step.ids.iter().zip(&hashes).map(|(id, &hash)| {
            let timestamp =
                summaries.get(&format!("{:#x}", id.block())).map(|s| s.timestamp).unwrap_or_default();
            rows_of(api, hash, id.block(), timestamp, true)
        }))
        .await?;
        let mut rows_of_step = Vec::new();
        for mut rows in traced {
            rows.retain(|r| r["from"] == party || r["to"] == party || r["contractAddress"] == party);
            if sort == Sort::Desc {
                rows.reverse();
            }
            rows_of_step.extend(rows);
        }
        walk.took(api, &step, rows_of_step.len() as u64, &[])?;
        found.extend(rows_of_step);
    }
    Ok(walk.page(found))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::{codec::Count, tables::OtsInternalRowsByBlock, AccessMode, Db};

    /// Blocks 0–9 with the rows `ROWS[b]` each: passing from any block in either direction stops
    /// at the last block whose rows still lie before the page, or refuses where the block's own
    /// rows reach it.
    #[test]
    fn counted_blocks_are_passed_up_to_the_page() {
        const ROWS: [u64; 10] = [0, 3, 0, 0, 5, 1, 0, 2, 4, 0];
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
        let txn = db.begin_write().expect("write");
        let mut total = 0;
        for (block, rows) in ROWS.iter().enumerate() {
            total += rows;
            if *rows > 0 {
                txn.put::<OtsInternalRowsByBlock>(&BlockNumber(block as u64), &Count(total)).expect("put");
            }
        }
        txn.commit().expect("commit");
        let t = db.begin_read().expect("read");
        let rows = |a: u64, b: u64| -> u64 { (a..=b).map(|x| ROWS[x as usize]).sum() };
        for at in 0..10u64 {
            for short in 0..16 {
                let asc = pass_counted(&t, Some((0, 9)), at, Sort::Asc, short).expect("asc");
                let want = (at..10).rev().find(|&b| rows(at, b) <= short).map(|b| (b, rows(at, b)));
                assert_eq!(asc, want, "asc from {at}, {short} short");
                let desc = pass_counted(&t, Some((0, 9)), at, Sort::Desc, short).expect("desc");
                let want = (0..=at).find(|&b| rows(b, at) <= short).map(|b| (b, rows(b, at)));
                assert_eq!(desc, want, "desc from {at}, {short} short");
            }
        }
        // Outside the counted blocks nothing is passed.
        assert_eq!(pass_counted(&t, Some((2, 6)), 7, Sort::Asc, 100).expect("asc"), None);
        assert_eq!(pass_counted(&t, Some((2, 6)), 6, Sort::Desc, 100).expect("desc"), Some((2, 6)));
        assert_eq!(pass_counted(&t, None, 3, Sort::Asc, 100).expect("asc"), None);
    }
}
