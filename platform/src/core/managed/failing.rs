//! Keeps an event's failure from falling between a submitter's look at a command's
//! dependencies and the vendor enqueue of that command (docs/design.md, "A failure
//! between the look and the enqueue").
//!
//! A deferred command reaches the vendor later than the application enqueued it. If a
//! dependency fails before then, the submitter sees it and fails the command itself
//! (PoCL never runs, and never completes, a command enqueued behind an event that has
//! already failed: it links the new command only to events not yet complete or failed).
//! A failure *after* the enqueue is the vendor's to pass on. What must not happen is a
//! failure after the look and before the enqueue: the command then sits on the vendor
//! queue for ever, and every `clFinish` of the queue hangs (the CTS's `userevents` did,
//! once in nine runs under chaos). So the look and the enqueue happen inside a
//! [`Window`], and every failure the layer passes to the vendor (`clSetUserEventStatus`
//! with a negative status, for the application's user events and for the layer's own
//! deferred events) is first announced under that window ([`set_failed`]): a submitter
//! then either sees it announced and fails the command, or has enqueued before it.
//!
//! The window is taken only around commands that wait on other events and are sent at
//! once (unready ones), and only for a look and one enqueue, never across a grant. A
//! failure is announced under it only for the moment of noting the event, and the
//! vendor call itself runs outside it, so a vendor that runs callbacks inside
//! `clSetUserEventStatus` (an application's callback may enqueue and wait for a submitter)
//! cannot close a cycle through it. A thread that already holds the window (a callback
//! run synchronously inside the submitter's own enqueue) does not take it again.

use once_cell::sync::Lazy;
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::core::cl::*;

/// Held by a submitter from its look at an unready command's dependencies to its enqueue.
static WINDOW: Mutex<()> = Mutex::new(());

/// Events whose failure is being passed to the vendor now (a multiset: a handle appears
/// once per failure in progress).
static FAILING: Lazy<Mutex<Vec<usize>>> = Lazy::new(Default::default);

/// Failures waiting to be announced (for the test hook, [`test_hold`]).
static WAITING: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread holds [`WINDOW`].
    static HOLDS: Cell<bool> = const { Cell::new(false) };
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The window between a look at dependencies and the enqueue behind them (see the
/// module's comment); closed when dropped.
pub struct Window(Option<MutexGuard<'static, ()>>);

/// Opens the window (waits while another thread has it); inside one already, a no-op.
pub fn window() -> Window {
    if HOLDS.with(Cell::get) {
        return Window(None);
    }
    let g = lock(&WINDOW);
    HOLDS.with(|h| h.set(true));
    Window(Some(g))
}

impl Drop for Window {
    fn drop(&mut self) {
        if self.0.take().is_some() {
            HOLDS.with(|h| h.set(false));
        }
    }
}

/// Whether vendor event `e` is being set to a failure now: a command enqueued behind it
/// would never complete on PoCL, so it fails instead, as the vendor would fail it.
pub fn is_failing(e: cl_event) -> bool {
    lock(&FAILING).contains(&(e as usize))
}

/// Runs `set`, the vendor call that sets event `e` to a failure, announced first under the
/// window (see the module's comment).
pub fn set_failed<R>(e: cl_event, set: impl FnOnce() -> R) -> R {
    {
        WAITING.fetch_add(1, Ordering::AcqRel);
        let _w = window();
        WAITING.fetch_sub(1, Ordering::AcqRel);
        lock(&FAILING).push(e as usize);
    }
    let r = set();
    let mut f = lock(&FAILING);
    if let Some(i) = f.iter().position(|&x| x == e as usize) {
        f.swap_remove(i);
    }
    r
}

/// A test hook, not a setting: with `SOFTPREEMPT_TEST_HOLD_UNREADY` naming a kernel, the
/// submitter holds an unready launch of that kernel between its look at the dependencies
/// (`statuses`, read then) and its enqueue until one of them changes or a failure waits to
/// be announced (at most 5 s), and says so by creating `softpreempt-test-hold-<pid>` in the
/// temporary directory, so a test can set a user event exactly in between
/// (`tests/managed_events.rs`).
pub fn test_hold(vt: &cl_icd_dispatch, kernel: &str, waits: &[cl_event], statuses: &[cl_int]) {
    static NAME: Lazy<Option<String>> =
        Lazy::new(|| std::env::var("SOFTPREEMPT_TEST_HOLD_UNREADY").ok());
    if NAME.as_deref() != Some(kernel) {
        return;
    }
    let mark = std::env::temp_dir().join(format!("softpreempt-test-hold-{}", std::process::id()));
    if let Err(e) = std::fs::write(&mark, kernel) {
        tracing::error!(
            "softpreempt: test hook cannot write {}: {e}",
            mark.display()
        );
    }
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until && WAITING.load(Ordering::Acquire) == 0 {
        let changed = waits
            .iter()
            .zip(statuses)
            .any(|(&e, &s)| super::deferred::status_of(vt, e) != s);
        if changed {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}
