//! Programs built from rewritten source (rule 5), and the application's own program
//! behind them (rule 9).
//!
//! A source program whose kernels read the launch geometry is built, on the vendor, as a
//! second program object created from the rewritten source in the same context (the
//! [`Exec`]). Everything that concerns the executable (build status and log, kernels)
//! is answered from the `Exec`. The application's own vendor program keeps the original
//! source, and is built only when the application asks for binaries ([`Bare`]): so
//! `CL_PROGRAM_BINARIES` is what the bare driver gives for the application's program, a
//! binary moves freely between the bare platform and SoftPreempt, and a program loaded
//! from it answers every kernel query as the bare driver. What the rewrite learned goes
//! into the program store (`crate::store`), keyed by that binary, so a later process
//! that loads it builds the rewritten program again from the stored source.

// Vendor handles and the application's pointers are only handed to the vendor, or read
// through `core::args`' checked helpers, as in `api/`.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use std::ffi::{c_char, CString};
use std::sync::{Arc, Mutex};

use crate::core::cl::*;
use crate::core::error::CLResult;
use crate::core::forward::{fetch_info, info_string, Inner};
use crate::core::handle::Ref;
use crate::core::objects::{Program, Sliceable};
use crate::core::platform::Device;
use crate::store::{KernelFacts, Recipe};
use crate::{vcreate, vtry};

/// What the layer knows of the kernels of one program (a rewrite, or the inputs of a
/// link, or a stored entry).
#[derive(Default)]
pub struct RewriteInfo {
    pub kernels: Vec<KernelFacts>,
}

impl RewriteInfo {
    /// The index of `kernel`'s hidden geometry argument, if it was rewritten.
    pub fn hidden(&self, kernel: &str) -> Option<u32> {
        self.facts(kernel).and_then(|k| k.hidden)
    }

    pub fn facts(&self, kernel: &str) -> Option<&KernelFacts> {
        self.kernels.iter().find(|k| k.name == kernel)
    }

    /// Whether launches of `kernel` may be sliced.
    pub fn sliceable(&self, kernel: &str) -> Sliceable {
        self.facts(kernel).map_or_else(
            || Sliceable::No("kernel not found in the program source".into()),
            |k| k.sliceable.clone(),
        )
    }

    /// The union of several programs' facts (the inputs of a link).
    pub fn merged<'a>(infos: impl Iterator<Item = &'a RewriteInfo>) -> RewriteInfo {
        RewriteInfo {
            kernels: infos.flat_map(|i| i.kernels.iter().cloned()).collect(),
        }
    }
}

/// A vendor program the layer created for itself, released when dropped.
pub struct OwnedProgram(pub Inner<cl_program>);

impl Drop for OwnedProgram {
    fn drop(&mut self) {
        if let Some(f) = self.0.vt.clReleaseProgram {
            // SAFETY: the program we created; this is our only reference to it.
            unsafe { f(self.0.h) };
        }
    }
}

// SAFETY: a vendor handle; OpenCL objects may be used from any thread.
unsafe impl Send for OwnedProgram {}
// SAFETY: as above.
unsafe impl Sync for OwnedProgram {}

/// How the application's own program gets the executable the bare driver would have
/// built, the first time its binaries are asked for.
pub enum Bare {
    /// `clBuildProgram` of the application's vendor program (original source, or the
    /// binary it was created from) with these devices and options.
    Build {
        devices: Vec<Ref<Device>>,
        options: Option<CString>,
    },
    /// `clCompileProgram` of it, with the application's header programs (retained: the
    /// application may release them once its compile returned).
    Compile {
        devices: Vec<Ref<Device>>,
        options: Option<CString>,
        headers: Vec<OwnedProgram>,
        names: Vec<CString>,
    },
    /// `clLinkProgram` of the bare forms of these inputs (their vendor programs retained).
    Link {
        devices: Vec<Ref<Device>>,
        options: Option<CString>,
        inputs: Vec<(Ref<Program>, OwnedProgram)>,
    },
    /// Being built beside the rewritten program, in a private context of the layer
    /// (`core::own_build`): waited for when first needed.
    Building(crate::core::own_build::Pending),
    /// Done: the application's vendor program holds it (`None`) or this one does.
    Ready(Option<OwnedProgram>),
    /// The bare build failed (logged): binaries are answered from the unbuilt program.
    Failed,
}

/// The executable behind an application's program built from rewritten code.
pub struct Exec {
    /// The vendor program built from the rewritten source (released with the last
    /// holder: the program and its kernels); `None` when the application's own vendor
    /// program is the executable (a link of rewritten inputs).
    pub program: Option<OwnedProgram>,
    pub info: Arc<RewriteInfo>,
    /// How to build the rewritten program again in another process, when it can be.
    pub recipe: Option<Arc<Recipe>>,
    /// The application's own program, as the bare driver builds it.
    pub bare: Mutex<Bare>,
}

/// A device list for a vendor call: NULL for an empty one.
fn list_ptr<T>(list: &[T]) -> *const T {
    if list.is_empty() {
        std::ptr::null()
    } else {
        list.as_ptr()
    }
}

/// The vendor-call macros return their error from the enclosing function: these small
/// functions give them one.
impl OwnedProgram {
    /// One more reference to an application's vendor program, so it outlives the
    /// application's release of it (a later bare compile or link still needs it).
    pub fn retain(p: &Inner<cl_program>) -> Option<OwnedProgram> {
        let f = p.vt.clRetainProgram?;
        // SAFETY: a live vendor program (its wrapper was just checked).
        (unsafe { f(p.h) } == CL_SUCCESS).then(|| OwnedProgram(p.clone()))
    }

    /// A program of one device's binary in the vendor context `c`.
    pub fn from_binary(
        c: &Inner<cl_context>,
        device: cl_device_id,
        bytes: &[u8],
    ) -> Result<OwnedProgram, String> {
        let create = || -> CLResult<cl_program> {
            let mut ptr = bytes.as_ptr();
            let len = bytes.len();
            let mut status = CL_SUCCESS;
            let h = vcreate!(
                c.vt,
                clCreateProgramWithBinary(c.h, 1, &device, &len, &mut ptr, &mut status)
            )?;
            if status != CL_SUCCESS {
                let owned = OwnedProgram(c.child(h));
                drop(owned);
                return Err(status);
            }
            Ok(h)
        };
        create()
            .map(|h| OwnedProgram(c.child(h)))
            .map_err(|e| format!("creating it from its binary failed ({e})"))
    }

    /// A program of `text` in the vendor context `c`.
    pub fn from_source(c: &Inner<cl_context>, text: &str) -> Result<OwnedProgram, String> {
        let create = || -> CLResult<cl_program> {
            let mut ptr = text.as_ptr() as *const c_char;
            let len = text.len();
            vcreate!(c.vt, clCreateProgramWithSource(c.h, 1, &mut ptr, &len))
        };
        create()
            .map(|h| OwnedProgram(c.child(h)))
            .map_err(|e| format!("creating it failed ({e})"))
    }
}

/// Runs one vendor build, compile or link of `what` (the layer's name for it) and logs
/// how long it took at `debug`: a cold start's cost is mostly these (PoCL compiles for
/// seconds), and the log says which program paid for what.
pub fn timed<T>(what: &str, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    let t0 = std::time::Instant::now();
    let r = f();
    tracing::debug!(
        what,
        ms = t0.elapsed().as_millis() as u64,
        ok = r.is_ok(),
        "softpreempt: vendor build"
    );
    r
}

/// `clBuildProgram` of the vendor program `p`, without a notification.
pub fn build(
    what: &str,
    p: &Inner<cl_program>,
    devices: &[cl_device_id],
    options: *const c_char,
) -> Result<(), String> {
    let run = || -> CLResult<()> {
        vtry!(
            p.vt,
            clBuildProgram(
                p.h,
                devices.len() as cl_uint,
                list_ptr(devices),
                options,
                None,
                std::ptr::null_mut()
            )
        )
    };
    timed(what, || run().map_err(|e| failure(p, e, devices)))
}

/// `clCompileProgram` of the vendor program `p` with these header programs and include
/// names.
pub fn compile(
    what: &str,
    p: &Inner<cl_program>,
    devices: &[cl_device_id],
    options: *const c_char,
    headers: &[cl_program],
    names: &[*const c_char],
) -> Result<(), String> {
    let mut names = names.to_vec();
    let mut run = || -> CLResult<()> {
        vtry!(
            p.vt,
            clCompileProgram(
                p.h,
                devices.len() as cl_uint,
                list_ptr(devices),
                options,
                headers.len() as cl_uint,
                list_ptr(headers),
                if names.is_empty() {
                    std::ptr::null_mut()
                } else {
                    names.as_mut_ptr()
                },
                None,
                std::ptr::null_mut()
            )
        )
    };
    timed(what, || run().map_err(|e| failure(p, e, devices)))
}

impl OwnedProgram {
    /// `clLinkProgram` of `inputs` in the vendor context `c`.
    pub fn link(
        what: &str,
        c: &Inner<cl_context>,
        devices: &[cl_device_id],
        options: *const c_char,
        inputs: &[cl_program],
    ) -> Result<OwnedProgram, String> {
        let run = || -> CLResult<cl_program> {
            vcreate!(
                c.vt,
                clLinkProgram(
                    c.h,
                    devices.len() as cl_uint,
                    list_ptr(devices),
                    options,
                    inputs.len() as cl_uint,
                    list_ptr(inputs),
                    None,
                    std::ptr::null_mut()
                )
            )
        };
        timed(what, || {
            run()
                .map(|h| OwnedProgram(c.child(h)))
                .map_err(|e| format!("linking it failed ({e})"))
        })
    }
}

/// Why a build or compile failed: the error and the first error line of the log.
fn failure(p: &Inner<cl_program>, e: cl_int, devices: &[cl_device_id]) -> String {
    let device = devices.first().copied().unwrap_or(std::ptr::null_mut());
    let log = fetch_info(|s, v, r| match p.vt.clGetProgramBuildInfo {
        // SAFETY: the vendor's query on our own program, buffers sized by fetch_info.
        Some(f) => unsafe { f(p.h, device, CL_PROGRAM_BUILD_LOG, s, v, r) },
        None => CL_INVALID_OPERATION,
    })
    .map(|b| info_string(&b))
    .unwrap_or_default();
    let line = log
        .lines()
        .find(|l| l.contains("error"))
        .unwrap_or("")
        .trim();
    format!("error {e}: {line}")
}

/// Optional build options as the vendor takes them.
pub fn options_ptr(options: &Option<CString>) -> *const c_char {
    options.as_ref().map_or(std::ptr::null(), |o| o.as_ptr())
}

/// The options a stored [`Recipe`] builds its program with (those of its only unit, or
/// of its link), for building its binary.
pub fn recipe_options(recipe: &Recipe) -> Option<CString> {
    let text = match (&recipe.units[..], recipe.linked) {
        ([unit], false) => unit.options.as_deref(),
        _ => recipe.link_options.as_deref(),
    };
    text.and_then(|t| CString::new(t).ok())
}

/// Builds the rewritten program of a stored [`Recipe`] in the vendor context `c`: one
/// unit built, or every unit compiled (with its headers) and the objects linked.
pub fn build_recipe(
    c: &Inner<cl_context>,
    devices: &[cl_device_id],
    recipe: &Recipe,
) -> Result<OwnedProgram, String> {
    let cstr = |s: &Option<String>| {
        s.as_deref()
            .map(CString::new)
            .transpose()
            .map_err(|_| "options hold a NUL byte".to_string())
    };
    if let ([unit], false) = (&recipe.units[..], recipe.linked) {
        if unit.headers.is_empty() {
            let program = OwnedProgram::from_source(c, &unit.source)?;
            build(
                "rewritten (recipe)",
                &program.0,
                devices,
                options_ptr(&cstr(&unit.options)?),
            )?;
            return Ok(program);
        }
    }
    let mut objects = Vec::new();
    for unit in &recipe.units {
        let program = OwnedProgram::from_source(c, &unit.source)?;
        let headers = unit
            .headers
            .iter()
            .map(|(_, text)| OwnedProgram::from_source(c, text))
            .collect::<Result<Vec<_>, _>>()?;
        let names = unit
            .headers
            .iter()
            .map(|(n, _)| CString::new(n.as_str()).map_err(|_| "a NUL byte".to_string()))
            .collect::<Result<Vec<_>, _>>()?;
        let handles: Vec<cl_program> = headers.iter().map(|h| h.0.h).collect();
        let name_ptrs: Vec<*const c_char> = names.iter().map(|n| n.as_ptr()).collect();
        compile(
            "rewritten (recipe)",
            &program.0,
            devices,
            options_ptr(&cstr(&unit.options)?),
            &handles,
            &name_ptrs,
        )?;
        objects.push(program);
    }
    let inputs: Vec<cl_program> = objects.iter().map(|o| o.0.h).collect();
    let link = cstr(&recipe.link_options)?;
    OwnedProgram::link(
        "rewritten (recipe)",
        c,
        devices,
        options_ptr(&link),
        &inputs,
    )
}
