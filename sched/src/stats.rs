//! Per-client statistics and read-only inspection of segments (for `softpreempt status`).

use std::path::{Path, PathBuf};

use crate::error::SchedError;
use crate::handshake::hist_quantile;
use crate::layout::{read_name, SLOT_ACTIVE, SLOT_CLAIMING, SLOT_RECLAIMED, YIELD_HIST_BUCKETS};
use crate::liveness;
use crate::policy::View;
use crate::priority::{Priority, LEVELS};
use crate::segment::Segment;
use crate::sync::Ordering;

/// What a client is doing, as another process sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientState {
    /// Slices granted and not yet completed.
    Running,
    /// Blocked in `acquire`.
    Waiting,
    /// A yielding launch on the device (an on-device claim), no grant in flight.
    OnDevice,
    /// Has demand, nothing in flight, not waiting (between slices).
    Ready,
    /// Idle, but its demand still lingers (`hp_linger`).
    Lingering,
    /// Registered, no demand.
    Idle,
    /// Being registered.
    Claiming,
    /// Its process died; another process reclaimed the slot.
    Reclaimed,
}

impl ClientState {
    /// Lower-case name for status output.
    pub fn as_str(self) -> &'static str {
        match self {
            ClientState::Running => "running",
            ClientState::Waiting => "waiting",
            ClientState::OnDevice => "on-device",
            ClientState::Ready => "ready",
            ClientState::Lingering => "lingering",
            ClientState::Idle => "idle",
            ClientState::Claiming => "claiming",
            ClientState::Reclaimed => "reclaimed",
        }
    }
}

/// One client's statistics. Values come from shared memory: informative, not trusted.
#[derive(Clone, Debug)]
pub struct ClientStats {
    /// Slot index.
    pub slot: usize,
    /// Owner pid.
    pub pid: u32,
    /// Owner start time (clock ticks after boot).
    pub start_time: u64,
    /// Owner uid.
    pub uid: u32,
    /// Priority (`None` if the slot holds a corrupt value).
    pub priority: Option<Priority>,
    /// Executable name.
    pub exe: String,
    /// Queue label.
    pub label: String,
    /// Current state.
    pub state: ClientState,
    /// Demand raised.
    pub demand: bool,
    /// Slices granted and not completed.
    pub inflight: u32,
    /// Grants obtained.
    pub grants: u64,
    /// Of which by the min-share rule.
    pub share_grants: u64,
    /// Slices reported done.
    pub slices: u64,
    /// Times `acquire` had to wait.
    pub yields: u64,
    /// Total ns waited in `acquire`.
    pub wait_ns: u64,
    /// Total ns of slice time reported.
    pub busy_ns: u64,
    /// Most lower-priority slices in flight when this client submitted work.
    pub behind_max: u64,
    /// Grants that followed a higher priority's release (hand-backs).
    pub handbacks: u64,
    /// Their summed gap from the release to the grant, ns.
    pub handback_ns: u64,
    /// Their longest gap, ns.
    pub handback_max_ns: u64,
    /// Mean length of this client's recent pieces (decayed), ns: how long a higher
    /// priority may wait behind one of them, its preemption granularity.
    pub piece_ns: u64,
    /// Live on-device claims (yielding launches on the device).
    pub on_device: u32,
    /// Yield-request epoch addressed to this client (bumped by higher clients).
    pub yield_epoch: u32,
    /// Launches that left the device because of a yield request.
    pub yields_done: u64,
    /// Median yield latency (request to off the device), as the upper edge of its log2
    /// bucket, ns; `None` before the first measured yield.
    pub yield_p50_ns: Option<u64>,
    /// 99th percentile of the same.
    pub yield_p99_ns: Option<u64>,
    /// Yield-latency histogram: bucket 0 counts yields under 2 µs, bucket `b` those in
    /// `[2^b, 2^(b+1))` µs, the last one everything longer.
    pub yield_hist: [u64; YIELD_HIST_BUCKETS],
    /// On-device claims this client made that could not yield.
    pub cannot_yield: u64,
    /// Handshakes in which this client waited for lower clients to leave the device.
    pub hs_waits: u64,
    /// Their summed wait, ns.
    pub hs_wait_ns: u64,
    /// Their longest wait, ns.
    pub hs_wait_max_ns: u64,
    /// Of those, waits that ended at the bound with a lower client still on the device.
    pub hs_expired: u64,
    /// Lower on-device claims not waited for because their lease had lapsed.
    pub hs_lapsed: u64,
    /// CLOCK_MONOTONIC ns of the last sign of life (leases).
    pub progress_ns: u64,
    /// Whether this is a process's memory client (no queue: it only holds memory).
    pub memory: bool,
    /// Device memory held by the client's live objects, bytes (memory clients only).
    pub mem_bytes: u64,
    /// Live objects counted in `mem_bytes`.
    pub mem_objects: u64,
    /// Largest `mem_bytes` seen.
    pub mem_peak: u64,
    /// Allocations refused by the memory policy.
    pub mem_refusals: u64,
    /// CLOCK_MONOTONIC ns of the last activity.
    pub last_activity_ns: u64,
    /// Claims of this slot so far.
    pub incarnation: u64,
    /// Whether the owner process (pid + start time) still runs; `None` when not checked.
    pub process_alive: Option<bool>,
    /// Whether the slot's OFD lock is held (the owner is alive); `None` when not checked.
    pub lock_held: Option<bool>,
}

/// A whole segment, read without registering.
#[derive(Clone, Debug)]
pub struct SegmentSnapshot {
    /// File path.
    pub path: PathBuf,
    /// The device key.
    pub device_key: String,
    /// File owner uid.
    pub owner_uid: u32,
    /// Number of slots.
    pub slot_count: usize,
    /// Segment-wide `max_inflight`.
    pub max_inflight: u32,
    /// Segment-wide min share, as "one grant in N" (0 = off).
    pub min_share_every: u32,
    /// Segment-wide linger, ns.
    pub hp_linger_ns: u64,
    /// Segment-wide lease, ns.
    pub lease_ns: u64,
    /// The yield generation (bumped by each handshake that asked a lower client to yield).
    pub yield_generation: u32,
    /// Grants issued on this device.
    pub total_grants: u64,
    /// Slots reclaimed from dead processes.
    pub reclaims: u64,
    /// CLOCK_REALTIME ns at creation.
    pub created_realtime_ns: u64,
    /// `CL_DEVICE_GLOBAL_MEM_SIZE` as the latest allocating process saw it (0: unknown).
    pub mem_device_bytes: u64,
    /// Allocations refused by the memory policy on this device, per level (index
    /// `Level::index`: low, normal, high).
    pub mem_refusals: [u64; LEVELS],
    /// Every slot that is or was in use (active, claiming or reclaimed).
    pub clients: Vec<ClientStats>,
}

impl SegmentSnapshot {
    /// Device memory held per level (index `Level::index`) by the memory clients whose
    /// owner is alive (a dead one's bytes are returned when its slot is reclaimed, and
    /// are not counted here even before).
    pub fn mem_bytes_by_level(&self) -> [u64; LEVELS] {
        let mut out = [0u64; LEVELS];
        for c in &self.clients {
            let alive = c.state != ClientState::Reclaimed && c.lock_held != Some(false);
            if let (true, true, Some(p)) = (c.memory, alive, c.priority) {
                out[p.level.index()] = out[p.level.index()].saturating_add(c.mem_bytes);
            }
        }
        out
    }
}

/// Reads slot `i` (any state). `seg` enables the lock and process checks.
pub(crate) fn read_client(v: &View<'_>, i: usize, seg: Option<&Segment>, now: u64) -> ClientStats {
    let s = &v.slots[i];
    let state_word = s.state.load(Ordering::Acquire);
    let priority = Priority::from_rank(s.rank.load(Ordering::Relaxed));
    let inflight = s.inflight.load(Ordering::Relaxed);
    let (mut demand, mut linger, mut waiting) = (false, false, false);
    for (d, l, w, _) in v.level_bits(i) {
        demand |= d;
        linger |= l;
        waiting |= w;
    }
    let state = match state_word {
        SLOT_RECLAIMED => ClientState::Reclaimed,
        SLOT_CLAIMING => ClientState::Claiming,
        _ if waiting => ClientState::Waiting,
        _ if inflight > 0 => ClientState::Running,
        _ if s.on_device.load(Ordering::Relaxed) > 0 => ClientState::OnDevice,
        _ if demand => ClientState::Ready,
        _ if linger && s.linger_until_ns.load(Ordering::Relaxed) > now => ClientState::Lingering,
        _ => ClientState::Idle,
    };
    let pid = s.pid.load(Ordering::Relaxed);
    let start_time = s.start_time.load(Ordering::Relaxed);
    let active = matches!(state_word, SLOT_ACTIVE | SLOT_CLAIMING);
    let hist: [u64; YIELD_HIST_BUCKETS] =
        std::array::from_fn(|b| s.yield_hist[b].load(Ordering::Relaxed) as u64);
    ClientStats {
        slot: i,
        pid,
        start_time,
        uid: s.uid.load(Ordering::Relaxed),
        priority,
        exe: read_name(&s.exe),
        label: read_name(&s.label),
        state,
        demand,
        inflight,
        grants: s.grants.load(Ordering::Relaxed),
        share_grants: s.share_grants.load(Ordering::Relaxed),
        slices: s.slices.load(Ordering::Relaxed),
        yields: s.yields.load(Ordering::Relaxed),
        wait_ns: s.wait_ns.load(Ordering::Relaxed),
        busy_ns: s.busy_ns.load(Ordering::Relaxed),
        behind_max: s.behind_max.load(Ordering::Relaxed),
        handbacks: s.handbacks.load(Ordering::Relaxed),
        handback_ns: s.handback_ns.load(Ordering::Relaxed),
        handback_max_ns: s.handback_max_ns.load(Ordering::Relaxed),
        piece_ns: s.piece_ns.load(Ordering::Relaxed),
        on_device: s.on_device.load(Ordering::Relaxed),
        yield_epoch: s.yield_epoch.load(Ordering::Relaxed),
        yields_done: s.yields_done.load(Ordering::Relaxed),
        yield_p50_ns: hist_quantile(&hist, 0.5),
        yield_p99_ns: hist_quantile(&hist, 0.99),
        yield_hist: hist,
        cannot_yield: s.cannot_yield.load(Ordering::Relaxed),
        hs_waits: s.hs_waits.load(Ordering::Relaxed),
        hs_wait_ns: s.hs_wait_ns.load(Ordering::Relaxed),
        hs_wait_max_ns: s.hs_wait_max_ns.load(Ordering::Relaxed),
        hs_expired: s.hs_expired.load(Ordering::Relaxed),
        hs_lapsed: s.hs_lapsed.load(Ordering::Relaxed),
        progress_ns: s.progress_ns.load(Ordering::Relaxed),
        memory: v.is_memory_client(i),
        mem_bytes: s.mem_bytes.load(Ordering::Relaxed),
        mem_objects: s.mem_objects.load(Ordering::Relaxed),
        mem_peak: s.mem_peak.load(Ordering::Relaxed),
        mem_refusals: s.mem_refusals.load(Ordering::Relaxed),
        last_activity_ns: s.last_activity_ns.load(Ordering::Relaxed),
        incarnation: s.incarnation.load(Ordering::Relaxed),
        process_alive: seg.map(|_| liveness::process_alive(pid, start_time)),
        lock_held: seg.and_then(|seg| {
            if active {
                liveness::is_locked(&seg.file, crate::layout::slot_offset(i) as u64).ok()
            } else {
                Some(false)
            }
        }),
    }
}

pub(crate) fn snapshot(seg: &Segment) -> SegmentSnapshot {
    let v = seg.view();
    let h = v.h;
    let now = liveness::now_ns();
    let clients = (0..seg.slot_count())
        .filter(|&i| {
            matches!(
                v.slots[i].state.load(Ordering::Acquire),
                SLOT_ACTIVE | SLOT_CLAIMING | SLOT_RECLAIMED
            )
        })
        .map(|i| read_client(&v, i, Some(seg), now))
        .collect();
    SegmentSnapshot {
        path: seg.path.clone(),
        device_key: h.key_string(),
        owner_uid: seg.owner_uid,
        slot_count: seg.slot_count(),
        max_inflight: seg.params.max_inflight,
        min_share_every: seg.params.share_every,
        hp_linger_ns: seg.params.linger_ns,
        lease_ns: seg.params.lease_ns,
        yield_generation: h.yield_generation.load(Ordering::Relaxed),
        total_grants: h.total_grants.load(Ordering::Relaxed),
        reclaims: h.reclaims.load(Ordering::Relaxed),
        created_realtime_ns: h.created_realtime_ns.load(Ordering::Relaxed),
        mem_device_bytes: h.mem_device_bytes.load(Ordering::Relaxed),
        mem_refusals: std::array::from_fn(|l| h.mem_refusals[l].load(Ordering::Relaxed)),
        clients,
    }
}

/// Opens the segment at `path` read-only, without registering, and reads every client.
/// Dead owners show as `lock_held == Some(false)` until someone reclaims them.
pub fn inspect(path: &Path) -> Result<SegmentSnapshot, SchedError> {
    let seg = Segment::open_read_only(path)?;
    Ok(snapshot(&seg))
}
