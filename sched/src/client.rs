//! The public arbiter: [`Arbiter`] (one per device and process), [`Client`] (one per
//! command queue), and [`Grant`] (permission to submit one slice).

use std::fs::File;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::SchedError;
use crate::futex;
use crate::layout::{slot_offset, truncate_utf8, write_bytes, NAME_BYTES};
use crate::linger::LingerModel;
use crate::liveness;
use crate::memory::{judge, MemoryPolicy, MemoryRefusal};
use crate::options::ArbiterOptions;
use crate::policy::{Decision, Lower, View};
use crate::priority::Priority;
use crate::segment::Segment;
use crate::stats::{read_client, snapshot, ClientStats, SegmentSnapshot};
use crate::sync::Ordering;

mod device;

pub use device::{DeviceClaim, Handshake, LeftDevice};

/// State shared by an [`Arbiter`] and its clients.
struct Shared {
    seg: Segment,
    /// Serialises reclaim inside this process: every reclaim here locks through the same
    /// open file description (`seg.file`), which would not exclude our own threads.
    reclaim: Mutex<()>,
    liveness_interval_ns: u64,
    /// CLOCK_MONOTONIC ns of the last liveness sweep made outside `acquire`.
    last_sweep_ns: std::sync::atomic::AtomicU64,
}

impl Shared {
    #[inline]
    fn view(&self) -> View<'_> {
        self.seg.view()
    }

    fn wake(&self) {
        futex::wake_all(&self.seg.header().generation);
    }

    fn notify(&self) {
        if self.view().notify() {
            self.wake();
        }
    }

    /// Reclaims every slot whose owner died (its lock can be taken). Returns how many.
    fn reclaim_dead(&self, skip: Option<usize>) -> usize {
        let _g = self.reclaim.lock().unwrap_or_else(|e| e.into_inner());
        let v = self.view();
        let mut n = 0;
        for i in 0..self.seg.slot_count() {
            if Some(i) == skip {
                continue;
            }
            let stray = !v.occupied(i) && v.stray(i);
            if !v.occupied(i) && !stray {
                continue;
            }
            let off = slot_offset(i) as u64;
            if let Ok(true) = liveness::try_lock(&self.seg.file, off) {
                // Nobody owns a slot whose lock we hold. A free slot still showing demand
                // (or an unknown state) was overwritten: its bits would block lower
                // priorities for ever, so they are cleared like a dead owner's.
                if !v.occupied(i) && v.stray(i) {
                    tracing::warn!(
                        slot = i,
                        path = %self.seg.path.display(),
                        "clearing an unowned slot that holds stray values"
                    );
                    v.clear_slot(i, crate::layout::SLOT_FREE);
                    n += 1;
                }
                // We hold the dead owner's lock, so nobody can claim the slot meanwhile.
                if v.occupied(i) {
                    let s = &v.slots[i];
                    tracing::warn!(
                        slot = i,
                        pid = s.pid.load(Ordering::Relaxed),
                        inflight = s.inflight.load(Ordering::Relaxed),
                        path = %self.seg.path.display(),
                        "reclaiming the slot of a dead client"
                    );
                    v.clear_slot(i, crate::layout::SLOT_RECLAIMED);
                    n += 1;
                }
                let _ = liveness::unlock(&self.seg.file, off);
            }
        }
        if n > 0 {
            self.notify();
            // A reclaimed slot's claims are off the device: a handshake may be waiting.
            let v = self.view();
            v.notify_leave();
            futex::wake_all(&v.h.leave_generation);
        }
        n
    }

    /// `reclaim_dead(Some(me))` at most once per liveness interval across this process's
    /// clients, for paths that must not pay a sweep each time. Returns slots reclaimed.
    fn sweep_if_due(&self, me: usize) -> usize {
        let now = liveness::now_ns();
        let last = self.last_sweep_ns.load(Ordering::Relaxed);
        if now.saturating_sub(last) < self.liveness_interval_ns
            || self
                .last_sweep_ns
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return 0;
        }
        self.reclaim_dead(Some(me))
    }
}

/// The segment-wide policy parameters in force (as recorded by the segment's creator).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PolicyParams {
    /// Slices a client may have granted and not completed.
    pub max_inflight: u32,
    /// Min share as "one grant in N" (0 = strict priority).
    pub min_share_every: u32,
    /// Linger after idle.
    pub hp_linger: Duration,
}

/// One device's arbiter in this process. Cheap to share: clients keep the segment alive.
pub struct Arbiter {
    shared: Arc<Shared>,
}

impl Arbiter {
    /// Opens (or creates) the segment for `device_key`.
    pub fn open(device_key: &str, opts: &ArbiterOptions) -> Result<Arbiter, SchedError> {
        let seg = Segment::open_or_create(device_key, opts)?;
        Ok(Arbiter {
            shared: Arc::new(Shared {
                seg,
                reclaim: Mutex::new(()),
                liveness_interval_ns: opts.liveness_interval.as_nanos().min(u64::MAX as u128)
                    as u64,
                last_sweep_ns: Default::default(),
            }),
        })
    }

    /// Path of the segment file.
    pub fn path(&self) -> &Path {
        &self.shared.seg.path
    }

    /// The policy recorded in the segment.
    pub fn policy(&self) -> PolicyParams {
        let p = self.shared.seg.params;
        PolicyParams {
            max_inflight: p.max_inflight,
            min_share_every: p.share_every,
            hp_linger: Duration::from_nanos(p.linger_ns),
        }
    }

    /// Registers a client (one per command queue). Each client gets its own slot and its
    /// own open file description holding the slot's OFD lock, so several clients of one
    /// process are arbitrated like separate processes.
    pub fn register(&self, info: ClientInfo) -> Result<Client, SchedError> {
        let sh = &self.shared;
        let fd = sh.seg.reopen()?;
        let v = sh.view();
        let n = sh.seg.slot_count();
        let me = std::process::id();
        let start_time = liveness::process_start_time(me).unwrap_or(0);
        let exe = info.exe.clone().unwrap_or_else(default_exe);
        // Dead clients' slots are reclaimed now, not only when a slot is needed: a process
        // that exits without releasing its queues leaves its slots registered, and every
        // live client's per-command look at lower or same-level peers walked them all (a
        // lone top-priority queue on PoCL paid about 40 ns a command with about thirty
        // such slots of earlier runs, `docs/benchmarks.md`, session 47). One lock attempt
        // per occupied slot, once per registration.
        sh.reclaim_dead(None);
        for pass in 0..2 {
            for i in 0..n {
                // First pass: free slots only; second pass: also slots of dead owners.
                if pass == 0 && v.occupied(i) {
                    continue;
                }
                let off = slot_offset(i) as u64;
                match liveness::try_lock(&fd, off) {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(e) => return Err(SchedError::io("lock", &sh.seg.path, e)),
                }
                let _g = sh.reclaim.lock().unwrap_or_else(|e| e.into_inner());
                if v.occupied(i) {
                    // We hold its lock, so its owner is dead: reclaim it for ourselves.
                    tracing::warn!(slot = i, "reclaiming the slot of a dead client");
                    v.clear_slot(i, crate::layout::SLOT_RECLAIMED);
                }
                v.claim_as(i, info.priority, info.memory, |s| {
                    s.pid.store(me, Ordering::Relaxed);
                    s.start_time.store(start_time, Ordering::Relaxed);
                    s.uid.store(liveness::euid(), Ordering::Relaxed);
                    let now = liveness::now_ns();
                    s.last_activity_ns.store(now, Ordering::Relaxed);
                    s.progress_ns.store(now, Ordering::Relaxed);
                    write_bytes(&s.exe, truncate_utf8(&exe, NAME_BYTES));
                    write_bytes(&s.label, truncate_utf8(&info.label, NAME_BYTES));
                });
                drop(_g);
                tracing::debug!(slot = i, priority = %info.priority, label = %info.label, "registered arbiter client");
                let worth = info.linger_worth.unwrap_or(DEFAULT_LINGER_WORTH);
                return Ok(Client {
                    device: device::ClaimOwner::new(self.shared.clone(), i, info.priority),
                    own_activity: Default::default(),
                    lower_idle_seen_ns: Default::default(),
                    linger: Mutex::new(Linger {
                        model: LingerModel::default(),
                        cap_ns: sh.seg.params.linger_ns,
                        worth_ns: worth.as_nanos().min(u64::MAX as u128) as u64,
                        current_ns: sh.seg.params.linger_ns,
                    }),
                    shared: self.shared.clone(),
                    _lock: fd,
                    slot: i,
                    pri: info.priority,
                    incarnation: v.slots[i].incarnation.load(Ordering::Relaxed),
                });
            }
        }
        Err(SchedError::Full { slots: n as u32 })
    }

    /// Reclaims the slots of dead clients now (waiters also do this lazily).
    pub fn reclaim_dead(&self) -> usize {
        self.shared.reclaim_dead(None)
    }

    /// Every client of this device, with statistics.
    pub fn snapshot(&self) -> SegmentSnapshot {
        snapshot(&self.shared.seg)
    }
}

fn default_exe() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default()
}

/// Who is registering.
#[derive(Clone, Debug, Default)]
pub struct ClientInfo {
    /// Priority of this client (queue).
    pub priority: Priority,
    /// Executable name (first 32 bytes kept); default: this process's executable.
    pub exe: Option<String>,
    /// Free-form queue label (first 32 bytes kept).
    pub label: String,
    /// What catching a return within the linger is worth to this client: about how long
    /// its work would otherwise wait behind a lower client's queued pieces (twice the
    /// slice target). Default: 500 µs. See [`Client::linger`].
    pub linger_worth: Option<Duration>,
    /// A memory client (see [`ClientInfo::for_memory`]) rather than a queue's.
    pub memory: bool,
}

/// [`ClientInfo::linger_worth`] when unset: twice the default slice target of 250 µs.
const DEFAULT_LINGER_WORTH: Duration = Duration::from_micros(500);

impl ClientInfo {
    /// A client with `priority`, default executable name and no label.
    pub fn new(priority: Priority) -> Self {
        ClientInfo {
            priority,
            ..Default::default()
        }
    }

    /// Sets the queue label.
    pub fn with_label(mut self, label: &str) -> Self {
        self.label = label.to_string();
        self
    }

    /// Sets the executable name.
    pub fn with_exe(mut self, exe: &str) -> Self {
        self.exe = Some(exe.to_string());
        self
    }

    /// Makes this the process's memory client for the device: it holds the device
    /// memory of the process's live objects ([`Client::charge_memory`]) and is never
    /// seen by the scheduler (it neither registers a priority nor takes grants).
    pub fn for_memory(mut self) -> Self {
        self.memory = true;
        self
    }

    /// Sets [`ClientInfo::linger_worth`].
    pub fn with_linger_worth(mut self, worth: Duration) -> Self {
        self.linger_worth = Some(worth);
        self
    }
}

/// A client's learned linger (see `linger.rs`).
struct Linger {
    model: LingerModel,
    /// The segment's `hp_linger`: the longest linger.
    cap_ns: u64,
    worth_ns: u64,
    /// The model's choice, recomputed when a gap is learned (completions only read it).
    current_ns: u64,
}

impl Linger {
    fn now_ns(&self) -> u64 {
        self.current_ns
    }

    fn returned(&mut self, now: u64) {
        let before = self.model.samples();
        self.model.returned(now);
        if self.model.samples() != before {
            self.current_ns = self.model.linger_ns(self.cap_ns, self.worth_ns);
        }
    }
}

/// A registered client: one slot in the segment, held (through its OFD lock) until drop.
///
/// `Client` is `Send + Sync`: the submitter thread may acquire while another thread (an
/// event callback) completes.
pub struct Client {
    shared: Arc<Shared>,
    /// Holds the OFD lock on our slot's byte for our lifetime; closing it releases the lock.
    _lock: File,
    slot: usize,
    pri: Priority,
    /// The slot's incarnation after our claim: if it changes, someone else wrote the slot.
    incarnation: u64,
    /// New demands and grants of this client (its part of `Header::activity`).
    own_activity: std::sync::atomic::AtomicU64,
    /// The latest CLOCK_MONOTONIC time at which [`Client::lower_priority_active`] read the
    /// clock and found every lower client idle (0: never).
    lower_idle_seen_ns: std::sync::atomic::AtomicU64,
    /// Idle gaps seen, and the linger they call for. Touched when demand is raised anew,
    /// at idle and at completions: never on a grant decision.
    linger: Mutex<Linger>,
    /// Live on-device claims (the yield handshake, `client/device.rs`).
    device: Arc<device::ClaimOwner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("slot", &self.slot)
            .field("priority", &self.pri)
            .finish()
    }
}

impl Client {
    /// Slot index in the segment.
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// This client's priority.
    pub fn priority(&self) -> Priority {
        self.pri
    }

    /// Raises demand: work is queued and the next slice is ready to submit. While raised,
    /// it blocks every lower priority and takes part in the round robin of its priority.
    /// Idempotent; `acquire` calls it implicitly.
    pub fn announce_demand(&self) {
        let now = liveness::now_ns();
        if self.shared.view().announce(self.slot, self.pri, now) {
            self.own_activity.fetch_add(1, Ordering::Relaxed);
            self.lock_linger().returned(now);
        }
    }

    fn lock_linger(&self) -> std::sync::MutexGuard<'_, Linger> {
        self.linger.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Drops demand (queue empty). It lingers for [`Client::linger`] after now or after
    /// the last completion, so a bursty high-priority client keeps the device between the
    /// commands of a burst.
    pub fn idle(&self) {
        let now = liveness::now_ns();
        let linger = {
            let mut l = self.lock_linger();
            l.model.released(now);
            l.now_ns()
        };
        self.shared.view().idle(self.slot, self.pri, now, linger);
        self.shared.notify();
    }

    /// How long this client lingers after it goes idle now: learned from its idle gaps
    /// (the time from going idle to raising demand again) so that it covers the gaps
    /// inside its bursts and not the long ones between them, never more than the
    /// segment's `hp_linger`, which is also what it uses until it has seen a few gaps.
    pub fn linger(&self) -> Duration {
        Duration::from_nanos(self.lock_linger().now_ns())
    }

    /// Idle gaps this client has learned from.
    pub fn linger_samples(&self) -> u32 {
        self.lock_linger().model.samples()
    }

    fn decide(&self, v: &View<'_>) -> Decision {
        let d = v.try_grant(self.slot, self.pri, liveness::now_ns());
        if let Decision::Granted { notify, .. } = d {
            self.own_activity.fetch_add(1, Ordering::Relaxed);
            if notify {
                self.shared.notify();
            }
        }
        d
    }

    fn grant(&self, share: bool) -> Grant<'_> {
        self.note_behind();
        Grant {
            client: self,
            token: Some(GrantToken { share }),
        }
    }

    /// `Err(Damaged)` when the segment or this client's slot was changed under us (garbage
    /// written over it, the file truncated, the slot taken by someone else). Waiting on
    /// such a table could last for ever (it may show demand nobody will withdraw), so the
    /// caller stops arbitrating. A few relaxed loads; no system call.
    pub fn intact(&self) -> Result<(), SchedError> {
        let seg = &self.shared.seg;
        let damaged = |what| {
            Err(SchedError::Damaged {
                path: seg.path.clone(),
                what,
            })
        };
        if let Some(what) = seg.damage() {
            return damaged(what);
        }
        let s = &seg.slots()[self.slot];
        if s.state.load(Ordering::Acquire) != crate::layout::SLOT_ACTIVE
            || s.pid.load(Ordering::Relaxed) != std::process::id()
            || s.incarnation.load(Ordering::Relaxed) != self.incarnation
        {
            return damaged("this client's slot was overwritten or cut off");
        }
        Ok(())
    }

    /// One non-blocking grant attempt for the next slice.
    pub fn try_acquire(&self) -> Option<Grant<'_>> {
        let v = self.shared.view();
        if !v.has_demand(self.slot, self.pri) {
            self.announce_demand();
        }
        match self.decide(&v) {
            Decision::Granted { share, .. } => Some(self.grant(share)),
            _ => None,
        }
    }

    /// Waits (futex, bounded by `timeout`) for a grant for the next slice. While blocked,
    /// checks every `liveness_interval` whether clients in the way died, and reclaims them.
    pub fn acquire(&self, timeout: Duration) -> Result<Grant<'_>, SchedError> {
        self.intact()?;
        if let Some(g) = self.try_acquire() {
            return Ok(g);
        }
        let sh = &*self.shared;
        let v = sh.view();
        let s = &v.slots[self.slot];
        let start = liveness::now_ns();
        let deadline = start.saturating_add(timeout.as_nanos().min(u64::MAX as u128) as u64);
        let mut next_check = start.saturating_add(sh.liveness_interval_ns);
        s.yields.fetch_add(1, Ordering::Relaxed);
        v.set_waiting(self.slot, self.pri, true);
        let result = loop {
            // Generation first, decision second: a change after the decision bumps it.
            let g = v.generation();
            let until = match self.decide(&v) {
                Decision::Granted { share, .. } => {
                    v.note_handback(self.slot, start, liveness::now_ns());
                    break Ok(share);
                }
                Decision::Blocked { until_ns } => until_ns,
                Decision::InflightFull => None,
            };
            let now = liveness::now_ns();
            if now >= deadline {
                break Err(SchedError::Timeout);
            }
            if now >= next_check {
                if let Err(e) = self.intact() {
                    break Err(e);
                }
                sh.reclaim_dead(Some(self.slot));
                next_check = now.saturating_add(sh.liveness_interval_ns);
                continue;
            }
            let wake_at = deadline.min(next_check).min(until.unwrap_or(u64::MAX));
            futex::wait(
                &v.h.generation,
                g,
                Duration::from_nanos(wake_at.saturating_sub(now).max(1)),
            );
        };
        v.set_waiting(self.slot, self.pri, false);
        s.wait_ns
            .fetch_add(liveness::now_ns().saturating_sub(start), Ordering::Relaxed);
        match result {
            Ok(share) => Ok(self.grant(share)),
            Err(SchedError::Timeout) => {
                tracing::debug!(slot = self.slot, "timed out waiting for a slice grant");
                Err(SchedError::Timeout)
            }
            Err(e) => Err(e),
        }
    }

    /// Reports a detached grant's slice done, with its measured duration.
    pub fn complete_token(&self, token: GrantToken, duration_ns: u64) {
        let _ = token.share;
        let now = liveness::now_ns();
        let linger = {
            let mut l = self.lock_linger();
            l.model.completed(now);
            l.now_ns()
        };
        let v = self.shared.view();
        if v.complete(self.slot, self.pri, now, duration_ns, linger) {
            self.shared.notify();
        }
    }

    /// Records how many lower-priority slices are in flight as this client submits work
    /// (the statistic `behind_max`), and returns it. Grants record it themselves; call it
    /// for work submitted without a grant.
    pub fn note_behind(&self) -> u32 {
        self.shared.view().note_behind(self.slot, self.pri)
    }

    /// Is a strictly higher priority registered on this device (even idle)? The caller
    /// slices launches only then.
    ///
    /// A higher client that died stays registered until someone reclaims its slot, and
    /// nobody waits for a client without demand: so while the answer is yes, dead peers
    /// are swept once per liveness interval here, or a crashed high-priority process
    /// would keep every lower one slicing for ever.
    #[inline]
    pub fn higher_priority_registered(&self) -> bool {
        let sh = &*self.shared;
        if !sh.view().higher_registered(self.slot, self.pri) {
            return false;
        }
        sh.sweep_if_due(self.slot) == 0 || sh.view().higher_registered(self.slot, self.pri)
    }

    /// Is a strictly higher priority registered that wanted the device within `window`
    /// (see `View::higher_active` in the policy)?
    pub fn higher_priority_active(&self, window: Duration) -> bool {
        let w = window.as_nanos().min(u64::MAX as u128) as u64;
        self.shared
            .view()
            .higher_active(self.slot, self.pri, liveness::now_ns(), w)
    }

    /// [`Client::higher_priority_active`], for a client that sends its work straight to
    /// the driver, with no grant, while every higher one is idle: then its own activity
    /// is recorded as of now (at most every eighth of `window`), so the higher one's next
    /// command finds it active ([`Client::lower_priority_active`]) and raises demand,
    /// which this client sees at its next command.
    pub fn higher_active_or_note(&self, window: Duration) -> bool {
        let w = window.as_nanos().min(u64::MAX as u128) as u64;
        let v = self.shared.view();
        let now = liveness::now_ns();
        if v.higher_active(self.slot, self.pri, now, w) {
            return true;
        }
        v.note_activity(self.slot, now, w / 8);
        false
    }

    /// Is a strictly lower priority registered on this device (even idle)? A client that
    /// submits without grants announces its demand only then, so lower ones yield to it.
    pub fn lower_priority_registered(&self) -> bool {
        self.shared.view().lower_registered(self.slot, self.pri)
    }

    /// Is a strictly lower priority busy on this device: work queued, slices in flight,
    /// or active within `window` (see `View::lower_state`)? A client that submits
    /// without grants raises demand for its commands only then: a lower client that is
    /// merely registered has nothing to yield (issue 24).
    ///
    /// Called before every command a higher client sends straight to the vendor, so it
    /// reads no clock where it need not: with no lower client registered, and while
    /// every lower client's latest activity is older than one already seen to lie outside
    /// the window (time only moves on, so it still does).
    #[inline]
    pub fn lower_priority_active(&self, window: Duration) -> bool {
        let w = window.as_nanos().min(u64::MAX as u128) as u64;
        match self.shared.view().lower_state(self.slot, self.pri) {
            Lower::None => false,
            Lower::Busy => true,
            Lower::Idle { last_activity_ns } => {
                let seen = self.lower_idle_seen_ns.load(Ordering::Relaxed);
                if last_activity_ns < seen.saturating_sub(w) {
                    return false;
                }
                let now = liveness::now_ns();
                let active = last_activity_ns >= now.saturating_sub(w);
                if !active {
                    self.lower_idle_seen_ns.fetch_max(now, Ordering::Relaxed);
                }
                active
            }
        }
    }

    /// Is another client of the same or higher priority registered (so slicing helps the
    /// round robin too)?
    pub fn contended(&self) -> bool {
        self.shared.view().contended(self.slot, self.pri)
    }

    /// Marks the start of a piece, for [`Client::share_since`].
    pub fn activity_mark(&self) -> ActivityMark {
        let v = self.shared.view();
        ActivityMark {
            total: v.activity(),
            own: self.own_activity.load(Ordering::Relaxed),
            others: v.others_busy(self.slot),
        }
    }

    /// How many clients, this one included, shared the device since `mark`, as an
    /// estimate: 1 when it had the device to itself (nobody else had demand or slices in
    /// flight then or now, and every new demand or grant on the device since was its
    /// own), else one more than the mean number of others busy at either end (at least
    /// one). A piece's host-observed time includes whatever ran beside it: divided by
    /// this, it estimates the piece's own device time, which is what a timing model must
    /// learn (fed with shared times, it learns a kernel dearer than it is and cuts ever
    /// smaller slices).
    pub fn share_since(&self, mark: &ActivityMark) -> f64 {
        let v = self.shared.view();
        let others_now = v.others_busy(self.slot);
        let events = v.activity().wrapping_sub(mark.total);
        let mine = self
            .own_activity
            .load(Ordering::Relaxed)
            .wrapping_sub(mark.own);
        if mark.others == 0 && others_now == 0 && events <= mine {
            return 1.0;
        }
        1.0 + ((mark.others + others_now) as f64 / 2.0).max(1.0)
    }

    /// Cheap check between slices: would a higher priority (demand or linger) block our
    /// next grant right now?
    #[inline]
    pub fn should_yield(&self) -> bool {
        self.shared
            .view()
            .blocked_by_higher(self.slot, self.pri, liveness::now_ns())
            .is_some()
    }

    /// Counts an allocation of `bytes` by this memory client, or refuses it under
    /// `policy` (then nothing stays counted). See `memory.rs` for the protocol. Alone
    /// on the device this is a few atomics; a refusal first reclaims dead clients'
    /// slots (their bytes go with them) and judges once more.
    pub fn charge_memory(&self, bytes: u64, policy: &MemoryPolicy) -> Result<(), MemoryRefusal> {
        let v = self.shared.view();
        v.note_device_bytes(policy.device_bytes);
        let level = self.pri.level;
        if !policy.enabled() {
            // Only counted: no sums, no fence.
            v.mem_add(self.slot, bytes);
            v.mem_admitted(self.slot);
            return Ok(());
        }
        let usage = v.mem_reserve(self.slot, bytes);
        let verdict = match judge(policy, level, &usage, bytes) {
            Err(_) if self.shared.reclaim_dead(Some(self.slot)) > 0 => {
                judge(policy, level, &v.mem_usage(), bytes)
            }
            other => other,
        };
        match verdict {
            Ok(()) => v.mem_admitted(self.slot),
            Err(_) => v.mem_refused(self.slot, level, bytes),
        }
        verdict
    }

    /// An object counted by [`Client::charge_memory`] was released.
    pub fn release_memory(&self, bytes: u64) {
        self.shared.view().mem_release(self.slot, bytes);
    }

    /// Device memory of every level on this device (live memory clients), bytes.
    pub fn memory_usage(&self) -> [u64; crate::priority::LEVELS] {
        self.shared.view().mem_usage()
    }

    /// This client's statistics.
    pub fn stats(&self) -> ClientStats {
        read_client(&self.shared.view(), self.slot, None, liveness::now_ns())
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        // Claims still out must not write the slot once it is free for someone else.
        self.device.close();
        self.shared.view().release(self.slot);
        self.shared.notify();
        tracing::debug!(slot = self.slot, "unregistered arbiter client");
        // `_lock` closes after this, releasing the slot's OFD lock.
    }
}

/// Permission to submit one slice. Complete it with [`Grant::complete`]; dropping it
/// completes it with a zero duration, so a grant is never leaked.
#[must_use = "a grant must be completed when its slice is done"]
pub struct Grant<'c> {
    client: &'c Client,
    token: Option<GrantToken>,
}

impl Grant<'_> {
    /// Was this grant given by the min-share rule (a lower level let through)?
    pub fn is_share(&self) -> bool {
        self.token.as_ref().is_some_and(|t| t.share)
    }

    /// Reports the slice done, with its measured duration in ns.
    pub fn complete(mut self, duration_ns: u64) {
        if let Some(t) = self.token.take() {
            self.client.complete_token(t, duration_ns);
        }
    }

    /// Detaches the grant from the client's borrow, e.g. to complete it from an event
    /// callback; pass the token to [`Client::complete_token`].
    pub fn into_token(mut self) -> GrantToken {
        self.token
            .take()
            .expect("grant token present until consumed")
    }
}

impl Drop for Grant<'_> {
    fn drop(&mut self) {
        if let Some(t) = self.token.take() {
            self.client.complete_token(t, 0);
        }
    }
}

/// The device's activity when a piece was submitted (see [`Client::share_since`]).
#[derive(Clone, Copy, Debug)]
pub struct ActivityMark {
    total: u64,
    own: u64,
    /// Other clients busy at the mark.
    others: u32,
}

/// A detached grant. Not `Clone`: it completes exactly once.
#[must_use = "a grant token must be passed to Client::complete_token"]
#[derive(Debug)]
pub struct GrantToken {
    share: bool,
}

impl GrantToken {
    /// Was this grant given by the min-share rule?
    pub fn is_share(&self) -> bool {
        self.share
    }
}
