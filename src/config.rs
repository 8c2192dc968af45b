//! The TOML config file. Its keys are the long flag names (`rpc-url = "http://…"`,
//! `batch-blocks = 200`, `classifiers = ["erc20"]`). A flag beats its environment variable,
//! which beats the config file, which beats the default: each key is applied as the flag's
//! environment variable before the flags are parsed, so one parser reads all three sources.

use std::{collections::BTreeMap, path::Path};

use clap::CommandFactory;

use crate::cli::Cli;

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

/// Every flag that has an environment variable: long name → variable.
fn env_of_flags() -> BTreeMap<String, String> {
    fn walk(cmd: &clap::Command, out: &mut BTreeMap<String, String>) {
        for arg in cmd.get_arguments() {
            if let (Some(long), Some(env)) = (arg.get_long(), arg.get_env()) {
                out.insert(long.to_owned(), env.to_string_lossy().into_owned());
            }
        }
        for sub in cmd.get_subcommands() {
            walk(sub, out);
        }
    }
    let mut out = BTreeMap::new();
    walk(&Cli::command(), &mut out);
    out
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

/// Reads `path` and sets the environment variable of each key that is not already set.
pub fn apply_config_file(path: &Path) -> Result<(), ConfigError> {
    let shown = path.display().to_string();
    let text =
        std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: shown.clone(), source })?;
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| ConfigError::Parse { path: shown.clone(), message: e.to_string() })?;
    let flags = env_of_flags();
    for (key, value) in table {
        let flag = key.replace('_', "-");
        let Some(env) = flags.get(&flag) else {
            return Err(ConfigError::UnknownKey { path: shown, key });
        };
        let text = match &value {
            toml::Value::Array(items) => {
                items.iter().map(scalar).collect::<Option<Vec<_>>>().map(|v| v.join(","))
            }
            v => scalar(v),
        }
        .ok_or_else(|| ConfigError::BadValue { path: shown.clone(), key: key.clone() })?;
        if std::env::var_os(env).is_none() {
            std::env::set_var(env, text);
        }
    }
    Ok(())
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
