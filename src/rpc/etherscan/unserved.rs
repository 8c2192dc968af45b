//! Etherscan's actions this API knows and does not serve, each with the reason a caller reads
//! instead of Etherscan's "invalid action": the action's name is right, its data is not here.

/// Why a family of actions is not served.
const PRICE: &str = "this API answers from the node and its index, which hold no price of ether";
const SUPPLY: &str =
    "the ether in existence is every account's balance added up, which neither the node's JSON-RPC nor the index keeps";
const NETWORK: &str = "it describes Etherscan's own nodes and network, not this node";
const DAILY: &str = "the index keeps no per-day statistics of blocks (sizes, gas, fees, rewards, difficulty, new addresses); the node's blocks hold them";
const VERIFY: &str = "no contract source is kept or verified here";
const FUNDING: &str = "the index keeps no first funding of an address";

/// (module, action, reason).
const UNSERVED: &[(&str, &str, &str)] = &[
    ("stats", "ethprice", PRICE),
    ("stats", "ethdailyprice", PRICE),
    ("stats", "ethdailymarketcap", PRICE),
    ("stats", "ethsupply", SUPPLY),
    ("stats", "ethsupply2", SUPPLY),
    ("stats", "chainsize", NETWORK),
    ("stats", "nodecount", NETWORK),
    ("stats", "dailyavgblocksize", DAILY),
    ("stats", "dailyblkcount", DAILY),
    ("stats", "dailyblockrewards", DAILY),
    ("stats", "dailyavgblocktime", DAILY),
    ("stats", "dailyuncleblkcount", DAILY),
    ("stats", "dailyavggaslimit", DAILY),
    ("stats", "dailygasused", DAILY),
    ("stats", "dailyavggasprice", DAILY),
    ("stats", "dailytxnfee", DAILY),
    ("stats", "dailynewaddress", DAILY),
    ("stats", "dailynetutilization", DAILY),
    ("stats", "dailyavghashrate", DAILY),
    ("stats", "dailytx", DAILY),
    ("stats", "dailyavgnetdifficulty", DAILY),
    ("contract", "verifysourcecode", VERIFY),
    ("contract", "checkverifystatus", VERIFY),
    ("contract", "verifyproxycontract", VERIFY),
    ("contract", "checkproxyverification", VERIFY),
    ("account", "fundedby", FUNDING),
];

/// The refusal of `module`'s `action` when it is one of Etherscan's that this API does not
/// serve.
pub(super) fn refusal(module: &str, action: &str) -> Option<String> {
    UNSERVED
        .iter()
        .find(|(m, a, _)| *m == module && *a == action)
        .map(|(m, a, why)| format!("Error! {m}.{a} is not served here: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_actions_say_why_and_others_are_not_named() {
        assert_eq!(
            refusal("stats", "ethprice").as_deref(),
            Some("Error! stats.ethprice is not served here: this API answers from the node and its index, which hold no price of ether")
        );
        assert!(refusal("stats", "dailytx").is_some_and(|r| r.contains("per-day")));
        assert_eq!(refusal("stats", "nosuchaction"), None);
        assert_eq!(refusal("account", "ethprice"), None, "an action of another module");
        let mut names: Vec<_> = UNSERVED.iter().map(|(m, a, _)| (m, a)).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), UNSERVED.len(), "each action once");
    }
}
