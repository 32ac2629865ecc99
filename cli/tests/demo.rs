//! `softpreempt demo --quick`: both child roles, on the bare vendor and through the built
//! library (found next to the binary), through the real ICD loader with PoCL. Needs
//! `cargo build --workspace` first, like the root package's tests.

mod common;

use common::*;

#[test]
fn quick_demo_runs_every_scenario_and_checks_the_results() {
    let o = run(["demo", "--quick", "--samples", "3"], &[]);
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(o.status.success(), "stdout:\n{out}\nstderr:\n{err}");
    for row in [
        "HP alone, bare vendor",
        "HP + LP, bare vendor",
        "HP + LP, through SoftPreempt",
    ] {
        let line = out
            .lines()
            .find(|l| l.starts_with(row))
            .unwrap_or_else(|| panic!("no row {row}:\n{out}"));
        // p50, p99 and the LP rate (or "-" when there is no LP).
        assert!(line.contains(" ms") || line.contains(" µs"), "{line}");
    }
    assert!(
        out.contains("results bit-identical on every path: yes"),
        "{out}"
    );
    // Without a terminal, the progress goes to stderr one phase per line.
    assert!(
        err.contains("HP + LP, through SoftPreempt: starting the LP process"),
        "{err}"
    );
}
