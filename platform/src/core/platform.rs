//! SoftPreempt platforms (one per wrapped vendor platform) and devices.

use crate::core::cl::*;
use once_cell::sync::OnceCell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Mutex;

use super::error::CLResult;
use super::forward::Inner;
use super::handle::{new_obj, Obj, Ref};
use super::os_priority::DeviceThreads;
use crate::{declare_kind, vtry};

pub struct Platform {
    pub inner: Inner<cl_platform_id>,
    pub index: usize,
    pub library: std::path::PathBuf,
    /// A CPU device's threads in this process, and their scheduling class.
    pub threads: DeviceThreads,
}

/// Held by a queue above low priority on a CPU device (see [`Platform::hold_workers`]).
pub struct WorkersHeld(&'static Obj<Platform>);

impl Drop for WorkersHeld {
    fn drop(&mut self) {
        self.0.get().threads.unhold();
    }
}

impl Platform {
    /// Enumerates the vendor's devices through `f`, remembering the threads it starts
    /// meanwhile (PoCL starts its CPU device's workers then).
    pub fn enumerate<R>(&self, f: impl FnOnce() -> R) -> R {
        let (r, new) = super::os_priority::spawned_during(f);
        if !new.is_empty() {
            tracing::debug!(threads = ?new, "vendor threads started while enumerating devices");
            self.threads.found(new);
        }
        r
    }

    /// A queue above low priority appeared in this process: its kernels run on the same
    /// threads, which stay in (or go back to, where the system allows it) the ordinary
    /// class while the returned hold lives.
    pub fn hold_workers(me: &'static Obj<Platform>) -> WorkersHeld {
        me.get().threads.hold();
        WorkersHeld(me)
    }
}

pub struct Device {
    pub inner: Inner<cl_device_id>,
    pub platform: &'static Obj<Platform>,
    /// The device a sub-device was partitioned from.
    pub parent: Option<Ref<Device>>,
    pub is_root: bool,
}

declare_kind!(
    Platform,
    cl_platform_id,
    CL_INVALID_PLATFORM,
    0x5350_504c_0000_0008
);
declare_kind!(
    Device,
    cl_device_id,
    CL_INVALID_DEVICE,
    0x5350_4456_0000_0009
);

/// The entry-point table's slot names and byte offsets, installed by the `icd` crate.
/// Used to build a table for cl_khr_icd 2.0 vendors, and to answer
/// `clGetExtensionFunctionAddress` from the same single list.
static SLOTS: OnceCell<&'static [(&'static str, usize)]> = OnceCell::new();
static OWN_ICD_ENTRY: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

/// Called once by the cdylib, before anything else.
pub fn install_table(
    table: &'static cl_icd_dispatch,
    slots: &'static [(&'static str, usize)],
    icd_entry: *mut c_void,
) {
    super::handle::install_dispatch(table);
    let _ = SLOTS.set(slots);
    OWN_ICD_ENTRY.store(icd_entry, Ordering::Release);
}

pub fn slot_names() -> &'static [(&'static str, usize)] {
    SLOTS.get().copied().unwrap_or(&[])
}

pub(crate) fn own_icd_entry() -> *mut c_void {
    OWN_ICD_ENTRY.load(Ordering::Acquire)
}

static PLATFORMS: OnceCell<Vec<&'static Obj<Platform>>> = OnceCell::new();

/// All SoftPreempt platforms. The first call discovers the vendors; it never fails: a
/// broken vendor gives fewer (maybe zero) platforms and a log line.
pub fn platforms() -> &'static [&'static Obj<Platform>] {
    PLATFORMS.get_or_init(|| {
        crate::log::init();
        super::vendor::discover()
            .into_iter()
            .filter_map(|v| {
                let slots = vendor_slots(&v);
                let inner = Inner::platform(v.inner, v.inner, v.icd2_table, slots)?;
                Some((inner, v.library))
            })
            .enumerate()
            .map(|(index, (inner, library))| {
                let p = new_obj(Platform {
                    inner,
                    index,
                    library,
                    threads: DeviceThreads::default(),
                });
                count_devices(p);
                p
            })
            .collect()
    })
}

/// Counts the vendor's devices once, at discovery, so that the threads a vendor starts
/// when it first enumerates them (PoCL's CPU device workers) are seen starting
/// ([`Platform::enumerate`]). Later would be too late wherever the vendor is also listed to
/// the loader in its own right: ocl-icd sorts the platforms it loaded by their device
/// counts before it returns any, in the order it read them, and when it reached the
/// vendor's own entry first, the workers started there, unseen. Then a low queue's device
/// threads never went to the idle class, the layer sliced its launches and made the
/// higher priority wait for their yields: pyopencl's pair on PoCL, its HP p50 0.13-0.17 →
/// 0.26-0.39 ms and its p99 above bare's (session 40, `docs/benchmarks.md`). The loader
/// has every ICD's platforms before it sorts, so this count comes first.
fn count_devices(p: &'static Obj<Platform>) {
    // A vendor without devices (or refusing) has nothing to start: its answer is moot.
    let _ = device_count(p);
}

/// How many devices of every type the vendor has, asked inside [`Platform::enumerate`].
fn device_count(me: &'static Obj<Platform>) -> CLResult<cl_uint> {
    let i = &me.get().inner;
    let mut n: cl_uint = 0;
    let all = CL_DEVICE_TYPE_ALL as cl_device_type;
    me.get().enumerate(|| {
        vtry!(
            i.vt,
            clGetDeviceIDs(i.h, all, 0, std::ptr::null_mut(), &mut n)
        )
    })?;
    Ok(n)
}

/// How many slots of this vendor's tables may be read, from its platform version (read
/// through slot 1, `clGetPlatformInfo`, which every table has).
fn vendor_slots(v: &super::vendor::VendorPlatform) -> usize {
    if v.icd2_table.is_some() {
        return std::mem::size_of::<cl_icd_dispatch>() / std::mem::size_of::<usize>();
    }
    // SAFETY: `v.inner` is a live vendor platform; slot 1 of every ICD table is
    // clGetPlatformInfo.
    let get = unsafe { (*(*(v.inner as *const *const cl_icd_dispatch))).clGetPlatformInfo };
    let Some(get) = get else { return 0 };
    let version = super::forward::fetch_info(|s, val, r| {
        // SAFETY: the vendor's own query with buffers sized by fetch_info.
        unsafe { get(v.inner, CL_PLATFORM_VERSION, s, val, r) }
    })
    .map(|b| super::forward::info_string(&b))
    .unwrap_or_default();
    super::forward::slots_for_version(&version)
}

/// Inner device handle → wrapper, for lists the vendor hands back (`CL_CONTEXT_DEVICES`,
/// `CL_PROGRAM_DEVICES`, sub-devices, ...). Only devices live here; they are few.
static DEVICES: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

/// All root devices of a platform, wrapped.
pub fn root_devices(me: &'static Obj<Platform>) -> CLResult<Vec<Ref<Device>>> {
    let i = &me.get().inner;
    let all = CL_DEVICE_TYPE_ALL as cl_device_type;
    let n = match device_count(me) {
        Err(CL_DEVICE_NOT_FOUND) => return Ok(Vec::new()),
        r => r?,
    };
    let mut ids = vec![std::ptr::null_mut(); n as usize];
    vtry!(
        i.vt,
        clGetDeviceIDs(i.h, all, n, ids.as_mut_ptr(), std::ptr::null_mut())
    )?;
    Ok(ids.iter().map(|&d| Device::wrap(me, d)).collect())
}

impl Device {
    /// Wraps a vendor device and records it for reverse lookup.
    pub fn register(
        inner: Inner<cl_device_id>,
        platform: &'static Obj<Platform>,
        parent: Option<Ref<Device>>,
        is_root: bool,
    ) -> &'static Obj<Device> {
        let key = inner.h as usize;
        let obj = new_obj(Device {
            inner,
            platform,
            parent,
            is_root,
        });
        let mut reg = DEVICES.lock().unwrap_or_else(|e| e.into_inner());
        reg.retain(|(k, _)| *k != key);
        reg.push((key, obj as *const _ as usize));
        obj
    }

    /// The wrapper of a device the vendor returned: the known one, or a new root device
    /// (sub-devices are always registered when they are created, so unknown means root).
    pub fn wrap(platform: &'static Obj<Platform>, inner: cl_device_id) -> Ref<Device> {
        let mut reg = DEVICES.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(w) = reg
            .iter()
            .find(|(k, _)| *k == inner as usize)
            .and_then(|(_, w)| Obj::<Device>::check(*w as cl_device_id).ok())
        {
            return w.hold();
        }
        let inner = platform.get().inner.child(inner);
        let key = inner.h as usize;
        let obj = new_obj(Device {
            inner,
            platform,
            parent: None,
            is_root: true,
        });
        reg.push((key, obj as *const _ as usize));
        obj.hold()
    }

    /// The wrapper of a vendor device handle, if we know it.
    pub fn lookup(inner: cl_device_id) -> Option<Ref<Device>> {
        let reg = DEVICES.lock().unwrap_or_else(|e| e.into_inner());
        reg.iter()
            .find(|(k, _)| *k == inner as usize)
            .and_then(|(_, w)| {
                Obj::<Device>::check(*w as cl_device_id)
                    .ok()
                    .map(|o| o.hold())
            })
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        let key = self.inner.h as usize;
        let mut reg = DEVICES.lock().unwrap_or_else(|e| e.into_inner());
        reg.retain(|(k, _)| *k != key);
    }
}
