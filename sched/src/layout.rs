//! The shared segment's layout: a `#[repr(C)]` header followed by fixed-size client slots.
//!
//! Every field is an atomic, so no process ever forms a reference to non-atomic data that
//! another process may write. Values read from here are untrusted: readers range-check them.
//! The table of offsets is in `docs/design-sched.md`; the const asserts below pin it.

use crate::priority::LEVELS;
use crate::sync::{AtomicU32, AtomicU64, Ordering};

/// `"SPRM"` little-endian. Stored last, with Release ordering, when the segment is ready.
pub const MAGIC: u32 = u32::from_le_bytes(*b"SPRM");
/// Bumped on any incompatible layout or protocol change.
pub const VERSION: u32 = 2;
/// Bytes of header before slot 0.
pub const HEADER_SIZE: usize = 1024;
/// Bytes per client slot.
pub const SLOT_SIZE: usize = 512;
/// Upper bound on slots: summary masks are `MASK_WORDS` x 64 bits.
pub const MAX_SLOTS: usize = 256;
/// Words per summary bitmask.
pub const MASK_WORDS: usize = MAX_SLOTS / 64;
/// Bytes reserved for the device key in the header.
pub const KEY_BYTES: usize = 128;
/// Bytes for the executable name and the queue label in a slot.
pub const NAME_BYTES: usize = 32;
/// Upper bound accepted for `max_inflight`.
pub const MAX_INFLIGHT_LIMIT: u32 = 64;
/// Upper bound accepted for `hp_linger` (60 s).
pub const MAX_LINGER_NS: u64 = 60_000_000_000;
/// Upper bound accepted for the min-share period ("one lower slice in N").
pub const MAX_SHARE_EVERY: u32 = 1_000_000;
/// Shortest lease a segment records (leases, `Header::lease_ns`).
pub const MIN_LEASE_NS: u64 = 1_000_000;
/// Longest lease a segment records.
pub const MAX_LEASE_NS: u64 = 60_000_000_000;
/// `Slot::yield_bound_ns` of a client with a claim on the device that cannot yield.
pub const CANNOT_YIELD: u64 = u64::MAX;
/// Buckets of the yield-latency histogram (`Slot::yield_hist`): bucket 0 counts yields
/// under 2 µs, bucket `b` those in `[2^b, 2^(b+1))` µs, the last one everything longer.
pub const YIELD_HIST_BUCKETS: usize = 16;

/// Slot states (`Slot::state`).
pub const SLOT_FREE: u32 = 0;
/// A process holds the slot's lock and is filling it in.
pub const SLOT_CLAIMING: u32 = 1;
/// Owned by a live client.
pub const SLOT_ACTIVE: u32 = 2;
/// Free again, after its owner died and another process reclaimed it.
pub const SLOT_RECLAIMED: u32 = 3;

/// Total segment size for `slots` client slots.
pub const fn segment_size(slots: usize) -> usize {
    HEADER_SIZE + slots * SLOT_SIZE
}

/// Byte offset of slot `i`; its first byte is also the byte its owner's OFD lock covers.
pub const fn slot_offset(i: usize) -> usize {
    HEADER_SIZE + i * SLOT_SIZE
}

/// A per-level bitmask over slot indices.
pub type LevelMasks = [[AtomicU64; MASK_WORDS]; LEVELS];

/// The segment header. Policy parameters are fixed by the creator so that every process
/// arbitrates the device the same way.
#[repr(C)]
pub struct Header {
    /// [`MAGIC`] once published; 0 while the creator initialises. Also a futex word.
    pub magic: AtomicU32,
    /// [`VERSION`].
    pub version: AtomicU32,
    /// [`HEADER_SIZE`].
    pub header_size: AtomicU32,
    /// [`SLOT_SIZE`].
    pub slot_size: AtomicU32,
    /// Number of client slots, 1..=[`MAX_SLOTS`].
    pub slot_count: AtomicU32,
    /// Effective uid of the creator.
    pub creator_uid: AtomicU32,
    /// `segment_size(slot_count)`.
    pub total_size: AtomicU64,
    /// Slices a client may have granted and not completed.
    pub max_inflight: AtomicU32,
    /// Min share: a lower level gets one slice in every N grants; 0 = off.
    pub min_share_every: AtomicU32,
    /// How long a client's demand stays raised after it goes idle.
    pub hp_linger_ns: AtomicU64,
    /// CLOCK_REALTIME ns at creation (for status output).
    pub created_realtime_ns: AtomicU64,
    /// Length of the device key in bytes.
    pub key_len: AtomicU32,
    _pad0: AtomicU32,
    /// The device key, NUL padded.
    pub key: [AtomicU64; KEY_BYTES / 8],
    /// Futex word: bumped by whoever changes state that may unblock a waiter.
    pub generation: AtomicU32,
    _pad1: [AtomicU32; 15],
    /// Slots with demand (work queued), per level.
    pub demand: LevelMasks,
    /// Slots that went idle but whose demand lingers until `Slot::linger_until_ns`.
    pub linger: LevelMasks,
    /// Slots registered, per level.
    pub registered: LevelMasks,
    /// Slots blocked in `acquire`, per level (so wakers skip the syscall when nobody waits).
    pub waiting: LevelMasks,
    /// Highest virtual time (slices granted) seen per level; a client joining the round
    /// robin starts here so it cannot claim a burst of catch-up slices.
    pub vclock: [AtomicU64; LEVELS],
    /// Grants issued on this device.
    pub total_grants: AtomicU64,
    /// `total_grants` at the last min-share grant.
    pub last_share_grant: AtomicU64,
    /// Slots reclaimed from dead processes.
    pub reclaims: AtomicU64,
    /// CLOCK_MONOTONIC ns at which the latest client stopped holding the device for its
    /// level (its demand dropped, or its linger ends then), for the hand-back gap (taken
    /// from the padding: the layout and its version are unchanged).
    pub released_ns: AtomicU64,
    /// Bumped whenever a client raises demand anew or takes a grant: a client whose own
    /// such events account for every bump while its piece ran had the device to itself,
    /// so the piece's host-observed time is its own (from the padding, as `released_ns`).
    pub activity: AtomicU64,
    /// Futex word of the yield handshake: bumped by a higher client that asked lower
    /// clients to yield; every process's watcher sleeps on it (layout version 2, as are the
    /// fields down to `handshake_waiting`).
    pub yield_generation: AtomicU32,
    /// Futex word a higher client waits on in the handshake: bumped by a lower client that
    /// left the device while someone waits (`handshake_waiting`).
    pub leave_generation: AtomicU32,
    /// How long a client may show no progress before its on-device claim and its place in
    /// the round robin lapse (ns; the creator's, clamped to `MIN_LEASE_NS..=MAX_LEASE_NS`).
    pub lease_ns: AtomicU64,
    /// Slots with a launch on the device (`Slot::on_device > 0`), per level.
    pub on_device: LevelMasks,
    /// Slots waiting in the handshake for lower clients to leave the device.
    pub handshake_waiting: [AtomicU64; MASK_WORDS],
    /// Memory clients (one per process and device that allocated device memory), per
    /// level. Kept apart from `registered` so that they never count as schedulable
    /// clients (from the padding, as `released_ns`; after the handshake's fields).
    pub mem_clients: LevelMasks,
    /// `CL_DEVICE_GLOBAL_MEM_SIZE` as the latest allocating process saw it, for status
    /// (0: none yet).
    pub mem_device_bytes: AtomicU64,
    /// Allocations refused by the memory policy on this device, per level (they outlive
    /// the clients that made them).
    pub mem_refusals: [AtomicU64; LEVELS],
    _pad2: [AtomicU64; 6],
}

/// One client slot. Written by its owner, except for reclaim (done under the slot's lock).
#[repr(C)]
pub struct Slot {
    /// `SLOT_FREE`, `SLOT_CLAIMING`, `SLOT_ACTIVE` or `SLOT_RECLAIMED`.
    pub state: AtomicU32,
    /// Priority packed as `level << 8 | number`.
    pub rank: AtomicU32,
    /// Owner pid.
    pub pid: AtomicU32,
    /// Slices granted and not yet completed.
    pub inflight: AtomicU32,
    /// Owner's start time (clock ticks after boot, /proc/PID/stat field 22).
    pub start_time: AtomicU64,
    /// Bumped at every claim, so a status reader can tell owners apart.
    pub incarnation: AtomicU64,
    /// Virtual time of the round robin: device time used (µs), plus one per grant.
    pub vtime: AtomicU64,
    /// CLOCK_MONOTONIC ns until which this client's lingering demand holds.
    pub linger_until_ns: AtomicU64,
    /// CLOCK_MONOTONIC ns of the last grant, completion, demand or idle.
    pub last_activity_ns: AtomicU64,
    /// Grants obtained.
    pub grants: AtomicU64,
    /// Of which, grants given by the min-share rule.
    pub share_grants: AtomicU64,
    /// Slices reported done.
    pub slices: AtomicU64,
    /// Times `acquire` had to wait.
    pub yields: AtomicU64,
    /// Total ns spent waiting in `acquire`.
    pub wait_ns: AtomicU64,
    /// Total ns of slice time reported with `complete`.
    pub busy_ns: AtomicU64,
    /// Owner uid.
    pub uid: AtomicU32,
    _pad0: AtomicU32,
    /// Executable name, NUL padded.
    pub exe: [AtomicU64; NAME_BYTES / 8],
    /// Free-form queue label, NUL padded.
    pub label: [AtomicU64; NAME_BYTES / 8],
    /// Most lower-priority slices in flight when this client submitted work (taken from
    /// the padding: the layout and its version are unchanged).
    pub behind_max: AtomicU64,
    /// Grants obtained after waiting for a higher priority that then let go (hand-backs;
    /// these four come from the padding, as `behind_max`).
    pub handbacks: AtomicU64,
    /// Summed gap from the release to the grant of those, ns.
    pub handback_ns: AtomicU64,
    /// Longest such gap, ns.
    pub handback_max_ns: AtomicU64,
    /// Mean length of this client's recent pieces (decayed, ns): how long a higher
    /// priority may wait behind one of them.
    pub piece_ns: AtomicU64,
    /// Live on-device claims (yielding launches on the device); owner-written. The fields
    /// down to `yield_hist` are layout version 2's.
    pub on_device: AtomicU32,
    /// Yield-request epoch addressed to this client: bumped by higher clients that want
    /// the device while it is on it.
    pub yield_epoch: AtomicU32,
    /// How long this client's live claims need to yield (the max of them, ns), or
    /// `CANNOT_YIELD`; meaningful while `on_device > 0`.
    pub yield_bound_ns: AtomicU64,
    /// CLOCK_MONOTONIC ns of the latest yield request addressed to this client.
    pub yield_request_ns: AtomicU64,
    /// CLOCK_MONOTONIC ns of this client's latest sign of life (grant, completion, demand,
    /// idle, device enter or leave, watcher heartbeat): its leases hold until
    /// `progress_ns + lease_ns`.
    pub progress_ns: AtomicU64,
    /// Launches that left the device because of a yield request.
    pub yields_done: AtomicU64,
    /// On-device claims that could not yield.
    pub cannot_yield: AtomicU64,
    /// Handshakes in which this client waited for lower clients to leave the device.
    pub hs_waits: AtomicU64,
    /// Their summed wait, ns.
    pub hs_wait_ns: AtomicU64,
    /// Their longest wait, ns.
    pub hs_wait_max_ns: AtomicU64,
    /// Of those, waits that ended at the bound with a lower client still on the device.
    pub hs_expired: AtomicU64,
    /// Lower on-device claims this client did not wait for because their lease lapsed.
    pub hs_lapsed: AtomicU64,
    /// Yield latency (request to off the device) histogram, see `YIELD_HIST_BUCKETS`.
    pub yield_hist: [AtomicU32; YIELD_HIST_BUCKETS],
    _pad1: [AtomicU64; 14],
    /// Device memory held by this memory client's live objects, bytes (the last four
    /// fields come from the padding; see `memory.rs` for the reservation protocol).
    pub mem_bytes: AtomicU64,
    /// Live objects counted in `mem_bytes`.
    pub mem_objects: AtomicU64,
    /// Largest `mem_bytes` seen.
    pub mem_peak: AtomicU64,
    /// Allocations of this client refused by the memory policy.
    pub mem_refusals: AtomicU64,
}

#[cfg(not(loom))]
const _: () = {
    assert!(std::mem::size_of::<Header>() == HEADER_SIZE);
    assert!(std::mem::size_of::<Slot>() == SLOT_SIZE);
    assert!(std::mem::offset_of!(Header, generation) == 192);
    assert!(std::mem::offset_of!(Header, demand) == 256);
    assert!(std::mem::offset_of!(Header, vclock) == 640);
    assert!(std::mem::offset_of!(Slot, exe) == 112);
    assert!(std::mem::offset_of!(Header, yield_generation) == 704);
    assert!(std::mem::offset_of!(Header, lease_ns) == 712);
    assert!(std::mem::offset_of!(Header, on_device) == 720);
    assert!(std::mem::offset_of!(Header, handshake_waiting) == 816);
    assert!(std::mem::offset_of!(Slot, piece_ns) == 208);
    assert!(std::mem::offset_of!(Slot, on_device) == 216);
    assert!(std::mem::offset_of!(Slot, progress_ns) == 240);
    assert!(std::mem::offset_of!(Slot, yield_hist) == 304);
    assert!(std::mem::offset_of!(Slot, _pad1) == 368);
    assert!(std::mem::offset_of!(Header, mem_clients) == 848);
    assert!(std::mem::offset_of!(Header, mem_device_bytes) == 944);
    assert!(std::mem::offset_of!(Slot, mem_bytes) == 480);
};

fn zeroed_array<T: Default, const N: usize>() -> [T; N] {
    std::array::from_fn(|_| T::default())
}

fn zeroed_masks() -> LevelMasks {
    std::array::from_fn(|_| zeroed_array())
}

impl Header {
    /// A zeroed header on the heap (tests and loom models; real ones live in the mapping).
    #[allow(dead_code)]
    pub(crate) fn new_boxed() -> Box<Header> {
        Box::new(Header {
            magic: Default::default(),
            version: Default::default(),
            header_size: Default::default(),
            slot_size: Default::default(),
            slot_count: Default::default(),
            creator_uid: Default::default(),
            total_size: Default::default(),
            max_inflight: Default::default(),
            min_share_every: Default::default(),
            hp_linger_ns: Default::default(),
            created_realtime_ns: Default::default(),
            key_len: Default::default(),
            _pad0: Default::default(),
            key: zeroed_array(),
            generation: Default::default(),
            _pad1: zeroed_array(),
            demand: zeroed_masks(),
            linger: zeroed_masks(),
            registered: zeroed_masks(),
            waiting: zeroed_masks(),
            vclock: zeroed_array(),
            total_grants: Default::default(),
            last_share_grant: Default::default(),
            reclaims: Default::default(),
            released_ns: Default::default(),
            activity: Default::default(),
            yield_generation: Default::default(),
            leave_generation: Default::default(),
            lease_ns: Default::default(),
            on_device: zeroed_masks(),
            handshake_waiting: zeroed_array(),
            mem_clients: zeroed_masks(),
            mem_device_bytes: Default::default(),
            mem_refusals: zeroed_array(),
            _pad2: zeroed_array(),
        })
    }

    /// The device key stored in the header (lossy UTF-8, length range-checked).
    pub(crate) fn key_string(&self) -> String {
        let len = (self.key_len.load(Ordering::Relaxed) as usize).min(KEY_BYTES);
        let mut bytes = read_bytes(&self.key);
        bytes.truncate(len);
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

impl Slot {
    /// A zeroed slot on the heap (tests and loom models).
    #[allow(dead_code)]
    pub(crate) fn new_zeroed() -> Slot {
        Slot {
            state: Default::default(),
            rank: Default::default(),
            pid: Default::default(),
            inflight: Default::default(),
            start_time: Default::default(),
            incarnation: Default::default(),
            vtime: Default::default(),
            linger_until_ns: Default::default(),
            last_activity_ns: Default::default(),
            grants: Default::default(),
            share_grants: Default::default(),
            slices: Default::default(),
            yields: Default::default(),
            wait_ns: Default::default(),
            busy_ns: Default::default(),
            uid: Default::default(),
            _pad0: Default::default(),
            exe: zeroed_array(),
            label: zeroed_array(),
            behind_max: Default::default(),
            handbacks: Default::default(),
            handback_ns: Default::default(),
            handback_max_ns: Default::default(),
            piece_ns: Default::default(),
            on_device: Default::default(),
            yield_epoch: Default::default(),
            yield_bound_ns: Default::default(),
            yield_request_ns: Default::default(),
            progress_ns: Default::default(),
            yields_done: Default::default(),
            cannot_yield: Default::default(),
            hs_waits: Default::default(),
            hs_wait_ns: Default::default(),
            hs_wait_max_ns: Default::default(),
            hs_expired: Default::default(),
            hs_lapsed: Default::default(),
            yield_hist: zeroed_array(),
            _pad1: zeroed_array(),
            mem_bytes: Default::default(),
            mem_objects: Default::default(),
            mem_peak: Default::default(),
            mem_refusals: Default::default(),
        }
    }
}

/// Stores `src` (truncated to the field, NUL padded) into a byte field made of u64 words.
pub(crate) fn write_bytes(dst: &[AtomicU64], src: &[u8]) {
    for (i, word) in dst.iter().enumerate() {
        let mut b = [0u8; 8];
        for (j, byte) in b.iter_mut().enumerate() {
            if let Some(v) = src.get(i * 8 + j) {
                *byte = *v;
            }
        }
        word.store(u64::from_le_bytes(b), Ordering::Relaxed);
    }
}

/// Reads a NUL-padded byte field.
pub(crate) fn read_bytes(src: &[AtomicU64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(src.len() * 8);
    for w in src {
        out.extend_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
    }
    out
}

/// Reads a NUL-padded name field as a string (lossy, stops at the first NUL).
pub(crate) fn read_name(src: &[AtomicU64]) -> String {
    let bytes = read_bytes(src);
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// Truncates `s` to at most `max` bytes on a char boundary.
pub(crate) fn truncate_utf8(s: &str, max: usize) -> &[u8] {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s.as_bytes()[..end]
}
