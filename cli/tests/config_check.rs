//! `softpreempt config check` on the config fixtures: good files print every control with
//! its source; bad ones give `file:line:column: key 'k': message` and exit 1.

mod common;

use std::ffi::OsStr;
use std::path::PathBuf;

use common::*;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../platform/tests/fixtures/config")
        .join(name)
}

fn line<'a>(report: &'a str, key: &str) -> &'a str {
    report
        .lines()
        .find(|l| l.starts_with(&format!("{key} = ")))
        .unwrap_or_else(|| panic!("no {key} in\n{report}"))
}

#[test]
fn good_file_shows_each_value_and_where_it_came_from() {
    let path = fixture("partial.toml");
    let o = run(
        [OsStr::new("config"), OsStr::new("check"), path.as_os_str()],
        &[("SOFTPREEMPT_LOG", OsStr::new("warn"))],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert_eq!(
        out.lines().next().unwrap(),
        format!("# {}: valid", path.display())
    );
    let file = format!("# file:{}", path.display());
    assert!(line(&out, "sched.max_inflight").ends_with(&file), "{out}");
    assert!(line(&out, "log").contains("\"warn\""), "{out}");
    assert!(
        line(&out, "log").ends_with("# env:SOFTPREEMPT_LOG"),
        "{out}"
    );
    assert!(line(&out, "sched.slice").ends_with("# default"), "{out}");
    assert!(line(&out, "trace.dir").ends_with("# default"), "{out}");
}

#[test]
fn without_a_file_it_checks_what_the_library_would_read() {
    let path = fixture("good.toml");
    let o = run(
        ["config", "check"],
        &[("SOFTPREEMPT_CONFIG", path.as_os_str())],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        line(&out, "trace.profile").contains("/tmp/softpreempt-profile.jsonl"),
        "{out}"
    );
    assert!(line(&out, "sched.shm_dir").ends_with(&format!("# file:{}", path.display())));
    assert!(
        line(&out, "memory.reserve")
            .starts_with("memory.reserve = { high = \"25%\", normal = 2147483648 }"),
        "{out}"
    );
}

#[test]
fn bad_files_name_file_line_column_and_key() {
    for (name, want) in [
        (
            "unknown_key.toml",
            ":5:1: key 'sched.slice_mode': unknown key",
        ),
        (
            "wrong_type.toml",
            ":2:19: key 'sched.target_slice_us': expected an integer",
        ),
        (
            "out_of_range.toml",
            ":7:16: key 'sched.max_inflight': expected an integer between 1 and 2",
        ),
        (
            "bad_enum.toml",
            "key 'sched.slice': expected \"contended\", \"always\" or \"never\"",
        ),
        (
            "memory_unknown_level.toml",
            ":2:27: key 'memory.reserve.hihg': unknown key, expected one of `high`, `normal`, `low`",
        ),
        (
            "memory_reserve_over_100.toml",
            ":2:11: key 'memory.reserve': expected a table of levels",
        ),
    ] {
        let path = fixture(name);
        let o = run(
            [OsStr::new("config"), OsStr::new("check"), path.as_os_str()],
            &[],
        );
        let err = one_line_error(&o, 1);
        let prefix = format!("softpreempt: config check: {}:", path.display());
        assert!(err.starts_with(&prefix), "{name}: {err}");
        assert!(err.contains(want), "{name}: {err}");
        assert!(o.stdout.is_empty(), "{name}");
    }
}

#[test]
fn bad_environment_value_and_missing_file() {
    let path = fixture("empty.toml");
    let o = run(
        [OsStr::new("config"), OsStr::new("check"), path.as_os_str()],
        &[("SOFTPREEMPT_PRIORITY", OsStr::new("urgent"))],
    );
    let err = one_line_error(&o, 1);
    assert!(
        err.contains("env:SOFTPREEMPT_PRIORITY: key 'priority'"),
        "{err}"
    );
    let o = run(["config", "check", "/nonexistent/softpreempt.toml"], &[]);
    let err = one_line_error(&o, 1);
    assert!(
        err.contains("/nonexistent/softpreempt.toml: cannot read"),
        "{err}"
    );
}
