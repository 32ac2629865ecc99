//! docs/configuration.md is generated from the controls table. This fails
//! when it is stale; `SOFTPREEMPT_BLESS=1` rewrites it.

use std::path::PathBuf;

use softpreempt_platform::config::render_reference_markdown;

#[test]
fn configuration_reference_is_up_to_date() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/configuration.md");
    let want = render_reference_markdown();
    if std::env::var_os("SOFTPREEMPT_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &want).unwrap();
        return;
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "{} is stale; regenerate it with\n  SOFTPREEMPT_BLESS=1 cargo test -p softpreempt-platform --test config_docs",
        path.display()
    );
}

#[test]
fn reference_documents_every_control() {
    let md = render_reference_markdown();
    for c in softpreempt_platform::config::CONTROLS {
        assert!(
            md.contains(&format!("### `{}`", c.key)),
            "{} undocumented",
            c.key
        );
        assert!(!c.doc.trim().is_empty(), "{} has no doc comment", c.key);
        if let Some(var) = c.env {
            assert!(md.contains(var), "{var} undocumented");
        }
    }
}
