//! Which methods the server forwards to the node: everything it does not serve itself, except a
//! deny-list of methods that change the node, sign, or reveal its operator's secrets.

/// Denied unless `--proxy-allow` names them: namespaces (ending in `_`) and methods (a trailing
/// `*` matches any ending).
pub const DEFAULT_DENY: &[&str] = &[
    "admin_",
    "personal_",
    "miner_",
    "debug_",
    "anvil_",
    "evm_",
    "hardhat_",
    "txpool_",
    "engine_",
    "eth_sendTransaction",
    "eth_sign*",
];

/// Never forwarded whatever the lists say: a forwarded subscription would have no way back to
/// the client.
const NOT_FORWARDABLE: &[&str] = &["eth_subscribe", "eth_unsubscribe"];

/// Which methods are forwarded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyPolicy {
    deny: Vec<String>,
    allow: Vec<String>,
}

impl Default for ProxyPolicy {
    fn default() -> Self {
        Self::new(&[], &[])
    }
}

/// Whether `pattern` names `method`: exactly, as a namespace (`eth_`), or as a prefix (`eth_sign*`,
/// `*` for all).
fn matches(pattern: &str, method: &str) -> bool {
    if let Some(prefix) = pattern.strip_suffix('*') {
        method.starts_with(prefix)
    } else if pattern.ends_with('_') {
        method.starts_with(pattern)
    } else {
        pattern == method
    }
}

impl ProxyPolicy {
    /// The default deny-list plus `deny`; a method named by `allow` is forwarded even when a
    /// deny entry matches it.
    pub fn new(allow: &[String], deny: &[String]) -> Self {
        let mut all_deny: Vec<String> = DEFAULT_DENY.iter().map(|s| (*s).to_owned()).collect();
        all_deny.extend(deny.iter().filter(|s| !s.is_empty()).cloned());
        Self { deny: all_deny, allow: allow.iter().filter(|s| !s.is_empty()).cloned().collect() }
    }

    /// Why `method` is not forwarded, or `None` if it is.
    pub fn refusal(&self, method: &str) -> Option<String> {
        if NOT_FORWARDABLE.contains(&method) {
            return Some(format!(
                "{method} is not forwarded to the node (its notifications could not reach you); subscribe to the node directly, or use ots2_subscribe"
            ));
        }
        if method == "ots2_subscribe" || method == "ots2_unsubscribe" {
            return Some(format!(
                "{method} is not served by this process: live subscriptions come from `ots-indexer run`, which indexes and serves together"
            ));
        }
        if method.starts_with("ots_") {
            return Some(format!(
                "{method} is not an ots_ method this server offers: it serves every ots_ method the Otterscan UI calls from its own index and the node's standard methods, and forwards none (see docs/api.md)"
            ));
        }
        if method.starts_with("ots2_") {
            return Some(format!("{method} is not an ots2 method this server offers (see docs/api.md)"));
        }
        if self.allow.iter().any(|p| matches(p, method)) {
            return None;
        }
        let entry = self.deny.iter().find(|p| matches(p, method))?;
        Some(format!(
            "{method} is not served here: the proxy deny-list blocks it (entry {entry:?}); an operator can allow it with --proxy-allow {method}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_default_list_blocks_what_changes_or_signs() {
        let p = ProxyPolicy::default();
        for m in [
            "admin_peers",
            "personal_unlockAccount",
            "debug_traceTransaction",
            "anvil_mine",
            "evm_snapshot",
            "hardhat_reset",
            "txpool_content",
            "engine_newPayloadV3",
            "miner_start",
            "eth_sendTransaction",
            "eth_sign",
            "eth_signTypedData_v4",
            "eth_subscribe",
            "ots_getBlockDetails",
            "ots_searchTransactionsBefore",
        ] {
            assert!(p.refusal(m).is_some(), "{m} must be denied");
        }
        for m in [
            "eth_blockNumber",
            "eth_sendRawTransaction",
            "eth_call",
            "trace_block",
            "erigon_getHeaderByNumber",
            "net_version",
            "web3_clientVersion",
        ] {
            assert_eq!(p.refusal(m), None, "{m} must be forwarded");
        }
    }

    #[test]
    fn allow_wins_and_deny_adds() {
        let p = ProxyPolicy::new(
            &strings(&["debug_traceTransaction", "anvil_"]),
            &strings(&["trace_", "eth_call"]),
        );
        assert_eq!(p.refusal("debug_traceTransaction"), None);
        assert!(p.refusal("debug_traceBlockByNumber").is_some());
        assert_eq!(p.refusal("anvil_mine"), None);
        assert!(p.refusal("trace_block").is_some());
        assert!(p.refusal("eth_call").is_some());
        assert_eq!(p.refusal("eth_callMany"), None, "an exact entry is not a prefix");
        assert!(ProxyPolicy::new(&[], &strings(&["*"])).refusal("eth_chainId").is_some());
        let all = ProxyPolicy::new(&strings(&["*"]), &[]);
        assert_eq!(all.refusal("admin_peers"), None);
        assert!(all.refusal("eth_subscribe").is_some(), "subscriptions are never forwarded");
        assert!(all.refusal("ots2_subscribe").expect("ours").contains("ots-indexer run"));
        assert!(all.refusal("ots2_getNothing").is_some(), "ots2_ is ours alone");
        assert!(all.refusal("ots_getNothing").expect("ours").contains("forwards none"), "so is ots_");
    }

    #[test]
    fn a_refusal_says_how_to_allow() {
        let why = ProxyPolicy::default().refusal("anvil_mine").expect("denied");
        assert!(why.contains("--proxy-allow anvil_mine"), "{why}");
        assert!(why.contains("\"anvil_\""), "{why}");
    }
}
