//! Yielding launches on a managed queue (architecture, "Yielding launches"; rule 10).
//!
//! A launch whose kernel has a persistent entry (`core::yield_program`) runs as a grid of
//! persistent work-groups that take virtual groups from a ticket counter and stop between
//! two groups once the host writes the launch's epoch into the yield word. Here:
//!
//! - [`prepare`]: at enqueue, the entry kernel with the application's arguments, when the
//!   launch can yield (in order, uniform, a known local size, arguments that can be
//!   replayed);
//! - [`Control`]: each queue's control words (yield word, ticket counter), where the running
//!   kernel sees the host's writes: fine-grained SVM with atomics where the device has it
//!   (CPU devices such as PoCL read it in place), else a device buffer whose yield word is
//!   written through a second queue of the same context (NVIDIA: a mapped buffer is not
//!   seen by a running kernel);
//! - the watcher: one thread per device and process. It wakes on the arbiter's yield
//!   generation (a futex), and for every running launch whose client was asked to yield it
//!   writes the yield word, once. It also keeps the process's clients' leases alive.
//!
//! The submitter runs the launch (`submitter.rs`, `yield_launch`): enter the device (a
//! claim that says how long the launch needs to yield), launch, wait, and if a yield was
//! asked for, read the ticket: the launch is done, or it resumes later from the ticket
//! with a new epoch. An unyielded launch reads nothing back.
// Handles here are opaque vendor objects, never dereferenced by us.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use once_cell::sync::Lazy;
use softpreempt_sched::{Arbiter, DeviceClaim};
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use softpreempt_transform::{TICKET, YIELD_WORD};

use super::launch::Geometry;
use super::submitter::Retained;
use super::Managed;
use crate::config::{self, YieldMode};
use crate::core::cl::*;
use crate::core::forward::Inner;
use crate::core::handle::Obj;
use crate::core::held_context::HeldContext;
use crate::core::objects::{Kernel, Program};

/// Launches predicted shorter than this are not worth a yielding launch: the submitter
/// waits for each one before the next (so that it knows where a yield left it), which
/// costs a host round trip per launch.
pub const MIN_YIELD_NS: u64 = 500_000;

/// How much longer than the application's kernel a launch's yielding entry may run and
/// still be used (`entry_pays`).
pub const ENTRY_SLOWER: f64 = 1.2;

/// Whether a launch on a CPU device should run as its yielding entry, which its entry's
/// model predicts at `entry_ns`, rather than as the application's kernel (whole or in
/// pieces), predicted at `kernel_ns`. Rule 8 holds a yielding launch to costing the LP
/// nothing measurable; PoCL's compiler can make it cost far more. PoCL 3.1 on an AVX-512
/// EPYC ran a 2-D kernel's flat entry (`benches/kernel_cost.py`, `groups_2d`) in 55-74 ms
/// against 8-16 ms for the kernel (PoCL's implicit loop barriers, in a kernel that has a
/// barrier: `softpreempt_transform::FLAT_ONCE`, which now avoids them, and `pick_entry`).
/// A lone queue's launches then ran 4-5 times as long as bare, and an LP's would have
/// too. Past `ENTRY_SLOWER` the kernel goes as it would without
/// yielding: a higher priority then waits for a piece, sharing the cores meanwhile with
/// the LP's idle-class threads, and the LP keeps its speed. Not on a GPU: there the
/// entries cost the LPs measured 0-1.5% (the matrix rows on an H200), while the kernel's
/// model, learned from pieces, predicted the GEMM LP's launches more than a fifth below
/// its entry's runs, so its launches went as pieces and the HP's p99 rose from 0.92 to
/// 1.44 ms (`docs/benchmarks.md`, session 52).
pub fn entry_pays(entry_ns: u64, kernel_ns: u64) -> bool {
    entry_ns as f64 <= kernel_ns as f64 * ENTRY_SLOWER
}

/// The same on a GPU. Each yielding run empties the queue before it and makes the next
/// command wait for the host to see it end: 40-70 µs of idle device a run on an H200
/// (tinygrad's training step, traced). Below 5 ms that is more than about 1% of the
/// launch, and the driver's own hand-over between contexts (1-2 ms) bounds a higher
/// priority's wait behind such a launch nearly as well. tinygrad's training process kept
/// 0.94-0.95 of the bare co-run's steps with 0.5 ms here and 0.97-0.98 with 5 ms, its
/// server's p99 unchanged (`scripts/gpu/tinygrad-trace.sh`); the issue-23 LPs' launches
/// (12-50 ms) yield as before.
pub const MIN_YIELD_GPU_NS: u64 = 5_000_000;

/// What a stopped launch needs beyond its work-group: the yield word's write reaching the
/// running kernel (NVIDIA: a write through the second queue, 20-40 µs in the probe) and the
/// host seeing the launch end.
pub const SIGNAL_NS: u64 = 60_000;

/// A chunk of virtual groups (one ticket) should take about this long: a ticket costs a
/// read of the yield word, an atomic and a barrier in a row, which groups of 8.8 µs paid
/// with 4% of their throughput on an H100 (the preemption benchmark's compute LP, one
/// group a ticket: 52.0 ms a launch against the application kernel's 50.0), and a yield
/// waits for the chunk in progress.
pub const CHUNK_NS: u64 = 40_000;

/// The most groups one ticket hands out.
const MAX_CHUNK: u64 = 4096;

/// How many consecutive virtual groups a ticket hands out, for groups of `wave_ns` (a
/// wave of the persistent groups; `None`: not known yet, one a ticket).
pub fn chunk(wave_ns: Option<u64>) -> u32 {
    match wave_ns {
        Some(w) => (CHUNK_NS / w.max(1)).clamp(1, MAX_CHUNK) as u32,
        None => 1,
    }
}

/// Per (kernel class, device) on a GPU: how many runs nobody asked to stop were seen, and
/// the least ns a wave of their persistent groups took (see [`too_long_to_ask`] and
/// [`run_wave`]).
static RUN_WAVES: Lazy<Mutex<HashMap<(usize, usize), RunWaves>>> = Lazy::new(Default::default);

/// Runs seen, and the least ns a wave of them took.
type RunWaves = (u32, u64);

/// Records that a whole run of the kernel `key` nobody asked to stop took `wave_ns` a wave
/// of its persistent groups (`key`: `submitter::ModelKey`).
pub fn observed_run_wave(key: (usize, usize), wave_ns: u64) {
    let mut runs = RUN_WAVES.lock().unwrap_or_else(|e| e.into_inner());
    let e = runs.entry(key).or_insert((0, u64::MAX));
    *e = (e.0.saturating_add(1), e.1.min(wave_ns));
}

/// Forgets what runs showed of the kernel class `h` (its program is released or rebuilt).
pub fn forget_kernel(h: usize) {
    RUN_WAVES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|k, _| k.0 != h);
    YIELDS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|k, _| k.0 != h);
    ENTRY_RATES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|k, _| super::submitter::kernel_key(k).0 != h);
}

/// Which of a kernel's two flat entries a launch runs (`YieldKernel::alt_entry`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Entry {
    /// `YieldKernel::entry`: the body compiled as in the application's kernel.
    Main,
    /// `YieldKernel::alt_entry`: the body as PoCL compiles it beside a barrier.
    Alt,
}

/// Runs of each entry of a kernel before [`pick_entry`] compares them.
const ENTRY_RUNS: u32 = 2;

/// How much faster the second entry must have run, per virtual group, to be picked.
/// Where the two differ they differ by far (PoCL: a fifth of the speed, or 7 times it),
/// and where the body has no loop PoCL interchanges they are the same code: the margin
/// keeps the ordering of an uneven kernel's rows (runs cut short by a yield cover only
/// some of them) from deciding.
const ALT_FASTER: f64 = 1.5;

/// Per entry (its model key): device ns and virtual groups of its flat runs, asked to
/// stop or not, and how many runs.
static ENTRY_RATES: Lazy<Mutex<HashMap<(usize, usize), (u64, u64, u32)>>> =
    Lazy::new(Default::default);

/// A run of the flat entry whose model key is `key` ran `groups` virtual groups in `ns`.
/// Asked runs count as well: next to a busy higher priority nearly every run is asked,
/// and the entry's model, which learns only from whole runs, then never learns.
pub fn observed_entry_run(key: (usize, usize), groups: u64, ns: u64) {
    if groups == 0 {
        return;
    }
    let mut rates = ENTRY_RATES.lock().unwrap_or_else(|e| e.into_inner());
    let r = rates.entry(key).or_insert((0, 0, 0));
    *r = (r.0.saturating_add(ns), r.1.saturating_add(groups), r.2 + 1);
}

/// Which entry a CPU device's launch of kernel `key` runs. Neither is faster for every
/// kernel (`softpreempt_transform::FLAT_UNIFORM`: 5 times slower or 7 times faster than
/// the kernel, by kernel), so each runs [`ENTRY_RUNS`] runs (the main one first, whose
/// body is compiled as the kernel's is), and then the second runs where it took less than
/// 1/[`ALT_FASTER`] of the main one's time per virtual group. Under `chaos` the two take
/// turns, so that tests run both.
fn pick_entry(key: (usize, usize), mode: YieldMode) -> Entry {
    if mode == YieldMode::Chaos {
        static TURN: AtomicUsize = AtomicUsize::new(0);
        return match TURN.fetch_add(1, Ordering::Relaxed) % 2 {
            0 => Entry::Main,
            _ => Entry::Alt,
        };
    }
    let rates = ENTRY_RATES.lock().unwrap_or_else(|e| e.into_inner());
    let get = |k| rates.get(&k).copied().unwrap_or((0, 0, 0));
    let (main, alt) = (get(key), get(super::submitter::alt_entry_key(key)));
    if main.2 < ENTRY_RUNS {
        return Entry::Main;
    }
    if alt.2 < ENTRY_RUNS {
        return Entry::Alt;
    }
    let per_group = |(ns, groups, _): (u64, u64, u32)| ns as f64 / groups.max(1) as f64;
    if per_group(alt) * ALT_FASTER < per_group(main) {
        Entry::Alt
    } else {
        Entry::Main
    }
}

/// How many of a kernel's latest yields [`recent_yield`] looks at.
const RECENT_YIELDS: usize = 16;

/// Per (kernel class, device): the latest yields' measured latencies (a higher client's
/// request to the leave, ns), oldest overwritten first.
static YIELDS: Lazy<Mutex<HashMap<(usize, usize), RecentYields>>> = Lazy::new(Default::default);

#[derive(Default)]
struct RecentYields {
    ns: [u64; RECENT_YIELDS],
    next: usize,
}

/// Records a yield of kernel `key` that a higher client waited `latency_ns` for (from its
/// request to the run's leave: what `LeftDevice::settle` measured).
pub fn observed_yield(key: (usize, usize), latency_ns: u64) {
    let mut all = YIELDS.lock().unwrap_or_else(|e| e.into_inner());
    let r = all.entry(key).or_default();
    r.ns[r.next % RECENT_YIELDS] = latency_ns;
    r.next = r.next.wrapping_add(1);
}

/// The second longest of kernel `key`'s latest [`RECENT_YIELDS`] measured yields (the
/// longest while there is one), if it yielded: on a GPU a run publishes at least this as
/// its bound when it is within the cap, so the higher client waits for what the yields
/// really take rather than the estimate of one group plus [`SIGNAL_NS`], which missed the
/// signal path's own spread. With the estimate alone the spinning HP gave up on up to half
/// of an LP's yields on an H100 and met the driver's time slice instead: the benchmark's
/// compute LP, whose yields took 80-100 µs against a bound of about 0.1 ms, had 344 of
/// about 1,450 waits expire over four runs, 123 with this (`docs/benchmarks.md`, session
/// 44; GEMM's and memory's estimates were long enough: 39 and 40 expired without, 52
/// and 59 with, within the runs' spread). A bound longer than the yield costs nothing:
/// the higher client goes on at the leave. The second longest, so that one slow yield
/// (the LP's host thread descheduled) does not raise it; it ages out after
/// `RECENT_YIELDS` more.
pub fn recent_yield(key: (usize, usize)) -> Option<u64> {
    let mut seen = {
        let all = YIELDS.lock().unwrap_or_else(|e| e.into_inner());
        let r = all.get(&key)?;
        (r.ns, r.next.min(RECENT_YIELDS))
    };
    let n = seen.1;
    seen.0[..n].sort_unstable();
    (n > 0).then(|| seen.0[n.saturating_sub(2)])
}

/// The least ns a wave of the kernel's own persistent groups took in a whole run nobody
/// asked to stop, once one was seen: the unit a chunk is sized in. The timing model's
/// slope may be in the slicing unit's waves (a NULL local size: smaller groups), which
/// made the compute LP's chunks of 40 µs come out at 77 µs on an H100.
pub fn run_wave(key: (usize, usize)) -> Option<u64> {
    RUN_WAVES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&key)
        .and_then(|&(n, w)| (n >= 1).then_some(w))
}

/// Whether the kernel `key`'s own yielding runs on a GPU showed groups too long to be
/// asked: one wave of them plus the signal path outlasts [`ask_limit_ns`] for its runs, so
/// no higher priority would ever ask it (the submitter's rule), and running it as a
/// yielding launch buys nothing while costing what every yielding run costs: the queue
/// emptied before it and a host round trip after it (the next command waits for the host
/// to see the run end). tinygrad's 8192x2048 matrix product on an H200 (2.5 ms groups, a
/// third of the training step's launches) was never asked in 780 launches, and the
/// training process kept 0.94 of the bare co-run's steps instead of 0.98 with
/// `yielding = "never"`. Such a kernel's launches go as the application's kernel instead,
/// where the driver shares the device as it would without the layer (rule 8).
///
/// Judged only from the kernel's own runs (a model learned from launches sent whole counts
/// waves in other units, `submitter::yield_launch`), and from the least of at least two:
/// a run's host-observed time only grows with another context's kernels time-sliced in,
/// and the first run of a program's entries includes the driver's lazy load of it.
fn too_long_to_ask(key: (usize, usize), own_event: bool) -> bool {
    let limit = ask_limit_ns(own_event);
    RUN_WAVES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&key)
        .is_some_and(|&(n, w)| n >= 2 && w.saturating_add(SIGNAL_NS) > limit)
}

/// On a GPU, the longest a run of a launch may need to stop and still be asked
/// (`submitter::yield_launch`): the driver's own hand-over for a run with an event of its
/// own (it hands such runs over late, and a yield up to then lets a higher priority in
/// sooner); `sched.yield_wait_us` for one tracked by a barrier (only under `yielding =
/// "chaos"`: see [`driver_hands_over_as_soon`]).
pub fn ask_limit_ns(own_event: bool) -> u64 {
    let cap = config::config().sched.yield_wait_us.saturating_mul(1_000);
    if own_event {
        cap.max(super::submitter::GPU_HANDOVER_NS)
    } else {
        cap
    }
}

/// Whether a launch gains nothing from running as a yielding launch because the driver
/// hands the device over as soon by itself: on a GPU, one tracked by a barrier
/// (`completion`), at `yielding = "auto"`. NVIDIA hands such a launch over to another
/// process's kernel in about 0.2 ms (a 0.45 ms kernel next to 130 ms kernels with no
/// event: p50 0.69 ms, alone 0.50; `scripts/gpu/hpevent.c`), which is what a yield costs at
/// best (a group, the signal path, then the same context switch: the issue-23 probe's HP
/// p99 was alone + 0.22 ms). Asked, such launches only lost: each late yield (uneven
/// groups the estimate from a wave's mean missed) cost the higher priority a time slice,
/// and each yielding run the low one a host round trip. On an H100 (`docs/benchmarks.md`,
/// session 39), the demo's Mandelbrot LP, asked: HP p99 2.86 ms (four runs of a launch
/// asked, each leaving about 43 ms later), then 0.74 and 2.70 (at most one asked) against
/// bare's 0.75, 0.73 and 1.52; never asked (session 38): 0.87 against 0.80. tinygrad's pair
/// over three alternating rounds: HP p99 7.85, 7.74, 8.85 ms and LP 0.992, 0.977, 0.988 of
/// bare asked; 7.74, 7.95, 7.77 and 0.991, 0.991, 0.999 not. The OpenCV pair alike both
/// ways. A launch with its own event (a profiling queue) is handed
/// over late (`submitter::GPU_HANDOVER_NS`), and a yield beats that.
/// `yielding = "chaos"` still makes every launch it can a yielding one, to exercise them.
pub fn driver_hands_over_as_soon(gpu: bool, own_event: bool, mode: YieldMode) -> bool {
    super::completion::prompt_handover(gpu, own_event) && mode == YieldMode::Auto
}

/// Total virtual groups a launch may have (the 32-bit ticket's differences stay
/// unambiguous below 2^31).
const MAX_GROUPS: u64 = 1 << 30;

/// The yielding form of a launch, made at enqueue.
pub struct YieldLaunch {
    /// The kernel's persistent entry, with the application's arguments as they were at
    /// enqueue; the hidden ones are set per run.
    pub entry: Retained,
    /// The control words the entry gets as an argument: declared after `entry`, so they
    /// are freed (with the last launch holding them) only after the kernel is released.
    pub control: Arc<Control>,
    /// Index of the hidden geometry argument (the control words follow it).
    pub hidden: cl_uint,
    /// The local size every persistent group runs with (the original launch's).
    pub local: [usize; 3],
    /// Virtual groups of the original launch.
    pub total: u64,
    /// Groups resident at once (the device's capacity, or fewer): what a run of the
    /// persistent form is launched with.
    pub persistent: u64,
    /// The entry is of the flat form (`EntryForm::Flat`): each run is launched with one
    /// group for each virtual group left (`softpreempt_transform::flat_run_groups`).
    pub flat: bool,
    /// The first launch of this entry with this local size in the process: its first run
    /// may pay the vendor's cold start (PoCL compiles its work-group function then).
    pub new_variant: bool,
    /// The key of the entry's timing model: the kernel's, or for its second entry
    /// `submitter::alt_entry_key` of it (see `pick_entry`).
    pub key: super::submitter::ModelKey,
}

/// What a run of either entry form launches and counts: the form's rules in one place.
impl YieldLaunch {
    /// The groups a run launches when `handed` virtual groups were handed out before it:
    /// a flat run one for each left (at most `FLAT_RUN_GROUPS`), a persistent run its
    /// resident groups, which take tickets until none is left.
    pub fn run_groups(&self, handed: u64) -> u64 {
        if self.flat {
            softpreempt_transform::flat_run_groups(self.total, handed)
        } else {
            self.persistent
        }
    }

    /// Virtual groups handed out after a run of `groups` that nobody asked to stop, when
    /// `handed` were before it: a flat run takes one ticket a group, so it counts them
    /// without reading the ticket back; a persistent run ran to the end.
    pub fn handed_after_unasked(&self, handed: u64, groups: u64) -> u64 {
        if self.flat {
            handed + groups
        } else {
            self.total
        }
    }

    /// The tickets a launch took in all, when nobody asked it to stop, in chunks of
    /// `chunk`: one past the end for each persistent group, none for a flat one.
    pub fn tickets_taken(&self, chunk: u32) -> u64 {
        if self.flat {
            softpreempt_transform::tickets_taken(self.total, 0, 1)
        } else {
            softpreempt_transform::tickets_taken(self.total, self.persistent, chunk)
        }
    }

    /// Whether its groups take tickets in chunks on a GPU: not a flat entry's, whose
    /// groups take one each.
    pub fn chunks(&self) -> bool {
        !self.flat
    }
}

/// Notes what a planned launch of kernel class `class` on `m`'s device is predicted to
/// take (`pred`; `None`: not known yet), for its next kernel objects: while its launches
/// look too short to yield (under half the least worth it, so that one a little longer
/// than the last still records), objects made meanwhile record no argument values
/// ([`KernelClass::records_for_new`](crate::core::objects::KernelClass::records_for_new)).
/// A short prediction is trusted even from a cold model: a kernel's first launch only
/// overstates its cost. `chaos` makes short launches yield too, so there every object
/// records. One store only when the verdict changes.
pub fn note_prediction(m: &Managed, class: &crate::core::objects::KernelClass, pred: Option<u64>) {
    let min = if m.gpu {
        MIN_YIELD_GPU_NS
    } else {
        MIN_YIELD_NS
    };
    let short =
        pred.is_some_and(|p| p < min / 2) && config::config().sched.yielding != YieldMode::Chaos;
    if class.seems_short.load(Ordering::Relaxed) != short {
        class.seems_short.store(short, Ordering::Relaxed);
    }
}

/// The yielding form of launch `geo` of `k`, when it can have one (see the module's
/// comment); `pred` is its predicted device time, if known.
pub fn prepare(
    m: &Managed,
    k: &Kernel,
    program: &Obj<Program>,
    geo: &Geometry,
    pred: Option<u64>,
    own_event: bool,
) -> Option<YieldLaunch> {
    let mode = config::config().sched.yielding;
    // Only a launch known to be long (`MIN_YIELD_NS`, `MIN_YIELD_GPU_NS`) is worth its
    // program's persistent entries (a second vendor compile, on a thread): a kernel seen
    // once, or short, is not. Building them
    // for every program a client launched (the first launch has no prediction) cost
    // pyopencl's suite 7 minutes instead of 4 on PoCL's 2 cores. `chaos` builds them for
    // every launch, so that tests exercise yields on short kernels too. The prediction
    // must rest on a warm model (`TimingModel::warm`): a kernel's first launch may be all
    // cold start (NVIDIA loads its module: OpenCV's FFT kernel took 7 ms the first time and
    // 65 µs afterwards), and its entries would be built for nothing. The model is looked up
    // only for a launch that looks long.
    let min = if m.gpu {
        MIN_YIELD_GPU_NS
    } else {
        MIN_YIELD_NS
    };
    let long = pred.is_some_and(|p| p >= min) && k.class.models.get(m.device.h as usize).warm();
    if mode == YieldMode::Never
        || (mode == YieldMode::Auto && !long)
        || m.client.is_none()
        || !m.in_order
    {
        return None;
    }
    if driver_hands_over_as_soon(m.gpu, own_event, mode) {
        return None;
    }
    if m.gpu && too_long_to_ask((k.class.id, m.device.h as usize), own_event) {
        tracing::trace!(kernel = %k.name(), "groups too long to be asked: the application's kernel");
        return None;
    }
    let exec = crate::core::yield_program::entries(program)?;
    let yk = exec.kernels.get(&**k.name())?;
    let dims = geo.work_dim as usize;
    let local = match (geo.local, yk.reqd_local) {
        (Some(l), Some(r)) if l[..dims] != r[..dims] => return None,
        (Some(l), _) => l,
        (None, Some(r)) => r,
        // The vendor would choose the local size: only a kernel that does not depend on it
        // may run with one of ours.
        (None, None) if !yk.work_group_dependent => super::launch::default_local(k, &m.device, geo),
        (None, None) => return None,
    };
    // Uniform ranges only: a persistent group has no partial last group.
    let mut total = 1u64;
    for (&g, &l) in geo.global[..dims].iter().zip(&local[..dims]) {
        if l == 0 || !g.is_multiple_of(l) {
            return None;
        }
        total = total.saturating_mul((g / l) as u64);
    }
    if total == 0 || total >= MAX_GROUPS {
        return None;
    }
    let (wave, _) = super::launch::wave_work_groups(&m.device, local[..dims].iter().product());
    let persistent = wave.clamp(1, total);
    let key = (k.class.id, m.device.h as usize);
    let waves = softpreempt_sched::waves(total, persistent);
    let (entry_name, key) = match &yk.alt_entry {
        Some(alt) if !m.gpu => match pick_entry(key, mode) {
            Entry::Main => (&yk.entry, key),
            Entry::Alt => (alt, super::submitter::alt_entry_key(key)),
        },
        _ => (&yk.entry, key),
    };
    // Judged on a CPU device only (see `entry_pays`): a GPU's launches take no lock for it.
    if !m.gpu && mode == YieldMode::Auto {
        let predicted = super::submitter::entry_predicted(&key, waves).zip(pred);
        if let Some((entry_ns, kernel_ns)) =
            predicted.filter(|&(entry, kernel)| !entry_pays(entry, kernel))
        {
            tracing::trace!(kernel = %k.name(), entry_ns, kernel_ns, "its entry runs slower than the kernel: the application's kernel");
            crate::trace::profile::entry_slower(k.name(), &m.priority);
            return None;
        }
    }
    let values = k
        .args
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .values
        .as_deref()
        .cloned()?;
    if values.len() < yk.args as usize {
        return None;
    }
    let control = m.control()?;
    let ctx = &control.ctx;
    let name = std::ffi::CString::new(entry_name.as_str()).ok()?;
    let mut err = CL_SUCCESS;
    let h = match ctx.vt.clCreateKernel {
        // SAFETY: the vendor's built program of entries and a NUL-terminated name.
        Some(f) => unsafe { f(exec.program.0.h, name.as_ptr(), &mut err) },
        None => return None,
    };
    if err != CL_SUCCESS || h.is_null() {
        return None;
    }
    let entry = Retained::new(h, None, ctx.vt.clReleaseKernel);
    let set = ctx.vt.clSetKernelArg?;
    for (i, v) in values.iter().take(yk.args as usize).enumerate() {
        let v = v.as_ref()?;
        let ptr = v
            .bytes
            .as_ref()
            .map_or(std::ptr::null(), |b| b.as_ptr() as *const c_void);
        // SAFETY: the entry's argument `i` takes what the application's kernel took
        // there (same type, by the rewrite); `ptr` holds `v.size` bytes or is NULL.
        if unsafe { set(h, i as cl_uint, v.size, ptr) } != CL_SUCCESS {
            return None;
        }
    }
    if key.0 != k.class.id {
        crate::trace::profile::second_entry(k.name(), &m.priority);
    }
    let new_variant = exec
        .launched
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert((entry_name.clone(), local));
    Some(YieldLaunch {
        entry,
        control,
        hidden: yk.args,
        local,
        total,
        persistent,
        flat: exec.form == softpreempt_transform::EntryForm::Flat,
        new_variant,
        key,
    })
}

/// A queue's control words (see the module's comment).
pub struct Control {
    /// The vendor context, held until the words are freed (see `new`).
    pub ctx: HeldContext,
    words: Words,
    /// The epoch of the latest run (each run gets a new one).
    epoch: AtomicU32,
    /// The ticket counter's value where the next launch begins.
    pub base: AtomicU32,
}

enum Words {
    /// Fine-grained SVM with atomics: host and kernel share the words while it runs.
    Svm(*mut AtomicU32),
    /// A device buffer and the second queue its yield word is written through, without
    /// blocking, from `sent` (see [`Control::request_yield`]).
    Buffer {
        mem: cl_mem,
        side: cl_command_queue,
        sent: Box<[AtomicU32; SENT]>,
    },
}

/// Host words a non-blocking yield-word write reads from, one per epoch modulo this: a
/// write reads its word until it completes, and the word is not reused for `SENT` more
/// epochs (one run each, and an asked run reads its ticket on the same in-order queue
/// before its queue's next run, so its write completed long before).
const SENT: usize = 8;

// SAFETY: vendor handles (usable from any thread) and SVM memory shared by definition.
unsafe impl Send for Control {}
// SAFETY: as above; the SVM words are only accessed atomically.
unsafe impl Sync for Control {}

/// Bytes of the control words (16 words: the two in use and room on their cache line).
const WORDS_BYTES: usize = 64;

impl Control {
    /// The control words for queue `q` on `device`, or `None` if the vendor cannot give
    /// the memory (then nothing of that queue yields).
    pub fn new(q: &Inner<cl_command_queue>, device: &Inner<cl_device_id>) -> Option<Control> {
        let mut ctx: cl_context = std::ptr::null_mut();
        let info = q.vt.clGetCommandQueueInfo?;
        // SAFETY: the vendor's query on its own queue, into a handle-sized value.
        let rc = unsafe {
            info(
                q.h,
                CL_QUEUE_CONTEXT,
                std::mem::size_of::<cl_context>(),
                &mut ctx as *mut cl_context as *mut c_void,
                std::ptr::null_mut(),
            )
        };
        if rc != CL_SUCCESS || ctx.is_null() {
            return None;
        }
        // The words are freed when the last launch whose entry kernel holds them is gone
        // (`YieldLaunch::control`), which may be after the vendor queue, and with it the
        // last reference to the context, is gone: freeing SVM in a context the vendor had
        // destroyed, or before a kernel that still had the words as an argument was
        // released, is undefined. So the words hold the context (released in `Drop`
        // after the words are freed, as fields drop after `drop`).
        let ctx = HeldContext::retain(&q.child(ctx))?;
        let words = if fine_grained_svm(device) && !test_buffer_words() {
            let alloc = ctx.vt.clSVMAlloc?;
            let flags = CL_MEM_READ_WRITE | CL_MEM_SVM_FINE_GRAIN_BUFFER | CL_MEM_SVM_ATOMICS;
            // SAFETY: the vendor's context; 64 bytes at the default alignment.
            let p = unsafe { alloc(ctx.h, flags, WORDS_BYTES, 0) } as *mut AtomicU32;
            if p.is_null() {
                return None;
            }
            for i in 0..WORDS_BYTES / 4 {
                // SAFETY: inside the allocation, not yet shared with any kernel.
                unsafe { p.add(i).write(AtomicU32::new(0)) };
            }
            Words::Svm(p)
        } else {
            let mut zeros = [0u32; WORDS_BYTES / 4];
            let mut err = CL_SUCCESS;
            let create = ctx.vt.clCreateBuffer?;
            // SAFETY: the vendor's context; the buffer copies our 64 zero bytes.
            let mem = unsafe {
                create(
                    ctx.h,
                    CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                    WORDS_BYTES,
                    zeros.as_mut_ptr() as *mut c_void,
                    &mut err,
                )
            };
            if err != CL_SUCCESS || mem.is_null() {
                return None;
            }
            #[allow(deprecated)]
            let queue = ctx.vt.clCreateCommandQueue?;
            // SAFETY: the vendor's context and device, no properties.
            let side = unsafe { queue(ctx.h, device.h, 0, &mut err) };
            if err != CL_SUCCESS || side.is_null() {
                if let Some(f) = ctx.vt.clReleaseMemObject {
                    // SAFETY: the buffer made above, not used by anything.
                    unsafe { f(mem) };
                }
                return None;
            }
            Words::Buffer {
                mem,
                side,
                sent: Box::new(Default::default()),
            }
        };
        Some(Control {
            ctx,
            words,
            epoch: AtomicU32::new(0),
            base: AtomicU32::new(0),
        })
    }

    /// A new epoch for the next run (never the one the yield word may hold: epochs only
    /// grow, and the kernel compares with wrapping arithmetic).
    pub fn next_epoch(&self) -> u32 {
        self.epoch.fetch_add(1, Ordering::AcqRel).wrapping_add(1)
    }

    /// Sets the control words as argument `index` of `kernel`.
    pub fn set_arg(&self, kernel: cl_kernel, index: cl_uint) -> bool {
        let rc = match &self.words {
            Words::Svm(p) => match self.ctx.vt.clSetKernelArgSVMPointer {
                // SAFETY: an SVM pointer of this context.
                Some(f) => unsafe { f(kernel, index, *p as *const c_void) },
                None => CL_INVALID_OPERATION,
            },
            Words::Buffer { mem, .. } => match self.ctx.vt.clSetKernelArg {
                // SAFETY: a buffer of this context, by handle.
                Some(f) => unsafe {
                    f(
                        kernel,
                        index,
                        std::mem::size_of::<cl_mem>(),
                        mem as *const cl_mem as *const c_void,
                    )
                },
                None => CL_INVALID_OPERATION,
            },
        };
        rc == CL_SUCCESS
    }

    /// Asks the run of `epoch` to stop at its next group boundary.
    ///
    /// A buffer's word is written without blocking and flushed: a blocking write returned
    /// 50-100 µs after it began on an H100 (the trace's yield phases, the preemption
    /// benchmark's compute row), and the watcher has nothing to wait for: the kernel sees
    /// the word when it lands, and the launch's end is what the submitter waits for.
    pub fn request_yield(&self, epoch: u32) {
        match &self.words {
            // SAFETY: a word of our allocation, alive as long as `self`; fine-grained SVM
            // with atomics may be accessed by host and kernel at once.
            Words::Svm(p) => unsafe { &*p.add(YIELD_WORD) }.store(epoch, Ordering::SeqCst),
            Words::Buffer { mem, side, sent } => {
                let (Some(write), Some(flush)) =
                    (self.ctx.vt.clEnqueueWriteBuffer, self.ctx.vt.clFlush)
                else {
                    return;
                };
                let word = &sent[epoch as usize % SENT];
                word.store(epoch, Ordering::Release);
                // SAFETY: a non-blocking write of one word into our buffer, on our second
                // queue, from `word`, which lives as long as `self` (whose drop finishes
                // the queue first) and is not written again before this write completed
                // (see `SENT`).
                unsafe {
                    write(
                        *side,
                        *mem,
                        CL_FALSE,
                        YIELD_WORD * 4,
                        4,
                        word.as_ptr() as *const c_void,
                        0,
                        std::ptr::null(),
                        std::ptr::null_mut(),
                    );
                    flush(*side);
                }
            }
        }
    }

    /// The ticket counter, once the run has completed.
    pub fn ticket(&self) -> Option<u32> {
        match &self.words {
            // SAFETY: as in `request_yield`.
            Words::Svm(p) => Some(unsafe { &*p.add(TICKET) }.load(Ordering::SeqCst)),
            Words::Buffer { mem, side, .. } => {
                let f = self.ctx.vt.clEnqueueReadBuffer?;
                let mut v = 0u32;
                // SAFETY: a blocking read of one word into `v`, on our second queue (the
                // run it follows has completed).
                let rc = unsafe {
                    f(
                        *side,
                        *mem,
                        CL_TRUE,
                        TICKET * 4,
                        4,
                        &mut v as *mut u32 as *mut c_void,
                        0,
                        std::ptr::null(),
                        std::ptr::null_mut(),
                    )
                };
                (rc == CL_SUCCESS).then_some(v)
            }
        }
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        let vt = self.ctx.vt;
        match &self.words {
            Words::Svm(p) => {
                if let Some(f) = vt.clSVMFree {
                    // SAFETY: our allocation; no run of ours is in flight any more.
                    unsafe { f(self.ctx.h, *p as *mut c_void) };
                }
            }
            Words::Buffer { mem, side, .. } => {
                // SAFETY: our buffer and queue, released once (the queue finished first:
                // a write from `sent` may still be in flight).
                unsafe {
                    if let Some(f) = vt.clFinish {
                        f(*side);
                    }
                    if let Some(f) = vt.clReleaseCommandQueue {
                        f(*side);
                    }
                    if let Some(f) = vt.clReleaseMemObject {
                        f(*mem);
                    }
                }
            }
        }
    }
}

/// A test hook, not a setting: with `SOFTPREEMPT_TEST_BUFFER_WORDS` set, control words
/// are a device buffer written through a second queue on every device, as on NVIDIA, so
/// tests on PoCL reach that path (`tests/managed_trace.rs`).
fn test_buffer_words() -> bool {
    static ON: Lazy<bool> =
        Lazy::new(|| std::env::var_os("SOFTPREEMPT_TEST_BUFFER_WORDS").is_some());
    *ON
}

/// Whether the device has fine-grained SVM buffers with atomics.
fn fine_grained_svm(device: &Inner<cl_device_id>) -> bool {
    let mut caps: cl_device_svm_capabilities = 0;
    let Some(f) = device.vt.clGetDeviceInfo else {
        return false;
    };
    // SAFETY: the vendor's query on its own device, into a value of the size passed.
    let rc = unsafe {
        f(
            device.h,
            CL_DEVICE_SVM_CAPABILITIES,
            std::mem::size_of_val(&caps),
            &mut caps as *mut _ as *mut c_void,
            std::ptr::null_mut(),
        )
    };
    let want = CL_DEVICE_SVM_FINE_GRAIN_BUFFER | CL_DEVICE_SVM_ATOMICS;
    rc == CL_SUCCESS && caps & want == want
}

/// Runs of this process on a device now whose yield word only a vendor call can write
/// (`Words::Buffer`: NVIDIA). See [`runs_written_by_vendor`].
static VENDOR_WORD_RUNS: AtomicUsize = AtomicUsize::new(0);

/// How many of this process's runs on a device now need a vendor call to be asked to stop.
/// While there are any, a blocking transfer of another queue (or thread) of the process is
/// made non-blocking and its event waited for (`api::enqueue::Wait`): NVIDIA holds a
/// context's other threads while one blocks in a blocking transfer, and a yield-word write
/// waited 18 ms there, to the end of the 20 ms kernel it was to stop, against 0.1 ms beside
/// a thread waiting for an event (`scripts/gpu/waitlock.c`; `docs/benchmarks.md`,
/// session 35). Only then: done for every blocking transfer of a low queue, it cost the
/// OpenCV pair's LP 5-13% on an H100.
pub fn runs_written_by_vendor() -> usize {
    VENDOR_WORD_RUNS.load(Ordering::Acquire)
}

/// A run on the device, as the watcher sees it.
pub struct Running {
    control: Arc<Control>,
    epoch: u32,
    claim: Mutex<Option<DeviceClaim>>,
    /// The yield word was written for this run.
    asked: AtomicBool,
    /// When the yield word's write began and returned (`monotonic_ns`; 0 until asked):
    /// the trace's yield phases.
    write_ns: [AtomicU64; 2],
    /// `yielding = "chaos"`: when to ask anyway (`monotonic_ns`).
    chaos_at: Option<u64>,
    /// Counted in [`VENDOR_WORD_RUNS`]: until [`finish`], or until dropped if it never
    /// came (the watcher may hold the run a while after it ended).
    vendor_word: AtomicBool,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.off_device();
    }
}

impl Running {
    /// The run is off the device: it no longer counts in [`VENDOR_WORD_RUNS`] (once).
    fn off_device(&self) {
        if self.vendor_word.swap(false, Ordering::AcqRel) {
            VENDOR_WORD_RUNS.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Whether the watcher asked this run to stop (then the ticket tells where it got).
    pub fn asked(&self) -> bool {
        self.asked.load(Ordering::Acquire)
    }

    /// Whether the run's client was asked to yield since the run began.
    fn requested(&self) -> bool {
        self.claim
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_some_and(|c| c.yield_requested())
    }

    /// Whether the run should be asked now: its client was asked to yield, or its chaos
    /// moment (`yielding = "chaos"`) is due at `now_ns`.
    fn due(&self, now_ns: u64) -> bool {
        self.requested() || self.chaos_at.is_some_and(|t| t <= now_ns)
    }

    /// Stops the run at its next group boundary (once).
    pub fn ask(&self) {
        if !self.asked.swap(true, Ordering::AcqRel) {
            self.write_ns[0].store(softpreempt_sched::monotonic_ns(), Ordering::Relaxed);
            self.control.request_yield(self.epoch);
            self.write_ns[1].store(softpreempt_sched::monotonic_ns(), Ordering::Release);
        }
    }

    /// When the yield word's write began and returned (0 if it was not asked, or its
    /// write has not returned yet).
    pub fn write_ns(&self) -> (u64, u64) {
        let end = self.write_ns[1].load(Ordering::Acquire);
        (self.write_ns[0].load(Ordering::Relaxed), end)
    }
}

/// The process's watcher of one device (see the module's comment).
struct Watcher {
    arbiter: Arc<Arbiter>,
    running: Mutex<Vec<Arc<Running>>>,
    queues: Mutex<Vec<Weak<Managed>>>,
    /// `yielding = "chaos"`: when the watcher wakes next (`monotonic_ns`), `u64::MAX`
    /// while it looks at the running launches (see [`start`]).
    wake_at: AtomicU64,
    /// Bumped by [`start`] when a run joins `running`; the watcher sleeps on it instead of
    /// the arbiter's yield generation while it has no run to stop (see [`Watcher::run`]).
    kick: Mutex<u64>,
    kicked: std::sync::Condvar,
}

impl Watcher {
    fn kicks(&self) -> u64 {
        *self.kick.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A run joined `running`: a watcher asleep without one looks again.
    fn kick(&self) {
        *self.kick.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        self.kicked.notify_all();
    }

    /// Sleeps until a run joins `running` after the watcher read `seen` kicks, or `wait`.
    fn wait_kick(&self, seen: u64, wait: Duration) {
        let g = self.kick.lock().unwrap_or_else(|e| e.into_inner());
        if *g == seen {
            drop(self.kicked.wait_timeout(g, wait));
        }
    }
}

static WATCHERS: Lazy<Mutex<HashMap<usize, Arc<Watcher>>>> = Lazy::new(Default::default);

fn watcher(arbiter: &Arc<Arbiter>) -> Arc<Watcher> {
    let mut all = WATCHERS.lock().unwrap_or_else(|e| e.into_inner());
    let key = Arc::as_ptr(arbiter) as usize;
    if let Some(w) = all.get(&key) {
        return w.clone();
    }
    let w = Arc::new(Watcher {
        arbiter: arbiter.clone(),
        running: Mutex::new(Vec::new()),
        queues: Mutex::new(Vec::new()),
        wake_at: AtomicU64::new(u64::MAX),
        kick: Mutex::new(0),
        kicked: Default::default(),
    });
    let me = w.clone();
    let spawned = std::thread::Builder::new()
        .name("softpreempt-watch".into())
        .spawn(move || me.run());
    if let Err(e) = spawned {
        tracing::error!("softpreempt: cannot start the yield watcher: {e}");
    }
    all.insert(key, w.clone());
    w
}

/// Registers a managed queue with its device's watcher (its client's lease is kept alive
/// from then on).
pub fn watch_queue(m: &Arc<Managed>) {
    if let Some(a) = &m.arbiter {
        watcher(a)
            .queues
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Arc::downgrade(m));
    }
}

/// A run of `m` with `epoch` goes on the device: the watcher stops it when its client is
/// asked to yield (or at random, with `yielding = "chaos"`).
pub fn start(
    m: &Managed,
    control: &Arc<Control>,
    epoch: u32,
    claim: Option<DeviceClaim>,
) -> Arc<Running> {
    let chaos = config::config().sched.yielding == YieldMode::Chaos;
    let r = Arc::new(Running {
        control: control.clone(),
        epoch,
        claim: Mutex::new(claim),
        asked: AtomicBool::new(false),
        write_ns: Default::default(),
        // Half the runs are asked at once, the others at a random moment within 2 ms:
        // runs on a CPU device are often far shorter than 2 ms, and a moment drawn only
        // from that range found most of them done (a run asked before its first group
        // resumes with nothing lost, so runs are asked again until one completes).
        chaos_at: chaos.then(|| {
            // Draws in [0, 2000) are "at once".
            softpreempt_sched::monotonic_ns() + random_below(4_000).saturating_sub(2_000) * 1_000
        }),
        vendor_word: AtomicBool::new(matches!(control.words, Words::Buffer { .. })),
    });
    if r.vendor_word.load(Ordering::Acquire) {
        VENDOR_WORD_RUNS.fetch_add(1, Ordering::AcqRel);
    }
    let w = m.arbiter.as_ref().map(watcher);
    if let Some(w) = &w {
        w.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(r.clone());
        w.kick();
    }
    // A request that came before the watcher saw this run is not missed: the watcher
    // wakes for every later one, and this looks at the earlier ones. A chaos moment that
    // is due is asked here: the watcher, asleep until its next moment or for half a
    // heartbeat (about 31 ms), noticed it after most short runs had ended (on a quiet
    // machine chaos then yielded little). One later than now wakes the watcher if it
    // would sleep past it: it reads its wake-up after the run is on its list, and the
    // watcher sets `u64::MAX` before it looks at the list (so a run it missed finds
    // either that, or a wake-up no later than the moments it saw, or one after the
    // generation it sleeps on was read, which the wake changes).
    match r.chaos_at {
        _ if r.requested() => r.ask(),
        Some(t) if t <= softpreempt_sched::monotonic_ns() => r.ask(),
        Some(t) => {
            if let Some(w) = w.filter(|w| t < w.wake_at.load(Ordering::SeqCst)) {
                w.arbiter.wake_watchers();
            }
        }
        None => {}
    }
    r
}

/// Waits until the run's launch (vendor event `ev`, flushed) has ended.
///
/// On a GPU the waiting thread polls the event and, between polls, asks the run to stop
/// itself once it is due ([`Running::ask`]), so a yield request does not wait for the
/// watcher. NVIDIA's `clWaitForEvents` spins on a core anyway (all of a 20 ms wait's time
/// on an H100, `scripts/gpu/waitcpu.c`), so polling costs no more. On an H100 the watcher's
/// wake took 50 µs (median) from the request to the write, and its write, beside this
/// thread's wait, another 50 µs to return (the trace's yield phases, the preemption
/// benchmark's rows): about as long as the rest of a yield of short groups. (Other GPU
/// drivers' waits may sleep; there the poll costs a core for the run's length, which is
/// not measured.) A CPU
/// device's launch needs the cores this thread would spin on: there the vendor's wait,
/// and the watcher, ask.
pub fn wait_run(vt: &cl_icd_dispatch, ev: cl_event, r: &Running, gpu: bool) {
    if gpu {
        if let Some(info) = vt.clGetEventInfo {
            loop {
                let mut status: cl_int = CL_QUEUED as cl_int;
                // SAFETY: a cl_int-sized answer about a retained vendor event, into a local.
                let rc = unsafe {
                    info(
                        ev,
                        CL_EVENT_COMMAND_EXECUTION_STATUS,
                        std::mem::size_of::<cl_int>(),
                        &mut status as *mut cl_int as *mut c_void,
                        std::ptr::null_mut(),
                    )
                };
                // Complete (0) or failed (negative) is the end; a failed query leaves
                // the rest to the vendor's wait.
                if rc != CL_SUCCESS || status <= CL_COMPLETE as cl_int {
                    break;
                }
                if !r.asked() && r.due(softpreempt_sched::monotonic_ns()) {
                    r.ask();
                }
                std::hint::spin_loop();
            }
        }
    }
    if let Some(f) = vt.clWaitForEvents {
        // SAFETY: one retained vendor event.
        unsafe { f(1, &ev) };
    }
}

/// The run has completed: the watcher forgets it; returns its claim.
pub fn finish(m: &Managed, r: &Arc<Running>) -> Option<DeviceClaim> {
    r.off_device();
    if let Some(a) = &m.arbiter {
        watcher(a)
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|x| !Arc::ptr_eq(x, r));
    }
    r.claim.lock().unwrap_or_else(|e| e.into_inner()).take()
}

/// A pseudo-random number below `n` (chaos timing only; not for anything that matters).
fn random_below(n: u64) -> u64 {
    let t = softpreempt_sched::monotonic_ns();
    (t ^ (t >> 17)).wrapping_mul(0x9E37_79B9_7F4A_7C15) % n.max(1)
}

impl Watcher {
    fn run(self: Arc<Self>) {
        let mut last_beat = Instant::now();
        let chaos = config::config().sched.yielding == YieldMode::Chaos;
        // A higher priority's demand wakes it: it must not take that thread's core.
        crate::core::os_priority::no_wakeup_preemption("yield watcher");
        loop {
            if chaos {
                self.wake_at.store(u64::MAX, Ordering::SeqCst);
            }
            let seen = self.arbiter.yield_generation();
            let kicks = self.kicks();
            let now = Instant::now();
            let now_ns = softpreempt_sched::monotonic_ns();
            let running: Vec<Arc<Running>> = self
                .running
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            let mut chaos_next: Option<u64> = None;
            // The running launches first: a higher client is waiting for them to leave,
            // and the queues' housekeeping below (heartbeats, CPU threads) can wait
            // for a blocking write or two.
            for r in &running {
                if r.due(now_ns) {
                    r.ask();
                } else if let Some(t) = r.chaos_at {
                    chaos_next = Some(chaos_next.map_or(t, |c| c.min(t)));
                }
            }
            // A low queue moves its CPU device threads to the idle class when it next looks
            // at the arbiter, which a long launch can put off for its whole length while a
            // higher priority that just arrived shares the cores with them (and no longer
            // waits for an idle-class launch's yield). The higher one's first request wakes
            // this thread: they move now. The PoCL benchmark's HP, in its first second next
            // to a running LP, had a p99 of 7.6-9.2 ms against bare's 4.6-6.2 without this,
            // 2.0-4.3 with it (docs/benchmarks.md, session 37).
            // One look at the queue list a wake: a due heartbeat goes with the move.
            let interval = self.arbiter.heartbeat_interval();
            let beat = now.duration_since(last_beat) >= interval / 2;
            {
                let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
                if beat {
                    last_beat = now;
                    queues.retain(|q| q.strong_count() > 0);
                }
                for q in queues.iter().filter_map(Weak::upgrade) {
                    q.idle_workers_if_outranked();
                    if let Some(c) = q.client.as_ref().filter(|_| beat) {
                        c.heartbeat();
                    }
                }
            }
            let wait = chaos_next
                .map_or(interval / 2, |t| {
                    Duration::from_nanos(t.saturating_sub(softpreempt_sched::monotonic_ns()))
                        .min(interval / 2)
                })
                .max(Duration::from_micros(50));
            if chaos {
                let wake_at = softpreempt_sched::monotonic_ns() + wait.as_nanos() as u64;
                self.wake_at.store(wake_at, Ordering::SeqCst);
            }
            // With no run of this process on the device, a yield request has nothing to
            // stop here: the watcher then sleeps apart from the arbiter's futex, which
            // every request wakes in every process, the requester's own included (the
            // PoCL demo's HP woke its own watcher at each request). A run that joins the
            // list kicks it (`start`, which also asks a run whose request came first).
            if running.is_empty() && !chaos {
                self.wait_kick(kicks, wait);
            } else {
                self.arbiter.wait_yield_generation(seen, wait);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Class ids no real kernel of this test process has (`KernelClass` ids count from 1).
    const K: (usize, usize) = (usize::MAX - 1, 7);

    #[test]
    fn a_chunk_takes_about_chunk_ns_of_groups() {
        assert_eq!(chunk(None), 1, "unknown groups: one a ticket");
        assert_eq!(chunk(Some(5_000)), (CHUNK_NS / 5_000) as u32);
        assert_eq!(chunk(Some(CHUNK_NS)), 1);
        assert_eq!(chunk(Some(200_000)), 1, "long groups: one a ticket");
        assert_eq!(chunk(Some(1)), MAX_CHUNK as u32);
        assert_eq!(chunk(Some(0)), MAX_CHUNK as u32);
    }

    #[test]
    fn the_second_entry_runs_where_it_ran_far_faster() {
        // Below the bit that marks second entries; no real class id gets this far.
        let (k, dev) = (1usize << 40, 3usize);
        let (main, alt) = ((k, dev), super::super::submitter::alt_entry_key((k, dev)));
        let pick = || pick_entry(main, YieldMode::Auto);
        // The main entry first, then the second, each for ENTRY_RUNS runs.
        for _ in 0..ENTRY_RUNS {
            assert_eq!(pick(), Entry::Main);
            observed_entry_run(main, 100, 1_000_000);
        }
        assert_eq!(pick(), Entry::Alt);
        // A run that handed out no group (asked at once) teaches nothing.
        observed_entry_run(alt, 0, 5_000_000);
        assert_eq!(pick(), Entry::Alt);
        observed_entry_run(alt, 10, 80_000);
        observed_entry_run(alt, 50, 520_000);
        // 10 µs a group, as the main entry: not faster by ALT_FASTER.
        assert_eq!(pick(), Entry::Main);
        // Many more groups at 1 µs each (a whole unasked run): now far faster.
        observed_entry_run(alt, 10_000, 10_000_000);
        assert_eq!(pick(), Entry::Alt);
        // Another device's runs are its own; a released program forgets them.
        assert_eq!(pick_entry((k, dev + 1), YieldMode::Auto), Entry::Main);
        forget_kernel(k);
        assert_eq!(pick(), Entry::Main);
        assert!(ENTRY_RATES.lock().unwrap().get(&alt).is_none());
    }

    #[test]
    fn recent_yield_is_the_second_longest_of_the_latest_yields() {
        let k = (usize::MAX - 9, 4);
        assert_eq!(recent_yield(k), None, "no yield seen");
        observed_yield(k, 300_000);
        assert_eq!(recent_yield(k), Some(300_000), "one: the longest");
        observed_yield(k, 200_000);
        assert_eq!(recent_yield(k), Some(200_000));
        observed_yield(k, 900_000);
        assert_eq!(
            recent_yield(k),
            Some(300_000),
            "one slow yield does not count"
        );
        // The slow ones age out after RECENT_YIELDS more.
        for i in 0..RECENT_YIELDS as u64 {
            observed_yield(k, 100_000 + i);
        }
        assert_eq!(recent_yield(k), Some(100_000 + RECENT_YIELDS as u64 - 2));
        // Another device's yields are their own; a released program forgets its yields.
        assert_eq!(recent_yield((k.0, 5)), None);
        forget_kernel(k.0);
        assert_eq!(recent_yield(k), None);
    }

    #[test]
    fn run_wave_is_the_least_of_the_runs_seen() {
        let k = (usize::MAX - 7, 3);
        assert_eq!(run_wave(k), None);
        observed_run_wave(k, 9_000);
        assert_eq!(run_wave(k), Some(9_000));
        observed_run_wave(k, 5_000);
        observed_run_wave(k, 7_000);
        assert_eq!(run_wave(k), Some(5_000));
    }

    #[test]
    fn on_a_gpu_only_launches_with_their_own_event_are_worth_yielding() {
        use YieldMode::*;
        // A barrier-tracked launch on a GPU: the driver hands it over as soon (auto).
        assert!(driver_hands_over_as_soon(true, false, Auto));
        // One with its own event is handed over late; a CPU device has no hand-over;
        // `never` makes none, `chaos` makes every one it can.
        for (gpu, own, mode) in [
            (true, true, Auto),
            (false, false, Auto),
            (true, false, Chaos),
            (true, false, Never),
        ] {
            assert!(
                !driver_hands_over_as_soon(gpu, own, mode),
                "{gpu} {own} {mode:?}"
            );
        }
    }

    #[test]
    fn a_kernel_is_too_long_to_ask_only_from_two_runs_and_by_the_least() {
        forget_kernel(K.0);
        // One run, however long (the first includes the driver's lazy load): not judged.
        observed_run_wave(K, 7_000_000);
        assert!(!too_long_to_ask(K, false));
        // A second, short run: the least counts, so it stays askable.
        observed_run_wave(K, 200_000);
        assert!(!too_long_to_ask(K, false));
        // Another device's runs are its own.
        let other = (K.0, 8);
        observed_run_wave(other, 2_500_000);
        observed_run_wave(other, 2_400_000);
        assert!(too_long_to_ask(other, false));
        assert!(too_long_to_ask(other, true));
        // A wave just under the limit with the signal path on top is too long; the limit
        // of a run with its own event is the driver's hand-over, longer.
        for own in [false, true] {
            let edge = (K.0, 9 + usize::from(own));
            let w = ask_limit_ns(own) - SIGNAL_NS + 1;
            observed_run_wave(edge, w);
            observed_run_wave(edge, w);
            assert!(too_long_to_ask(edge, own));
            if !own {
                assert!(!too_long_to_ask(edge, true));
            }
        }
        // The program is released or rebuilt: what its runs showed is forgotten.
        forget_kernel(K.0);
        assert!(!too_long_to_ask(other, false));
        assert!(!too_long_to_ask((K.0, 9), false));
    }
}
