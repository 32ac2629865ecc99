//! `softpreempt config check [FILE]`: validates a configuration file strictly and prints
//! the effective value of every control with where it came from (default, file,
//! environment). Without FILE it checks what the library would read:
//! `$SOFTPREEMPT_CONFIG`, else `/etc/softpreempt.toml`.

use std::path::Path;

use softpreempt_platform::config::{self, process_env};

use crate::args::{failed, parse, subcommand, CliError, Spec};

pub const USAGE: &str = "softpreempt config check [FILE]";

const SPEC: Spec = Spec {
    command: "config check",
    flags: &[],
    options: &[],
    short: &[],
    max_positional: 1,
    trailing: false,
};

pub fn run(args: &[String]) -> Result<(), CliError> {
    subcommand(args, "config", "check", USAGE, check)
}

fn check(args: &[String]) -> Result<(), CliError> {
    let a = parse(&SPEC, args)?;
    let loaded = match a.positional.first() {
        Some(file) => config::load_from(Path::new(file), &process_env),
        None => config::load(&process_env),
    };
    let eff = match loaded {
        Ok(eff) => eff,
        // `file:line:column: key 'k': message`, as one line.
        Err(e) => return failed(format!("config check: {e}")),
    };
    match &eff.path {
        Some(p) => println!("# {}: valid", p.display()),
        None => println!(
            "# {} does not exist: built-in defaults and environment",
            config::config_path(&process_env).0.display()
        ),
    }
    print!("{eff}");
    Ok(())
}
