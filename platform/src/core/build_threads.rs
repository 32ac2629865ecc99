//! Vendor builds running on threads of the layer (persistent entries, the application's
//! own program built beside its rewritten one), counted so that the process waits for
//! them at exit.

use std::sync::{Condvar, Mutex, Once};
use std::time::{Duration, Instant};

/// Builds still running on threads of the layer.
static BUILDS: Mutex<usize> = Mutex::new(0);
static BUILDS_DONE: Condvar = Condvar::new();

/// A build starts. The first one registers [`wait_for_builds`] to run at exit: a vendor
/// compiler still running on a thread of ours while the process tears the vendor library
/// down crashes the process (seen with PoCL: a test binary that exited right after its
/// last launch died of SIGSEGV once in 8 runs).
pub fn started() {
    static AT_EXIT: Once = Once::new();
    AT_EXIT.call_once(|| {
        // SAFETY: registering a plain function that only waits on our own statics.
        unsafe { libc::atexit(wait_for_builds) };
    });
    *BUILDS.lock().unwrap_or_else(|e| e.into_inner()) += 1;
}

/// A build that [`started`] has ended (whatever its result).
pub fn ended() {
    let mut n = BUILDS.lock().unwrap_or_else(|e| e.into_inner());
    *n = n.saturating_sub(1);
    BUILDS_DONE.notify_all();
}

/// At exit: waits (at most 10 s) until no build of the layer runs any more.
extern "C" fn wait_for_builds() {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut n = BUILDS.lock().unwrap_or_else(|e| e.into_inner());
    while *n > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        n = BUILDS_DONE
            .wait_timeout(n, left)
            .map(|(g, _)| g)
            .unwrap_or_else(|e| e.into_inner().0);
    }
}
