//! Bad config files: each error names the file, line, column and key, with a
//! message that says what was expected and what was found.

use std::path::PathBuf;

use softpreempt_platform::config::{load_from, ConfigError, Location};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/config")
        .join(name)
}

fn no_env(_: &str) -> Option<String> {
    None
}

fn error_of(name: &str) -> ConfigError {
    match load_from(&fixture(name), &no_env) {
        Ok(eff) => panic!("{name} loaded, but should fail: {eff}"),
        Err(e) => e,
    }
}

/// Asserts the whole one-line message, `file:line:column: key 'k': message`.
fn check(name: &str, line: usize, column: usize, key: &str, message: &str) {
    let err = error_of(name);
    let path = fixture(name);
    assert_eq!(
        err.location,
        Location::File {
            path: path.clone(),
            line: Some(line),
            column: Some(column)
        },
        "{err}"
    );
    assert_eq!(err.key.as_deref(), Some(key), "{err}");
    assert_eq!(err.message, message, "{err}");
    assert_eq!(
        err.to_string(),
        format!("{}:{line}:{column}: key '{key}': {message}", path.display())
    );
}

#[test]
fn out_of_range_integer() {
    check(
        "out_of_range.toml",
        7,
        16,
        "sched.max_inflight",
        "expected an integer between 1 and 2, found 5",
    );
}

#[test]
fn out_of_range_float() {
    check(
        "float_out_of_range.toml",
        2,
        13,
        "sched.min_share",
        "expected a number between 0.0 and 0.5, found 0.75",
    );
}

#[test]
fn unknown_key_in_table() {
    check(
        "unknown_key.toml",
        5,
        1,
        "sched.slice_mode",
        "unknown key, expected one of `slice`, `yielding`, `yield_wait_us`, `target_slice_us`, `piece_us`, `wave_work_groups`, `cpu_idle_class`, `max_inflight`, `min_share`, \
         `hp_linger_us`, `arbiter_timeout_ms`, `shm_group`, `shm_dir`",
    );
}

#[test]
fn unknown_top_level_key() {
    let err = error_of("unknown_top_key.toml");
    assert_eq!((err.line(), err.column()), (Some(2), Some(1)));
    assert_eq!(err.key.as_deref(), Some("vendor"));
    assert!(
        err.message
            .starts_with("unknown key, expected one of `version`, `vendors`"),
        "{err}"
    );
}

#[test]
fn unknown_table() {
    let err = error_of("unknown_table.toml");
    assert_eq!(err.line(), Some(3), "{err}");
    assert_eq!(err.key.as_deref(), Some("scheduler"));
    assert!(err.message.starts_with("unknown key"), "{err}");
}

#[test]
fn wrong_type() {
    check(
        "wrong_type.toml",
        2,
        19,
        "sched.target_slice_us",
        "expected an integer between 50 and 1000000, found \"fast\"",
    );
}

#[test]
fn bad_enum() {
    check(
        "bad_enum.toml",
        2,
        9,
        "sched.slice",
        "expected \"contended\", \"always\" or \"never\", found \"sometimes\"",
    );
}

#[test]
fn bad_priority() {
    check(
        "bad_priority.toml",
        1,
        12,
        "priority",
        "expected a priority: \"high\", \"normal\" or \"low\", optionally with a number 0-255 \
         inside the level, like \"high:3\", found \"urgent\"",
    );
}

#[test]
fn bad_priority_in_second_rule() {
    let err = error_of("rule_bad_priority.toml");
    assert_eq!((err.line(), err.column()), (Some(7), Some(12)), "{err}");
    assert_eq!(err.key.as_deref(), Some("rule[1].priority"));
    assert!(err.message.ends_with("found \"hihg\""), "{err}");
}

#[test]
fn rule_without_exe_or_uid() {
    check(
        "rule_no_match.toml",
        5,
        1,
        "rule[1]",
        "a rule needs `exe`, `uid`, or both",
    );
}

#[test]
fn unknown_key_in_rule() {
    check(
        "rule_unknown_key.toml",
        3,
        1,
        "rule[0].user",
        "unknown key, expected one of `exe`, `uid`, `priority`",
    );
}

#[test]
fn wrong_type_in_rule() {
    check(
        "rule_wrong_type.toml",
        2,
        7,
        "rule[0].uid",
        "expected a numeric user id, found \"root\"",
    );
}

#[test]
fn future_version() {
    check(
        "version_future.toml",
        1,
        11,
        "version",
        "expected 1 (the only config format this build reads), found 2",
    );
}

#[test]
fn syntax_error_names_line_and_key() {
    let err = error_of("syntax_error.toml");
    assert_eq!(err.line(), Some(2), "{err}");
    assert_eq!(err.key.as_deref(), Some("log"), "{err}");
    assert!(!err.message.is_empty());
}

#[test]
fn bad_list_element_is_pinpointed() {
    check(
        "bad_safe_binary.toml",
        1,
        31,
        "safe_binaries[1]",
        "expected a kernel name or \"sha256:<64 hex digits>\", found \"sha256:abc\"",
    );
}

#[test]
fn bad_log_filter() {
    check("bad_log_filter.toml", 1, 7, "log",
        "expected a log filter such as \"info\" or \"softpreempt=debug\", found \"softpreempt=loud\"");
}

#[test]
fn section_given_a_value() {
    check(
        "table_expected.toml",
        1,
        9,
        "sched",
        "expected a table, found 5",
    );
}

#[test]
fn missing_file() {
    let path = fixture("does_not_exist.toml");
    let err = load_from(&path, &no_env).unwrap_err();
    assert_eq!(
        err.location,
        Location::File {
            path: path.clone(),
            line: None,
            column: None
        }
    );
    assert_eq!(err.key, None);
    assert!(
        err.to_string()
            .starts_with(&format!("{}: cannot read: ", path.display())),
        "{err}"
    );
}

#[test]
fn memory_unknown_level() {
    let err = error_of("memory_unknown_level.toml");
    assert_eq!(err.line(), Some(2), "{err}");
    assert_eq!(err.key.as_deref(), Some("memory.reserve.hihg"), "{err}");
    assert!(
        err.message
            .starts_with("unknown key, expected one of `high`, `normal`, `low`"),
        "{err}"
    );
}

#[test]
fn memory_reserves_over_the_whole_device() {
    let err = error_of("memory_reserve_over_100.toml");
    assert_eq!(err.line(), Some(2), "{err}");
    assert_eq!(err.key.as_deref(), Some("memory.reserve"), "{err}");
    assert!(
        err.message.starts_with("expected a table of levels"),
        "{err}"
    );
}

#[test]
fn memory_bad_amount() {
    let err = error_of("memory_bad_amount.toml");
    assert_eq!(err.line(), Some(2), "{err}");
    assert_eq!(err.key.as_deref(), Some("memory.cap.low"), "{err}");
    assert!(err.message.contains("\"lots\""), "{err}");
}

#[test]
fn memory_device_without_a_name() {
    let err = error_of("memory_device_unnamed.toml");
    assert_eq!(err.key.as_deref(), Some("memory.device[0]"), "{err}");
    assert!(err.message.contains("device"), "{err}");
}
