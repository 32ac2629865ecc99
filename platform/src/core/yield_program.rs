//! The persistent entries of a program's kernels, for yielding launches (architecture,
//! "Yielding launches"; the rewrite is `softpreempt_transform::yielding`).
//!
//! A program gets, on first need, a second vendor program in the same context: its source
//! with a persistent entry `__sp_y_<kernel>` after the last line for each kernel the
//! rewrite can take. It is made on a thread of the layer, the first time a managed queue
//! would launch one of the program's kernels as a yielding launch; until it is built (or
//! where it fails) launches go as before (slices, or the driver). Processes that never
//! ask, such as a high-priority server whose launches go straight to the vendor, never
//! build it.
//!
//! Its source is the application's: for a program built from source, that source as
//! analysed at its build, with the build's options; for a program created from a binary,
//! the source and options the program store keeps for that binary (`crate::store::Entry`'s
//! `source`, recorded when a process that built it from source handed the binary out),
//! analysed here the same way. Programs linked from several inputs, and binaries the store
//! does not know, get none.
//!
//! Compiling the entries takes seconds on PoCL, so their vendor binary for the device is
//! kept in the store too, keyed by the SHA-256 of their source and options and by the
//! device ([`cache_key`]): a later build of the same program (in any process) loads it
//! with `clCreateProgramWithBinary` instead, and compiles only when it is missing, corrupt
//! or refused by the vendor. Not where the vendor keeps its builds itself (PoCL with its
//! kernel cache on, `concurrent_builds::caches_builds`): there a later build is already
//! cheap, and the binary would cost a compile of every entry on the launch's thread.
//!
//! Not yet: programs compiled and linked in steps.

use std::collections::{HashMap, HashSet};
use std::ffi::CString;
use std::sync::{Arc, Mutex};

use softpreempt_transform::{Analysis, EntryForm, YieldKernel, YieldProgram};

use crate::core::build_threads;
use crate::core::cl::*;
use crate::core::forward::Inner;
use crate::core::handle::{Obj, Ref};
use crate::core::held_context::HeldContext;
use crate::core::objects::Program;
use crate::core::rewritten::{self, options_ptr, OwnedProgram};
use crate::core::sliceable::{sha256_hex, Origin};
use crate::store::{Key, Store, Unit, Yields};

/// A built program of persistent entries.
pub struct YieldExec {
    pub program: OwnedProgram,
    /// By the application's kernel name.
    pub kernels: HashMap<String, YieldKernel>,
    /// The entries (by kernel name) and local sizes a launch was prepared with: the first
    /// run of each may pay the vendor's cold start (`TimingModel::observe_new_variant`).
    pub launched: Mutex<HashSet<(String, [usize; 3])>>,
    /// The entries' form, which says how their runs are launched.
    pub form: EntryForm,
}

/// Where a program's persistent entries stand.
#[derive(Default)]
pub enum YieldState {
    /// Nobody asked yet (or the program was built again since).
    #[default]
    Unasked,
    /// Being made on a thread of the layer.
    Building,
    Ready(Arc<YieldExec>),
    /// None: no source known, no kernel the rewrite could take, or its build failed
    /// (logged).
    Unavailable,
}

/// The yielding rewrite of a program's analysed source: its entries, or for each kernel
/// why it has none.
pub type Rewrite = Result<YieldProgram, Vec<(String, String)>>;

/// The yielding rewrite of `analysis` with entries of `form`, as the layer builds it (the
/// kernels it rewrites, and why others are not, are the same in either form).
pub fn rewrite(analysis: &Analysis, form: EntryForm) -> Rewrite {
    let y = softpreempt_transform::yielding_form_or_why(analysis, form)?;
    if !y.headers.is_empty() {
        // Compiled with headers (clCompileProgram): its entries would need them too.
        return Err(analysis
            .kernels
            .iter()
            .map(|k| {
                let why = "its program was compiled with headers (clCompileProgram)";
                (k.name.clone(), why.to_string())
            })
            .collect());
    }
    Ok(y)
}

/// The form of `p`'s entries: one for every device of its context, flat where all are CPU
/// devices (see `EntryForm::Flat`), else persistent (with a chunk of 1 where the launch's
/// device is not a GPU, `submitter::yield_launch`).
pub fn form_for(p: &Program) -> EntryForm {
    let cpu_only = (p.context.get().devices.iter())
        .all(|d| crate::core::managed::launch::is_cpu(&d.get().inner));
    if cpu_only {
        EntryForm::Flat
    } else {
        EntryForm::Persistent
    }
}

/// Whether `kernel` yields, by the rewrite `r` of its program.
pub fn yields(r: &Rewrite, kernel: &str) -> Yields {
    let why = match r {
        Ok(y) if y.kernels.iter().any(|k| k.name == kernel) => return Yields::Yes,
        Ok(y) => &y.skipped,
        Err(why) => why,
    };
    why.iter().find(|(k, _)| k == kernel).map_or_else(
        || Yields::No("not found by the yielding rewrite".into()),
        |(_, reason)| Yields::No(reason.clone()),
    )
}

/// What a program built from source tells the program store of yielding: the rewrite of
/// its source, and the source itself (for a later process that loads its binary). `None`
/// for a program of another origin.
pub fn of_source(p: &Program) -> Option<(Rewrite, Unit)> {
    let origin = p.origin.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let Origin::Source {
        text,
        headers,
        analysis: Some(a),
    } = origin
    else {
        return None;
    };
    let unit = Unit {
        source: text.to_string(),
        headers: headers
            .iter()
            .map(|(n, t)| (n.clone(), t.to_string()))
            .collect(),
        options: p.build_options().map(|o| o.to_string_lossy().into_owned()),
    };
    Some((rewrite(&a, form_for(p)), unit))
}

/// The source a program's entries are made from.
enum Input {
    /// A program built from source: analysed at its build.
    Analysed(Arc<Analysis>),
    /// A program created from a binary: the source the store keeps for it.
    Stored(Unit),
}

/// The program's persistent entries, if they are built; the first call for a program
/// whose source is known starts their build (on a thread) and answers `None` meanwhile
/// (under `yielding = "chaos"` it builds them and answers).
pub fn entries(p: &Obj<Program>) -> Option<Arc<YieldExec>> {
    let prog = p.get();
    let mut st = prog.yielding.lock().unwrap_or_else(|e| e.into_inner());
    match &*st {
        YieldState::Ready(e) => return Some(e.clone()),
        YieldState::Building | YieldState::Unavailable => return None,
        YieldState::Unasked => {}
    }
    let input = match &*prog.origin.lock().unwrap_or_else(|e| e.into_inner()) {
        Origin::Source {
            analysis: Some(a), ..
        } => Some((Input::Analysed(a.clone()), prog.build_options())),
        Origin::Binary { .. } => prog.known().and_then(|e| e.source.clone()).map(|u| {
            let options = u.options.as_deref().and_then(|o| CString::new(o).ok());
            (Input::Stored(u), options)
        }),
        _ => None,
    };
    let Some((input, options)) = input else {
        tracing::debug!("no persistent entries: the program's source is not known");
        *st = YieldState::Unavailable;
        drop(st);
        settled(prog, None);
        return None;
    };
    // The build holds the vendor context: the application may release everything of it
    // before the build ends (`core::held_context`).
    let Some(context) = HeldContext::retain(&prog.context.get().inner) else {
        *st = YieldState::Unavailable;
        drop(st);
        settled(prog, None);
        return None;
    };
    *st = YieldState::Building;
    drop(st);
    // Said once per build: tests count these to tell that a kernel seen only briefly (or
    // cold) started none.
    tracing::debug!("persistent entries: build started");
    build_threads::started();
    let job = Job {
        program: p.hold(),
        context,
        input,
        options,
    };
    // Under `chaos` the launch waits for the build, so every launch of a program with
    // entries can be made to yield: built on a thread, they came too late for test suites
    // that launch each program once or twice (pyopencl's suite: 0 yields in 413 launches;
    // the CTS: 10 in 48,000 outside one test). So does a launch on a CPU device: a process
    // that exited while PoCL 3.1 compiled its entries on a thread it did not wait for died
    // in LLVM ("out of memory", a 32 GB request) in 3 of 7 cold runs of the preemption
    // benchmark's smoke co-run. The wait for builds at exit (`build_threads`) runs before
    // the exit handlers registered earlier, but the compile registers its own (static
    // objects of code that only a kernel with barriers in a loop reaches) after it, and
    // those run first. The compile shares the CPU with the launch anyway, and the store
    // keeps the built entries for the next process. On a CPU device the compile is the
    // device's own work for this process, and runs as its threads do
    // (`DeviceThreads::run_as_device_work`).
    let cpu = prog
        .context
        .get()
        .devices
        .iter()
        .find(|d| crate::core::managed::launch::is_cpu(&d.get().inner))
        .map(|d| d.get().platform);
    let chaos = crate::config::config().sched.yielding == crate::config::YieldMode::Chaos;
    if cpu.is_some() || chaos {
        match cpu {
            Some(platform) => platform.get().threads.run_as_device_work(|| job.run()),
            None => job.run(),
        }
        return match &*prog.yielding.lock().unwrap_or_else(|e| e.into_inner()) {
            YieldState::Ready(e) => Some(e.clone()),
            _ => None,
        };
    }
    let spawned = std::thread::Builder::new()
        .name("softpreempt-yield-build".into())
        .spawn(move || job.run());
    if let Err(e) = spawned {
        build_threads::ended();
        tracing::warn!("softpreempt: cannot start a build thread for yielding launches: {e}");
        *prog.yielding.lock().unwrap_or_else(|e| e.into_inner()) = YieldState::Unavailable;
        settled(prog, None);
    }
    None
}

/// Where the store keeps the built entries of `source` with `options` for device `d`:
/// the SHA-256 of both (in `Key::binary`) and the device's identity.
pub fn cache_key(
    vt: &cl_icd_dispatch,
    d: cl_device_id,
    source: &str,
    options: &Option<CString>,
) -> Key {
    let opts = options
        .as_ref()
        .map_or_else(|| "NULL".to_string(), |o| format!("{o:?}"));
    Key {
        binary: sha256_hex(format!("{source}\0options {opts}").as_bytes()),
        device: crate::core::binaries::device_identity(vt, d),
    }
}

/// Builds the entries' `source` in the vendor context `ctx` of `devices`: from their
/// stored binary where the store has a good one (a context of one device), else compiled
/// (and the binary stored for next time).
fn build_entries(
    ctx: &Inner<cl_context>,
    devices: &[cl_device_id],
    source: &str,
    options: &Option<CString>,
) -> Result<OwnedProgram, String> {
    let opts = options_ptr(options);
    let cache = match (devices, Store::configured()) {
        (&[d], Some(store)) => Some((store, d, cache_key(ctx.vt, d, source, options))),
        _ => None,
    };
    if let Some((store, d, key)) = &cache {
        if let Some(bytes) = store.get_built(key) {
            let loaded = OwnedProgram::from_binary(ctx, *d, &bytes).and_then(|owned| {
                rewritten::build("entries (stored binary)", &owned.0, &[*d], opts).map(|()| owned)
            });
            match loaded {
                Ok(owned) => {
                    tracing::debug!("persistent entries loaded from the program store");
                    return Ok(owned);
                }
                Err(why) => crate::info_once!(
                    format!("stored-entries:{}", key.binary),
                    "softpreempt: stored persistent entries did not build, so they are \
                     compiled: {why}"
                ),
            }
        }
    }
    let owned = OwnedProgram::from_source(ctx, source)?;
    rewritten::build("entries", &owned.0, &[], opts)?;
    tracing::debug!("persistent entries compiled");
    // Not kept where the vendor keeps its builds itself (PoCL's kernel cache): the binary
    // for the store cost PoCL a compile of every entry, 370 ms on the launch's thread of a
    // cold `groups_2d` LP (about a third of what its first second lost), to save a later
    // process a rebuild that PoCL's cache makes 28-47 ms (docs/benchmarks.md, session 55).
    let cache = cache.filter(|_| !crate::core::concurrent_builds::caches_builds(ctx.vt));
    if let Some((store, d, key)) = cache {
        let bin = crate::core::binaries::executable_binary(ctx.vt, owned.0.h, d);
        if let Some(Err(err)) = bin.map(|b| store.put_built(&key, &b)) {
            crate::warn_once!(
                "store-write",
                "softpreempt: could not write to the program store {}: {err}",
                store.entries_dir().display()
            );
        }
    }
    Ok(owned)
}

/// Whether kernel `name` of `p` may yet run as a yielding launch, for its class's
/// [`KernelClass::records_args`](crate::core::objects::KernelClass::records_args): not
/// with yielding off, nor once the program's entries are settled without it; until they
/// are, any kernel of a program whose source is known may.
pub fn may_yield(p: &Program, name: &str) -> bool {
    if crate::config::config().sched.yielding == crate::config::YieldMode::Never {
        return false;
    }
    match &*p.yielding.lock().unwrap_or_else(|e| e.into_inner()) {
        YieldState::Ready(e) => e.kernels.contains_key(name),
        YieldState::Unavailable => false,
        // Built from source, or from a binary whose source the store keeps.
        YieldState::Unasked | YieldState::Building => {
            p.origin
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .analysis()
                .is_some()
                || p.known().is_some_and(|e| e.source.is_some())
        }
    }
}

/// The program's persistent entries are settled (`None`: it has none): the classes of
/// kernels without one stop recording argument values. Called without the `yielding`
/// lock, since a class is made (under the `classes` lock) asking [`may_yield`].
fn settled(p: &Program, exec: Option<&YieldExec>) {
    let classes = p.classes.lock().unwrap_or_else(|e| e.into_inner());
    for (name, c) in classes.iter() {
        if !exec.is_some_and(|e| e.kernels.contains_key(name)) {
            c.records_args
                .store(false, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// A build of persistent entries, on its thread.
struct Job {
    program: Ref<Program>,
    /// The program's vendor context, held until the build has ended.
    context: HeldContext,
    input: Input,
    options: Option<CString>,
}

impl Job {
    fn run(self) {
        self.settle();
        // The program (maybe its last reference, and with it the entries) and then the
        // context are released before the build counts as ended (`wait_for_builds`).
        drop(self);
        build_threads::ended();
    }

    /// Builds the entries and records the outcome in the program.
    fn settle(&self) {
        let prog = self.program.get();
        let state = self.make(prog);
        let ready = match &state {
            YieldState::Ready(e) => Some(e.clone()),
            _ => None,
        };
        let mut st = prog.yielding.lock().unwrap_or_else(|e| e.into_inner());
        // A build of the application's program meanwhile reset the state: this one is stale.
        let current = matches!(*st, YieldState::Building);
        if current {
            *st = state;
        }
        drop(st);
        if current {
            settled(prog, ready.as_deref());
        }
    }

    /// Analyses (a stored source), rewrites and builds the entries.
    fn make(&self, prog: &Program) -> YieldState {
        let analysis = match &self.input {
            Input::Analysed(a) => a.clone(),
            Input::Stored(u) => Arc::new(softpreempt_transform::analyse_with_options(
                &u.source,
                &u.headers,
                u.options.as_deref().unwrap_or(""),
            )),
        };
        let context = prog.context.get();
        let form = form_for(prog);
        let y = match rewrite(&analysis, form) {
            Ok(y) => y,
            Err(why) => {
                log_no_yield(&why);
                return YieldState::Unavailable;
            }
        };
        log_no_yield(&y.skipped);
        let devices: Vec<cl_device_id> = context.devices.iter().map(|d| d.get().inner.h).collect();
        match build_entries(&self.context, &devices, &y.source, &self.options) {
            Ok(program) => {
                tracing::debug!(kernels = y.kernels.len(), "persistent entries built");
                YieldState::Ready(Arc::new(YieldExec {
                    program,
                    kernels: y.kernels.into_iter().map(|k| (k.name.clone(), k)).collect(),
                    launched: Mutex::default(),
                    form,
                }))
            }
            Err(why) => {
                crate::warn_once!(
                    "yield-build",
                    "softpreempt: a program's persistent entries did not build ({why}); its \
                     kernels do not yield"
                );
                YieldState::Unavailable
            }
        }
    }
}

/// Says once per kernel why it does not yield.
fn log_no_yield(why: &[(String, String)]) {
    for (k, reason) in why {
        crate::info_once!(
            format!("no-yield:{k}"),
            "softpreempt: kernel '{k}' does not yield: {reason}"
        );
    }
}
