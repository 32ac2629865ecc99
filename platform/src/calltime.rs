//! A diagnostic build's timing of every vendor call the layer makes (cargo feature
//! `calltime`, never in a release build users get): with an application-level call timer
//! (`scripts/gpu/cltime.py`) it splits each entry point's cost into the vendor's time and
//! the layer's own (issue 24). `SOFTPREEMPT_CALLTIME=FILE` names the JSON file written
//! at process exit: `{"clFoo": [calls, total ns, max ns], ...}`; a value ending in `/` is
//! a folder, and each process writes `calltime-PID.json` there. The submitter's own
//! vendor calls and steps are named `submitter.*` (they take the dispatch table
//! directly, not the forwarding macros).
//! They use `calltime!`, which is the expression itself in other builds.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

static TABLE: Mutex<Option<HashMap<&'static str, [u64; 3]>>> = Mutex::new(None);

/// Times one vendor call from creation to drop.
pub struct Timer {
    name: &'static str,
    start: Instant,
}

impl Timer {
    pub fn new(name: &'static str) -> Timer {
        Timer {
            name,
            start: Instant::now(),
        }
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        let ns = self.start.elapsed().as_nanos() as u64;
        let mut t = TABLE.lock().unwrap_or_else(|e| e.into_inner());
        let first = t.is_none();
        let e = t
            .get_or_insert_with(HashMap::new)
            .entry(self.name)
            .or_default();
        e[0] += 1;
        e[1] += ns;
        e[2] = e[2].max(ns);
        drop(t);
        if first {
            // SAFETY: registering a plain function to run at exit.
            unsafe { libc::atexit(dump) };
        }
    }
}

extern "C" fn dump() {
    let Some(path) = std::env::var_os("SOFTPREEMPT_CALLTIME") else {
        return;
    };
    let path = match path.to_str() {
        Some(dir) if dir.ends_with('/') => {
            std::ffi::OsString::from(format!("{dir}calltime-{}.json", std::process::id()))
        }
        _ => path,
    };
    let t = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(t) = t.as_ref() {
        let _ = std::fs::write(path, serde_json::to_string(t).unwrap_or_default());
    }
}
