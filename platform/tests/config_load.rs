//! Loading good files, environment overrides and per-key sources.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use softpreempt_platform::config::{
    config_path, load, load_from, load_with_default_path, Config, Effective, Level, Location,
    MemAmount, Priority, Rule, SafeBinary, SliceMode, Source, YieldMode, CONTROLS, DEFAULT_PATH,
};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/config")
        .join(name)
}

/// An environment made of `pairs` only.
fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| map.get(name).cloned()
}

fn load_fixture(name: &str, env: &[(&str, &str)]) -> Effective {
    match load_from(&fixture(name), &env_of(env)) {
        Ok(eff) => eff,
        Err(e) => panic!("{name}: {e}"),
    }
}

#[test]
fn good_file_sets_every_key() {
    let eff = load_fixture("good.toml", &[]);
    let c = &eff.config;
    assert_eq!(c.version, 1);
    assert_eq!(
        c.vendors,
        vec![
            PathBuf::from("/opt/vendor/libvendor.so"),
            PathBuf::from("/etc/OpenCL/vendors/pocl.icd")
        ]
    );
    assert_eq!(c.log, "softpreempt=debug");
    assert_eq!(
        c.log_file.as_deref(),
        Some(Path::new("/tmp/softpreempt-test.log"))
    );
    assert_eq!(c.priority, Priority::new(Level::Low, 2));
    assert_eq!(
        c.safe_binaries,
        vec![
            SafeBinary::Kernel("matmul".into()),
            // Hashes are normalised to lowercase.
            SafeBinary::Sha256(
                "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08".into()
            ),
        ]
    );
    assert_eq!(c.sched.slice, SliceMode::Always);
    assert_eq!(c.sched.yielding, YieldMode::Never);
    assert_eq!(c.sched.yield_wait_us, 200);
    assert_eq!(c.sched.target_slice_us, Some(500));
    assert_eq!(c.sched.piece_us, Some(4000));
    assert!(!c.sched.cpu_idle_class);
    assert_eq!(c.sched.max_inflight, 1);
    assert_eq!(c.sched.min_share, 0.25);
    assert_eq!(c.sched.hp_linger_us, 0);
    assert_eq!(c.sched.arbiter_timeout_ms, 250);
    assert_eq!(c.sched.shm_group.as_deref(), Some("gpu-users"));
    assert_eq!(
        c.store.dir.as_deref(),
        Some(Path::new("/tmp/softpreempt-store"))
    );
    assert_eq!(c.store.max_mb, 16);
    assert_eq!(
        c.trace.dir.as_deref(),
        Some(Path::new("/tmp/softpreempt-trace"))
    );
    assert_eq!(
        c.trace.profile.as_deref(),
        Some(Path::new("/tmp/softpreempt-profile.jsonl"))
    );
    assert_eq!(
        c.rule,
        vec![
            Rule {
                exe: Some("inference-server".into()),
                uid: None,
                priority: Priority::HIGH
            },
            Rule {
                exe: None,
                uid: Some(1001),
                priority: Priority::LOW
            },
            Rule {
                exe: Some("/usr/bin/render".into()),
                uid: Some(1000),
                priority: Priority::new(Level::High, 3)
            },
        ]
    );
    assert_eq!(c.memory.reserve.high, Some(MemAmount::Percent(25.0)));
    assert_eq!(c.memory.reserve.normal, Some(MemAmount::Bytes(2 << 30)));
    assert_eq!(c.memory.reserve.low, None);
    assert_eq!(c.memory.cap.low, Some(MemAmount::Bytes(4 << 30)));
    assert_eq!(c.memory.device.len(), 1);
    let d = &c.memory.device[0];
    assert!(d.matches("uuid-00112233445566778899aabbccddeeff", "some GPU"));
    assert_eq!(
        d.reserve.or(c.memory.reserve).high,
        Some(MemAmount::Percent(50.0))
    );
    // Every control was set by the file.
    let file = Source::File(fixture("good.toml"));
    for c in CONTROLS {
        assert_eq!(eff.source(c.key), file, "{}", c.key);
    }
    assert_eq!(eff.path.as_deref(), Some(fixture("good.toml").as_path()));
}

#[test]
fn empty_file_is_all_defaults() {
    let eff = load_fixture("empty.toml", &[]);
    assert_eq!(eff.config, Config::default());
    assert!(eff.entries().iter().all(|e| e.source == Source::Default));
}

#[test]
fn partial_file_mixes_file_and_default_sources() {
    let eff = load_fixture("partial.toml", &[]);
    let file = Source::File(fixture("partial.toml"));
    assert_eq!(eff.config.log, "info");
    assert_eq!(eff.config.sched.max_inflight, 1);
    assert_eq!(eff.source("log"), file);
    assert_eq!(eff.source("sched.max_inflight"), file);
    assert_eq!(eff.source("sched.slice"), Source::Default);
    assert_eq!(eff.source("vendors"), Source::Default);
}

#[test]
fn environment_overrides_the_file_and_is_reported() {
    let eff = load_fixture(
        "partial.toml",
        &[
            ("SOFTPREEMPT_LOG", "softpreempt=trace"),
            ("SOFTPREEMPT_VENDORS", "/a/libone.so::/b/two.icd"),
            ("SOFTPREEMPT_PRIORITY", "high:4"),
            ("SOFTPREEMPT_LOG_FILE", "/tmp/x.log"),
        ],
    );
    let c = &eff.config;
    assert_eq!(c.log, "softpreempt=trace");
    assert_eq!(
        c.vendors,
        vec![PathBuf::from("/a/libone.so"), PathBuf::from("/b/two.icd")]
    );
    assert_eq!(c.priority, Priority::new(Level::High, 4));
    assert_eq!(c.log_file.as_deref(), Some(Path::new("/tmp/x.log")));
    assert_eq!(eff.source("log"), Source::Env("SOFTPREEMPT_LOG"));
    assert_eq!(eff.source("vendors"), Source::Env("SOFTPREEMPT_VENDORS"));
    assert_eq!(eff.source("priority"), Source::Env("SOFTPREEMPT_PRIORITY"));
    assert_eq!(
        eff.source("sched.max_inflight"),
        Source::File(fixture("partial.toml"))
    );

    // The report shows each value with its source.
    let report = eff.to_string();
    let line = |key: &str| {
        report
            .lines()
            .find(|l| l.starts_with(&format!("{key} = ")))
            .unwrap_or_else(|| panic!("no line for {key} in\n{report}"))
            .to_string()
    };
    assert!(line("log").ends_with("# env:SOFTPREEMPT_LOG"), "{report}");
    assert!(
        line("sched.max_inflight").contains("sched.max_inflight = 1 "),
        "{report}"
    );
    assert!(
        line("sched.max_inflight")
            .ends_with(&format!("# file:{}", fixture("partial.toml").display())),
        "{report}"
    );
    assert!(line("sched.slice").ends_with("# default"), "{report}");
    assert_eq!(report.lines().count(), CONTROLS.len());
}

#[test]
fn empty_environment_variable_counts_as_unset() {
    let eff = load_fixture("partial.toml", &[("SOFTPREEMPT_LOG", "")]);
    assert_eq!(eff.config.log, "info");
    assert_eq!(eff.source("log"), Source::File(fixture("partial.toml")));
}

#[test]
fn bad_environment_value_is_an_error_naming_the_variable() {
    let err = load_from(
        &fixture("empty.toml"),
        &env_of(&[("SOFTPREEMPT_PRIORITY", "urgent")]),
    )
    .unwrap_err();
    assert_eq!(err.location, Location::Env("SOFTPREEMPT_PRIORITY"));
    assert_eq!(err.key.as_deref(), Some("priority"));
    assert!(
        err.to_string()
            .starts_with("env:SOFTPREEMPT_PRIORITY: key 'priority': expected a priority"),
        "{err}"
    );
    assert!(err.to_string().ends_with("found \"urgent\""), "{err}");
}

#[test]
fn fallback_defaults_keep_valid_environment_values_only() {
    let env = env_of(&[
        ("SOFTPREEMPT_PRIORITY", "urgent"),
        ("SOFTPREEMPT_LOG", "debug"),
    ]);
    let eff = Effective::defaults_with_env(&env);
    assert_eq!(eff.config.priority, Priority::NORMAL);
    assert_eq!(eff.source("priority"), Source::Default);
    assert_eq!(eff.config.log, "debug");
    assert_eq!(eff.source("log"), Source::Env("SOFTPREEMPT_LOG"));
}

#[test]
fn config_path_prefers_the_environment() {
    assert_eq!(
        config_path(&env_of(&[])),
        (PathBuf::from(DEFAULT_PATH), false)
    );
    assert_eq!(
        config_path(&env_of(&[("SOFTPREEMPT_CONFIG", "")])),
        (PathBuf::from(DEFAULT_PATH), false)
    );
    assert_eq!(
        config_path(&env_of(&[("SOFTPREEMPT_CONFIG", "/x/y.toml")])),
        (PathBuf::from("/x/y.toml"), true)
    );
}

#[test]
fn load_reads_the_file_named_by_softpreempt_config() {
    let path = fixture("partial.toml");
    let path_str = path.to_string_lossy().into_owned();
    let eff = load(&env_of(&[("SOFTPREEMPT_CONFIG", &path_str)])).unwrap();
    assert_eq!(eff.config.sched.max_inflight, 1);
    assert_eq!(eff.path, Some(path));
}

#[test]
fn missing_file_named_by_softpreempt_config_is_an_error() {
    let path = fixture("no_such_file.toml");
    let path_str = path.to_string_lossy().into_owned();
    let err = load(&env_of(&[("SOFTPREEMPT_CONFIG", &path_str)])).unwrap_err();
    assert_eq!(
        err.location,
        Location::File {
            path,
            line: None,
            column: None
        }
    );
}

#[test]
fn missing_default_file_means_defaults_silently() {
    let missing = fixture("no_default_here.toml");
    let eff = load_with_default_path(&missing, &env_of(&[("SOFTPREEMPT_LOG", "warn")])).unwrap();
    assert_eq!(eff.path, None);
    assert_eq!(eff.config.sched, Config::default().sched);
    // The environment still applies.
    assert_eq!(eff.config.log, "warn");
    assert_eq!(eff.source("log"), Source::Env("SOFTPREEMPT_LOG"));
}

#[test]
fn existing_default_file_is_read() {
    let eff = load_with_default_path(&fixture("partial.toml"), &env_of(&[])).unwrap();
    assert_eq!(eff.config.sched.max_inflight, 1);
}
