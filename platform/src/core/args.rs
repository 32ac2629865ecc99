//! The few checked helpers that turn the application's raw pointers into Rust values.
//! Everything else works on what these return. They trust the C API's contract (a non-NULL
//! pointer with a count points at that many items), which is the most a C ABI can check.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use crate::core::cl::*;
use std::ffi::{c_char, c_void, CStr};

use super::error::CLResult;

/// `n` items at `ptr`. NULL with `n > 0` is `CL_INVALID_VALUE`; `n == 0` is empty.
pub fn slice<'a, T>(ptr: *const T, n: usize) -> CLResult<&'a [T]> {
    if n == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() || !ptr.is_aligned() {
        return Err(CL_INVALID_VALUE);
    }
    // SAFETY: the application promises `n` readable items at `ptr` (that is the API's
    // contract); NULL and misalignment were rejected above.
    Ok(unsafe { std::slice::from_raw_parts(ptr, n) })
}

/// A zero-terminated property list (`cl_context_properties`, `cl_queue_properties`, ...)
/// including its terminator; `None` for NULL. Unterminated lists longer than 1024
/// entries are rejected rather than read forever.
pub fn property_list<'a, T: Copy + PartialEq + Default>(
    ptr: *const T,
) -> CLResult<Option<&'a [T]>> {
    if ptr.is_null() {
        return Ok(None);
    }
    if !ptr.is_aligned() {
        return Err(CL_INVALID_VALUE);
    }
    for i in 0..1024 {
        // SAFETY: the list is zero-terminated by contract; we stop at the terminator (the
        // name position) and never read past it.
        let v = unsafe { *ptr.add(i) };
        if v == T::default() && i % 2 == 0 {
            // SAFETY: items 0..=i were just read.
            return Ok(Some(unsafe { std::slice::from_raw_parts(ptr, i + 1) }));
        }
    }
    Err(CL_INVALID_PROPERTY)
}

/// Writes `v` to an optional out-pointer.
pub fn set_out<T>(ptr: *mut T, v: T) {
    if !ptr.is_null() {
        // SAFETY: a non-NULL out-pointer must point to writable storage for one `T`.
        unsafe { ptr.write_unaligned(v) }
    }
}

/// A NUL-terminated string argument.
pub fn c_str<'a>(ptr: *const c_char) -> CLResult<&'a CStr> {
    if ptr.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    // SAFETY: the application passes a NUL-terminated string by contract.
    Ok(unsafe { CStr::from_ptr(ptr) })
}

/// Copies an info-query answer out with the spec's size rules:
/// "CL_INVALID_VALUE if ... size in bytes specified by param_value_size is < size of return
/// type ... and param_value is not NULL."
pub fn write_info(
    size: usize,
    value: *mut c_void,
    size_ret: *mut usize,
    bytes: &[u8],
) -> CLResult<()> {
    if !value.is_null() {
        if size < bytes.len() {
            return Err(CL_INVALID_VALUE);
        }
        // SAFETY: `value` has room for `size >= bytes.len()` bytes by contract.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), value as *mut u8, bytes.len()) };
    }
    set_out(size_ret, bytes.len());
    Ok(())
}

/// The bytes of a plain value, for [`write_info`].
pub fn bytes_of<T: Copy>(v: &T) -> &[u8] {
    // SAFETY: any `Copy` value's storage may be viewed as bytes; callers pass POD types.
    unsafe { std::slice::from_raw_parts(v as *const T as *const u8, std::mem::size_of::<T>()) }
}

/// The bytes of a slice of plain values.
pub fn bytes_of_slice<T: Copy>(v: &[T]) -> &[u8] {
    // SAFETY: as for `bytes_of`.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}
