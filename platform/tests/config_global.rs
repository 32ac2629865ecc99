//! The process-wide `config()`: a bad file never fails the host process; it
//! is reported once, as one error line naming file, line and key, and the
//! defaults are used.
//!
//! One test only: it sets process environment variables and the config is
//! loaded once per process.

use std::path::PathBuf;

use softpreempt_platform::config::{config, effective, Config, Source};

#[test]
fn bad_file_is_reported_once_and_defaults_are_used() {
    let fixture =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/config/out_of_range.toml");
    let log = std::env::temp_dir().join(format!(
        "softpreempt-config-global-{}.log",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&log);
    std::env::set_var("SOFTPREEMPT_CONFIG", &fixture);
    std::env::set_var("SOFTPREEMPT_LOG_FILE", &log);
    std::env::remove_var("SOFTPREEMPT_LOG");
    std::env::remove_var("SOFTPREEMPT_PRIORITY");
    std::env::remove_var("SOFTPREEMPT_VENDORS");

    let cfg = config();
    let again = config();
    assert!(std::ptr::eq(cfg, again));
    softpreempt_platform::log::init();

    // Defaults, plus the valid environment override that says where to log.
    let want = Config {
        log_file: Some(log.clone()),
        ..Config::default()
    };
    assert_eq!(*cfg, want);
    assert_eq!(
        effective().source("log_file"),
        Source::Env("SOFTPREEMPT_LOG_FILE")
    );
    assert_eq!(effective().source("sched.max_inflight"), Source::Default);

    let text = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    assert_eq!(
        text,
        format!(
            "softpreempt[{}]: error: {}:7:16: key 'sched.max_inflight': expected an integer \
             between 1 and 2, found 5; using defaults\n",
            std::process::id(),
            fixture.display()
        )
    );
}
