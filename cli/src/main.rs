//! `softpreempt`: install the layer, see what it is doing, run programs at a priority,
//! check the configuration, demonstrate preemption, and merge traces.
//!
//! Every failure is one line on stderr (`softpreempt: ...`) and a non-zero exit status:
//! 2 for a wrong command line, 1 when the command could not do its job.

mod args;
mod config_check;
mod demo;
mod install;
mod locate;
mod manifest;
mod metrics;
mod run;
mod status;
mod store;
mod trace_merge;
mod units;

use std::process::ExitCode;

use args::CliError;

type Handler = fn(&[String]) -> Result<(), CliError>;

/// Every subcommand: name, usage, one-line summary, handler.
const COMMANDS: &[(&str, &str, &str, Handler)] = &[
    (
        "install",
        install::INSTALL_USAGE,
        "register SoftPreempt with the OpenCL ICD loader",
        install::install,
    ),
    (
        "uninstall",
        install::UNINSTALL_USAGE,
        "undo exactly what install did",
        install::uninstall,
    ),
    (
        "status",
        status::USAGE,
        "show the processes on each device (like top)",
        status::run,
    ),
    (
        "metrics",
        metrics::METRICS_USAGE,
        "print the arbiter's statistics in the Prometheus text format",
        metrics::metrics,
    ),
    (
        "exporter",
        metrics::EXPORTER_USAGE,
        "serve those metrics over HTTP for Prometheus to scrape",
        metrics::exporter,
    ),
    ("run", run::USAGE, "run a command at a priority", run::run),
    (
        "config",
        config_check::USAGE,
        "validate a config file; show each value's source",
        config_check::run,
    ),
    (
        "demo",
        demo::USAGE,
        "show HP latency and LP throughput, bare vs SoftPreempt",
        demo::run,
    ),
    (
        "store",
        store::USAGE,
        "show or clear the program store (what SoftPreempt learned from program sources)",
        store::run,
    ),
    (
        "trace",
        trace_merge::USAGE,
        "merge per-process traces into one Perfetto timeline",
        trace_merge::run,
    ),
];

fn usage() -> String {
    let mut s = String::from("usage: softpreempt COMMAND ...\n\ncommands:\n");
    for (_, usage, summary, _) in COMMANDS {
        s.push_str(&format!("  {usage}\n      {summary}\n"));
    }
    s.push_str("\n`softpreempt COMMAND --help` shows one command's usage.");
    s
}

fn report(r: Result<(), CliError>) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError::Usage(m)) => {
            eprintln!("softpreempt: {m}");
            ExitCode::from(2)
        }
        Err(CliError::Failed(m)) => {
            eprintln!("softpreempt: {m}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    // A bug must still end in one line, not a backtrace.
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        eprintln!("softpreempt: internal error: {msg}");
    }));
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((name, rest)) = args.split_first() else {
        println!("{}", usage());
        return ExitCode::SUCCESS;
    };
    if matches!(name.as_str(), "-h" | "--help" | "help") {
        println!("{}", usage());
        return ExitCode::SUCCESS;
    }
    let Some((_, cmd_usage, _, handler)) = COMMANDS.iter().find(|c| c.0 == name) else {
        return report(Err(CliError::Usage(format!(
            "unknown command '{name}' (try `softpreempt --help`)"
        ))));
    };
    if rest
        .iter()
        .take_while(|a| *a != "--")
        .any(|a| a == "--help" || a == "-h")
    {
        println!("usage: {cmd_usage}");
        return ExitCode::SUCCESS;
    }
    // The demo's child processes are this binary too.
    if let Some(code) = demo::child_role() {
        return code;
    }
    report(handler(rest))
}
