//! Command-line parsing for the subcommands (no parser crate: the grammar is tiny), and
//! the CLI's error type.

use std::collections::{HashMap, HashSet};
use std::fmt;

/// A failure of a subcommand: printed as one line, `softpreempt: <message>`.
#[derive(Debug)]
pub enum CliError {
    /// The command line is wrong (exit status 2).
    Usage(String),
    /// The command could not do its job (exit status 1).
    Failed(String),
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Usage(m) | CliError::Failed(m) => f.write_str(m),
        }
    }
}

/// `Err(CliError::Failed(..))` from anything printable.
pub fn failed<T>(msg: impl fmt::Display) -> Result<T, CliError> {
    Err(CliError::Failed(msg.to_string()))
}

/// What a subcommand accepts.
pub struct Spec {
    /// e.g. `status`, for messages.
    pub command: &'static str,
    /// Flags without a value, e.g. `--json`.
    pub flags: &'static [&'static str],
    /// Options that take a value, e.g. `--prefix`.
    pub options: &'static [&'static str],
    /// Short spellings: `("-o", "--output")`.
    pub short: &'static [(&'static str, &'static str)],
    /// Most positional arguments (before `--`).
    pub max_positional: usize,
    /// Whether `--` and a command after it are accepted.
    pub trailing: bool,
}

/// A parsed command line.
#[derive(Debug, Default)]
pub struct Parsed {
    flags: HashSet<&'static str>,
    options: HashMap<&'static str, String>,
    /// Positional arguments, in order.
    pub positional: Vec<String>,
    /// Everything after `--` (or after the first positional, for `trailing` specs).
    pub trailing: Vec<String>,
}

impl Parsed {
    /// Whether `--name` was given.
    pub fn flag(&self, name: &str) -> bool {
        self.flags.contains(name)
    }

    /// The value of `--name`, if given.
    pub fn option(&self, name: &str) -> Option<&str> {
        self.options.get(name).map(String::as_str)
    }
}

/// Runs `run` for `command SUB ARGS` when SUB is `sub` (`config check`, `trace merge`).
pub fn subcommand(
    args: &[String],
    command: &str,
    sub: &str,
    usage: &str,
    run: fn(&[String]) -> Result<(), CliError>,
) -> Result<(), CliError> {
    match args.split_first() {
        Some((s, rest)) if s == sub => run(rest),
        Some((s, _)) => Err(CliError::Usage(format!(
            "{command}: unknown subcommand '{s}' (usage: {usage})"
        ))),
        None => Err(CliError::Usage(format!("{command}: usage: {usage}"))),
    }
}

/// Parses `args` against `spec`. `--opt value` and `--opt=value` both work.
pub fn parse(spec: &Spec, args: &[String]) -> Result<Parsed, CliError> {
    let usage = |m: String| Err(CliError::Usage(format!("{}: {m}", spec.command)));
    let mut out = Parsed::default();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        if arg == "--" {
            if !spec.trailing {
                return usage("unexpected '--'".into());
            }
            out.trailing = it.cloned().collect();
            break;
        }
        if arg.starts_with('-') && arg.len() > 1 {
            let (name, inline) = match arg.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (arg.as_str(), None),
            };
            let name = spec
                .short
                .iter()
                .find(|(s, _)| *s == name)
                .map_or(name, |(_, long)| long);
            if let Some(&flag) = spec.flags.iter().find(|f| **f == name) {
                if inline.is_some() {
                    return usage(format!("'{flag}' takes no value"));
                }
                out.flags.insert(flag);
            } else if let Some(&opt) = spec.options.iter().find(|o| **o == name) {
                let value = match inline.or_else(|| it.next().cloned()) {
                    Some(v) => v,
                    None => return usage(format!("'{opt}' needs a value")),
                };
                out.options.insert(opt, value);
            } else {
                return usage(format!("unknown flag '{name}'"));
            }
            continue;
        }
        if out.positional.len() == spec.max_positional {
            if spec.trailing {
                // `run --priority high CMD ARGS` without `--`: the command starts here.
                out.trailing = std::iter::once(arg).chain(it).cloned().collect();
                break;
            }
            return usage(format!("unexpected argument '{arg}'"));
        }
        out.positional.push(arg.clone());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: Spec = Spec {
        command: "x",
        flags: &["--json"],
        options: &["--output", "--priority"],
        short: &[("-o", "--output")],
        max_positional: 1,
        trailing: true,
    };

    fn p(args: &[&str]) -> Result<Parsed, CliError> {
        parse(
            &SPEC,
            &args.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        )
    }

    #[test]
    fn flags_options_positionals_and_trailing() {
        let a = p(&[
            "dir",
            "--json",
            "-o",
            "f",
            "--priority=high",
            "--",
            "cmd",
            "--json",
        ])
        .unwrap();
        assert!(a.flag("--json"));
        assert_eq!(a.option("--output"), Some("f"));
        assert_eq!(a.option("--priority"), Some("high"));
        assert_eq!(a.positional, ["dir"]);
        assert_eq!(a.trailing, ["cmd", "--json"]);
        let b = p(&["dir", "cmd", "-x"]).unwrap();
        assert_eq!(b.trailing, ["cmd", "-x"]);
    }

    #[test]
    fn mistakes_are_usage_errors() {
        for (args, msg) in [
            (&["--nope"][..], "x: unknown flag '--nope'"),
            (&["--output"][..], "x: '--output' needs a value"),
            (&["--json=1"][..], "x: '--json' takes no value"),
        ] {
            match p(args) {
                Err(CliError::Usage(m)) => assert_eq!(m, msg),
                other => panic!("{args:?}: {other:?}"),
            }
        }
    }
}
