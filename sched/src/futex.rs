//! Shared (not private) futex wait/wake on a word of the mapped segment.
//!
//! Shared futexes are keyed by the backing file page, so processes that map the segment
//! at different addresses still meet on the same word.

use std::time::Duration;

use crate::sync::AtomicU32;

/// Sleeps while `*word == expected`, for at most `timeout`. Returns on wake-up, timeout,
/// signal or value mismatch; the caller re-checks its condition in every case.
pub(crate) fn wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `word` is a valid, aligned u32 in a MAP_SHARED mapping that outlives the
    // call; FUTEX_WAIT only reads it. `ts` lives across the call. A relative timeout is
    // always given, so the wait is bounded.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// Wakes every waiter on `word`.
pub(crate) fn wake_all(word: &AtomicU32) {
    // SAFETY: `word` is a valid, aligned u32 in a live shared mapping; FUTEX_WAKE does not
    // access memory beyond hashing the address.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            i32::MAX,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}
