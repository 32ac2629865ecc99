//! The submitter thread of a managed queue: takes commands from the FIFO in order, asks
//! the arbiter for a grant per kernel piece (consecutive short launches share one, up to
//! the budget), cuts launches into slices of whole waves, and keeps at most the budget (the
//! slice target) of predicted device time queued behind the running piece.

use once_cell::sync::Lazy;
use softpreempt_sched::{
    GrantToken, NdRange, SliceEfficiency, SlicePlanner, TimingModel, TimingTable,
};
use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::deferred::{complete_on, status_of, Deferred};
use super::failing;
use super::models::{ClassModels, LaunchTime};
use super::profiles::{self, ProfileKey};
use super::{monotonic_ns, Command, Managed, Work};
use crate::config;
use crate::core::cl::*;
use crate::trace::profile::Launch as Profiled;

type ReleaseFn = unsafe extern "C" fn(*mut c_void) -> cl_int;

/// A vendor object retained while a command waits in software; released on drop.
pub struct Retained {
    h: *mut c_void,
    release: Option<ReleaseFn>,
}

// SAFETY: a vendor object reference; OpenCL objects may be released on any thread.
unsafe impl Send for Retained {}

impl Retained {
    /// Retains `h` with `retain` now; `release` undoes it when dropped.
    pub fn new(h: *mut c_void, retain: Option<ReleaseFn>, release: Option<ReleaseFn>) -> Retained {
        if let Some(f) = retain {
            // SAFETY: a live vendor object of the kind this retain function takes.
            unsafe { f(h) };
        }
        Retained { h, release }
    }

    pub fn handle(&self) -> *mut c_void {
        self.h
    }
}

impl Drop for Retained {
    fn drop(&mut self) {
        if let Some(f) = self.release {
            // SAFETY: releasing the reference taken in `new`.
            unsafe { f(self.h) };
        }
    }
}

/// A kernel launch waiting in the FIFO. The kernel is a private clone made at enqueue
/// time, so the application may change the arguments right after enqueueing.
pub struct Launch {
    pub kernel: Retained,
    pub work_dim: cl_uint,
    /// `None` when the application passed NULL.
    pub offset: Option<[usize; 3]>,
    pub global: [usize; 3],
    /// `None` when the application passed NULL (then each slice is launched with NULL
    /// too, and `unit` only guides where slices are cut).
    pub local: Option<[usize; 3]>,
    pub unit: [usize; 3],
    /// Slices pass `unit` as their local size (the application's own, or with a NULL
    /// local size on a CPU device one chosen for them: `launch::null_local_unit`); the
    /// launch sent whole keeps the application's `local`.
    pub unit_is_local: bool,
    /// May be cut into slices (rule 5, an in-order queue, no pending dependencies).
    pub sliceable: bool,
    /// The timing model's key.
    pub key: ModelKey,
    /// The kernel class's copies of its timing models (`models.rs`).
    pub models: Arc<ClassModels>,
    /// The kernel's name, for traces and profiles.
    pub name: std::sync::Arc<str>,
    /// Work-groups the device runs at once (one wave), an estimate (`launch.rs`).
    pub wave_wgs: u64,
    /// Its yielding form, when it has one (`yielding.rs`): then it runs as a yielding
    /// launch, not in slices.
    pub yielding: Option<super::yielding::YieldLaunch>,
    /// The device is a GPU: its driver time-slices between contexts by itself.
    pub gpu: bool,
    /// It carries a vendor event of its own, not a barrier's (`completion::own_event`).
    pub own_event: bool,
    /// A rewritten kernel's hidden geometry argument (`core::rewritten`): its index and
    /// the whole launch's value (on the snapshot already), which each cut piece sets with
    /// its own first group.
    pub geometry: Option<(cl_uint, [u8; softpreempt_transform::GEOMETRY_ARG_SIZE])>,
}

/// How soon a GPU driver hands the device to another process's context by itself, from
/// a launch with an event of its own (NVIDIA time-slices contexts at millisecond
/// granularity: a bare co-run delays a 0.45 ms HP kernel by about 1-1.5 ms at p99 on an
/// H100, issue 12; without an event it hands over in about 0.2 ms, see `completion`). A
/// kernel whose one wave lasts longer cannot be preempted sooner by slicing, which would
/// then only hold the low priority back (rule 8): such launches go to the vendor whole,
/// holding no grant, and the driver shares the device as it would without the layer.
pub(super) const GPU_HANDOVER_NS: u64 = 2_000_000;

/// A timing model's key: the kernel's class (`KernelClass::id`) and the device (its inner
/// handle).
pub type ModelKey = (usize, usize);

/// The bit that marks a key of [`ENTRY_MODELS`] as a kernel's second yielding entry's
/// (`softpreempt_transform::YieldKernel::alt_entry`): class ids count up from 1 and never
/// reach it.
const ALT_ENTRY: usize = 1 << (usize::BITS - 1);

/// The [`ENTRY_MODELS`] key of the second entry of the kernel whose key is `key`.
pub(super) fn alt_entry_key(key: ModelKey) -> ModelKey {
    (key.0 | ALT_ENTRY, key.1)
}

/// The kernel's own key for an entry's key (of either entry).
pub(super) fn kernel_key(key: &ModelKey) -> ModelKey {
    (key.0 & !ALT_ENTRY, key.1)
}

/// Per-(kernel, device) timing models of the application's kernel (its pieces and whole
/// launches), shared by every queue of the process: what a launch sent straight to the
/// vendor would cost, so the only model the launch path reads (`launch::predicted_ns`).
static MODELS: Lazy<Mutex<TimingTable<ModelKey>>> = Lazy::new(|| Mutex::new(TimingTable::new()));

/// The same for the kernel's yielding entry, learned from its unasked runs. Kept apart
/// from [`MODELS`] because the two forms can run at very different speeds: PoCL ran a
/// 2-D kernel's flat entry in 6-7 ms and the kernel itself in 18-20 ms, so one model fed
/// by both soon predicted the kernel at the entry's speed, and its 20 ms launches went
/// straight to the vendor as if they were shorter than a piece (session 46).
static ENTRY_MODELS: Lazy<Mutex<TimingTable<ModelKey>>> =
    Lazy::new(|| Mutex::new(TimingTable::new()));

/// Which of a kernel's two forms an observation timed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Form {
    /// The application's kernel, whole or a piece of it ([`MODELS`]).
    Kernel,
    /// Its yielding entry ([`ENTRY_MODELS`]).
    Entry,
}

/// Per-(kernel, device) judgement of whether slicing at the target pays (rule 8).
static EFFICIENCY: Lazy<Mutex<std::collections::HashMap<ModelKey, SliceEfficiency>>> =
    Lazy::new(Default::default);

/// The latest retired piece that taught a kernel's model: what the next piece of the same
/// kernel is planned from (`adapted_target`, `slow_start_floor`).
#[derive(Clone, Copy)]
struct Recent {
    key: ModelKey,
    /// Its waves (of the slicing unit) and work-groups.
    waves: f64,
    work_groups: u64,
    /// Its own device time.
    own_ns: u64,
    /// The rows of a profiled geometry it covered (profile, first row, rows).
    rows: Option<(ProfileKey, u64, u64)>,
}

fn efficiency(
) -> std::sync::MutexGuard<'static, std::collections::HashMap<ModelKey, SliceEfficiency>> {
    EFFICIENCY.lock().unwrap_or_else(|e| e.into_inner())
}

pub(super) fn model(key: &ModelKey) -> TimingModel {
    MODELS.lock().unwrap_or_else(|e| e.into_inner()).get(key)
}

/// The model a yielding run of the kernel is sized by: its entry's, once an unasked run
/// has taught it; until then the kernel's own (the first runs' estimate of a wave, as
/// before the two were kept apart).
fn entry_model(key: &ModelKey) -> TimingModel {
    let entry = ENTRY_MODELS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(key);
    if entry.fit().is_some() {
        entry
    } else {
        model(&kernel_key(key))
    }
}

/// What a yielding run of `waves` waves (of its entry's resident groups) takes by the
/// entry's own model, once that rests on more than the entry's first run (which may be
/// cold: PoCL's first flat run of a 2-D kernel took 212 ms, its next ones 55-70); `None`
/// before.
pub(super) fn entry_predicted(key: &ModelKey, waves: u64) -> Option<u64> {
    let entry = ENTRY_MODELS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(key);
    entry.warm().then(|| entry.predict(waves)).flatten()
}

/// Records that `units` of a launch of the class whose models are `models` took `ns` on
/// the key's device, run in `form`: in the process-wide table of that form, and for the
/// kernel's own form in the class's copy under the same lock, so that the two never
/// differ (`models.rs`).
/// `new_variant`: a yielding entry's first run with its local size, which may be cold
/// (`TimingTable::observe_new_variant`); `ends_launch`: the launch's last observation
/// (`TimingTable::end_launch`: a first launch's pieces are held provisionally until then).
fn observe(
    models: &ClassModels,
    key: ModelKey,
    form: Form,
    (units, ns): (f64, u64),
    new_variant: bool,
    ends_launch: bool,
) {
    let tables = match form {
        Form::Kernel => &MODELS,
        Form::Entry => &ENTRY_MODELS,
    };
    let mut table = tables.lock().unwrap_or_else(|e| e.into_inner());
    if new_variant {
        table.observe_new_variant(key, units, ns);
    } else {
        table.observe_units(key, units, ns);
    }
    if ends_launch {
        table.end_launch(&key);
    }
    if form == Form::Kernel {
        models.set(key.1, table.get(&key));
    }
}

/// Forgets what was learned about kernel class `class`: its program is released or built
/// again.
pub fn forget_kernel(class: &crate::core::objects::KernelClass) {
    let h = class.id;
    super::profiles::forget_kernel(h);
    super::yielding::forget_kernel(h);
    efficiency().retain(|k, _| k.0 != h);
    ENTRY_MODELS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .forget(|k| kernel_key(k).0 == h);
    let mut table = MODELS.lock().unwrap_or_else(|e| e.into_inner());
    table.forget(|k| k.0 == h);
    class.models.clear();
}

/// A piece on the vendor queue, not yet retired.
struct InFlight {
    /// The launch's kernel name, and whether this is its last piece (then: how many).
    kernel: std::sync::Arc<str>,
    last_of: Option<u64>,
    event: cl_event,
    token: Option<GrantToken>,
    submitted_ns: u64,
    work_groups: u64,
    /// The launch's wave, in work-groups (the timing model counts waves).
    wave_wgs: u64,
    /// Its predicted device time when submitted (see `Submitter::predict`).
    pred_ns: u64,
    key: Option<ModelKey>,
    /// The class's copies of its timing models, with `key`.
    models: Option<Arc<ClassModels>>,
    /// The geometry's row profile, the rows the piece covers and the range's rows.
    rows: Option<(ProfileKey, u64, u64, u64)>,
    /// The device's activity at submission, to tell the piece's own device time from
    /// its host-observed time (`Client::share_since`).
    mark: Option<softpreempt_sched::ActivityMark>,
    /// What `SliceEfficiency` weighs this piece as: cut at the slice target times a scale
    /// while a higher priority was active, or a long piece.
    weigh: Option<Weigh>,
    /// `event` is the piece's own, not a barrier's after it (`completion`).
    own_event: bool,
}

/// How a retired piece teaches `SliceEfficiency`.
#[derive(Clone, Copy)]
enum Weigh {
    /// A long piece: the piece length, or a whole launch.
    Long,
    /// A whole launch sent unheld while a higher priority was active, because slicing
    /// did not pay: its host time, the other process's kernels included, is what the
    /// driver's own sharing gives, the reference slicing has to beat.
    Whole,
    /// Cut at the slice target times this scale while a higher priority was active.
    AtScale(u64),
}

struct Submitter {
    m: Arc<Managed>,
    window: VecDeque<InFlight>,
    last_retired_ns: u64,
    /// Device time of the pieces of the launch being retired so far (for profiles).
    launch_ns: u64,
    /// The longest of those pieces (the launch's preemption granularity).
    launch_max_ns: u64,
    /// The work-groups and own device time of those pieces, while every one of them was
    /// timed for the model (`None` after one that was not): at the launch's last piece,
    /// the class's latest launch timed whole (`ClassModels::note_launch`).
    launch_own: Option<(u64, u64)>,
    /// Predicted device time submitted under the latest grant (short launches are grouped
    /// under one grant up to the budget).
    group_ns: u64,
    /// The latest retired piece that taught a model (see [`Recent`]).
    recent: Option<Recent>,
    /// Open from the look at an unready command's dependencies to its enqueue (see
    /// `failing`).
    look: Option<failing::Window>,
    /// Retired pieces' events with the time they retired, released once they are
    /// `SPENT_AGE` old or the submitter has nothing else to do (see `release_spent`).
    spent: VecDeque<(cl_event, u64)>,
}

/// How long a retired piece's event is kept before the submitter releases it. On an H100
/// a release just after the piece completed took 57-61 us (NVIDIA's completion callback,
/// delivered late, not yet run), where the application's own events, released later, took
/// 0.3 us: released at once, every piece delayed the next one by that much.
const SPENT_AGE: Duration = Duration::from_millis(1);

/// At most this many retired events wait for release, whatever their age.
const SPENT_MAX: usize = 64;

/// The thread body.
pub fn run(m: Arc<Managed>) {
    // Woken by a higher priority's demand ending, a low queue's submitter on a CPU device
    // would take that thread's core (see `os_priority::no_wakeup_preemption`).
    if m.low_on_cpu_device() {
        crate::core::os_priority::no_wakeup_preemption("submitter");
    }
    let mut s = Submitter::new(m);
    loop {
        let cmd = {
            let mut st = s.m.lock();
            loop {
                if let Some(c) = st.fifo.pop_front() {
                    st.busy = true;
                    break Some(c);
                }
                if st.shutdown {
                    break None;
                }
                drop(st);
                // Nothing queued: finish what is in flight, then give up the device. A
                // command pushed meanwhile goes first: it would otherwise wait for every
                // piece before it to complete on the device.
                while !s.window.is_empty() && s.m.lock().fifo.is_empty() {
                    s.retire_one();
                }
                if s.window.is_empty() {
                    if let Some(c) = s.m.client.as_ref() {
                        if s.m.outstanding.load(Ordering::Acquire) == 0 {
                            c.idle();
                        }
                    }
                }
                st = s.m.lock();
                if st.fifo.is_empty() && !st.shutdown && s.window.is_empty() {
                    if s.spent.is_empty() {
                        st = s.m.cv.wait(st).unwrap_or_else(|e| e.into_inner());
                    } else {
                        // Idle with events to release: once they are old enough, unless
                        // a command comes first.
                        let (g, r) =
                            s.m.cv
                                .wait_timeout(st, SPENT_AGE)
                                .unwrap_or_else(|e| e.into_inner());
                        st = g;
                        if r.timed_out() && st.fifo.is_empty() {
                            drop(st);
                            s.release_spent(true);
                            st = s.m.lock();
                        }
                    }
                }
            }
        };
        let Some(cmd) = cmd else { break };
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            crate::calltime!("submitter.process", s.process(cmd))
        }));
        if r.is_err() {
            // Left open, the window would hold every later failure back for good.
            s.look = None;
            tracing::error!("softpreempt: internal error in the submitter (command dropped)");
        }
        s.m.pending.fetch_sub(1, Ordering::AcqRel);
        s.m.lock().busy = false;
        s.m.cv.notify_all();
    }
    s.retire_all();
    s.release_spent(true);
    // The queue is gone: its events and profile lines reach their files now, not only at
    // exit (which a long-running server may never reach).
    crate::trace::flush();
    s.m.lock().stopped = true;
    s.m.cv.notify_all();
}

/// Fallback when no thread can be started: submit everything now, in this thread.
pub fn run_now(m: &Arc<Managed>) {
    let mut s = Submitter::new(m.clone());
    loop {
        let Some(cmd) = s.m.lock().fifo.pop_front() else {
            break;
        };
        s.process(cmd);
        s.m.pending.fetch_sub(1, Ordering::AcqRel);
    }
    s.retire_all();
    s.release_spent(true);
    // As the thread does when its FIFO drains: demand raised by `Managed::push` goes.
    if let Some(c) = s.m.client.as_ref() {
        if s.m.outstanding.load(Ordering::Acquire) == 0 {
            c.idle();
        }
    }
    s.m.cv.notify_all();
}

fn wait_event(vt: &cl_icd_dispatch, e: cl_event) {
    if let Some(f) = vt.clWaitForEvents {
        // SAFETY: one retained vendor event.
        crate::calltime!("submitter.clWaitForEvents", unsafe { f(1, &e) });
    }
}

fn release_event(vt: &cl_icd_dispatch, e: cl_event) {
    if let Some(f) = vt.clReleaseEvent {
        // SAFETY: releasing the event the vendor returned to us.
        crate::calltime!("submitter.clReleaseEvent", unsafe { f(e) });
    }
}

impl Submitter {
    fn new(m: Arc<Managed>) -> Self {
        Submitter {
            m,
            window: VecDeque::new(),
            last_retired_ns: 0,
            launch_ns: 0,
            launch_max_ns: 0,
            launch_own: Some((0, 0)),
            group_ns: 0,
            recent: None,
            look: None,
            spent: VecDeque::new(),
        }
    }

    fn vt(&self) -> &'static cl_icd_dispatch {
        self.m.inner.vt
    }

    /// Waits for the oldest piece, reports its grant and feeds the timing model.
    fn retire_one(&mut self) {
        let Some(p) = self.window.pop_front() else {
            return;
        };
        wait_event(self.vt(), p.event);
        let now = monotonic_ns();
        // With two pieces in flight, the second starts when the first ends.
        let started = p.submitted_ns.max(self.last_retired_ns);
        let took = now.saturating_sub(started);
        self.last_retired_ns = now;
        // Host-observed times, on the CLOCK_MONOTONIC every process shares: the device's
        // own profiling clock would need the queue to have profiling on.
        if crate::trace::enabled() {
            let (first_row, rows) = p.rows.map_or((0, 0), |r| (r.1, r.2));
            crate::trace::slice(
                &self.m.label,
                &p.kernel,
                started,
                now,
                &[
                    ("work_groups", p.work_groups.into()),
                    ("first_row", first_row.into()),
                    ("rows", rows.into()),
                    // When it reached the vendor (the span starts when it could start on
                    // the device: then, or when the piece before it was seen to end).
                    ("submitted_ns", p.submitted_ns.into()),
                    // Tracked by its own vendor event (1) or a barrier's (0).
                    ("own_event", u64::from(p.own_event).into()),
                ],
            );
        }
        tracing::trace!(work_groups = p.work_groups, took_ns = took, "piece retired");
        self.launch_ns += took;
        self.launch_max_ns = self.launch_max_ns.max(took);
        if let Some(pieces) = p.last_of {
            crate::trace::profile::launch(
                &p.kernel,
                &self.m.priority,
                Profiled {
                    pieces,
                    device_ns: self.launch_ns,
                    max_piece_ns: self.launch_max_ns,
                    ..Profiled::default()
                },
            );
            self.launch_ns = 0;
            self.launch_max_ns = 0;
        }
        // A piece that shared the device (another process's kernels, a peer's pieces) took
        // longer than its own work: learned as it was observed, the kernel looks dearer
        // and the slices get ever smaller (3 low-priority processes on an H100 fell to
        // one-wave slices and 17% of their bare throughput). The model and the row
        // profile learn its time divided by the number of clients that shared the device.
        let share = match (p.mark.as_ref(), self.m.client.as_ref()) {
            (Some(mark), Some(c)) => c.share_since(mark),
            _ => 1.0,
        };
        let own = (took as f64 / share) as u64;
        self.note_launch_time(&p, own);
        if let Some(key) = p.key {
            let waves = softpreempt_sched::waves(p.work_groups, p.wave_wgs);
            // The model learns in the rows' weight: a profile-sized piece of an uneven
            // kernel takes about the target whatever its waves, which would read as all
            // fixed cost (and make a whole launch look short).
            let weight = p
                .rows
                .and_then(|(pk, first, n, _)| profiles::relative_cost(&pk, first, n))
                .unwrap_or(1.0);
            if let Some((pk, first, n, rows)) = p.rows {
                // The fixed cost of a launch is no row's: the rest is spread over the rows.
                let overhead = model(&key).fit().map_or(0.0, |f| f.0).min(own as f64 / 2.0);
                profiles::observe(pk, rows, first, n, own as f64 - overhead);
            }
            // A first launch's pieces may each pay a cold start, and the model holds
            // them provisionally until one of a later launch comes (`TimingModel::warm`).
            if let Some(models) = &p.models {
                let units = (waves as f64 * weight, own);
                observe(models, key, Form::Kernel, units, false, p.last_of.is_some());
            }
            if waves > 0 {
                self.recent = Some(Recent {
                    key,
                    waves: waves as f64,
                    work_groups: p.work_groups,
                    own_ns: own,
                    rows: p.rows.map(|(pk, first, n, _)| (pk, first, n)),
                });
            }
            // Only pieces that had the device to themselves are weighed: sliced pieces
            // run while a higher priority is active, long ones mostly while none is, and
            // sharing estimated from the arbiter would bias the comparison towards
            // longer slices (it doubled a uniform kernel's target under bursts on an
            // H100).
            if let Some(w) = p
                .weigh
                .filter(|w| share == 1.0 || matches!(w, Weigh::Whole))
            {
                let mut e = efficiency();
                let e = e.entry(key).or_default();
                match w {
                    Weigh::Long => e.observe_long(p.work_groups, own),
                    Weigh::Whole => e.observe_long(p.work_groups, took),
                    Weigh::AtScale(scale) => {
                        let max_scale = (self.m.piece_ns() / self.m.target_ns().max(1)).max(1);
                        // On a GPU the piece length is about the driver's hand-over.
                        e.observe(scale, p.work_groups, own, max_scale, self.m.gpu);
                    }
                }
            }
        }
        if let (Some(t), Some(c)) = (p.token, self.m.client.as_ref()) {
            // Its own device time: what the round robin charges it.
            c.complete_token(t, own);
        }
        self.spent.push_back((p.event, now));
        self.release_spent(false);
    }

    /// Adds a retired piece's own time to its launch's, and at the launch's last piece
    /// records the launch, if every piece was timed, as its class's latest on this
    /// device. What a whole launch took is the check on the model's prediction that sends
    /// a kernel's launches straight to the vendor (`launch::predicted_ns`): the model is
    /// learned from pieces, and for an uneven kernel the pieces of its cheap rows, sized
    /// by a row profile still rough, read as a low cost per group. The demo's 165 ms
    /// Mandelbrot launch on PoCL was so predicted at 0.5-1.7 ms after its second or third
    /// launch (the last pieces of each launch are the image's cheap bottom rows) and went
    /// straight to the vendor, untimed, from then on.
    fn note_launch_time(&mut self, p: &InFlight, own: u64) {
        self.launch_own = self
            .launch_own
            .filter(|_| p.key.is_some())
            .map(|(groups, ns)| (groups + p.work_groups, ns + own));
        let Some(pieces) = p.last_of else {
            return;
        };
        if let (Some((groups, ns)), Some(key), Some(models)) =
            (self.launch_own, p.key, p.models.as_ref())
        {
            if groups > 0 {
                let waves = softpreempt_sched::waves(groups, p.wave_wgs) as f64;
                models.note_launch(key.1, LaunchTime { waves, ns, pieces });
            }
        }
        self.launch_own = Some((0, 0));
    }

    /// Releases the retired pieces' events that are `SPENT_AGE` old (all of them with
    /// `all`), and the oldest beyond `SPENT_MAX`.
    fn release_spent(&mut self, all: bool) {
        let now = monotonic_ns();
        let age = SPENT_AGE.as_nanos() as u64;
        while let Some(&(e, at)) = self.spent.front() {
            if !all && self.spent.len() <= SPENT_MAX && now.saturating_sub(at) < age {
                break;
            }
            self.spent.pop_front();
            release_event(self.vt(), e);
        }
    }

    fn retire_all(&mut self) {
        while !self.window.is_empty() {
            self.retire_one();
        }
    }

    /// A grant for the next piece (waiting while higher priorities have the device). The
    /// arbiter's own timeout only bounds each wait; a dead peer is reclaimed meanwhile.
    fn grant(&mut self) -> Option<GrantToken> {
        let m = self.m.clone();
        let c = m.client.as_ref()?;
        let timeout = Duration::from_millis(config::config().sched.arbiter_timeout_ms);
        loop {
            match c.acquire(timeout) {
                Ok(g) => {
                    if crate::trace::enabled() {
                        crate::trace::grant(&m.label, monotonic_ns(), g.is_share());
                    }
                    // Rule 10, as for a direct command: lower clients' yielding launches
                    // leave the device before this piece reaches it.
                    if c.lower_priority_active(super::ACTIVE_WINDOW) {
                        m.handshake(c);
                    }
                    return Some(g.into_token());
                }
                Err(softpreempt_sched::SchedError::Timeout) => {
                    // Finished pieces free our in-flight budget while we wait.
                    if !self.window.is_empty() {
                        self.retire_one();
                    }
                }
                Err(e) => {
                    // A damaged segment (overwritten or truncated by another process) ends
                    // arbitration for good; an error, so the default log level shows it.
                    crate::error_once!(
                        "grant-error",
                        "softpreempt: arbiter error: {e}; this process's queues on the device \
                         run in pass-through (no preemption)"
                    );
                    return None;
                }
            }
        }
    }

    fn process(&mut self, cmd: Command) {
        let Command {
            work,
            wait,
            keep,
            event,
        } = cmd;
        let waits: Vec<cl_event> = wait.iter().map(|r| r.handle()).collect();
        // No dependency may fail between the look below and the enqueue of an unready
        // command (see `failing`): the window stays open until that enqueue.
        let window = (!waits.is_empty()).then(failing::window);
        // One read of each dependency's status decides both questions below: read twice,
        // a dependency could fail in between, and a launch sliced behind a failed event
        // would hold the window for ever (PoCL never runs it).
        let statuses: Vec<cl_int> = waits.iter().map(|&e| status_of(self.vt(), e)).collect();
        let failed = waits
            .iter()
            .zip(&statuses)
            .any(|(&e, &s)| s < 0 || (s > CL_COMPLETE as cl_int && failing::is_failing(e)));
        let status = if failed {
            // A dependency already failed, or is being set to a failure now: the command
            // fails as the vendor fails the dependents of a failed event (PoCL never
            // completes a command enqueued after its dependency failed).
            Err(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
        } else {
            // Not ready (see `Managed::ready`): the command goes to the vendor at once and
            // holds nothing of the arbiter's while it waits there.
            let pending = !self.m.ready_with(&waits, &statuses);
            // A ready command's dependencies complete by vendor work alone (they fail
            // only by a vendor's own error): no window across its grants.
            self.look = window.filter(|_| pending);
            if let (true, Work::Launch(l)) = (pending, &work) {
                failing::test_hold(self.vt(), &l.name, &waits, &statuses);
            }
            let r = match work {
                Work::Call(call) => self.call(call, &waits, pending, event.as_ref()),
                Work::Launch(l) => self.launch(&l, &waits, pending, event.as_ref()),
            };
            // Every piece is on the vendor, and ready: commands waiting for this one may
            // hold the device behind it.
            if let (Ok(()), false, Some(d)) = (&r, pending, event.as_ref()) {
                d.mark_on_vendor();
            }
            r
        };
        self.look = None;
        if let (Err(e), Some(d)) = (status, event.as_ref()) {
            d.finish(e);
        }
        // The vendor holds its own references now.
        drop(keep);
        drop(wait);
    }

    fn call(
        &mut self,
        call: super::Call,
        waits: &[cl_event],
        pending: bool,
        d: Option<&Arc<Deferred>>,
    ) -> Result<(), cl_int> {
        let mut ev: cl_event = std::ptr::null_mut();
        // An unready marker or barrier is remembered by its event (later commands of the
        // queue run behind it), so it needs one even when the application asked for none.
        let out = if d.is_some() || pending {
            &mut ev as *mut cl_event
        } else {
            std::ptr::null_mut()
        };
        let r = call(&self.m.inner, waits.len() as cl_uint, list_ptr(waits), out);
        // On the vendor: a failure from now on is the vendor's to pass on.
        self.look = None;
        r?;
        if ev.is_null() {
            return Ok(());
        }
        if pending {
            self.m.note_unready(ev);
        }
        if let Some(d) = d {
            self.last_piece(d, ev, waits);
        }
        release_event(self.vt(), ev);
        Ok(())
    }

    /// Records `ev` as the command's final piece. A dependency that failed by the vendor's
    /// own error between the submitter's look at it and the enqueue (failures the layer
    /// passes on cannot come in between: see `failing`) may leave the piece never
    /// completing (PoCL runs nothing enqueued behind a failed event), so the command fails
    /// now, as it would have had the failure come first; the user event is set before
    /// waiters learn of the final piece, so none of them waits on it.
    fn last_piece(&self, d: &Arc<Deferred>, ev: cl_event, waits: &[cl_event]) {
        d.piece(ev);
        if waits.iter().any(|&e| status_of(self.vt(), e) < 0) {
            d.finish(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);
        }
        complete_on(d, ev);
    }

    /// Enqueues one piece of a launch on the vendor queue and flushes it, so it starts
    /// at once (nothing else would flush it: the application waits on a user event).
    /// `cut`: the piece is a slice (or the rest after slices), launched with the slicing
    /// block as its local size where that is one (`Launch::unit_is_local`); a launch sent
    /// whole goes with the application's own local size. `own_event`: the piece gets a
    /// vendor event of its own, which tracks it (else a barrier's after it does; see
    /// `completion`).
    fn enqueue_piece(
        &mut self,
        l: &Launch,
        offset: Option<&[usize; 3]>,
        size: &[usize; 3],
        cut: bool,
        waits: &[cl_event],
        own_event: bool,
    ) -> Result<cl_event, cl_int> {
        let local = if cut && l.unit_is_local {
            Some(&l.unit)
        } else {
            l.local.as_ref()
        };
        let vt = self.vt();
        // A cut piece's first group, for its `get_group_id` (`with_first_group`): the
        // kernel is private to the launch, and an enqueue takes its arguments as they are
        // then. A launch sent whole keeps the value its snapshot got (first groups 0).
        if let Some((index, whole)) = l.geometry.as_ref().filter(|_| cut) {
            let mut value = *whole;
            if let (Some(o), Some(local)) = (offset, local) {
                let base = l.offset.unwrap_or([0; 3]);
                let first: [usize; 3] =
                    std::array::from_fn(|d| o[d].saturating_sub(base[d]) / local[d].max(1));
                softpreempt_transform::with_first_group(&mut value, first);
            }
            let rc = match vt.clSetKernelArg {
                // SAFETY: the launch's own kernel clone; a by-value argument of its size.
                Some(f) => unsafe {
                    f(
                        l.kernel.handle(),
                        *index,
                        value.len(),
                        value.as_ptr() as *const c_void,
                    )
                },
                None => CL_INVALID_OPERATION,
            };
            if rc != CL_SUCCESS {
                return Err(rc);
            }
        }
        let offset = offset.map_or(std::ptr::null(), |o| o.as_ptr());
        let local = local.map_or(std::ptr::null(), |x| x.as_ptr());
        let h = self.m.inner.h;
        let tracked = super::completion::tracked(vt, h, own_event, |out| {
            match vt.clEnqueueNDRangeKernel {
                // SAFETY: the vendor's enqueue on its own queue and our private kernel
                // clone; the size arrays outlive the call.
                Some(f) => crate::calltime!("submitter.clEnqueueNDRangeKernel", unsafe {
                    f(
                        h,
                        l.kernel.handle(),
                        l.work_dim,
                        offset,
                        size.as_ptr(),
                        local,
                        waits.len() as cl_uint,
                        list_ptr(waits),
                        out,
                    )
                }),
                None => CL_INVALID_OPERATION,
            }
        });
        // On the vendor (or refused): a failure from now on is the vendor's to pass on.
        self.look = None;
        let ev = tracked?;
        if let Some(f) = vt.clFlush {
            // SAFETY: the vendor's own queue.
            crate::calltime!("submitter.clFlush", unsafe { f(self.m.inner.h) });
        }
        Ok(ev)
    }

    /// Submits one launch, slice by slice (or whole), each piece under a grant.
    fn launch(
        &mut self,
        l: &Launch,
        waits: &[cl_event],
        pending: bool,
        d: Option<&Arc<Deferred>>,
    ) -> Result<(), cl_int> {
        let whole_offset = l.offset.as_ref();
        // A launch still waiting for other commands (a user event, another queue, or an
        // earlier unready command of this queue) is not held in our window: waiting on it
        // there could block this queue until the application, perhaps blocked on this
        // queue, sets the event, or until another queue's submitter, perhaps waiting for
        // the grant we hold, submits it. It goes whole, holding nothing.
        if pending {
            tracing::debug!(kernel = %l.name, "launch not ready: sent whole, holding nothing");
            // With an event of its own, which the layer holds until the launch ends: its
            // dependency may yet fail, and PoCL 3.1, passing a failure on to a command
            // whose event only it still references, frees that event and then locks it
            // (`pocl_update_event_failed`): the CTS's `userevents` aborted so in 3-4 of
            // 20 runs under load when such a launch was tracked by a barrier after it
            // (enqueued with no event). Unready launches are rare; the hand-over a
            // launch's own event costs on a GPU (`completion`) is paid only by them.
            let ev = self.enqueue_piece(l, whole_offset, &l.global, false, waits, true)?;
            self.m.note_unready(ev);
            if let Some(d) = d {
                self.last_piece(d, ev, waits);
            }
            release_event(self.vt(), ev);
            // Not retired here, so its device time is unknown to the profile.
            crate::trace::profile::launch(&l.name, &self.m.priority, Profiled::WHOLE);
            return Ok(());
        }
        if let Some(y) = &l.yielding {
            return self.yield_launch(l, y, waits, d);
        }
        let unit = l.local.unwrap_or(l.unit);
        let dims = l.work_dim as usize;
        let range = NdRange::new(
            l.work_dim,
            &l.offset.unwrap_or([0; 3])[..dims],
            &l.global[..dims],
            &unit[..dims],
        );
        // On a GPU, slices beat the driver's hand-over only from a launch with an event
        // of its own; one tracked by a barrier goes whole under a grant (`completion`),
        // unless `slice = "always"` asks for slices whatever they cost. Its planner still
        // counts its groups: the whole launch teaches the timing model, whose prediction
        // sends the kernel's short launches direct (a trial build without it sent the
        // demo's HP's first 16 launches through this thread: HP p99 2.12 ms, bare 0.79).
        let slices_pay = !super::completion::prompt_handover(l.gpu, l.own_event)
            || self.m.mode == crate::config::SliceMode::Always;
        let mut planner = range
            .ok()
            .filter(|_| l.sliceable)
            .map(|r| SlicePlanner::new(r, l.wave_wgs));
        let pkey = planner.as_ref().map(|p| ProfileKey::new(l.key, p.range()));
        // Rule 8: a wave longer than the driver's own hand-over is better left to the
        // driver, while a higher priority is active (slicing at the target is decided).
        // The same where this kernel's slices proved wasteful even as long as a piece
        // (`SliceEfficiency::skip_slicing`).
        // Not on a model that holds only its kernel's first launch, which may be all cold
        // start (a 65 µs kernel whose first launch took 7 ms on an H200 would go unsliced
        // and unobserved, so it would never learn otherwise): sliced, and its pieces
        // observed. A kernel whose waves are long goes whole from its third launch on.
        if planner.is_some() && slices_pay && self.m.slice_target() == Some(self.m.target_ns()) {
            let wave_ns = Some(model(&l.key))
                .filter(|m| m.warm())
                .and_then(|m| m.predict(1))
                .unwrap_or(0);
            let long_wave = l.gpu && wave_ns > GPU_HANDOVER_NS.max(self.m.target_ns());
            let futile = !long_wave
                && self.m.contended_mode()
                && efficiency()
                    .get_mut(&l.key)
                    .is_some_and(|e| e.skip_slicing());
            if long_wave || futile {
                tracing::debug!(kernel = %l.name, wave_ns, long_wave, "slicing cannot beat the driver: not sliced, not held");
                let ev =
                    self.enqueue_piece(l, whole_offset, &l.global, false, waits, l.own_event)?;
                if let Some(d) = d {
                    d.piece(ev);
                    complete_on(d, ev);
                }
                // Retired in order like any piece, holding no grant. A futile one's time
                // is the long reference that tells when slicing may pay again. A long wave
                // teaches nothing and counts for nothing in the in-flight bound (0 groups,
                // predicted 0), but is in the window all the same, so that the next
                // piece's time starts when it is seen to end, not at the next piece's
                // submission: released at once instead, every piece sent behind it looked
                // as long as its remaining run (tinygrad's 0.2 ms reductions behind 9 ms
                // matrix products read as 4.9 ms, and so became yielding launches).
                let (wgs, pred) = if long_wave {
                    (0, 0)
                } else {
                    let wgs = planner.as_ref().map_or(0, |p| p.range().total_groups());
                    (wgs, self.predict(l, wgs, None))
                };
                self.make_room(pred);
                self.window.push_back(InFlight {
                    kernel: l.name.clone(),
                    last_of: Some(1),
                    event: ev,
                    token: None,
                    submitted_ns: monotonic_ns(),
                    work_groups: wgs,
                    wave_wgs: l.wave_wgs,
                    pred_ns: pred,
                    key: (wgs > 0).then_some(l.key),
                    models: (wgs > 0).then(|| l.models.clone()),
                    rows: None,
                    mark: self
                        .m
                        .client
                        .as_ref()
                        .filter(|_| !long_wave)
                        .map(|c| c.activity_mark()),
                    weigh: (!long_wave).then_some(Weigh::Whole),
                    own_event: l.own_event,
                });
                return Ok(());
            }
        }
        let mut first = true;
        let mut pieces = 0u64;
        let tracing = crate::trace::enabled();
        loop {
            // Decided per piece: a higher priority may have come or gone since the last one
            // (the slice target while one is active, else the longer piece length). A
            // kernel whose slices at the target waste the device gets a longer target.
            let target = self.m.slice_target().filter(|_| slices_pay);
            // `slice = "always"` asks for the target whatever it costs: not adapted.
            let at_target = target == Some(self.m.target_ns()) && self.m.contended_mode();
            let scale = at_target.then(|| efficiency().get(&l.key).map_or(1, |e| e.scale()));
            let target = target.map(|t| match scale {
                Some(scale) => (t * scale).min(self.m.piece_ns().max(t)),
                None => t,
            });
            let piece = match (planner.as_mut().zip(target), pkey.as_ref()) {
                (Some((p, target)), Some(pk)) => {
                    let m = model(&l.key);
                    tracing::trace!(fit = ?m.fit(), samples = m.samples(), target, "planning a slice");
                    // Rows whose cost earlier launches of this geometry showed are cut by
                    // that cost; otherwise by the model, shrunk where the latest pieces ran
                    // dearer than its average (an uneven kernel seen for the first time).
                    let t = target as f64;
                    let fixed = m.fit().map_or(0.0, |f| f.0);
                    let budget = t - fixed.min(t / 2.0);
                    let recent = self.recent.filter(|r| r.key == l.key);
                    let first = p.rows_done();
                    match profiles::rows_within(pk, first, budget, p.wave_rows()) {
                        Some(rows) => {
                            // Twice the latest piece where it ran short of the target, over
                            // rows the profile believes no dearer (`slow_start_floor`).
                            // Looked up only where that floor exceeds the profile's rows.
                            let floor = softpreempt_sched::slow_start_floor(
                                recent.map(|r| (r.work_groups, r.own_ns)),
                                target,
                                p.range(),
                            )
                            .map(|min| min.min(p.range().rows().saturating_sub(first)))
                            .filter(|&min| min > rows);
                            let rows = floor
                                .zip(recent.and_then(|r| r.rows))
                                .filter(|&(min, (rk, rf, rn))| {
                                    let before = profiles::predict(&rk, rf, rn);
                                    let next = profiles::predict(pk, first, min);
                                    before.zip(next).is_some_and(|(ns, w)| {
                                        softpreempt_sched::no_dearer(min, w, rn, ns)
                                    })
                                })
                                .map_or(rows, |(min, _)| min);
                            p.take(rows, &m)
                        }
                        None => {
                            let recent = recent.map(|r| (r.waves, r.own_ns));
                            let t = softpreempt_sched::adapted_target(&m, recent, target);
                            // Rows the profile has not seen: no floor. An uneven kernel's
                            // next rows may cost many times the latest piece's, and the
                            // model tells no row from another; its own sizes grow once
                            // short pieces no longer shrink the target (`adapted_target`).
                            p.next_slice(&m, t)
                        }
                    }
                }
                .map(|s| Piece::of(&s, true)),
                _ => None,
            };
            let started = planner.as_ref().is_some_and(|p| p.rows_done() > 0);
            let all_rows = planner.as_ref().map_or(0, |p| p.range().rows());
            let whole = Piece {
                offset: l.offset.unwrap_or([0; 3]),
                size: l.global,
                work_groups: 0,
                sliced: false,
                first_row: 0,
                rows: 0,
            };
            let Piece {
                offset,
                size,
                work_groups: wgs,
                sliced,
                first_row,
                rows,
            } = match piece {
                // A first slice that takes every row is the whole launch, and goes as the
                // application gave it: with its own local size, as its launches sent
                // straight to the vendor will. Cut with the slicing block, it ran another
                // variant of the kernel (on PoCL a work-group function of its own, compiled
                // or loaded at its first use: 1-1.5 ms with PoCL's cache warm, 77 ms cold
                // for the demo's HP kernel), and the application's variant was then met
                // cold at the first direct launch.
                Some(p) if p.sliced && !started && all_rows > 0 && p.rows >= all_rows => Piece {
                    work_groups: p.work_groups,
                    rows: p.rows,
                    ..whole
                },
                Some(p) => p,
                // The rest in one piece, from where slicing stopped.
                None if started => planner.as_ref().and_then(rest_of).unwrap_or(whole),
                // The whole launch, exactly as the application gave it (its time still
                // teaches the model and the row profile, so the first slices are cut to
                // the right size).
                None => Piece {
                    work_groups: planner.as_ref().map_or(0, |p| p.range().total_groups()),
                    rows: all_rows,
                    ..whole
                },
            };
            let covered = pkey.filter(|_| wgs > 0 && rows > 0);
            let pred = self.predict(l, wgs, covered.as_ref().map(|k| (k, first_row, rows)));
            crate::calltime!("submitter.make_room", self.make_room(pred));
            let asked_ns = if tracing { monotonic_ns() } else { 0 };
            let token = if self.may_group(pred) {
                None
            } else {
                self.group_ns = 0;
                crate::calltime!("submitter.grant", self.grant())
            };
            self.group_ns += pred;
            if tracing {
                self.trace_wait(l, planner.as_ref(), asked_ns);
            }
            let offset_ptr = if sliced || started {
                Some(&offset)
            } else {
                whole_offset
            };
            let waits = if first { waits } else { &[] };
            let ev = match self.enqueue_piece(
                l,
                offset_ptr,
                &size,
                sliced || started,
                waits,
                l.own_event,
            ) {
                Ok(ev) => ev,
                Err(rc) => {
                    if let (Some(t), Some(c)) = (token, self.m.client.as_ref()) {
                        c.complete_token(t, 0);
                    }
                    return Err(rc);
                }
            };
            first = false;
            pieces += 1;
            let finished = !sliced || planner.as_ref().is_none_or(|p| p.is_done());
            if let Some(d) = d {
                d.piece(ev);
                if finished {
                    complete_on(d, ev);
                }
            }
            let key = (wgs > 0).then_some(l.key);
            self.window.push_back(InFlight {
                kernel: l.name.clone(),
                last_of: finished.then_some(pieces),
                event: ev,
                token,
                submitted_ns: monotonic_ns(),
                work_groups: wgs,
                wave_wgs: l.wave_wgs,
                pred_ns: pred,
                key,
                models: key.map(|_| l.models.clone()),
                rows: covered.map(|k| (k, first_row, rows, all_rows)),
                mark: self.m.client.as_ref().map(|c| c.activity_mark()),
                // The rest of a launch after its slices may be any size: not weighed.
                weigh: match (sliced, scale) {
                    (true, Some(s)) => Some(Weigh::AtScale(s)),
                    (true, None) => Some(Weigh::Long),
                    (false, _) => (!started).then_some(Weigh::Long),
                },
                own_event: l.own_event,
            });
            if finished {
                return Ok(());
            }
        }
    }

    /// Runs launch `l` as a yielding launch `y` (see `yielding.rs`): under a grant, with a
    /// claim on the device that says how long it needs to yield, and again from its ticket
    /// after each yield until every virtual group has run. One run at a time: the window
    /// is emptied first, and each run is waited for, so the ticket's value is known.
    fn yield_launch(
        &mut self,
        l: &Launch,
        y: &super::yielding::YieldLaunch,
        waits: &[cl_event],
        d: Option<&Arc<Deferred>>,
    ) -> Result<(), cl_int> {
        use super::yielding;
        self.retire_all();
        let ctl = self.m.control().ok_or(CL_OUT_OF_RESOURCES)?;
        let vt = self.vt();
        let set = vt.clSetKernelArg.ok_or(CL_INVALID_OPERATION)?;
        let enqueue = vt.clEnqueueNDRangeKernel.ok_or(CL_INVALID_OPERATION)?;
        if !ctl.set_arg(y.entry.handle(), y.hidden + 1) {
            return Err(CL_OUT_OF_RESOURCES);
        }
        // How long it needs to stop: about one of its groups (a wave of the original
        // launch runs one group on each resident slot) plus the signal path; unknown yet:
        // the cap. A higher priority waits for it that long, at most `yield_wait_us`.
        // On a GPU, longer than the driver's own hand-over (`yielding::ask_limit_ns`), it
        // says it cannot yield, and nobody asks. Between the cap and that (a run with an
        // event of its own, which the driver hands over late), it is asked and waited
        // for up to the cap: the launch leaves at its next group boundary, and an HP
        // submitted meanwhile is switched in sooner than behind a launch nobody asked to
        // leave (HP p99 next to the benchmark's Mandelbrot LP on an H100, whose yields
        // took 1-2 ms: 1.66 ms asked, 2.87 not asked, bare's 2.87). A launch tracked by a
        // barrier is a yielding one on a GPU only under `yielding = "chaos"`: the driver
        // hands it over in about 0.2 ms (`yielding::driver_hands_over_as_soon`), and it is
        // asked only within the cap. Publishing the yields' measured latency instead of
        // this estimate, uncapped, was worse (2.00 ms there, waiting longer): the
        // measured yields only raise a bound within the cap (`yielding::recent_yield`,
        // below), and never decide whether a launch can yield.
        let cap = Duration::from_micros(config::config().sched.yield_wait_us);
        // A wave is the model's slope, not `predict(1)`: the fixed cost of a launch is paid
        // once, not per group (on PoCL it made 13 µs waves look like 2 ms).
        let sized_by = entry_model(&y.key);
        let wave = sized_by
            .fit()
            .map_or(cap.as_nanos() as u64, |(_, per_wave)| {
                per_wave.max(0.0) as u64
            });
        // Short groups take their tickets in chunks on a GPU; a yield then waits for the
        // chunk in progress. Fixed for the whole application launch: the next launch's
        // base assumes one chunk size from this base on. Not on a CPU device: there a
        // ticket costs little (no round trip to a far cache), and a wave of persistent
        // groups is shorter than a group (more groups than cores), so chunks sized by it
        // ran for milliseconds (PoCL: yield p99 33-65 ms in the preemption benchmark's
        // smoke run, against 2-16 ms with one group a ticket).
        let run_wave = super::yielding::run_wave(l.key);
        let chunk = if l.gpu && y.chunks() {
            super::yielding::chunk(run_wave.or(sized_by.fit().map(|_| wave)))
        } else {
            1
        };
        let need = run_wave
            .unwrap_or(wave)
            .saturating_mul(u64::from(chunk))
            .max(wave)
            .saturating_add(super::yielding::SIGNAL_NS);
        // A CPU device has no hand-over of its own: the low launch's threads share the
        // cores with the higher priority's until the launch ends, however long its
        // groups, so leaving at the next group boundary always frees them sooner, and it
        // is always asked. Past the cap it publishes 0, asked and not waited for: the
        // higher priority runs beside it meanwhile rather than idle (on PoCL, waiting the
        // cap for groups of several ms added the whole cap to every request). So does a
        // launch whose threads run in the idle class (`Managed::os_preempts`), whatever
        // its groups: the higher priority's threads take the cores the moment they wake,
        // and waiting for the yield only added it to every request (PoCL matrix, HP p50
        // 1.27-1.30x alone with the wait, 1.03-1.05x without; docs/benchmarks.md,
        // session 37).
        let cap_ns = cap.as_nanos() as u64;
        // On a GPU the bound is at least what the kernel's latest yields took, where that
        // is within the cap: a higher client that gives up sooner meets the driver's time
        // slice. Yields longer than the cap leave the estimate as it is: a higher client
        // that waits the cap for them submits later into the same time slice (next to the
        // benchmark's Mandelbrot LP on an H100, whose yields took 0.8-1.7 ms, a bound
        // raised to the cap made the HP's mean wait 0.39 ms instead of 0.25 and its p99
        // 1.66 ms instead of 1.58). Not on a CPU device, where the higher client runs
        // beside a late yield rather than behind it (see above).
        let seen = if l.gpu {
            super::yielding::recent_yield(l.key)
                .filter(|&n| n <= cap_ns)
                .unwrap_or(0)
        } else {
            0
        };
        let yield_ns = if self.m.os_preempts() {
            Some(0)
        } else if need <= cap_ns || (l.gpu && need <= super::yielding::ask_limit_ns(l.own_event)) {
            Some(need.max(seen))
        } else if l.gpu {
            None
        } else {
            Some(0)
        };
        let base = ctl.base.load(Ordering::Acquire);
        let mut global = y.local;
        // Virtual groups handed out before the run (the flat form launches a group for
        // each one left, so it counts them: from the ticket after a yield, else by adding
        // up its runs, each of which took a ticket a group).
        let mut handed = 0u64;
        let mut first = true;
        let (mut runs, mut yields) = (0u64, 0u64);
        let (mut launch_ns, mut max_ns) = (0u64, 0u64);
        loop {
            let asked_ns = monotonic_ns();
            let token = self.grant();
            let granted_ns = monotonic_ns();
            if crate::trace::enabled() {
                crate::trace::grant_wait(&self.m.label, asked_ns, granted_ns);
            }
            let groups = y.run_groups(handed);
            let handed_before = handed;
            global[0] = y.local[0] * groups as usize;
            let epoch = ctl.next_epoch();
            let geo = softpreempt_transform::yield_geometry_arg(
                l.work_dim,
                l.offset.unwrap_or([0; 3]),
                l.global,
                y.local,
                epoch,
                base,
                chunk,
            );
            // SAFETY: the launch's own entry kernel; its hidden `ulong16` by value.
            let rc = unsafe {
                set(
                    y.entry.handle(),
                    y.hidden,
                    geo.len(),
                    geo.as_ptr() as *const c_void,
                )
            };
            let claim = self.m.client.as_ref().map(|c| c.enter_device(yield_ns));
            let running = yielding::start(&self.m, &ctl, epoch, claim);
            let started = monotonic_ns();
            let tracked = if rc != CL_SUCCESS {
                Err(rc)
            } else {
                let w = if first { waits } else { &[] };
                super::completion::tracked(vt, self.m.inner.h, l.own_event, |out| {
                    // SAFETY: the vendor's enqueue on its own queue of our entry kernel;
                    // the size arrays outlive the call.
                    unsafe {
                        enqueue(
                            self.m.inner.h,
                            y.entry.handle(),
                            l.work_dim,
                            std::ptr::null(),
                            global.as_ptr(),
                            y.local.as_ptr(),
                            w.len() as cl_uint,
                            list_ptr(w),
                            out,
                        )
                    }
                })
            };
            let (rc, ev) = match tracked {
                Ok(ev) => (CL_SUCCESS, ev),
                Err(rc) => (rc, std::ptr::null_mut()),
            };
            if rc == CL_SUCCESS {
                if let Some(f) = vt.clFlush {
                    // SAFETY: the vendor's own queue.
                    unsafe { f(self.m.inner.h) };
                }
                yielding::wait_run(vt, ev, &running, l.gpu);
            }
            let off_ns = monotonic_ns();
            let took = off_ns.saturating_sub(started);
            let asked = running.asked();
            // Off the device before the ticket is read: a higher client waits for exactly
            // this, and the read is a round trip through the second queue (20-120 µs on
            // an H100, docs/benchmarks.md) that it need not wait for.
            let left = yielding::finish(&self.m, &running)
                .zip(self.m.client.as_ref())
                .map(|(claim, c)| c.leave_device_now(claim));
            // Asked to stop: the ticket says how far it got. Not asked: it ran to the end.
            let read_ns = monotonic_ns();
            let ticket = if asked { ctl.ticket() } else { None };
            let read_ns = monotonic_ns() - read_ns;
            handed = match ticket {
                Some(t) => u64::from(t.wrapping_sub(base)),
                None => y.handed_after_unasked(handed, groups),
            };
            let done = rc != CL_SUCCESS || handed >= y.total;
            yields += u64::from(asked && !done);
            // A new variant's first run may be cold (PoCL compiles it then).
            if y.flat && rc == CL_SUCCESS && !(first && y.new_variant) {
                yielding::observed_entry_run(y.key, handed.saturating_sub(handed_before), took);
            }
            // Traced after the leave: writing the trace is no part of what the HP waits for.
            if asked && crate::trace::enabled() {
                if let Some(c) = self.m.client.as_ref() {
                    let request = c.yield_request_ns();
                    let (write, written) = running.write_ns();
                    crate::trace::yield_phases(
                        &self.m.label,
                        request,
                        (write, written),
                        off_ns,
                        !done,
                    );
                }
            }
            tracing::debug!(kernel = %l.name, grant_wait_ns = granted_ns - asked_ns, read_ns, ?yield_ns, base, ?ticket, total = y.total, persistent = y.persistent, chunk, asked, done, took, "yielding run");
            if let Some(latency) = left.and_then(|left| left.settle(!done)) {
                yielding::observed_yield(l.key, latency);
            }
            if let (Some(t), Some(c)) = (token, self.m.client.as_ref()) {
                c.complete_token(t, took);
            }
            if rc != CL_SUCCESS {
                return Err(rc);
            }
            if crate::trace::enabled() {
                crate::trace::slice(
                    &self.m.label,
                    &l.name,
                    started,
                    started + took,
                    &[
                        ("yielding_run", runs.into()),
                        ("asked", u64::from(asked).into()),
                        ("own_event", u64::from(l.own_event).into()),
                    ],
                );
            }
            runs += 1;
            launch_ns += took;
            max_ns = max_ns.max(took);
            if let Some(d) = d {
                d.piece(ev);
                if done {
                    complete_on(d, ev);
                }
            }
            release_event(vt, ev);
            first = false;
            if done {
                // Where the next launch's groups begin: a ticket per chunk and one past the
                // end for each persistent group later, when nobody asked.
                let next =
                    ticket.unwrap_or_else(|| base.wrapping_add(y.tickets_taken(chunk) as u32));
                ctl.base.store(next, Ordering::Release);
                if !asked && runs == 1 && y.total > 0 {
                    // A whole run teaches the entry's model, as a whole launch teaches the
                    // kernel's (kept apart: `ENTRY_MODELS`): in waves of
                    // the run's own groups (`persistent` of them are resident at once).
                    // Not `l.wave_wgs`, which counts the slicing unit's groups: with a NULL
                    // local size on a GPU that unit is far smaller than the run's groups,
                    // and a wave counted in it came out 8 times too long, so a Mandelbrot
                    // LP on an H100 claimed it could not yield in time and was never asked.
                    let waves = softpreempt_sched::waves(y.total, y.persistent);
                    // The entry's first run may be cold (PoCL: 257 ms, then 16 ms).
                    observe(
                        &l.models,
                        y.key,
                        Form::Entry,
                        (waves as f64, took),
                        y.new_variant,
                        true,
                    );
                    if l.gpu {
                        yielding::observed_run_wave(l.key, took / waves.max(1));
                    }
                }
                crate::trace::profile::launch(
                    &l.name,
                    &self.m.priority,
                    Profiled {
                        pieces: runs,
                        device_ns: launch_ns,
                        max_piece_ns: max_ns,
                        yields,
                        not_asked: yield_ns.is_none(),
                    },
                );
                return Ok(());
            }
            tracing::trace!(kernel = %l.name, runs, "yielding launch stopped; resumes from its ticket");
        }
    }

    /// The predicted device time of a piece of `wgs` work-groups of launch `l`; the whole
    /// budget when nothing is known (so unknown work is never packed behind more).
    /// A piece covering known rows of a profiled geometry (`rows`: the profile, the first
    /// row and how many) is predicted by their learned cost plus the launch's fixed cost.
    fn predict(&self, l: &Launch, wgs: u64, rows: Option<(&ProfileKey, u64, u64)>) -> u64 {
        let budget = self.m.target_ns();
        if wgs == 0 {
            return budget;
        }
        let m = model(&l.key);
        let by_rows = rows.and_then(|(k, first, n)| profiles::predict(k, first, n));
        match (by_rows, m.fit()) {
            (Some(work), fit) => (work + fit.map_or(0.0, |f| f.0)) as u64,
            (None, _) => m
                .predict(softpreempt_sched::waves(wgs, l.wave_wgs))
                .unwrap_or(budget),
        }
    }

    /// Retires pieces until one of `pred` ns fits: the predicted device time queued behind
    /// the running piece stays within the budget (the slice target), while at least one
    /// piece waits behind the running one so the device never idles between them; and the
    /// arbiter's in-flight grants per client are never exceeded.
    fn make_room(&mut self, pred: u64) {
        /// A bound on pieces in flight, whatever their predictions.
        const MAX_WINDOW: usize = 32;
        loop {
            let n = self.window.len();
            if n == 0 {
                return;
            }
            let queued: u64 = self.window.iter().skip(1).map(|p| p.pred_ns).sum::<u64>() + pred;
            let tokens = self.window.iter().filter(|p| p.token.is_some()).count();
            let full = (n >= 2 && queued > self.m.target_ns())
                || n >= MAX_WINDOW
                || (tokens >= self.m.max_inflight && !self.may_group(pred));
            if !full {
                return;
            }
            self.retire_one();
        }
    }

    /// Whether a piece of `pred` ns may go under the grant of a piece still in flight:
    /// short launches are grouped under one grant up to the budget, in order, while no
    /// higher priority wants the device.
    fn may_group(&self, pred: u64) -> bool {
        let Some(c) = self.m.client.as_ref() else {
            return false;
        };
        self.window.iter().any(|p| p.token.is_some())
            && self.group_ns.saturating_add(pred) <= self.m.target_ns()
            && !c.should_yield()
    }

    /// Traces a wait for a grant that took long enough to be one (a higher priority held
    /// the device); in the middle of a launch, that wait is a preemption.
    fn trace_wait(&self, l: &Launch, planner: Option<&SlicePlanner>, asked_ns: u64) {
        /// Shorter waits are the arbiter's own cost, not a wait for another client.
        const WAITED_NS: u64 = 20_000;
        let now = monotonic_ns();
        if now.saturating_sub(asked_ns) < WAITED_NS {
            return;
        }
        crate::trace::grant_wait(&self.m.label, asked_ns, now);
        if let Some(p) = planner.filter(|p| p.rows_done() > 0 && !p.is_done()) {
            crate::trace::preempted(
                &self.m.label,
                &l.name,
                asked_ns,
                &[
                    ("rows_done", p.rows_done().into()),
                    ("rows", p.range().rows().into()),
                ],
            );
        }
    }
}

/// The unsubmitted remainder of a partly sliced launch, as one piece.
fn rest_of(p: &SlicePlanner) -> Option<Piece> {
    let r = p.range();
    softpreempt_sched::slice_at(r, p.rows_done(), r.rows() - p.rows_done())
        .map(|s| Piece::of(&s, false))
}

/// What one enqueue of a launch covers.
struct Piece {
    offset: [usize; 3],
    size: [usize; 3],
    /// 0 when unknown (the launch's range could not be planned).
    work_groups: u64,
    /// Cut by the planner (a slice), rather than the rest or the whole launch.
    sliced: bool,
    /// The work-group rows covered, for the row profile (0 rows: unknown).
    first_row: u64,
    rows: u64,
}

impl Piece {
    fn of(s: &softpreempt_sched::Slice, sliced: bool) -> Piece {
        Piece {
            offset: s.offset,
            size: s.size,
            work_groups: s.work_groups,
            sliced,
            first_row: s.first_row,
            rows: s.rows,
        }
    }
}

fn list_ptr(v: &[cl_event]) -> *const cl_event {
    if v.is_empty() {
        std::ptr::null()
    } else {
        v.as_ptr()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::objects::{KernelClass, Sliceable};

    fn class() -> KernelClass {
        KernelClass::new(
            "k".into(),
            Box::new([]),
            Sliceable::Yes { null_local: true },
            None,
            false,
        )
    }

    #[test]
    fn an_observation_reaches_the_class_copy_and_forgetting_clears_it() {
        let (a, b) = (class(), class());
        let dev = 0x1000;
        let (ka, kb) = ((a.id, dev), (b.id, dev));
        assert_eq!(a.models.get(dev).samples(), 0, "nothing learned yet");
        observe(&a.models, ka, Form::Kernel, (2.0, 4_000), false, true);
        observe(&a.models, ka, Form::Kernel, (4.0, 8_000), false, true);
        observe(&b.models, kb, Form::Kernel, (1.0, 500), false, true);
        assert_eq!(
            a.models.get(dev),
            model(&ka),
            "the copy equals the table's entry"
        );
        assert_eq!(a.models.get(dev).samples(), 2);
        assert_eq!(
            a.models.get(dev + 1).samples(),
            0,
            "another device's model is its own"
        );
        forget_kernel(&a);
        assert_eq!(a.models.get(dev).samples(), 0, "forgotten with the class");
        assert_eq!(model(&ka).samples(), 0);
        assert_eq!(
            b.models.get(dev),
            model(&kb),
            "another class keeps its model"
        );
        assert_eq!(b.models.get(dev).samples(), 1);
    }

    #[test]
    fn an_entry_run_teaches_only_the_entry_model() {
        let a = class();
        let dev = 0x2000;
        let ka = (a.id, dev);
        // The kernel itself: 10 ms a wave.
        observe(&a.models, ka, Form::Kernel, (1.0, 10_000_000), false, true);
        observe(&a.models, ka, Form::Kernel, (2.0, 20_000_000), false, true);
        assert_eq!(
            entry_model(&ka),
            model(&ka),
            "no entry run yet: a yielding run is sized by the kernel's model"
        );
        // Its entry, three times as fast (PoCL's flat entries of some kernels).
        observe(&a.models, ka, Form::Entry, (1.0, 3_000_000), false, true);
        observe(&a.models, ka, Form::Entry, (2.0, 6_000_000), false, true);
        let predict = |m: TimingModel| m.predict(4).expect("learned");
        assert!(
            (38_000_000..=42_000_000).contains(&predict(model(&ka))),
            "the kernel's model keeps the kernel's speed: {:?}",
            model(&ka).predict(4)
        );
        assert_eq!(
            a.models.get(dev),
            model(&ka),
            "the class's copy (what the launch path reads) is the kernel's model"
        );
        assert!(
            (11_000_000..=13_000_000).contains(&predict(entry_model(&ka))),
            "a yielding run is sized by its entry's: {:?}",
            entry_model(&ka).predict(4)
        );
        forget_kernel(&a);
        assert_eq!(entry_model(&ka).samples(), 0, "forgotten with the class");
    }

    #[test]
    fn an_entry_is_predicted_only_once_past_its_first_run() {
        let a = class();
        let dev = 0x3000;
        let ka = (a.id, dev);
        observe(&a.models, ka, Form::Kernel, (2.0, 20_000_000), false, true);
        observe(&a.models, ka, Form::Kernel, (2.0, 20_000_000), false, true);
        assert_eq!(entry_predicted(&ka, 2), None, "no entry run yet");
        observe(&a.models, ka, Form::Entry, (2.0, 100_000_000), true, true);
        assert_eq!(
            entry_predicted(&ka, 2),
            None,
            "its first run alone may have been cold"
        );
        observe(&a.models, ka, Form::Entry, (2.0, 100_000_000), false, true);
        let p = entry_predicted(&ka, 2).expect("two runs that agree");
        assert!((90_000_000..=110_000_000).contains(&p), "{p}");
        assert!(
            !super::super::yielding::entry_pays(p, 20_000_000),
            "five times the kernel's time: not worth its yields"
        );
        forget_kernel(&a);
        assert_eq!(entry_predicted(&ka, 2), None, "forgotten with the class");
    }
}
