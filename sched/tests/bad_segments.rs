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
