//! `softpreempt run --priority LEVEL -- CMD ARGS`: runs a command with
//! `SOFTPREEMPT_PRIORITY` set, so every queue it creates without its own priority hint
//! gets LEVEL.

use std::os::unix::process::CommandExt;
use std::process::Command;

use softpreempt_platform::config::{Priority, ENV_PRIORITY};

use crate::args::{failed, parse, CliError, Spec};

pub const USAGE: &str = "softpreempt run --priority high|normal|low[:N] [--] CMD [ARGS...]";

const SPEC: Spec = Spec {
    command: "run",
    flags: &[],
    options: &["--priority"],
    short: &[("-p", "--priority")],
    max_positional: 0,
    trailing: true,
};

pub fn run(args: &[String]) -> Result<(), CliError> {
    let a = parse(&SPEC, args)?;
    let Some(level) = a.option("--priority") else {
        return Err(CliError::Usage("run: --priority is required".into()));
    };
    let priority: Priority = level
        .parse()
        .map_err(|e: String| CliError::Usage(format!("run: {e}")))?;
    let Some((cmd, rest)) = a.trailing.split_first() else {
        return Err(CliError::Usage("run: no command given".into()));
    };
    // exec only returns on failure.
    let err = Command::new(cmd)
        .args(rest)
        .env(ENV_PRIORITY, priority.to_string())
        .exec();
    failed(format!("run: cannot run '{cmd}': {err}"))
}
