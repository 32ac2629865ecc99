//! Callback trampolines: the vendor calls these with its inner handles; they call the
//! application's function with the application's own wrapper and user data.
//!
//! Each registration boxes a [`Callback`] holding a counted reference to the wrapper, so
//! the wrapper outlives the inner object at least until its callback has run. Callbacks
//! that fire once free their box; a panic in Rust code here is caught, never unwound into
//! the vendor.

use crate::core::cl::*;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::handle::{Kind, Ref};

/// What the vendor gets as `user_data`.
pub struct Callback<T: Kind, F> {
    pub obj: Ref<T>,
    pub func: F,
    pub user_data: *mut c_void,
}

impl<T: Kind, F> Callback<T, F> {
    /// Boxes the registration; the returned pointer is the vendor's `user_data`.
    pub fn into_raw(obj: Ref<T>, func: F, user_data: *mut c_void) -> *mut c_void {
        Box::into_raw(Box::new(Callback {
            obj,
            func,
            user_data,
        })) as *mut c_void
    }

    /// Frees a registration the vendor refused (the call failed, so it will never fire).
    ///
    /// # Safety
    /// `p` must come from `into_raw` with the same `T` and `F`, and not be used again.
    pub unsafe fn discard(p: *mut c_void) {
        // SAFETY: by the function's contract.
        drop(unsafe { Box::from_raw(p as *mut Self) });
    }
}

/// Runs `f` without letting a panic cross into the vendor's stack.
fn guarded(f: impl FnOnce()) {
    if catch_unwind(AssertUnwindSafe(f)).is_err() {
        tracing::error!("softpreempt: internal error in a callback trampoline (suppressed)");
    }
}

/// Takes back a once-only registration.
///
/// # Safety
/// `p` must come from [`Callback::into_raw`] with the same types, and fire only once.
unsafe fn take<T: Kind, F>(p: *mut c_void) -> Box<Callback<T, F>> {
    // SAFETY: by the function's contract.
    unsafe { Box::from_raw(p as *mut Callback<T, F>) }
}

pub type ObjNotify<H> = unsafe extern "C" fn(H, *mut c_void);

/// Trampoline for the `void (CL_CALLBACK *)(cl_xxx, void *)` family that fires once:
///
/// # Safety
/// Only the vendor calls this, with the `user_data` returned by `Callback::into_raw`.
/// context destructor, mem destructor, program release and build/compile notify.
pub unsafe extern "C" fn once_obj<T: Kind>(_inner: T::Handle, data: *mut c_void) {
    guarded(|| {
        // SAFETY: `data` is the box we registered with exactly this trampoline.
        let cb = unsafe { take::<T, ObjNotify<T::Handle>>(data) };
        // SAFETY: calling the application's callback as the spec says it is called.
        unsafe { (cb.func)(cb.obj.handle(), cb.user_data) };
    })
}

pub type EventNotify = unsafe extern "C" fn(cl_event, cl_int, *mut c_void);

/// Event callbacks fire once per registration.
///
/// # Safety
/// Only the vendor calls this, with the `user_data` from `clSetEventCallback`.
pub unsafe extern "C" fn event_notify(_inner: cl_event, status: cl_int, data: *mut c_void) {
    guarded(|| {
        // SAFETY: `data` is the box registered with this trampoline in clSetEventCallback.
        let cb = unsafe { take::<super::objects::Event, EventNotify>(data) };
        // The application learns here that its command completed: so does the command's
        // queue, whose demand for the device may have waited for just this
        // (`managed::unsynced`).
        if status <= CL_COMPLETE as cl_int {
            let e = cb.obj.get();
            if let Some(m) = e.queue.as_ref().and_then(|q| q.get().managed.as_ref()) {
                m.seen_complete(e.inner.h);
            }
        }
        // SAFETY: the application's callback, called with its own event handle.
        unsafe { (cb.func)(cb.obj.handle(), status, cb.user_data) };
    })
}

pub type SvmFreeNotify =
    unsafe extern "C" fn(cl_command_queue, cl_uint, *mut *mut c_void, *mut c_void);

/// `clEnqueueSVMFree`'s callback: the pointers pass through, the queue is ours.
///
/// # Safety
/// Only the vendor calls this, with the `user_data` from `clEnqueueSVMFree`.
pub unsafe extern "C" fn svm_free_notify(
    _inner: cl_command_queue,
    n: cl_uint,
    ptrs: *mut *mut c_void,
    data: *mut c_void,
) {
    guarded(|| {
        // SAFETY: `data` is the box registered with this trampoline in clEnqueueSVMFree.
        let cb = unsafe { take::<super::objects::Queue, SvmFreeNotify>(data) };
        // SAFETY: the application's callback, with its own queue handle.
        unsafe { (cb.func)(cb.obj.handle(), n, ptrs, cb.user_data) };
    })
}
