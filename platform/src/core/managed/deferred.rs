//! Events of commands that were not sent to the vendor at once.
//!
//! The application gets an event at enqueue time, before anything reached the vendor. Its
//! inner object is a vendor *user event*, so waits, callbacks, and wait lists on other
//! queues or in other processes' contexts all work through the vendor unchanged. When the
//! command's last piece (slice) completes, the user event is set to that piece's status.
//! What a user event cannot say (command type, execution status before completion,
//! profiling) is answered from here.

use std::ffi::c_void;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::core::callback::{event_notify, Callback, EventNotify};
use crate::core::cl::*;
use crate::core::error::CLResult;
use crate::core::forward::Inner;
use crate::core::objects::Event;

/// The vendor events of a command's first and last pieces (equal when unsliced), retained.
#[derive(Default)]
struct Pieces {
    first: Option<cl_event>,
    last: Option<cl_event>,
    /// `last` is the command's final piece: its completion is the command's.
    last_is_final: bool,
    done: bool,
    /// The status the user event is set to, once `done` (set a moment later, outside the
    /// lock: a query in between answers from here).
    final_status: cl_int,
    /// `CL_SUBMITTED`/`CL_RUNNING` callbacks registered before the first piece reached
    /// the vendor (a user event never passes through those states): (type, trampoline data).
    early: Vec<(cl_int, usize)>,
    /// Something waits for the user event through the vendor: a wait list of a command
    /// (this process's, on any queue) or a completion callback registered on it
    /// ([`Deferred::needs_vendor`]). Only then is the user event set from a vendor
    /// callback on the final piece; every other way to learn of the command's completion
    /// asks its pieces (`wait`, `settle`, `status`, clFinish).
    vendor_waits: bool,
    /// The vendor callback on the final piece is registered.
    watched: bool,
}

impl Pieces {
    /// The final piece, once, if the vendor must now be asked to call back on it.
    fn to_watch(&mut self) -> Option<cl_event> {
        if self.vendor_waits && self.last_is_final && !self.done && !self.watched {
            self.watched = true;
            return self.last;
        }
        None
    }
}

pub struct Deferred {
    /// The vendor user event the application's event wraps (retained here too, so it
    /// outlives the application's release until it is set).
    user: Inner<cl_event>,
    pub kind: cl_command_type,
    /// The queue profiles its commands.
    profiling: bool,
    /// Device-clock time of the application's enqueue, when the vendor can tell the
    /// device clock from the host's (else QUEUED is the first piece's).
    queued_ns: Option<u64>,
    pieces: Mutex<Pieces>,
    /// Signalled when the final piece is known or the event is set ([`Deferred::wait`]).
    progress: Condvar,
    /// Every piece reached the vendor while the command was ready (see `readiness`).
    on_vendor: std::sync::atomic::AtomicBool,
}

// SAFETY: the vendor handles inside are thread-safe OpenCL objects; the mutable part is
// behind a Mutex.
unsafe impl Send for Deferred {}
// SAFETY: as above.
unsafe impl Sync for Deferred {}

fn retain(vt: &cl_icd_dispatch, e: cl_event) {
    if let Some(f) = vt.clRetainEvent {
        // SAFETY: a live vendor event.
        unsafe { f(e) };
    }
}

fn release(vt: &cl_icd_dispatch, e: cl_event) {
    if let Some(f) = vt.clReleaseEvent {
        // SAFETY: releasing a reference this module took.
        unsafe { f(e) };
    }
}

pub(super) fn status_of(vt: &cl_icd_dispatch, e: cl_event) -> cl_int {
    event_info(
        vt,
        e,
        CL_EVENT_COMMAND_EXECUTION_STATUS,
        CL_QUEUED as cl_int,
    )
}

/// One fixed-size `clGetEventInfo` answer, or `default` when the vendor gives none.
pub(super) fn event_info<T: Copy>(
    vt: &cl_icd_dispatch,
    e: cl_event,
    what: cl_event_info,
    default: T,
) -> T {
    let mut v = default;
    if let Some(f) = vt.clGetEventInfo {
        // SAFETY: a T-sized answer into a local of that size.
        unsafe {
            f(
                e,
                what,
                std::mem::size_of::<T>(),
                &mut v as *mut T as *mut c_void,
                std::ptr::null_mut(),
            )
        };
    }
    v
}

fn profiling_of(vt: &cl_icd_dispatch, e: cl_event, what: cl_profiling_info) -> CLResult<u64> {
    let mut v: cl_ulong = 0;
    let f = vt
        .clGetEventProfilingInfo
        .ok_or(CL_PROFILING_INFO_NOT_AVAILABLE)?;
    // SAFETY: a cl_ulong-sized answer into a local.
    let rc = unsafe {
        f(
            e,
            what,
            8,
            &mut v as *mut cl_ulong as *mut c_void,
            std::ptr::null_mut(),
        )
    };
    crate::core::error::check(rc).map(|_| v)
}

impl Deferred {
    /// A deferred command's event: creates the vendor user event in `context`.
    pub fn new(
        context: &Inner<cl_context>,
        kind: cl_command_type,
        profiling: bool,
        queued_ns: Option<u64>,
    ) -> CLResult<Arc<Deferred>> {
        let h = crate::vcreate!(context.vt, clCreateUserEvent(context.h))?;
        let user = context.child(h);
        retain(user.vt, user.h);
        let d = Arc::new(Deferred {
            user,
            kind,
            profiling,
            queued_ns,
            pieces: Mutex::new(Pieces::default()),
            progress: Condvar::new(),
            on_vendor: Default::default(),
        });
        super::readiness::register_deferred(h, &d);
        Ok(d)
    }

    /// Records that every piece reached the vendor while the command was ready, so it
    /// completes by vendor work alone.
    pub fn mark_on_vendor(&self) {
        self.on_vendor
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// See [`Deferred::mark_on_vendor`].
    pub fn on_vendor(&self) -> bool {
        self.on_vendor.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The user event, for the application's wrapper (which owns the creation reference).
    pub fn user_event(&self) -> Inner<cl_event> {
        self.user.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pieces> {
        self.pieces.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records the vendor event of a piece that reached the vendor (retained here).
    pub fn piece(&self, e: cl_event) {
        retain(self.user.vt, e);
        let mut p = self.lock();
        let mut early = Vec::new();
        if p.first.is_none() {
            retain(self.user.vt, e);
            p.first = Some(e);
            early = std::mem::take(&mut p.early);
        }
        if let Some(old) = p.last.replace(e) {
            release(self.user.vt, old);
        }
        // Outside the lock: the vendor may run a callback at once, and the application's
        // callback may query this event.
        drop(p);
        for (kind, data) in early {
            self.watch_piece(e, kind, data as *mut c_void);
        }
    }

    /// Registers an application callback (`data` from `Callback::into_raw` for
    /// `event_notify`) for `CL_SUBMITTED` or `CL_RUNNING`: those states are the first
    /// piece's, so the callback goes on its vendor event, now or once it exists.
    pub fn watch_early(&self, kind: cl_int, data: *mut c_void) {
        let mut p = self.lock();
        let (first, done) = (p.first, p.done);
        if first.is_none() && !done {
            p.early.push((kind, data as usize));
            return;
        }
        // Outside the lock, as in `piece`.
        drop(p);
        match first {
            Some(e) => self.watch_piece(e, kind, data),
            // Failed before reaching the vendor: an error status is past every state.
            // SAFETY: a registration made for this trampoline, fired once here.
            None => unsafe {
                event_notify(self.user.h, status_of(self.user.vt, self.user.h), data)
            },
        }
    }

    fn watch_piece(&self, e: cl_event, kind: cl_int, data: *mut c_void) {
        let rc = match self.user.vt.clSetEventCallback {
            // SAFETY: the application's registration, moved onto the piece's vendor event;
            // the trampoline calls back with the application's own event.
            Some(f) => unsafe { f(e, kind, Some(event_notify), data) },
            None => CL_INVALID_OPERATION,
        };
        if rc != CL_SUCCESS {
            // SAFETY: refused, so the vendor will never fire it.
            unsafe { Callback::<Event, EventNotify>::discard(data) };
        }
    }

    /// Sets the user event, once: to `status` (CL_COMPLETE or a negative error).
    pub fn finish(&self, status: cl_int) {
        let mut p = self.lock();
        if p.done {
            return;
        }
        p.done = true;
        p.final_status = status.min(CL_COMPLETE as cl_int);
        let early = std::mem::take(&mut p.early);
        drop(p);
        self.progress.notify_all();
        for (_, data) in early {
            // Failed before any piece reached the vendor.
            // SAFETY: a registration made for this trampoline, fired once here.
            unsafe {
                event_notify(
                    self.user.h,
                    status.min(CL_COMPLETE as cl_int),
                    data as *mut c_void,
                )
            };
        }
        if let Some(f) = self.user.vt.clSetUserEventStatus {
            let h = self.user.h;
            if status < 0 {
                // Commands the submitters send behind this event must not meet the
                // failure between their look at it and their enqueue (see `failing`).
                // SAFETY: our retained user event; set exactly once.
                super::failing::set_failed(h, || unsafe { f(h, status) });
            } else {
                // SAFETY: as above.
                unsafe { f(h, CL_COMPLETE as cl_int) };
            }
        }
    }

    /// Completes the event from its pieces once that is known before the vendor's
    /// callback has run (clFinish, status queries): the final piece is complete, or the
    /// latest piece failed (a failed slice fails the whole command). A complete piece
    /// that is not the final one says nothing: later slices may not even exist yet.
    pub fn settle(&self) -> bool {
        // Asked under the lock: `piece` releases the previous last piece when it replaces
        // it, so outside the lock the event could be gone.
        let (status, is_final) = {
            let p = self.lock();
            (p.last.map(|e| status_of(self.user.vt, e)), p.last_is_final)
        };
        match status {
            Some(s) if s < 0 || (s == CL_COMPLETE as cl_int && is_final) => {
                self.finish(s);
                true
            }
            _ => false,
        }
    }

    pub fn is_done(&self) -> bool {
        self.lock().done
    }

    /// Blocks until the command is complete, and sets the user event (`clWaitForEvents`).
    ///
    /// Waits on the final piece's vendor event itself rather than on the user event: the
    /// user event is set from the vendor's completion callback, which NVIDIA's driver
    /// delivers milliseconds late, so a wait on it would add that to every deferred
    /// command's latency.
    pub fn wait(&self) {
        let mut p = self.lock();
        loop {
            if p.done {
                return;
            }
            if let (true, Some(last)) = (p.last_is_final, p.last) {
                // `last` stays retained by this event until it is dropped, and `self` is
                // alive for the whole call.
                drop(p);
                if let Some(f) = self.user.vt.clWaitForEvents {
                    // SAFETY: one retained vendor event.
                    unsafe { f(1, &last) };
                }
                self.finish(status_of(self.user.vt, last).min(CL_COMPLETE as cl_int));
                return;
            }
            // Still in software: the submitter says when the final piece exists (both
            // are changed and checked under the lock). The timeout is only a safety net.
            p = self
                .progress
                .wait_timeout(p, Duration::from_millis(20))
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }

    /// `CL_EVENT_COMMAND_EXECUTION_STATUS`: the user event's once set; before, the first
    /// piece's (submitted, running), or queued while nothing reached the vendor.
    pub fn status(&self) -> cl_int {
        if !self.is_done() {
            self.settle();
        }
        let p = self.lock();
        if p.done {
            return p.final_status;
        }
        match p.first {
            Some(e) => status_of(self.user.vt, e).max(CL_RUNNING as cl_int),
            None => CL_QUEUED as cl_int,
        }
    }

    /// `CL_EVENT_COMMAND_TYPE`: the vendor's answer for the first piece once it exists (a
    /// vendor may use its own values), else the application's command's type.
    pub fn command_type(&self) -> cl_command_type {
        let Some(e) = self.lock().first else {
            return self.kind;
        };
        let mut t: cl_command_type = self.kind;
        if let Some(f) = self.user.vt.clGetEventInfo {
            // SAFETY: a cl_command_type-sized answer into a local.
            unsafe {
                f(
                    e,
                    CL_EVENT_COMMAND_TYPE,
                    std::mem::size_of::<cl_command_type>(),
                    &mut t as *mut cl_command_type as *mut c_void,
                    std::ptr::null_mut(),
                )
            };
        }
        t
    }

    /// Profiling: START from the first piece, END and COMPLETE from the last; QUEUED is the
    /// application's enqueue, SUBMIT the first piece's.
    pub fn profiling(&self, what: cl_profiling_info) -> CLResult<u64> {
        if !self.profiling {
            // "CL_PROFILING_INFO_NOT_AVAILABLE if the CL_QUEUE_PROFILING_ENABLE flag is not
            // set for the command-queue"
            return Err(CL_PROFILING_INFO_NOT_AVAILABLE);
        }
        // "CL_PROFILING_INFO_NOT_AVAILABLE if ... the execution status of the command
        // identified by event is not CL_COMPLETE." (The spec's answer on every vendor: an
        // earlier piece's times are not the command's; NVIDIA's bare driver says 0.)
        if !self.is_done() && !self.settle() {
            return Err(CL_PROFILING_INFO_NOT_AVAILABLE);
        }
        let (first, last) = {
            let p = self.lock();
            (p.first, p.last)
        };
        let (first, last) = first.zip(last).ok_or(CL_PROFILING_INFO_NOT_AVAILABLE)?;
        let vt = self.user.vt;
        match what {
            CL_PROFILING_COMMAND_QUEUED => {
                let first_queued = profiling_of(vt, first, CL_PROFILING_COMMAND_QUEUED)?;
                Ok(self.queued_ns.map_or(first_queued, |q| q.min(first_queued)))
            }
            CL_PROFILING_COMMAND_SUBMIT => profiling_of(vt, first, CL_PROFILING_COMMAND_SUBMIT),
            CL_PROFILING_COMMAND_START => profiling_of(vt, first, CL_PROFILING_COMMAND_START),
            CL_PROFILING_COMMAND_END => profiling_of(vt, last, CL_PROFILING_COMMAND_END),
            CL_PROFILING_COMMAND_COMPLETE => profiling_of(vt, last, CL_PROFILING_COMMAND_COMPLETE)
                .or_else(|_| profiling_of(vt, last, CL_PROFILING_COMMAND_END)),
            // "CL_INVALID_VALUE if param_name is not valid."
            _ => Err(CL_INVALID_VALUE),
        }
    }
}

impl Drop for Deferred {
    fn drop(&mut self) {
        super::readiness::forget_deferred(self.user.h);
        let p = self.pieces.get_mut().unwrap_or_else(|e| e.into_inner());
        for (_, data) in p.early.drain(..) {
            // SAFETY: never given to the vendor.
            unsafe { Callback::<Event, EventNotify>::discard(data as *mut c_void) };
        }
        for e in [p.first.take(), p.last.take()].into_iter().flatten() {
            release(self.user.vt, e);
        }
        if !p.done {
            if let Some(f) = self.user.vt.clSetUserEventStatus {
                let h = self.user.h;
                if p.last_is_final && !p.vendor_waits {
                    // Reached the vendor whole, and nothing can observe the user event any
                    // more (the application released its event; no wait list or callback
                    // holds it): set only so that the vendor frees it.
                    // SAFETY: our retained user event, not yet set.
                    unsafe { f(h, CL_COMPLETE as cl_int) };
                } else {
                    // Never left unset: waiters would hang forever.
                    // SAFETY: our retained user event, not yet set.
                    super::failing::set_failed(h, || unsafe { f(h, CL_OUT_OF_RESOURCES) });
                }
            }
        }
        release(self.user.vt, self.user.h);
    }
}

/// Vendor callback on a command's last piece: sets the application's event.
///
/// # Safety
/// Only the vendor calls this, with `data` from `Arc::into_raw` of a `Deferred`.
pub unsafe extern "C" fn on_last_piece(_e: cl_event, status: cl_int, data: *mut c_void) {
    let r = std::panic::catch_unwind(|| {
        // SAFETY: `data` is the Arc reference given to the vendor with this callback.
        let d = unsafe { Arc::from_raw(data as *const Deferred) };
        d.finish(status);
    });
    if r.is_err() {
        tracing::error!("softpreempt: internal error completing a deferred event (suppressed)");
    }
}

/// Records `last` as `d`'s final piece: its completion is the command's. The user event
/// is set from a vendor callback on it only if something waits for it through the vendor
/// (see `Pieces::vendor_waits`).
///
/// Why not always: NVIDIA's driver (580, H200) makes every later enqueue of the process
/// about 2 µs dearer once it has been asked for one completion callback, whether or not
/// the command asked for an event (`docs/results/v34/gpu/lc.c`, `PRE=cb`: 7.0-7.9 µs a
/// launch against 4.8-5.8). pyopencl asks for an event on every enqueue, so a lone
/// high-priority process paid that from its first deferred launch on: 3-4.6 µs a launch
/// (`benches/kernel_cost.py`; docs/benchmarks.md, session 55).
pub fn complete_on(d: &Arc<Deferred>, last: cl_event) {
    let watch = {
        let mut p = d.lock();
        // `piece(last)` came first: `last` is retained as `p.last`.
        p.last_is_final = p.last == Some(last);
        p.to_watch()
    };
    d.progress.notify_all();
    if let Some(last) = watch {
        watch_final(d, last);
    }
}

impl Deferred {
    /// Something is about to wait for the user event through the vendor (it goes into a
    /// vendor wait list, or the application registers a completion callback on it): from
    /// the final piece on, a vendor callback sets it.
    pub fn needs_vendor(self: &Arc<Self>) {
        let watch = {
            let mut p = self.lock();
            p.vendor_waits = true;
            p.to_watch()
        };
        if let Some(last) = watch {
            watch_final(self, last);
        }
    }
}

/// Asks the vendor to set `d` when `last`, its final piece (retained by `d`), completes.
fn watch_final(d: &Arc<Deferred>, last: cl_event) {
    tracing::debug!("a deferred command's completion is watched by a vendor callback");
    let vt = d.user.vt;
    let data = Arc::into_raw(d.clone()) as *mut c_void;
    let rc = match vt.clSetEventCallback {
        // SAFETY: registering our trampoline with an Arc reference it takes back.
        Some(f) => unsafe { f(last, CL_COMPLETE as cl_int, Some(on_last_piece), data) },
        None => CL_INVALID_OPERATION,
    };
    if rc != CL_SUCCESS {
        // SAFETY: the vendor refused the callback, so the reference is ours again.
        drop(unsafe { Arc::from_raw(data as *const Deferred) });
        tracing::error!("softpreempt: cannot watch a deferred command ({rc}); completing it at the next clFinish or query");
    }
}
