//! Etherscan's HTTP API on the JSON-RPC port, end to end: a real OpenZeppelin ERC20 on Anvil,
//! moved between accounts over several blocks and indexed; a plain HTTP client reads `/api` and
//! `/v2/api` by GET and by form POST, and every holder page, the holder count and the balances
//! equal what the node says (`balanceOf`, `eth_getBalance`), in Etherscan's envelope and field
//! names. Bad input gets Etherscan's refusals, and the JSON-RPC API on `/` answers as before.

use crate::common;

use std::time::Duration;

use alloy::{
    primitives::{Address, Bytes, U256},
    sol,
    sol_types::SolCall,
};
use common::{anvil::Anvil, workload::Chain, Client};
use ots_indexer::{
    db::{AccessMode, Db},
    source::NodeClient,
    sync::{Indexer, SyncConfig},
};
use serde_json::{json, Value};

sol! {
    interface Token {
        function balanceOf(address owner) external view returns (uint256);
    }
}

const HOLDERS: usize = 6;
const ANVIL_CHAIN_ID: u64 = 31337;

/// A GET of `path?query` on the server at `base`: the answer's JSON.
async fn get(http: &reqwest::Client, base: &str, path: &str, query: &str) -> Value {
    let answer = http.get(format!("{base}{path}?{query}")).send().await.expect("GET");
    assert_eq!(answer.status(), 200, "{path}?{query}");
    let text = answer.text().await.expect("body");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}?{query}: {e}: {text}"))
}

/// A form POST of `form` to `/api`: the answer's JSON.
async fn post(http: &reqwest::Client, base: &str, form: &str) -> Value {
    let answer = http
        .post(format!("{base}/api"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form.to_owned())
        .send()
        .await
        .expect("POST");
    assert_eq!(answer.status(), 200, "{form}");
    serde_json::from_str(&answer.text().await.expect("body")).expect("JSON")
}

fn ok(result: &Value) -> Value {
    json!({"status": "1", "message": "OK", "result": result})
}

fn refused(reason: &str) -> Value {
    json!({"status": "0", "message": "NOTOK", "result": reason})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holders_balances_and_refusals_match_etherscan_and_the_node() {
    let anvil = Anvil::start(&[]);
    let mut chain = Chain::connect(&anvil.url);
    let accounts = chain.accounts().await;
    let a0 = accounts[0];
    let deployed = chain.deploy_token(a0, "Etherscan Test", "EST").await;
    chain.mine().await;
    let token: Address =
        serde_json::from_value(chain.receipt_of(deployed).await["contractAddress"].clone()).expect("address");
    // Amounts that tie now and then, so the ranking's tie-break by address is exercised.
    for round in 1..=3u64 {
        for (i, &to) in accounts[1..=HOLDERS].iter().enumerate() {
            let amount = 1_000 * ((i as u64 + round) % 4 + 1);
            chain.transfer(token, a0, to, amount).await;
        }
        chain.transfer(token, accounts[2], accounts[3], 500 * round).await;
        chain.mine().await;
    }

    let node = NodeClient::connect(&anvil.url, Duration::from_secs(30)).expect("node");
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open db");
    let classifiers =
        ots_classifiers::BUILTIN_NAMES.iter().filter_map(|n| ots_classifiers::builtin(n)).collect();
    let config =
        SyncConfig { batch_blocks: 2, poll_interval: Duration::from_millis(50), ..Default::default() };
    let indexer = Indexer::open(db.clone(), node.clone(), classifiers, config).await.expect("indexer");
    indexer.sync_to(node.head().await.expect("head")).await.expect("sync");
    let (client, server) = common::serve(&db, node).await;
    let base = client.url.clone();
    let http = reqwest::Client::new();
    let rpc_node = Client::new(&anvil.url);

    // The ranking from `balanceOf`, largest first, ties by address, as Etherscan writes it.
    let mut holders: Vec<(U256, Address)> = Vec::new();
    for &account in &accounts {
        let call = Token::balanceOfCall { owner: account }.abi_encode();
        let answer =
            rpc_node.call("eth_call", json!([{"to": token, "data": Bytes::from(call)}, "latest"])).await;
        let balance = U256::from_be_slice(&serde_json::from_value::<Bytes>(answer).expect("bytes"));
        if !balance.is_zero() {
            holders.push((balance, account));
        }
    }
    holders.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let want: Vec<Value> = holders
        .iter()
        .map(|(b, h)| json!({"TokenHolderAddress": format!("{h:#x}"), "TokenHolderQuantity": b.to_string()}))
        .collect();
    assert!(want.len() > HOLDERS, "only {} holders", want.len());

    let count = format!("module=token&action=tokenholdercount&contractaddress={token}");
    assert_eq!(get(&http, &base, "/api", &count).await, ok(&json!(want.len().to_string())));
    for offset in [1, 2, 3, want.len()] {
        for page in 1..=want.len().div_ceil(offset) {
            let query = format!(
                "module=token&action=tokenholderlist&contractaddress={token}&page={page}&offset={offset}"
            );
            let start = (page - 1) * offset;
            let rows = json!(want[start..(start + offset).min(want.len())]);
            assert_eq!(get(&http, &base, "/api", &query).await, ok(&rows), "GET {query}");
            assert_eq!(post(&http, &base, &query).await, ok(&rows), "POST {query}");
            let v2 = format!("chainid={ANVIL_CHAIN_ID}&{query}&apikey=anything");
            assert_eq!(get(&http, &base, "/v2/api", &v2).await, ok(&rows), "v2 {query}");
        }
    }
    // Without page and offset: the first hundred rows, here all of them.
    let all = format!(
        "module=token&action=tokenholderlist&contractaddress={}",
        format!("{token:#x}").to_uppercase().replace("0X", "0x")
    );
    assert_eq!(get(&http, &base, "/api", &all).await, ok(&json!(want)));
    let past = format!("module=token&action=tokenholderlist&contractaddress={token}&page=99&offset=10000");
    assert_eq!(
        get(&http, &base, "/api", &past).await,
        json!({"status": "0", "message": "No token holder found", "result": []})
    );

    // Balances from the node, in wei, in the order asked.
    let mut rows = Vec::new();
    for &account in &accounts[..3] {
        let wei: U256 =
            serde_json::from_value(rpc_node.call("eth_getBalance", json!([account, "latest"])).await)
                .expect("wei");
        let one =
            get(&http, &base, "/api", &format!("module=account&action=balance&address={account}&tag=latest"))
                .await;
        assert_eq!(one, ok(&json!(wei.to_string())));
        rows.push(json!({"account": format!("{account:#x}"), "balance": wei.to_string()}));
    }
    let list = accounts[..3].iter().map(|a| a.to_string()).collect::<Vec<_>>().join(",");
    assert_eq!(
        get(&http, &base, "/api", &format!("module=account&action=balancemulti&address={list}")).await,
        ok(&json!(rows))
    );

    // A holder's token balance from the index, the supply and a receipt's status from the node.
    for &(balance, holder) in &holders[..3] {
        let query =
            format!("module=account&action=tokenbalance&contractaddress={token}&address={holder}&tag=latest");
        assert_eq!(get(&http, &base, "/api", &query).await, ok(&json!(balance.to_string())), "{query}");
    }
    let supply: U256 = holders.iter().map(|(b, _)| *b).sum();
    for module in ["stats", "token"] {
        let query = format!("module={module}&action=tokensupply&contractaddress={token}");
        assert_eq!(get(&http, &base, "/api", &query).await, ok(&json!(supply.to_string())), "{query}");
    }
    let status = format!("module=transaction&action=gettxreceiptstatus&txhash={deployed}");
    assert_eq!(get(&http, &base, "/api", &status).await, ok(&json!({"status": "1"})));

    // The proxy module: the node's own answers, in its JSON-RPC response object.
    let head = rpc_node.call("eth_blockNumber", json!([])).await;
    let proxied = [
        ("eth_blockNumber".to_owned(), "eth_blockNumber", json!([])),
        (
            format!("eth_getBlockByNumber&tag={}&boolean=true", head.as_str().expect("hex")),
            "eth_getBlockByNumber",
            json!([head, true]),
        ),
        (
            format!("eth_getTransactionByHash&txhash={deployed}"),
            "eth_getTransactionByHash",
            json!([deployed]),
        ),
        (
            format!("eth_getTransactionReceipt&txhash={deployed}"),
            "eth_getTransactionReceipt",
            json!([deployed]),
        ),
        (
            format!("eth_getTransactionCount&address={a0}&tag=latest"),
            "eth_getTransactionCount",
            json!([a0, "latest"]),
        ),
        (format!("eth_getCode&address={token}&tag=latest"), "eth_getCode", json!([token, "latest"])),
        (
            format!("eth_getStorageAt&address={token}&position=0x2&tag=latest"),
            "eth_getStorageAt",
            json!([token, "0x2", "latest"]),
        ),
        (
            format!("eth_call&to={token}&data=0x18160ddd&tag=latest"),
            "eth_call",
            json!([{"to": token, "data": "0x18160ddd"}, "latest"]),
        ),
    ];
    for (action, method, params) in proxied {
        let want = rpc_node.call(method, params).await;
        let got = get(&http, &base, "/api", &format!("module=proxy&action={action}")).await;
        assert_eq!(got, json!({"jsonrpc": "2.0", "id": 1, "result": want}), "{action}");
    }
    let missing = get(&http, &base, "/api", "module=proxy&action=eth_getTransactionByHash&id=7").await;
    assert_eq!(missing["id"], 7);
    assert_eq!(missing["error"]["code"], -32602, "{missing}");
    let node_error = get(&http, &base, "/api", "module=proxy&action=eth_getBlockByNumber&tag=notatag").await;
    assert!(node_error["error"]["message"].is_string() && node_error.get("result").is_none(), "{node_error}");

    // Refusals, each in the envelope, and nothing else changes.
    let cases = [
        ("/api", "action=tokenholdercount".to_owned(), "Error! Missing Or invalid Module name"),
        ("/api", "module=blocks&action=x".to_owned(), "Error! Missing Or invalid Module name"),
        ("/api", "module=token&action=nope".to_owned(), "Error! Missing Or invalid Action name"),
        ("/api", "module=proxy&action=eth_sign".to_owned(), "Error! Missing Or invalid Action name"),
        (
            "/api",
            "module=stats&action=ethsupply".to_owned(),
            "Error! stats.ethsupply is not served here: the ether in existence is every account's balance added up, which neither the node's JSON-RPC nor the index keeps",
        ),
        ("/api", "module=transaction&action=gettxreceiptstatus&txhash=0x12".to_owned(), "Error! Invalid transaction hash"),
        ("/api", "module=token&action=tokenholdercount&contractaddress=0x1234".to_owned(), "Error! Invalid address format"),
        ("/api", "module=account&action=balance&address=nothex".to_owned(), "Error! Invalid address format"),
        ("/api", format!("module=contract&action=getabi&address={token}"), "Contract source code not verified"),
        ("/api", format!("module=token&action=tokenholderlist&contractaddress={token}&page=0"), "Error! Invalid page: a whole number from 1"),
        (
            "/api",
            format!("module=token&action=tokenholderlist&contractaddress={token}&offset=10001"),
            "Error! offset 10001 is over this server's maximum of 10000 rows per page (see --etherscan-max-offset)",
        ),
        ("/v2/api", count.clone(), "Missing or unsupported chainid parameter (required for v2 api), please see https://api.etherscan.io/v2/chainlist for the list of supported chainids"),
        ("/v2/api", format!("chainid=1&{count}"), "Missing or unsupported chainid parameter (required for v2 api), please see https://api.etherscan.io/v2/chainlist for the list of supported chainids"),
    ];
    for (path, query, reason) in cases {
        assert_eq!(get(&http, &base, path, &query).await, refused(reason), "{path}?{query}");
    }
    let source =
        get(&http, &base, "/api", &format!("module=contract&action=getsourcecode&address={token}")).await;
    assert_eq!(source["status"], "1");
    assert_eq!(source["result"][0]["ABI"], "Contract source code not verified");
    assert_eq!(source["result"][0]["SourceCode"], "");

    // The JSON-RPC API on the same port is untouched.
    assert_eq!(client.call("ots2_getTokenHolderCount", json!([token])).await, json!(want.len()));
    server.stop().expect("stop");
    server.stopped().await;
}

/// With keys set, a call needs one of them and each key its own rate; the JSON-RPC paths do
/// not. No node is needed: the holder count is the index's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_keys_admit_their_holders_at_their_rate() {
    use ots_indexer::rpc::{self, RpcContext, ServerOptions};
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open db");
    let node = NodeClient::connect("http://127.0.0.1:9", Duration::from_secs(1)).expect("node");
    let options = ServerOptions {
        etherscan_keys: vec!["alpha".to_owned(), "beta".to_owned()],
        etherscan_key_rate: 2,
        ..ServerOptions::default()
    };
    let (addr, server) =
        rpc::serve("127.0.0.1:0".parse().expect("addr"), RpcContext::new(db, node), &options)
            .await
            .expect("serve");
    let base = format!("http://{addr}");
    let http = reqwest::Client::new();
    let count = format!("module=token&action=tokenholdercount&contractaddress={}", Address::repeat_byte(7));
    for query in [count.clone(), format!("{count}&apikey=gamma")] {
        assert_eq!(get(&http, &base, "/api", &query).await, refused("Missing/Invalid API Key"), "{query}");
    }
    let mut answers = Vec::new();
    for _ in 0..8 {
        answers.push(get(&http, &base, "/api", &format!("{count}&apikey=alpha")).await);
    }
    assert_eq!(answers[..2], [ok(&json!("0")), ok(&json!("0"))], "a key's first calls of a second");
    assert!(
        answers[2..].contains(&refused("Max calls per sec rate limit reached (2/sec)")),
        "eight calls at once go over two a second: {answers:?}"
    );
    assert_eq!(get(&http, &base, "/api", &format!("{count}&apikey=beta")).await, ok(&json!("0")));
    let form = format!("{count}&apiKey=beta");
    assert_eq!(post(&http, &base, &form).await, ok(&json!("0")), "a key in a form body, as apiKey");
    // JSON-RPC needs no key.
    let rpc = http
        .post(&base)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ots2_getTokenHolderCount", "params": [Address::repeat_byte(7)]}))
        .send()
        .await
        .expect("POST");
    assert_eq!(rpc.json::<Value>().await.expect("JSON")["result"], 0);
    server.stop().expect("stop");
    server.stopped().await;
}
