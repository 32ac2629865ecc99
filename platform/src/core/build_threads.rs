//! Vendor builds running on threads of the layer (persistent entries, the application's
//! own program built beside its rewritten one), counted so that the process waits for
//! them at exit.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// Builds still running on threads of the layer.
static BUILDS: Mutex<usize> = Mutex::new(0);
static BUILDS_DONE: Condvar = Condvar::new();

/// A build starts. [`wait_for_builds`] is registered to run at exit: a vendor compiler
/// still running on a thread of ours while the process tears the vendor library down
/// crashes the process (seen with PoCL: a test binary that exited right after its last
/// launch died of SIGSEGV once in 8 runs). Exit handlers run last registered first, and a
/// vendor may register its own teardown lazily (NVIDIA's compiler, at its first use), so
/// the wait is registered again whenever builds start after none ran, up to
/// [`MAX_REGISTRATIONS`] times, to run before a vendor handler registered meanwhile.
pub fn started() {
    let mut n = BUILDS.lock().unwrap_or_else(|e| e.into_inner());
    if *n == 0 && REGISTRATIONS.fetch_add(1, Ordering::Relaxed) < MAX_REGISTRATIONS {
        // SAFETY: registering a plain function that only waits on our own statics; it
        // may run several times (each waits for nothing once no build runs).
        unsafe { libc::atexit(wait_for_builds) };
    }
    *n += 1;
}

/// How many times [`started`] registered the exit wait.
static REGISTRATIONS: AtomicUsize = AtomicUsize::new(0);

/// Most registrations of the exit wait (each costs the C library a few bytes for the
/// life of the process).
const MAX_REGISTRATIONS: usize = 64;

/// A build that [`started`] has ended (whatever its result). Called only once the thread
/// has released every vendor object it held: the process may exit as soon as the count
/// is 0, and a vendor call after that races the vendor library's teardown.
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
