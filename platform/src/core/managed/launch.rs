//! Preparing a kernel launch for the FIFO: the checks that let it be deferred (the vendor
//! can no longer return its errors synchronously once the call is deferred), the argument
//! snapshot, and the slicing parameters.

use std::ffi::c_void;

use super::submitter::{Launch, Retained};
use crate::core::cl::*;
use crate::core::forward::{fetch_info, fetch_scalar};
use crate::core::objects::{HeldArg, Kernel, Sliceable};

/// One of the kernel's work-group facts on `device`, read into a value of its size (one
/// vendor call, no allocation: every launch the layer plans asks a few).
fn kernel_wg_info<T: Copy + Default>(
    k: &Kernel,
    device: cl_device_id,
    what: cl_kernel_work_group_info,
) -> Option<T> {
    let i = &k.inner;
    fetch_scalar(|s, v, r| match i.vt.clGetKernelWorkGroupInfo {
        // SAFETY: the vendor's query on its own kernel and device, into a T of `s` bytes.
        Some(f) => unsafe { f(i.h, device, what, s, v, r) },
        None => CL_INVALID_OPERATION,
    })
    .ok()
}

/// Whether kernel `k` has a required work-group size (asked once per kernel class).
pub fn has_required_local(k: &Kernel, device: &crate::core::forward::Inner<cl_device_id>) -> bool {
    *k.class.required_local.get_or_init(|| {
        kernel_wg_info::<[usize; 3]>(k, device.h, CL_KERNEL_COMPILE_WORK_GROUP_SIZE)
            .is_some_and(|r| r != [0; 3])
    })
}

/// The device's largest work-item size per dimension (the first three), if it says.
fn device_item_sizes(
    device: &crate::core::forward::Inner<cl_device_id>,
) -> Option<&'static [usize]> {
    device_facts(device).item_sizes.as_deref()
}

/// The launch geometry read from the application's arrays, if it is one the vendor would
/// accept for certain; `None` sends the call to the vendor directly (after draining), so
/// the vendor's own error comes back synchronously, exactly as without the layer.
pub struct Geometry {
    pub work_dim: cl_uint,
    pub offset: Option<[usize; 3]>,
    pub global: [usize; 3],
    pub local: Option<[usize; 3]>,
}

/// Reads and checks the geometry. Everything doubtful returns `None`.
pub fn geometry(
    k: &Kernel,
    device: &crate::core::forward::Inner<cl_device_id>,
    work_dim: cl_uint,
    offset: *const usize,
    global: *const usize,
    local: *const usize,
) -> Option<Geometry> {
    let d = work_dim as usize;
    if !(1..=3).contains(&d) || global.is_null() {
        return None;
    }
    let read = |p: *const usize| -> Option<[usize; 3]> {
        if p.is_null() {
            return None;
        }
        let s = crate::core::args::slice(p, d).ok()?;
        let mut a = [1usize; 3];
        a[..d].copy_from_slice(s);
        Some(a)
    };
    let g = read(global)?;
    let off = if offset.is_null() {
        None
    } else {
        Some(read(offset).map(|mut o| {
            o[d..].fill(0);
            o
        })?)
    };
    let mut l = read(local);
    if g[..d].contains(&0) {
        return None;
    }
    if let Some(o) = off {
        if (0..d).any(|i| o[i].checked_add(g[i]).is_none()) {
            return None;
        }
    }
    let reqd: [usize; 3] =
        kernel_wg_info(k, device.h, CL_KERNEL_COMPILE_WORK_GROUP_SIZE).unwrap_or([0; 3]);
    if reqd != [0; 3] {
        match l {
            // The vendor will use the required size: plan with it explicitly.
            None => l = Some(reqd),
            Some(x) if x[..d] != reqd[..d] => return None,
            _ => {}
        }
    }
    // Also proves the kernel is built for this device ("CL_INVALID_PROGRAM_EXECUTABLE if
    // there is no successfully built program executable available for device").
    let max_wg: usize = kernel_wg_info(k, device.h, CL_KERNEL_WORK_GROUP_SIZE)?;
    if let Some(x) = l {
        let items = device_item_sizes(device)?;
        let product: usize = x[..d].iter().product();
        let fits =
            (0..d).all(|i| x[i] > 0 && x[i] <= *items.get(i).unwrap_or(&0) && g[i] % x[i] == 0);
        if !fits || product > max_wg {
            return None;
        }
    }
    Some(Geometry {
        work_dim,
        offset: off,
        global: g,
        local: l,
    })
}

fn retain_with(h: *mut c_void, vt: &cl_icd_dispatch, kind: u8) -> Retained {
    // The dispatch slots' handle types are all `*mut c_void` in opencl-sys.
    let (r, rel) = match kind {
        0 => (vt.clRetainMemObject, vt.clReleaseMemObject),
        1 => (vt.clRetainSampler, vt.clReleaseSampler),
        2 => (vt.clRetainCommandQueue, vt.clReleaseCommandQueue),
        _ => (vt.clRetainKernel, vt.clReleaseKernel),
    };
    Retained::new(h, r, rel)
}

/// The objects a kernel's arguments hold, retained for as long as the launch waits in
/// software (the application may release them right after enqueueing; the vendor only
/// takes its own references when the launch reaches it).
pub fn keep_args(k: &Kernel) -> Vec<Retained> {
    let args = k.args.lock().unwrap_or_else(|e| e.into_inner());
    args.held
        .iter()
        .flatten()
        .map(|a| match a {
            HeldArg::Mem(m) => retain_with(m.get().inner.h, m.get().inner.vt, 0),
            HeldArg::Sampler(s) => retain_with(s.get().inner.h, s.get().inner.vt, 1),
            HeldArg::Queue(q) => retain_with(q.get().inner.h, q.get().inner.vt, 2),
        })
        .collect()
}

/// A snapshot of the kernel with its current arguments (`clCloneKernel`), owned by the
/// launch. `None` when the vendor cannot clone (the launch then goes direct).
pub fn snapshot(k: &Kernel) -> Option<Retained> {
    let f = k.inner.vt.clCloneKernel?;
    let mut err = CL_SUCCESS;
    // SAFETY: the vendor clones its own kernel.
    let h = unsafe { f(k.inner.h, &mut err) };
    if err != CL_SUCCESS || h.is_null() {
        return None;
    }
    let clone = Retained::new(h, None, k.inner.vt.clReleaseKernel);
    for i in k.null_mems.ones() {
        let set = k.inner.vt.clSetKernelArg?;
        // SAFETY: the clone's argument `i`, set to a NULL memory object as the
        // application set it on the original.
        let rc = unsafe { set(h, i, std::mem::size_of::<cl_mem>(), std::ptr::null()) };
        if rc != CL_SUCCESS {
            return None;
        }
    }
    Some(clone)
}

/// Sets the whole launch's geometry as a rewritten kernel's hidden argument on the
/// launch's snapshot, for slices to read (each piece then sets its own first group,
/// `Submitter::enqueue_piece`); returns the value, or `None` if the vendor refused it. The
/// local size is the application's; with a NULL one the kernel is sliceable only if it
/// does not depend on the work-group size, so it never reads the local-size fields.
fn set_geometry(
    clone: &Retained,
    k: &Kernel,
    index: cl_uint,
    geo: &Geometry,
) -> Option<[u8; softpreempt_transform::GEOMETRY_ARG_SIZE]> {
    let (bytes, size) = softpreempt_transform::geometry_arg(
        geo.work_dim,
        geo.offset.unwrap_or([0; 3]),
        geo.global,
        geo.local.unwrap_or([0; 3]),
    );
    let bytes: [u8; softpreempt_transform::GEOMETRY_ARG_SIZE] = bytes.try_into().ok()?;
    let rc = match k.inner.vt.clSetKernelArg {
        // SAFETY: the launch's own kernel clone; a by-value argument of `size` bytes.
        Some(f) => unsafe { f(clone.handle(), index, size, bytes.as_ptr() as *const c_void) },
        None => CL_INVALID_OPERATION,
    };
    (rc == CL_SUCCESS).then_some(bytes)
}

/// Whether `device` is a GPU (cached per device).
pub fn is_gpu(device: &crate::core::forward::Inner<cl_device_id>) -> bool {
    device_facts(device).kind & CL_DEVICE_TYPE_GPU != 0
}

/// Whether the device is a CPU device (its kernels run on threads of this process).
pub fn is_cpu(device: &crate::core::forward::Inner<cl_device_id>) -> bool {
    device_facts(device).kind & CL_DEVICE_TYPE_CPU != 0
}

/// What planning a launch reads of a device: constants, asked of the vendor once.
struct DeviceFacts {
    units: u64,
    kind: u64,
    /// `CL_DEVICE_MAX_WORK_ITEM_SIZES`, its first three (`None`: the vendor did not say).
    item_sizes: Option<smallvec::SmallVec<[usize; 3]>>,
}

/// The facts of `device`, asked once per device and kept for the process (devices are
/// few). Planning a launch reads them several times, so the thread's latest device is
/// kept in front of the process-wide map (no lock, no hash).
fn device_facts(device: &crate::core::forward::Inner<cl_device_id>) -> &'static DeviceFacts {
    type Known = std::collections::HashMap<usize, &'static DeviceFacts>;
    static DEVICES: once_cell::sync::Lazy<std::sync::Mutex<Known>> =
        once_cell::sync::Lazy::new(Default::default);
    thread_local! {
        static LATEST: std::cell::Cell<Option<(usize, &'static DeviceFacts)>> =
            const { std::cell::Cell::new(None) };
    }
    let h = device.h as usize;
    if let Some((_, f)) = LATEST.get().filter(|(d, _)| *d == h) {
        return f;
    }
    let facts = *DEVICES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(h)
        .or_insert_with(|| Box::leak(Box::new(ask_device(device))));
    LATEST.set(Some((h, facts)));
    facts
}

fn ask_device(device: &crate::core::forward::Inner<cl_device_id>) -> DeviceFacts {
    let info = |what| {
        fetch_info(|s, v, r| match device.vt.clGetDeviceInfo {
            // SAFETY: the vendor's query on its own device.
            Some(f) => unsafe { f(device.h, what, s, v, r) },
            None => CL_INVALID_OPERATION,
        })
    };
    let word = |b: Vec<u8>| b.iter().rev().fold(0u64, |a, &x| (a << 8) | x as u64);
    let units = word(info(CL_DEVICE_MAX_COMPUTE_UNITS).unwrap_or_default()).max(1);
    let item_sizes = info(CL_DEVICE_MAX_WORK_ITEM_SIZES).ok().map(|b| {
        b.chunks_exact(8)
            .take(3)
            .map(|c| usize::from_ne_bytes(c.try_into().unwrap_or([0; 8])))
            .collect()
    });
    DeviceFacts {
        units,
        kind: word(info(CL_DEVICE_TYPE).unwrap_or_default()),
        item_sizes,
    }
}

/// The device's compute units (cached per device).
fn compute_units(device: &crate::core::forward::Inner<cl_device_id>) -> u64 {
    device_facts(device).units
}

/// How many work-groups of `items` work-items each the device runs at once: its compute
/// units times the groups one unit holds. A GPU compute unit (an NVIDIA SM) holds up to
/// 2048 resident work-items in at most 32 groups; a CPU device's unit (PoCL's thread) runs
/// one group at a time. Registers or local memory can lower a GPU's real figure; erring
/// high makes slices longer, never narrower than a wave. Also says whether the device is
/// a GPU.
pub(super) fn wave_work_groups(
    device: &crate::core::forward::Inner<cl_device_id>,
    items: usize,
) -> (u64, bool) {
    let units = compute_units(device);
    let gpu = is_gpu(device);
    if let Some(w) = crate::config::config().sched.wave_work_groups {
        return (w.max(1), gpu);
    }
    let per_unit = if gpu {
        (2048 / items.max(1)).clamp(1, 32) as u64
    } else {
        1
    };
    (units * per_unit, gpu)
}

/// Work-items per group a yielding launch of a kernel that does not depend on its local
/// size aims at when the application passed NULL. Each virtual group costs one atomic on
/// the launch's single ticket counter, two barriers and a read of the yield word: with
/// the 32-item groups a GPU's preferred multiple gives, a 50 ms compute launch on an H100
/// had 55 million groups and the counter serialised them (the persistent launch took up
/// to twice as long); at 256 items the probe's persistent kernels cost under 1%.
const YIELD_GROUP_ITEMS: usize = 256;

/// The local size a yielding launch of a kernel that does not depend on it runs with, when
/// the application passed NULL: on a CPU device the slices' block ([`null_local_unit`]);
/// else the largest multiple of the vendor's preferred multiple up to
/// [`YIELD_GROUP_ITEMS`] (and the kernel's own limit) that divides the first dimension,
/// else the slicing block.
pub fn default_local(
    k: &Kernel,
    device: &crate::core::forward::Inner<cl_device_id>,
    geo: &Geometry,
) -> [usize; 3] {
    if !is_gpu(device) {
        // A CPU device runs a group on one thread: the slices' choice (small enough for
        // every thread to have groups, large enough to vectorize) keeps a group, and so a
        // yield, short. 256-item groups of pyopencl's 47 ms spin kernel on PoCL took 3 ms
        // each, too long to yield.
        if let (unit, true) = null_local_unit(k, device, geo) {
            return unit;
        }
    }
    let pm: usize = kernel_wg_info(k, device.h, CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE)
        .unwrap_or(1)
        .max(1);
    let max_wg: usize = kernel_wg_info(k, device.h, CL_KERNEL_WORK_GROUP_SIZE).unwrap_or(1);
    let max_item = device_item_sizes(device)
        .and_then(|v| v.first().copied())
        .unwrap_or(1);
    let cap = YIELD_GROUP_ITEMS.min(max_wg).min(max_item);
    let g0 = geo.global[0];
    match (1..=cap / pm)
        .rev()
        .map(|i| i * pm)
        .find(|&d| g0.is_multiple_of(d))
    {
        Some(d) => [d, 1, 1],
        None => null_local_unit(k, device, geo).0,
    }
}

/// The block slices are cut in: the local size, or with a NULL local size the block
/// `null_local_unit` chooses, with whether slices pass that block as their local size.
fn unit_of(
    k: &Kernel,
    device: &crate::core::forward::Inner<cl_device_id>,
    geo: &Geometry,
) -> ([usize; 3], bool) {
    match geo.local {
        Some(l) => (l, true),
        None => null_local_unit(k, device, geo),
    }
}

/// Most work-items in the local size chosen for the slices of a NULL-local launch on a
/// CPU device: large enough that PoCL's per-group cost stays negligible (measured on PoCL
/// 3.1, the demo's 1024² Mandelbrot whole: 64, 256 and 1024 items per group within 2%).
const CPU_SLICE_GROUP_ITEMS: usize = 128;

/// Fewest work-groups per compute unit a CPU launch is cut into where its size allows.
/// PoCL runs one group per thread at a time, so a wave is one group per thread, and a
/// launch of few long work-items (the benchmark's LP: 8192 items of 6 µs each) in
/// 128-item groups has waves of 1.6 ms, longer than any slice target; smaller groups
/// make waves short enough to cut at the target.
const CPU_GROUPS_PER_UNIT: usize = 512;

/// The slicing block of a launch whose application passed a NULL local size.
///
/// A CPU device gets an explicit local size for its slices (the second value, true),
/// chosen here: with NULL, PoCL picks a local size per slice from the slice's own global
/// size, and for a slice of a few rows that is one or two groups, so one of its threads
/// idles (a 1-row slice of the demo's Mandelbrot ran at half speed; the same rows with an
/// explicit 256-item local size within 25% of the whole launch, 4 rows within 7%). This is
/// legal only because the kernel was found not to depend on its work-group size
/// (`Sliceable::Yes { null_local: true }`), and the whole launch, when not cut, still goes
/// with the application's NULL.
///
/// A GPU keeps NULL per slice (the second value, false), with the kernel's preferred
/// work-group multiple along the first dimension as the block: a GPU slice holds many
/// groups whatever the driver picks, and the measured GPU results rest on the driver's
/// own choice.
fn null_local_unit(
    k: &Kernel,
    device: &crate::core::forward::Inner<cl_device_id>,
    geo: &Geometry,
) -> ([usize; 3], bool) {
    let mut unit = [1usize; 3];
    let pm: usize =
        kernel_wg_info(k, device.h, CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE).unwrap_or(1);
    let null_local_ok = matches!(k.sliceable(), Sliceable::Yes { null_local: true });
    if null_local_ok && !is_gpu(device) {
        let max_wg: usize = kernel_wg_info(k, device.h, CL_KERNEL_WORK_GROUP_SIZE).unwrap_or(1);
        let max_item = device_item_sizes(device)
            .and_then(|v| v.first().copied())
            .unwrap_or(1);
        let items: usize = geo.global[..geo.work_dim as usize].iter().product();
        let units = compute_units(device) as usize;
        let by_count = items / CPU_GROUPS_PER_UNIT.saturating_mul(units).max(1);
        let cap = by_count
            .clamp(pm.max(1), CPU_SLICE_GROUP_ITEMS)
            .min(max_wg)
            .min(max_item)
            .max(1);
        // The largest divisor of the first dimension within the cap that is a multiple of
        // the vendor's preferred multiple (what it vectorizes over); none keeps NULL.
        let g0 = geo.global[0];
        let step = pm.max(1);
        if let Some(d) = (1..=cap.min(g0) / step)
            .rev()
            .map(|i| i * step)
            .find(|&d| g0.is_multiple_of(d) && d >= 2)
        {
            unit[0] = d;
            tracing::debug!(kernel = %k.name(), items, pm, cap, group = d, "local size chosen for slices");
            return (unit, true);
        }
    }
    if pm > 1 && geo.global[0].is_multiple_of(pm) {
        unit[0] = pm;
    }
    (unit, false)
}

/// The whole launch's device time as the kernel's timing model predicts it.
#[derive(Clone, Copy, Debug)]
pub struct Prediction {
    /// The predicted ns, once the model has data (a launch of a kernel never sliced has
    /// none).
    pub ns: Option<u64>,
    /// Whether the model rests on more than the kernel's first launch
    /// (`TimingModel::warm`): that launch's observations may be all cold start, or, on
    /// PoCL, a few small pieces that ran many times faster per group than the kernel's
    /// launches do.
    pub settled: bool,
}

/// The whole launch's device time as the kernel's timing model predicts it.
pub fn predicted_ns(
    k: &Kernel,
    device: &crate::core::forward::Inner<cl_device_id>,
    geo: &Geometry,
) -> Prediction {
    let (unit, _) = unit_of(k, device, geo);
    let d = geo.work_dim as usize;
    let groups: u64 = (0..d)
        .map(|i| geo.global[i].div_ceil(unit[i].max(1)) as u64)
        .product();
    let (wave, _) = wave_work_groups(device, unit.iter().product());
    let waves = softpreempt_sched::waves(groups, wave);
    let (model, launches) = k.class.models.with_launches(device.h as usize);
    let ns = super::models::predict_bounded(&model, launches, waves);
    Prediction {
        ns,
        settled: model.warm(),
    }
}

/// Whether a launch of `k` over `geo` may be cut (rule 5): an in-order queue, and a kernel
/// whose analysis allows it with this local size (a NULL one only if the kernel does not
/// depend on its work-group size).
pub fn may_slice(k: &Kernel, geo: &Geometry, in_order: bool) -> bool {
    in_order
        && match k.sliceable() {
            Sliceable::Yes { null_local } => *null_local || geo.local.is_some(),
            Sliceable::No(_) => false,
        }
}

/// Builds the FIFO entry of a launch.
pub fn build(
    k: &Kernel,
    device: &crate::core::forward::Inner<cl_device_id>,
    geo: Geometry,
    clone: Retained,
    in_order: bool,
    yielding: Option<super::yielding::YieldLaunch>,
    own_event: bool,
) -> Launch {
    let (unit, unit_is_local) = unit_of(k, device, &geo);
    let mut sliceable = may_slice(k, &geo, in_order);
    let mut geometry = None;
    if let Some(i) = k.hidden().filter(|_| sliceable) {
        // Cut or not, the launch reaches the vendor with the geometry it now gets; if it
        // cannot be set, the snapshot keeps the native value and the launch stays whole.
        geometry = set_geometry(&clone, k, i, &geo).map(|v| (i, v));
        sliceable = geometry.is_some();
    }
    let group: usize = unit.iter().product();
    let (wave_wgs, gpu) = wave_work_groups(device, group);
    Launch {
        wave_wgs,
        gpu,
        kernel: clone,
        work_dim: geo.work_dim,
        offset: geo.offset,
        global: geo.global,
        local: geo.local,
        unit,
        unit_is_local,
        sliceable,
        key: (k.class.id, device.h as usize),
        models: k.class.models.clone(),
        name: k.name().clone(),
        yielding,
        own_event,
        geometry,
    }
}
