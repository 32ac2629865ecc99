//! The program store (architecture rule 9): what the layer learned from a program's source,
//! kept per user and keyed by the vendor's binary of the application's own program.
//!
//! Applications cache program binaries (pyopencl, OpenCV, ...) and load them with
//! `clCreateProgramWithBinary` on their next run. The binary the layer hands out is the
//! bare driver's, so on its own it says nothing about which kernels may be sliced or how
//! a kernel that reads the launch geometry was rewritten. An [`Entry`] says that; it is
//! found again by the SHA-256 of the binary together with the device and driver that
//! built it ([`Key`]).
//!
//! An entry also keeps the application's own source when some kernel can run as a
//! yielding launch, and the store keeps built persistent entries' vendor binaries
//! ([`Store::put_built`], see `core::yield_program`) so they need not be compiled again.
//!
//! On disk: one file per entry under `<dir>/programs/`, named by the hash of its key. A
//! file is a header line (magic, format version, the key, the payload's SHA-256) and the
//! JSON payload; built persistent entries are files of the same shape (`.built`) whose
//! payload is the binary. Rewritten binaries (`.bin`) are named by their own SHA-256. The directory is created with mode 0700; entries are written to a
//! temporary file and renamed into place, so a reader sees a whole entry or none and
//! concurrent writers of one key just replace each other's (identical) entry. The store
//! is a cache: an entry that is missing, truncated, corrupt, from another format version
//! or owned by another user is a miss (logged once), never an error, and writes that fail
//! (read-only directory, full disk) are logged once and otherwise ignored. Past its size
//! bound the least recently used entries are evicted (a hit refreshes an entry's time).

use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::core::objects::Sliceable;

/// First line of every entry names the format, so a file of anything else is a miss.
const MAGIC: &str = "softpreempt-program-store";
/// Bumped whenever [`Entry`] changes shape in a way old entries cannot be read as;
/// entries of another version are misses. Fields added since are `#[serde(default)]`
/// instead (the yielding facts and the application's source): an entry of an older build
/// still tells how to slice its kernels, where a bump would throw that away too, and
/// nothing it lacks can be rebuilt without the application building from source again.
pub const FORMAT_VERSION: u32 = 1;
/// Entries larger than this are not read (a program's sources are far smaller).
const MAX_ENTRY_BYTES: u64 = 16 << 20;
/// Nor are rewritten binaries (or built persistent entries) larger than this.
const MAX_BLOB_BYTES: u64 = 256 << 20;
/// File name extensions: entries, rewritten binaries, and built persistent entries.
const ENTRY: &str = "json";
const BLOB: &str = "bin";
const BUILT: &str = "built";
/// Every kind of file the store holds (evicted, counted and cleared together).
const ALL: &[&str] = &[ENTRY, BLOB, BUILT];
/// Temporary files of writers that died are removed once they are this old.
const STALE_TEMP_SECS: u64 = 3600;

/// What identifies one vendor binary: its SHA-256 (lowercase hex) and the device and
/// driver it was built for (see `Device::identity`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Key {
    pub binary: String,
    pub device: String,
}

impl Key {
    /// The name of its file of kind `ext`: a hash of the whole key and of what this
    /// build's rewrites produce (`softpreempt_transform::FINGERPRINT`): another build's
    /// rewritten programs and built entries are misses, not loaded.
    fn file_name(&self, ext: &str) -> String {
        let text = format!(
            "{}\n{}\n{:016x}",
            self.binary,
            self.device,
            softpreempt_transform::FINGERPRINT
        );
        format!(
            "{}.{ext}",
            crate::core::sliceable::sha256_hex(text.as_bytes())
        )
    }
}

/// What the layer knows of one kernel of a stored program.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelFacts {
    pub name: String,
    /// The index of the hidden geometry argument in the rewritten program's kernel, for
    /// a kernel that reads the launch geometry and was rewritten.
    pub hidden: Option<u32>,
    /// Whether its launches may be sliced (from the rewritten program, for `hidden`).
    pub sliceable: Sliceable,
    /// Whether its launches may run as yielding launches (`Unknown` in entries of builds
    /// from before yielding launches, and for kernels of a rewritten executable before
    /// its binary is recorded).
    #[serde(default)]
    pub yields: Yields,
}

/// Whether a kernel has a persistent entry (`core::yield_program`), or why not.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Yields {
    #[default]
    Unknown,
    Yes,
    No(String),
}

/// One compilation unit of the rewritten program.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Unit {
    pub source: String,
    /// The (include name, text) headers it was compiled with (`clCompileProgram`).
    pub headers: Vec<(String, String)>,
    /// The build or compile options (`None`: the application passed NULL, which a
    /// vendor may treat otherwise than an empty string).
    pub options: Option<String>,
}

/// How to build the rewritten program again: one unit built with its options, or (when
/// `linked`) every unit compiled, then linked with `link_options`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recipe {
    pub units: Vec<Unit>,
    pub linked: bool,
    pub link_options: Option<String>,
}

/// What the store holds for one binary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub kernels: Vec<KernelFacts>,
    /// Present when some kernel has `hidden`.
    pub recipe: Option<Recipe>,
    /// The SHA-256 of the rewritten program's own binary for this device, kept beside
    /// the entry ([`Store::put_blob`]): a later process loads it instead of compiling the
    /// recipe (which stays the fallback).
    #[serde(default)]
    pub rewritten_binary: Option<String>,
    /// The application's own source and build options, when some kernel [`Yields`]: a
    /// later process that loads the binary builds the persistent entries from it.
    #[serde(default)]
    pub source: Option<Unit>,
}

impl Entry {
    pub fn kernel(&self, name: &str) -> Option<&KernelFacts> {
        self.kernels.iter().find(|k| k.name == name)
    }

    /// Whether two entries say the same of the program (their devices' rewritten
    /// binaries may differ).
    pub fn same_program(&self, other: &Entry) -> bool {
        self.kernels == other.kernels && self.recipe == other.recipe && self.source == other.source
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    magic: String,
    version: u32,
    key: Key,
    payload_sha256: String,
}

/// One entry as `softpreempt store list` shows it.
pub struct Listed {
    pub path: PathBuf,
    pub bytes: u64,
    pub modified: SystemTime,
    /// The entry, or why it cannot be read.
    pub entry: Result<(Key, Entry), String>,
}

/// A program store directory.
pub struct Store {
    dir: PathBuf,
    max_bytes: u64,
}

/// The store's root directory by default: `$XDG_CACHE_HOME/softpreempt`, else
/// `~/.cache/softpreempt`.
pub fn default_dir() -> Option<PathBuf> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .map(|h| h.join(".cache"))
        })?;
    Some(cache.join("softpreempt"))
}

impl Store {
    /// The store the configuration names (`None`: turned off, or no home directory).
    pub fn configured() -> Option<Store> {
        let cfg = &crate::config::config().store;
        if cfg.max_mb == 0 {
            return None;
        }
        let dir = cfg.dir.clone().or_else(default_dir)?;
        Some(Store::at(dir, cfg.max_mb << 20))
    }

    /// A store rooted at `dir` (its entries live in `dir/programs`).
    pub fn at(dir: PathBuf, max_bytes: u64) -> Store {
        Store { dir, max_bytes }
    }

    /// Where the entries live.
    pub fn entries_dir(&self) -> PathBuf {
        self.dir.join("programs")
    }

    /// The entry for `key`, if there is a valid one of ours.
    pub fn get(&self, key: &Key) -> Option<Entry> {
        let path = self.entries_dir().join(key.file_name(ENTRY));
        let read = read_entry(&path);
        hit(&path, key, read, "it is for another binary or device")
    }

    /// A rewritten binary stored by [`Store::put_blob`], if it is whole and ours.
    pub fn get_blob(&self, sha256: &str) -> Option<Vec<u8>> {
        if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let path = self.entries_dir().join(format!("{sha256}.{BLOB}"));
        match read_owned(&path, MAX_BLOB_BYTES) {
            Ok(Some(bytes)) if crate::core::sliceable::sha256_hex(&bytes) == sha256 => {
                touch(&path);
                Some(bytes)
            }
            Ok(Some(_)) => {
                miss(&path, "truncated or corrupt (checksum mismatch)");
                None
            }
            Ok(None) => None,
            Err(why) => {
                miss(&path, &why);
                None
            }
        }
    }

    /// Stores a binary by its SHA-256 (returned), for [`Entry::rewritten_binary`].
    pub fn put_blob(&self, bytes: &[u8]) -> io::Result<String> {
        let sha = crate::core::sliceable::sha256_hex(bytes);
        self.fits(bytes)?;
        if self.get_blob(&sha).is_some() {
            return Ok(sha);
        }
        let dir = self.entries_dir();
        private_dir(&self.dir)?;
        private_dir(&dir)?;
        write_atomically(&dir, &format!("{sha}.{BLOB}"), bytes)?;
        Ok(sha)
    }

    /// A vendor binary of built persistent entries stored by [`Store::put_built`] for
    /// `key` (the SHA-256 of their source and options, and the device), if it is whole and
    /// ours.
    pub fn get_built(&self, key: &Key) -> Option<Vec<u8>> {
        let path = self.entries_dir().join(key.file_name(BUILT));
        let read = read_owned(&path, MAX_BLOB_BYTES).and_then(|b| {
            b.map(|b| decode(&b).map(|(k, p)| (k, p.to_vec())))
                .transpose()
        });
        hit(
            &path,
            key,
            read,
            "it is for other entries or another device",
        )
    }

    /// Stores the vendor binary of built persistent entries for `key` (replacing any),
    /// then evicts past the size bound.
    pub fn put_built(&self, key: &Key, bytes: &[u8]) -> io::Result<()> {
        self.fits(bytes)?;
        self.write(&key.file_name(BUILT), &encode(key, bytes)?)
    }

    /// A binary is kept only if it takes at most a quarter of the store.
    fn fits(&self, bytes: &[u8]) -> io::Result<()> {
        let n = bytes.len() as u64;
        if n > self.max_bytes / 4 || n > MAX_BLOB_BYTES {
            return Err(io::Error::other("too large for the store"));
        }
        Ok(())
    }

    /// Stores `entry` for `key` (replacing any), then evicts past the size bound.
    pub fn put(&self, key: &Key, entry: &Entry) -> io::Result<()> {
        let bytes = encode(key, &serde_json::to_vec(entry)?)?;
        if bytes.len() as u64 > self.max_bytes {
            return Ok(());
        }
        self.write(&key.file_name(ENTRY), &bytes)
    }

    /// Writes one file of the store, then evicts past the size bound.
    fn write(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let dir = self.entries_dir();
        private_dir(&self.dir)?;
        private_dir(&dir)?;
        write_atomically(&dir, name, bytes)?;
        self.evict();
        Ok(())
    }

    /// Every file in the store, oldest first.
    pub fn list(&self) -> io::Result<Vec<Listed>> {
        let mut out: Vec<Listed> = entry_files(&self.entries_dir(), &[ENTRY])?
            .into_iter()
            .map(|(path, bytes, modified)| {
                let entry = match read_entry(&path) {
                    Ok(Some(e)) => Ok(e),
                    Ok(None) => Err("vanished".into()),
                    Err(why) => Err(why),
                };
                Listed {
                    path,
                    bytes,
                    modified,
                    entry,
                }
            })
            .collect();
        out.sort_by_key(|l| l.modified);
        Ok(out)
    }

    /// The stored rewritten binaries: how many, and their bytes.
    pub fn blobs(&self) -> io::Result<(usize, u64)> {
        self.count(BLOB)
    }

    /// The stored binaries of built persistent entries: how many, and their bytes.
    pub fn built(&self) -> io::Result<(usize, u64)> {
        self.count(BUILT)
    }

    fn count(&self, ext: &str) -> io::Result<(usize, u64)> {
        let files = entry_files(&self.entries_dir(), &[ext])?;
        Ok((files.len(), files.iter().map(|f| f.1).sum()))
    }

    /// Removes every entry (and stored binary) of ours; returns how many entries.
    pub fn clear(&self) -> io::Result<usize> {
        let mut n = 0;
        for (path, _, _) in entry_files(&self.entries_dir(), ALL)? {
            let entry = path.extension().is_some_and(|e| e == ENTRY);
            if owned(&path) && fs::remove_file(&path).is_ok() && entry {
                n += 1;
            }
        }
        Ok(n)
    }

    /// Removes the least recently used entries until the store fits its bound, and
    /// temporary files that dead writers left behind.
    fn evict(&self) {
        let Ok(mut files) = entry_files(&self.entries_dir(), ALL) else {
            return;
        };
        files.sort_by_key(|f| f.2);
        let mut total: u64 = files.iter().map(|f| f.1).sum();
        for (path, bytes, _) in files {
            if total <= self.max_bytes {
                break;
            }
            // Another process may have removed it first: then it is gone all the same.
            if fs::remove_file(&path).is_ok() || !path.exists() {
                total = total.saturating_sub(bytes);
            }
        }
        remove_stale_temps(&self.entries_dir());
    }
}

/// The payload `read` from the file at `path` if it is there, whole, ours and for `key`
/// (a hit is a use); otherwise a miss, logged once (`other`: it is for another key).
fn hit<T>(
    path: &Path,
    key: &Key,
    read: Result<Option<(Key, T)>, String>,
    other: &str,
) -> Option<T> {
    match read {
        Ok(Some((k, v))) if &k == key => {
            touch(path);
            Some(v)
        }
        Ok(Some(_)) => {
            miss(path, other);
            None
        }
        Ok(None) => None,
        Err(why) => {
            miss(path, &why);
            None
        }
    }
}

/// Marks a file used now: least recently used goes first.
fn touch(path: &Path) {
    if let Ok(f) = fs::File::open(path) {
        let _ = f.set_modified(SystemTime::now());
    }
}

/// Logs once per file why an entry was not used.
fn miss(path: &Path, why: &str) {
    crate::warn_once!(
        format!("store:{}", path.display()),
        "softpreempt: program store entry {} ignored: {why}",
        path.display()
    );
}

/// The files with one of these extensions in a directory: path, size, modification time.
fn entry_files(dir: &Path, exts: &[&str]) -> io::Result<Vec<(PathBuf, u64, SystemTime)>> {
    let rd = match fs::read_dir(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        r => r?,
    };
    Ok(rd
        .filter_map(|e| {
            let e = e.ok()?;
            let path = e.path();
            if !exts
                .iter()
                .any(|e| path.extension().is_some_and(|x| x == *e))
            {
                return None;
            }
            let m = e.metadata().ok()?;
            Some((path, m.len(), m.modified().ok()?))
        })
        .collect())
}

fn remove_stale_temps(dir: &Path) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let stale = e.file_name().to_string_lossy().starts_with(".tmp-")
            && e.metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age.as_secs() > STALE_TEMP_SECS);
        if stale {
            let _ = fs::remove_file(e.path());
        }
    }
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

fn owned(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.uid() == euid())
}

/// Creates `dir` (mode 0700) if missing; an existing one must be a directory of ours.
fn private_dir(dir: &Path) -> io::Result<()> {
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
            return Ok(());
        }
        Err(e) => return Err(e),
    }
    let m = fs::symlink_metadata(dir)?;
    if !m.is_dir() || m.uid() != euid() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{} is not a directory of this user", dir.display()),
        ));
    }
    Ok(())
}

/// Writes `bytes` as `dir/name` through a temporary file renamed into place.
fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let tmp = dir.join(format!(
        ".tmp-{}-{}-{nanos}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_data()?;
        fs::rename(&tmp, dir.join(name))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// A file of the store: the header line, then `payload` (an entry's JSON, or a binary).
fn encode(key: &Key, payload: &[u8]) -> io::Result<Vec<u8>> {
    let header = Header {
        magic: MAGIC.into(),
        version: FORMAT_VERSION,
        key: key.clone(),
        payload_sha256: crate::core::sliceable::sha256_hex(payload),
    };
    let mut out = serde_json::to_vec(&header)?;
    out.push(b'\n');
    out.extend_from_slice(payload);
    Ok(out)
}

/// Reads one entry: `Ok(None)` if there is no file, `Err(why)` if there is one that
/// cannot be used.
fn read_entry(path: &Path) -> Result<Option<(Key, Entry)>, String> {
    let Some(bytes) = read_owned(path, MAX_ENTRY_BYTES)? else {
        return Ok(None);
    };
    let (key, payload) = decode(&bytes)?;
    let entry: Entry =
        serde_json::from_slice(payload).map_err(|e| format!("corrupt payload ({e})"))?;
    Ok(Some((key, entry)))
}

/// The bytes of a regular file of this user, at most `limit` of them: `Ok(None)` if there
/// is no file, `Err(why)` if there is one that cannot be used.
fn read_owned(path: &Path, limit: u64) -> Result<Option<Vec<u8>>, String> {
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path);
    let file = match file {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot open it ({e})")),
    };
    let m = file.metadata().map_err(|e| e.to_string())?;
    if !m.is_file() {
        return Err("not a regular file".into());
    }
    if m.uid() != euid() {
        return Err(format!("owned by uid {}, not by this user", m.uid()));
    }
    if m.len() > limit {
        return Err("too large".into());
    }
    let mut bytes = Vec::with_capacity(m.len() as usize);
    file.take(limit)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read it ({e})"))?;
    Ok(Some(bytes))
}

/// The key and payload of a file of the store, checked against its header.
fn decode(bytes: &[u8]) -> Result<(Key, &[u8]), String> {
    let nl = bytes
        .iter()
        .position(|&b| b == b'\n')
        .ok_or("truncated (no header line)")?;
    let header: Header =
        serde_json::from_slice(&bytes[..nl]).map_err(|e| format!("corrupt header ({e})"))?;
    if header.magic != MAGIC {
        return Err("not a program store entry".into());
    }
    if header.version != FORMAT_VERSION {
        return Err(format!(
            "format version {} (this build reads {FORMAT_VERSION})",
            header.version
        ));
    }
    let payload = &bytes[nl + 1..];
    if crate::core::sliceable::sha256_hex(payload) != header.payload_sha256 {
        return Err("truncated or corrupt (checksum mismatch)".into());
    }
    Ok((header.key, payload))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> Key {
        Key {
            binary: format!("{n:064x}"),
            device: "PoCL cpu | driver 3.1".into(),
        }
    }

    fn entry(name: &str) -> Entry {
        Entry {
            kernels: vec![
                KernelFacts {
                    name: name.into(),
                    hidden: Some(2),
                    sliceable: Sliceable::Yes { null_local: true },
                    yields: Yields::Yes,
                },
                KernelFacts {
                    name: "other".into(),
                    hidden: None,
                    sliceable: Sliceable::No("reads {get_group_id}".into()),
                    yields: Yields::No("a return before a barrier".into()),
                },
            ],
            recipe: Some(Recipe {
                units: vec![Unit {
                    source: "kernel void k() {}".into(),
                    headers: vec![("h.h".into(), "#define X 1".into())],
                    options: Some("-DN=3".into()),
                }],
                linked: false,
                link_options: None,
            }),
            rewritten_binary: None,
            source: Some(Unit {
                source: "kernel void k() { }".into(),
                headers: Vec::new(),
                options: None,
            }),
        }
    }

    fn store(dir: &Path, max: u64) -> Store {
        Store::at(dir.join("sp"), max)
    }

    #[test]
    fn round_trip_and_private_dir() {
        let t = tempfile::tempdir().unwrap();
        let s = store(t.path(), 1 << 20);
        assert_eq!(s.get(&key(1)), None);
        s.put(&key(1), &entry("k")).unwrap();
        assert_eq!(s.get(&key(1)), Some(entry("k")));
        assert_eq!(s.get(&key(2)), None);
        for d in [t.path().join("sp"), s.entries_dir()] {
            let mode = fs::metadata(&d).unwrap().mode() & 0o777;
            assert_eq!(mode, 0o700, "{}", d.display());
        }
        let f = s.entries_dir().join(key(1).file_name(ENTRY));
        assert_eq!(fs::metadata(f).unwrap().mode() & 0o777, 0o600);
        // Another device: another entry.
        let mut other = key(1);
        other.device = "NVIDIA H100 | driver 550".into();
        assert_eq!(s.get(&other), None);
        assert_eq!(s.clear().unwrap(), 1);
        assert_eq!(s.get(&key(1)), None);
    }

    #[test]
    fn truncated_and_corrupt_entries_are_misses() {
        let t = tempfile::tempdir().unwrap();
        let s = store(t.path(), 1 << 20);
        s.put(&key(1), &entry("k")).unwrap();
        let f = s.entries_dir().join(key(1).file_name(ENTRY));
        let whole = fs::read(&f).unwrap();
        for cut in [0, 1, whole.len() / 3, whole.len() - 1] {
            fs::write(&f, &whole[..cut]).unwrap();
            assert_eq!(s.get(&key(1)), None, "truncated at {cut}");
        }
        // A flipped byte in the payload, with the header intact.
        let mut bad = whole.clone();
        let last = bad.len() - 5;
        bad[last] ^= 0x20;
        fs::write(&f, &bad).unwrap();
        assert_eq!(s.get(&key(1)), None);
        // Random bytes, and an entry of another format version.
        fs::write(&f, b"\x00\xffgarbage\n{}").unwrap();
        assert_eq!(s.get(&key(1)), None);
        let text = String::from_utf8(whole.clone()).unwrap();
        let newer = text.replacen(
            &format!("\"version\":{FORMAT_VERSION}"),
            "\"version\":999",
            1,
        );
        fs::write(&f, newer).unwrap();
        assert_eq!(s.get(&key(1)), None);
        // Rewritten whole again: a hit.
        fs::write(&f, &whole).unwrap();
        assert_eq!(s.get(&key(1)), Some(entry("k")));
    }

    #[test]
    fn rewritten_binaries_round_trip_and_are_checked() {
        let t = tempfile::tempdir().unwrap();
        let s = store(t.path(), 1 << 20);
        let bin = b"poclbin\0 a rewritten program".to_vec();
        let sha = s.put_blob(&bin).unwrap();
        assert_eq!(s.get_blob(&sha), Some(bin.clone()));
        assert_eq!(s.blobs().unwrap(), (1, bin.len() as u64));
        // Truncated or changed: a miss.
        let f = s.entries_dir().join(format!("{sha}.{BLOB}"));
        fs::write(&f, &bin[..5]).unwrap();
        assert_eq!(s.get_blob(&sha), None);
        // Not a digest: never a path.
        assert_eq!(s.get_blob("../../etc/passwd"), None);
        // Cleared with the entries.
        s.put_blob(&bin).unwrap();
        s.put(&key(1), &entry("k")).unwrap();
        assert_eq!(s.clear().unwrap(), 1);
        assert_eq!(s.blobs().unwrap(), (0, 0));
    }

    #[test]
    fn built_entries_round_trip_are_checked_and_evicted() {
        let t = tempfile::tempdir().unwrap();
        let s = store(t.path(), 1 << 20);
        let bin = b"poclbin\0 persistent entries".to_vec();
        assert_eq!(s.get_built(&key(1)), None);
        s.put_built(&key(1), &bin).unwrap();
        assert_eq!(s.get_built(&key(1)), Some(bin.clone()));
        // Another device (or other entries' source): another file.
        assert_eq!(s.get_built(&key(2)), None);
        assert_eq!(s.built().unwrap().0, 1);
        assert_eq!(s.blobs().unwrap().0, 0);
        // Not listed as a program entry.
        assert_eq!(s.list().unwrap().len(), 0);
        // A flipped byte, or a cut: a miss.
        let f = s.entries_dir().join(key(1).file_name(BUILT));
        let whole = fs::read(&f).unwrap();
        let mut bad = whole.clone();
        let last = bad.len() - 3;
        bad[last] ^= 0x20;
        fs::write(&f, &bad).unwrap();
        assert_eq!(s.get_built(&key(1)), None);
        fs::write(&f, &whole[..whole.len() - 1]).unwrap();
        assert_eq!(s.get_built(&key(1)), None);
        // Stored again, whole: a hit; renamed to another key's file: a miss.
        s.put_built(&key(1), &bin).unwrap();
        assert_eq!(s.get_built(&key(1)), Some(bin.clone()));
        fs::rename(&f, s.entries_dir().join(key(2).file_name(BUILT))).unwrap();
        assert_eq!(s.get_built(&key(2)), None);
        // Too large for the store's bound: refused.
        let small = store(&t.path().join("small"), 64);
        assert!(small.put_built(&key(1), &[0u8; 32]).is_err());
        // Evicted as the least recently used, and cleared with the entries.
        let one = encode(&key(0), &bin).unwrap().len() as u64;
        let s = store(&t.path().join("lru"), one * 4 + one / 2);
        s.put_built(&key(1), &bin).unwrap();
        let old = SystemTime::now() - std::time::Duration::from_secs(100);
        let f = s.entries_dir().join(key(1).file_name(BUILT));
        fs::File::open(&f).unwrap().set_modified(old).unwrap();
        for i in 2..6u8 {
            s.put_built(&key(i), &bin).unwrap();
        }
        assert_eq!(s.get_built(&key(1)), None, "the least recently used goes");
        assert_eq!(s.get_built(&key(5)), Some(bin.clone()));
        s.clear().unwrap();
        assert_eq!(s.built().unwrap(), (0, 0));
    }

    #[test]
    fn entries_of_an_older_build_still_read() {
        // Written before `yields` and `source` existed: read, with those unknown.
        let t = tempfile::tempdir().unwrap();
        let s = store(t.path(), 1 << 20);
        let old = r#"{"kernels":[{"name":"k","hidden":null,"sliceable":{"Yes":{"null_local":true}}}],"recipe":null}"#;
        let dir = s.entries_dir();
        private_dir(&s.dir).unwrap();
        private_dir(&dir).unwrap();
        let bytes = encode(&key(1), old.as_bytes()).unwrap();
        write_atomically(&dir, &key(1).file_name(ENTRY), &bytes).unwrap();
        let e = s.get(&key(1)).expect("an older entry reads");
        assert_eq!(e.kernels[0].yields, Yields::Unknown);
        assert_eq!(e.source, None);
        assert_eq!(e.kernels[0].sliceable, Sliceable::Yes { null_local: true });
    }

    #[test]
    fn entry_under_another_key_file_is_a_miss() {
        let t = tempfile::tempdir().unwrap();
        let s = store(t.path(), 1 << 20);
        s.put(&key(1), &entry("k")).unwrap();
        let dir = s.entries_dir();
        fs::rename(
            dir.join(key(1).file_name(ENTRY)),
            dir.join(key(2).file_name(ENTRY)),
        )
        .unwrap();
        assert_eq!(s.get(&key(2)), None);
    }

    #[test]
    fn symlinked_entry_is_not_followed() {
        let t = tempfile::tempdir().unwrap();
        let s = store(t.path(), 1 << 20);
        s.put(&key(1), &entry("k")).unwrap();
        let dir = s.entries_dir();
        let real = dir.join(key(1).file_name(ENTRY));
        let moved = t.path().join("elsewhere.json");
        fs::rename(&real, &moved).unwrap();
        std::os::unix::fs::symlink(&moved, &real).unwrap();
        assert_eq!(s.get(&key(1)), None);
    }

    #[test]
    fn full_store_evicts_least_recently_used() {
        let t = tempfile::tempdir().unwrap();
        let one = encode(&key(0), &serde_json::to_vec(&entry("k")).unwrap())
            .unwrap()
            .len() as u64;
        let s = store(t.path(), one * 3 + one / 2);
        let old = SystemTime::now() - std::time::Duration::from_secs(100);
        for i in 0..3u8 {
            s.put(&key(i), &entry("k")).unwrap();
            let f = fs::File::open(s.entries_dir().join(key(i).file_name(ENTRY))).unwrap();
            f.set_modified(old + std::time::Duration::from_secs(i as u64))
                .unwrap();
        }
        // Key 0 is used now: key 1 is then the least recently used.
        assert!(s.get(&key(0)).is_some());
        s.put(&key(3), &entry("k")).unwrap();
        assert!(s.get(&key(1)).is_none(), "the least recently used goes");
        for i in [0, 2, 3] {
            assert!(s.get(&key(i)).is_some(), "key {i} kept");
        }
        let total: u64 = s.list().unwrap().iter().map(|l| l.bytes).sum();
        assert!(total <= one * 3 + one / 2);
    }

    #[test]
    fn read_only_store_is_a_quiet_failure() {
        // A read-only file system (root writes through mode bits, not through this).
        let s = Store::at(PathBuf::from("/proc/softpreempt-store-test"), 1 << 20);
        assert!(s.put(&key(1), &entry("k")).is_err());
        assert_eq!(s.get(&key(1)), None);
        assert_eq!(s.list().unwrap().len(), 0);
        if euid() == 0 {
            return;
        }
        // A directory without write permission.
        let t = tempfile::tempdir().unwrap();
        let s = store(t.path(), 1 << 20);
        s.put(&key(1), &entry("k")).unwrap();
        fs::set_permissions(s.entries_dir(), fs::Permissions::from_mode(0o500)).unwrap();
        assert!(s.put(&key(2), &entry("k")).is_err());
        assert_eq!(s.get(&key(1)), Some(entry("k")));
        fs::set_permissions(s.entries_dir(), fs::Permissions::from_mode(0o700)).unwrap();
    }

    #[test]
    fn read_only_entry_still_reads_and_is_replaced() {
        let t = tempfile::tempdir().unwrap();
        let s = store(t.path(), 1 << 20);
        s.put(&key(1), &entry("k")).unwrap();
        let f = s.entries_dir().join(key(1).file_name(ENTRY));
        fs::set_permissions(&f, fs::Permissions::from_mode(0o400)).unwrap();
        assert_eq!(s.get(&key(1)), Some(entry("k")));
        // Replacing renames over it: the directory's mode decides, not the file's.
        s.put(&key(1), &entry("k2")).unwrap();
        assert_eq!(s.get(&key(1)), Some(entry("k2")));
    }

    #[test]
    fn foreign_owner_is_ignored() {
        if euid() != 0 {
            // Only root can give a file away; the check is the same `uid` comparison.
            return;
        }
        let t = tempfile::tempdir().unwrap();
        let s = store(t.path(), 1 << 20);
        s.put(&key(1), &entry("k")).unwrap();
        let f = s.entries_dir().join(key(1).file_name(ENTRY));
        std::os::unix::fs::chown(&f, Some(4242), Some(4242)).unwrap();
        assert_eq!(s.get(&key(1)), None);
        // Not ours to clear either.
        assert_eq!(s.clear().unwrap(), 0);
        // A store directory of another user is not written into.
        let t2 = tempfile::tempdir().unwrap();
        let s2 = store(t2.path(), 1 << 20);
        fs::create_dir_all(s2.entries_dir()).unwrap();
        std::os::unix::fs::chown(s2.entries_dir(), Some(4242), Some(4242)).unwrap();
        assert!(s2.put(&key(1), &entry("k")).is_err());
    }

    #[test]
    fn concurrent_writers_leave_whole_entries() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("sp");
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let dir = dir.clone();
                std::thread::spawn(move || {
                    let s = Store::at(dir, 1 << 20);
                    for j in 0..40u8 {
                        let e = entry(&format!("k{}", (i + j as usize) % 3));
                        s.put(&key(j % 4), &e).unwrap();
                        if let Some(got) = s.get(&key((j + 1) % 4)) {
                            assert_eq!(got.kernels.len(), 2);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let s = Store::at(dir, 1 << 20);
        let listed = s.list().unwrap();
        assert_eq!(listed.len(), 4);
        assert!(listed.iter().all(|l| l.entry.is_ok()));
        // No temporary file is left behind.
        let names: Vec<_> = fs::read_dir(s.entries_dir())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 4, "{names:?}");
    }

    use std::os::unix::fs::PermissionsExt;
}
