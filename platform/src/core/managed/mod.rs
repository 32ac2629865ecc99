//! Managed command queues: a software FIFO and a submitter thread per queue, obeying the
//! device's cross-process arbiter, and cutting kernel launches into slices.
//!
//! Every command queue on a SoftPreempt device gets a [`Managed`]. A command takes one of
//! three paths:
//!
//! - **Fast path** (the common case): nothing of this queue is waiting in software and no
//!   higher-priority client is registered on the device, so the command goes straight to
//!   the vendor in the caller's thread. If a *lower* priority is registered, the queue
//!   announces its demand and goes idle when its work completes, so the lower one yields.
//! - **Deferred**: kernel launches (and markers/barriers, which must keep their place)
//!   enter the FIFO; the submitter issues them as the arbiter grants, slice by slice, at
//!   most `max_inflight` slices on the vendor queue. The application's event is a vendor
//!   user event, set when the last slice completes (see [`deferred`]).
//! - **Drained**: any other command, while the FIFO is not empty, first waits until every
//!   earlier command has reached the vendor, then goes to the vendor in the caller's
//!   thread. The vendor then checks its arguments and returns its errors synchronously, as
//!   without the layer, and the in-order vendor queue keeps the order.
// Handles passed around here are opaque vendor objects, never dereferenced by us.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

pub mod arbiter;
pub mod completion;
pub mod deferred;
pub mod failing;
pub mod launch;
pub mod models;
mod profiles;
mod readiness;
mod submitter;
mod unsynced;
pub mod yielding;

pub use submitter::forget_kernel;

use softpreempt_sched::{Client, Priority};
use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::config::{self, SliceMode};
use crate::core::cl::*;
use crate::core::error::CLResult;
use crate::core::forward::Inner;
use crate::core::handle::Obj;
use crate::core::platform::{Device, Platform, WorkersHeld};
pub use deferred::Deferred;
pub use submitter::{Launch, Retained};

/// A deferred vendor call: gets the inner queue, the inner wait list and an out-event.
pub type Call = Box<
    dyn FnOnce(&Inner<cl_command_queue>, cl_uint, *const cl_event, *mut cl_event) -> CLResult<()>
        + Send,
>;

/// What a deferred command does.
// A launch is much larger than a call; boxing it would add an allocation to every deferred
// launch, which is moved once into the FIFO and once out: not worth it.
#[allow(clippy::large_enum_variant)]
pub enum Work {
    /// A kernel launch, cut into slices when allowed.
    Launch(Launch),
    /// Any other deferred command: one vendor call.
    Call(Call),
}

/// One command waiting in the software FIFO.
pub struct Command {
    pub work: Work,
    /// Inner wait-list events, retained until the command reaches the vendor.
    pub wait: Vec<Retained>,
    /// Inner objects the command uses, retained until it reaches the vendor (the
    /// application may release them right after enqueueing).
    pub keep: Vec<Retained>,
    /// The application's event, when it asked for one.
    pub event: Option<Arc<Deferred>>,
}

// SAFETY: a command holds vendor handles (thread-safe OpenCL objects) and application
// pointers whose targets the application must keep valid until the command completes, as
// the OpenCL specification requires of every enqueued command.
unsafe impl Send for Command {}

#[derive(Default)]
struct State {
    fifo: VecDeque<Command>,
    /// The submitter is working on a command it took from the FIFO.
    busy: bool,
    shutdown: bool,
    thread_started: bool,
    /// The submitter has retired everything and stopped (after `shutdown`).
    stopped: bool,
}

/// The managed side of one command queue.
pub struct Managed {
    pub inner: Inner<cl_command_queue>,
    /// `None`: the arbiter could not be opened; the queue runs in pass-through.
    client: Option<Client>,
    /// The device's arbiter (for the yield watcher).
    arbiter: Option<Arc<softpreempt_sched::Arbiter>>,
    /// The control words of its yielding launches, made on first use (`None` inside:
    /// the vendor could not give them).
    control: once_cell::sync::OnceCell<Option<Arc<yielding::Control>>>,
    pub priority: Priority,
    mode: SliceMode,
    /// `sched.target_slice_us` in ns, when configured (see [`Managed::target_ns`]).
    target_cfg_ns: Option<u64>,
    gpu: bool,
    /// `sched.piece_us` in ns: the piece length while no higher priority is active.
    piece_ns: u64,
    /// Whether every long launch is cut into pieces while no higher priority is active
    /// (bounded arrival): on a GPU only where `sched.piece_us` is set; otherwise a kernel's
    /// first [`LEARN_ALONE`] long launches only, and a registered higher priority changes
    /// nothing while it is idle (see [`DEFAULT_PIECE_GPU_US`], [`Managed::goes_as_alone`]).
    pieces_alone: bool,
    max_inflight: usize,
    /// Commands in the FIFO or being submitted; the fast path needs it to be zero.
    pending: AtomicUsize,
    /// Fast-path commands not yet complete while a lower priority is registered.
    outstanding: AtomicUsize,
    state: Mutex<State>,
    /// Wakes the submitter (new work, shutdown) and drain waiters (progress).
    cv: Condvar,
    /// Device-clock offset from the host's CLOCK_MONOTONIC, for QUEUED times.
    clock_offset: Option<i128>,
    pub profiling: bool,
    /// Slices of an out-of-order queue could finish in any order, so its launches are
    /// never sliced (the last slice's completion would not mean the launch's).
    pub in_order: bool,
    /// The device, for slicing decisions (work-group limits).
    pub device: Inner<cl_device_id>,
    /// The queue's name in traces and `softpreempt status`.
    pub label: String,
    /// Deferred events handed out and not yet known complete (settled by `finish`).
    open_events: Mutex<Vec<std::sync::Weak<Deferred>>>,
    /// Commands of this queue that reached the vendor unready (see [`Managed::ready`]).
    unready: readiness::Tail,
    /// Watched direct commands not yet seen complete.
    watches: Mutex<Vec<Arc<Watch>>>,
    /// Predicted device time of short launches sent direct and not yet complete (see
    /// [`Managed::claim_direct`]).
    direct_ns: AtomicU64,
    /// Watched direct commands that have reached the vendor, in that order (each watch
    /// keeps its number, [`Watch::on_vendor`]).
    direct_seq: AtomicU64,
    /// The bound on watches the application never synchronises with has this queue in
    /// hand (see `unsynced`).
    sync_armed: std::sync::atomic::AtomicBool,
    /// Threads of the application waiting in a synchronisation call on this queue
    /// (`clFinish`, a blocking command, `clWaitForEvents` on its events), and status polls
    /// of its events that found them incomplete: while either is at work, the bound on
    /// unsynchronised commands waits (see `unsynced`).
    syncing: AtomicUsize,
    polls: AtomicU64,
    /// A low-priority queue on a CPU device: the platform whose device threads go to the
    /// idle class once a higher priority registers (see [`Managed::must_defer`]).
    os_platform: Option<&'static Obj<Platform>>,
    /// A queue above low priority on a CPU device keeps the device's threads ordinary.
    _workers_held: Option<WorkersHeld>,
}

/// An application thread waiting in a synchronisation call on a queue
/// ([`Managed::syncing`]).
pub struct Syncing<'a>(&'a Managed);

impl Drop for Syncing<'_> {
    fn drop(&mut self) {
        self.0.syncing.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A direct command whose completion ends the demand it raised (see
/// [`Managed::direct_submitted`]): completed once, by whichever comes first of the
/// application's synchronisation (`clFinish`, a blocking command after it, its event seen
/// complete), the bound on a queue that stopped moving (`unsynced`), or, for a short
/// launch under the direct budget, the vendor's callback on the event that tracks it.
pub struct Watch {
    m: Arc<Managed>,
    /// The command's vendor event, once it exists.
    event: AtomicUsize,
    done: std::sync::atomic::AtomicBool,
    /// It raised demand (a lower priority is registered).
    demand: bool,
    /// Budget it claimed (a short launch sent direct).
    claim: u64,
    /// Its place among the queue's watched commands on the vendor (0: not there yet).
    seq: AtomicU64,
}

impl Watch {
    /// It is a short launch sent direct under the budget (not a higher priority's
    /// command, whose own event costs it nothing: see `completion`).
    pub fn claimed(&self) -> bool {
        self.claim > 0
    }

    /// The command is on the vendor's queue now.
    pub fn on_vendor(&self) {
        let n = self.m.direct_seq.fetch_add(1, Ordering::AcqRel) + 1;
        self.seq.store(n, Ordering::Release);
    }

    /// Records the command's vendor event.
    pub fn set_event(&self, e: cl_event) {
        self.event.store(e as usize, Ordering::Release);
    }

    /// The command is complete: its demand ends (once).
    pub fn complete(self: &Arc<Self>) {
        if self.done.load(Ordering::Acquire) {
            return;
        }
        self.m.lock_watches().retain(|w| !Arc::ptr_eq(w, self));
        self.end();
    }

    /// [`Watch::complete`] for a watch already taken out of the queue's list.
    fn end(&self) {
        if self.done.swap(true, Ordering::AcqRel) {
            return;
        }
        if self.claim > 0 {
            self.m.unclaim_direct(self.claim);
        }
        if self.demand {
            self.m.direct_done();
        }
    }
}

use softpreempt_sched::monotonic_ns;

/// `sched.target_slice_us` when unset. On an H100 (docs/benchmarks.md) 250 µs slices keep
/// a bursty HP's p99 within 1.2x of alone against 2x at 1000 µs, at the same LP
/// throughput.
pub const DEFAULT_TARGET_US: u64 = 250;
/// `sched.target_slice_us` when unset, for a low queue on a CPU device whose threads its
/// process runs in the idle class (`core::os_priority`). PoCL costs about 25 µs a command
/// on 2 cores (measured bare), so 250 µs slices cost a low-priority process 9-12% of its
/// throughput; with its threads in the idle class the slice that runs when a higher
/// priority arrives hardly delays it, and 1000 µs slices gave an HP p99 of 0.99x alone
/// (single 0.45 ms kernel) and 1.22x (bursts of 5 x 0.5 ms) with the LP at 0.99 and 0.92
/// of its bare co-run throughput, against 1.17x / 1.15x and 0.89 / 0.84 at 250 µs
/// (docs/benchmarks.md).
pub const DEFAULT_TARGET_IDLE_CLASS_US: u64 = 1_000;

/// `sched.piece_us` when unset, on a GPU: about NVIDIA's own hand-over between processes.
/// While no higher priority is active (none registered, or one idle for
/// [`ACTIVE_WINDOW`]) a GPU queue cuts only a kernel's first [`LEARN_ALONE`] long launches,
/// unless `piece_us` is set: the driver hands the device over between processes by
/// itself, which pieces of its own hand-over's length cannot beat, and every command
/// behind a cut launch waits for the submitter thread (on an H200, tinygrad's lone
/// training LP kept 0.93 of its bare throughput with 2 ms pieces and 1.00 without;
/// docs/benchmarks.md, sessions 36 and 37).
pub const DEFAULT_PIECE_GPU_US: u64 = 2_000;

/// `sched.piece_us` when unset, on other devices: PoCL pays about 30 µs per launch on a
/// 2-core machine, under 0.5% of an 8 ms piece.
pub const DEFAULT_PIECE_OTHER_US: u64 = 8_000;

/// A test hook, not a setting: with `SOFTPREEMPT_TEST_GPU_PIECES` set, a queue on any
/// device cuts a lone process's launches as a GPU queue does ([`LEARN_ALONE`]), so tests on
/// PoCL reach that path (`tests/managed_trace.rs`).
fn test_gpu_pieces() -> bool {
    static ON: once_cell::sync::Lazy<bool> =
        once_cell::sync::Lazy::new(|| std::env::var_os("SOFTPREEMPT_TEST_GPU_PIECES").is_some());
    *ON
}

/// A kernel's long launches that a lone GPU queue still cuts into pieces (with
/// `piece_us` unset): what they teach (its timing model, and the long pieces the slice
/// target's quick rule compares slices with) is what its launches are planned with once a
/// higher priority comes. Sent whole from the start, the benchmark's Mandelbrot LP kept
/// 0.954 of its bare co-run throughput on an H100 against 1.045; with 4 such launches, one
/// of two co-runs never asked it to yield (docs/benchmarks.md, session 36).
pub const LEARN_ALONE: u32 = 16;

/// How long after a higher priority last wanted the device (or registered) lower clients
/// keep cutting at the slice target; after it they cut only into pieces (`piece_us`), and
/// the higher one's next request waits for at most one piece.
pub const ACTIVE_WINDOW: std::time::Duration = std::time::Duration::from_millis(500);

/// The OS-priority side of a new queue on a CPU device (see `core::os_priority`): a low
/// queue gets its platform, whose device threads it moves to the idle class once a
/// higher priority registers; a queue above low holds them in the ordinary class while it
/// lives, as its kernels run on them too. Only with an arbiter and `cpu_idle_class` on.
fn os_priority_for(
    device: &Device,
    priority: Priority,
    arbitrated: bool,
    cfg: &config::Config,
) -> (Option<&'static Obj<Platform>>, Option<WorkersHeld>) {
    if !arbitrated || !cfg.sched.cpu_idle_class || !launch::is_cpu(&device.inner) {
        return (None, None);
    }
    let p = device.platform;
    if priority.level != softpreempt_sched::Level::Low {
        return (None, Some(Platform::hold_workers(p)));
    }
    (Some(p), None)
}

/// Device time minus host monotonic time, from `clGetDeviceAndHostTimer` when the vendor
/// has it (its host clock is CLOCK_MONOTONIC on Linux for the vendors we know).
fn clock_offset(device: &Inner<cl_device_id>) -> Option<i128> {
    let f = device.vt.clGetDeviceAndHostTimer?;
    let (mut d, mut h) = (0u64, 0u64);
    // SAFETY: two cl_ulong out-values.
    let rc = unsafe { f(device.h, &mut d, &mut h) };
    (rc == CL_SUCCESS).then(|| d as i128 - h as i128)
}

impl Managed {
    /// Sets up management for a new queue: registers a client on the device's arbiter.
    /// Never fails: without an arbiter the queue runs in pass-through (logged once).
    pub fn new(
        inner: Inner<cl_command_queue>,
        device: &Device,
        hint: Option<cl_queue_priority_khr>,
        profiling: bool,
        out_of_order: bool,
        label: &str,
    ) -> Arc<Managed> {
        let cfg = config::config();
        let priority = arbiter::queue_priority(hint);
        if crate::trace::enabled() {
            crate::trace::name_queue(label, &priority.to_string());
        }
        let arbiter = arbiter::arbiter_for(device);
        crate::core::memory::note_queue_priority(device, priority);
        // The segment's creator fixed the in-flight limit every client obeys.
        let segment_inflight = arbiter
            .as_ref()
            .map_or(2, |a| a.policy().max_inflight as usize);
        let gpu = launch::is_gpu(&device.inner);
        let target_cfg_ns = cfg.sched.target_slice_us.map(|t| t.saturating_mul(1000));
        // What a quick return is worth to this queue, for its learned linger: about what
        // its next command would wait for a lower queue's running and queued pieces.
        let worth = std::time::Duration::from_nanos(
            target_cfg_ns
                .unwrap_or(DEFAULT_TARGET_US * 1000)
                .saturating_mul(2),
        );
        let (os_platform, workers_held) = os_priority_for(device, priority, arbiter.is_some(), cfg);
        let client = arbiter.as_ref().and_then(|a| {
            a.register(arbiter::client_info(priority, label).with_linger_worth(worth))
                .map_err(|e| {
                    // An error, as when the segment cannot be opened: preemption is off for
                    // this queue, which the default log level must show (once).
                    crate::error_once!(
                        "arbiter-register",
                        "softpreempt: cannot register with the device arbiter: {e}; \
                         queues run in pass-through"
                    )
                })
                .ok()
        });
        let m = Arc::new(Managed {
            inner,
            client,
            arbiter,
            control: Default::default(),
            priority,
            mode: cfg.sched.slice,
            target_cfg_ns,
            gpu,
            pieces_alone: !(gpu || test_gpu_pieces()) || cfg.sched.piece_us.is_some(),
            piece_ns: cfg
                .sched
                .piece_us
                .unwrap_or(if gpu {
                    DEFAULT_PIECE_GPU_US
                } else {
                    DEFAULT_PIECE_OTHER_US
                })
                .saturating_mul(1000),
            max_inflight: (cfg.sched.max_inflight as usize)
                .clamp(1, 2)
                .min(segment_inflight.max(1)),
            pending: AtomicUsize::new(0),
            outstanding: AtomicUsize::new(0),
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
            clock_offset: if profiling {
                clock_offset(&device.inner)
            } else {
                None
            },
            profiling,
            in_order: !out_of_order,
            device: device.inner.clone(),
            label: label.to_string(),
            open_events: Mutex::new(Vec::new()),
            unready: readiness::Tail::default(),
            watches: Mutex::new(Vec::new()),
            direct_ns: AtomicU64::new(0),
            direct_seq: AtomicU64::new(0),
            sync_armed: std::sync::atomic::AtomicBool::new(false),
            syncing: AtomicUsize::new(0),
            polls: AtomicU64::new(0),
            os_platform,
            _workers_held: workers_held,
        });
        yielding::watch_queue(&m);
        m
    }

    /// The control words of this queue's yielding launches (made on first use).
    pub fn control(&self) -> Option<Arc<yielding::Control>> {
        self.control
            .get_or_init(|| yielding::Control::new(&self.inner, &self.device).map(Arc::new))
            .clone()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The slice target in ns: `sched.target_slice_us`, else 250 µs, or 1000 µs on a CPU
    /// device whose threads this (low) queue's process runs in the idle class (see
    /// `DEFAULT_TARGET_IDLE_CLASS_US`; where they could not be found, as when the application
    /// enumerated the bare vendor's devices first, short slices are what keeps a higher
    /// priority's latency down).
    pub fn target_ns(&self) -> u64 {
        if let Some(t) = self.target_cfg_ns {
            return t;
        }
        let idle = self.os_platform.is_some_and(|p| p.get().threads.idle());
        if self.gpu || !idle {
            DEFAULT_TARGET_US * 1000
        } else {
            DEFAULT_TARGET_IDLE_CLASS_US * 1000
        }
    }

    /// Whether a new command must go through the FIFO (rather than straight to the
    /// vendor): earlier commands are still in software, slicing is forced, or a higher
    /// priority is registered on the device (then every kernel piece needs a grant),
    /// unless the operating system already puts this queue's work behind it, or it is a
    /// GPU's and the higher one is idle ([`Managed::goes_as_alone`]).
    pub fn must_defer(&self) -> bool {
        if self.pending.load(Ordering::Acquire) > 0 {
            return true;
        }
        let Some(c) = &self.client else { return false };
        if self.mode == SliceMode::Always {
            return true;
        }
        self.higher_registered(c) && !self.os_preempts() && !self.goes_as_alone(c)
    }

    /// Whether this queue, with a higher priority registered, sends its commands as it
    /// does alone: on a GPU (whose driver hands the device over between processes by
    /// itself) while no higher priority has wanted the device for `ACTIVE_WINDOW`, with
    /// `piece_us` unset. Its activity is then recorded in the segment, so the higher
    /// one's next command raises demand and this queue defers again from its next
    /// command. Cutting long launches into pieces for an idle higher priority instead
    /// cost tinygrad's training LP 2-5% of its lone rate on an H100 (0.949-0.977,
    /// docs/benchmarks.md, session 37), for a first request after an idle spell that
    /// waited one piece rather than the driver's hand-over (0.93 against 2.27 ms, bare
    /// 2.87): the same trade a lone queue makes ([`LEARN_ALONE`]).
    fn goes_as_alone(&self, c: &Client) -> bool {
        !self.pieces_alone && !c.higher_active_or_note(ACTIVE_WINDOW)
    }

    /// Whether the operating system preempts this queue's device work for any other
    /// process's: a low queue on a CPU device whose threads this process runs in the idle
    /// class. A higher priority's workers then take the cores from the moment they wake,
    /// whatever this queue has queued on the vendor, so its launches go as they do alone
    /// (only those long enough to be cut into pieces, or not yet learned, through the
    /// FIFO, where they also yield when asked). Sent through the FIFO one by one under the
    /// in-flight budget instead, each launch of tinygrad's training step waited for the
    /// submitter thread, and the LP kept 0.60 of its lone rate next to an idle registered
    /// HP, against 1.04 so (PoCL, docs/benchmarks.md, session 37).
    fn os_preempts(&self) -> bool {
        self.os_platform.is_some_and(|p| p.get().threads.idle())
    }

    /// Whether this is a low queue on a CPU device whose threads may go to the idle class
    /// (see `os_priority`): its submitter then never preempts another thread
    /// (`os_priority::no_wakeup_preemption`).
    pub fn low_on_cpu_device(&self) -> bool {
        self.os_platform.is_some()
    }

    /// For the watcher: moves this low queue's CPU device threads to the idle class if a
    /// higher priority is registered (see [`Managed::higher_registered`]).
    pub fn idle_workers_if_outranked(&self) {
        if let (Some(_), Some(c)) = (self.os_platform, &self.client) {
            self.higher_registered(c);
        }
    }

    /// Whether a higher priority is registered on the device. The first time one is, a
    /// low queue on a CPU device moves the device's threads to the idle class, so the OS
    /// gives the cores to anyone else first (one atomic load after that).
    fn higher_registered(&self, c: &Client) -> bool {
        let higher = c.higher_priority_registered();
        if higher {
            if let Some(p) = self.os_platform {
                p.get().threads.make_idle();
            }
        }
        higher
    }

    /// Whether long launches of kernel `class` on this queue are cut into pieces even while
    /// it need not defer (rule 6): slicing is `contended`, the queue has an arbiter, and
    /// its device is not a GPU, or `sched.piece_us` is set, or the kernel is still being
    /// learned ([`LEARN_ALONE`]).
    pub fn cuts_alone(&self, class: &crate::core::objects::KernelClass) -> bool {
        self.mode == SliceMode::Contended
            && self.client.is_some()
            && (self.pieces_alone || class.learned_alone.load(Ordering::Relaxed) < LEARN_ALONE)
    }

    /// Whether slicing is `contended` (the default): only then is a kernel's slice target
    /// adapted to what slicing costs it.
    pub fn contended_mode(&self) -> bool {
        self.mode == SliceMode::Contended
    }

    /// The longest piece while no higher priority is active, ns (`sched.piece_us`).
    pub fn piece_ns(&self) -> u64 {
        self.piece_ns
    }

    /// The length to cut sliceable launches at right now: the slice target while a
    /// higher priority is active (or slicing is `always`), else the piece length; `None`
    /// with `slice = "never"` or without an arbiter.
    pub fn slice_target(&self) -> Option<u64> {
        match (self.mode, self.client.as_ref()) {
            (SliceMode::Never, _) | (_, None) => None,
            (SliceMode::Always, Some(_)) => Some(self.target_ns()),
            (SliceMode::Contended, Some(c)) => Some(
                if self.higher_registered(c) && c.higher_priority_active(ACTIVE_WINDOW) {
                    self.target_ns()
                } else {
                    self.piece_ns.max(self.target_ns())
                },
            ),
        }
    }

    /// Whether earlier commands are still in software (a direct command must drain).
    pub fn has_pending(&self) -> bool {
        self.pending.load(Ordering::Acquire) > 0
    }

    /// The device-clock time of "now", for a deferred command's QUEUED time.
    pub fn queued_time(&self) -> Option<u64> {
        self.clock_offset
            .map(|off| (monotonic_ns() as i128 + off).max(0) as u64)
    }

    /// Puts a command in the FIFO and wakes the submitter (starting it on first use).
    pub fn push(self: &Arc<Self>, cmd: Command) {
        if let Some(e) = &cmd.event {
            let mut open = self.open_events.lock().unwrap_or_else(|e| e.into_inner());
            open.retain(|w| w.strong_count() > 0);
            open.push(Arc::downgrade(e));
        }
        // A ready launch raises demand now, not when the submitter thread first gets to
        // it: a lower queue deciding meanwhile whether its short launch may go straight to
        // the vendor must already see it. The submitter drops demand when its FIFO drains.
        // (An unready one never raises it: see `direct_submitted`.)
        if let (Work::Launch(_), Some(c)) = (&cmd.work, &self.client) {
            let waits: Vec<cl_event> = cmd.wait.iter().map(|r| r.handle()).collect();
            if c.lower_priority_registered() && self.ready(&waits) {
                c.announce_demand();
            }
        }
        self.pending.fetch_add(1, Ordering::AcqRel);
        let mut st = self.lock();
        st.fifo.push_back(cmd);
        if !st.thread_started {
            st.thread_started = true;
            let me = self.clone();
            let spawned = std::thread::Builder::new()
                .name("softpreempt-submit".into())
                .spawn(move || submitter::run(me));
            if let Err(e) = spawned {
                st.thread_started = false;
                tracing::error!("softpreempt: cannot start a submitter thread: {e}");
                // Submit in this thread instead, so nothing is lost.
                drop(st);
                submitter::run_now(self);
                return;
            }
        }
        drop(st);
        self.cv.notify_all();
    }

    /// Waits until every command in software has reached the vendor. Inline: every
    /// direct command calls it, and mostly finds nothing.
    #[inline]
    pub fn drain(&self) {
        if self.pending.load(Ordering::Acquire) == 0 {
            return;
        }
        self.wait_drained();
    }

    #[cold]
    fn wait_drained(&self) {
        let from = crate::trace::enabled().then(monotonic_ns);
        let mut st = self.lock();
        while !st.fifo.is_empty() || st.busy {
            st = self.cv.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        drop(st);
        if let Some(from) = from {
            crate::trace::drain(&self.label, from, monotonic_ns());
        }
    }

    /// After the vendor's clFinish: every deferred event is complete; set those whose
    /// vendor callback has not run yet, so their status reads CL_COMPLETE at once.
    pub fn settle_all(&self) {
        let open: Vec<_> = {
            let mut open = self.open_events.lock().unwrap_or_else(|e| e.into_inner());
            std::mem::take(&mut *open)
        };
        for d in open.iter().filter_map(|w| w.upgrade()) {
            d.settle();
        }
    }

    /// Stops the submitter after it has submitted everything (queue released), and waits
    /// (a bounded time) until it has retired its pieces and written their traces and
    /// profile lines: a process that exits right after releasing its queue would lose them.
    pub fn shutdown(&self) {
        self.drain();
        // Nothing can synchronise with its commands any more: their demand ends here (the
        // vendor finishes them as it would without the layer).
        self.finished_all();
        let mut st = self.lock();
        st.shutdown = true;
        self.cv.notify_all();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while st.thread_started && !st.stopped {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            st = self
                .cv
                .wait_timeout(st, left)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }

    /// Whether a command with wait list `waits`, enqueued on the vendor queue now, can run
    /// to completion by the vendor's work alone: every event it waits for is ready (see
    /// `readiness`), and so is every earlier command of this queue that reached the vendor
    /// unready (an in-order queue runs nothing past it; an out-of-order queue is treated
    /// the same, for its barriers).
    ///
    /// Only a ready command may hold the device in the arbiter's eyes: take a grant or an
    /// in-flight place (a piece in the submitter's window) or raise demand (a watched
    /// direct command). A command that is not ready reaches the vendor at once, holding
    /// nothing, and is remembered ([`Managed::note_unready`]) until it completes.
    pub fn ready(&self, waits: &[cl_event]) -> bool {
        let vt = self.inner.vt;
        waits
            .iter()
            .all(|&e| readiness::dep_ready(vt, e, deferred::status_of(vt, e)))
            && self.unready.ready(vt)
    }

    /// [`Managed::ready`] for a command whose dependencies' statuses were read already.
    fn ready_with(&self, waits: &[cl_event], statuses: &[cl_int]) -> bool {
        let vt = self.inner.vt;
        waits
            .iter()
            .zip(statuses)
            .all(|(&e, &s)| readiness::dep_ready(vt, e, s))
            && self.unready.ready(vt)
    }

    /// Remembers `ev`, the vendor event of a command that reached this queue unready (see
    /// [`Managed::ready`]), until it completes.
    pub fn note_unready(&self, ev: cl_event) {
        self.unready.note(self.inner.vt, ev);
    }

    /// Fast path bookkeeping, before a ready command (see [`Managed::ready`]) goes to the
    /// vendor directly: when a lower priority is busy on the device, raise demand until
    /// the command completes, so the lower one yields at its next slice boundary. Returns the
    /// watch to complete when the command is seen complete, if it is to be watched.
    ///
    /// A command that is not ready is never watched: its demand could hold the device
    /// from lower priorities until the application sets a user event, perhaps never if it
    /// first waits for one of those lower-priority queues.
    ///
    /// `claim` is the predicted device time of a short launch sent direct under the
    /// budget ([`Managed::claim_direct`]), given back when the command completes.
    #[inline]
    pub fn direct_submitted(self: &Arc<Self>, ready: bool, claim: u64) -> Option<Arc<Watch>> {
        let c = self.client.as_ref()?;
        // Only a busy lower client has anything to yield: next to an idle one (or none)
        // a command costs no demand bookkeeping at all. Should the lower one start
        // meanwhile, it queues at most one piece before it sees the demand of this
        // queue's next command. Next to a busy one the command costs demand and a watch,
        // and still no vendor call (issue 24: `defer::synced`). A queue whose earlier
        // commands' demand is still raised goes on demanding without looking again.
        let demand = ready
            && (self.outstanding.load(Ordering::Acquire) > 0
                || c.lower_priority_active(ACTIVE_WINDOW));
        if !demand && claim == 0 {
            return None;
        }
        self.watch(c, demand, claim)
    }

    /// [`Managed::direct_submitted`] for a command to be watched.
    #[cold]
    fn watch(self: &Arc<Self>, c: &Client, demand: bool, claim: u64) -> Option<Arc<Watch>> {
        // The first command of a request raises demand and waits for lower clients to
        // leave the device; the ones after it, while its demand stands, find it raised
        // and no lower client on the device (none enters while a higher one demands, rule
        // 10), so they touch the segment no more: on an H100 next to an active LP those
        // looks cost about as much as the commands' whole forwarding.
        if demand && self.outstanding.fetch_add(1, Ordering::AcqRel) == 0 {
            c.announce_demand();
            c.note_behind();
            self.handshake(c);
        }
        let w = Arc::new(Watch {
            m: self.clone(),
            event: AtomicUsize::new(0),
            done: std::sync::atomic::AtomicBool::new(false),
            demand,
            claim,
            seq: AtomicU64::new(0),
        });
        self.lock_watches().push(w.clone());
        Some(w)
    }

    /// Rule 10: before this client's command reaches the vendor, lower clients' yielding
    /// launches on the device are asked to stop, and it waits (at most as long as they
    /// say they need, and `sched.yield_wait_us`) until they are off. With none on the
    /// device this is one look at the segment.
    ///
    /// On a GPU it spins for the whole wait (`Client::claim_device_spinning`): a futex
    /// wait ended late, and the HP next to an LP whose bound was about 0.1 ms waited
    /// 0.16 ms on average (an H100, the preemption benchmark's compute row). On a CPU
    /// device it spins briefly and sleeps, leaving the cores to the threads it waits for.
    fn handshake(&self, c: &Client) {
        let cap = config::config().sched.yield_wait_us;
        if cap > 0 {
            let cap = std::time::Duration::from_micros(cap);
            let hs = if self.gpu {
                c.claim_device_spinning(cap, cap)
            } else {
                c.claim_device(cap)
            };
            if hs.waited_ns > 0 && crate::trace::enabled() {
                let now = monotonic_ns();
                let from = now.saturating_sub(hs.waited_ns);
                crate::trace::handshake(&self.label, from, now, hs.expired);
            }
        }
    }

    /// Whether a launch predicted to take `pred_ns` may go straight to the vendor while a
    /// higher priority is registered: nothing of this queue waits in software, slicing is
    /// not forced, no higher priority wants the device now, and the direct launches not
    /// yet complete, this one included, stay within the budget (the slice target), which
    /// is then all an arriving higher priority can find queued. Claims the budget.
    ///
    /// Short launches so skip the FIFO, the kernel snapshot and the submitter thread,
    /// which would cost them more than the launch itself.
    pub fn claim_direct(&self, pred_ns: u64) -> bool {
        let Some(c) = &self.client else {
            return false;
        };
        if self.mode == SliceMode::Always || self.has_pending() || c.should_yield() {
            return false;
        }
        let budget = self.target_ns();
        self.direct_ns
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
                (v.saturating_add(pred_ns) <= budget).then_some(v + pred_ns)
            })
            .is_ok()
    }

    /// Gives back a budget claim that no command took (its enqueue failed).
    pub fn unclaim_direct(&self, pred_ns: u64) {
        self.direct_ns.fetch_sub(pred_ns, Ordering::AcqRel);
    }

    fn lock_watches(&self) -> MutexGuard<'_, Vec<Arc<Watch>>> {
        self.watches.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The application saw vendor event `e` of this queue complete (`clWaitForEvents`, a
    /// status query, its completion callback): a watched direct command it belongs to is
    /// done now, and on an in-order queue so is every one before it. The vendor's
    /// completion callback says the same, but NVIDIA delivers it milliseconds late, and
    /// until then the demand would keep lower priorities off an idle device.
    pub fn seen_complete(&self, e: cl_event) {
        let w = self
            .lock_watches()
            .iter()
            .find(|w| w.event.load(Ordering::Acquire) == e as usize)
            .cloned();
        if let Some(w) = w {
            // On an in-order queue one pass ends it and every watch before it.
            match w.seq.load(Ordering::Acquire) {
                seq if self.in_order && seq > 0 => self.complete_upto(seq),
                _ => w.complete(),
            }
        }
    }

    /// Where the queue's watched direct commands on the vendor have got to: pass it to
    /// [`Managed::complete_upto`] once a later command is known complete.
    pub fn vendor_mark(&self) -> u64 {
        self.direct_seq.load(Ordering::Acquire)
    }

    /// A blocking command of this in-order queue, enqueued after `mark`
    /// ([`Managed::vendor_mark`]), returned: every command the queue had before it is
    /// complete, so the watched direct commands up to `mark` are done. The vendor's
    /// callbacks would say so milliseconds later on NVIDIA, holding lower priorities off
    /// (a high-priority request that ends in a blocking read, as OpenCV's `UMat::get`
    /// does) or keeping a low queue's direct budget spent. Out-of-order queues complete in
    /// any order: nothing is concluded for them.
    pub fn complete_upto(&self, mark: u64) {
        if !self.in_order || mark == 0 {
            return;
        }
        let done: Vec<Arc<Watch>> = {
            let mut ws = self.lock_watches();
            let (done, open) = std::mem::take(&mut *ws)
                .into_iter()
                .partition(|w| (1..=mark).contains(&w.seq.load(Ordering::Acquire)));
            *ws = open;
            done
        };
        for w in done {
            w.end();
        }
    }

    /// After the vendor's clFinish: every watched direct command of this queue is done.
    pub fn finished_all(&self) {
        let all = std::mem::take(&mut *self.lock_watches());
        for w in all {
            w.end();
        }
    }

    /// Whether a watched direct command of this queue is not yet known complete.
    fn has_watches(&self) -> bool {
        !self.lock_watches().is_empty()
    }

    /// A direct command whose demand only the application's synchronisation ends (no
    /// vendor event or callback tracks it) was left open: hands the queue to the bound on
    /// commands the application never synchronises with, unless it has it already. One
    /// atomic swap, except at the first such command after the bound let go.
    pub fn leave_to_sync(self: &Arc<Self>) {
        if !self.sync_armed.swap(true, Ordering::SeqCst) {
            unsynced::arm(self);
        }
    }

    /// The application waits in a synchronisation call for this queue's work until the
    /// guard drops (see `syncing`).
    pub fn syncing(&self) -> Syncing<'_> {
        self.syncing.fetch_add(1, Ordering::AcqRel);
        Syncing(self)
    }

    /// The application polled one of this queue's events and found it incomplete: it is
    /// waiting for the queue's work (see `syncing`).
    pub fn polled_incomplete(&self) {
        self.polls.fetch_add(1, Ordering::Relaxed);
    }

    /// A direct command's completion (see [`Managed::direct_submitted`]).
    fn direct_done(&self) {
        if self.outstanding.fetch_sub(1, Ordering::AcqRel) == 1
            && self.pending.load(Ordering::Acquire) == 0
        {
            if let Some(c) = &self.client {
                c.idle();
            }
        }
    }

    /// The arbiter client's statistics slot (for tests and `softpreempt status`).
    pub fn client(&self) -> Option<&Client> {
        self.client.as_ref()
    }
}

/// A test hook, not a setting: `SOFTPREEMPT_TEST_LATE_CALLBACK_MS` delays the handling
/// of direct commands' completion callbacks, as NVIDIA's driver delays the callbacks.
fn late_callbacks() -> Option<std::time::Duration> {
    static DELAY: once_cell::sync::Lazy<Option<std::time::Duration>> =
        once_cell::sync::Lazy::new(|| {
            std::env::var("SOFTPREEMPT_TEST_LATE_CALLBACK_MS")
                .ok()
                .and_then(|v| v.parse().ok())
                .map(std::time::Duration::from_millis)
        });
    *DELAY
}

/// Whether vendor event `e` has completed (or failed).
pub fn is_complete(vt: &cl_icd_dispatch, e: cl_event) -> bool {
    deferred::status_of(vt, e) <= CL_COMPLETE as cl_int
}

/// Vendor callback for a fast-path command's completion.
///
/// # Safety
/// Only the vendor calls this, with `data` from `Arc::into_raw` of a [`Watch`].
pub unsafe extern "C" fn on_direct_done(_e: cl_event, _status: cl_int, data: *mut c_void) {
    let r = std::panic::catch_unwind(|| {
        // SAFETY: the Arc reference given to the vendor with this callback.
        let w = unsafe { Arc::from_raw(data as *const Watch) };
        match late_callbacks() {
            // Emulates a driver that delivers completion callbacks late (NVIDIA), so
            // tests can show that demand ends without them (`tests/managed_handback.rs`).
            Some(delay) => {
                std::thread::spawn(move || {
                    std::thread::sleep(delay);
                    w.complete();
                });
            }
            None => w.complete(),
        }
    });
    if r.is_err() {
        tracing::error!("softpreempt: internal error in a completion callback (suppressed)");
    }
}
