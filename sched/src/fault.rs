//! Surviving a segment that shrinks under us.
//!
//! A segment is a file in a tmpfs mapped `MAP_SHARED`. If any process with write access to
//! it (the same user: the mode is 0600) truncates it, the kernel removes the pages beyond
//! the new end from every mapping, and the next access there raises SIGBUS, which kills
//! every process using the device. Nothing in Linux lets an ordinary tmpfs file refuse to
//! shrink: seals (`F_SEAL_SHRINK`) exist only for `memfd_create` files, which other
//! processes cannot open by name, leases need a file nobody has open for writing, and a
//! size check (`fstat`) before each access leaves the race between check and access. (A
//! System V segment cannot shrink, but it would replace the whole transport; see
//! docs/design-sched.md.)
//!
//! So the fault itself is handled, narrowly: while a segment is mapped, a SIGBUS handler
//! is installed that looks only at faults whose address lies inside one of our segment
//! mappings. For those it maps private zero pages over the whole mapping (`MAP_FIXED`,
//! one system call, async-signal-safe) and records the damage; the faulting access is then
//! retried by the CPU and succeeds. The arbiter sees the damage (a zero magic, and
//! [`damaged`]) at its next check and hands the queue back to pass-through, with one log
//! line. Every other SIGBUS goes to the handler that was installed before ours, or gets
//! the default action, exactly as without SoftPreempt.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Once;

/// Mapped segments at once in one process (one per device, plus status readers).
const RANGES: usize = 64;

/// Start and length of each registered mapping; start 0 means a free entry. Written
/// outside the handler only, read by the handler.
static START: [AtomicUsize; RANGES] = [const { AtomicUsize::new(0) }; RANGES];
static LEN: [AtomicUsize; RANGES] = [const { AtomicUsize::new(0) }; RANGES];
/// Set by the handler when it replaced entry i's mapping.
static HIT: [AtomicBool; RANGES] = [const { AtomicBool::new(false) }; RANGES];

static INSTALL: Once = Once::new();
/// The action in place before ours (written once, before our handler can run).
static mut PREVIOUS: Option<libc::sigaction> = None;

/// A registered mapping; unregisters on drop (before the mapping goes away).
pub(crate) struct Guard(Option<usize>);

impl Guard {
    /// Whether a truncation fault was absorbed in this mapping.
    pub fn damaged(&self) -> bool {
        self.0.is_some_and(|i| HIT[i].load(Ordering::Acquire))
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(i) = self.0 {
            LEN[i].store(0, Ordering::Release);
            HIT[i].store(false, Ordering::Release);
            START[i].store(0, Ordering::Release);
        }
    }
}

/// Registers the mapping `[start, start + len)` and installs the handler (once). When the
/// table is full or the handler cannot be installed, the mapping is simply not protected
/// (as before this module existed).
pub(crate) fn protect(start: *const u8, len: usize) -> Guard {
    INSTALL.call_once(install);
    for i in 0..RANGES {
        if START[i]
            .compare_exchange(0, start as usize, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            HIT[i].store(false, Ordering::Release);
            LEN[i].store(len, Ordering::Release);
            return Guard(Some(i));
        }
    }
    tracing::debug!("more than {RANGES} segments mapped; this one is not fault-protected");
    Guard(None)
}

fn install() {
    // SAFETY: sigaction with a zeroed, filled-in struct; the previous action is stored in
    // PREVIOUS before our handler can run for the first time (it is installed by this
    // very call, and PREVIOUS is written first from the value queried just before).
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut old) != 0 {
            return;
        }
        *std::ptr::addr_of_mut!(PREVIOUS) = Some(old);
        let mut new: libc::sigaction = std::mem::zeroed();
        new.sa_sigaction = handler as *const () as usize;
        new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_NODEFER;
        libc::sigemptyset(&mut new.sa_mask);
        if libc::sigaction(libc::SIGBUS, &new, std::ptr::null_mut()) != 0 {
            tracing::debug!("cannot install the segment SIGBUS handler");
        }
    }
}

extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    for i in 0..RANGES {
        let start = START[i].load(Ordering::Acquire);
        let len = LEN[i].load(Ordering::Acquire);
        if start != 0 && addr >= start && addr < start.saturating_add(len) {
            // SAFETY: replaces exactly our own mapping (same address and length) with
            // private zero pages; mmap is a plain system call, safe in a signal handler.
            let p = unsafe {
                libc::mmap(
                    start as *mut libc::c_void,
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                )
            };
            if p as usize == start {
                HIT[i].store(true, Ordering::Release);
                return;
            }
            break;
        }
    }
    chain(sig, info, ctx);
}

/// Not our fault: what would have happened without us.
fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: PREVIOUS was written before the handler was installed and never changes.
    let prev = unsafe { *std::ptr::addr_of!(PREVIOUS) };
    match prev {
        Some(p) if p.sa_sigaction != libc::SIG_DFL && p.sa_sigaction != libc::SIG_IGN => {
            if p.sa_flags & libc::SA_SIGINFO != 0 {
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    // SAFETY: an SA_SIGINFO handler has this signature.
                    unsafe { std::mem::transmute(p.sa_sigaction) };
                f(sig, info, ctx);
            } else {
                // SAFETY: a plain handler has this signature.
                let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(p.sa_sigaction) };
                f(sig);
            }
        }
        _ => {
            // Default action: restore it and return; the faulting access runs again and
            // the kernel delivers SIGBUS with its default effect (core dump), as it would
            // have without us. (An ignored SIGBUS from a fault is fatal anyway.)
            // SAFETY: sigaction with a zeroed struct (SIG_DFL) is async-signal-safe.
            unsafe {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(libc::SIGBUS, &dfl, std::ptr::null_mut());
            }
        }
    }
}
