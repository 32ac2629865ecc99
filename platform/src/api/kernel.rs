//! Kernel entry points.
//!
//! A kernel holds its program. At creation the vendor's argument metadata says which
//! arguments are memory objects, samplers or queues ([`ArgKind`]); `clSetKernelArg`
//! replaces those handles by the inner ones and keeps the wrapped objects alive while
//! they are set ([`HeldArg`]). `CL_KERNEL_CONTEXT` and `CL_KERNEL_PROGRAM` are answered
//! with the application's own wrappers.

use crate::core::cl::*;
use std::ffi::{c_char, c_void};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Mutex;

use crate::api::device::read_handle;
use crate::core::args::{bytes_of, write_info};
use crate::core::error::CLResult;
use crate::core::forward::{fetch_info, fetch_scalar, info_string, Inner};
use crate::core::handle::{new_obj, Obj};
use crate::core::objects::{
    ArgBits, ArgKind, ArgValue, HeldArg, Kernel, KernelArgs, KernelClass, Mem, Program, Queue,
    Sampler, Sliceable,
};
use crate::core::platform::Device;
use crate::core::refcount;
use crate::{vcall, vcreate, vtry};

/// "CL_INVALID_KERNEL if kernel is not a valid kernel object."
fn check(kernel: cl_kernel) -> CLResult<&'static Obj<Kernel>> {
    Obj::<Kernel>::check(kernel)
}

/// Wraps a kernel the vendor created from `program`. `name` is the kernel's function name
/// when the caller knows it (`clCreateKernel`), else it is asked of the vendor. What the
/// vendor's argument metadata and the program's analysis say is read once per kernel
/// function of the program ([`KernelClass`]), not for every kernel object.
pub(crate) fn wrap_kernel(
    program: &Obj<Program>,
    inner: cl_kernel,
    name: Option<&str>,
) -> &'static Obj<Kernel> {
    let inner = program.get().inner.child(inner);
    let vendor_name = || {
        fetch_info(|s, v, r| match inner.vt.clGetKernelInfo {
            // SAFETY: the vendor's query on its own kernel, buffers sized by fetch_info.
            Some(f) => unsafe { f(inner.h, CL_KERNEL_FUNCTION_NAME, s, v, r) },
            None => CL_INVALID_OPERATION,
        })
        .map(|b| info_string(&b))
        .unwrap_or_default()
    };
    let name = match name {
        Some(n) => std::borrow::Cow::Borrowed(n),
        None => std::borrow::Cow::Owned(vendor_name()),
    };
    let exec = program.get().exec();
    let class = program.get().class(&name, || {
        let kinds = arg_kinds(&inner);
        let counted = kinds.is_some();
        let mut arg_kinds = kinds.unwrap_or_default();
        let facts = crate::core::binaries::kernel_facts(program.get(), &name);
        let hidden = facts.hidden.filter(|_| exec.is_some());
        if let Some(i) = hidden {
            // The application's arguments end where the hidden one begins.
            arg_kinds.truncate(i as usize);
        }
        let records = crate::core::yield_program::may_yield(program.get(), &name);
        let class = KernelClass::new(
            (*name).into(),
            arg_kinds.into(),
            logged(&name, facts.sliceable),
            hidden,
            records,
        );
        if !counted {
            // Without the argument count the layer cannot tell which arguments a new
            // object set, so a vendor kernel with an earlier object's values is not reused.
            class.spares.empty(true);
        }
        class
    });
    if let Some(i) = class.hidden {
        set_native_geometry(&inner, i);
    }
    new_kernel(program, inner, exec, class, false)
}

/// A kernel object with no argument set around vendor kernel `inner` of `class`;
/// `recycled` when the vendor kernel is a spare of an earlier object.
fn new_kernel(
    program: &Obj<Program>,
    inner: Inner<cl_kernel>,
    exec: Option<std::sync::Arc<crate::core::rewritten::Exec>>,
    class: std::sync::Arc<KernelClass>,
    recycled: bool,
) -> &'static Obj<Kernel> {
    let n = class.arg_kinds.len();
    let records = class.records_for_new();
    new_obj(Kernel {
        inner,
        program: program.hold(),
        args: Mutex::new(KernelArgs {
            held: smallvec::smallvec![None; n],
            values: records.then(Box::default),
        }),
        args_set: ArgBits::new(n),
        null_mems: ArgBits::new(n),
        exec,
        class,
        exec_info_set: AtomicBool::new(false),
        recycled,
        records,
    })
}

/// Gives a rewritten kernel's hidden argument the value that makes it read the real
/// builtins: every launch that reaches the vendor whole is then right as it is.
fn set_native_geometry(inner: &Inner<cl_kernel>, index: cl_uint) {
    use softpreempt_transform::{GEOMETRY_ARG_SIZE, NATIVE_GEOMETRY};
    let rc = match inner.vt.clSetKernelArg {
        // SAFETY: the vendor's kernel; a by-value argument of the size of its ulong16.
        Some(f) => unsafe {
            f(
                inner.h,
                index,
                GEOMETRY_ARG_SIZE,
                NATIVE_GEOMETRY.as_ptr() as *const c_void,
            )
        },
        None => CL_INVALID_OPERATION,
    };
    if rc != CL_SUCCESS {
        crate::warn_once!(
            "hidden-arg",
            "softpreempt: setting a rewritten kernel's geometry argument failed ({rc})"
        );
    }
}

/// Logs once per kernel name why it is never sliced.
fn logged(name: &str, s: Sliceable) -> Sliceable {
    if let Sliceable::No(why) = &s {
        crate::info_once!(
            format!("unsliceable:{name}"),
            "softpreempt: kernel '{name}' is never sliced: {why}"
        );
    }
    s
}

/// One `clGetKernelArgInfo` query on a fresh kernel, read whole.
fn arg_info(k: &Inner<cl_kernel>, index: cl_uint, name: cl_kernel_arg_info) -> CLResult<Vec<u8>> {
    fetch_info(|s, v, r| match k.vt.clGetKernelArgInfo {
        // SAFETY: the vendor's query on its own kernel, buffers sized by fetch_info.
        Some(f) => unsafe { f(k.h, index, name, s, v, r) },
        None => CL_INVALID_OPERATION,
    })
}

/// Classifies every argument. The vendor may have no metadata (programs built without
/// `-cl-kernel-arg-info`): such arguments are `Unknown` and probed when set.
/// `None`: the vendor did not say how many arguments there are.
fn arg_kinds(k: &Inner<cl_kernel>) -> Option<Vec<ArgKind>> {
    let n: cl_uint = fetch_scalar(|s, v, r| match k.vt.clGetKernelInfo {
        // SAFETY: the vendor's query on its own kernel, into a cl_uint.
        Some(f) => unsafe { f(k.h, CL_KERNEL_NUM_ARGS, s, v, r) },
        None => CL_INVALID_OPERATION,
    })
    .ok()?;
    Some((0..n).map(|i| classify(k, i)).collect())
}

fn classify(k: &Inner<cl_kernel>, i: cl_uint) -> ArgKind {
    let Ok(address) = arg_info(k, i, CL_KERNEL_ARG_ADDRESS_QUALIFIER) else {
        return ArgKind::Unknown;
    };
    let address: cl_kernel_arg_address_qualifier = read_handle(&address);
    match address {
        CL_KERNEL_ARG_ADDRESS_GLOBAL | CL_KERNEL_ARG_ADDRESS_CONSTANT => return ArgKind::Mem,
        CL_KERNEL_ARG_ADDRESS_LOCAL => return ArgKind::Plain,
        _ => {}
    }
    // Private: images, pipes, samplers and queues are opaque types passed by handle
    // (vendors differ on whether an image reports global or private).
    let qualifier = arg_info(k, i, CL_KERNEL_ARG_TYPE_QUALIFIER)
        .map(|q| read_handle::<cl_kernel_arg_type_qualifier>(&q));
    if qualifier.is_ok_and(|q| q & CL_KERNEL_ARG_TYPE_PIPE != 0) {
        return ArgKind::Mem;
    }
    let Ok(raw) = arg_info(k, i, CL_KERNEL_ARG_TYPE_NAME) else {
        return ArgKind::Unknown;
    };
    type_kind(&info_string(&raw))
}

/// The kind of a private argument from its type name (`image2d_t`, `sampler_t`, ...).
fn type_kind(name: &str) -> ArgKind {
    let words = name.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'));
    for w in words {
        match w {
            "sampler_t" => return ArgKind::Sampler,
            "queue_t" => return ArgKind::Queue,
            "pipe" => return ArgKind::Mem,
            w if w.starts_with("image") && w.ends_with("_t") => return ArgKind::Mem,
            _ => {}
        }
    }
    ArgKind::Plain
}

pub fn create_kernel(program: cl_program, kernel_name: *const c_char) -> CLResult<cl_kernel> {
    // "CL_INVALID_PROGRAM if program is not a valid program object."
    let o = Obj::<Program>::check(program)?;
    let p = o.get();
    // "CL_INVALID_PROGRAM_EXECUTABLE if there is no successfully built executable for
    // program."
    if p.building() {
        return Err(CL_INVALID_PROGRAM_EXECUTABLE);
    }
    // A kernel of this name was made from this build before: a spare vendor kernel of a
    // released object serves, with no vendor call (`core::kernel_pool`). The vendor would
    // accept the name, since it made that kernel. Its arguments still hold the earlier
    // object's values, but the new object has none set, and every launch checks that
    // (`enqueue::kernel`). The hidden argument keeps its native value (only clones are
    // given another).
    if let Some(name) = crate::core::args::c_str(kernel_name)
        .ok()
        .and_then(|n| n.to_str().ok())
    {
        if let Some((class, spare)) = p.spare(name) {
            let (inner, exec) = spare.into_parts();
            return Ok(new_kernel(o, inner, exec, class, true).handle());
        }
    }
    // The name is plain text: the vendor validates it (NULL, unknown name).
    let h = vcreate!(p.inner.vt, clCreateKernel(p.exec_handle(), kernel_name))?;
    // The vendor accepted the name, so it is a valid C string of the kernel's name.
    let name = crate::core::args::c_str(kernel_name)
        .ok()
        .and_then(|n| n.to_str().ok());
    Ok(wrap_kernel(o, h, name).handle())
}

pub fn clone_kernel(source_kernel: cl_kernel) -> CLResult<cl_kernel> {
    let k = check(source_kernel)?.get();
    let h = vcreate!(k.inner.vt, clCloneKernel(k.inner.h))?;
    // The vendor copies the argument values (inner handles), so the clone holds the same
    // wrapped objects.
    let args = k.args.lock().unwrap_or_else(|e| e.into_inner()).clone();
    Ok(new_obj(Kernel {
        inner: k.inner.child(h),
        program: k.program.clone(),
        args: Mutex::new(args),
        args_set: k.args_set.copy(),
        // The vendor copies the hidden argument's native value too.
        null_mems: k.null_mems.copy(),
        exec: k.exec.clone(),
        class: k.class.clone(),
        // "clCloneKernel ... The returned kernel object is an exact copy of source_kernel"
        // (exec info included), so the clone's vendor kernel carries it too.
        exec_info_set: AtomicBool::new(k.exec_info_set.load(Relaxed)),
        recycled: false,
        records: k.records,
    })
    .handle())
}

pub fn retain_kernel(kernel: cl_kernel) -> CLResult<()> {
    refcount::retain::<Kernel>(kernel, |k| vtry!(k.inner.vt, clRetainKernel(k.inner.h)))
}

pub fn release_kernel(kernel: cl_kernel) -> CLResult<()> {
    // What was learned about its launches stays with its class (the program's).
    let o = check(kernel)?;
    // Read before the release, after which another thread's release may free the wrapper;
    // the vendor kernel lives on, since this call's vendor reference is not given up yet.
    let inner = o.get().inner.clone();
    // The count goes down first, so that of concurrent releases exactly one is the last:
    // that one leaves its vendor reference to the wrapper (`Kernel`'s drop), which keeps
    // the vendor kernel as a spare or releases it once nothing holds the wrapper; every
    // other release is mirrored onto the vendor kernel as before.
    if o.app_release_left()? == 0 {
        return Ok(());
    }
    vtry!(inner.vt, clReleaseKernel(inner.h))
}

/// The hidden argument of a rewritten kernel, and anything past it, is no argument of the
/// application's. For such an index the vendor is asked about the index one further on,
/// which is past its own last argument, so the application gets the vendor's own answer
/// for a bad index (NVIDIA's clGetKernelArgInfo says CL_INVALID_VALUE), exactly as on the
/// bare driver; the spec's is "CL_INVALID_ARG_INDEX if arg_index is not a valid argument
/// index", which is also the answer should the vendor accept it. `None`: an ordinary index.
fn past_hidden(
    k: &Kernel,
    index: cl_uint,
    ask_vendor: impl FnOnce(cl_uint) -> CLResult<()>,
) -> Option<CLResult<()>> {
    match k.hidden() {
        Some(h) if index >= h => Some(match ask_vendor(index.saturating_add(1)) {
            Ok(()) => Err(CL_INVALID_ARG_INDEX),
            err => err,
        }),
        _ => None,
    }
}

/// A wrapped object found in an argument value (not yet held).
#[derive(Clone, Copy)]
enum Found {
    Mem(&'static Obj<Mem>),
    Sampler(&'static Obj<Sampler>),
    Queue(&'static Obj<Queue>),
}

impl Found {
    fn inner(self) -> *mut c_void {
        match self {
            Found::Mem(o) => o.get().inner.h,
            Found::Sampler(o) => o.get().inner.h,
            Found::Queue(o) => o.get().inner.h,
        }
    }

    /// Whether `held` already holds this object (setting the same handle again, the
    /// common case in a launch loop, then costs no reference-count traffic).
    fn is(self, held: &Option<HeldArg>) -> bool {
        match (self, held) {
            (Found::Mem(o), Some(HeldArg::Mem(r))) => std::ptr::eq(o, &**r),
            (Found::Sampler(o), Some(HeldArg::Sampler(r))) => std::ptr::eq(o, &**r),
            (Found::Queue(o), Some(HeldArg::Queue(r))) => std::ptr::eq(o, &**r),
            _ => false,
        }
    }

    fn hold(self) -> HeldArg {
        match self {
            Found::Mem(o) => HeldArg::Mem(o.hold()),
            Found::Sampler(o) => HeldArg::Sampler(o.hold()),
            Found::Queue(o) => HeldArg::Queue(o.hold()),
        }
    }
}

/// Records what argument `index` now holds (the vendor accepted it), and its value
/// while the class records values ([`record`]), under the one lock of the arguments.
/// The vector was sized at creation, so this does not allocate; the old hold is dropped
/// unlocked.
fn set_held(k: &Kernel, index: cl_uint, value: Option<Found>, recorded: Option<Recorded>) {
    let old = {
        let mut args = k.args.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = recorded {
            record(&mut args, index, r);
        }
        let held = &mut args.held;
        let i = index as usize;
        if i >= held.len() {
            if value.is_none() {
                return;
            }
            // More arguments than the metadata said: grow (never on a normal path).
            held.resize(i + 1, None);
        }
        match value {
            Some(f) if f.is(&held[i]) => None,
            _ => std::mem::replace(&mut held[i], value.map(Found::hold)),
        }
    };
    drop(old);
}

/// The wrapped object an argument value names, or `Ok(None)` when the value is data.
fn unwrap_arg(kind: ArgKind, raw: *mut c_void) -> CLResult<Option<Found>> {
    let mem = || Obj::<Mem>::check(raw as cl_mem).map(Found::Mem);
    let sampler = || Obj::<Sampler>::check(raw as cl_sampler).map(Found::Sampler);
    let queue = || Obj::<Queue>::check(raw as cl_command_queue).map(Found::Queue);
    match kind {
        ArgKind::Plain => Ok(None),
        // "CL_INVALID_MEM_OBJECT for an argument declared to be a memory object when the
        // specified arg_value is not a valid memory object."
        ArgKind::Mem => mem().map(Some),
        // "CL_INVALID_SAMPLER for an argument declared to be of type sampler_t when the
        // specified arg_value is not a valid sampler object."
        ArgKind::Sampler => sampler().map(Some),
        // "CL_INVALID_DEVICE_QUEUE for an argument declared to be of type queue_t when
        // the specified arg_value is not a valid device queue object."
        ArgKind::Queue => queue().map(Some).map_err(|_| CL_INVALID_DEVICE_QUEUE),
        // No metadata: a handle iff it is a live wrapper (a pool membership test, which
        // never dereferences a foreign pointer); anything else is data.
        ArgKind::Unknown => Ok(mem().or_else(|_| sampler()).or_else(|_| queue()).ok()),
    }
}

pub fn set_kernel_arg(
    kernel: cl_kernel,
    arg_index: cl_uint,
    arg_size: usize,
    arg_value: *const c_void,
) -> CLResult<()> {
    let k = check(kernel)?.get();
    if let Some(r) = past_hidden(k, arg_index, |i| {
        vtry!(
            k.inner.vt,
            clSetKernelArg(k.inner.h, i, arg_size, arg_value)
        )
    }) {
        return r;
    }
    // Past the metadata (or without it) the vendor judges the index; a value is probed.
    let kind = k
        .arg_kinds()
        .get(arg_index as usize)
        .copied()
        .unwrap_or(ArgKind::Unknown);
    // Forwards `value` (which must stay valid until it is recorded), and gives back what
    // to record of it.
    let forward = |value: *const c_void| -> CLResult<Option<Recorded>> {
        vtry!(
            k.inner.vt,
            clSetKernelArg(k.inner.h, arg_index, arg_size, value)
        )?;
        k.args_set.set(arg_index, true);
        // A NULL memory object: the value is NULL or points to a NULL handle.
        let null_mem = kind != ArgKind::Plain
            && arg_size == std::mem::size_of::<cl_mem>()
            // SAFETY: a non-NULL value of pointer size, by the API's contract; unaligned.
            && (value.is_null() || unsafe { (value as *const cl_mem).read_unaligned() }.is_null());
        k.null_mems.set(arg_index, null_mem);
        Ok(Recorded::of(k, arg_size, value))
    };
    if kind == ArgKind::Plain {
        // Data holds no object: the lock is taken only to record it.
        if let Some(r) = forward(arg_value)? {
            record(
                &mut k.args.lock().unwrap_or_else(|e| e.into_inner()),
                arg_index,
                r,
            );
        }
        return Ok(());
    }
    const HANDLE: usize = std::mem::size_of::<*mut c_void>();
    if arg_size != HANDLE || arg_value.is_null() {
        // "CL_INVALID_ARG_SIZE if ... the argument is a memory object and arg_size !=
        // sizeof(cl_mem) ... or if the argument is a sampler and arg_size !=
        // sizeof(cl_sampler)." (Checked here: such a value must not reach the vendor.)
        if arg_size != HANDLE && kind != ArgKind::Unknown {
            return Err(CL_INVALID_ARG_SIZE);
        }
        // Data of another size, or a NULL arg_value (a NULL buffer, or a `__local` size):
        // nothing to unwrap, and nothing held any more.
        let r = forward(arg_value)?;
        set_held(k, arg_index, None, r);
        return Ok(());
    }
    // SAFETY: `arg_value` is non-NULL and points to `arg_size` == pointer-size bytes by the
    // API's contract; read unaligned, since the application's storage need not be.
    let raw = unsafe { (arg_value as *const *mut c_void).read_unaligned() };
    // "If the argument is a buffer object, the arg_value pointer can be NULL or point to a
    // NULL value": a NULL handle is forwarded as NULL.
    let unwrapped = if raw.is_null() {
        None
    } else {
        unwrap_arg(kind, raw)?
    };
    let inner_handle;
    let r = match unwrapped {
        Some(found) => {
            inner_handle = found.inner();
            forward(&inner_handle as *const *mut c_void as *const c_void)?
        }
        None => forward(arg_value)?,
    };
    set_held(k, arg_index, unwrapped, r);
    Ok(())
}

/// An argument value the vendor accepted, to record: its size and where it lies.
#[derive(Clone, Copy)]
struct Recorded {
    size: usize,
    value: *const c_void,
}

impl Recorded {
    /// The value to record for `k`'s argument, if the object records them and its class
    /// may still yield (a kernel that cannot pays a field read or one relaxed load).
    fn of(k: &Kernel, size: usize, value: *const c_void) -> Option<Recorded> {
        k.records_args().then_some(Recorded { size, value })
    }
}

/// Records an argument value (see [`KernelArgs::values`]).
fn record(args: &mut KernelArgs, index: cl_uint, r: Recorded) {
    let Some(v) = args.values.as_mut() else {
        return;
    };
    let bytes = (!r.value.is_null()).then(|| {
        // SAFETY: the vendor accepted `size` bytes at `value`, by the API's contract.
        smallvec::SmallVec::from_slice(unsafe {
            std::slice::from_raw_parts(r.value as *const u8, r.size)
        })
    });
    let i = index as usize;
    if i >= v.len() {
        v.resize(i + 1, None);
    }
    v[i] = Some(ArgValue {
        size: r.size,
        bytes,
    });
}

/// The kernel's arguments can no longer be replayed on another vendor kernel.
fn unreplayable(k: &Kernel) {
    k.args.lock().unwrap_or_else(|e| e.into_inner()).values = None;
}

pub fn set_kernel_arg_svm_pointer(
    kernel: cl_kernel,
    arg_index: cl_uint,
    arg_value: *const c_void,
) -> CLResult<()> {
    let k = check(kernel)?.get();
    if let Some(r) = past_hidden(k, arg_index, |i| {
        vtry!(
            k.inner.vt,
            clSetKernelArgSVMPointer(k.inner.h, i, arg_value)
        )
    }) {
        return r;
    }
    // SVM pointers are plain addresses; the argument no longer holds a memory object.
    vtry!(
        k.inner.vt,
        clSetKernelArgSVMPointer(k.inner.h, arg_index, arg_value)
    )?;
    k.args_set.set(arg_index, true);
    k.null_mems.set(arg_index, false);
    unreplayable(k);
    set_held(k, arg_index, None, None);
    Ok(())
}

pub fn set_kernel_exec_info(
    kernel: cl_kernel,
    param_name: cl_kernel_exec_info,
    param_value_size: usize,
    param_value: *const c_void,
) -> CLResult<()> {
    let k = check(kernel)?.get();
    // The vendor kernel now holds a setting a new kernel object must not inherit: it is
    // not kept as a spare (set before the call, which may apply part of it and fail).
    k.exec_info_set.store(true, Relaxed);
    // CL_KERNEL_EXEC_INFO_SVM_PTRS and the fine-grain flag carry addresses and booleans,
    // no handles: forwarded unchanged.
    vtry!(
        k.inner.vt,
        clSetKernelExecInfo(k.inner.h, param_name, param_value_size, param_value)
    )?;
    unreplayable(k);
    Ok(())
}

pub fn get_kernel_info(
    kernel: cl_kernel,
    param_name: cl_kernel_info,
    param_value_size: usize,
    param_value: *mut c_void,
    param_value_size_ret: *mut usize,
) -> CLResult<()> {
    let o = check(kernel)?;
    let k = o.get();
    // A spare vendor kernel's own count also holds what the vendor took for the earlier
    // object's launches still queued; a new kernel object has its application's alone.
    if k.recycled && param_name == CL_KERNEL_REFERENCE_COUNT {
        let n = cl_uint::try_from(o.app_refs()).unwrap_or(cl_uint::MAX);
        return write_info(
            param_value_size,
            param_value,
            param_value_size_ret,
            bytes_of(&n),
        );
    }
    // A rewritten kernel's application arguments end where the hidden one begins.
    if let Some(n) = k.hidden().filter(|_| param_name == CL_KERNEL_NUM_ARGS) {
        return write_info(
            param_value_size,
            param_value,
            param_value_size_ret,
            bytes_of(&n),
        );
    }
    let handle = match param_name {
        CL_KERNEL_CONTEXT => k.program.get().context.handle(),
        CL_KERNEL_PROGRAM => k.program.handle(),
        // Everything else is plain data: forwarded as is (this is a hot query).
        _ => {
            return vtry!(
                k.inner.vt,
                clGetKernelInfo(
                    k.inner.h,
                    param_name,
                    param_value_size,
                    param_value,
                    param_value_size_ret
                )
            )
        }
    };
    write_info(
        param_value_size,
        param_value,
        param_value_size_ret,
        bytes_of(&handle),
    )
}

/// The kernel and the inner handle of an optional device: "device ... can be NULL if
/// there is a single device associated with kernel" (the vendor decides that).
fn kernel_and_device(
    kernel: cl_kernel,
    device: cl_device_id,
) -> CLResult<(&'static Kernel, cl_device_id)> {
    let k = check(kernel)?.get();
    // "CL_INVALID_DEVICE if device is not in the list of devices associated with kernel".
    let d = Obj::<Device>::check_opt(device)?.map_or(std::ptr::null_mut(), |d| d.get().inner.h);
    Ok((k, d))
}

pub fn get_kernel_work_group_info(
    kernel: cl_kernel,
    device: cl_device_id,
    param_name: cl_kernel_work_group_info,
    param_value_size: usize,
    param_value: *mut c_void,
    param_value_size_ret: *mut usize,
) -> CLResult<()> {
    let (k, d) = kernel_and_device(kernel, device)?;
    vtry!(
        k.inner.vt,
        clGetKernelWorkGroupInfo(
            k.inner.h,
            d,
            param_name,
            param_value_size,
            param_value,
            param_value_size_ret
        )
    )
}

pub fn get_kernel_arg_info(
    kernel: cl_kernel,
    arg_index: cl_uint,
    param_name: cl_kernel_arg_info,
    param_value_size: usize,
    param_value: *mut c_void,
    param_value_size_ret: *mut usize,
) -> CLResult<()> {
    let k = check(kernel)?.get();
    let ask = |i| {
        vtry!(
            k.inner.vt,
            clGetKernelArgInfo(
                k.inner.h,
                i,
                param_name,
                param_value_size,
                param_value,
                param_value_size_ret
            )
        )
    };
    if let Some(r) = past_hidden(k, arg_index, ask) {
        return r;
    }
    vtry!(
        k.inner.vt,
        clGetKernelArgInfo(
            k.inner.h,
            arg_index,
            param_name,
            param_value_size,
            param_value,
            param_value_size_ret
        )
    )
}

/// Forwards `clGetKernelSubGroupInfo` and its KHR twin (same signature, own slots).
macro_rules! sub_group_info {
    ($name:ident, $slot:ident) => {
        pub fn $name(
            kernel: cl_kernel,
            device: cl_device_id,
            param_name: cl_kernel_sub_group_info,
            input_value_size: usize,
            input_value: *const c_void,
            param_value_size: usize,
            param_value: *mut c_void,
            param_value_size_ret: *mut usize,
        ) -> CLResult<()> {
            let (k, d) = kernel_and_device(kernel, device)?;
            // The input values (local sizes, sub-group counts) are plain numbers.
            vtry!(
                k.inner.vt,
                $slot(
                    k.inner.h,
                    d,
                    param_name,
                    input_value_size,
                    input_value,
                    param_value_size,
                    param_value,
                    param_value_size_ret
                )
            )
        }
    };
}

sub_group_info!(get_kernel_sub_group_info, clGetKernelSubGroupInfo);
sub_group_info!(get_kernel_sub_group_info_khr, clGetKernelSubGroupInfoKHR);

type SuggestedLocalFn = unsafe extern "C" fn(
    cl_command_queue,
    cl_kernel,
    cl_uint,
    *const usize,
    *const usize,
    *mut usize,
) -> cl_int;

pub fn get_kernel_suggested_local_work_size(
    command_queue: cl_command_queue,
    kernel: cl_kernel,
    work_dim: cl_uint,
    global_work_offset: *const usize,
    global_work_size: *const usize,
    suggested_local_work_size: *mut usize,
) -> CLResult<()> {
    // "CL_INVALID_COMMAND_QUEUE if command_queue is not a valid host command-queue."
    let q = Obj::<Queue>::check(command_queue)?.get();
    let k = check(kernel)?.get();
    // cl_khr_suggested_local_work_size is an extension: its dispatch slot lies past the
    // end of a 3.0 vendor's table, so the function is asked of the vendor by name.
    let p = &q.device.get().platform.get().inner;
    let f = vcall!(
        p.vt,
        clGetExtensionFunctionAddressForPlatform(
            p.h,
            c"clGetKernelSuggestedLocalWorkSizeKHR".as_ptr()
        )
    );
    if f.is_null() {
        return Err(CL_INVALID_OPERATION);
    }
    // SAFETY: the vendor's own function for this name, whose signature the extension fixes.
    let f = unsafe { std::mem::transmute::<*mut c_void, SuggestedLocalFn>(f) };
    // SAFETY: inner handles, and the application's size arrays passed through unchanged.
    crate::core::error::check(unsafe {
        f(
            q.inner.h,
            k.inner.h,
            work_dim,
            global_work_offset,
            global_work_size,
            suggested_local_work_size,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_argument_types() {
        assert_eq!(type_kind("sampler_t"), ArgKind::Sampler);
        assert_eq!(type_kind("queue_t"), ArgKind::Queue);
        for img in [
            "image2d_t",
            "image1d_buffer_t",
            "read_only image3d_t",
            "image2d_array_depth_t",
        ] {
            assert_eq!(type_kind(img), ArgKind::Mem, "{img}");
        }
        assert_eq!(type_kind("pipe int"), ArgKind::Mem);
        for plain in ["int", "float4", "struct my_image_t", "size_t", "imagery"] {
            assert_eq!(type_kind(plain), ArgKind::Plain, "{plain}");
        }
    }
}
