//! Program entry points.
//!
//! Programs hold their context and the devices their creation named. Device lists and
//! input programs are unwrapped on the way in; `CL_PROGRAM_CONTEXT` and
//! `CL_PROGRAM_DEVICES` are answered with the application's own wrappers. Build, compile
//! and link notifications go through [`program_notify`], which hands the application its
//! own program, including the one `clLinkProgram` creates (see [`Notify`]).

use crate::core::cl::*;
use std::ffi::{c_char, c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::api::kernel::wrap_kernel;
use crate::core::args::{bytes_of, bytes_of_slice, set_out, write_info};
use crate::core::binaries;
use crate::core::callback::{once_obj, Callback, ObjNotify};
use crate::core::error::CLResult;
use crate::core::forward::{fetch_info, hold_list, unwrap_list};
use crate::core::handle::{new_obj, Obj, Ref};
use crate::core::objects::{Context, Program};
use crate::core::own_build;
use crate::core::platform::Device;
use crate::core::refcount;
use crate::core::rewritten::{self, Bare, Exec, OwnedProgram, RewriteInfo};
use crate::core::sliceable::{self, sha256_hex, Origin};
use crate::store::{Entry, Recipe, Unit};
use crate::{vcreate, vtry};

type NotifyFn = ObjNotify<cl_program>;

/// "CL_INVALID_PROGRAM if program is not a valid program object."
fn check(program: cl_program) -> CLResult<&'static Obj<Program>> {
    Obj::<Program>::check(program)
}

/// An application device list, checked and unwrapped.
struct Devices {
    inner: Vec<cl_device_id>,
    held: Vec<Ref<Device>>,
}

impl Devices {
    /// What the vendor gets: NULL for an empty list, as the application passed it.
    fn ptr(&self) -> *const cl_device_id {
        if self.inner.is_empty() {
            std::ptr::null()
        } else {
            self.inner.as_ptr()
        }
    }

    fn len(&self) -> cl_uint {
        self.inner.len() as cl_uint
    }
}

fn devices(n: cl_uint, list: *const cl_device_id) -> CLResult<Devices> {
    // "CL_INVALID_VALUE if device_list is NULL and num_devices is greater than zero, or if
    // device_list is not NULL and num_devices is zero." (clCreateProgramWithBinary and
    // ...WithBuiltInKernels reject both, and (0, NULL) too: the vendor says so below.)
    if (n == 0) != list.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    // "CL_INVALID_DEVICE if any device in device_list is not a valid device" (the vendor
    // checks membership in the context or program with the inner handles).
    let held = hold_list::<Device>(n, list)?;
    let inner = held.iter().map(|d| d.get().inner.h).collect();
    Ok(Devices { inner, held })
}

/// Wraps a program the vendor created in `ctx`. `devices` is what the creation named
/// (empty: all of the context's devices).
fn wrap_program(
    ctx: &Obj<Context>,
    inner: cl_program,
    devices: Vec<Ref<Device>>,
    origin: Origin,
) -> &'static Obj<Program> {
    let c = ctx.get();
    let devices = if devices.is_empty() {
        c.devices.clone()
    } else {
        devices
    };
    new_obj(Program {
        inner: c.inner.child(inner),
        context: ctx.hold(),
        devices,
        origin: Mutex::new(origin),
        exec: Mutex::new(None),
        classes: Default::default(),
        yielding: Default::default(),
        options: Default::default(),
        known: Mutex::new(None),
        unit: Mutex::new(None),
        building: AtomicBool::new(false),
    })
}

/// "CL_INVALID_CONTEXT if context is not a valid context."
fn check_context(context: cl_context) -> CLResult<&'static Obj<Context>> {
    Obj::<Context>::check(context)
}

/// Lets `create` call the vendor with the context, and wraps the result.
/// `origin` is only read once the vendor has accepted the arguments.
fn create(
    ctx: &Obj<Context>,
    devices: Vec<Ref<Device>>,
    create: impl FnOnce(&Context) -> CLResult<cl_program>,
    origin: impl FnOnce() -> Origin,
) -> CLResult<cl_program> {
    let h = create(ctx.get())?;
    Ok(wrap_program(ctx, h, devices, origin()).handle())
}

pub fn create_program_with_source(
    context: cl_context,
    count: cl_uint,
    strings: *mut *const c_char,
    lengths: *const usize,
) -> CLResult<cl_program> {
    // The sources are plain text: the vendor reads and validates them.
    create(
        check_context(context)?,
        Vec::new(),
        |c| {
            vcreate!(
                c.inner.vt,
                clCreateProgramWithSource(c.inner.h, count, strings, lengths)
            )
        },
        || Origin::source(count, strings as *const *const c_char, lengths),
    )
}

pub fn create_program_with_binary(
    context: cl_context,
    num_devices: cl_uint,
    device_list: *const cl_device_id,
    lengths: *const usize,
    binaries: *mut *const ::core::ffi::c_uchar,
    binary_status: *mut cl_int,
) -> CLResult<cl_program> {
    let ctx = check_context(context)?;
    let devs = devices(num_devices, device_list)?;
    let ptr = devs.ptr();
    let h = create(
        ctx,
        devs.held,
        |c| {
            vcreate!(
                c.inner.vt,
                clCreateProgramWithBinary(
                    c.inner.h,
                    num_devices,
                    ptr,
                    lengths,
                    binaries,
                    binary_status
                )
            )
        },
        || {
            // All devices' binaries, in order: one digest names the program.
            let lens = crate::core::args::slice(lengths, num_devices as usize).unwrap_or(&[]);
            let bins = crate::core::args::slice(binaries as *const *const u8, num_devices as usize)
                .unwrap_or(&[]);
            let each: Vec<&[u8]> = lens
                .iter()
                .zip(bins)
                .map(|(&n, &b)| crate::core::args::slice(b, n).unwrap_or(&[]))
                .collect();
            Origin::binaries(&each)
        },
    )?;
    // A binary whose program the layer built from source before (in this process or
    // another): its kernels are scheduled as that build's were.
    let p = check(h)?.get();
    let inner: Vec<cl_device_id> = if devs.inner.is_empty() {
        p.devices.iter().map(|d| d.get().inner.h).collect()
    } else {
        devs.inner.clone()
    };
    let known = binaries::recognise(&ctx.get().inner, &inner, lengths, binaries);
    *p.known.lock().unwrap_or_else(|e| e.into_inner()) = known;
    Ok(h)
}

pub fn create_program_with_built_in_kernels(
    context: cl_context,
    num_devices: cl_uint,
    device_list: *const cl_device_id,
    kernel_names: *const c_char,
) -> CLResult<cl_program> {
    let ctx = check_context(context)?;
    let devs = devices(num_devices, device_list)?;
    let ptr = devs.ptr();
    create(
        ctx,
        devs.held,
        |c| {
            vcreate!(
                c.inner.vt,
                clCreateProgramWithBuiltInKernels(c.inner.h, num_devices, ptr, kernel_names)
            )
        },
        || Origin::Opaque,
    )
}

pub fn create_program_with_il(
    context: cl_context,
    il: *const c_void,
    length: usize,
) -> CLResult<cl_program> {
    create(
        check_context(context)?,
        Vec::new(),
        |c| vcreate!(c.inner.vt, clCreateProgramWithIL(c.inner.h, il, length)),
        || {
            let il = crate::core::args::slice(il as *const u8, length).unwrap_or(&[]);
            Origin::binaries(&[il])
        },
    )
}

pub fn retain_program(program: cl_program) -> CLResult<()> {
    refcount::retain::<Program>(program, |p| vtry!(p.inner.vt, clRetainProgram(p.inner.h)))
}

pub fn release_program(program: cl_program) -> CLResult<()> {
    let o = check(program)?;
    if o.app_refs() == 1 {
        o.get().forget_classes();
    }
    refcount::release::<Program>(program, |p| vtry!(p.inner.vt, clReleaseProgram(p.inner.h)))
}

/// One build, compile or link notification: what [`program_notify`] needs to call the
/// application with its own program and user data.
///
/// It lives in an `Arc`: one count is the vendor's `user_data` (taken back when the
/// trampoline fires), one is the entry point's. A vendor may fire the notification even
/// when the call fails (PoCL does, always), so the entry point never frees the vendor's
/// count itself; a vendor that fails without ever calling back leaks that one small box,
/// which is the price of never freeing something the vendor may still use.
struct Notify {
    func: NotifyFn,
    user_data: *mut c_void,
    /// The application's program. Known up front for build and compile. For link it is
    /// created by whichever comes first: the trampoline (the vendor may call back inside
    /// `clLinkProgram`, before it has returned the program) or the return path; the other
    /// reuses it, so the application sees one wrapper.
    program: Mutex<Option<Ref<Program>>>,
    /// For link: the context and devices a new wrapper records.
    origin: Option<(Ref<Context>, Vec<Ref<Device>>)>,
    /// The application has been notified: it never is twice (see [`Notify::fire`]).
    fired: AtomicBool,
}

// SAFETY: `user_data` is the application's opaque pointer, only handed back to it; the
// rest is Send + Sync.
unsafe impl Send for Notify {}
// SAFETY: as above.
unsafe impl Sync for Notify {}

impl Notify {
    fn new(
        func: NotifyFn,
        user_data: *mut c_void,
        program: Option<Ref<Program>>,
        origin: Option<(Ref<Context>, Vec<Ref<Device>>)>,
    ) -> Arc<Notify> {
        Arc::new(Notify {
            func,
            user_data,
            program: Mutex::new(program),
            origin,
            fired: AtomicBool::new(false),
        })
    }

    /// The trampoline and `user_data` to give the vendor: ours when the application asked
    /// for a notification, else its own (NULL) function and user data unchanged, so the
    /// vendor applies "pfn_notify is NULL but user_data is not NULL" itself.
    fn vendor_args(
        me: &Option<Arc<Notify>>,
        user_data: *mut c_void,
    ) -> (Option<NotifyFn>, *mut c_void) {
        match me {
            Some(n) => (
                Some(program_notify),
                Arc::into_raw(n.clone()) as *mut c_void,
            ),
            None => (None, user_data),
        }
    }

    /// Calls the application with its program for the vendor's `inner`, once.
    fn fire(&self, inner: cl_program) {
        if self.fired.swap(true, Ordering::AcqRel) {
            return;
        }
        let h = self.handle_for(inner);
        // SAFETY: the application's callback, called as the spec says, with its own
        // program handle and user data.
        unsafe { (self.func)(h, self.user_data) };
    }

    /// The application's handle for the vendor's program `inner` (NULL stays NULL: PoCL
    /// notifies link argument errors with no program).
    fn handle_for(&self, inner: cl_program) -> cl_program {
        let mut cell = self.program.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = cell.as_ref() {
            return p.handle();
        }
        match &self.origin {
            Some((ctx, devs)) if !inner.is_null() => {
                let w = wrap_program(ctx, inner, devs.clone(), Origin::Opaque);
                *cell = Some(w.hold());
                w.handle()
            }
            _ => std::ptr::null_mut(),
        }
    }
}

/// The vendor's build/compile/link notification.
unsafe extern "C" fn program_notify(inner: cl_program, data: *mut c_void) {
    let r = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: `data` is the count `Notify::vendor_args` gave the vendor for exactly
        // this trampoline; the vendor notifies once, so it is taken back once.
        let n = unsafe { Arc::from_raw(data as *const Notify) };
        n.fire(inner);
    }));
    if r.is_err() {
        tracing::error!("softpreempt: internal error in a program notification (suppressed)");
    }
}

/// Checks `program` and the device list, and prepares the notification: shared by build
/// and compile.
fn build_args(
    program: cl_program,
    num_devices: cl_uint,
    device_list: *const cl_device_id,
    pfn_notify: Option<NotifyFn>,
    user_data: *mut c_void,
) -> CLResult<(&'static Program, Devices, Option<Arc<Notify>>)> {
    let o = check(program)?;
    // "CL_INVALID_OPERATION if the build of a program executable for any of the devices
    // listed in device_list by a previous call to clBuildProgram for program has not
    // completed."
    if o.get().building() {
        return Err(CL_INVALID_OPERATION);
    }
    let devs = devices(num_devices, device_list)?;
    let notify = pfn_notify.map(|f| Notify::new(f, user_data, Some(o.hold()), None));
    Ok((o.get(), devs, notify))
}

pub fn build_program(
    program: cl_program,
    num_devices: cl_uint,
    device_list: *const cl_device_id,
    options: *const c_char,
    pfn_notify: Option<NotifyFn>,
    user_data: *mut c_void,
) -> CLResult<()> {
    let (p, devs, notify) = build_args(program, num_devices, device_list, pfn_notify, user_data)?;
    unhook(p)?;
    *p.options.lock().unwrap_or_else(|e| e.into_inner()) = options_of(options).1;
    analyse(p, options, None);
    match notify {
        // As the bare build may: the build runs on, the application hears when it ends.
        Some(n) if rewrite_applies(p) => build_async(check(program)?, devs, options, n),
        notify => build_now(p, &devs, options, notify, user_data),
    }
}

/// `clBuildProgram` of the rewritten source if there is one, else of the original.
fn build_now(
    p: &Program,
    devs: &Devices,
    options: *const c_char,
    notify: Option<Arc<Notify>>,
    user_data: *mut c_void,
) -> CLResult<()> {
    let tried = match use_rewrite(p, devs, options, None, notify.is_some(), user_data) {
        Ok(()) => return finished(notify),
        Err(why) => why,
    };
    let (f, data) = Notify::vendor_args(&notify, user_data);
    let t0 = std::time::Instant::now();
    let r = vtry!(
        p.inner.vt,
        clBuildProgram(p.inner.h, devs.len(), devs.ptr(), options, f, data)
    );
    tracing::debug!(
        what = "own (not rewritten)",
        ms = t0.elapsed().as_millis() as u64,
        ok = r.is_ok(),
        "softpreempt: vendor build"
    );
    fell_back(p, &r, tried);
    r
}

/// Whether a build would build rewritten code: the program's source has kernels that
/// read the launch geometry, or the store has a rewrite for the binary it came from.
fn rewrite_applies(p: &Program) -> bool {
    if p.known().is_some_and(|e| e.recipe.is_some()) {
        return true;
    }
    let origin = p.origin.lock().unwrap_or_else(|e| e.into_inner());
    origin
        .analysis()
        .is_some_and(|a| a.kernels.iter().any(|k| !k.geometry.is_empty()))
}

/// What a build thread takes along: raw vendor handles, only used through the vendor.
struct Detached {
    devs: Devices,
    options: Option<CString>,
    program: Ref<Program>,
    /// Keeps the vendor program alive should the application release it meanwhile.
    _vendor: OwnedProgram,
}

// SAFETY: the device handles are the vendor's (usable from any thread); the rest is Send.
unsafe impl Send for Detached {}

/// Runs [`build_now`] on a thread of the layer; the program reads "in progress" until the
/// application is notified.
fn build_async(
    o: &'static Obj<Program>,
    devs: Devices,
    options: *const c_char,
    notify: Arc<Notify>,
) -> CLResult<()> {
    let p = o.get();
    // "CL_OUT_OF_HOST_MEMORY if there is a failure to allocate resources required by the
    // OpenCL implementation on the host."
    let vendor = OwnedProgram::retain(&p.inner).ok_or(CL_OUT_OF_HOST_MEMORY)?;
    let job = Detached {
        devs,
        options: options_of(options).1,
        program: o.hold(),
        _vendor: vendor,
    };
    p.building.store(true, Ordering::Release);
    let spawned = std::thread::Builder::new()
        .name("softpreempt-build".into())
        .spawn(move || {
            let job = job;
            let p = job.program.get();
            let optr = rewritten::options_ptr(&job.options);
            let r = catch_unwind(AssertUnwindSafe(|| {
                // The notification says the build has ended: the status must say so too.
                let n = notify.clone();
                let tried = match use_rewrite(p, &job.devs, optr, None, true, std::ptr::null_mut())
                {
                    Ok(()) => {
                        p.building.store(false, Ordering::Release);
                        return n.fire(std::ptr::null_mut());
                    }
                    Err(why) => why,
                };
                p.building.store(false, Ordering::Release);
                let (f, data) = Notify::vendor_args(&Some(n.clone()), std::ptr::null_mut());
                let run = || {
                    vtry!(
                        p.inner.vt,
                        clBuildProgram(p.inner.h, job.devs.len(), job.devs.ptr(), optr, f, data)
                    )
                };
                let r = run();
                fell_back(p, &r, tried);
                if r.is_err() {
                    // A vendor that refuses a build may not notify, but the application
                    // was told the build began and waits for its end (the guard keeps a
                    // notification from coming twice).
                    n.fire(std::ptr::null_mut());
                }
            }));
            p.building.store(false, Ordering::Release);
            if r.is_err() {
                tracing::error!("softpreempt: internal error in a program build (suppressed)");
                notify.fire(std::ptr::null_mut());
            }
        });
    if spawned.is_err() {
        p.building.store(false, Ordering::Release);
        // "CL_OUT_OF_HOST_MEMORY if there is a failure to allocate resources required by
        // the OpenCL implementation on the host."
        return Err(CL_OUT_OF_HOST_MEMORY);
    }
    Ok(())
}

/// The headers of a `clCompileProgram`: their include names and the application's
/// programs.
struct Includes {
    names: Vec<*const c_char>,
    programs: Vec<Ref<Program>>,
}

/// Builds (or compiles, with `include`) the rewritten source instead of the original, if
/// the program has one (from its source, or from the store's entry for the binary it was
/// created from): `Ok` when that is done and the executable recorded; otherwise the caller
/// builds the original, and `Err(Some(why))` says why the rewrite failed.
fn use_rewrite(
    p: &Program,
    devs: &Devices,
    options: *const c_char,
    include: Option<&Includes>,
    notify: bool,
    user_data: *mut c_void,
) -> Result<(), Option<String>> {
    // "CL_INVALID_VALUE if pfn_notify is NULL but user_data is not NULL": the vendor says
    // so on the original.
    if !notify && !user_data.is_null() {
        return Err(None);
    }
    // A diagnostic build can measure the application's own kernels (issue 24).
    #[cfg(feature = "calltime")]
    if std::env::var_os("SOFTPREEMPT_CALLTIME_NO_REWRITE").is_some() {
        return Err(None);
    }
    let exec = match include {
        None => match known_build(p, devs, options)? {
            Some(e) => e,
            None => rewritten_build(p, devs, options, None)?.ok_or(None)?,
        },
        Some(_) => rewritten_build(p, devs, options, include)?.ok_or(None)?,
    };
    *p.exec.lock().unwrap_or_else(|e| e.into_inner()) = Some(exec);
    Ok(())
}

/// The build options as the application gave them, as text and as the vendor takes them.
fn options_of(options: *const c_char) -> (Option<String>, Option<CString>) {
    match crate::core::args::c_str(options) {
        Ok(o) => (Some(o.to_string_lossy().into_owned()), Some(o.to_owned())),
        Err(_) => (None, None),
    }
}

/// The rewritten program built from its own binary, which the store keeps beside the
/// entry: for a program of one device (each device has its own), when the binary is
/// there and the vendor builds it. Otherwise the recipe is compiled (`None`).
fn stored_binary(p: &Program, devs: &Devices, entry: &Entry) -> Option<OwnedProgram> {
    let sha = entry.rewritten_binary.as_deref()?;
    let recipe = entry.recipe.as_ref()?;
    let device = match (&devs.inner[..], &p.devices[..]) {
        ([d], _) => *d,
        ([], [d]) => d.get().inner.h,
        _ => return None,
    };
    let bytes = crate::store::Store::configured()?.get_blob(sha)?;
    let c = &p.context.get().inner;
    let built = OwnedProgram::from_binary(c, device, &bytes).and_then(|program| {
        let options = rewritten::recipe_options(recipe);
        rewritten::build(
            "rewritten (stored binary)",
            &program.0,
            &[device],
            rewritten::options_ptr(&options),
        )?;
        Ok(program)
    });
    match built {
        Ok(program) => {
            tracing::debug!("softpreempt: rewritten program built from its stored binary");
            Some(program)
        }
        Err(why) => {
            crate::info_once!(
                format!("stored-binary:{sha}"),
                "softpreempt: the stored rewritten binary did not build, so its source is compiled: {why}"
            );
            None
        }
    }
}

/// Builds the rewritten program the program store recorded for the binary `p` was
/// created from. `Ok(None)`: the store knows of no rewrite for it.
fn known_build(
    p: &Program,
    devs: &Devices,
    options: *const c_char,
) -> Result<Option<Arc<Exec>>, String> {
    let Some(entry) = p.known() else {
        return Ok(None);
    };
    let Some(recipe) = &entry.recipe else {
        return Ok(None);
    };
    let c = &p.context.get().inner;
    let program = match stored_binary(p, devs, &entry) {
        Some(program) => program,
        None => rewritten::build_recipe(c, &devs.inner, recipe)?,
    };
    Ok(Some(Arc::new(Exec {
        program: Some(program),
        info: Arc::new(RewriteInfo {
            kernels: entry.kernels.clone(),
        }),
        recipe: Some(Arc::new(recipe.clone())),
        bare: Mutex::new(Bare::Build {
            devices: devs.held.clone(),
            options: options_of(options).1,
        }),
    })))
}

/// After a rewritten build, done synchronously (which the spec allows even with a
/// notification): the application hears of its own program once.
fn finished(notify: Option<Arc<Notify>>) -> CLResult<()> {
    if let Some(n) = notify {
        n.fire(std::ptr::null_mut());
    }
    Ok(())
}

/// Logs once why a program that built from its original source was not rewritten.
fn fell_back(p: &Program, r: &CLResult<()>, tried: Option<String>) {
    if let (Ok(()), Some(why)) = (r, tried) {
        // The original built where the rewrite did not: its kernels that read the
        // geometry are never sliced (their analysis says so without the rewrite).
        let origin = p.origin.lock().unwrap_or_else(|e| e.into_inner());
        let key = match &*origin {
            Origin::Source { text, .. } => format!("rewrite-build:{}", sha256_hex(text.as_bytes())),
            _ => "rewrite-build".into(),
        };
        crate::warn_once!(
            key,
            "softpreempt: the rewritten program did not build, so the original was built and its kernels that read the launch geometry are never sliced: {why}"
        );
    }
}

/// Before a build or compile: forgets the rewritten executable of an earlier build.
fn unhook(p: &Program) -> CLResult<()> {
    // Spare vendor kernels of released kernel objects (`core::kernel_pool`) are no
    // kernel objects of the application's: they go first, or the vendor (and the count
    // below) would refuse the build because of them.
    p.release_spares();
    let mut cell = p.exec.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(e) = cell.as_ref().filter(|e| e.program.is_some()) {
        // Kernels hold the executable; the application's vendor program has none attached,
        // so the vendor cannot tell.
        // "CL_INVALID_OPERATION if there are kernel objects attached to program."
        if Arc::strong_count(e) > 1 {
            return Err(CL_INVALID_OPERATION);
        }
        *cell = None;
    }
    drop(cell);
    // What the kernel classes knew, and the persistent entries, came from the old build.
    p.forget_classes();
    *p.yielding.lock().unwrap_or_else(|e| e.into_inner()) = Default::default();
    Ok(())
}

/// Builds the rewritten source of a source program whose kernels read the geometry, as
/// a second vendor program in the same context; compiles it instead when given the
/// headers of `clCompileProgram` (whose rewritten texts become vendor programs too).
/// `Ok(None)`: no rewrite applies; `Err(why)`: the rewritten build failed (the caller
/// builds the original).
fn rewritten_build(
    p: &Program,
    devs: &Devices,
    options: *const c_char,
    include: Option<&Includes>,
) -> Result<Option<Arc<Exec>>, String> {
    let Some(analysis) = p
        .origin
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .analysis()
    else {
        return Ok(None);
    };
    let Some(r) = softpreempt_transform::rewrite(&analysis) else {
        return Ok(None);
    };
    // Helpers whose signature changed must not be called from another compilation unit;
    // the headers come back in the order given.
    let separate =
        include.is_some_and(|i| !r.helpers.is_empty() || i.names.len() != r.headers.len());
    if r.kernels.is_empty() || separate {
        return Ok(None);
    }
    let c = &p.context.get().inner;
    // Released when dropped, if the build fails.
    let program = OwnedProgram::from_source(c, &r.source)?;
    let (text, copts) = options_of(options);
    let bare = match include {
        None => {
            // Started first, so that both compile at once; if the rewritten build fails,
            // the own one runs on, unread, and the original is built as asked.
            let beside = own_build::start(p, &devs.held, &copts);
            rewritten::build("rewritten", &program.0, &devs.inner, options)?;
            match beside {
                Some(pending) => Bare::Building(pending),
                None => Bare::Build {
                    devices: devs.held.clone(),
                    options: copts,
                },
            }
        }
        Some(inc) => {
            // Released when dropped, after the compile.
            let headers = r
                .headers
                .iter()
                .map(|(_, text)| OwnedProgram::from_source(c, text))
                .collect::<Result<Vec<OwnedProgram>, String>>()?;
            let handles: Vec<cl_program> = headers.iter().map(|h| h.0.h).collect();
            rewritten::compile(
                "rewritten",
                &program.0,
                &devs.inner,
                options,
                &handles,
                &inc.names,
            )?;
            Bare::Compile {
                devices: devs.held.clone(),
                options: copts,
                headers: inc
                    .programs
                    .iter()
                    .filter_map(|h| OwnedProgram::retain(&h.get().inner))
                    .collect(),
                names: inc
                    .names
                    .iter()
                    .filter_map(|&n| crate::core::args::c_str(n).ok().map(|c| c.to_owned()))
                    .collect(),
            }
        }
    };
    let unit = Unit {
        source: r.source.clone(),
        headers: if include.is_some() {
            r.headers.clone()
        } else {
            Vec::new()
        },
        options: text,
    };
    let recipe = match include {
        None => Some(Arc::new(Recipe {
            units: vec![unit],
            linked: false,
            link_options: None,
        })),
        // A compiled object is one unit of a later link's recipe.
        Some(_) => {
            *p.unit.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(unit));
            None
        }
    };
    Ok(Some(Arc::new(Exec {
        program: Some(program),
        info: Arc::new(RewriteInfo {
            kernels: sliceable::facts(&analysis, &r.kernels),
        }),
        recipe,
        bare: Mutex::new(bare),
    })))
}

/// The unit of a program compiled from its original source, for the recipe of a link
/// that also has rewritten inputs.
fn original_unit(p: &Program, options: *const c_char) -> Option<Unit> {
    match &*p.origin.lock().unwrap_or_else(|e| e.into_inner()) {
        Origin::Source { text, headers, .. } => Some(Unit {
            source: text.to_string(),
            headers: headers
                .iter()
                .map(|(n, t)| (n.clone(), t.to_string()))
                .collect(),
            options: options_of(options).0,
        }),
        _ => None,
    }
}

pub fn compile_program(
    program: cl_program,
    num_devices: cl_uint,
    device_list: *const cl_device_id,
    options: *const c_char,
    num_input_headers: cl_uint,
    input_headers: *const cl_program,
    header_include_names: *mut *const c_char,
    pfn_notify: Option<NotifyFn>,
    user_data: *mut c_void,
) -> CLResult<()> {
    let (p, devs, notify) = build_args(program, num_devices, device_list, pfn_notify, user_data)?;
    unhook(p)?;
    // "CL_INVALID_VALUE if num_input_headers is zero and header_include_names or
    // input_headers are not NULL or if num_input_headers is not zero and
    // header_include_names or input_headers are NULL."
    let none = num_input_headers == 0;
    if none != input_headers.is_null() || none != header_include_names.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    // Header programs are ours: a bad one is "CL_INVALID_PROGRAM".
    let headers = unwrap_list::<Program, _>(num_input_headers, input_headers, |h| h.get().inner.h)?;
    let headers_ptr = if headers.is_empty() {
        std::ptr::null()
    } else {
        headers.as_ptr()
    };
    let tried = match header_sources(num_input_headers, input_headers, header_include_names) {
        Some(h) => {
            analyse(p, options, Some(h));
            let include = Includes {
                names: crate::core::args::slice(
                    header_include_names as *const *const c_char,
                    num_input_headers as usize,
                )
                .unwrap_or(&[])
                .to_vec(),
                programs: hold_list::<Program>(num_input_headers, input_headers)?,
            };
            match use_rewrite(
                p,
                &devs,
                options,
                Some(&include),
                pfn_notify.is_some(),
                user_data,
            ) {
                Ok(()) => return finished(notify),
                Err(why) => why,
            }
        }
        // A header without source text: what the code reads cannot be known.
        None => {
            *p.origin.lock().unwrap_or_else(|e| e.into_inner()) = Origin::Opaque;
            None
        }
    };
    let (f, data) = Notify::vendor_args(&notify, user_data);
    let r = vtry!(
        p.inner.vt,
        clCompileProgram(
            p.inner.h,
            devs.len(),
            devs.ptr(),
            options,
            num_input_headers,
            headers_ptr,
            header_include_names,
            f,
            data
        )
    );
    fell_back(p, &r, tried);
    if r.is_ok() {
        *p.unit.lock().unwrap_or_else(|e| e.into_inner()) = original_unit(p, options).map(Arc::new);
    }
    r
}

/// Analyses a source program for slicing, before the vendor builds it, so its kernels
/// (which may be created from a build callback) find the analysis ready.
fn analyse(p: &Program, options: *const c_char, headers: Option<Vec<(String, Arc<str>)>>) {
    let options = crate::core::args::c_str(options)
        .map(|o| o.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut origin = p.origin.lock().unwrap_or_else(|e| e.into_inner());
    *origin = origin.analysed(&options, headers);
}

/// The headers of `clCompileProgram` as (include name, source text), for the analysis of
/// what the compiled code reads; `None` if one has no source text to analyse.
fn header_sources(
    n: cl_uint,
    programs: *const cl_program,
    names: *mut *const c_char,
) -> Option<Vec<(String, Arc<str>)>> {
    let programs = crate::core::args::slice(programs, n as usize).unwrap_or(&[]);
    let names = crate::core::args::slice(names as *const *const c_char, n as usize).unwrap_or(&[]);
    programs
        .iter()
        .zip(names)
        .map(|(&p, &name)| {
            let name = crate::core::args::c_str(name)
                .ok()?
                .to_string_lossy()
                .into_owned();
            match &*Obj::<Program>::check(p)
                .ok()?
                .get()
                .origin
                .lock()
                .unwrap_or_else(|e| e.into_inner())
            {
                Origin::Source { text, .. } => Some((name, text.clone())),
                _ => None,
            }
        })
        .collect()
}

pub fn link_program(
    context: cl_context,
    num_devices: cl_uint,
    device_list: *const cl_device_id,
    options: *const c_char,
    num_input_programs: cl_uint,
    input_programs: *const cl_program,
    pfn_notify: Option<NotifyFn>,
    user_data: *mut c_void,
) -> CLResult<cl_program> {
    let ctx = check_context(context)?;
    let devs = devices(num_devices, device_list)?;
    // "CL_INVALID_VALUE if num_input_programs is zero or input_programs is NULL": only a
    // complete list is read (and unwrapped); otherwise the vendor gets NULL and says so.
    let inputs = if num_input_programs == 0 || input_programs.is_null() {
        Vec::new()
    } else {
        // "CL_INVALID_PROGRAM if programs specified in input_programs are not valid
        // program objects."
        unwrap_list::<Program, _>(num_input_programs, input_programs, |p| {
            p.get().exec_handle()
        })?
    };
    let inputs_ptr = if inputs.is_empty() {
        std::ptr::null()
    } else {
        inputs.as_ptr()
    };
    let devs_held = devs.held.clone();
    let notify =
        pfn_notify.map(|f| Notify::new(f, user_data, None, Some((ctx.hold(), devs.held.clone()))));
    let (f, data) = Notify::vendor_args(&notify, user_data);
    let c = ctx.get();
    let r = vcreate!(
        c.inner.vt,
        clLinkProgram(
            c.inner.h,
            devs.len(),
            devs.ptr(),
            options,
            num_input_programs,
            inputs_ptr,
            f,
            data
        )
    );
    let linked = match (r, notify) {
        (Ok(h), Some(n)) => n.handle_for(h),
        (Ok(h), None) => wrap_program(ctx, h, devs.held, Origin::Opaque).handle(),
        (Err(e), Some(n)) => {
            // The vendor may have notified with a program it then released (PoCL does on a
            // link failure): the wrapper the trampoline made for it has no owner.
            let orphan = n.program.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(w) = orphan {
                let _ = w.app_release();
            }
            return Err(e);
        }
        (Err(e), None) => return Err(e),
    };
    if let Ok(p) = Obj::<Program>::check(linked) {
        *p.get().origin.lock().unwrap_or_else(|e| e.into_inner()) =
            origins(num_input_programs, input_programs);
        *p.get().exec.lock().unwrap_or_else(|e| e.into_inner()) =
            linked_exec(num_input_programs, input_programs, &devs_held, options);
    }
    Ok(linked)
}

/// A linked program holds the rewritten kernels of its inputs (compiled from rewritten
/// source, see [`compile_program`]); the application's own program is the link of the
/// inputs' own (bare) programs.
fn linked_exec(
    n: cl_uint,
    list: *const cl_program,
    devices: &[Ref<Device>],
    options: *const c_char,
) -> Option<Arc<Exec>> {
    let inputs: Vec<Ref<Program>> = crate::core::args::slice(list, n as usize)
        .unwrap_or(&[])
        .iter()
        .filter_map(|&p| Some(Obj::<Program>::check(p).ok()?.hold()))
        .collect();
    let execs: Vec<Arc<Exec>> = inputs.iter().filter_map(|p| p.get().exec()).collect();
    if execs.is_empty() {
        return None;
    }
    let info = RewriteInfo::merged(execs.iter().map(|e| &*e.info));
    // Every input's unit, so another process can compile and link them again.
    let units: Option<Vec<Unit>> = inputs
        .iter()
        .map(|p| {
            p.get()
                .unit
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .map(|u| (**u).clone())
        })
        .collect();
    let (text, copts) = options_of(options);
    Some(Arc::new(Exec {
        program: None,
        info: Arc::new(info),
        recipe: units.map(|units| {
            Arc::new(Recipe {
                units,
                linked: true,
                link_options: text,
            })
        }),
        bare: Mutex::new(Bare::Link {
            devices: devices.to_vec(),
            options: copts,
            inputs: inputs
                .into_iter()
                .filter_map(|p| {
                    let own = OwnedProgram::retain(&p.get().inner)?;
                    Some((p, own))
                })
                .collect(),
        }),
    }))
}

/// The origins of a link's input programs (already checked by the vendor call).
fn origins(n: cl_uint, list: *const cl_program) -> Origin {
    let inputs = crate::core::args::slice(list, n as usize).unwrap_or(&[]);
    Origin::Linked(
        inputs
            .iter()
            .map(|&p| match Obj::<Program>::check(p) {
                Ok(p) => p
                    .get()
                    .origin
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone(),
                Err(_) => Origin::Opaque,
            })
            .collect(),
    )
}

pub fn get_program_info(
    program: cl_program,
    param_name: cl_program_info,
    param_value_size: usize,
    param_value: *mut c_void,
    param_value_size_ret: *mut usize,
) -> CLResult<()> {
    let p = check(program)?.get();
    // The vendor's answer for one of the vendor programs behind the application's.
    let forward = |h: cl_program| -> CLResult<()> {
        vtry!(
            p.inner.vt,
            clGetProgramInfo(
                h,
                param_name,
                param_value_size,
                param_value,
                param_value_size_ret
            )
        )
    };
    let answer = match param_name {
        CL_PROGRAM_CONTEXT => bytes_of(&p.context.handle()).to_vec(),
        CL_PROGRAM_DEVICES => {
            let raw = fetch_info(|s, v, r| match p.inner.vt.clGetProgramInfo {
                // SAFETY: the vendor's query on its own program, buffers sized by fetch_info.
                Some(f) => unsafe { f(p.inner.h, param_name, s, v, r) },
                None => CL_INVALID_OPERATION,
            })?;
            let platform = p.context.get().platform;
            let ours: Vec<cl_device_id> = raw
                .chunks_exact(std::mem::size_of::<cl_device_id>())
                .map(|c| Device::wrap(platform, crate::api::device::read_handle(c)).handle())
                .collect();
            bytes_of_slice(&ours).to_vec()
        }
        // Binaries are the application's own program's, as the bare driver builds it
        // (rule 9); what the layer learned goes into the program store under them.
        CL_PROGRAM_BINARY_SIZES | CL_PROGRAM_BINARIES => {
            own_build::binaries_asked();
            let h = binaries::bare_handle(p);
            forward(h)?;
            if param_name == CL_PROGRAM_BINARIES && !param_value.is_null() {
                binaries::record(p, h, param_value_size, param_value);
            }
            return Ok(());
        }
        // The executable's properties come from the program that holds it.
        CL_PROGRAM_NUM_KERNELS
        | CL_PROGRAM_KERNEL_NAMES
        | CL_PROGRAM_SCOPE_GLOBAL_CTORS_PRESENT
        | CL_PROGRAM_SCOPE_GLOBAL_DTORS_PRESENT
            if p.exec().is_some() =>
        {
            return forward(p.exec_handle())
        }
        CL_PROGRAM_REFERENCE_COUNT => {
            // Spare vendor kernels (`core::kernel_pool`) hold their vendor program, as a
            // kernel object would; the bare count has no such kernels. They go first (a
            // rare debugging query: the next kernel objects pay a vendor create again).
            p.release_spares();
            return forward(p.inner.h);
        }
        // Everything else holds no handle: forwarded as is.
        _ => return forward(p.inner.h),
    };
    write_info(param_value_size, param_value, param_value_size_ret, &answer)
}

pub fn get_program_build_info(
    program: cl_program,
    device: cl_device_id,
    param_name: cl_program_build_info,
    param_value_size: usize,
    param_value: *mut c_void,
    param_value_size_ret: *mut usize,
) -> CLResult<()> {
    let p = check(program)?.get();
    // "CL_INVALID_DEVICE if device is not in the list of devices associated with program."
    let d = Obj::<Device>::check(device)?.get();
    if p.building() && param_name == CL_PROGRAM_BUILD_STATUS {
        let status: cl_build_status = CL_BUILD_IN_PROGRESS;
        return write_info(
            param_value_size,
            param_value,
            param_value_size_ret,
            bytes_of(&status),
        );
    }
    vtry!(
        p.inner.vt,
        clGetProgramBuildInfo(
            p.exec_handle(),
            d.inner.h,
            param_name,
            param_value_size,
            param_value,
            param_value_size_ret
        )
    )
}

pub fn create_kernels_in_program(
    program: cl_program,
    num_kernels: cl_uint,
    kernels: *mut cl_kernel,
    num_kernels_ret: *mut cl_uint,
) -> CLResult<()> {
    let o = check(program)?;
    let p = o.get();
    // "CL_INVALID_PROGRAM_EXECUTABLE if there is no successfully built executable for any
    // device in program."
    if p.building() {
        return Err(CL_INVALID_PROGRAM_EXECUTABLE);
    }
    let ph = p.exec_handle();
    if kernels.is_null() {
        // Only counting: nothing is created.
        return vtry!(
            p.inner.vt,
            clCreateKernelsInProgram(ph, num_kernels, kernels, num_kernels_ret)
        );
    }
    // The vendor's count first ("CL_INVALID_PROGRAM_EXECUTABLE if there is no successfully
    // built executable"), so the inner array is sized by the program, not by the caller.
    let mut n: cl_uint = 0;
    vtry!(
        p.inner.vt,
        clCreateKernelsInProgram(ph, 0, std::ptr::null_mut(), &mut n)
    )?;
    let mut inner: Vec<cl_kernel> = vec![std::ptr::null_mut(); num_kernels.min(n) as usize];
    // A short array gets the vendor's "CL_INVALID_VALUE if kernels is not NULL and
    // num_kernels is less than the number of kernels in program".
    let mut made: cl_uint = 0;
    vtry!(
        p.inner.vt,
        clCreateKernelsInProgram(ph, num_kernels.min(n), inner.as_mut_ptr(), &mut made)
    )?;
    inner.truncate(made as usize);
    for (i, &k) in inner.iter().enumerate() {
        let w = if k.is_null() {
            std::ptr::null_mut()
        } else {
            wrap_kernel(o, k, None).handle()
        };
        // SAFETY: `kernels` has room for `num_kernels >= made` handles by contract.
        unsafe { kernels.add(i).write(w) };
    }
    set_out(num_kernels_ret, made);
    Ok(())
}

pub fn set_program_release_callback(
    program: cl_program,
    pfn_notify: Option<NotifyFn>,
    user_data: *mut c_void,
) -> CLResult<()> {
    let o = check(program)?;
    let p = o.get();
    // "CL_INVALID_VALUE if pfn_notify is NULL": the vendor's to say (PoCL, which does not
    // support the call, answers CL_INVALID_OPERATION first); nothing to wrap.
    let Some(f) = pfn_notify else {
        return vtry!(
            p.inner.vt,
            clSetProgramReleaseCallback(p.inner.h, None, user_data)
        );
    };
    // The registration holds the wrapper, so the application's handle is still ours when
    // the vendor destroys the program and calls back.
    let data = Callback::<Program, NotifyFn>::into_raw(o.hold(), f, user_data);
    let r = vtry!(
        p.inner.vt,
        clSetProgramReleaseCallback(p.inner.h, Some(once_obj::<Program>), data)
    );
    if r.is_err() {
        // SAFETY: the vendor refused (OpenCL 3.0 deprecates the call; PoCL may not support
        // it), so it will never call back with `data`.
        unsafe { Callback::<Program, NotifyFn>::discard(data) };
    }
    r
}

pub fn set_program_specialization_constant(
    program: cl_program,
    spec_id: cl_uint,
    spec_size: usize,
    spec_value: *const c_void,
) -> CLResult<()> {
    let p = check(program)?.get();
    vtry!(
        p.inner.vt,
        clSetProgramSpecializationConstant(p.inner.h, spec_id, spec_size, spec_value)
    )
}
