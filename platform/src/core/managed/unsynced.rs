//! The bound on a direct command's demand when the application never synchronises with it.
//!
//! While a lower priority is busy on the device, a direct command of a higher one raises
//! demand, which keeps the lower clients off the device until the command is known
//! complete (`Managed::direct_submitted`). Asking the vendor for an event and a completion
//! callback on every such command to learn that cost 11-17 µs a command on an H100, and
//! NVIDIA delivers the callbacks milliseconds late anyway. Issue 24 asks that a
//! high-priority command reach the vendor with no added vendor work, so the command is
//! sent as the application made it, and the application's own synchronisation says when
//! its work is done: a blocking command, `clFinish`, `clWaitForEvents`, a status poll or a
//! completion callback on its event (`Managed::complete_upto`, `Managed::finished_all`,
//! `Managed::seen_complete`). Real clients end each request so: OpenCV's `UMat::get`,
//! pyopencl's `get()` and `wait()`, tinygrad's copy-out.
//!
//! One that does not (it learns of completion some other way, or never) would hold lower
//! priorities off for ever. So a queue whose watches stay open is looked at [`BOUND`] after
//! its first such command, and again every [`BOUND`] while it moves: while it sends
//! commands, or a thread of the application waits in a synchronisation call on it, or
//! polls one of its events, it is still at work. Once it has been still for a whole
//! [`BOUND`], its open watches end. If its work was still running then, the lower clients
//! meet it as on the bare driver, which time-slices them: never worse than bare (rule 8).
//!
//! Nothing here calls the vendor. An earlier form enqueued a marker with an event on the
//! application's queue from this thread; PoCL's `basic` device ran the queue's commands
//! inside that thread's `clFlush` and deadlocked on its own event lock.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use super::Managed;

/// How long a queue with open watches must be still (no command, no synchronisation call
/// or poll) before they end. Longer than the gap between a real client's commands within
/// a request, and than NVIDIA's time slice (about 2 ms), which is all a lower client that
/// comes back too early can cost the work still running.
const BOUND: Duration = Duration::from_millis(5);

/// A queue with open watches, looked at when `due`. `seen` is what it had done by the
/// last look (commands on the vendor, polls); equal at the next look means it was still.
struct Armed {
    m: Weak<Managed>,
    due: Instant,
    seen: (u64, u64),
}

#[derive(Default)]
struct State {
    armed: Vec<Armed>,
    started: bool,
    /// The thread waits with no timeout (nothing armed): an arm must wake it.
    parked: bool,
}

struct Bound {
    st: Mutex<State>,
    cv: Condvar,
}

static BOUNDS: once_cell::sync::Lazy<Bound> = once_cell::sync::Lazy::new(|| Bound {
    st: Mutex::new(State::default()),
    cv: Condvar::new(),
});

fn lock() -> MutexGuard<'static, State> {
    BOUNDS.st.lock().unwrap_or_else(|e| e.into_inner())
}

/// What `m` has done so far: commands on the vendor, and polls.
fn progress(m: &Managed) -> (u64, u64) {
    (m.vendor_mark(), m.polls.load(Ordering::Relaxed))
}

/// Queue `m` has an open watch that only synchronisation ends (its `sync_armed` was just
/// set): looked at [`BOUND`] from now.
pub fn arm(m: &Arc<Managed>) {
    let mut st = lock();
    st.armed.push(Armed {
        m: Arc::downgrade(m),
        due: Instant::now() + BOUND,
        seen: progress(m),
    });
    if !st.started {
        st.started = true;
        let spawned = std::thread::Builder::new()
            .name("softpreempt-bound".into())
            .spawn(run);
        if let Err(e) = spawned {
            st.started = false;
            st.armed.clear();
            drop(st);
            tracing::error!("softpreempt: cannot start the thread bounding demand: {e}");
            // Without it, demand ends now: no worse than the bare driver.
            m.finished_all();
            m.sync_armed.store(false, Ordering::SeqCst);
        }
    } else if st.parked {
        // A thread waiting with a timeout wakes no later than this entry is due (every
        // earlier entry was armed no later): only a parked one needs waking.
        st.parked = false;
        BOUNDS.cv.notify_one();
    }
}

/// One look at a due queue: `Some` to look again later, `None` when let go.
fn look(a: Armed, now: Instant) -> Option<Armed> {
    let m = a.m.upgrade()?;
    let again = || {
        Some(Armed {
            m: a.m.clone(),
            due: now + BOUND,
            seen: progress(&m),
        })
    };
    if m.has_watches() {
        if progress(&m) != a.seen || m.syncing.load(Ordering::Acquire) > 0 {
            return again();
        }
        tracing::debug!(queue = %m.label, "demand of unsynchronised commands ends at its bound");
        m.finished_all();
    }
    // Let go, unless a watch is open again: an application thread that left one open after
    // this store arms the queue itself; one that did so before it saw the flag set and
    // counted on us.
    m.sync_armed.store(false, Ordering::SeqCst);
    if m.has_watches() && !m.sync_armed.swap(true, Ordering::SeqCst) {
        return again();
    }
    None
}

/// The thread: looks at queues as they fall due.
fn run() {
    // Armed by a higher priority's command, whose thread this wake-up must not preempt.
    crate::core::os_priority::no_wakeup_preemption("demand bound");
    let mut st = lock();
    loop {
        let now = Instant::now();
        let (due, later): (Vec<Armed>, Vec<Armed>) = std::mem::take(&mut st.armed)
            .into_iter()
            .partition(|a| a.due <= now);
        st.armed = later;
        drop(st);
        let again: Vec<Armed> = due.into_iter().filter_map(|a| look(a, now)).collect();
        st = lock();
        st.armed.extend(again);
        let wait = st
            .armed
            .iter()
            .map(|a| a.due.saturating_duration_since(Instant::now()))
            .min();
        st = match wait {
            Some(d) => {
                BOUNDS
                    .cv
                    .wait_timeout(st, d)
                    .unwrap_or_else(|e| e.into_inner())
                    .0
            }
            None => {
                st.parked = true;
                while st.parked {
                    st = BOUNDS.cv.wait(st).unwrap_or_else(|e| e.into_inner());
                }
                st
            }
        };
    }
}
