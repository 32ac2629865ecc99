//! Generates `docs/configuration.md` from the controls table, so the
//! reference cannot drift from the code (a test compares the two).

use std::fmt::Write;

use super::controls::{Config, Control, CONTROLS, SECTIONS, TABLE_KEYS};
use super::{DEFAULT_PATH, ENV_CONFIG};

/// How an absent optional value renders (see `ControlValue for Option`).
const UNSET: &str = "(unset)";

/// Doc comments arrive as `" text"` lines; drop the one leading space.
fn doc_text(raw: &str) -> String {
    let lines: Vec<&str> = raw
        .lines()
        .map(|l| l.strip_prefix(' ').unwrap_or(l))
        .collect();
    lines.join("\n").trim().to_string()
}

/// First sentence of a doc, for the summary table.
fn summary(raw: &str) -> String {
    let text = doc_text(raw).replace('\n', " ");
    let first = match text.find(". ") {
        Some(i) => &text[..=i],
        None => text.as_str(),
    };
    cell(first)
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

fn env_cell(c: &Control) -> String {
    c.env.map_or_else(|| "—".to_string(), |v| format!("`{v}`"))
}

fn write_control(out: &mut String, c: &Control, defaults: &Config) {
    let _ = writeln!(out, "### `{}`\n", c.key);
    let _ = writeln!(out, "{}\n", doc_text(c.doc));
    let _ = writeln!(out, "- Accepts: {}", c.expect);
    let _ = writeln!(out, "- Default: `{}`", c.render(defaults));
    if let Some(var) = c.env {
        let _ = writeln!(out, "- Environment: `{var}` (overrides the file)");
    }
    if let Some(example) = c.example {
        let _ = writeln!(out, "\nExample:\n\n```toml\n{example}\n```");
    }
    out.push('\n');
}

/// An array-of-tables control (`[[rule]]`): in the example file it can only
/// come last, after every other table.
fn is_table_array(c: &Control) -> bool {
    c.example.is_some_and(|e| e.starts_with("[["))
}

fn comment_lines(out: &mut String, text: &str) {
    for line in text.lines() {
        if line.is_empty() {
            out.push_str("#\n");
        } else {
            let _ = writeln!(out, "# {line}");
        }
    }
}

fn write_example_control(out: &mut String, c: &Control, defaults: &Config) {
    comment_lines(out, &doc_text(c.doc));
    let _ = writeln!(out, "# Accepts: {}.", c.expect);
    if let Some(var) = c.env {
        let _ = writeln!(out, "# Environment: {var} (overrides this file).");
    }
    if is_table_array(c) {
        comment_lines(out, "Keys of each table:");
        let keys = TABLE_KEYS.iter().filter(|(t, _)| *t == c.key);
        for k in keys.flat_map(|(_, keys)| keys.iter()) {
            let name = k.key.rsplit('.').next().unwrap_or(k.key);
            comment_lines(out, &format!("  {name}: {}", k.doc));
        }
    }
    let value = c.render(defaults);
    // Unset optionals and table arrays have no default to write out.
    if value != UNSET && !is_table_array(c) {
        let _ = writeln!(out, "{} = {value}", c.name);
    }
    if let Some(example) = c.example {
        for line in example.lines() {
            let _ = writeln!(out, "#{line}");
        }
    }
    out.push('\n');
}

/// The commented example `etc/softpreempt.toml`: every key, documented, set
/// to its default (or commented out when it has none), so that installing it
/// unchanged changes nothing.
pub fn render_example_toml() -> String {
    let defaults = Config::default();
    let mut out = String::new();
    let _ = write!(
        out,
        "# SoftPreempt configuration. Copy to {DEFAULT_PATH}, or point {ENV_CONFIG} at a copy.
# Every key is optional; the values below are the defaults, so this file as
# shipped changes nothing. Reference: docs/configuration.md. Check a file, and
# see where each effective value comes from, with: softpreempt config check FILE
#
# A mistake here never stops an application: SoftPreempt logs one error naming
# the file, line and key, and runs with the defaults.
#
# Generated from platform/src/config/controls.rs; do not edit by hand.

"
    );
    for c in CONTROLS
        .iter()
        .filter(|c| c.section.is_none() && !is_table_array(c))
    {
        write_example_control(&mut out, c, &defaults);
    }
    for s in SECTIONS {
        let _ = writeln!(out, "[{}]", s.name);
        comment_lines(&mut out, &doc_text(s.doc));
        out.push('\n');
        // Tables of tables come last, below every plain table.
        for c in CONTROLS
            .iter()
            .filter(|c| c.section == Some(s.name) && !is_table_array(c))
        {
            write_example_control(&mut out, c, &defaults);
        }
    }
    for c in CONTROLS.iter().filter(|c| is_table_array(c)) {
        write_example_control(&mut out, c, &defaults);
    }
    let trimmed = out.trim_end().len();
    out.truncate(trimmed);
    out.push('\n');
    out
}

/// The configuration reference, in Markdown.
pub fn render_reference_markdown() -> String {
    let defaults = Config::default();
    let mut out = String::new();
    let _ = write!(
        out,
        "# Configuration reference

<!-- Generated from the controls table in platform/src/config/controls.rs.
     Do not edit; run `SOFTPREEMPT_BLESS=1 cargo test -p softpreempt-platform --test config_docs`. -->

SoftPreempt reads `{DEFAULT_PATH}`, or the file named by `{ENV_CONFIG}`. The file is
TOML; every key is optional. `etc/softpreempt.toml` in the source tree is a commented
example. Check a file, and see each effective value with where it came from, with
`softpreempt config check [FILE]`.

Precedence: an environment variable beats the file, which beats the built-in default.
An empty environment variable counts as unset.

A missing `{DEFAULT_PATH}` means defaults. A missing file named by `{ENV_CONFIG}`, an
unknown key, a wrong type or a value out of range is reported once, as an error naming
the file, line, column and key, and the process carries on with the defaults (plus the
valid environment overrides). A bad configuration never stops the application.

"
    );

    out.push_str("## Summary\n\n| Key | Default | Environment | Meaning |\n|---|---|---|---|\n");
    for c in CONTROLS {
        let _ = writeln!(
            out,
            "| [`{}`](#{}) | `{}` | {} | {} |",
            c.key,
            c.key.replace('.', ""),
            cell(&c.render(&defaults)),
            env_cell(c),
            summary(c.doc)
        );
    }
    out.push('\n');

    out.push_str("## Top-level keys\n\n");
    for c in CONTROLS.iter().filter(|c| c.section.is_none()) {
        write_control(&mut out, c, &defaults);
    }

    for (table, keys) in TABLE_KEYS {
        let _ = writeln!(out, "## `[[{table}]]` keys\n");
        for k in keys.iter() {
            let _ = writeln!(
                out,
                "### `{}`\n\n{}\n\n- Accepts: {}\n",
                k.key, k.doc, k.expect
            );
        }
    }

    for s in SECTIONS {
        let _ = writeln!(out, "## `[{}]`\n\n{}\n", s.name, doc_text(s.doc));
        for c in CONTROLS.iter().filter(|c| c.section == Some(s.name)) {
            write_control(&mut out, c, &defaults);
        }
    }

    // Exactly one trailing newline, whatever the last block wrote.
    let trimmed = out.trim_end().len();
    out.truncate(trimmed);
    out.push('\n');
    out
}
