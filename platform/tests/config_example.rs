//! etc/softpreempt.toml is the generated, commented example: it must parse,
//! change nothing, and be up to date (`SOFTPREEMPT_BLESS=1` rewrites it).

use std::path::PathBuf;

use softpreempt_platform::config::{parse_str, render_example_toml, Config, CONTROLS};

fn example_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../etc/softpreempt.toml")
}

#[test]
fn example_file_is_up_to_date() {
    let want = render_example_toml();
    if std::env::var_os("SOFTPREEMPT_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(example_path(), &want).unwrap();
        return;
    }
    let have = std::fs::read_to_string(example_path()).unwrap_or_default();
    assert!(
        have == want,
        "{} is stale; regenerate it with\n  SOFTPREEMPT_BLESS=1 cargo test -p softpreempt-platform --test config_example",
        example_path().display()
    );
}

#[test]
fn example_file_parses_to_the_defaults() {
    // The generated text, not the file: with SOFTPREEMPT_BLESS the other test
    // may be rewriting the file right now (the sync test covers the file).
    let eff = parse_str(&render_example_toml(), &example_path(), &|_| None)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(eff.config, Config::default());
}

#[test]
fn example_mentions_every_key() {
    let text = render_example_toml();
    for c in CONTROLS {
        let name = if c.name == "rule" { "[[rule]]" } else { c.name };
        assert!(text.contains(name), "{} missing from the example", c.key);
    }
}

#[test]
fn every_commented_example_is_valid() {
    // Uncomment each key's sample in turn; each must load.
    for c in CONTROLS {
        let Some(example) = c.example else { continue };
        let text = match c.section {
            Some(s) => format!("[{s}]\n{example}\n"),
            None => format!("{example}\n"),
        };
        if let Err(e) = parse_str(&text, std::path::Path::new("example"), &|_| None) {
            panic!("example for {}: {e}", c.key);
        }
    }
}
