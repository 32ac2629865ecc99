//! `softpreempt trace merge DIR -o FILE`: joins the per-process trace files that
//! `SOFTPREEMPT_TRACE=DIR` produced into one Chrome trace that Perfetto opens as one
//! timeline (every process writes CLOCK_MONOTONIC times, so they line up as they are).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::args::{failed, parse, subcommand, CliError, Spec};

pub const USAGE: &str = "softpreempt trace merge DIR -o FILE";

const SPEC: Spec = Spec {
    command: "trace merge",
    flags: &[],
    options: &["--output"],
    short: &[("-o", "--output")],
    max_positional: 1,
    trailing: false,
};

pub fn run(args: &[String]) -> Result<(), CliError> {
    subcommand(args, "trace", "merge", USAGE, merge_command)
}

/// The events of one trace file: the object form (`{"traceEvents": [...]}`) or the bare
/// array form.
fn events_of(v: Value) -> Option<Vec<Value>> {
    match v {
        Value::Array(evs) => Some(evs),
        Value::Object(mut o) => match o.remove("traceEvents") {
            Some(Value::Array(evs)) => Some(evs),
            _ => None,
        },
        _ => None,
    }
}

/// Merges the traces, in the order given. A pid that an earlier file used already (the
/// same pid reused by another process) is renumbered, so the processes stay apart.
pub fn merge(traces: Vec<Vec<Value>>) -> Value {
    let mut used = HashSet::new();
    let mut all = Vec::new();
    for evs in traces {
        let pids: HashSet<u64> = evs.iter().filter_map(|e| e["pid"].as_u64()).collect();
        let clash = pids.iter().any(|p| used.contains(p));
        let mut next = used.iter().chain(&pids).max().copied().unwrap_or(0) + 1;
        let mut remap = std::collections::HashMap::new();
        for p in pids {
            let new = if clash {
                next += 1;
                next - 1
            } else {
                p
            };
            used.insert(new);
            remap.insert(p, new);
        }
        for mut e in evs {
            if let Some(p) = e["pid"].as_u64() {
                e["pid"] = json!(remap[&p]);
            }
            all.push(e);
        }
    }
    // Metadata first, then by time: readers do not need it, people reading the file do.
    all.sort_by(|a, b| {
        let key = |e: &Value| (e["ph"] != "M", e["ts"].as_f64().unwrap_or(0.0));
        let (ka, kb) = (key(a), key(b));
        ka.0.cmp(&kb.0).then(ka.1.total_cmp(&kb.1))
    });
    json!({"displayTimeUnit": "ns", "traceEvents": all})
}

fn merge_command(args: &[String]) -> Result<(), CliError> {
    let a = parse(&SPEC, args)?;
    let (Some(dir), Some(out)) = (a.positional.first(), a.option("--output")) else {
        return Err(CliError::Usage(format!("trace merge: usage: {USAGE}")));
    };
    let out = PathBuf::from(out);
    let rd = std::fs::read_dir(dir).or_else(|e| failed(format!("trace merge: {dir}: {e}")))?;
    let mut files: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json") && !same_file(p, &out))
        .collect();
    files.sort();
    let mut traces = Vec::new();
    let mut events = 0;
    for f in &files {
        let parsed = std::fs::read_to_string(f)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
            .and_then(|v| events_of(v).ok_or_else(|| "not a Chrome trace".to_string()));
        match parsed {
            Ok(evs) => {
                events += evs.len();
                traces.push(evs);
            }
            Err(e) => eprintln!("softpreempt trace merge: skipping {}: {e}", f.display()),
        }
    }
    if traces.is_empty() {
        return failed(format!(
            "trace merge: no trace files (*.json) could be read in {dir}"
        ));
    }
    let n = traces.len();
    let text = merge(traces).to_string();
    std::fs::write(&out, text)
        .or_else(|e| failed(format!("trace merge: cannot write {}: {e}", out.display())))?;
    println!(
        "merged {n} trace file(s), {events} events, into {} (open it in https://ui.perfetto.dev)",
        out.display()
    );
    Ok(())
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pids_that_clash_are_renumbered_and_metadata_comes_first() {
        let a = vec![
            json!({"ph": "X", "pid": 5, "tid": 1, "ts": 20.0, "dur": 1.0, "name": "k"}),
            json!({"ph": "M", "pid": 5, "tid": 0, "name": "process_name", "args": {"name": "a"}}),
        ];
        let b = vec![
            json!({"ph": "M", "pid": 5, "tid": 0, "name": "process_name", "args": {"name": "b"}}),
            json!({"ph": "X", "pid": 5, "tid": 1, "ts": 10.0, "dur": 1.0, "name": "k"}),
        ];
        let c = vec![json!({"ph": "i", "pid": 9, "tid": 1, "ts": 15.0, "name": "p"})];
        let m = merge(vec![a, b, c]);
        let evs = m["traceEvents"].as_array().unwrap();
        assert_eq!(evs.len(), 5);
        assert_eq!(evs[0]["ph"], "M");
        assert_eq!(evs[1]["ph"], "M");
        let ts: Vec<f64> = evs[2..].iter().map(|e| e["ts"].as_f64().unwrap()).collect();
        assert_eq!(ts, [10.0, 15.0, 20.0]);
        let b_pid = evs.iter().find(|e| e["args"]["name"] == "b").unwrap()["pid"].clone();
        assert_ne!(b_pid, json!(5));
        assert_eq!(evs[2]["pid"], b_pid, "b's slice follows its process");
        assert_eq!(evs[3]["pid"], 9);
    }

    #[test]
    fn both_file_forms_are_read() {
        assert_eq!(events_of(json!([{"ph": "i"}])).unwrap().len(), 1);
        assert_eq!(events_of(json!({"traceEvents": []})).unwrap().len(), 0);
        assert!(events_of(json!({"x": 1})).is_none());
    }
}
