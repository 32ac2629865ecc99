//! How an enqueue reaches the vendor on a managed queue (see `core::managed`): straight
//! through, after draining the queue's software FIFO, or deferred into that FIFO.
//!
//! Only kernel launches and markers/barriers are deferred. Everything the vendor would
//! reject synchronously is either checked here first (with the spec's error) or makes the
//! command go direct, so the application gets the vendor's own error from the call.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::core::cl::*;
use crate::core::error::CLResult;
use crate::core::events::{InnerEvents, OutEvent};
use crate::core::forward::Inner;
use crate::core::handle::{new_obj, Obj};
use crate::core::managed::{self, launch, Call, Command, Deferred, Managed, Retained, Work};
use crate::core::objects::{Event, Kernel, Queue};

/// The queue's managed side, when a new command must go through its FIFO.
pub fn deferring(q: &Obj<Queue>) -> Option<&Arc<Managed>> {
    q.get().managed.as_ref().filter(|m| m.must_defer())
}

/// The queue's managed side, when a kernel launch must go through its FIFO or may (a long
/// one is cut into pieces even while the queue need not defer, rule 6: [`launch`]
/// decides).
pub fn deferring_launch<'q>(
    q: &'q Obj<Queue>,
    k: &Kernel,
    work_dim: cl_uint,
    global: *const usize,
    local: *const usize,
) -> Option<&'q Arc<Managed>> {
    let m = q.get().managed.as_ref()?;
    if m.must_defer() {
        return Some(m);
    }
    let never_cut = match k.sliceable() {
        crate::core::objects::Sliceable::No(_) => true,
        // A kernel that depends on its work-group size is cut only with a known local size
        // (`launch::may_slice`): the application's, or its required one. Without either,
        // none of the checks below (a few vendor queries and a prediction, each launch)
        // could change where it goes.
        crate::core::objects::Sliceable::Yes { null_local } => {
            !null_local && local.is_null() && !launch::has_required_local(k, &m.device)
        }
    };
    if !m.in_order || never_cut {
        // Never cut: nothing to decide.
        return None;
    }
    // Alone, a launch of a kernel whose recent launches were short, and which is no
    // larger than half a piece at their cost, goes straight on, without the checks below
    // (a few vendor queries, costly next to a short launch).
    let per_item = f64::from_bits(k.class.short_ns_per_item.load(Ordering::Relaxed));
    let known_short = per_item > 0.0
        && launch_items(work_dim, global)
            .is_some_and(|n| n as f64 * per_item <= m.piece_ns() as f64 / 2.0);
    (m.cuts_alone(&k.class) && !known_short).then_some(m)
}

/// Counts a launch of `k` that goes straight to the vendor on managed queue `m` (`claimed`:
/// under the direct budget), for the profile and the trace; two atomic loads when neither
/// is on.
#[inline]
pub fn count_direct(m: &Managed, k: &Kernel, claimed: bool) {
    if crate::trace::profile::enabled() {
        crate::trace::profile::direct(&k.class.name, &m.priority, claimed, k.records_args());
    }
    if crate::trace::enabled() {
        crate::trace::direct(&m.label, &k.class.name, crate::trace::now_ns(), claimed);
    }
}

/// Work-items of a launch, read from the application's array (`None`: unreadable).
fn launch_items(work_dim: cl_uint, global: *const usize) -> Option<u64> {
    if !(1..=3).contains(&work_dim) || global.is_null() {
        return None;
    }
    let g = crate::core::args::slice(global, work_dim as usize).ok()?;
    Some(g.iter().map(|&x| x as u64).product())
}

/// Sends one command straight to the vendor on a managed queue: earlier deferred commands
/// first reach the vendor (in-order semantics), and while a lower priority is busy on the
/// device the command raises demand until it is seen complete, so that the lower one
/// yields until then: seen by the application's synchronisation ([`synced`]), or, for a
/// lower queue's short launch under its direct budget and for a command that is not
/// ready, on a vendor event.
///
/// `claim` is the budget a short launch claimed to go direct ([`Launch::Direct`]); it is
/// given back when the command completes (or at once if the vendor refuses it).
pub fn direct<T>(
    m: &Arc<Managed>,
    q: &Obj<Queue>,
    wait: InnerEvents,
    event: *mut cl_event,
    claim: u64,
    call: impl FnOnce(&Inner<cl_command_queue>, cl_uint, *const cl_event, *mut cl_event) -> CLResult<T>,
) -> CLResult<T> {
    m.drain();
    let mut out = OutEvent::new(event);
    let ready = m.ready(wait.as_slice());
    let watch = m.direct_submitted(ready, claim);
    if ready {
        match watch {
            None => {
                let r = call(&q.get().inner, wait.len(), wait.ptr(), out.ptr())?;
                out.publish(q);
                return Ok(r);
            }
            Some(w) if !w.claimed() => return synced(m, q, wait, out, w, call),
            Some(_) => {}
        }
    }
    // A watched command's completion is observed on its vendor event, and an unready one
    // is remembered by it: ask for one even when the application did not. A lower
    // priority's short launch is watched by a barrier's event after it instead: its own
    // would delay NVIDIA's hand-over of the device to the higher priority (`completion`).
    let by_barrier = event.is_null()
        && ready
        && watch.as_ref().is_some_and(|w| w.claimed())
        && !managed::completion::own_event(m, false);
    let mut local: cl_event = std::ptr::null_mut();
    let ptr = if by_barrier {
        std::ptr::null_mut()
    } else if event.is_null() {
        &mut local as *mut cl_event
    } else {
        out.ptr()
    };
    let r = call(&q.get().inner, wait.len(), wait.ptr(), ptr);
    let vt = q.get().inner.vt;
    if by_barrier && r.is_ok() {
        // Untracked if the vendor refuses even that: its claim ends below, at once.
        local = managed::completion::after(vt, q.get().inner.h).unwrap_or(std::ptr::null_mut());
    }
    let ev = if event.is_null() { local } else { out.inner };
    if !ready && r.is_ok() && !ev.is_null() {
        m.note_unready(ev);
    }
    if let Some(watch) = watch {
        if r.is_ok() {
            watch.on_vendor();
        }
        let watched = r.is_ok() && !ev.is_null() && {
            // Only the application's own event can be seen complete by it.
            if !event.is_null() {
                watch.set_event(ev);
            }
            let data = Arc::into_raw(watch.clone()) as *mut std::ffi::c_void;
            match vt.clSetEventCallback {
                Some(f)
                    // SAFETY: our trampoline, with a Watch reference it takes back.
                    if unsafe {
                        f(
                            ev,
                            CL_COMPLETE as cl_int,
                            Some(managed::on_direct_done),
                            data,
                        )
                    } == CL_SUCCESS =>
                {
                    true
                }
                _ => {
                    // SAFETY: the vendor refused it: the reference is ours again.
                    drop(unsafe { Arc::from_raw(data as *const managed::Watch) });
                    false
                }
            }
        };
        // Unwatched, or already complete (a blocking command): its demand ends now.
        if !watched || managed::is_complete(vt, ev) {
            watch.complete();
        }
    }
    if !local.is_null() {
        if let Some(f) = vt.clReleaseEvent {
            // SAFETY: the event the vendor made for us alone.
            unsafe { f(local) };
        }
    }
    let r = r?;
    out.publish(q);
    Ok(r)
}

thread_local! {
    /// The command this thread is sending returns only once complete (see [`blocking`]).
    static BLOCKING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f`, which sends one command that returns only once it is complete (a blocking
/// transfer, waited for as the application made it or apart): a direct command it sends
/// ends its demand on return, tracked by nothing else ([`synced`]).
pub fn blocking<T>(f: impl FnOnce() -> T) -> T {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            BLOCKING.with(|b| b.set(self.0));
        }
    }
    let _reset = Reset(BLOCKING.with(|b| b.replace(true)));
    f()
}

/// [`direct`] for a ready command that raised demand ahead of a busy lower client: sent as
/// the application made it, with no event, callback or query of the layer's (issue 24).
/// Its demand ends when it returns, if it blocks; else when the application synchronises
/// with it or a later command, or when its queue has done nothing for a while (the bound
/// of `managed::unsynced`).
#[cold]
fn synced<T>(
    m: &Arc<Managed>,
    q: &Obj<Queue>,
    wait: InnerEvents,
    mut out: OutEvent,
    watch: Arc<managed::Watch>,
    call: impl FnOnce(&Inner<cl_command_queue>, cl_uint, *const cl_event, *mut cl_event) -> CLResult<T>,
) -> CLResult<T> {
    let r = match call(&q.get().inner, wait.len(), wait.ptr(), out.ptr()) {
        Ok(r) => r,
        Err(e) => {
            watch.complete();
            return Err(e);
        }
    };
    if !out.inner.is_null() {
        // The application's own event: its wait, poll or callback ends the demand.
        watch.set_event(out.inner);
    }
    watch.on_vendor();
    if BLOCKING.with(|b| b.get()) {
        watch.complete();
    } else {
        m.leave_to_sync();
    }
    out.publish(q);
    Ok(r)
}

/// A deferred command's wait list: checked as the vendor would check it at once, and
/// retained until the command reaches the vendor.
fn wait_list(q: &Obj<Queue>, n: cl_uint, list: *const cl_event) -> CLResult<Vec<Retained>> {
    let inner = InnerEvents::wait_list(n, list)?;
    if n > 0 {
        for &e in crate::core::args::slice(list, n as usize)? {
            // "CL_INVALID_CONTEXT if context associated with command_queue and events in
            // event_wait_list are not the same."
            if Obj::<Event>::check(e)?.get().context != q.get().context {
                return Err(CL_INVALID_CONTEXT);
            }
        }
    }
    let vt = q.get().inner.vt;
    Ok(inner
        .as_slice()
        .iter()
        .map(|&e| Retained::new(e, vt.clRetainEvent, vt.clReleaseEvent))
        .collect())
}

/// The application's event for a deferred command (a vendor user event), when it asked.
fn event_for(
    q: &Obj<Queue>,
    m: &Managed,
    event: *mut cl_event,
    kind: cl_command_type,
) -> CLResult<Option<Arc<Deferred>>> {
    if event.is_null() {
        return Ok(None);
    }
    let ctx = &q.get().context.get().inner;
    Deferred::new(ctx, kind, m.profiling, m.queued_time()).map(Some)
}

/// Gives the application its event for a deferred command.
fn publish(q: &Obj<Queue>, event: *mut cl_event, d: Option<Arc<Deferred>>) {
    if let Some(d) = d {
        let e = new_obj(Event {
            inner: d.user_event(),
            context: q.get().context.clone(),
            queue: Some(q.hold()),
            deferred: Some(d),
        });
        crate::core::args::set_out(event, e.handle());
    }
}

/// The arrays of `clEnqueueNDRangeKernel` (all NULL-able as the application passed them).
pub struct Range {
    pub work_dim: cl_uint,
    pub offset: *const usize,
    pub global: *const usize,
    pub local: *const usize,
}

/// Where [`launch`] put a kernel launch.
pub enum Launch {
    /// In the FIFO.
    Deferred,
    /// To go straight to the vendor, with the budget it claimed (0: none; the vendor
    /// would report an error at once, or cannot snapshot the kernel).
    Direct(u64),
}

/// Defers a kernel launch, if it must be.
pub fn launch(
    m: &Arc<Managed>,
    q: &Obj<Queue>,
    k: &Kernel,
    kind: cl_command_type,
    range: Range,
    (n, list, event): (cl_uint, *const cl_event, *mut cl_event),
) -> CLResult<Launch> {
    // "CL_INVALID_KERNEL_ARGS if the kernel argument values have not been specified":
    // said synchronously by the entry point (`enqueue::kernel`) before it gets here; a
    // launch that got here without is the vendor's to judge, directly.
    if !k.args_set.all() {
        return Ok(Launch::Direct(0));
    }
    let Some(geo) = launch::geometry(
        k,
        &m.device,
        range.work_dim,
        range.offset,
        range.global,
        range.local,
    ) else {
        return Ok(Launch::Direct(0));
    };
    let predicted = launch::predicted_ns(k, &m.device, &geo);
    let pred = predicted.ns;
    managed::yielding::note_prediction(m, &k.class, pred);
    // A direct launch is not timed, so sending a kernel's launches straight to the vendor
    // ends what they teach: only a model settled by a second launch may do it. The first
    // launch alone may have been cheap (fewer iterations), cold, or cut on PoCL into small
    // first pieces that ran several times faster per group than its launches do; a
    // fresh-clone CI run so sent a 60 ms kernel's 23 launches after its first one direct
    // (`tests/managed_idle_higher.rs`; `tests/managed_short.rs` shows the cheap case).
    let settled = pred.filter(|_| predicted.settled);
    if !m.must_defer() {
        // Nothing forces the FIFO (rule 6): only a launch that may be cut and is longer
        // than a piece, or not measured enough yet (its first launches teach the model),
        // goes through it, to be cut into pieces; the rest goes straight to the vendor.
        if !launch::may_slice(k, &geo, m.in_order) || settled.is_some_and(|p| p <= m.piece_ns()) {
            if let Some(p) = pred {
                let items: usize = geo.global[..geo.work_dim as usize].iter().product();
                let per_item = p as f64 / items.max(1) as f64;
                k.class
                    .short_ns_per_item
                    .store(per_item.to_bits(), Ordering::Relaxed);
            }
            return Ok(Launch::Direct(0));
        }
        // Cut alone: on a GPU, one of the launches that learn the kernel's cost.
        let learned = &k.class.learned_alone;
        if learned.load(Ordering::Relaxed) < managed::LEARN_ALONE {
            learned.fetch_add(1, Ordering::Relaxed);
        }
    } else if let Some(pred) = settled {
        // A launch known to be short goes direct while the budget allows (rule 6).
        if m.claim_direct(pred.max(1)) {
            return Ok(Launch::Direct(pred.max(1)));
        }
    }
    let wait = wait_list(q, n, list)?;
    let Some(clone) = crate::calltime!("defer.snapshot", launch::snapshot(k)) else {
        crate::warn_once!(
            "no-clone-kernel",
            "softpreempt: the vendor cannot clone kernels (clCloneKernel); launches are not deferred"
        );
        return Ok(Launch::Direct(0));
    };
    let keep = launch::keep_args(k);
    let d = event_for(q, m, event, kind)?;
    let own_event = managed::completion::own_event(m, d.is_some());
    let yielding = managed::yielding::prepare(m, k, &k.program, &geo, pred, own_event);
    let l = launch::build(k, &m.device, geo, clone, m.in_order, yielding, own_event);
    m.push(Command {
        work: Work::Launch(l),
        wait,
        keep,
        event: d.clone(),
    });
    publish(q, event, d);
    Ok(Launch::Deferred)
}

/// Defers a command that is one vendor call with a wait list (markers, barriers).
pub fn call(
    m: &Arc<Managed>,
    q: &Obj<Queue>,
    kind: cl_command_type,
    (n, list, event): (cl_uint, *const cl_event, *mut cl_event),
    call: Call,
) -> CLResult<()> {
    let wait = wait_list(q, n, list)?;
    let d = event_for(q, m, event, kind)?;
    m.push(Command {
        work: Work::Call(call),
        wait,
        keep: Vec::new(),
        event: d.clone(),
    });
    publish(q, event, d);
    Ok(())
}
