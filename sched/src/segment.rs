//! The segment file: naming, race-free creation, header publication, validation and
//! mapping. Raw pointer access to the mapping is confined to [`Segment::header`] and
//! [`Segment::slots`].

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use memmap2::{MmapOptions, MmapRaw};

use crate::error::SchedError;
use crate::fault;
use crate::futex;
use crate::layout::*;
use crate::lease::clamp_lease;
use crate::liveness;
use crate::options::ArbiterOptions;
use crate::policy::{Params, View};
use crate::sync::Ordering;

/// File name prefix of every segment.
pub const SEGMENT_PREFIX: &str = "softpreempt-";

/// FNV-1a: a hash that is stable across processes, builds and Rust versions.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The segment file name for `device_key`: owner (user, or group when shared), a readable
/// sanitized prefix of the key, and a hash of the whole key.
pub fn segment_name(device_key: &str, uid: u32, group: Option<u32>) -> String {
    let readable: String = device_key
        .chars()
        .take(40)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let owner = match group {
        Some(g) => format!("g{g}"),
        None => uid.to_string(),
    };
    format!(
        "{SEGMENT_PREFIX}{owner}-{readable}-{:016x}",
        fnv1a(device_key.as_bytes())
    )
}

/// A mapped, validated segment.
pub(crate) struct Segment {
    pub path: PathBuf,
    /// This process's own descriptor; used for reclaim locks and to reopen the file.
    pub file: File,
    /// Absorbs a SIGBUS from this mapping if the file is truncated under us (dropped, and
    /// so unregistered, before `map` is unmapped).
    fault: fault::Guard,
    map: MmapRaw,
    slot_count: usize,
    pub params: Params,
    pub owner_uid: u32,
}

enum OpenOutcome {
    Ready(Segment),
    /// The creator died before publishing; the stale file was removed. Try again.
    Retry,
}

impl Segment {
    /// The header.
    #[inline]
    pub fn header(&self) -> &Header {
        // SAFETY: the mapping is page aligned and at least HEADER_SIZE bytes long (checked
        // before every `Segment` is built), and lives as long as `self`. `Header` consists
        // only of atomics, for which every bit pattern is valid, and all shared access goes
        // through them, so concurrent writes by other processes are not data races.
        unsafe { &*(self.map.as_ptr() as *const Header) }
    }

    /// The `slot_count` slots.
    #[inline]
    pub fn slots(&self) -> &[Slot] {
        // SAFETY: the mapping is exactly `segment_size(slot_count)` bytes (checked at open),
        // so `slot_count` slots of SLOT_SIZE bytes start at HEADER_SIZE (8-byte aligned).
        // `Slot` is all atomics (any bit pattern valid) and the mapping lives as long as
        // `self`.
        unsafe {
            std::slice::from_raw_parts(
                self.map.as_ptr().add(HEADER_SIZE) as *const Slot,
                self.slot_count,
            )
        }
    }

    /// The policy's view of the table.
    #[inline]
    pub fn view(&self) -> View<'_> {
        View {
            h: self.header(),
            slots: self.slots(),
            params: self.params,
        }
    }

    /// Whether the segment was changed under this process in a way that ends arbitration
    /// through it: its file was truncated (the mapping now holds private zero pages), or
    /// its header no longer reads as the one validated at open (overwritten). `None` when
    /// intact, else what was found.
    pub fn damage(&self) -> Option<&'static str> {
        let h = self.header();
        let intact = h.magic.load(Ordering::Acquire) == MAGIC
            && h.version.load(Ordering::Relaxed) == VERSION
            && h.slot_count.load(Ordering::Relaxed) as usize == self.slot_count
            && h.total_size.load(Ordering::Relaxed) == segment_size(self.slot_count) as u64;
        // After the loads: a truncation is noticed by the very first access that faults.
        if self.fault.damaged() {
            return Some("its file was truncated");
        }
        (!intact).then_some("its header was overwritten")
    }

    /// Number of slots.
    pub fn slot_count(&self) -> usize {
        self.slot_count
    }

    /// A new open file description of the same inode (via /proc/self/fd, so it cannot be
    /// a different file even if the path was replaced), for a client's own slot lock.
    pub fn reopen(&self) -> Result<File, SchedError> {
        let proc = format!("/proc/self/fd/{}", self.file.as_raw_fd());
        OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(&proc)
            .map_err(|e| SchedError::io("reopen", &self.path, e))
    }

    /// Opens the segment for `device_key`, creating it if absent.
    pub fn open_or_create(device_key: &str, opts: &ArbiterOptions) -> Result<Segment, SchedError> {
        opts.validate()?;
        if device_key.is_empty() || device_key.len() > KEY_BYTES {
            return Err(SchedError::InvalidArgument(format!(
                "device key must be 1..={KEY_BYTES} bytes"
            )));
        }
        let uid = opts.expected_uid.unwrap_or_else(liveness::euid);
        let path = opts.shm_dir.join(segment_name(device_key, uid, opts.group));
        for _ in 0..4 {
            match create(&path, device_key, opts)? {
                Some(seg) => return Ok(seg),
                None => match open_existing(&path, device_key, opts, uid)? {
                    OpenOutcome::Ready(seg) => {
                        seg.log_param_mismatch(opts);
                        return Ok(seg);
                    }
                    OpenOutcome::Retry => continue,
                },
            }
        }
        Err(SchedError::NotPublished { path })
    }

    fn log_param_mismatch(&self, opts: &ArbiterOptions) {
        let wanted = Params {
            max_inflight: opts.max_inflight,
            share_every: opts.share_every(),
            linger_ns: opts.hp_linger.as_nanos() as u64,
            lease_ns: clamp_lease(opts.lease.as_nanos().min(u64::MAX as u128) as u64),
        };
        if wanted != self.params {
            tracing::debug!(
                path = %self.path.display(),
                segment = ?self.params,
                local = ?wanted,
                "segment was created with other policy settings; using the segment's"
            );
        }
    }

    /// Opens a segment read-only, without registering (status tools).
    pub fn open_read_only(path: &Path) -> Result<Segment, SchedError> {
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
            .map_err(|e| open_error(path, e))?;
        let md = file
            .metadata()
            .map_err(|e| SchedError::io("fstat", path, e))?;
        if !md.file_type().is_file() {
            return Err(SchedError::NotRegularFile(path.to_path_buf()));
        }
        let len = md.len();
        if len < HEADER_SIZE as u64 {
            return Err(wrong_size(path, HEADER_SIZE as u64, len));
        }
        let map = MmapOptions::new()
            .len(len as usize)
            .map_raw_read_only(&file)
            .map_err(|e| SchedError::io("mmap", path, e))?;
        let seg = Segment {
            path: path.to_path_buf(),
            file,
            fault: fault::protect(map.as_ptr(), map.len()),
            map,
            slot_count: 0,
            params: Params {
                max_inflight: 1,
                share_every: 0,
                linger_ns: 0,
                lease_ns: MAX_LEASE_NS,
            },
            owner_uid: md.uid(),
        };
        let (slot_count, params) = validate(path, seg.header(), len, None)?;
        Ok(Segment {
            slot_count,
            params,
            ..seg
        })
    }
}

fn open_error(path: &Path, e: std::io::Error) -> SchedError {
    if e.raw_os_error() == Some(libc::ELOOP) {
        SchedError::Symlink(path.to_path_buf())
    } else {
        SchedError::io("open", path, e)
    }
}

fn wrong_size(path: &Path, expected: u64, actual: u64) -> SchedError {
    SchedError::WrongSize {
        path: path.to_path_buf(),
        expected,
        actual,
    }
}

/// Creates and publishes a new segment. `Ok(None)` if it already exists.
fn create(
    path: &Path,
    device_key: &str,
    opts: &ArbiterOptions,
) -> Result<Option<Segment>, SchedError> {
    let mode = if opts.group.is_some() { 0o660 } else { 0o600 };
    // O_EXCL: exactly one process creates; it also never follows a symlink at `path`.
    let file = match OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(None),
        Err(e) => return Err(open_error(path, e)),
    };
    let result = init(path, &file, device_key, opts, mode);
    match result {
        Ok(seg_parts) => {
            let (map, slot_count, params) = seg_parts;
            tracing::debug!(path = %path.display(), slots = slot_count, "created arbiter segment");
            Ok(Some(Segment {
                path: path.to_path_buf(),
                file,
                fault: fault::protect(map.as_ptr(), map.len()),
                map,
                slot_count,
                params,
                owner_uid: liveness::euid(),
            }))
        }
        Err(e) => {
            // Never leave a half-built segment behind for others to wait on.
            let _ = std::fs::remove_file(path);
            Err(e)
        }
    }
}

fn init(
    path: &Path,
    file: &File,
    device_key: &str,
    opts: &ArbiterOptions,
    mode: u32,
) -> Result<(MmapRaw, usize, Params), SchedError> {
    // The init lock tells openers that a live creator is still filling the segment in.
    liveness::try_lock(file, 0).map_err(|e| SchedError::io("lock", path, e))?;
    let fd = file.as_raw_fd();
    // SAFETY: `fd` is open for the duration of the call; fchmod takes no pointers.
    if unsafe { libc::fchmod(fd, mode as libc::mode_t) } != 0 {
        return Err(SchedError::io(
            "fchmod",
            path,
            std::io::Error::last_os_error(),
        ));
    }
    if let Some(gid) = opts.group {
        // SAFETY: as above; uid -1 leaves the owner unchanged.
        if unsafe { libc::fchown(fd, u32::MAX, gid) } != 0 {
            return Err(SchedError::io(
                "fchown",
                path,
                std::io::Error::last_os_error(),
            ));
        }
    }
    let slots = opts.max_clients as usize;
    let total = segment_size(slots);
    file.set_len(total as u64)
        .map_err(|e| SchedError::io("ftruncate", path, e))?;
    let map = MmapOptions::new()
        .len(total)
        .map_raw(file)
        .map_err(|e| SchedError::io("mmap", path, e))?;
    let params = Params {
        max_inflight: opts.max_inflight,
        share_every: opts.share_every(),
        linger_ns: opts.hp_linger.as_nanos() as u64,
        lease_ns: clamp_lease(opts.lease.as_nanos().min(u64::MAX as u128) as u64),
    };
    // SAFETY: the mapping is `total` >= HEADER_SIZE bytes, page aligned, and lives until
    // `map` is dropped, after this reference's last use. Header is all atomics.
    let h = unsafe { &*(map.as_ptr() as *const Header) };
    // The file came from ftruncate, so every slot is already zero (SLOT_FREE).
    h.version.store(VERSION, Ordering::Relaxed);
    h.header_size.store(HEADER_SIZE as u32, Ordering::Relaxed);
    h.slot_size.store(SLOT_SIZE as u32, Ordering::Relaxed);
    h.slot_count.store(slots as u32, Ordering::Relaxed);
    h.creator_uid.store(liveness::euid(), Ordering::Relaxed);
    h.total_size.store(total as u64, Ordering::Relaxed);
    h.max_inflight.store(params.max_inflight, Ordering::Relaxed);
    h.min_share_every
        .store(params.share_every, Ordering::Relaxed);
    h.hp_linger_ns.store(params.linger_ns, Ordering::Relaxed);
    h.lease_ns.store(params.lease_ns, Ordering::Relaxed);
    h.created_realtime_ns
        .store(liveness::realtime_ns(), Ordering::Relaxed);
    h.key_len.store(device_key.len() as u32, Ordering::Relaxed);
    write_bytes(&h.key, device_key.as_bytes());
    // Publish last: a reader that sees the magic (Acquire) sees every field above.
    h.magic.store(MAGIC, Ordering::Release);
    futex::wake_all(&h.magic);
    let _ = liveness::unlock(file, 0);
    Ok((map, slots, params))
}

/// Opens an existing segment and waits (bounded) for its header to be published.
fn open_existing(
    path: &Path,
    device_key: &str,
    opts: &ArbiterOptions,
    uid: u32,
) -> Result<OpenOutcome, SchedError> {
    let file = match OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f,
        // Removed between our create attempt and this open: start over.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(OpenOutcome::Retry),
        Err(e) => return Err(open_error(path, e)),
    };
    let md = file
        .metadata()
        .map_err(|e| SchedError::io("fstat", path, e))?;
    if !md.file_type().is_file() {
        return Err(SchedError::NotRegularFile(path.to_path_buf()));
    }
    match opts.group {
        None if md.uid() != uid => {
            return Err(SchedError::WrongOwner {
                path: path.to_path_buf(),
                owner: md.uid(),
                expected: uid,
            })
        }
        Some(g) if md.gid() != g => {
            return Err(SchedError::WrongGroup {
                path: path.to_path_buf(),
                group: md.gid(),
                expected: g,
            })
        }
        _ => {}
    }
    let mode = md.mode() & 0o777;
    let allowed = if opts.group.is_some() { 0o660 } else { 0o600 };
    if mode & !allowed != 0 {
        return Err(SchedError::BadPermissions {
            path: path.to_path_buf(),
            mode,
        });
    }

    let start = Instant::now();
    let deadline = start + opts.open_timeout;
    let header_map = loop {
        let md = file
            .metadata()
            .map_err(|e| SchedError::io("fstat", path, e))?;
        let len = md.len();
        if len != 0 && len < HEADER_SIZE as u64 {
            // A creator goes from 0 straight to the full size: this is a truncated file.
            return Err(wrong_size(path, HEADER_SIZE as u64, len));
        }
        let map = if len == 0 {
            None
        } else {
            Some(
                MmapOptions::new()
                    .len(HEADER_SIZE)
                    .map_raw(&file)
                    .map_err(|e| SchedError::io("mmap", path, e))?,
            )
        };
        if let Some(m) = &map {
            // SAFETY: `m` is HEADER_SIZE bytes, page aligned, alive for this scope; Header
            // is all atomics.
            let h = unsafe { &*(m.as_ptr() as *const Header) };
            if h.magic.load(Ordering::Acquire) != 0 {
                break map.unwrap();
            }
        }
        if stale_creator(&file, &md)? {
            tracing::warn!(path = %path.display(), "removing a segment whose creator died before publishing it");
            remove_if_same(path, &md);
            return Ok(OpenOutcome::Retry);
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(SchedError::NotPublished {
                path: path.to_path_buf(),
            });
        }
        let step = (deadline - now).min(Duration::from_millis(10));
        match &map {
            Some(m) => {
                // SAFETY: as above.
                let h = unsafe { &*(m.as_ptr() as *const Header) };
                futex::wait(&h.magic, 0, step);
            }
            // The creator is between open and ftruncate (microseconds): nothing to wait on
            // yet, so back off briefly. Only on this startup path.
            None => std::thread::sleep(step.min(Duration::from_millis(1))),
        }
    };
    // SAFETY: `header_map` is HEADER_SIZE bytes, page aligned, alive for this scope.
    let h = unsafe { &*(header_map.as_ptr() as *const Header) };
    let len = file
        .metadata()
        .map_err(|e| SchedError::io("fstat", path, e))?
        .len();
    let (slot_count, params) = match validate(path, h, len, Some(device_key)) {
        Err(SchedError::UnsupportedVersion { found, .. })
            if (1..VERSION).contains(&found) && !liveness::any_locked(&file).unwrap_or(true) =>
        {
            // Segments outlive their processes, so one of an earlier build stays after an
            // upgrade; with nobody holding a lock in it, nobody uses it: replace it, or
            // every process of the new build would run without arbitration until reboot.
            tracing::warn!(path = %path.display(), found, "replacing an unused segment of an earlier layout version");
            remove_if_same(path, &md);
            return Ok(OpenOutcome::Retry);
        }
        r => r?,
    };
    drop(header_map);
    let map = MmapOptions::new()
        .len(segment_size(slot_count))
        .map_raw(&file)
        .map_err(|e| SchedError::io("mmap", path, e))?;
    Ok(OpenOutcome::Ready(Segment {
        path: path.to_path_buf(),
        file,
        fault: fault::protect(map.as_ptr(), map.len()),
        map,
        slot_count,
        params,
        owner_uid: md.uid(),
    }))
}

/// An unpublished segment whose init lock is free and that is over a second old was left
/// by a creator that died.
fn stale_creator(file: &File, md: &std::fs::Metadata) -> Result<bool, SchedError> {
    let ctime_ns = (md.ctime().max(0) as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(md.ctime_nsec().max(0) as u64);
    let old = liveness::realtime_ns().saturating_sub(ctime_ns) >= 1_000_000_000;
    Ok(old && !liveness::is_locked(file, 0).unwrap_or(true))
}

fn remove_if_same(path: &Path, md: &std::fs::Metadata) {
    if let Ok(now) = std::fs::symlink_metadata(path) {
        if now.dev() == md.dev() && now.ino() == md.ino() {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Range-checks a published header. Returns the slot count and the policy parameters.
fn validate(
    path: &Path,
    h: &Header,
    file_len: u64,
    device_key: Option<&str>,
) -> Result<(usize, Params), SchedError> {
    let p = || path.to_path_buf();
    let corrupt = |field: &'static str, value: u64| SchedError::Corrupt {
        path: p(),
        field,
        value,
    };
    let magic = h.magic.load(Ordering::Acquire);
    if magic != MAGIC {
        return Err(SchedError::BadMagic {
            path: p(),
            found: magic,
        });
    }
    let version = h.version.load(Ordering::Relaxed);
    if version != VERSION {
        return Err(SchedError::UnsupportedVersion {
            path: p(),
            found: version,
            supported: VERSION,
        });
    }
    let hs = h.header_size.load(Ordering::Relaxed);
    if hs as usize != HEADER_SIZE {
        return Err(corrupt("header_size", hs as u64));
    }
    let ss = h.slot_size.load(Ordering::Relaxed);
    if ss as usize != SLOT_SIZE {
        return Err(corrupt("slot_size", ss as u64));
    }
    let n = h.slot_count.load(Ordering::Relaxed) as usize;
    if n == 0 || n > MAX_SLOTS {
        return Err(corrupt("slot_count", n as u64));
    }
    let total = h.total_size.load(Ordering::Relaxed);
    if total != segment_size(n) as u64 {
        return Err(corrupt("total_size", total));
    }
    if file_len != total {
        return Err(wrong_size(path, total, file_len));
    }
    let max_inflight = h.max_inflight.load(Ordering::Relaxed);
    if max_inflight == 0 || max_inflight > MAX_INFLIGHT_LIMIT {
        return Err(corrupt("max_inflight", max_inflight as u64));
    }
    let share_every = h.min_share_every.load(Ordering::Relaxed);
    if share_every == 1 || share_every > MAX_SHARE_EVERY {
        return Err(corrupt("min_share_every", share_every as u64));
    }
    let linger_ns = h.hp_linger_ns.load(Ordering::Relaxed);
    if linger_ns > MAX_LINGER_NS {
        return Err(corrupt("hp_linger_ns", linger_ns));
    }
    let key_len = h.key_len.load(Ordering::Relaxed);
    if key_len == 0 || key_len as usize > KEY_BYTES {
        return Err(corrupt("key_len", key_len as u64));
    }
    if let Some(key) = device_key {
        if h.key_string() != key {
            return Err(SchedError::KeyMismatch { path: p() });
        }
    }
    // Clamped rather than refused: any value in range is a working lease, and a wild one
    // only moves it within that range.
    let lease_ns = clamp_lease(h.lease_ns.load(Ordering::Relaxed));
    Ok((
        n,
        Params {
            max_inflight,
            share_every,
            linger_ns,
            lease_ns,
        },
    ))
}

/// Segment files in `dir` (for a status tool), sorted by name. Symlinks are skipped.
pub fn list_segments(dir: &Path) -> Result<Vec<PathBuf>, SchedError> {
    let mut out = Vec::new();
    let rd = std::fs::read_dir(dir).map_err(|e| SchedError::io("read_dir", dir, e))?;
    for entry in rd.flatten() {
        let name = entry.file_name();
        let is_file = entry.file_type().map(|t| t.is_file()).unwrap_or(false);
        if is_file && name.to_string_lossy().starts_with(SEGMENT_PREFIX) {
            out.push(entry.path());
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_stable_and_sanitized() {
        let a = segment_name("pci:0000:01:00.0/GPU 0", 1000, None);
        assert_eq!(a, segment_name("pci:0000:01:00.0/GPU 0", 1000, None));
        assert!(a.starts_with("softpreempt-1000-pci_0000_01_00.0_GPU_0-"));
        assert!(!a.contains('/'));
        assert_ne!(a, segment_name("pci:0000:01:00.0/GPU 1", 1000, None));
        assert!(segment_name("k", 5, Some(44)).starts_with("softpreempt-g44-k-"));
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
    }
}
