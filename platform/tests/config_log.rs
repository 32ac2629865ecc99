//! Logging goes to `log_file` (or stderr), prefixed `softpreempt[pid]:`,
//! filtered, and the `*_once!` macros log once per key or call site.
//!
//! One test only: the subscriber is process-global and installed once.

use softpreempt_platform::config::Config;
use softpreempt_platform::{error_once, info_once, log, warn_once};

#[test]
fn log_file_prefix_filter_and_once() {
    let path =
        std::env::temp_dir().join(format!("softpreempt-config-log-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let cfg = Config {
        log: "warn".into(),
        log_file: Some(path.clone()),
        ..Config::default()
    };
    log::install(&cfg);
    log::install(&Config::default()); // idempotent: the first one stays

    for i in 0..3 {
        warn_once!("same-key", "keyed warning {i}");
        warn_once!(_, "call-site warning {i}");
        warn_once!(format!("kernel:{}", i % 2), "per-kernel warning {i}");
        info_once!(_, "filtered out {i}");
    }
    error_once!(String::from("other-key"), "an error");

    let text = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    let prefix = format!("softpreempt[{}]: ", std::process::id());
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        vec![
            format!("{prefix}warn: keyed warning 0"),
            format!("{prefix}warn: call-site warning 0"),
            format!("{prefix}warn: per-kernel warning 0"),
            format!("{prefix}warn: per-kernel warning 1"),
            format!("{prefix}error: an error"),
        ],
        "{text}"
    );
}
