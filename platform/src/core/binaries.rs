//! Program binaries (architecture rule 9): the application gets the bare driver's binary
//! of its own program, and what the layer learned from the source goes into the program
//! store under that binary, so that a later process loading it is scheduled as a source
//! build (see `core::rewritten` and `crate::store`).

// Vendor handles and the application's pointers are only handed to the vendor, or read
// through `core::args`' checked helpers, as in `api/`.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use std::sync::Arc;

use crate::core::cl::*;
use crate::core::forward::{fetch_info, fetch_scalar, info_string, Inner};
use crate::core::objects::{Program, Sliceable};
use crate::core::rewritten::{self, options_ptr, Bare, Exec, OwnedProgram};
use crate::core::sliceable::{self, sha256_hex};
use crate::core::yield_program;
use crate::store::{Entry, KernelFacts, Key, Store, Yields};

/// A vendor device as the store knows it: platform, device, and driver version, so a
/// binary is never taken for one built by another driver.
pub fn device_identity(vt: &cl_icd_dispatch, d: cl_device_id) -> String {
    let dev = |param: cl_device_info| {
        fetch_info(|s, v, r| match vt.clGetDeviceInfo {
            // SAFETY: the vendor's query on its own device, buffers sized by fetch_info.
            Some(f) => unsafe { f(d, param, s, v, r) },
            None => CL_INVALID_OPERATION,
        })
        .map(|b| info_string(&b))
        .unwrap_or_default()
    };
    let platform: cl_platform_id = fetch_scalar(|s, v, r| match vt.clGetDeviceInfo {
        // SAFETY: the vendor's query on its own device, into a handle.
        Some(f) => unsafe { f(d, CL_DEVICE_PLATFORM, s, v, r) },
        None => CL_INVALID_OPERATION,
    })
    .unwrap_or(std::ptr::null_mut());
    let plat = |param: cl_platform_info| {
        fetch_info(|s, v, r| match vt.clGetPlatformInfo {
            // SAFETY: the vendor's query on its own platform, buffers sized by fetch_info.
            Some(f) => unsafe { f(platform, param, s, v, r) },
            None => CL_INVALID_OPERATION,
        })
        .map(|b| info_string(&b))
        .unwrap_or_default()
    };
    format!(
        "{} | {} | {} | {} | {} | {}",
        plat(CL_PLATFORM_NAME),
        plat(CL_PLATFORM_VERSION),
        dev(CL_DEVICE_NAME),
        dev(CL_DEVICE_VENDOR),
        dev(CL_DEVICE_VERSION),
        dev(CL_DRIVER_VERSION)
    )
}

/// What the layer knows of `kernel` of `p`: from the rewritten executable, else from the
/// store's entry for the binary it was loaded from, else from where its code came from.
pub fn kernel_facts(p: &Program, kernel: &str) -> KernelFacts {
    let facts = |hidden, sliceable| KernelFacts {
        name: kernel.to_string(),
        hidden,
        sliceable,
        yields: Yields::Unknown,
    };
    if let Some(f) = p.exec().and_then(|e| e.info.facts(kernel).cloned()) {
        return f;
    }
    if let Some(entry) = p.known() {
        return match entry.kernel(kernel) {
            // Its rewritten program is not built (it failed, and said so): the bare
            // kernel reads the geometry itself.
            Some(f) if f.hidden.is_some() => facts(
                None,
                Sliceable::No(
                    "it reads the launch geometry and its rewritten program did not build".into(),
                ),
            ),
            Some(f) => f.clone(),
            None => facts(
                None,
                Sliceable::No("kernel not in the program store's entry".into()),
            ),
        };
    }
    let origin = p.origin.lock().unwrap_or_else(|e| e.into_inner());
    facts(None, sliceable::of_kernel(&origin, kernel))
}

/// The vendor program whose binaries are the application's: its own, built as the bare
/// driver would build it (the first time it is asked for).
pub fn bare_handle(p: &Program) -> cl_program {
    match p.exec() {
        Some(exec) => bare_of(p, &exec),
        None => p.inner.h,
    }
}

fn bare_of(p: &Program, exec: &Exec) -> cl_program {
    let mut bare = exec.bare.lock().unwrap_or_else(|e| e.into_inner());
    let state = std::mem::replace(&mut *bare, Bare::Failed);
    *bare = match build_bare(p, state) {
        Ok(s) => s,
        Err(why) => {
            crate::warn_once!(
                format!("bare-build:{:p}", p),
                "softpreempt: building the application's own program (for its binaries) failed: {why}"
            );
            Bare::Failed
        }
    };
    match &*bare {
        Bare::Ready(Some(o)) => o.0.h,
        _ => p.inner.h,
    }
}

fn build_bare(p: &Program, state: Bare) -> Result<Bare, String> {
    if let Bare::Building(pending) = state {
        return pending.wait().map(|o| Bare::Ready(Some(o)));
    }
    match &state {
        Bare::Ready(_) | Bare::Failed | Bare::Building(_) => Ok(state),
        Bare::Build { devices, options } => {
            let devs: Vec<cl_device_id> = devices.iter().map(|d| d.get().inner.h).collect();
            rewritten::build("own", &p.inner, &devs, options_ptr(options))
                .map(|()| Bare::Ready(None))
        }
        Bare::Compile {
            devices,
            options,
            headers,
            names,
        } => {
            let devs: Vec<cl_device_id> = devices.iter().map(|d| d.get().inner.h).collect();
            let hs: Vec<cl_program> = headers.iter().map(|h| h.0.h).collect();
            let ns: Vec<*const std::ffi::c_char> = names.iter().map(|n| n.as_ptr()).collect();
            rewritten::compile("own", &p.inner, &devs, options_ptr(options), &hs, &ns)
                .map(|()| Bare::Ready(None))
        }
        Bare::Link {
            devices,
            options,
            inputs,
        } => {
            let devs: Vec<cl_device_id> = devices.iter().map(|d| d.get().inner.h).collect();
            let ins: Vec<cl_program> = inputs.iter().map(|(i, _)| bare_handle(i.get())).collect();
            let c = &p.context.get().inner;
            OwnedProgram::link("own", c, &devs, options_ptr(options), &ins)
                .map(|o| Bare::Ready(Some(o)))
        }
    }
}

/// What the store should keep for `p`, if anything is worth keeping: every kernel's
/// facts, the recipe of its rewritten program, and its source when a kernel yields.
fn learned(p: &Program) -> Option<Entry> {
    let exec = p.exec_handle();
    let names = fetch_info(|s, v, r| match p.inner.vt.clGetProgramInfo {
        // SAFETY: the vendor's query on its own program, buffers sized by fetch_info.
        Some(f) => unsafe { f(exec, CL_PROGRAM_KERNEL_NAMES, s, v, r) },
        None => CL_INVALID_OPERATION,
    })
    .ok()?;
    let recipe = p.exec().and_then(|e| e.recipe.clone());
    let yielding = yield_program::of_source(p);
    let kernels: Vec<KernelFacts> = info_string(&names)
        .split(';')
        .filter(|n| !n.is_empty())
        .map(|n| {
            let mut f = kernel_facts(p, n);
            if f.hidden.is_some() && recipe.is_none() {
                f.hidden = None;
                f.sliceable = Sliceable::No(
                    "it reads the launch geometry and its rewritten program cannot be rebuilt \
                     from the store (an input of its link has no source)"
                        .into(),
                );
            }
            f.yields = match &yielding {
                Some((r, _)) => yield_program::yields(r, n),
                None => Yields::No("its program was not built from source alone".into()),
            };
            f
        })
        .collect();
    let hidden = kernels.iter().any(|k| k.hidden.is_some());
    let yields = kernels.iter().any(|k| k.yields == Yields::Yes);
    let useful = yields
        || kernels
            .iter()
            .any(|k| matches!(k.sliceable, Sliceable::Yes { .. }));
    useful.then(|| Entry {
        kernels,
        recipe: if hidden {
            recipe.map(|r| (*r).clone())
        } else {
            None
        },
        rewritten_binary: None,
        source: yielding.filter(|_| yields).map(|(_, unit)| unit),
    })
}

/// The vendor program `h`'s executable binary for `device`, if it has one.
pub fn executable_binary(
    vt: &cl_icd_dispatch,
    h: cl_program,
    device: cl_device_id,
) -> Option<Vec<u8>> {
    if binary_type(vt, h, device) != CL_PROGRAM_BINARY_TYPE_EXECUTABLE {
        return None;
    }
    let query = |param| {
        fetch_info(|s, v, r| match vt.clGetProgramInfo {
            // SAFETY: the vendor's query on its own program, buffers sized by fetch_info.
            Some(f) => unsafe { f(h, param, s, v, r) },
            None => CL_INVALID_OPERATION,
        })
        .ok()
    };
    let devs = handles::<cl_device_id>(&query(CL_PROGRAM_DEVICES)?);
    let sizes = handles::<usize>(&query(CL_PROGRAM_BINARY_SIZES)?);
    let i = devs.iter().position(|&d| d == device)?;
    let mut bin = vec![0u8; *sizes.get(i)?];
    // Only this device's binary is asked for: the others' entries are NULL.
    let mut ptrs: Vec<*mut u8> = vec![std::ptr::null_mut(); devs.len()];
    ptrs[i] = bin.as_mut_ptr();
    let f = vt.clGetProgramInfo?;
    // SAFETY: one pointer per device, the asked one to a buffer of its binary's size.
    let rc = unsafe {
        f(
            h,
            CL_PROGRAM_BINARIES,
            std::mem::size_of_val(ptrs.as_slice()),
            ptrs.as_mut_ptr() as *mut std::ffi::c_void,
            std::ptr::null_mut(),
        )
    };
    (rc == CL_SUCCESS && !bin.is_empty()).then_some(bin)
}

/// An info answer that is an array of handles or sizes.
fn handles<T: Copy + Default>(raw: &[u8]) -> Vec<T> {
    raw.chunks_exact(std::mem::size_of::<T>())
        .map(crate::api::device::read_handle)
        .collect()
}

/// Records what the layer learned of `p` for each binary the vendor just wrote into the
/// application's `CL_PROGRAM_BINARIES` buffers (from the bare program `bare`).
pub fn record(p: &Program, bare: cl_program, size: usize, value: *mut std::ffi::c_void) {
    if p.known().is_some() {
        // It came from the store: the entry is there already.
        return;
    }
    let Some(store) = Store::configured() else {
        return;
    };
    let vt = p.inner.vt;
    let query = |param| {
        fetch_info(|s, v, r| match vt.clGetProgramInfo {
            // SAFETY: the vendor's query on its own program, buffers sized by fetch_info.
            Some(f) => unsafe { f(bare, param, s, v, r) },
            None => CL_INVALID_OPERATION,
        })
    };
    let (Ok(devs), Ok(sizes)) = (query(CL_PROGRAM_DEVICES), query(CL_PROGRAM_BINARY_SIZES)) else {
        return;
    };
    let devs = handles::<cl_device_id>(&devs);
    let sizes = handles::<usize>(&sizes);
    let n = sizes.len().min(size / std::mem::size_of::<*mut u8>());
    let ptrs = crate::core::args::slice(value as *const *const u8, n).unwrap_or(&[]);
    let mut entry = None;
    for ((&ptr, &len), &dev) in ptrs.iter().zip(&sizes).zip(&devs) {
        // A NULL entry is a binary the application did not ask for; an object or library
        // (clCompileProgram) is not what a later process builds kernels from.
        if ptr.is_null()
            || len == 0
            || binary_type(vt, bare, dev) != CL_PROGRAM_BINARY_TYPE_EXECUTABLE
        {
            continue;
        }
        let Ok(bytes) = crate::core::args::slice(ptr, len) else {
            continue;
        };
        let Some(learned) = entry.get_or_insert_with(|| learned(p)) else {
            return;
        };
        let mut e = learned.clone();
        let key = Key {
            binary: sha256_hex(bytes),
            device: device_identity(vt, dev),
        };
        let stored = store.get(&key);
        if e.recipe.is_some() {
            // The same source and options give the same rewritten binary: one stored
            // already is kept.
            e.rewritten_binary = stored.as_ref().and_then(|s| s.rewritten_binary.clone());
        }
        if stored.as_ref() == Some(&e) {
            // Known already (a rebuild, or a binary asked for twice): the read refreshed it.
            continue;
        }
        if let Err(err) = store.put(&key, &e) {
            crate::warn_once!(
                "store-write",
                "softpreempt: could not write to the program store {}: {err}",
                store.entries_dir().display()
            );
            continue;
        }
        if e.recipe.is_some() && e.rewritten_binary.is_none() {
            store_rewritten_binary(p, dev, key, e);
        }
    }
}

/// Keeps the rewritten program's own binary for `dev` beside the entry `e` of `key` (so a
/// later process need not compile the recipe). Made on a thread of the layer: PoCL
/// compiles every kernel to machine code to make it (seconds, more than the build), and
/// the application, which is waiting for its own binaries, need not wait for it too.
/// Until it is written the entry is still a hit (its recipe is compiled).
///
/// Except for a program with a kernel that has a required work-group size: its binary is
/// made here, in the application's binaries call, before the application can launch it,
/// as the bare driver makes the binaries of the program it launches. PoCL before 7.0
/// (`pocl_release_dlhandle_cache`) finds the compiled work-group function that a finished
/// command releases by kernel and local size only, and making binaries puts a generic
/// function of each kernel, unreferenced, first in that cache, with the required size as
/// its local size (the next ask gives it a reference): a command of that kernel already
/// running that ended before then released that one instead of its own, and PoCL
/// aborted (`Assertion found->ref_count > 0`; OpenCV's `lkSparse` under chaos,
/// docs/compatibility.md). Made on a thread, the binary came while the application's
/// launches of the program ran.
fn store_rewritten_binary(p: &Program, dev: cl_device_id, key: Key, mut e: Entry) {
    // The rewritten executable: its own vendor program, or the application's (a link of
    // rewritten inputs).
    let Some(exec) = p.exec() else {
        return;
    };
    let Some(program) = OwnedProgram::retain(exec.program.as_ref().map_or(&p.inner, |o| &o.0))
    else {
        return;
    };
    // Decided before the closure takes the program and device.
    let at_once = requires_work_group_size(&program.0, dev);
    let dev = DeviceHandle(dev);
    // Everything vendor the closure holds (the program) is released before it returns, so
    // before the thread's build counts as ended below: `build_threads` lets the process
    // exit once none runs, and a `clReleaseProgram` still to come on this thread then ran
    // into NVIDIA's teardown (tinygrad's training process died of SIGSEGV at exit, its
    // last programs' binaries just stored).
    let store = move || {
        // Whole, not their fields (closures capture fields since Rust 2021).
        let (dev, program) = (dev, program);
        let t0 = std::time::Instant::now();
        let bin = executable_binary(program.0.vt, program.0.h, dev.0);
        tracing::debug!(
            what = "rewritten binary (store)",
            ms = t0.elapsed().as_millis() as u64,
            ok = bin.is_some(),
            "softpreempt: vendor build"
        );
        let store = Store::configured();
        if let (Some(bin), Some(store)) = (bin, store) {
            e.rewritten_binary = store.put_blob(&bin).ok();
            if e.rewritten_binary.is_some() {
                if let Err(err) = store.put(&key, &e) {
                    crate::warn_once!(
                        "store-write",
                        "softpreempt: could not write to the program store {}: {err}",
                        store.entries_dir().display()
                    );
                }
            }
        }
        drop(program);
    };
    if at_once {
        store();
        return;
    }
    crate::core::build_threads::started();
    let spawned = std::thread::Builder::new()
        .name("softpreempt-store-binary".into())
        .spawn(move || {
            store();
            crate::core::build_threads::ended();
        });
    if let Err(err) = spawned {
        crate::core::build_threads::ended();
        tracing::debug!("softpreempt: no thread to store the rewritten binary: {err}");
    }
}

/// Whether a kernel of the vendor program `p` has a required work-group size
/// (`reqd_work_group_size`) on `device`; when the vendor cannot say, it may.
fn requires_work_group_size(p: &Inner<cl_program>, device: cl_device_id) -> bool {
    let vt = p.vt;
    let (Some(create), Some(info), Some(release)) = (
        vt.clCreateKernelsInProgram,
        vt.clGetKernelWorkGroupInfo,
        vt.clReleaseKernel,
    ) else {
        return true;
    };
    let mut n: cl_uint = 0;
    // SAFETY: the vendor's own built program; only the count is asked for.
    if unsafe { create(p.h, 0, std::ptr::null_mut(), &mut n) } != CL_SUCCESS {
        return true;
    }
    let mut kernels: Vec<cl_kernel> = vec![std::ptr::null_mut(); n as usize];
    // SAFETY: room for the `n` kernels the vendor counted.
    if n == 0 || unsafe { create(p.h, n, kernels.as_mut_ptr(), std::ptr::null_mut()) } != CL_SUCCESS
    {
        return n != 0;
    }
    let mut required = false;
    for k in kernels {
        let mut size = [0usize; 3];
        // SAFETY: the vendor's query on its own kernel, into three size_t.
        let rc = unsafe {
            info(
                k,
                device,
                CL_KERNEL_COMPILE_WORK_GROUP_SIZE,
                std::mem::size_of_val(&size),
                size.as_mut_ptr() as *mut std::ffi::c_void,
                std::ptr::null_mut(),
            )
        };
        required |= rc != CL_SUCCESS || size != [0; 3];
        // SAFETY: the kernel the vendor just made for us, released once.
        unsafe { release(k) };
    }
    required
}

/// A vendor device handle taken to a thread of the layer.
struct DeviceHandle(cl_device_id);

// SAFETY: vendor device handles are usable from any thread.
unsafe impl Send for DeviceHandle {}

fn binary_type(vt: &cl_icd_dispatch, p: cl_program, d: cl_device_id) -> cl_program_binary_type {
    fetch_scalar(|s, v, r| match vt.clGetProgramBuildInfo {
        // SAFETY: the vendor's query on its own program, into a cl_program_binary_type.
        Some(f) => unsafe { f(p, d, CL_PROGRAM_BINARY_TYPE, s, v, r) },
        None => CL_INVALID_OPERATION,
    })
    .unwrap_or(CL_PROGRAM_BINARY_TYPE_NONE)
}

/// The store's entry for binaries the vendor accepted for `devices` (all must be known,
/// and agree; the first device's is returned).
pub fn recognise(
    ctx: &Inner<cl_context>,
    devices: &[cl_device_id],
    lengths: *const usize,
    binaries: *mut *const ::core::ffi::c_uchar,
) -> Option<Arc<Entry>> {
    let store = Store::configured()?;
    let n = devices.len();
    let lens = crate::core::args::slice(lengths, n).ok()?;
    let bins = crate::core::args::slice(binaries as *const *const u8, n).ok()?;
    let mut found: Option<Entry> = None;
    for ((&len, &b), &dev) in lens.iter().zip(bins).zip(devices) {
        let bytes = crate::core::args::slice(b, len).ok()?;
        let key = Key {
            binary: sha256_hex(bytes),
            device: device_identity(ctx.vt, dev),
        };
        let e = store.get(&key)?;
        if found.as_ref().is_some_and(|f| !f.same_program(&e)) {
            return None;
        }
        found = Some(e);
    }
    found.map(Arc::new)
}
