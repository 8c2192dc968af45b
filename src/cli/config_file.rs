//! The TOML config file. Its keys are the long flag names (`rpc-url = "http://…"`,
//! `batch-blocks = 200`, `classifiers = ["erc20"]`). A flag beats its environment variable,
//! which beats the config file, which beats the built-in default: each key becomes the flag's
//! default before the flags are parsed, so one parser reads all sources and nothing writes the
//! process environment.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
};

use clap::Command;

/// The config file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// It cannot be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// It is not valid TOML.
    #[error("config file {path} is not valid TOML: {message}")]
    Parse {
        /// The file.
        path: String,
        /// The parser's message.
        message: String,
    },
    /// A key names no flag.
    #[error("config file {path}: unknown key `{key}` (keys are long flag names, e.g. rpc-url, datadir, batch-blocks)")]
    UnknownKey {
        /// The file.
        path: String,
        /// The key.
        key: String,
    },
    /// A value has a type no flag takes.
    #[error("config file {path}: key `{key}` must be a string, number, boolean or list of those")]
    BadValue {
        /// The file.
        path: String,
        /// The key.
        key: String,
    },
}

fn scalar(v: &toml::Value) -> Option<String> {
    match v {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::Float(f) => Some(f.to_string()),
        toml::Value::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Reads the config file at `path`: long flag name → its values.
pub fn read_config_file(path: &Path) -> Result<BTreeMap<String, Vec<String>>, ConfigError> {
    let shown = path.display().to_string();
    let text =
        std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: shown.clone(), source })?;
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| ConfigError::Parse { path: shown.clone(), message: e.to_string() })?;
    let mut out = BTreeMap::new();
    for (key, value) in table {
        let values = match &value {
            toml::Value::Array(items) => items.iter().map(scalar).collect::<Option<Vec<_>>>(),
            v => scalar(v).map(|s| vec![s]),
        }
        .ok_or_else(|| ConfigError::BadValue { path: shown.clone(), key: key.clone() })?;
        out.insert(key.replace('_', "-"), values);
    }
    Ok(out)
}

/// Makes `values` (long flag name → values) the defaults of those flags, wherever they appear in
/// `cmd` and its subcommands; the names used are added to `used`. Flags and
/// environment variables still beat these defaults: clap takes a default last.
fn set_defaults(
    mut cmd: Command,
    values: &BTreeMap<String, Vec<String>>,
    used: &mut BTreeSet<String>,
) -> Command {
    // Flags with an environment variable: settings, not per-run arguments such as `--to`.
    let ids: Vec<(String, String)> = cmd
        .get_arguments()
        .filter(|a| a.get_env().is_some())
        .filter_map(|a| Some((a.get_id().to_string(), a.get_long()?.to_owned())))
        .collect();
    for (id, long) in ids {
        if let Some(v) = values.get(&long) {
            used.insert(long);
            let v = v.clone();
            cmd = cmd.mut_arg(id, |a| a.default_values(v));
        }
    }
    let subcommands: Vec<String> = cmd.get_subcommands().map(|s| s.get_name().to_owned()).collect();
    for name in subcommands {
        cmd = cmd.mut_subcommand(name, |sub| set_defaults(sub, values, used));
    }
    cmd
}

/// `cmd` with the config file at `path` as the defaults of its flags.
pub fn with_config_file(cmd: Command, path: &Path) -> Result<Command, ConfigError> {
    let values = read_config_file(path)?;
    let mut used = BTreeSet::new();
    let cmd = set_defaults(cmd, &values, &mut used);
    if let Some(key) = values.keys().find(|k| !used.contains(*k)) {
        return Err(ConfigError::UnknownKey { path: path.display().to_string(), key: key.clone() });
    }
    Ok(cmd)
}

/// The config file named by `--config FILE`, `--config=FILE` or `OTS_CONFIG`, if any.
pub fn config_path(args: &[String]) -> Option<String> {
    let mut iter = args.iter();
    while let Some(a) = iter.next() {
        if a == "--config" {
            return iter.next().cloned();
        }
        if let Some(p) = a.strip_prefix("--config=") {
            return Some(p.to_owned());
        }
    }
    std::env::var("OTS_CONFIG").ok()
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, FromArgMatches};

    use super::*;
    use crate::cli::{Cli, Command as Sub};

    fn parse(config: &str, args: &[&str]) -> Result<Cli, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let path = dir.path().join("ots.toml");
        std::fs::write(&path, config).map_err(|e| e.to_string())?;
        let cmd = with_config_file(Cli::command(), &path).map_err(|e| e.to_string())?;
        let matches = cmd.try_get_matches_from(args).map_err(|e| e.to_string())?;
        Cli::from_arg_matches(&matches).map_err(|e| e.to_string())
    }

    #[test]
    fn keys_become_defaults_that_flags_beat() {
        let config = "batch-blocks = 7\nproxy-deny = [\"eth_\", \"net_\"]\n";
        let sync = |args: &[&str]| match parse(config, args) {
            Ok(Cli { command: Sub::Sync(sync), .. }) => sync.sync.batch_blocks,
            other => panic!("sync parses: {other:?}"),
        };
        assert_eq!(sync(&["ots-indexer", "sync"]), 7);
        assert_eq!(sync(&["ots-indexer", "sync", "--batch-blocks", "9"]), 9);
        match parse(config, &["ots-indexer", "serve"]) {
            Ok(Cli { command: Sub::Serve(serve), .. }) => {
                assert_eq!(serve.serve.proxy_deny, ["eth_", "net_"])
            }
            other => panic!("serve parses: {other:?}"),
        }
        // Per-run arguments are no settings.
        let err = parse("to = 3\n", &["ots-indexer", "unwind", "--to", "1"]).err().unwrap_or_default();
        assert!(err.contains("unknown key `to`"), "{err}");
    }

    #[test]
    fn a_stage_takes_its_run_bound_from_the_free_disk_unless_given_one() {
        use crate::sync::RunBudget;
        let bound = |config: &str, args: &[&str]| match parse(config, args) {
            Ok(Cli { command: Sub::Sync(sync), .. }) => sync.sync.config().stage.max_run_bytes,
            other => panic!("sync parses: {other:?}"),
        };
        assert_eq!(bound("", &["ots-indexer", "sync"]), RunBudget::FromFreeDisk { keep_free: None });
        assert_eq!(
            bound("stage-keep-free-mib = 3\n", &["ots-indexer", "sync"]),
            RunBudget::FromFreeDisk { keep_free: Some(3 << 20) }
        );
        assert_eq!(
            bound("stage-keep-free-mib = 3\n", &["ots-indexer", "sync", "--stage-max-run-mib", "5"]),
            RunBudget::Fixed(5 << 20)
        );
    }

    #[test]
    fn stages_compress_their_runs_once_one_fills_its_bound_unless_told() {
        use crate::sync::RunCompression;
        let compress = |config: &str, args: &[&str]| match parse(config, args) {
            Ok(Cli { command: Sub::Sync(sync), .. }) => sync.sync.config().stage.compress_runs,
            other => panic!("sync parses: {other:?}"),
        };
        assert_eq!(compress("", &["ots-indexer", "sync"]), RunCompression::Auto);
        assert_eq!(
            compress("stage-compress-runs = \"never\"\n", &["ots-indexer", "sync"]),
            RunCompression::Never
        );
        assert_eq!(
            compress(
                "stage-compress-runs = \"never\"\n",
                &["ots-indexer", "sync", "--stage-compress-runs", "always"]
            ),
            RunCompression::Always
        );
        assert!(parse("", &["ots-indexer", "sync", "--stage-compress-runs", "yes"]).is_err());
    }

    #[test]
    fn a_stage_fed_by_a_node_is_journalled_and_unbounded_in_time() {
        use std::time::Duration;
        let stage = |args: &[&str]| match parse("", args) {
            Ok(Cli { command: Sub::Sync(sync), .. }) => {
                let stage = sync.sync.config().stage;
                (stage.journal, stage.max_time)
            }
            other => panic!("sync parses: {other:?}"),
        };
        assert_eq!(stage(&["ots-indexer", "sync"]), (true, Duration::MAX));
        let recording = ["ots-indexer", "sync", "--source", "chain.rec.zst"];
        assert_eq!(stage(&recording), (false, Duration::from_secs(1200)));
        let on = [&recording[..], &["--stage-journal", "on"]].concat();
        assert_eq!(stage(&on), (true, Duration::MAX));
        let timed = ["ots-indexer", "sync", "--stage-max-secs", "60"];
        assert_eq!(stage(&timed), (true, Duration::from_secs(60)));
    }

    #[test]
    fn unknown_keys_and_odd_values_are_refused() {
        let err = parse("rpc-ulr = \"x\"\n", &["ots-indexer", "status"]).err().unwrap_or_default();
        assert!(err.contains("unknown key `rpc-ulr`"), "{err}");
        let err = parse("datadir = { a = 1 }\n", &["ots-indexer", "status"]).err().unwrap_or_default();
        assert!(err.contains("key `datadir` must be"), "{err}");
    }
}
