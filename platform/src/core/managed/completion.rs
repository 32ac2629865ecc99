//! How the layer learns that a kernel it sent to the vendor has completed, without asking
//! for the kernel's own event.
//!
//! On NVIDIA's driver an event on a long kernel delays the driver's hand-over of the
//! device to another process. Measured on an H100 (driver 580, `scripts/gpu/hpevent.c`,
//! `docs/benchmarks.md` session 38): a second process's 0.45 ms kernel, every 20 ms next to
//! 130 ms kernels launched back to back, took p50 0.69-0.71 ms when those kernels had no
//! event, and 1.63-1.64 ms when they had one (waited for or not), when a marker after them
//! had one, or a one-item kernel after them. A barrier after them with an event: 0.69 ms.
//! The submitter tracked every piece by its own event, so a low-priority application
//! that asked for none (the demo's LP) had the higher priority wait about 1 ms longer for
//! the device than on the bare driver, every request.
//!
//! So a launch is enqueued without an event and followed by a barrier whose event
//! completes when the launch does, except where that would change what the application
//! sees ([`own_event`]).
//!
//! What the driver does by itself then decides what the layer can gain on a GPU. A launch
//! with an event of its own (as the application asked) is handed over late
//! (`submitter::GPU_HANDOVER_NS`): slices and yields shorter than that let a higher
//! priority in sooner. One tracked by a barrier is handed over in about 0.2 ms, which
//! neither a relaunched slice nor a yield can beat: each new submission in the low context
//! just before the higher priority's launch delays the hand-over by about a time slice
//! (the demo's Mandelbrot LP cut into 1.2-2 ms slices: HP p99 2.85 ms against bare's 0.94,
//! sent whole: 0.87), and a yield costs at least what the hand-over does
//! (`yielding::driver_hands_over_as_soon`).

use std::ptr::null_mut;

use super::Managed;
use crate::core::cl::*;

/// Whether a launch on `m` carries a vendor event of its own, `app_event`: the
/// application asked for its event. On a queue with profiling on, that event's times come
/// from the pieces' own events; on an out-of-order queue a barrier would order commands
/// the application left unordered. Everywhere else a barrier's event tracks it.
pub fn own_event(m: &Managed, app_event: bool) -> bool {
    !m.in_order || (m.profiling && app_event)
}

/// Whether the driver hands the device over to another process promptly (about 0.2 ms on
/// NVIDIA) from a launch on a device of this kind tracked this way: on a GPU, one tracked by
/// a barrier. Neither a slice nor a yield beats that, so such launches are neither sliced
/// (`submitter`) nor made yielding launches (`yielding::driver_hands_over_as_soon`). From
/// a launch with its own event the driver hands over late, and on a CPU device the
/// operating system and the layer share the cores without any hand-over.
pub fn prompt_handover(gpu: bool, own_event: bool) -> bool {
    gpu && !own_event
}

/// Enqueues a launch with `enqueue`, which gets where to put the launch's own vendor event
/// (null when it is to have none), and returns the event that tracks it: its own if
/// `own_event`, else a barrier's after it ([`after`]).
pub fn tracked(
    vt: &cl_icd_dispatch,
    q: cl_command_queue,
    own_event: bool,
    enqueue: impl FnOnce(*mut cl_event) -> cl_int,
) -> Result<cl_event, cl_int> {
    let mut ev: cl_event = null_mut();
    let rc = enqueue(if own_event { &mut ev } else { null_mut() });
    if rc != CL_SUCCESS {
        return Err(rc);
    }
    if own_event {
        Ok(ev)
    } else {
        after(vt, q)
    }
}

/// An event that completes when every command enqueued on `q` so far has: a barrier's,
/// or if the vendor refuses one, a marker's (which costs the hand-over above, but still
/// tracks the launch).
pub fn after(vt: &cl_icd_dispatch, q: cl_command_queue) -> Result<cl_event, cl_int> {
    let mut ev: cl_event = null_mut();
    let mut rc = match vt.clEnqueueBarrierWithWaitList {
        // SAFETY: the vendor's own queue; no wait list; `ev` outlives the call.
        Some(f) => unsafe { f(q, 0, std::ptr::null(), &mut ev) },
        None => CL_INVALID_OPERATION,
    };
    if rc != CL_SUCCESS {
        rc = match vt.clEnqueueMarkerWithWaitList {
            // SAFETY: as above.
            Some(f) => unsafe { f(q, 0, std::ptr::null(), &mut ev) },
            None => rc,
        };
    }
    if rc != CL_SUCCESS || ev.is_null() {
        tracing::error!("softpreempt: cannot track a launch's completion ({rc})");
        return Err(if rc == CL_SUCCESS {
            CL_OUT_OF_RESOURCES
        } else {
            rc
        });
    }
    Ok(ev)
}
