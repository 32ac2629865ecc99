//! Configuration: `/etc/softpreempt.toml` (or `$SOFTPREEMPT_CONFIG`), with
//! environment overrides.
//!
//! Every key is declared once, in `controls.rs` ([`CONTROLS`]). Loading never takes the host
//! application down: [`config()`] reports a bad file once, through `tracing`,
//! and carries on with defaults. [`load_from`] is the pure, strict form for the
//! CLI's `config check` and for tests.

mod controls;
mod docs;
mod span;
mod types;

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use once_cell::sync::OnceCell;
use toml::de::DeTable;

pub use controls::{
    Config, Control, MemoryConfig, SchedConfig, Section, StoreConfig, SubKey, TraceConfig,
    CONTROLS, MEMORY_DEVICE_KEYS, RULE_KEYS, SECTIONS, TABLE_KEYS,
};
pub use docs::{render_example_toml, render_reference_markdown};
pub use types::{
    ControlValue, DeviceMemory, Level, LevelAmounts, MemAmount, Priority, Rule, SafeBinary,
    SliceMode, YieldMode,
};

/// The system-wide file, read when `SOFTPREEMPT_CONFIG` is unset.
pub const DEFAULT_PATH: &str = "/etc/softpreempt.toml";
/// Names a config file to read instead of [`DEFAULT_PATH`].
pub const ENV_CONFIG: &str = "SOFTPREEMPT_CONFIG";
/// Overrides the priority of every queue that does not set one itself.
pub const ENV_PRIORITY: &str = "SOFTPREEMPT_PRIORITY";

/// Looks up an environment variable. Loading takes one of these rather than
/// reading the process environment, so that it stays pure and testable.
pub type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The real process environment, for [`load`] and friends. Non-UTF-8 values
/// count as unset.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Built-in default. From [`priority_for_process`]: the `priority` key,
    /// whatever set it (see [`Effective::priority_for_process`] for detail).
    Default,
    File(PathBuf),
    Env(&'static str),
    /// The `[[rule]]` at this index (0-based, in file order).
    Rule(usize),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::File(p) => write!(f, "file:{}", p.display()),
            Source::Env(var) => write!(f, "env:{var}"),
            Source::Rule(i) => write!(f, "rule[{i}]"),
        }
    }
}

/// Where a configuration error is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// In a file; `line`/`column` are 1-based and absent when the error is
    /// about the file as a whole (unreadable, say).
    File {
        path: PathBuf,
        line: Option<usize>,
        column: Option<usize>,
    },
    /// In an environment variable's value.
    Env(&'static str),
}

/// A configuration error; displays as `file:line:column: key 'x': message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub location: Location,
    /// Dotted key path, e.g. `sched.max_inflight` or `rule[0].priority`.
    pub key: Option<String>,
    pub message: String,
}

impl ConfigError {
    fn io(path: &Path, err: &std::io::Error) -> Self {
        ConfigError {
            location: Location::File {
                path: path.to_path_buf(),
                line: None,
                column: None,
            },
            key: None,
            message: format!("cannot read: {err}"),
        }
    }

    fn at(
        path: &Path,
        text: &str,
        span: Option<&Range<usize>>,
        key: Option<String>,
        message: String,
    ) -> Self {
        let (line, column) = match span {
            Some(s) => {
                let (l, c) = span::line_col(text, s.start);
                (Some(l), Some(c))
            }
            None => (None, None),
        };
        ConfigError {
            location: Location::File {
                path: path.to_path_buf(),
                line,
                column,
            },
            key,
            message,
        }
    }

    pub fn line(&self) -> Option<usize> {
        match self.location {
            Location::File { line, .. } => line,
            Location::Env(_) => None,
        }
    }

    pub fn column(&self) -> Option<usize> {
        match self.location {
            Location::File { column, .. } => column,
            Location::Env(_) => None,
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.location {
            Location::File { path, line, column } => {
                write!(f, "{}", path.display())?;
                if let Some(line) = line {
                    write!(f, ":{line}")?;
                }
                if let Some(column) = column {
                    write!(f, ":{column}")?;
                }
            }
            Location::Env(var) => write!(f, "env:{var}")?,
        }
        if let Some(key) = &self.key {
            write!(f, ": key '{key}'")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

/// One line of the effective-config report.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub key: &'static str,
    /// The value as TOML text (`(unset)` for an absent optional key).
    pub value: String,
    pub source: Source,
}

/// A loaded configuration and where each value came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Effective {
    pub config: Config,
    /// The file read, if any (`None`: the default file did not exist).
    pub path: Option<PathBuf>,
    /// Source of every control, by dotted key; keys absent here are defaults.
    sources: BTreeMap<&'static str, Source>,
}

impl Effective {
    /// Built-in defaults, then the environment overrides that are valid.
    /// This is the fallback after an error, so a bad value is skipped, not
    /// reported again.
    pub fn defaults_with_env(env: EnvLookup<'_>) -> Self {
        let mut eff = Effective::bare(Config::default(), None);
        // Lenient: cannot fail.
        let _ = eff.apply_env(env, false);
        eff
    }

    fn bare(config: Config, path: Option<PathBuf>) -> Self {
        Effective {
            config,
            path,
            sources: BTreeMap::new(),
        }
    }

    /// Where `key`'s value came from.
    pub fn source(&self, key: &str) -> Source {
        self.sources.get(key).cloned().unwrap_or(Source::Default)
    }

    /// Every control with its value and source, in declaration order.
    pub fn entries(&self) -> Vec<Entry> {
        CONTROLS
            .iter()
            .map(|c| Entry {
                key: c.key,
                value: c.render(&self.config),
                source: self.source(c.key),
            })
            .collect()
    }

    /// Like [`priority_for_process`], but a fallback to the `priority` key
    /// reports where that key's value came from.
    pub fn priority_for_process(
        &self,
        exe: &str,
        uid: u32,
        env: EnvLookup<'_>,
    ) -> (Priority, Source) {
        match priority_for_process_with(&self.config, exe, uid, env) {
            (p, Source::Default) => (p, self.source("priority")),
            other => other,
        }
    }

    /// Applies environment overrides. `strict`: stop at the first bad value
    /// with an error; otherwise skip bad values.
    fn apply_env(&mut self, env: EnvLookup<'_>, strict: bool) -> Result<(), ConfigError> {
        for c in CONTROLS {
            let Some(var) = c.env else { continue };
            // An empty variable counts as unset, so `VAR= app` is harmless.
            let Some(value) = env(var).filter(|v| !v.is_empty()) else {
                continue;
            };
            if c.set_from_env(&mut self.config, &value) {
                self.sources.insert(c.key, Source::Env(var));
            } else if strict {
                return Err(ConfigError {
                    location: Location::Env(var),
                    key: Some(c.key.to_string()),
                    message: format!("expected {}, found {value:?}", c.expect),
                });
            }
        }
        Ok(())
    }
}

impl fmt::Display for Effective {
    /// `key = value  # source`, one control per line, aligned.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entries = self.entries();
        let width = entries
            .iter()
            .map(|e| e.key.len() + 3 + e.value.len())
            .max()
            .unwrap_or(0);
        for e in entries {
            let assignment = format!("{} = {}", e.key, e.value);
            writeln!(f, "{assignment:<width$}  # {}", e.source)?;
        }
        Ok(())
    }
}

/// Parses `text` as the config file `path` (used only in messages and
/// sources), then applies environment overrides. Strict: the first error, in
/// file order, is returned.
pub fn parse_str(text: &str, path: &Path, env: EnvLookup<'_>) -> Result<Effective, ConfigError> {
    // The spanned tree locates keys for messages and sources.
    let tree = match DeTable::parse(text) {
        Ok(tree) => tree.into_inner(),
        Err(e) => {
            // A syntax error: name the key if the recovered tree has one
            // there, but keep the parser's own message.
            let span = e.span();
            let (partial, _) = DeTable::parse_recoverable(text);
            let key = span
                .as_ref()
                .and_then(|s| span::path_at(partial.get_ref(), s));
            return Err(ConfigError::at(
                path,
                text,
                span.as_ref(),
                key,
                e.message().to_string(),
            ));
        }
    };

    let config: Config = toml::from_str(text).map_err(|e| {
        let span = e.span();
        let key = span.as_ref().and_then(|s| span::path_at(&tree, s));
        let message = friendly_message(e.message(), key.as_deref(), text, span.as_ref());
        ConfigError::at(path, text, span.as_ref(), key, message)
    })?;

    // Ranges and formats, in file order so the first error is the first line.
    let mut invalid: Vec<(Option<Range<usize>>, &Control)> = CONTROLS
        .iter()
        .filter(|c| !c.is_valid(&config))
        .map(|c| (span::value_span(&tree, c.key), c))
        .collect();
    invalid.sort_by_key(|(s, _)| s.as_ref().map_or(usize::MAX, |s| s.start));
    if let Some((s, c)) = invalid.first() {
        let found = match s {
            Some(s) => span::snippet(text, s),
            None => c.render(&config),
        };
        let message = format!("expected {}, found {found}", c.expect);
        return Err(ConfigError::at(
            path,
            text,
            s.as_ref(),
            Some(c.key.to_string()),
            message,
        ));
    }

    let mut sources = BTreeMap::new();
    for c in CONTROLS {
        if span::value_span(&tree, c.key).is_some() {
            sources.insert(c.key, Source::File(path.to_path_buf()));
        }
    }
    let mut eff = Effective {
        config,
        path: Some(path.to_path_buf()),
        sources,
    };
    eff.apply_env(env, true)?;
    Ok(eff)
}

/// Turns serde's wording into the file's: "key", and for a known control the
/// uniform "expected <what the control accepts>, found <source text>".
fn friendly_message(
    raw: &str,
    key: Option<&str>,
    text: &str,
    span: Option<&Range<usize>>,
) -> String {
    if let Some(rest) = raw.strip_prefix("unknown field ") {
        // "unknown field `x`, expected one of `a`, `b`": the key is named already.
        return match rest.find(", expected") {
            Some(i) => format!("unknown key{}", &rest[i..]),
            None => "unknown key".to_string(),
        };
    }
    if let Some(rest) = raw.strip_prefix("missing field ") {
        return format!("missing key {rest}");
    }
    let (Some(key), Some(span)) = (key, span) else {
        return raw.to_string();
    };
    // A type error on a list element ("vendors[0]") still belongs to the list
    // control; a custom message on an element (a bad `[[rule]]`) stays as is.
    let on_element = key.ends_with(']');
    let is_type_error = raw.starts_with("invalid type") || raw.starts_with("invalid value");
    if on_element && !is_type_error {
        return raw.to_string();
    }
    let generic = strip_indices(key);
    let expect = CONTROLS
        .iter()
        .find(|c| c.key == generic)
        .map(|c| c.expect)
        .or_else(|| {
            TABLE_KEYS
                .iter()
                .flat_map(|(_, keys)| keys.iter())
                .find(|k| k.key == generic)
                .map(|k| k.expect)
        })
        .or_else(|| {
            SECTIONS
                .iter()
                .any(|s| s.name == generic)
                .then_some("a table")
        });
    match expect {
        Some(expect) => format!("expected {expect}, found {}", span::snippet(text, span)),
        None => raw.to_string(),
    }
}

/// `rule[2].priority` -> `rule.priority`.
fn strip_indices(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    let mut depth = 0usize;
    for ch in key.chars() {
        match ch {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            _ if depth == 0 => out.push(ch),
            _ => {}
        }
    }
    out
}

/// Reads and parses `path` (strict), then applies environment overrides.
/// Pure apart from reading the file: no globals, no logging.
pub fn load_from(path: &Path, env: EnvLookup<'_>) -> Result<Effective, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError::io(path, &e))?;
    parse_str(&text, path, env)
}

/// The file to read: `$SOFTPREEMPT_CONFIG`, else [`DEFAULT_PATH`]; `true`
/// when it was named explicitly (then it must exist).
pub fn config_path(env: EnvLookup<'_>) -> (PathBuf, bool) {
    config_path_or(Path::new(DEFAULT_PATH), env)
}

fn config_path_or(default_path: &Path, env: EnvLookup<'_>) -> (PathBuf, bool) {
    match env(ENV_CONFIG).filter(|p| !p.is_empty()) {
        Some(p) => (PathBuf::from(p), true),
        None => (default_path.to_path_buf(), false),
    }
}

/// Loads the configuration the way the library does, strictly: a missing
/// default file means defaults; a missing file named by
/// `SOFTPREEMPT_CONFIG` is an error.
pub fn load(env: EnvLookup<'_>) -> Result<Effective, ConfigError> {
    load_with_default_path(Path::new(DEFAULT_PATH), env)
}

/// [`load`] with another default file (for tests and staged installs).
pub fn load_with_default_path(
    default_path: &Path,
    env: EnvLookup<'_>,
) -> Result<Effective, ConfigError> {
    let (path, explicit) = config_path_or(default_path, env);
    match std::fs::read_to_string(&path) {
        Ok(text) => parse_str(&text, &path, env),
        Err(e) if !explicit && e.kind() == std::io::ErrorKind::NotFound => {
            let mut eff = Effective::bare(Config::default(), None);
            eff.apply_env(env, true)?;
            Ok(eff)
        }
        Err(e) => Err(ConfigError::io(&path, &e)),
    }
}

static EFFECTIVE: OnceCell<Effective> = OnceCell::new();

/// The process's configuration, loaded once on first use. Also installs
/// logging (configured by it), so that a config error is seen: it is logged
/// once, as an error, and defaults (with valid environment overrides) are
/// used instead.
pub fn effective() -> &'static Effective {
    EFFECTIVE.get_or_init(|| {
        let (eff, err) = match load(&process_env) {
            Ok(eff) => (eff, None),
            Err(err) => (Effective::defaults_with_env(&process_env), Some(err)),
        };
        crate::log::install(&eff.config);
        if let Some(err) = err {
            tracing::error!("{err}; using defaults");
        }
        eff
    })
}

/// The process's configuration; see [`effective`].
pub fn config() -> &'static Config {
    &effective().config
}

/// Priority for a process running `exe` as `uid`, from the process
/// environment; see [`priority_for_process_with`].
pub fn priority_for_process(cfg: &Config, exe: &str, uid: u32) -> (Priority, Source) {
    priority_for_process_with(cfg, exe, uid, &process_env)
}

/// Priority for a process: `SOFTPREEMPT_PRIORITY` if set and valid, else the
/// first matching `[[rule]]`, else the `priority` key (`Source::Default`).
/// The queue property and the scheduling class are the caller's.
pub fn priority_for_process_with(
    cfg: &Config,
    exe: &str,
    uid: u32,
    env: EnvLookup<'_>,
) -> (Priority, Source) {
    if let Some(p) = env(ENV_PRIORITY).and_then(|s| s.parse::<Priority>().ok()) {
        return (p, Source::Env(ENV_PRIORITY));
    }
    if let Some((i, rule)) = cfg
        .rule
        .iter()
        .enumerate()
        .find(|(_, r)| r.matches(exe, uid))
    {
        return (rule.priority, Source::Rule(i));
    }
    (cfg.priority, Source::Default)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_pass_their_own_checks() {
        let cfg = Config::default();
        for c in CONTROLS {
            assert!(c.is_valid(&cfg), "default of {} is invalid", c.key);
        }
    }

    #[test]
    fn strip_indices_removes_array_indices() {
        assert_eq!(strip_indices("rule[12].priority"), "rule.priority");
        assert_eq!(strip_indices("vendors[0]"), "vendors");
    }
}
