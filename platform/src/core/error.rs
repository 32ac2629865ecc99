//! Result type used everywhere between the entry points and the vendor.

use opencl_sys::cl_int;

/// An OpenCL status code (`CL_SUCCESS` or a negative error).
pub type Code = cl_int;

/// `Ok` is `CL_SUCCESS`; `Err` carries the spec's error code, or the vendor's unchanged.
pub type CLResult<T> = Result<T, Code>;

/// Turns a vendor status into a `CLResult`, passing its error through unchanged.
#[inline]
pub fn check(status: cl_int) -> CLResult<()> {
    if status == opencl_sys::CL_SUCCESS {
        Ok(())
    } else {
        Err(status)
    }
}
