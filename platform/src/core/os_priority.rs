//! CPU devices: the operating system is the device's scheduler.
//!
//! A CPU device (PoCL's `pthread` device) runs kernels on worker threads of the
//! application's own process, and the kernel's CPU scheduler already preempts threads at
//! microsecond granularity. Slicing a low-priority launch there only adds the vendor's
//! per-command cost (about 25 µs a command with PoCL on 2 cores, measured bare) while the
//! high-priority kernel still shares the cores with the slice that runs. Putting the
//! low-priority process's device threads in the `SCHED_IDLE` class instead lets any
//! ordinary thread (the high-priority process's device threads among them) take a core
//! from them at once, and lets them use every cycle nobody else wants: rule 8's "slice
//! only where a slice ends sooner than the vendor's own hand-over", with the hand-over
//! now a thread wake-up.
//!
//! The device threads are the threads the vendor starts the first time its devices are
//! enumerated (PoCL starts its workers then), found by listing `/proc/self/task` around a
//! device count the layer makes when it discovers the vendor (`platform::count_devices`),
//! before the loader or the application can enumerate the vendor's own platform.
//! Vendors that start their threads later (none is known to the project) keep slicing.
//! Lowering a thread's class needs no privilege; raising it back needs `CAP_SYS_NICE` (or
//! a permissive `RLIMIT_NICE`), so it is done only where a queue of higher priority
//! appears in the same process, and when that fails the threads stay idle-class and that
//! queue is warned about once.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Thread ids of this process.
fn threads() -> BTreeSet<i32> {
    std::fs::read_dir("/proc/self/task")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Runs `f` and returns, with its result, the threads of this process that appeared
/// meanwhile and are still alive.
pub fn spawned_during<R>(f: impl FnOnce() -> R) -> (R, Vec<i32>) {
    let before = threads();
    let r = f();
    let new = threads().difference(&before).copied().collect();
    (r, new)
}

/// Sets scheduling `policy` (priority 0) on each of `tids` that is still a thread of this
/// process. Returns how many were set, or the first error.
fn set_policy(tids: &[i32], policy: libc::c_int) -> std::io::Result<usize> {
    let alive = threads();
    let param = libc::sched_param { sched_priority: 0 };
    let mut n = 0;
    for &t in tids.iter().filter(|t| alive.contains(t)) {
        // SAFETY: a plain system call on a thread id of this process, with a valid
        // sched_param; a thread that exited meanwhile gives ESRCH, which we skip.
        let rc = unsafe { libc::sched_setscheduler(t, policy, &param) };
        if rc == 0 {
            n += 1;
        } else {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::ESRCH) {
                return Err(e);
            }
        }
    }
    Ok(n)
}

/// Puts `tids` in the idle scheduling class.
pub fn idle_class(tids: &[i32]) -> std::io::Result<usize> {
    set_policy(tids, libc::SCHED_IDLE)
}

/// Puts `tids` back in the ordinary class (needs privilege once they are idle-class).
pub fn normal_class(tids: &[i32]) -> std::io::Result<usize> {
    set_policy(tids, libc::SCHED_OTHER)
}

/// Puts the calling thread, one of the layer's own, in the batch class (`SCHED_BATCH`):
/// woken, it waits for the running thread to sleep or use up its time slice instead of
/// preempting it, and otherwise competes as an ordinary thread (and still preempts
/// idle-class ones). For threads that another process's latency-critical work wakes: the
/// yield watcher (a higher priority's demand), a low queue's submitter on a CPU device
/// (a higher priority's demand ending), the bound on unsynchronised demand (a higher
/// priority's command). A woken ordinary thread took the core from the thread that woke it,
/// and when it slept again, Linux's EEVDF scheduler (6.6 on) could hand that core to an
/// idle-class worker of the lower process, which has fair-share credit to spend, until the
/// next tick: 3-5 ms late for a 1.5 ms request of the PoCL demo's HP (`perf sched`,
/// docs/benchmarks.md, session 48). The batch class needs no privilege, either way.
/// `what` names the thread in the log where the system refuses.
pub fn no_wakeup_preemption(what: &str) {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: a plain system call on the calling thread (0), with a valid sched_param.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) } != 0 {
        let e = std::io::Error::last_os_error();
        tracing::debug!("the {what} thread stays in its scheduling class: {e}");
    }
}

/// Nobody asked yet for the device's threads to go to the idle class.
const WORKERS_UNTOUCHED: u8 = 0;
/// They run in the idle class.
const WORKERS_IDLE: u8 = 1;
/// There were none, or it failed: never tried again.
const WORKERS_KEPT: u8 = 2;

/// A CPU device's threads in this process (one set per vendor platform), and whether
/// they run in the idle class.
#[derive(Default)]
pub struct DeviceThreads {
    /// Threads the vendor started while enumerating its devices: a CPU device's workers.
    workers: Mutex<Vec<i32>>,
    /// Threads doing the device's CPU work for this process besides them, which go to the
    /// idle class with them (`run_as_device_work`).
    helpers: Mutex<Vec<i32>>,
    /// Whether they run in the idle scheduling class (`WORKERS_*`).
    state: AtomicU8,
    /// Queues above low priority on the platform's CPU devices in this process: their
    /// kernels run on the same threads, which must not go idle-class meanwhile.
    above_low: AtomicUsize,
}

impl DeviceThreads {
    /// Adds the vendor's threads found started.
    pub fn found(&self, tids: Vec<i32>) {
        self.workers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(tids);
    }

    /// Whether the vendor's device threads run in the idle class.
    pub fn idle(&self) -> bool {
        self.state.load(Ordering::Acquire) == WORKERS_IDLE
    }

    /// Puts the vendor's device threads (and the helpers running now) in the idle
    /// scheduling class, for a process whose queues on the CPU device are low priority,
    /// once. A single atomic load after the first call. False when there are none or it
    /// failed.
    pub fn make_idle(&self) -> bool {
        let settled = || {
            self.state.load(Ordering::Acquire) != WORKERS_UNTOUCHED
                || self.above_low.load(Ordering::Acquire) > 0
        };
        if settled() {
            return self.idle();
        }
        let w = self.workers.lock().unwrap_or_else(|e| e.into_inner());
        if settled() {
            return self.idle();
        }
        let state = match idle_class(&w) {
            Ok(n) if n > 0 => {
                // Under the workers' lock, which orders this against a helper's start.
                let helpers = self.helpers.lock().unwrap_or_else(|e| e.into_inner());
                let _ = idle_class(&helpers);
                tracing::info!(threads = n, "CPU device threads moved to the idle class");
                WORKERS_IDLE
            }
            Ok(_) => {
                tracing::info!("no CPU device threads of the vendor's known to this process");
                WORKERS_KEPT
            }
            Err(e) => {
                crate::warn_once!(
                    "idle-class",
                    "softpreempt: cannot move the CPU device's threads to the idle class \
                     ({e}); low-priority slices may delay higher priorities longer"
                );
                WORKERS_KEPT
            }
        };
        self.state.store(state, Ordering::Release);
        state == WORKERS_IDLE
    }

    /// A queue above low priority: the threads stay in (or go back to, where the system
    /// allows it) the ordinary class until `unhold`.
    pub fn hold(&self) {
        self.above_low.fetch_add(1, Ordering::AcqRel);
        let w = self.workers.lock().unwrap_or_else(|e| e.into_inner());
        if self.state.load(Ordering::Acquire) != WORKERS_IDLE {
            return;
        }
        let helpers = self
            .helpers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        match normal_class(&w).and(normal_class(&helpers)) {
            Ok(_) => self.state.store(WORKERS_UNTOUCHED, Ordering::Release),
            Err(e) => crate::warn_once!(
                "idle-class-restore",
                "softpreempt: a queue above low priority shares this process's CPU device \
                 threads, which a low-priority queue moved to the idle class, and they \
                 cannot be moved back ({e}): its kernels run at idle class"
            ),
        }
    }

    /// That queue is gone.
    pub fn unhold(&self) {
        self.above_low.fetch_sub(1, Ordering::AcqRel);
    }

    /// Runs `f`, CPU work of the device done on this process's behalf (the compile of a
    /// program's yielding entries), on a thread of its own that is treated as one of the
    /// device threads while `f` runs: in the idle class if they are, and moved there with
    /// them if a higher priority registers meanwhile (`make_idle`). The caller waits for
    /// it. Compiled on the application's thread, in the ordinary class, the PoCL demo's
    /// LP's entries (about 1 s of LLVM) took a core from the HP for its first 27 requests,
    /// each 2.7 ms against 1.5 alone (session 50's trace). Where no thread can be
    /// started, `f` runs on the calling one.
    pub fn run_as_device_work<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        /// Drops the thread from the helpers when it ends, however it ends: its id may
        /// be given to another thread.
        struct Listed<'a>(&'a DeviceThreads, i32);
        impl Drop for Listed<'_> {
            fn drop(&mut self) {
                let mut h = self.0.helpers.lock().unwrap_or_else(|e| e.into_inner());
                h.retain(|&t| t != self.1);
            }
        }
        let cell = Mutex::new(Some(f));
        let take = || cell.lock().unwrap_or_else(|e| e.into_inner()).take();
        std::thread::scope(|s| {
            let spawned = std::thread::Builder::new()
                .name("softpreempt-device-work".into())
                .spawn_scoped(s, || {
                    // SAFETY: gettid has no preconditions.
                    let tid = unsafe { libc::gettid() };
                    let _listed = {
                        // The workers' lock orders this against `make_idle`.
                        let _w = self.workers.lock().unwrap_or_else(|e| e.into_inner());
                        let mut h = self.helpers.lock().unwrap_or_else(|e| e.into_inner());
                        h.push(tid);
                        if self.idle() {
                            let _ = idle_class(&[tid]);
                        }
                        Listed(self, tid)
                    };
                    take().map(|f| f())
                });
            let ran = match spawned {
                Ok(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
                Err(e) => {
                    tracing::debug!("device work runs on the calling thread: {e}");
                    None
                }
            };
            match ran {
                Some(r) => r,
                None => take().map(|f| f()).expect("the work ran nowhere else"),
            }
        })
    }
}

/// Scheduling policy of thread `tid`.
#[cfg(test)]
fn policy_of(tid: i32) -> Option<libc::c_int> {
    // SAFETY: a plain query system call.
    let p = unsafe { libc::sched_getscheduler(tid) };
    (p >= 0).then_some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_threads_started_meanwhile_and_lowers_their_class() {
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let (handle, tids) = spawned_during(|| {
            let (tx, rx) = std::sync::mpsc::channel();
            let h = std::thread::spawn(move || {
                // SAFETY: gettid has no preconditions.
                tx.send(unsafe { libc::gettid() }).unwrap();
                let _ = stop_rx.recv();
            });
            (h, rx.recv().unwrap())
        });
        let (h, tid) = handle;
        // Other tests of this binary may start threads meanwhile too: ours must be found.
        assert!(tids.contains(&tid), "{tid} not in {tids:?}");
        let tids = vec![tid];
        assert_eq!(policy_of(tid), Some(libc::SCHED_OTHER));
        assert_eq!(idle_class(&tids).unwrap(), 1);
        assert_eq!(policy_of(tid), Some(libc::SCHED_IDLE));
        // Back to normal: allowed to root (tests here run as root), refused otherwise.
        match normal_class(&tids) {
            Ok(1) => assert_eq!(policy_of(tid), Some(libc::SCHED_OTHER)),
            Ok(n) => panic!("{n} threads restored"),
            Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EPERM)),
        }
        stop_tx.send(()).unwrap();
        h.join().unwrap();
        // A thread that is gone is skipped, not an error.
        assert_eq!(idle_class(&tids).unwrap(), 0);
    }

    #[test]
    fn a_layer_thread_goes_to_the_batch_class() {
        let policy = std::thread::spawn(|| {
            no_wakeup_preemption("test");
            // SAFETY: gettid has no preconditions.
            policy_of(unsafe { libc::gettid() })
        })
        .join()
        .unwrap();
        assert_eq!(policy, Some(libc::SCHED_BATCH));
    }

    /// A thread that waits for `stop`, and its id.
    fn parked(stop: std::sync::mpsc::Receiver<()>) -> (std::thread::JoinHandle<()>, i32) {
        let (tx, rx) = std::sync::mpsc::channel();
        let h = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            tx.send(unsafe { libc::gettid() }).unwrap();
            let _ = stop.recv();
        });
        (h, rx.recv().unwrap())
    }

    #[test]
    fn device_work_runs_in_the_class_of_the_device_threads() {
        // SAFETY: gettid and sched_getscheduler(0) have no preconditions.
        let own = || (unsafe { libc::gettid() }, policy_of(0));
        let t = DeviceThreads::default();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let (worker, tid) = parked(stop_rx);
        t.found(vec![tid]);
        // Ordinary while the device threads are, on a thread of its own, and its value
        // comes back.
        let (work_tid, class) = t.run_as_device_work(own);
        // SAFETY: as above.
        assert_ne!(work_tid, unsafe { libc::gettid() });
        assert_eq!(class, Some(libc::SCHED_OTHER));
        // Moved with the device threads when they go idle while it runs.
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
        let during = std::thread::scope(|s| {
            let t = &t;
            let h = s.spawn(move || {
                t.run_as_device_work(move || {
                    ready_tx.send(()).unwrap();
                    go_rx.recv().unwrap();
                    policy_of(0)
                })
            });
            ready_rx.recv().unwrap();
            assert!(t.make_idle(), "the device thread went idle");
            go_tx.send(()).unwrap();
            h.join().unwrap()
        });
        assert_eq!(during, Some(libc::SCHED_IDLE));
        assert_eq!(policy_of(tid), Some(libc::SCHED_IDLE));
        // Idle from its start once they are; the calling thread is left as it was.
        assert_eq!(t.run_as_device_work(own).1, Some(libc::SCHED_IDLE));
        assert_eq!(policy_of(0), Some(libc::SCHED_OTHER));
        assert!(
            t.helpers.lock().unwrap().is_empty(),
            "helpers are forgotten"
        );
        // A panic in the work reaches the caller.
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            t.run_as_device_work(|| panic!("in the work"))
        }));
        assert!(caught.is_err());
        assert!(t.helpers.lock().unwrap().is_empty());
        stop_tx.send(()).unwrap();
        worker.join().unwrap();
    }
}
