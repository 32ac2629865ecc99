//! The two things every enqueue does with events: unwrap the application's wait list and
//! wrap the vendor's returned event.

use crate::core::cl::*;

use super::error::{CLResult, Code};
use super::handle::{new_obj, Obj};
use super::objects::{Event, Queue};

/// Checks a wait list and returns the inner events.
///
/// "CL_INVALID_EVENT_WAIT_LIST if event_wait_list is NULL and num_events_in_wait_list > 0,
/// or event_wait_list is not NULL and num_events_in_wait_list is 0, or if event objects in
/// event_wait_list are not valid events."
pub fn wait_list(n: cl_uint, list: *const cl_event) -> CLResult<Vec<cl_event>> {
    Ok(InnerEvents::wait_list(n, list)?.as_slice().to_vec())
}

/// The pointer to pass the vendor for a wait list (NULL when empty).
pub fn list_ptr(v: &[cl_event]) -> *const cl_event {
    if v.is_empty() {
        std::ptr::null()
    } else {
        v.as_ptr()
    }
}

/// Who waits on the vendor events of a list: the vendor (a command's wait list), or the
/// layer on the host, which waits for a deferred command's pieces itself first
/// (`clWaitForEvents`, see `Deferred::wait`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Waiter {
    Vendor,
    Host,
}

/// The inner events of a checked application list. Enqueues are the hot path, and most
/// wait lists are empty or hold one event: those two take no heap allocation and no more
/// than two words, so the list moves through the enqueue path in registers. An inline
/// array of eight (72 bytes) was copied between differently laid-out temporaries
/// (`CLResult<InnerEvents>`, then the list) on every enqueue, and each copy's loads
/// straddled the stores before them: store-forwarding stalls that were about half of
/// the layer's own time per command on PoCL's `basic` device (`perf annotate`,
/// docs/benchmarks.md, session 55).
pub enum InnerEvents {
    Empty,
    One(cl_event),
    Many(Vec<cl_event>),
}

impl InnerEvents {
    /// No events.
    #[inline]
    pub fn empty() -> Self {
        InnerEvents::Empty
    }

    /// An enqueue's wait list, with the spec's `CL_INVALID_EVENT_WAIT_LIST` rules (see
    /// [`wait_list`]).
    #[inline]
    pub fn wait_list(n: cl_uint, list: *const cl_event) -> CLResult<Self> {
        if (n == 0) != list.is_null() {
            return Err(CL_INVALID_EVENT_WAIT_LIST);
        }
        if n == 0 {
            return Ok(Self::empty());
        }
        Self::unwrap(n, list, CL_INVALID_EVENT_WAIT_LIST, Waiter::Vendor)
    }

    /// An event list that must not be empty (`clWaitForEvents`, `clEnqueueWaitForEvents`):
    /// "CL_INVALID_VALUE if num_events is zero or event_list is NULL." and
    /// "CL_INVALID_EVENT if event objects specified in event_list are not valid events."
    /// `waiter`: who waits on the list's vendor events.
    pub fn event_list(n: cl_uint, list: *const cl_event, waiter: Waiter) -> CLResult<Self> {
        if n == 0 || list.is_null() {
            return Err(CL_INVALID_VALUE);
        }
        Self::unwrap(n, list, CL_INVALID_EVENT, waiter)
    }

    fn unwrap(n: cl_uint, list: *const cl_event, bad: Code, waiter: Waiter) -> CLResult<Self> {
        let items = super::args::slice(list, n as usize).map_err(|_| bad)?;
        let inner = |e: &cl_event| {
            let ev = Obj::<Event>::check(*e).map_err(|_| bad)?.get();
            if let (Some(d), Waiter::Vendor) = (&ev.deferred, waiter) {
                d.needs_vendor();
            }
            Ok(ev.inner.h)
        };
        match items {
            [] => Ok(InnerEvents::Empty),
            [e] => Ok(InnerEvents::One(inner(e)?)),
            _ => Ok(InnerEvents::Many(
                items.iter().map(inner).collect::<CLResult<_>>()?,
            )),
        }
    }

    #[inline]
    pub fn as_slice(&self) -> &[cl_event] {
        match self {
            InnerEvents::Empty => &[],
            InnerEvents::One(e) => std::slice::from_ref(e),
            InnerEvents::Many(v) => v,
        }
    }

    /// The count to pass the vendor.
    pub fn len(&self) -> cl_uint {
        self.as_slice().len() as cl_uint
    }

    pub fn is_empty(&self) -> bool {
        self.as_slice().is_empty()
    }

    /// The pointer to pass the vendor (NULL when empty, as the spec requires).
    pub fn ptr(&self) -> *const cl_event {
        list_ptr(self.as_slice())
    }
}

/// Where the vendor should write its event: a local when the application asked for one.
pub struct OutEvent {
    app: *mut cl_event,
    pub inner: cl_event,
}

impl OutEvent {
    pub fn new(app: *mut cl_event) -> Self {
        OutEvent {
            app,
            inner: std::ptr::null_mut(),
        }
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
    /// Inline, as every command reaches it, most asking for no event.
    #[inline]
    pub fn publish(self, queue: &Obj<Queue>) {
        if self.app.is_null() || self.inner.is_null() {
            return;
        }
        self.wrap(queue);
    }

    #[cold]
    fn wrap(self, queue: &Obj<Queue>) {
        let q = queue.get();
        let ev = new_obj(Event {
            inner: q.inner.child(self.inner),
            context: q.context.clone(),
            queue: Some(queue.hold()),
            deferred: None,
        });
        super::args::set_out(self.app, ev.handle());
    }
}
