//! The persistent entries of a program's kernels, for yielding launches (architecture,
//! "Yielding launches"; the rewrite is `softpreempt_transform::yielding`).
//!
//! A program built from source gets, on first need, a second vendor program in the same
//! context: its source with a persistent entry `__sp_y_<kernel>` after the last line for
//! each kernel the rewrite can take. It is built on a thread of the layer with the
//! application's build options, the first time a managed queue would launch one of the
//! program's kernels as a yielding launch; until it is built (or where it fails) launches go
//! as before (slices, or the driver). Processes that never ask, such as a high-priority
//! server whose launches go straight to the vendor, never build it.
//!
//! Not yet: programs created from binaries (the program store keeps the geometry rewrite's
//! source, not this one), and programs compiled and linked in steps.

use std::collections::HashMap;
use std::ffi::CString;
use std::sync::Arc;

use softpreempt_transform::YieldKernel;

use crate::core::handle::{Obj, Ref};
use crate::core::objects::Program;
use crate::core::rewritten::OwnedProgram;

/// A built program of persistent entries.
pub struct YieldExec {
    pub program: OwnedProgram,
    /// By the application's kernel name.
    pub kernels: HashMap<String, YieldKernel>,
}

/// Where a program's persistent entries stand.
#[derive(Default)]
pub enum YieldState {
    /// Nobody asked yet (or the program was built again since).
    #[default]
    Unasked,
    /// Being built on a thread of the layer.
    Building,
    Ready(Arc<YieldExec>),
    /// None: not source, no kernel the rewrite could take, or its build failed (logged).
    Unavailable,
}

/// The program's persistent entries, if they are built; the first call for a program
/// built from source starts their build (on a thread) and answers `None` meanwhile.
pub fn entries(p: &Obj<Program>) -> Option<Arc<YieldExec>> {
    let prog = p.get();
    let mut st = prog.yielding.lock().unwrap_or_else(|e| e.into_inner());
    match &*st {
        YieldState::Ready(e) => return Some(e.clone()),
        YieldState::Building | YieldState::Unavailable => return None,
        YieldState::Unasked => {}
    }
    let analysis = prog
        .origin
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .analysis();
    let Some(analysis) = analysis else {
        *st = YieldState::Unavailable;
        drop(st);
        settled(prog, None);
        return None;
    };
    let y = match softpreempt_transform::yielding_or_why(&analysis) {
        Ok(y) => y,
        Err(why) => {
            for (k, reason) in why {
                crate::info_once!(
                    format!("no-yield:{k}"),
                    "softpreempt: kernel '{k}' does not yield: {reason}"
                );
            }
            *st = YieldState::Unavailable;
            drop(st);
            settled(prog, None);
            return None;
        }
    };
    for (k, reason) in &y.skipped {
        crate::info_once!(
            format!("no-yield:{k}"),
            "softpreempt: kernel '{k}' does not yield: {reason}"
        );
    }
    if !y.headers.is_empty() {
        // Compiled with headers (clCompileProgram): its entries would need them too.
        *st = YieldState::Unavailable;
        drop(st);
        settled(prog, None);
        return None;
    }
    *st = YieldState::Building;
    drop(st);
    builds_started();
    let options = prog.build_options();
    let job = Job {
        program: p.hold(),
        source: y.source,
        kernels: y.kernels,
        options,
    };
    let spawned = std::thread::Builder::new()
        .name("softpreempt-yield-build".into())
        .spawn(move || job.run());
    if let Err(e) = spawned {
        builds_ended();
        tracing::warn!("softpreempt: cannot start a build thread for yielding launches: {e}");
        *prog.yielding.lock().unwrap_or_else(|e| e.into_inner()) = YieldState::Unavailable;
        settled(prog, None);
    }
    None
}

/// Whether kernel `name` of `p` may yet run as a yielding launch, for its class's
/// [`KernelClass::records_args`](crate::core::objects::KernelClass::records_args): not
/// with yielding off, nor once the program's entries are settled without it; until they
/// are, any kernel of a program built from source may.
pub fn may_yield(p: &Program, name: &str) -> bool {
    if crate::config::config().sched.yielding == crate::config::YieldMode::Never {
        return false;
    }
    match &*p.yielding.lock().unwrap_or_else(|e| e.into_inner()) {
        YieldState::Ready(e) => e.kernels.contains_key(name),
        YieldState::Unavailable => false,
        YieldState::Unasked | YieldState::Building => p
            .origin
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .analysis()
            .is_some(),
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
    source: String,
    kernels: Vec<YieldKernel>,
    options: Option<CString>,
}

impl Job {
    fn run(self) {
        let prog = self.program.get();
        let ctx = &prog.context.get().inner;
        let built = OwnedProgram::from_source(ctx, &self.source).and_then(|owned| {
            let opts = self
                .options
                .as_ref()
                .map_or(std::ptr::null(), |o| o.as_ptr());
            crate::core::rewritten::build(&owned.0, &[], opts).map(|()| owned)
        });
        let state = match built {
            Ok(program) => {
                tracing::debug!(kernels = self.kernels.len(), "persistent entries built");
                YieldState::Ready(Arc::new(YieldExec {
                    program,
                    kernels: self
                        .kernels
                        .into_iter()
                        .map(|k| (k.name.clone(), k))
                        .collect(),
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
        };
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
        builds_ended();
    }
}

/// Builds of persistent entries still running on threads of the layer.
static BUILDS: std::sync::Mutex<usize> = std::sync::Mutex::new(0);
static BUILDS_DONE: std::sync::Condvar = std::sync::Condvar::new();

/// A build starts. The first one registers [`wait_for_builds`] to run at exit: a vendor
/// compiler still running on a thread of ours while the process tears the vendor library
/// down crashes the process (seen with PoCL: a test binary that exited right after its
/// last launch died of SIGSEGV once in 8 runs).
fn builds_started() {
    static AT_EXIT: std::sync::Once = std::sync::Once::new();
    AT_EXIT.call_once(|| {
        // SAFETY: registering a plain function that only waits on our own statics.
        unsafe { libc::atexit(wait_for_builds) };
    });
    *BUILDS.lock().unwrap_or_else(|e| e.into_inner()) += 1;
}

fn builds_ended() {
    let mut n = BUILDS.lock().unwrap_or_else(|e| e.into_inner());
    *n = n.saturating_sub(1);
    BUILDS_DONE.notify_all();
}

/// At exit: waits (at most 10 s) until no build of persistent entries runs any more.
extern "C" fn wait_for_builds() {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut n = BUILDS.lock().unwrap_or_else(|e| e.into_inner());
    while *n > 0 {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            break;
        }
        n = BUILDS_DONE
            .wait_timeout(n, left)
            .map(|(g, _)| g)
            .unwrap_or_else(|e| e.into_inner().0);
    }
}
