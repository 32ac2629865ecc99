//! A vendor reference to a context, for work of the layer that may outlive the
//! application's own references: a build of persistent entries on a thread of the layer,
//! a queue's control words. Retain and release are mirrored one for one onto the vendor's
//! context for the application (`core::handle`), so once the application released its last
//! context, program, queue and memory object the vendor destroys the context, even while a
//! thread of the layer still creates a program in it. On PoCL that corrupted the heap
//! (issue 23: pyopencl's suite under `yielding = "chaos"` crashed in a later
//! clCreateContext). The vendor's CL_CONTEXT_REFERENCE_COUNT reads one more while it is
//! held.

use std::ops::Deref;

use crate::core::cl::*;
use crate::core::forward::Inner;

/// One reference to a vendor context, released on drop.
pub struct HeldContext(Inner<cl_context>);

impl HeldContext {
    /// One more reference to the live vendor context `c`; `None` if the vendor refuses.
    pub fn retain(c: &Inner<cl_context>) -> Option<HeldContext> {
        let f = c.vt.clRetainContext?;
        // SAFETY: a live vendor context (the caller holds an application object of it).
        (unsafe { f(c.h) } == CL_SUCCESS).then(|| HeldContext(c.clone()))
    }
}

impl Deref for HeldContext {
    type Target = Inner<cl_context>;
    fn deref(&self) -> &Inner<cl_context> {
        &self.0
    }
}

impl Drop for HeldContext {
    fn drop(&mut self) {
        if let Some(f) = self.0.vt.clReleaseContext {
            // SAFETY: the reference `retain` took, released once.
            unsafe { f(self.0.h) };
        }
    }
}
