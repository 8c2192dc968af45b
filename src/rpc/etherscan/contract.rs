//! The `contract` module: who created a contract, from the index's creators and the node's
//! transactions; and the source actions: no contract source is verified here, so `getabi`
//! refuses as Etherscan does for an unverified contract, and `getsourcecode` answers its
//! unverified record.

use alloy_primitives::Address;
use serde_json::{json, Value};

use super::{
    envelope::{reasons, Answer},
    params::Params,
    token::lower_hex,
    Etherscan,
};
use crate::{db::DbError, index::families::appearances::creation, rpc::call_tree};

/// Contracts one `getcontractcreation` call may name: Etherscan's.
const MOST_CONTRACTS: usize = 5;

/// `getcontractcreation`: for each contract the index saw created (up to five, in the order
/// asked; the newest creation of one re-created at its address), the sender of the creating
/// transaction, the factory when a contract created it, the transaction, its block and time,
/// and the init code.
pub(super) async fn creations(api: &Etherscan, params: &Params) -> Answer {
    let contracts = match params.addresses("contractaddresses", MOST_CONTRACTS) {
        Ok(contracts) => contracts,
        Err(refusal) => return refusal,
    };
    let found = api.read(|t| {
        contracts
            .iter()
            .filter_map(|c| creation(t, c).map(|found| found.map(|f| (*c, f))).transpose())
            .collect::<Result<Vec<_>, DbError>>()
    });
    let found = match found {
        Ok(found) if found.is_empty() => return Answer::NoRows("No data found"),
        Ok(found) => found,
        Err(refusal) => return refusal,
    };
    let ids: Vec<_> = found.iter().map(|(_, c)| c.tx).collect();
    let (summaries, txs) = match api.transactions(&ids).await {
        Ok(got) => got,
        Err(refusal) => return refusal,
    };
    let mut rows = Vec::with_capacity(found.len());
    for ((contract, made), tx) in found.iter().zip(&txs) {
        let sender: Address = match serde_json::from_value(tx.transaction["from"].clone()) {
            Ok(sender) => sender,
            Err(_) => return Answer::refuse("Error! The node's transaction has no sender"),
        };
        let top_level =
            tx.receipt.get("contractAddress").and_then(|a| serde_json::from_value::<Address>(a.clone()).ok())
                == Some(*contract);
        let init_code = if top_level {
            tx.transaction.get("input").cloned().unwrap_or(Value::Null)
        } else {
            match init_code_in_frames(api, &tx.hash, contract).await {
                Ok(code) => code,
                Err(refusal) => return refusal,
            }
        };
        let block = made.tx.block();
        let timestamp = summaries.get(&format!("{block:#x}")).map(|s| s.timestamp).unwrap_or_default();
        let factory = if made.creator == sender { String::new() } else { lower_hex(&made.creator) };
        rows.push(json!({
            "contractAddress": lower_hex(contract),
            "contractCreator": lower_hex(&sender),
            "txHash": tx.hash,
            "blockNumber": block.to_string(),
            "timestamp": timestamp.to_string(),
            "contractFactory": factory,
            "creationBytecode": init_code,
        }));
    }
    Answer::Ok(Value::Array(rows))
}

/// The init code of the successful CREATE or CREATE2 frame of transaction `hash` that made
/// `contract`, from the node's call tracer (`""` when the node has none).
async fn init_code_in_frames(api: &Etherscan, hash: &Value, contract: &Address) -> Result<Value, Answer> {
    let Some(hash) = hash.as_str().and_then(|h| h.parse().ok()) else {
        return Err(Answer::refuse("Error! The node's transaction has no hash"));
    };
    let tree = call_tree::of(&api.ctx, hash, true)
        .await
        .map_err(|e| Answer::refuse(format!("Error! {}", e.message())))?;
    let made = tree.placed().into_iter().find(|p| {
        matches!(p.frame.kind.as_str(), "CREATE" | "CREATE2") && !p.undone && p.frame.to == Some(*contract)
    });
    Ok(made.map_or_else(|| json!(""), |p| json!(p.frame.input)))
}

/// `getabi`: Etherscan's refusal for a contract without verified source.
pub(super) fn abi(params: &Params) -> Answer {
    match params.address("address") {
        Ok(_) => Answer::refuse(reasons::NOT_VERIFIED),
        Err(refusal) => refusal,
    }
}

/// `getsourcecode`: the record Etherscan answers for a contract without verified source.
pub(super) fn source_code(params: &Params) -> Answer {
    if let Err(refusal) = params.address("address") {
        return refusal;
    }
    Answer::Ok(json!([{
        "SourceCode": "",
        "ABI": reasons::NOT_VERIFIED,
        "ContractName": "",
        "CompilerVersion": "",
        "OptimizationUsed": "",
        "Runs": "",
        "ConstructorArguments": "",
        "EVMVersion": "Default",
        "Library": "",
        "LicenseType": "Unknown",
        "Proxy": "0",
        "Implementation": "",
        "SwarmSource": "",
    }]))
}
