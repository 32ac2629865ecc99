//! Maps byte spans in a TOML document to key paths and line:column, so that
//! every error can name the key and where it is.

use std::ops::Range;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

/// 1-based line and column (in characters) of byte offset `at`.
pub(crate) fn line_col(text: &str, at: usize) -> (usize, usize) {
    let at = floor_char_boundary(text, at.min(text.len()));
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

fn floor_char_boundary(text: &str, mut at: usize) -> usize {
    while at > 0 && !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The source text of `span`, on one line and shortened, for "found ...".
pub(crate) fn snippet(text: &str, span: &Range<usize>) -> String {
    let start = floor_char_boundary(text, span.start.min(text.len()));
    let end = floor_char_boundary(text, span.end.min(text.len())).max(start);
    let one_line = text[start..end]
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    const MAX: usize = 60;
    if one_line.chars().count() > MAX {
        let cut: String = one_line.chars().take(MAX).collect();
        format!("{cut}...")
    } else {
        one_line
    }
}

fn contains(outer: &Range<usize>, inner: &Range<usize>) -> bool {
    outer.start <= inner.start && inner.end <= outer.end
}

/// The most specific key path (`sched.max_inflight`, `rule[1].priority`)
/// whose key or value covers `target`.
pub(crate) fn path_at(root: &DeTable<'_>, target: &Range<usize>) -> Option<String> {
    let mut best: Option<(usize, usize, String)> = None; // (depth, span len, path)
    walk_table(root, "", 0, target, &mut best);
    best.map(|(_, _, path)| path)
}

type Best = Option<(usize, usize, String)>;

fn consider(best: &mut Best, depth: usize, span: &Range<usize>, path: &str) {
    let len = span.end.saturating_sub(span.start);
    let better = match best {
        None => true,
        Some((d, l, _)) => depth > *d || (depth == *d && len < *l),
    };
    if better {
        *best = Some((depth, len, path.to_string()));
    }
}

fn walk_table(
    table: &DeTable<'_>,
    prefix: &str,
    depth: usize,
    target: &Range<usize>,
    best: &mut Best,
) {
    for (key, value) in table.iter() {
        let path = if prefix.is_empty() {
            key.get_ref().to_string()
        } else {
            format!("{prefix}.{}", key.get_ref())
        };
        for span in [key.span(), value.span()] {
            if contains(&span, target) {
                consider(best, depth + 1, &span, &path);
            }
        }
        walk_value(value, &path, depth + 1, target, best);
    }
}

fn walk_value(
    value: &Spanned<DeValue<'_>>,
    path: &str,
    depth: usize,
    target: &Range<usize>,
    best: &mut Best,
) {
    match value.get_ref() {
        DeValue::Table(t) => walk_table(t, path, depth, target, best),
        DeValue::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let item_path = format!("{path}[{i}]");
                if contains(&item.span(), target) {
                    consider(best, depth + 1, &item.span(), &item_path);
                }
                walk_value(item, &item_path, depth + 1, target, best);
            }
        }
        _ => {}
    }
}

/// Span of the value at dotted `path` (no array indices), if present.
pub(crate) fn value_span(root: &DeTable<'_>, path: &str) -> Option<Range<usize>> {
    let mut parts = path.split('.');
    let first = parts.next()?;
    let mut current = root.get(first)?;
    for part in parts {
        match current.get_ref() {
            DeValue::Table(t) => current = t.get(part)?,
            _ => return None,
        }
    }
    Some(current.span())
}
