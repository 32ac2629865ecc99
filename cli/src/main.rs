//! `softpreempt`: the command-line tool.
//!
//! Subcommands available now: `demo`. (`status`, `run`, `install`, `config check` and
//! `trace` arrive with their issue; asking for them says so and exits non-zero.)

mod demo;

use std::process::ExitCode;

const USAGE: &str = "usage: softpreempt demo";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("demo") => demo::run(&args[1..]),
        Some("-h") | Some("--help") | None => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Some(other) => {
            eprintln!("softpreempt: unknown command '{other}'\n{USAGE}");
            ExitCode::from(2)
        }
    }
}
