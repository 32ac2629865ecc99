//! Corrupt, hostile or foreign segments are refused with clear errors, never a crash.
#![cfg(not(loom))]

mod common;

use std::fs::OpenOptions;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::PathBuf;
use std::time::Duration;

use common::TestDir;
use softpreempt_sched::consts::{HEADER_SIZE, SLOT_SIZE};
use softpreempt_sched::*;

const KEY: &str = "bad-device";

/// Creates a valid segment, returns its path (all clients gone).
fn valid_segment(d: &TestDir) -> PathBuf {
    let arb = Arbiter::open(KEY, &d.opts()).unwrap();
    arb.path().to_path_buf()
}

fn poke(path: &PathBuf, offset: u64, bytes: &[u8]) {
    let f = OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(bytes, offset).unwrap();
}

fn open_err(d: &TestDir) -> SchedError {
    match Arbiter::open(KEY, &d.opts()) {
        Ok(_) => panic!("a bad segment was accepted"),
        Err(e) => {
            // Every error renders as one clear line.
            let msg = e.to_string();
            assert!(msg.contains("segment") || msg.contains("argument"), "{msg}");
            e
        }
    }
}

#[test]
fn wrong_magic() {
    let d = TestDir::new("magic");
    let p = valid_segment(&d);
    poke(&p, 0, b"XXXX");
    assert!(matches!(open_err(&d), SchedError::BadMagic { .. }));
    assert!(matches!(inspect(&p), Err(SchedError::BadMagic { .. })));
}

#[test]
fn wrong_version() {
    let d = TestDir::new("version");
    let p = valid_segment(&d);
    poke(&p, 4, &99u32.to_le_bytes());
    let e = open_err(&d);
    assert!(
        matches!(e, SchedError::UnsupportedVersion { found: 99, .. }),
        "{e}"
    );
}

/// A segment of an earlier layout version that nobody uses (no lock held in it) is left
/// over from before an upgrade: it is replaced. One that a live process of the earlier
/// build holds is refused (pass-through), as any other version mismatch.
#[test]
fn earlier_version_replaced_when_unused_refused_when_used() {
    let d = TestDir::new("old-version");
    let p = valid_segment(&d);
    poke(&p, 4, &1u32.to_le_bytes());
    let arb = Arbiter::open(KEY, &d.opts()).expect("the unused old segment is replaced");
    assert_eq!(inspect(&p).unwrap().slot_count, 64);
    let user = arb.register(ClientInfo::new(Priority::LOW)).unwrap();
    poke(&p, 4, &1u32.to_le_bytes());
    let e = open_err(&d);
    assert!(
        matches!(e, SchedError::UnsupportedVersion { found: 1, .. }),
        "{e}"
    );
    drop(user);
}

#[test]
fn truncated_file() {
    let d = TestDir::new("trunc");
    let p = valid_segment(&d);
    let f = OpenOptions::new().write(true).open(&p).unwrap();
    f.set_len(512).unwrap();
    assert!(matches!(
        open_err(&d),
        SchedError::WrongSize { actual: 512, .. }
    ));
    f.set_len((HEADER_SIZE + 3 * SLOT_SIZE) as u64).unwrap();
    assert!(matches!(open_err(&d), SchedError::WrongSize { .. }));
    assert!(matches!(inspect(&p), Err(SchedError::WrongSize { .. })));
}

#[test]
fn corrupt_header_fields() {
    // (offset, value) pairs of header fields set out of range.
    for (off, val, field) in [
        (16u64, 100_000u32, "slot_count"),
        (16, 0, "slot_count"),
        (12, 7, "slot_size"),
        (32, 0, "max_inflight"),
        (36, 1, "min_share_every"),
        (56, 4096, "key_len"),
    ] {
        let d = TestDir::new("corrupt");
        let p = valid_segment(&d);
        poke(&p, off, &val.to_le_bytes());
        match open_err(&d) {
            SchedError::Corrupt { field: f, .. } => assert_eq!(f, field),
            e => panic!("{field}: expected Corrupt, got {e}"),
        }
    }
    let d = TestDir::new("corrupt-linger");
    let p = valid_segment(&d);
    poke(&p, 40, &u64::MAX.to_le_bytes());
    assert!(matches!(
        open_err(&d),
        SchedError::Corrupt {
            field: "hp_linger_ns",
            ..
        }
    ));
}

#[test]
fn another_device_key_in_the_file() {
    let d = TestDir::new("key");
    let p = valid_segment(&d);
    poke(&p, 64, b"other-device");
    assert!(matches!(open_err(&d), SchedError::KeyMismatch { .. }));
}

#[test]
fn another_owner() {
    let d = TestDir::new("owner");
    let p = valid_segment(&d);
    // As root we can give the file away; otherwise expect another uid instead.
    let mut o = d.opts();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        std::os::unix::fs::chown(&p, Some(4242), None).unwrap();
    } else {
        o.expected_uid = Some(4242);
    }
    let uid_owned = o.expected_uid.is_none();
    let e = Arbiter::open(KEY, &o).err().expect("refused");
    assert!(matches!(e, SchedError::WrongOwner { .. }), "{e}");
    assert!(e.to_string().contains("4242"));
    if uid_owned {
        // A group-shared open wants the configured group.
        let mut g = d.opts();
        g.group = Some(4343);
        let e = Arbiter::open(KEY, &g).err();
        // Another name (group-based), so this one is created afresh and is fine.
        assert!(e.is_none(), "{e:?}");
    }
}

#[test]
fn loose_permissions() {
    let d = TestDir::new("perm");
    let p = valid_segment(&d);
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).unwrap();
    assert!(matches!(
        open_err(&d),
        SchedError::BadPermissions { mode: 0o666, .. }
    ));
}

#[test]
fn symlink_is_refused() {
    let d = TestDir::new("symlink");
    let p = valid_segment(&d);
    let real = d.0.join("real-target");
    std::fs::rename(&p, &real).unwrap();
    std::os::unix::fs::symlink(&real, &p).unwrap();
    assert!(matches!(open_err(&d), SchedError::Symlink(_)));
    assert!(matches!(inspect(&p), Err(SchedError::Symlink(_))));
    // list_segments skips the link (and the renamed file has no segment prefix).
    assert!(list_segments(&d.0).unwrap().is_empty());
}

#[test]
fn unpublished_segment_times_out() {
    let d = TestDir::new("unpub");
    let p = valid_segment(&d);
    poke(&p, 0, &0u32.to_le_bytes());
    let mut o = d.opts();
    o.open_timeout = Duration::from_millis(50);
    let e = Arbiter::open(KEY, &o).err().expect("refused");
    assert!(matches!(e, SchedError::NotPublished { .. }), "{e}");
}

#[test]
fn garbage_slots_and_masks_cause_no_crash() {
    let d = TestDir::new("garbage");
    let p = valid_segment(&d);
    let len = std::fs::metadata(&p).unwrap().len() as usize;
    // Every slot and every summary word after the generation cache line: 0xff.
    let garbage = vec![0xffu8; len - 256];
    poke(&p, 256, &garbage);
    let mut o = d.opts();
    o.max_clients = 64;
    let arb = Arbiter::open(KEY, &o).unwrap();
    let snap = inspect(&p).unwrap();
    assert!(snap.clients.len() <= 64);
    // Slots hold a state value no process writes: they count as free and are reusable.
    let c = arb.register(ClientInfo::new(Priority::HIGH)).unwrap();
    // The masks claim everyone demands: we may be blocked, but never crash or hang.
    let _ = c.try_acquire();
    match c.acquire(Duration::from_millis(30)) {
        Ok(g) => g.complete(1),
        Err(e) => assert!(matches!(e, SchedError::Timeout), "{e}"),
    }
    let _ = (
        c.should_yield(),
        c.contended(),
        c.higher_priority_registered(),
        c.stats(),
    );
    // The on-device masks claim everyone is on the device: the handshake waits for no
    // slot that is not active.
    let hs = c.claim_device(Duration::from_secs(30));
    assert_eq!(hs.lower_on_device, 0, "{hs:?}");
    c.leave_device(c.enter_device(Some(1000)), true);
    c.heartbeat();
    drop(c);
    let _ = arb.reclaim_dead();
    let _ = arb.snapshot();
}

#[test]
fn directory_in_place_of_segment() {
    let d = TestDir::new("dir");
    let name = segment_name(KEY, unsafe_euid(), None);
    std::fs::create_dir(d.0.join(name)).unwrap();
    let e = open_err(&d);
    assert!(
        matches!(e, SchedError::Io { .. } | SchedError::NotRegularFile(_)),
        "{e}"
    );
}

fn unsafe_euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// Fills `len` bytes of the file from `offset` with a byte pattern (no random source
/// needed: any value that is not SoftPreempt's is garbage).
fn scribble(path: &PathBuf, offset: u64, len: usize) {
    let junk: Vec<u8> = (0..len)
        .map(|i| (i as u8).wrapping_mul(151) ^ 0xa5)
        .collect();
    poke(path, offset, &junk);
}

#[test]
fn garbage_written_while_in_use_ends_arbitration_instead_of_waiting_for_ever() {
    let d = TestDir::new("garbage-live");
    let arb = Arbiter::open(KEY, &d.opts()).unwrap();
    let low = arb.register(ClientInfo::new(Priority::LOW)).unwrap();
    drop(low.acquire(Duration::from_secs(5)).unwrap());
    let len = std::fs::metadata(arb.path()).unwrap().len() as usize;
    scribble(&arb.path().to_path_buf(), 0, len);
    // The table now shows demand by everyone at every level; a waiter must not believe it.
    let start = std::time::Instant::now();
    match low.acquire(Duration::from_secs(30)) {
        Err(e @ SchedError::Damaged { .. }) => {
            assert!(e.to_string().contains("changed by another process"), "{e}")
        }
        Err(e) => panic!("expected Damaged, got {e}"),
        Ok(_) => panic!("a grant from a garbage table"),
    }
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "not a bounded wait"
    );
    assert!(low.intact().is_err());
}

#[test]
fn stray_demand_of_an_unowned_slot_is_cleared() {
    let d = TestDir::new("stray");
    let arb = Arbiter::open(KEY, &d.opts()).unwrap();
    let low = arb.register(ClientInfo::new(Priority::LOW)).unwrap();
    let p = arb.path().to_path_buf();
    // Only the masks: every demand and registered bit of every level set (slot 0 is ours;
    // the others are free, so their bits can only be left-overs of an overwrite).
    // Offsets from docs/design-sched.md: demand at 256, registered at 448 (3 levels x 4
    // words each).
    for base in [256u64, 448] {
        poke(&p, base, &[0xffu8; 96]);
    }
    let g = low
        .acquire(Duration::from_secs(30))
        .expect("the waiter clears stray bits instead of waiting for them");
    drop(g);
    assert!(low.intact().is_ok());
}

#[test]
fn truncation_while_mapped_is_survived() {
    let d = TestDir::new("trunc-live");
    let opts = d.opts();
    // In a child process: without the fix it dies of SIGBUS, which must not take the test
    // runner with it.
    // SAFETY: fork; the child only runs the block below and leaves with _exit.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let code = std::panic::catch_unwind(|| {
            let arb = Arbiter::open(KEY, &opts).unwrap();
            let c = arb.register(ClientInfo::new(Priority::NORMAL)).unwrap();
            drop(c.acquire(Duration::from_secs(5)).unwrap());
            // Another process of the same user cuts the file to nothing.
            let f = OpenOptions::new().write(true).open(arb.path()).unwrap();
            f.set_len(0).unwrap();
            let r = c.acquire(Duration::from_secs(5));
            let ok =
                matches!(&r, Err(SchedError::Damaged { what, .. }) if what.contains("truncated"));
            drop(r);
            // The statistics reader and the client's release touch the mapping too.
            let _ = arb.snapshot();
            drop(c);
            if ok {
                0
            } else {
                2
            }
        })
        .unwrap_or(3);
        // SAFETY: leaves the forked child without running the test harness's exit path.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(
        !libc::WIFSIGNALED(status),
        "the process died of signal {}",
        libc::WTERMSIG(status)
    );
    assert_eq!(
        libc::WEXITSTATUS(status),
        0,
        "acquire did not report the truncation"
    );
}

#[test]
fn a_sigbus_outside_segments_keeps_its_default_effect() {
    let d = TestDir::new("sigbus-other");
    let _arb = Arbiter::open(KEY, &d.opts()).unwrap();
    // SAFETY: fork; the child maps a file, truncates it and touches it: a SIGBUS that is
    // not the arbiter's, which must still kill it.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let f = tempfile_in(&d.0);
        f.set_len(8192).unwrap();
        // SAFETY: a fresh shared mapping of the file.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                8192,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                std::os::fd::AsRawFd::as_raw_fd(&f),
                0,
            ) as *mut u8;
            f.set_len(0).unwrap();
            std::ptr::write_volatile(p, 1);
            libc::_exit(0);
        }
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGBUS);
}

fn tempfile_in(dir: &std::path::Path) -> std::fs::File {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(dir.join("not-a-segment"))
        .unwrap()
}
