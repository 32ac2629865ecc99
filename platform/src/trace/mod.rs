//! Opt-in timelines and per-kernel profiles of what the layer does.
//!
//! * `SOFTPREEMPT_TRACE=DIR` (config `trace.dir`): every process writes
//!   `DIR/softpreempt-<pid>.json` in the Chrome trace event format, with its process and
//!   queue names; `softpreempt trace merge DIR -o FILE` joins the files into one timeline
//!   that Perfetto (ui.perfetto.dev) or `chrome://tracing` opens.
//! * `SOFTPREEMPT_PROFILE=FILE` (config `trace.profile`): per-kernel statistics, appended
//!   to FILE as JSON lines by [`flush`] (at process exit, or when the last queue goes).
//!
//! Every time is CLOCK_MONOTONIC in ns ([`now_ns`]), which all processes share, so merged
//! files line up. Device profiling times must be moved to that clock by the caller.
//!
//! Off (the default), each call costs one relaxed atomic load: callers may call
//! [`enabled`] / [`profile::enabled`] first to skip building arguments. Nothing here can
//! fail the application: I/O errors are logged once and tracing turns itself off.

mod chrome;
mod exit;
pub mod profile;

use std::path::Path;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;

pub use chrome::{Arg, TraceFile};

/// Whether a feature is on, decided once from the configuration.
pub(crate) struct Switch(AtomicU8);

const UNKNOWN: u8 = 0;
const OFF: u8 = 1;
const ON: u8 = 2;

impl Switch {
    pub(crate) const fn new() -> Self {
        Switch(AtomicU8::new(UNKNOWN))
    }

    /// `init` runs once (racing callers may both run it; it must be idempotent) and says
    /// whether the feature is on.
    pub(crate) fn get(&self, init: impl FnOnce() -> bool) -> bool {
        match self.0.load(Ordering::Relaxed) {
            ON => true,
            OFF => false,
            _ => {
                let on = init();
                self.0.store(if on { ON } else { OFF }, Ordering::Relaxed);
                on
            }
        }
    }

    pub(crate) fn turn_off(&self) {
        self.0.store(OFF, Ordering::Relaxed);
    }
}

static TRACING: Switch = Switch::new();
static WRITER: Mutex<Option<TraceFile>> = Mutex::new(None);

/// Runs `f` on this process's trace file, if tracing is on. An I/O error turns tracing
/// off (logged once), so a full disk costs the application nothing more.
fn with_writer(f: impl FnOnce(&mut TraceFile) -> std::io::Result<()>) {
    if !enabled() {
        return;
    }
    let mut guard = WRITER.lock().unwrap_or_else(|p| p.into_inner());
    let Some(w) = guard.as_mut() else { return };
    if let Err(e) = f(w) {
        crate::error_once!(
            "trace-write",
            "softpreempt: cannot write trace file {}: {e}; tracing is off",
            w.path().display()
        );
        TRACING.turn_off();
        *guard = None;
    }
}

fn open_writer(dir: &Path) -> bool {
    match TraceFile::create(dir, std::process::id(), &exit::process_label()) {
        Ok(w) => {
            *WRITER.lock().unwrap_or_else(|p| p.into_inner()) = Some(w);
            exit::register();
            true
        }
        Err(e) => {
            crate::error_once!(
                "trace-open",
                "softpreempt: cannot create a trace file in {}: {e}; tracing is off",
                dir.display()
            );
            false
        }
    }
}

/// Whether `SOFTPREEMPT_TRACE` (or `trace.dir`) is set. The first call reads the
/// configuration and creates the file; later calls are one atomic load.
pub fn enabled() -> bool {
    TRACING.get(|| {
        // Two first callers may race here; only one file may be created.
        static OPEN: Mutex<Option<bool>> = Mutex::new(None);
        let mut opened = OPEN.lock().unwrap_or_else(|p| p.into_inner());
        *opened.get_or_insert_with(|| match &crate::config::config().trace.dir {
            Some(dir) => open_writer(dir),
            None => false,
        })
    })
}

/// CLOCK_MONOTONIC in ns: the clock of every trace event.
pub fn now_ns() -> u64 {
    softpreempt_sched::monotonic_ns()
}

/// Names `queue`'s track "`queue` [`priority`]" and sorts more urgent queues first.
/// Optional: a queue first seen in another call gets a track named after its label.
pub fn name_queue(queue: &str, priority: &str) {
    with_writer(|w| w.name_queue(queue, priority));
}

/// One slice (or whole launch) of `kernel` ran on the device from `start_ns` to `end_ns`.
pub fn slice(queue: &str, kernel: &str, start_ns: u64, end_ns: u64, args: &[(&str, Arg<'_>)]) {
    with_writer(|w| w.complete(queue, kernel, "slice", start_ns, end_ns, args));
}

/// `queue` waited for the arbiter's grant from `from_ns` to `to_ns`.
pub fn grant_wait(queue: &str, from_ns: u64, to_ns: u64) {
    with_writer(|w| w.complete(queue, "wait for grant", "grant", from_ns, to_ns, &[]));
}

/// `queue` waited from `from_ns` to `to_ns` for lower clients' yielding launches to leave
/// the device (rule 10); `expired`: it stopped waiting at the bound.
pub fn handshake(queue: &str, from_ns: u64, to_ns: u64, expired: bool) {
    with_writer(|w| {
        let args = [("expired", expired.into())];
        w.complete(queue, "yield handshake", "yield", from_ns, to_ns, &args)
    });
}

/// A yielding launch of `queue` was asked to stop and left the device, in three phases:
/// from a higher client's request (`request_ns`, as the segment holds it) to the yield
/// word's write (by the thread waiting for the run on a GPU, else by the watcher), the
/// write (`write_ns` to `written_ns`: a call that returns once the word is on its way
/// where the word is a buffer), and from then until the host saw the launch end
/// (`off_ns`). `stopped`: the run stopped before its last group (else the ask came too
/// late to matter). Where the time between a request and the HP's submission goes
/// (rule 10).
pub fn yield_phases(
    queue: &str,
    request_ns: u64,
    (write_ns, written_ns): (u64, u64),
    off_ns: u64,
    stopped: bool,
) {
    with_writer(|w| {
        let stopped = [("stopped", stopped.into())];
        let phases: [(&str, u64, u64, &[(&str, Arg)]); 3] = [
            ("yield: request to the write", request_ns, write_ns, &[]),
            ("yield: the word's write", write_ns, written_ns, &stopped),
            ("yield: written to off the device", written_ns, off_ns, &[]),
        ];
        for (name, from, to, args) in phases {
            if from != 0 && from <= to {
                w.complete(queue, name, "yield", from, to, args)?;
            }
        }
        Ok(())
    });
}

/// `queue`'s launch of `kernel` went straight to the vendor at `at_ns`, not through its
/// software FIFO (`claimed`: under the direct budget a registered higher priority sets).
/// Its device time is not observed, so it is an instant.
pub fn direct(queue: &str, kernel: &str, at_ns: u64, claimed: bool) {
    with_writer(|w| {
        let args = [("kernel", Arg::Str(kernel)), ("claimed", claimed.into())];
        w.instant(queue, "direct launch", "direct", at_ns, &args)
    });
}

/// The application's thread waited from `from_ns` to `to_ns` for `queue`'s software FIFO
/// to reach the vendor, before a command that goes straight there.
pub fn drain(queue: &str, from_ns: u64, to_ns: u64) {
    with_writer(|w| w.complete(queue, "drain", "drain", from_ns, to_ns, &[]));
}

/// The application's thread waited from `from_ns` to `to_ns` for a blocking transfer of
/// `queue` that the layer enqueued non-blocking (`Managed::waits_apart`).
pub fn wait_apart(queue: &str, from_ns: u64, to_ns: u64) {
    with_writer(|w| w.complete(queue, "blocking transfer", "wait", from_ns, to_ns, &[]));
}

/// `queue` got a grant at `at_ns` (`share`: by the min-share rule).
pub fn grant(queue: &str, at_ns: u64, share: bool) {
    with_writer(|w| w.instant(queue, "grant", "grant", at_ns, &[("share", share.into())]));
}

/// `queue`'s launch of `kernel` stopped at a slice boundary at `at_ns`, to let a higher
/// priority run; `args` says how far it got (e.g. `rows_done`, `rows`).
pub fn preempted(queue: &str, kernel: &str, at_ns: u64, args: &[(&str, Arg<'_>)]) {
    with_writer(|w| {
        let mut all = vec![("kernel", Arg::Str(kernel))];
        all.extend_from_slice(args);
        w.instant(queue, "preempted", "preempt", at_ns, &all)
    });
}

/// Writes out everything buffered: trace events, and the profile lines (see
/// [`profile`]). Call when the process's last queue is released; also runs at exit.
pub fn flush() {
    with_writer(TraceFile::flush);
    profile::flush();
}
