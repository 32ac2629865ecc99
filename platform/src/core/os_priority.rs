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
}
