//! The machinery behind the one `cl_dispatch!` list: panic guards, the entry points and
//! the static dispatch table.

use opencl_sys::*;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;

use softpreempt_platform::core::error::CLResult;

/// Hands the table to `platform` (once). Every path into the library starts here, so no
/// wrapper can exist before the table does.
pub fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        softpreempt_platform::core::platform::install_table(
            &crate::slots::DISPATCH,
            crate::slots::SLOTS,
            crate::clIcdGetPlatformIDsKHR as *const () as *mut c_void,
        )
    });
}

#[cold]
fn report_panic(what: &str) {
    tracing::error!(
        "softpreempt: internal error in {what}; returning an error instead of crashing"
    );
}

/// `cl_int` entry points: `Ok` is `CL_SUCCESS`. A panic becomes `CL_OUT_OF_HOST_MEMORY`
/// ("a failure to allocate resources required by the OpenCL implementation on the host"),
/// the one error every entry point may return.
#[inline]
pub fn guard_int(f: impl FnOnce() -> CLResult<()>) -> cl_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => CL_SUCCESS,
        Ok(Err(e)) => e,
        Err(_) => {
            report_panic("an OpenCL call");
            CL_OUT_OF_HOST_MEMORY
        }
    }
}

/// Entry points that return an object (or a mapped pointer) and report through
/// `errcode_ret`, which may be NULL.
#[inline]
pub fn guard_obj<T: NullValue>(errcode_ret: *mut cl_int, f: impl FnOnce() -> CLResult<T>) -> T {
    let (v, e) = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => (v, CL_SUCCESS),
        Ok(Err(e)) => (T::null(), e),
        Err(_) => {
            report_panic("an OpenCL call");
            (T::null(), CL_OUT_OF_HOST_MEMORY)
        }
    };
    if !errcode_ret.is_null() {
        // SAFETY: a non-NULL errcode_ret points to a cl_int the caller owns (API contract).
        unsafe { errcode_ret.write_unaligned(e) };
    }
    v
}

/// Entry points that return a pointer with no error code (NULL means failure).
#[inline]
pub fn guard_ptr<T: NullValue>(f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        report_panic("an OpenCL call");
        T::null()
    })
}

/// Entry points that return nothing.
#[inline]
pub fn guard_void(f: impl FnOnce()) {
    if catch_unwind(AssertUnwindSafe(f)).is_err() {
        report_panic("an OpenCL call");
    }
}

/// What a failed pointer-returning entry point returns.
pub trait NullValue {
    fn null() -> Self;
}

impl<T> NullValue for *mut T {
    fn null() -> Self {
        std::ptr::null_mut()
    }
}

/// The one list of entry points. Each line is
/// `kind name(params) -> ret => module::function;` where `kind` says how results are
/// reported: `int` (status), `obj` (value + `errcode_ret`, appended here), `ptr` (value
/// only), `void`. It expands to the `extern "C"` functions, the static table and the
/// name/offset list used for extension lookups and cl_khr_icd 2.0 vendors.
macro_rules! cl_dispatch {
    ($( $kind:ident $name:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty => $module:ident :: $func:ident ; )*) => {
        pub(crate) mod slots {
            #![allow(non_snake_case)]
            use super::*;
            use softpreempt_platform::api;
            $( $crate::entry::cl_dispatch!(@fn $kind $name ($($arg : $ty),*) -> $ret => $module :: $func); )*

            /// The table every SoftPreempt object points to; every slot is filled.
            pub static DISPATCH: cl_icd_dispatch = cl_icd_dispatch {
                $( $name: Some($name), )*
            };

            /// Slot names with their byte offsets in `cl_icd_dispatch`.
            pub static SLOTS: &[(&str, usize)] = &[
                $( (stringify!($name), std::mem::offset_of!(cl_icd_dispatch, $name)), )*
            ];
        }
    };
    (@fn int $name:ident ($($arg:ident : $ty:ty),*) -> $ret:ty => $module:ident :: $func:ident) => {
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> cl_int {
            $crate::entry::guard_int(|| api::$module::$func($($arg),*))
        }
    };
    (@fn obj $name:ident ($($arg:ident : $ty:ty),*) -> $ret:ty => $module:ident :: $func:ident) => {
        pub unsafe extern "C" fn $name($($arg: $ty,)* errcode_ret: *mut cl_int) -> $ret {
            $crate::entry::guard_obj(errcode_ret, || api::$module::$func($($arg),*))
        }
    };
    (@fn ptr $name:ident ($($arg:ident : $ty:ty),*) -> $ret:ty => $module:ident :: $func:ident) => {
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            $crate::entry::guard_ptr(|| api::$module::$func($($arg),*))
        }
    };
    (@fn void $name:ident ($($arg:ident : $ty:ty),*) -> $ret:ty => $module:ident :: $func:ident) => {
        pub unsafe extern "C" fn $name($($arg: $ty),*) {
            $crate::entry::guard_void(|| api::$module::$func($($arg),*))
        }
    };
}
pub(crate) use cl_dispatch;
