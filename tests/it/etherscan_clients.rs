//! Two Etherscan client libraries from the registries — etherscan-api (npm) and
//! etherscan-python (PyPI), installed by `testbed/setup.sh` — pointed at our `/api` on a small
//! Anvil chain (a token, transfers, a contract that moves ether inside calls): every function
//! each offers is called (`testbed/clients/`), none fails to read an answer, and every one that
//! maps to an action we serve returns rows. The rest get Etherscan-shaped refusals that the
//! libraries read as such (for the statistics and PRO actions, the reason each is not served).
//! The gas tracker's two actions are served from the node's fee history.

use crate::common;

use std::{path::Path, process::Command, time::Duration};

use alloy::{
    primitives::{Address, Bytes},
    sol,
    sol_types::SolCall,
};
use common::{anvil::Anvil, workload::Chain};
use ots_indexer::{
    db::{AccessMode, Db},
    source::{NodeClient, TraceChoice},
    sync::{Indexer, SyncConfig},
};
use serde_json::{json, Value};

sol! {
    function all(address to) external payable;
}

/// Each call's outcome, as the script printed it.
fn outcomes(program: &str, script: &str, base: &str, samples: &Value) -> Vec<(String, String, String)> {
    let testbed = Path::new(env!("CARGO_MANIFEST_DIR")).join("testbed");
    let output = Command::new(program)
        .arg(testbed.join("clients").join(script))
        .arg(base)
        .arg(samples.to_string())
        .current_dir(&testbed)
        .output()
        .unwrap_or_else(|e| panic!("{program} {script} (run testbed/setup.sh first): {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{script}: {}\n{stdout}", String::from_utf8_lossy(&output.stderr));
    stdout
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{script}: {e}: {line}"));
            let text = |f: &str| v[f].as_str().unwrap_or_default().to_owned();
            (text("call"), text("outcome"), text("detail"))
        })
        .collect()
}

fn check(library: &str, got: &[(String, String, String)], served: &[&str]) {
    let broken: Vec<_> = got.iter().filter(|(_, outcome, _)| outcome == "broken").collect();
    assert!(broken.is_empty(), "{library} could not read our answers: {broken:?}");
    for call in served {
        let found = got.iter().find(|(c, _, _)| c == call);
        assert!(matches!(found, Some((_, outcome, _)) if outcome == "ok"), "{library} {call}: {found:?}");
    }
    let refused: Vec<_> =
        got.iter().filter(|(_, o, _)| o == "refused").map(|(c, _, d)| format!("{c}: {d}")).collect();
    eprintln!(
        "{library}: {} calls, {} answered, refused: {refused:#?}",
        got.len(),
        got.len() - refused.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_libraries_read_every_action_they_offer() {
    let anvil = Anvil::start(&[]);
    let mut chain = Chain::connect(&anvil.url);
    let a = chain.accounts().await;
    let token_deploy = chain.deploy_token(a[0], "Client Token", "CLT").await;
    let ops_deploy = chain.deploy_artifact(a[0], "InternalOps").await;
    chain.mine().await;
    let address_of = |receipt: Value| -> Address {
        serde_json::from_value(receipt["contractAddress"].clone()).expect("contract address")
    };
    let token = address_of(chain.receipt_of(token_deploy).await);
    let ops = address_of(chain.receipt_of(ops_deploy).await);
    for i in 1..=4 {
        chain.transfer(token, a[0], a[i], 10 * i as u64).await;
    }
    chain.mine().await;
    let data = Bytes::from(allCall { to: a[1] }.abi_encode());
    let internal = chain
        .call("eth_sendTransaction", json!([{"from": a[0], "to": ops, "value": "0x400", "data": data}]))
        .await;
    chain.mine().await;

    let node = NodeClient::connect(&anvil.url, Duration::from_secs(30))
        .expect("node")
        .with_traces(TraceChoice::Auto)
        .await
        .expect("tracer");
    let head = node.head().await.expect("head");
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open db");
    let classifiers =
        ots_classifiers::BUILTIN_NAMES.iter().filter_map(|n| ots_classifiers::builtin(n)).collect();
    let config = SyncConfig { batch_blocks: 2, ..Default::default() };
    let indexer = Indexer::open(db.clone(), node.clone(), classifiers, config).await.expect("indexer");
    indexer.sync_to(head).await.expect("sync");
    let (client, server) = common::serve(&db, node).await;
    let miner = chain.call("eth_getBlockByNumber", json!(["0x1", false])).await["miner"].clone();
    let first_time = chain.call("eth_getBlockByNumber", json!(["0x1", false])).await["timestamp"].clone();
    let first_time =
        u64::from_str_radix(first_time.as_str().unwrap_or_default().trim_start_matches("0x"), 16)
            .expect("a timestamp");

    let samples = json!({
        "values": {
            "address": a[0], "addresses": [a[0], a[1]], "txhash": internal, "contractaddress": token,
            "contract_address": token, "startblock": 0, "endblock": 99_999_999, "sort": "asc", "page": 1,
            "offset": 10, "blockno": 1, "block_no": 1, "tag": "0x1", "index": "0x0", "to": token,
            "data": "0x18160ddd", "position": "0x0", "timestamp": first_time, "closest": "before",
            "fromBlock": 0, "toBlock": "latest",
        },
        "overrides": {
            "log.getLogs": {"address": token},
            "account.getminedblocks": {"address": miner},
            "get_mined_blocks_by_address": {"address": miner},
            "get_mined_blocks_by_address_paginated": {"address": miner},
            "get_est_block_countdown_time_by_block_number": {"block_no": head + 100},
            "get_internal_txs_by_address": {"address": a[1]},
            "get_est_confirmation_time": {"gas_price": 1_000_000_000_000u64},
            "get_internal_txs_by_address_paginated": {"address": a[1]},
        },
    });

    let js = outcomes("node", "etherscan-api.js", &client.url, &samples);
    let js_served = [
        "log.getLogs",
        "proxy.eth_blockNumber",
        "proxy.eth_getBlockByNumber",
        "proxy.eth_getTransactionByHash",
        "proxy.eth_getTransactionReceipt",
        "proxy.eth_getTransactionCount",
        "proxy.eth_call",
        "proxy.eth_getCode",
        "proxy.eth_getStorageAt",
        "proxy.eth_gasPrice",
        "stats.tokensupply",
        "block.getblockreward",
        "transaction.getstatus",
        "contract.getsourcecode",
        "account.tokenbalance",
        "account.balance",
        "account.txlistinternal",
        "account.txlist",
        "account.getminedblocks",
        "account.tokentx",
    ];
    check("etherscan-api (npm)", &js, &js_served);

    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("testbed/.venv/bin/python");
    let py = outcomes(&python.to_string_lossy(), "etherscan_python.py", &client.url, &samples);
    let py_served = [
        "get_acc_balance_by_token_and_contract_address",
        "get_block_number_by_timestamp",
        "get_block_reward_by_block_number",
        "get_contract_execution_status",
        "get_contract_source_code",
        "get_erc20_token_transfer_events_by_address",
        "get_erc20_token_transfer_events_by_address_and_contract_paginated",
        "get_erc20_token_transfer_events_by_contract_address_paginated",
        "get_est_block_countdown_time_by_block_number",
        "get_est_confirmation_time",
        "get_eth_balance",
        "get_eth_balance_multiple",
        "get_gas_oracle",
        "get_hist_erc20_token_account_balance_for_token_contract_address_by_block_no",
        "get_hist_erc20_token_total_supply_by_contract_address_and_block_no",
        "get_hist_eth_balance_for_address_by_block_no",
        "get_internal_txs_by_address",
        "get_internal_txs_by_address_paginated",
        "get_internal_txs_by_block_range_paginated",
        "get_internal_txs_by_txhash",
        "get_mined_blocks_by_address",
        "get_mined_blocks_by_address_paginated",
        "get_normal_txs_by_address",
        "get_normal_txs_by_address_paginated",
        "get_proxy_block_by_number",
        "get_proxy_block_number",
        "get_proxy_call",
        "get_proxy_code_at",
        "get_proxy_gas_price",
        "get_proxy_transaction_by_hash",
        "get_proxy_transaction_receipt",
        "get_token_info_by_contract_address",
        "get_total_supply_by_contract_address",
        "get_tx_receipt_status",
    ];
    check("etherscan-python (PyPI)", &py, &py_served);
    server.stop().expect("stop");
    server.stopped().await;
}
