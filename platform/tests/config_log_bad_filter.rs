//! A bad log filter (only reachable by calling `install` directly; loading
//! rejects it) falls back to errors only and says so once, never panicking.

use softpreempt_platform::config::Config;
use softpreempt_platform::{log, warn_once};

#[test]
fn bad_filter_falls_back_to_errors() {
    let path = std::env::temp_dir().join(format!(
        "softpreempt-config-badlog-{}.log",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&path);
    let cfg = Config {
        log: "softpreempt=loud".into(),
        log_file: Some(path.clone()),
        ..Config::default()
    };
    log::install(&cfg);
    warn_once!(_, "not shown: warnings are filtered");

    let text = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(
        text.contains("error: bad log filter \"softpreempt=loud\""),
        "{text}"
    );
    assert!(text.contains("logging errors only"), "{text}");
}
