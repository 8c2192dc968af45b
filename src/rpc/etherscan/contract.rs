//! The `contract` module's source actions: no contract source is verified here, so `getabi`
//! refuses as Etherscan does for an unverified contract, and `getsourcecode` answers its
//! unverified record.

use serde_json::json;

use super::{
    envelope::{reasons, Answer},
    params::Params,
};

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
