//! Event entry points.

use crate::core::cl::*;
use std::ffi::c_void;

use crate::core::args::{bytes_of, write_info};
use crate::core::callback::{event_notify, Callback, EventNotify};
use crate::core::error::CLResult;
use crate::core::events::{InnerEvents, Waiter};
use crate::core::forward::fetch_info;
use crate::core::handle::{new_obj, Obj};
use crate::core::objects::{Context, Event};
use crate::core::refcount;
use crate::{vcreate, vtry};

pub fn wait_for_events(num_events: cl_uint, event_list: *const cl_event) -> CLResult<()> {
    // "CL_INVALID_VALUE if num_events is zero or event_list is NULL."
    // "CL_INVALID_EVENT if event objects specified in event_list are not valid event
    // objects."
    let list = InnerEvents::event_list(num_events, event_list, Waiter::Host)?;
    // "CL_INVALID_CONTEXT if events specified in event_list do not belong to the same
    // context." Checked here, on our wrappers: some vendors (NVIDIA) wait forever on such a
    // list instead, and events of two platforms must never reach one vendor.
    let events = crate::core::args::slice(event_list, num_events as usize)?
        .iter()
        .map(|&e| Obj::<Event>::check(e).map(|o| o.get()))
        .collect::<CLResult<Vec<&Event>>>()?;
    let first = events[0];
    if events.iter().any(|e| e.context != first.context) {
        return Err(CL_INVALID_CONTEXT);
    }
    let deferred = || events.iter().filter_map(|e| e.deferred.as_ref());
    // Deferred commands are waited for on their final vendor piece first (see
    // `Deferred::wait`); their user events are set by then.
    deferred().for_each(|d| d.wait());
    let vt = first.inner.vt;
    let _syncing: Vec<_> = events
        .iter()
        .filter_map(|e| e.queue.as_ref().and_then(|q| q.get().managed.as_ref()))
        .map(|m| m.syncing())
        .collect();
    vtry!(vt, clWaitForEvents(list.len(), list.ptr()))?;
    // Watched direct commands end their demand now, not at the vendor's (late) callback.
    for e in &events {
        if let Some(m) = e.queue.as_ref().and_then(|q| q.get().managed.as_ref()) {
            m.seen_complete(e.inner.h);
        }
    }
    // "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST if the execution status of any of the
    // events in event_list is a negative integer value." A deferred command's event is a
    // vendor user event inside, for which a vendor may not say so (NVIDIA does not).
    if deferred().any(|d| d.status() < 0) {
        return Err(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);
    }
    Ok(())
}

pub fn get_event_info(
    event: cl_event,
    param_name: cl_event_info,
    param_value_size: usize,
    param_value: *mut c_void,
    param_value_size_ret: *mut usize,
) -> CLResult<()> {
    // "CL_INVALID_EVENT if event is a not a valid event object."
    let e = Obj::<Event>::check(event)?.get();
    let vendor = || {
        fetch_info(|s, v, r| match e.inner.vt.clGetEventInfo {
            // SAFETY: the vendor's query on its own event, buffers sized by fetch_info.
            Some(f) => unsafe { f(e.inner.h, param_name, s, v, r) },
            None => CL_INVALID_OPERATION,
        })
    };
    let answer = match param_name {
        // "Return the command-queue associated with event. For user event objects, a NULL
        // value is returned."
        CL_EVENT_COMMAND_QUEUE => bytes_of(
            &e.queue
                .as_ref()
                .map_or(std::ptr::null_mut(), |q| q.handle()),
        )
        .to_vec(),
        CL_EVENT_CONTEXT => bytes_of(&e.context.handle()).to_vec(),
        // A deferred command's inner event is a vendor user event standing in for it.
        CL_EVENT_COMMAND_TYPE if e.deferred.is_some() => {
            bytes_of(&e.deferred.as_ref().map_or(0, |d| d.command_type())).to_vec()
        }
        CL_EVENT_COMMAND_EXECUTION_STATUS if e.deferred.is_some() => {
            bytes_of(&e.deferred.as_ref().map_or(0, |d| d.status())).to_vec()
        }
        // The vendor's count includes the reference our record of the command holds.
        CL_EVENT_REFERENCE_COUNT if e.deferred.is_some() => {
            let b = vendor()?;
            let n = b
                .get(..4)
                .map_or(1, |x| cl_uint::from_ne_bytes([x[0], x[1], x[2], x[3]]));
            bytes_of(&n.saturating_sub(1)).to_vec()
        }
        CL_EVENT_COMMAND_EXECUTION_STATUS => {
            let b = vendor()?;
            // A poll that sees a watched direct command complete ends its demand.
            let complete = b.get(..4).is_some_and(|x| {
                cl_int::from_ne_bytes([x[0], x[1], x[2], x[3]]) <= CL_COMPLETE as cl_int
            });
            if let Some(m) = e.queue.as_ref().and_then(|q| q.get().managed.as_ref()) {
                if complete {
                    m.seen_complete(e.inner.h);
                } else {
                    m.polled_incomplete();
                }
            }
            b
        }
        _ => vendor()?,
    };
    write_info(param_value_size, param_value, param_value_size_ret, &answer)
}

pub fn retain_event(event: cl_event) -> CLResult<()> {
    refcount::retain::<Event>(event, |e| vtry!(e.inner.vt, clRetainEvent(e.inner.h)))
}

pub fn release_event(event: cl_event) -> CLResult<()> {
    refcount::release::<Event>(event, |e| vtry!(e.inner.vt, clReleaseEvent(e.inner.h)))
}

pub fn get_event_profiling_info(
    event: cl_event,
    param_name: cl_profiling_info,
    param_value_size: usize,
    param_value: *mut c_void,
    param_value_size_ret: *mut usize,
) -> CLResult<()> {
    // "CL_INVALID_EVENT if event is a not a valid event object."
    let e = Obj::<Event>::check(event)?.get();
    if let Some(d) = &e.deferred {
        // "CL_INVALID_VALUE if param_name is not valid, or if size in bytes specified by
        // param_value_size is < size of return type ... and param_value is not NULL."
        let v: cl_ulong = d.profiling(param_name)?;
        return write_info(
            param_value_size,
            param_value,
            param_value_size_ret,
            bytes_of(&v),
        );
    }
    // Profiling values are plain numbers: the vendor writes them straight to the app.
    vtry!(
        e.inner.vt,
        clGetEventProfilingInfo(
            e.inner.h,
            param_name,
            param_value_size,
            param_value,
            param_value_size_ret
        )
    )
}

pub fn set_event_callback(
    event: cl_event,
    command_exec_callback_type: cl_int,
    pfn_notify: Option<EventNotify>,
    user_data: *mut c_void,
) -> CLResult<()> {
    // "CL_INVALID_EVENT if event is not a valid event object."
    let o = Obj::<Event>::check(event)?;
    // "CL_INVALID_VALUE if pfn_event_notify is NULL or if command_exec_callback_type is
    // not CL_SUBMITTED, CL_RUNNING, or CL_COMPLETE." (the type is the vendor's to check)
    let f = pfn_notify.ok_or(CL_INVALID_VALUE)?;
    let data = Callback::<Event, EventNotify>::into_raw(o.hold(), f, user_data);
    let e = o.get();
    if let Some(d) = &e.deferred {
        if command_exec_callback_type == CL_SUBMITTED as cl_int
            || command_exec_callback_type == CL_RUNNING as cl_int
        {
            d.watch_early(command_exec_callback_type, data);
            return Ok(());
        }
        // A completion callback on the user event: the vendor must set it.
        d.needs_vendor();
    }
    let r = vtry!(
        e.inner.vt,
        clSetEventCallback(
            e.inner.h,
            command_exec_callback_type,
            Some(event_notify),
            data
        )
    );
    if r.is_err() {
        // SAFETY: the vendor refused, so it will never call back with `data`.
        unsafe { Callback::<Event, EventNotify>::discard(data) };
    }
    r
}

pub fn create_user_event(context: cl_context) -> CLResult<cl_event> {
    // "CL_INVALID_CONTEXT if context is not a valid context."
    let c = Obj::<Context>::check(context)?;
    let inner = c.get().inner.child(vcreate!(
        c.get().inner.vt,
        clCreateUserEvent(c.get().inner.h)
    )?);
    Ok(new_obj(Event {
        inner,
        context: c.hold(),
        queue: None,
        deferred: None,
    })
    .handle())
}

pub fn set_user_event_status(event: cl_event, execution_status: cl_int) -> CLResult<()> {
    // "CL_INVALID_EVENT if event is not a valid user event object." (user or not is the
    // vendor's to check; a deferred command's event is a vendor user event inside, but
    // not to the application)
    let e = Obj::<Event>::check(event)?.get();
    if e.deferred.is_some() {
        return Err(CL_INVALID_EVENT);
    }
    let set = || {
        vtry!(
            e.inner.vt,
            clSetUserEventStatus(e.inner.h, execution_status)
        )
    };
    if execution_status < 0 {
        // A submitter sending a command that waits on this event must see the failure
        // before its enqueue, or enqueue before it (see `core::managed::failing`).
        return crate::core::managed::failing::set_failed(e.inner.h, set);
    }
    set()
}
