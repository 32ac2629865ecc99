//! The two things every enqueue does with events: unwrap the application's wait list and
//! wrap the vendor's returned event.

use crate::core::cl::*;

use super::error::CLResult;
use super::handle::{new_obj, Obj};
use super::objects::{Event, Queue};

/// Checks a wait list and returns the inner events.
///
/// "CL_INVALID_EVENT_WAIT_LIST if event_wait_list is NULL and num_events_in_wait_list > 0,
/// or event_wait_list is not NULL and num_events_in_wait_list is 0, or if event objects in
/// event_wait_list are not valid events."
pub fn wait_list(n: cl_uint, list: *const cl_event) -> CLResult<Vec<cl_event>> {
    if (n == 0) != list.is_null() {
        return Err(CL_INVALID_EVENT_WAIT_LIST);
    }
    let items = super::args::slice(list, n as usize).map_err(|_| CL_INVALID_EVENT_WAIT_LIST)?;
    items
        .iter()
        .map(|&e| Obj::<Event>::check(e).map(|o| o.get().inner.h).map_err(|_| CL_INVALID_EVENT_WAIT_LIST))
        .collect()
}

/// The pointer to pass the vendor for a wait list (NULL when empty).
pub fn list_ptr(v: &[cl_event]) -> *const cl_event {
    if v.is_empty() {
        std::ptr::null()
    } else {
        v.as_ptr()
    }
}

/// Where the vendor should write its event: a local when the application asked for one.
pub struct OutEvent {
    app: *mut cl_event,
    pub inner: cl_event,
}

impl OutEvent {
    pub fn new(app: *mut cl_event) -> Self {
        OutEvent { app, inner: std::ptr::null_mut() }
    }

    /// The out-pointer for the vendor call.
    pub fn ptr(&mut self) -> *mut cl_event {
        if self.app.is_null() {
            std::ptr::null_mut()
        } else {
            &mut self.inner
        }
    }

    /// After a successful call: wrap the vendor's event and give it to the application.
    pub fn publish(self, queue: &Obj<Queue>) {
        if self.app.is_null() || self.inner.is_null() {
            return;
        }
        let q = queue.get();
        let ev = new_obj(Event { inner: q.inner.child(self.inner), context: q.context.clone(), queue: Some(queue.hold()) });
        super::args::set_out(self.app, ev.handle());
    }
}
