//! Bad input to every subcommand: one line on stderr, a non-zero exit (2 for the command
//! line, 1 for a failure), never a panic. And `run`, which has nothing else to test.

mod common;

use common::*;

#[test]
fn command_line_mistakes_exit_2_with_one_line() {
    for (args, want) in [
        (&["frobnicate"][..], "unknown command 'frobnicate'"),
        (
            &["status", "--verbose"][..],
            "status: unknown flag '--verbose'",
        ),
        (
            &["status", "--interval", "soon"][..],
            "--interval needs a number",
        ),
        (
            &["status", "--interval", "0"][..],
            "--interval must be above 0",
        ),
        (
            &["status", "extra"][..],
            "status: unexpected argument 'extra'",
        ),
        (
            &["install", "--prefix"][..],
            "install: '--prefix' needs a value",
        ),
        (
            &["install", "--exclusive=yes"][..],
            "'--exclusive' takes no value",
        ),
        (
            &["uninstall", "--exclusive"][..],
            "uninstall: unknown flag '--exclusive'",
        ),
        (&["config"][..], "config: usage"),
        (&["config", "fix"][..], "config: unknown subcommand 'fix'"),
        (
            &["config", "check", "a.toml", "b.toml"][..],
            "unexpected argument 'b.toml'",
        ),
        (&["trace"][..], "trace: usage"),
        (&["trace", "merge", "dir"][..], "trace merge: usage"),
        (
            &["trace", "merge", "dir", "-o"][..],
            "'--output' needs a value",
        ),
        (
            &["demo", "--samples", "-1"][..],
            "--samples needs a positive number",
        ),
        (&["demo", "--fast"][..], "demo: unknown flag '--fast'"),
        (&["run", "--", "true"][..], "run: --priority is required"),
        (
            &["run", "--priority", "urgent", "--", "true"][..],
            "run: expected a priority",
        ),
        (&["run", "--priority", "high"][..], "run: no command given"),
    ] {
        let o = run(args, &[]);
        let err = one_line_error(&o, 2);
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn missing_files_exit_1_with_one_line() {
    for (args, want) in [
        (
            &["trace", "merge", "/nonexistent/traces", "-o", "/tmp/x.json"][..],
            "/nonexistent/traces",
        ),
        (
            &["config", "check", "/nonexistent.toml"][..],
            "/nonexistent.toml: cannot read",
        ),
        (
            &["run", "--priority", "low", "--", "/nonexistent/program"][..],
            "cannot run '/nonexistent/program'",
        ),
        (
            &["uninstall", "--prefix", "/nonexistent/prefix"][..],
            "nothing to uninstall",
        ),
    ] {
        let o = run(args, &[]);
        let err = one_line_error(&o, 1);
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn help_goes_to_stdout_and_succeeds() {
    let o = run(["--help"], &[]);
    assert!(o.status.success());
    for cmd in [
        "install",
        "uninstall",
        "status",
        "run",
        "config check",
        "demo",
        "trace merge",
    ] {
        assert!(stdout(&o).contains(&format!("softpreempt {cmd}")), "{cmd}");
    }
    let o = run(["status", "--help"], &[]);
    assert!(o.status.success());
    assert!(stdout(&o).starts_with("usage: softpreempt status"));
}

#[test]
fn run_sets_the_priority_for_the_command() {
    let o = run(
        [
            "run",
            "--priority",
            "high:3",
            "--",
            "sh",
            "-c",
            "echo $SOFTPREEMPT_PRIORITY; exit 7",
        ],
        &[],
    );
    assert_eq!(stdout(&o), "high:3\n");
    assert_eq!(o.status.code(), Some(7), "the command's own exit status");
    // Without `--`, the command starts at the first argument that is not an option.
    let o = run(
        ["run", "-p", "LOW", "printenv", "SOFTPREEMPT_PRIORITY"],
        &[],
    );
    assert_eq!(stdout(&o), "low\n");
}
