//! Flushing traces and profiles when the process exits, whatever it called before.

use std::sync::Once;

/// `exe (pid N)`: the process's track name in a trace, and its tag in profile lines.
pub(crate) fn process_label() -> String {
    format!("{} (pid {})", exe_name(), std::process::id())
}

/// The executable's file name.
pub(crate) fn exe_name() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "?".into())
}

extern "C" fn at_exit() {
    // Unwinding out of an atexit handler would abort the process.
    let _ = std::panic::catch_unwind(super::flush);
}

/// Registers the exit flush, once per process. A library's handler runs at `exit()` (and
/// would run at `dlclose`, which the ICD loader never does); not at `_exit` or a signal,
/// which is why the trace file is kept valid after every flush.
pub(crate) fn register() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: `at_exit` is a plain `extern "C" fn()` that lives as long as this
        // library, and it never unwinds.
        if unsafe { libc::atexit(at_exit) } != 0 {
            crate::warn_once!(_, "softpreempt: cannot register the exit flush of traces");
        }
    });
}
