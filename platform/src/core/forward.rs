//! Calling the vendor, and translating handles between the application's view (our
//! wrappers) and the vendor's (inner handles).

use crate::core::cl::*;
use std::ffi::c_void;

use super::error::CLResult;
use super::handle::{Kind, Obj, Ref};

/// The vendor's side of a wrapper: its handle and the table to call it through.
pub struct Inner<H> {
    pub h: H,
    /// A copy of the vendor's table, cut at the last slot the vendor's OpenCL version
    /// defines (later slots are NULL), so no call ever reads past the end of a shorter table.
    pub vt: &'static cl_icd_dispatch,
    /// The vendor's own table pointer, to recognise objects sharing it.
    raw_vt: usize,
    /// How many slots of a vendor table may be read (from the platform's version).
    slots: usize,
    icd2: bool,
}

impl<H: Copy> Clone for Inner<H> {
    fn clone(&self) -> Self {
        Inner {
            h: self.h,
            vt: self.vt,
            raw_vt: self.raw_vt,
            slots: self.slots,
            icd2: self.icd2,
        }
    }
}

// SAFETY: inner handles are opaque vendor pointers; OpenCL objects are thread-safe.
unsafe impl<H> Send for Inner<H> {}
// SAFETY: as above.
unsafe impl<H> Sync for Inner<H> {}

/// The last dispatch slot each OpenCL version's ICD table defines.
fn last_slot(major: u32, minor: u32) -> &'static str {
    match (major, minor) {
        (1, 0) => "clEnqueueReleaseD3D10ObjectsKHR",
        (1, 1) => "clCreateEventFromGLsyncKHR",
        (1, 2) => "clCreateEventFromEGLSyncKHR",
        (2, 0) => "clGetKernelSubGroupInfoKHR",
        (2, 1) => "clSetDefaultDeviceCommandQueue",
        (2, 2) => "clSetProgramSpecializationConstant",
        _ => "clSetContextDestructorCallback",
    }
}

/// Number of readable slots for a platform version string ("OpenCL 3.0 ...").
pub fn slots_for_version(version: &str) -> usize {
    let num = version.split_whitespace().nth(1).unwrap_or("1.0");
    let (major, minor) = num.split_once('.').unwrap_or(("1", "0"));
    let (major, minor) = (major.parse().unwrap_or(1), minor.parse().unwrap_or(0));
    let name = last_slot(major, minor);
    super::platform::slot_names()
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, off)| off / std::mem::size_of::<usize>() + 1)
        .unwrap_or(0)
}

/// A leaked, truncated copy of a vendor table, made once per distinct table.
fn table_copy(raw: *const cl_icd_dispatch, slots: usize) -> &'static cl_icd_dispatch {
    use std::sync::Mutex;
    static COPIES: Mutex<Vec<(usize, usize, &'static cl_icd_dispatch)>> = Mutex::new(Vec::new());
    let mut copies = COPIES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, _, t)) = copies
        .iter()
        .find(|(r, n, _)| *r == raw as usize && *n == slots)
    {
        return t;
    }
    // SAFETY: an all-NULL table is valid (every slot is an Option of a function pointer).
    let mut t: cl_icd_dispatch = unsafe { std::mem::zeroed() };
    let n = slots.min(std::mem::size_of::<cl_icd_dispatch>() / std::mem::size_of::<usize>());
    // SAFETY: the vendor's table has at least `slots` entries for its OpenCL version, and
    // `n` never exceeds our table's size.
    unsafe {
        std::ptr::copy_nonoverlapping(raw as *const usize, &mut t as *mut _ as *mut usize, n)
    };
    let t: &'static cl_icd_dispatch = Box::leak(Box::new(t));
    copies.push((raw as usize, slots, t));
    t
}

/// The dispatch pointer every cl_khr_icd object starts with.
///
/// # Safety
/// `obj` must be a live vendor object.
unsafe fn table_of(obj: *mut c_void) -> *const cl_icd_dispatch {
    // SAFETY: by the function's contract.
    unsafe { *(obj as *const *const cl_icd_dispatch) }
}

impl<H: Copy> Inner<H> {
    /// Wraps a vendor platform handle. `icd2` is the platform's cl_khr_icd 2.0 table,
    /// used for every object of that platform; 1.x objects carry their own table, of which
    /// the first `slots` may be read.
    pub(crate) fn platform(
        h: H,
        raw: *mut c_void,
        icd2: Option<&'static cl_icd_dispatch>,
        slots: usize,
    ) -> Option<Self> {
        if let Some(vt) = icd2 {
            return Some(Inner {
                h,
                vt,
                raw_vt: 0,
                slots,
                icd2: true,
            });
        }
        // SAFETY: `raw` is the live platform the vendor just returned.
        let t = unsafe { table_of(raw) };
        (!t.is_null()).then(|| Inner {
            h,
            vt: table_copy(t, slots),
            raw_vt: t as usize,
            slots,
            icd2: false,
        })
    }

    /// The vendor side of an object the vendor just returned from a call on `self`.
    pub fn child<C: Copy>(&self, h: C) -> Inner<C> {
        let same = Inner {
            h,
            vt: self.vt,
            raw_vt: self.raw_vt,
            slots: self.slots,
            icd2: self.icd2,
        };
        if self.icd2 {
            return same;
        }
        // SAFETY: `h` is a live vendor object returned by the vendor just now (callers reject
        // NULL first); handles are pointers, so reading it as one is exact.
        let t = unsafe { table_of(*(&h as *const C as *const *mut c_void)) };
        if t.is_null() || t as usize == self.raw_vt {
            // The common case (one table per vendor) costs no lock.
            return same;
        }
        Inner {
            h,
            vt: table_copy(t, self.slots),
            raw_vt: t as usize,
            slots: self.slots,
            icd2: false,
        }
    }
}

/// Calls a vendor entry point through a table: `vcall!(vt, clFlush(q))`. A slot the vendor
/// leaves empty gives `CL_INVALID_OPERATION` (the vendor does not implement it).
// The arguments are plain values (inner handles, the application's pointers passed on
// unchanged); expanding them inside the unsafe block is what the call needs.
#[macro_export]
macro_rules! vcall {
    ($vt:expr, $f:ident ( $($a:expr),* $(,)? )) => {
        match $vt.$f {
            Some(f) => {
                #[cfg(feature = "calltime")]
                let _t = $crate::calltime::Timer::new(stringify!($f));
                // SAFETY: the slot was filled by the vendor with a function of this exact
                // signature (cl_icd_dispatch); arguments are already unwrapped inner handles.
                #[allow(clippy::macro_metavars_in_unsafe)]
                unsafe { f($($a),*) }
            }
            None => return Err(opencl_sys::CL_INVALID_OPERATION),
        }
    };
}

/// `vcall!` for the common `cl_int` case: vendor errors pass through unchanged.
#[macro_export]
macro_rules! vtry {
    ($vt:expr, $f:ident ( $($a:expr),* $(,)? )) => {
        $crate::core::error::check($crate::vcall!($vt, $f($($a),*)))
    };
}

/// Calls a creation function with an `errcode_ret` out-parameter; returns the new inner
/// handle or the vendor's error.
#[macro_export]
macro_rules! vcreate {
    ($vt:expr, $f:ident ( $($a:expr),* $(,)? )) => {{
        let mut err: opencl_sys::cl_int = opencl_sys::CL_SUCCESS;
        let h = $crate::vcall!($vt, $f($($a,)* &mut err));
        if err != opencl_sys::CL_SUCCESS {
            Err(err)
        } else if h.is_null() {
            Err(opencl_sys::CL_OUT_OF_HOST_MEMORY)
        } else {
            Ok(h)
        }
    }};
}

/// Checks a list of application handles and returns the inner handles, in order.
/// `n == 0` with a non-NULL list, or `n > 0` with NULL, is the caller's to reject first.
pub fn unwrap_list<T: Kind, H: Copy>(
    n: cl_uint,
    list: *const T::Handle,
    inner: impl Fn(&Obj<T>) -> H,
) -> CLResult<Vec<H>> {
    let items = super::args::slice(list, n as usize)?;
    items
        .iter()
        .map(|h| Obj::<T>::check(*h).map(&inner))
        .collect()
}

/// Like [`unwrap_list`] but keeps references to the wrappers too.
pub fn hold_list<T: Kind>(n: cl_uint, list: *const T::Handle) -> CLResult<Vec<Ref<T>>> {
    let items = super::args::slice(list, n as usize)?;
    items
        .iter()
        .map(|h| Obj::<T>::check(*h).map(|o| o.hold()))
        .collect()
}

/// Reads a whole info value from the vendor with the usual two calls (size, then data).
pub fn fetch_info(query: impl Fn(usize, *mut c_void, *mut usize) -> cl_int) -> CLResult<Vec<u8>> {
    let mut size = 0usize;
    super::error::check(query(0, std::ptr::null_mut(), &mut size))?;
    let mut buf = vec![0u8; size];
    if size > 0 {
        super::error::check(query(
            size,
            buf.as_mut_ptr() as *mut c_void,
            std::ptr::null_mut(),
        ))?;
    }
    Ok(buf)
}

/// Reads a plain value (`cl_uint`, a handle, ...) from the vendor.
pub fn fetch_scalar<T: Copy + Default>(
    query: impl Fn(usize, *mut c_void, *mut usize) -> cl_int,
) -> CLResult<T> {
    let mut v = T::default();
    super::error::check(query(
        std::mem::size_of::<T>(),
        &mut v as *mut T as *mut c_void,
        std::ptr::null_mut(),
    ))?;
    Ok(v)
}

/// A NUL-terminated info string as Rust text.
pub fn info_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// Text as an info answer (NUL-terminated).
pub fn string_bytes(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    v
}
