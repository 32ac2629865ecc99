//! Priority values and how a process's priority is resolved.

use std::collections::HashMap;
use std::path::PathBuf;

use softpreempt_platform::config::{
    load_from, priority_for_process_with, Config, Level, Priority, Rule, Source,
};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/config")
        .join(name)
}

fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| map.get(name).cloned()
}

#[test]
fn priority_parses_and_prints() {
    assert_eq!("high".parse::<Priority>(), Ok(Priority::HIGH));
    assert_eq!("Normal".parse::<Priority>(), Ok(Priority::NORMAL));
    assert_eq!(
        "low:7".parse::<Priority>(),
        Ok(Priority::new(Level::Low, 7))
    );
    assert_eq!("high:0".parse::<Priority>(), Ok(Priority::HIGH));
    for bad in ["", "urgent", "high:", "high:256", "high:-1", "high:x", ":3"] {
        assert!(bad.parse::<Priority>().is_err(), "{bad:?} parsed");
    }
    assert_eq!(Priority::new(Level::High, 3).to_string(), "high:3");
    assert_eq!(Priority::HIGH.to_string(), "high");
    for p in ["high", "normal:1", "low:255"] {
        assert_eq!(p.parse::<Priority>().unwrap().to_string(), p);
    }
}

#[test]
fn priority_orders_by_level_then_number() {
    assert!(Priority::HIGH > Priority::NORMAL);
    assert!(Priority::NORMAL > Priority::LOW);
    assert!(Priority::new(Level::High, 3) > Priority::new(Level::High, 1));
    assert!(Priority::new(Level::Normal, 255) < Priority::HIGH);
}

fn good() -> Config {
    load_from(&fixture("good.toml"), &env_of(&[]))
        .unwrap()
        .config
}

#[test]
fn first_matching_rule_wins() {
    let cfg = good();
    let none = env_of(&[]);
    // Bare name matches the basename of a path.
    assert_eq!(
        priority_for_process_with(&cfg, "/opt/bin/inference-server", 0, &none),
        (Priority::HIGH, Source::Rule(0))
    );
    assert_eq!(
        priority_for_process_with(&cfg, "inference-server", 1001, &none),
        (Priority::HIGH, Source::Rule(0))
    );
    assert_eq!(
        priority_for_process_with(&cfg, "other", 1001, &none),
        (Priority::LOW, Source::Rule(1))
    );
    // A path rule needs the whole path, and both exe and uid must match.
    assert_eq!(
        priority_for_process_with(&cfg, "/usr/bin/render", 1000, &none),
        (Priority::new(Level::High, 3), Source::Rule(2))
    );
    assert_eq!(
        priority_for_process_with(&cfg, "/usr/local/bin/render", 1000, &none),
        (Priority::new(Level::Low, 2), Source::Default)
    );
    assert_eq!(
        priority_for_process_with(&cfg, "/usr/bin/render", 1002, &none),
        (Priority::new(Level::Low, 2), Source::Default)
    );
}

#[test]
fn environment_beats_rules() {
    let cfg = good();
    let env = env_of(&[("SOFTPREEMPT_PRIORITY", "normal:1")]);
    assert_eq!(
        priority_for_process_with(&cfg, "inference-server", 0, &env),
        (
            Priority::new(Level::Normal, 1),
            Source::Env("SOFTPREEMPT_PRIORITY")
        )
    );
    // An unusable value is ignored here (loading reports it).
    let bad = env_of(&[("SOFTPREEMPT_PRIORITY", "urgent")]);
    assert_eq!(
        priority_for_process_with(&cfg, "inference-server", 0, &bad),
        (Priority::HIGH, Source::Rule(0))
    );
}

#[test]
fn default_is_normal() {
    assert_eq!(
        priority_for_process_with(&Config::default(), "anything", 0, &env_of(&[])),
        (Priority::NORMAL, Source::Default)
    );
}

#[test]
fn effective_reports_where_the_fallback_priority_came_from() {
    let eff = load_from(&fixture("good.toml"), &env_of(&[])).unwrap();
    assert_eq!(
        eff.priority_for_process("nobody", 5, &env_of(&[])),
        (
            Priority::new(Level::Low, 2),
            Source::File(fixture("good.toml"))
        )
    );
    let eff = load_from(&fixture("empty.toml"), &env_of(&[])).unwrap();
    assert_eq!(
        eff.priority_for_process("nobody", 5, &env_of(&[])),
        (Priority::NORMAL, Source::Default)
    );
}

#[test]
fn rule_matching() {
    let by_name = Rule {
        exe: Some("app".into()),
        uid: None,
        priority: Priority::HIGH,
    };
    assert!(by_name.matches("app", 1));
    assert!(by_name.matches("/a/b/app", 1));
    assert!(!by_name.matches("/a/b/app2", 1));
    assert!(!by_name.matches("/a/app/other", 1));
    let by_uid = Rule {
        exe: None,
        uid: Some(7),
        priority: Priority::LOW,
    };
    assert!(by_uid.matches("x", 7));
    assert!(!by_uid.matches("x", 8));
}
