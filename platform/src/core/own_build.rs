//! The application's own program built beside its rewritten one, so that a cold start
//! costs one compile's time, not two (rule 9; docs/design.md, "The application's own
//! binary").
//!
//! A source program whose rewrite has kernels is built, on the vendor, from the rewritten
//! source; its binaries are the application's own program's, built as the bare driver
//! builds it. Built only when asked for, that is a second compile after the first, and
//! pyopencl asks for every program it builds: its cold suite took twice the bare driver's
//! time on PoCL. Built at the same time, in the application's context, it would not help:
//! PoCL compiles one program at a time per context (two builds in one context took as long
//! as one after the other; in two contexts, as long as one). So the own program is
//! created from the application's source in a *private* vendor context of the same
//! devices and built there on a thread of the layer, while the rewritten one builds in
//! the application's context. Its binary is the same (a build depends on the source,
//! options and device, not on the context; PoCL's are byte-identical, as between the bare
//! platform and SoftPreempt), and only its binaries are read, so nothing else the
//! application sees changes.
//!
//! Started only once this process has asked for some program's binaries: a process that
//! never does (most GPU applications) pays nothing for it; one that does (pyopencl, OpenCV)
//! builds its first program's own program when asked, as before, and every later one beside
//! its rewritten build. And only on PoCL (`core::concurrent_builds`): elsewhere compiles
//! take milliseconds, and NVIDIA's crashed with builds running beside the application's.

use std::ffi::CString;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::thread::JoinHandle;

use crate::core::build_threads;
use crate::core::cl::*;
use crate::core::error::CLResult;
use crate::core::forward::{fetch_info, fetch_scalar, info_string, Inner};
use crate::core::handle::Ref;
use crate::core::objects::Program;
use crate::core::platform::Device;
use crate::core::rewritten::{self, options_ptr, OwnedProgram};
use crate::vcreate;

/// Whether this process has asked for a program's binaries.
static ASKED: AtomicBool = AtomicBool::new(false);

/// The application read `CL_PROGRAM_BINARY_SIZES` or `CL_PROGRAM_BINARIES`: later
/// builds start their own program beside the rewritten one.
pub fn binaries_asked() {
    ASKED.store(true, Ordering::Relaxed);
}

/// The application's own program being built on a thread of the layer.
pub struct Pending(JoinHandle<Result<OwnedProgram, String>>);

impl Pending {
    /// Waits for the build: the built program (in the private context), or why not.
    pub fn wait(self) -> Result<OwnedProgram, String> {
        self.0
            .join()
            .unwrap_or_else(|_| Err("internal error in the build thread".into()))
    }
}

/// A vendor context the layer made for itself and keeps for the process (one per device
/// list: a handful at most). Never released: a build on one may still run at exit.
struct Private(Inner<cl_context>);

// SAFETY: a vendor handle; OpenCL objects may be used from any thread.
unsafe impl Send for Private {}

/// The private contexts, by their device list.
static PRIVATE: Mutex<Vec<(Vec<usize>, Private)>> = Mutex::new(Vec::new());

/// Starts building the application's own program `p` (a source program) with these
/// devices and options in a private context, if this process asks for binaries.
/// `None`: not started (the own program is then built when its binaries are asked for).
pub fn start(p: &Program, devices: &[Ref<Device>], options: &Option<CString>) -> Option<Pending> {
    // Only where two builds at once are known to be safe, and gain (`concurrent_builds`).
    if !ASKED.load(Ordering::Relaxed) || !crate::core::concurrent_builds::safe(p.inner.vt) {
        return None;
    }
    let vt = p.inner.vt;
    let query = |param| {
        fetch_info(|s, v, r| match vt.clGetProgramInfo {
            // SAFETY: the vendor's query on the application's program, buffers sized by
            // fetch_info.
            Some(f) => unsafe { f(p.inner.h, param, s, v, r) },
            None => CL_INVALID_OPERATION,
        })
        .ok()
    };
    // The source and devices as the vendor holds them, so the program is the same.
    let source = info_string(&query(CL_PROGRAM_SOURCE)?);
    let program_devices: Vec<cl_device_id> = query(CL_PROGRAM_DEVICES)?
        .chunks_exact(std::mem::size_of::<cl_device_id>())
        .map(crate::api::device::read_handle)
        .collect();
    let context = private_context(&p.context.get().inner, &program_devices)?;
    let program = match OwnedProgram::from_source(&context, &source) {
        Ok(program) => program,
        Err(why) => {
            tracing::debug!("softpreempt: own program not started beside the rewritten one: {why}");
            return None;
        }
    };
    let build_devices = Handles(devices.iter().map(|d| d.get().inner.h).collect());
    let options = options.clone();
    build_threads::started();
    let spawned = std::thread::Builder::new()
        .name("softpreempt-own-build".into())
        .spawn(move || {
            let devices = build_devices;
            let r = rewritten::build(
                "own (beside)",
                &program.0,
                &devices.0,
                options_ptr(&options),
            )
            .map(|()| {
                prepare_binaries(&program.0);
                program
            });
            build_threads::ended();
            r
        });
    match spawned {
        Ok(h) => Some(Pending(h)),
        Err(e) => {
            build_threads::ended();
            tracing::debug!("softpreempt: cannot start a build thread for the own program: {e}");
            None
        }
    }
}

/// Has the vendor make the built own program's binaries now, on its build thread: PoCL
/// compiles every kernel to machine code the first time `CL_PROGRAM_BINARY_SIZES` is
/// asked (and keeps the result), which takes longer than the build itself, and the
/// application will ask.
fn prepare_binaries(program: &Inner<cl_program>) {
    let t0 = std::time::Instant::now();
    let r = fetch_info(|s, v, r| match program.vt.clGetProgramInfo {
        // SAFETY: the vendor's query on our own program, buffers sized by fetch_info.
        Some(f) => unsafe { f(program.h, CL_PROGRAM_BINARY_SIZES, s, v, r) },
        None => CL_INVALID_OPERATION,
    });
    tracing::debug!(
        what = "own (beside) binaries",
        ms = t0.elapsed().as_millis() as u64,
        ok = r.is_ok(),
        "softpreempt: vendor build"
    );
}

/// Vendor device handles taken to a build thread.
struct Handles(Vec<cl_device_id>);

// SAFETY: vendor device handles, usable from any thread.
unsafe impl Send for Handles {}

/// The layer's context of `devices` on the vendor of `app` (made the first time).
fn private_context(app: &Inner<cl_context>, devices: &[cl_device_id]) -> Option<Inner<cl_context>> {
    let key: Vec<usize> = devices.iter().map(|&d| d as usize).collect();
    let mut all = PRIVATE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, c)) = all.iter().find(|(k, _)| *k == key) {
        return Some(c.0.clone());
    }
    let first = *devices.first()?;
    let platform: cl_platform_id = fetch_scalar(|s, v, r| match app.vt.clGetDeviceInfo {
        // SAFETY: the vendor's query on its own device, into a handle.
        Some(f) => unsafe { f(first, CL_DEVICE_PLATFORM, s, v, r) },
        None => CL_INVALID_OPERATION,
    })
    .ok()?;
    let props: [cl_context_properties; 3] = [
        CL_CONTEXT_PLATFORM as cl_context_properties,
        platform as cl_context_properties,
        0,
    ];
    // The vendor-call macros return their error from the enclosing function.
    let create = || -> CLResult<cl_context> {
        vcreate!(
            app.vt,
            clCreateContext(
                props.as_ptr(),
                devices.len() as cl_uint,
                devices.as_ptr(),
                None,
                std::ptr::null_mut()
            )
        )
    };
    let made = create();
    match made {
        Ok(h) => {
            let c = app.child(h);
            all.push((key, Private(c.clone())));
            Some(c)
        }
        Err(e) => {
            crate::info_once!(
                "own-build-context",
                "softpreempt: no private context for building programs beside their rewrite ({e}): binaries are built when asked for"
            );
            None
        }
    }
}
