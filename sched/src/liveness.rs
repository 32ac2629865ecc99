//! Liveness: OFD locks on slot bytes, process start times, and monotonic time.
//!
//! Each client holds a write lock (`F_OFD_SETLK`) on its slot's first byte through its own
//! open file description. The kernel drops the lock when the last descriptor of that
//! description closes, i.e. when the process dies, however it dies. So a slot whose lock
//! another process *can* take has a dead owner. OFD locks (unlike POSIX `F_SETLK`) belong
//! to the open file description, so two clients of one process (each with its own `open`)
//! exclude each other, and closing an unrelated descriptor does not drop them.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

fn flock(kind: libc::c_short, offset: u64) -> libc::flock {
    // SAFETY: `flock` is a plain C struct for which all-zero is a valid value (l_pid must
    // be 0 for OFD locks).
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = offset as libc::off_t;
    fl.l_len = 1;
    fl
}

fn fcntl_lock(file: &File, cmd: libc::c_int, fl: &mut libc::flock) -> io::Result<()> {
    // SAFETY: `fd` is an open descriptor owned by `file`; `fl` is a valid flock that the
    // kernel reads (and for GETLK writes) during the call.
    let r = unsafe { libc::fcntl(file.as_raw_fd(), cmd, fl as *mut libc::flock) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Tries to take the write lock on byte `offset` through `file`'s open file description.
/// `Ok(false)` if another open file description holds it.
pub(crate) fn try_lock(file: &File, offset: u64) -> io::Result<bool> {
    let mut fl = flock(libc::F_WRLCK as libc::c_short, offset);
    match fcntl_lock(file, libc::F_OFD_SETLK, &mut fl) {
        Ok(()) => Ok(true),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EACCES)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Releases the lock on byte `offset` held through `file`.
pub(crate) fn unlock(file: &File, offset: u64) -> io::Result<()> {
    let mut fl = flock(libc::F_UNLCK as libc::c_short, offset);
    fcntl_lock(file, libc::F_OFD_SETLK, &mut fl)
}

/// Is byte `offset` write-locked by some open file description other than `file`'s?
/// Works on a read-only descriptor (used by `inspect`).
pub(crate) fn is_locked(file: &File, offset: u64) -> io::Result<bool> {
    let mut fl = flock(libc::F_WRLCK as libc::c_short, offset);
    fcntl_lock(file, libc::F_OFD_GETLK, &mut fl)?;
    Ok(fl.l_type != libc::F_UNLCK as libc::c_short)
}

/// Is any byte of the file write-locked by an open file description other than `file`'s
/// (is anybody using the segment: a client's slot lock or a creator's init lock)?
pub(crate) fn any_locked(file: &File) -> io::Result<bool> {
    let mut fl = flock(libc::F_WRLCK as libc::c_short, 0);
    // l_len 0: from l_start to the end of the file, however far it grows.
    fl.l_len = 0;
    fcntl_lock(file, libc::F_OFD_GETLK, &mut fl)?;
    Ok(fl.l_type != libc::F_UNLCK as libc::c_short)
}

/// Start time of process `pid` in clock ticks after boot (/proc/PID/stat field 22).
pub fn process_start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces and parentheses: parse after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    // Fields after the name start at field 3 (state); start time is field 22.
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Is the process `pid` that started at `start_time` still running? Guards against pid
/// reuse in status output and logs; the OFD lock is what decides reclaim.
pub fn process_alive(pid: u32, start_time: u64) -> bool {
    pid != 0 && process_start_time(pid) == Some(start_time)
}

/// CLOCK_MONOTONIC in ns (system-wide, so comparable between processes).
pub fn now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CLOCK_REALTIME in ns.
pub(crate) fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer for the duration of the call.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// Effective uid of this process.
pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_start_time_is_readable_and_alive() {
        let pid = std::process::id();
        let st = process_start_time(pid).expect("start time");
        assert!(process_alive(pid, st));
        assert!(!process_alive(pid, st + 1));
        assert!(!process_alive(0, 0));
    }

    #[test]
    fn ofd_locks_exclude_two_descriptions_in_one_process() {
        let dir = std::env::temp_dir().join(format!("sp-lock-test-{}", std::process::id()));
        std::fs::write(&dir, [0u8; 16]).unwrap();
        let a = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&dir)
            .unwrap();
        let b = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&dir)
            .unwrap();
        assert!(try_lock(&a, 3).unwrap());
        assert!(!try_lock(&b, 3).unwrap());
        assert!(is_locked(&b, 3).unwrap());
        assert!(try_lock(&b, 4).unwrap());
        drop(a);
        assert!(try_lock(&b, 3).unwrap());
        unlock(&b, 3).unwrap();
        std::fs::remove_file(&dir).unwrap();
    }
}
