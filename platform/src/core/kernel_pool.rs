//! Spare vendor kernels, kept per kernel class for the next kernel object of that name.
//!
//! OpenCV makes a kernel object for every launch and releases it after: on an H100 the
//! vendor's `clCreateKernel` and `clReleaseKernel` cost 8-9 µs each, about 90 µs of a
//! 520 µs request. When the application's last reference to a kernel object goes, its
//! vendor kernel is kept here instead ([`Spare`]), and the next `clCreateKernel` of the
//! same name and build takes it back without a vendor call. See `docs/design.md`, "A
//! spare vendor kernel serves the next kernel object".

use std::sync::{Arc, Mutex};

use crate::core::cl::*;
use crate::core::forward::Inner;
use crate::core::rewritten::Exec;

/// Spare vendor kernels kept per class. A kernel object made for one launch is released
/// when that launch completes (OpenCV does it in the launch's completion callback), so the
/// objects of one name alive at once are about the launches of it in flight: one for a
/// lone request, a few for a client that queues requests ahead. Four covers that; past it
/// the vendor kernel is released as on the bare driver, so a burst of kernel objects never
/// leaves more than four per kernel function held by the layer.
pub const SPARES_PER_CLASS: usize = 4;

/// A vendor kernel no kernel object uses, with the one vendor reference the layer holds
/// on it. Dropping it releases that reference.
pub struct Spare {
    pub inner: Inner<cl_kernel>,
    /// The rewritten executable the vendor kernel belongs to, kept alive with it (a
    /// rebuild refuses while kernels hold it, so spares are released before that check).
    pub exec: Option<Arc<Exec>>,
}

impl Spare {
    /// The vendor kernel and its executable, for a new kernel object that takes over the
    /// vendor reference.
    pub fn into_parts(self) -> (Inner<cl_kernel>, Option<Arc<Exec>>) {
        let mut me = std::mem::ManuallyDrop::new(self);
        // `Inner` owns nothing but a copy of the handle; the executable is moved out, so
        // nothing is left to drop.
        (me.inner.clone(), me.exec.take())
    }
}

impl Drop for Spare {
    fn drop(&mut self) {
        if let Some(f) = self.inner.vt.clReleaseKernel {
            // SAFETY: the vendor kernel's last reference held by the layer, released once.
            let rc = unsafe { f(self.inner.h) };
            if rc != CL_SUCCESS {
                tracing::debug!(rc, "releasing a vendor kernel failed");
            }
        }
    }
}

/// A class's spare vendor kernels; closed (`None`) once the class is forgotten (the
/// program was built again or released), after which nothing is kept.
pub struct KernelPool {
    spares: Mutex<Option<smallvec::SmallVec<[Spare; SPARES_PER_CLASS]>>>,
}

impl Default for KernelPool {
    fn default() -> Self {
        KernelPool {
            spares: Mutex::new(Some(smallvec::SmallVec::new())),
        }
    }
}

impl KernelPool {
    /// A spare vendor kernel, if one is kept.
    pub fn take(&self) -> Option<Spare> {
        self.spares
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
            .and_then(|s| s.pop())
    }

    /// Keeps `spare` for a later kernel object; a full or closed pool gives it back (the
    /// caller drops it, which releases it, outside the lock).
    pub fn put(&self, spare: Spare) -> Result<(), Spare> {
        let mut spares = self.spares.lock().unwrap_or_else(|e| e.into_inner());
        match spares.as_mut() {
            Some(s) if s.len() < SPARES_PER_CLASS => {
                s.push(spare);
                Ok(())
            }
            _ => Err(spare),
        }
    }

    /// Releases the spares (a build is about to run: the vendor refuses while kernels are
    /// attached). With `close`, nothing is kept from then on (the class is forgotten).
    pub fn empty(&self, close: bool) {
        let old = {
            let mut spares = self.spares.lock().unwrap_or_else(|e| e.into_inner());
            if close {
                spares.take()
            } else {
                spares.as_mut().map(std::mem::take)
            }
        };
        // Released outside the lock: vendor calls.
        drop(old);
    }
}
