//! Which commands can run to completion by the vendor's work alone ("ready"), the
//! invariant that keeps managed queues free of deadlocks (docs/design.md, "No waits on
//! software").
//!
//! A submitter holds the device in the arbiter's eyes while it has pieces in its window
//! (a grant, an in-flight place), and a watched direct command holds demand until it
//! completes. If such a piece could wait on the vendor for work that is still in some
//! queue's software FIFO, or for a user event the application sets only after a call
//! that waits for a submitter (a drain), the wait could close a cycle: the other queue's
//! submitter waits for the grant this one holds. So only a *ready* command may hold
//! anything: one whose every dependency has completed, or will complete by vendor work
//! alone, and that sits behind no unready command on its own vendor queue. An unready
//! command goes to the vendor at once, holding nothing, and is remembered until it
//! completes, because an in-order queue runs nothing past it.
//!
//! A dependency is ready when it is complete (or failed), or when it is
//! - the event of a deferred command whose every piece reached the vendor while the
//!   command was ready ([`Deferred::on_vendor`]);
//! - the vendor event of a command that is not remembered as unready here, and is not a
//!   user event (which only the application sets).

use once_cell::sync::Lazy;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::deferred::{event_info, status_of, Deferred};
use super::Retained;
use crate::core::cl::*;

/// Deferred commands by the handle of their vendor user event.
static DEFERRED: Lazy<Mutex<HashMap<usize, Weak<Deferred>>>> = Lazy::new(Default::default);

/// Vendor events of unready commands not yet known complete, on every queue.
static UNREADY: Lazy<Mutex<HashSet<usize>>> = Lazy::new(Default::default);

/// Records a deferred command's user event, so a wait on it can be judged.
pub fn register_deferred(user: cl_event, d: &Arc<Deferred>) {
    lock(&DEFERRED).insert(user as usize, Arc::downgrade(d));
}

/// Forgets a deferred command's user event (it is being released).
pub fn forget_deferred(user: cl_event) {
    lock(&DEFERRED).remove(&(user as usize));
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether dependency `e` (a vendor event whose status was read as `status`) completes
/// by vendor work alone.
pub fn dep_ready(vt: &cl_icd_dispatch, e: cl_event, status: cl_int) -> bool {
    if status <= CL_COMPLETE as cl_int {
        return true;
    }
    if lock(&UNREADY).contains(&(e as usize)) {
        return false;
    }
    let d = lock(&DEFERRED).get(&(e as usize)).and_then(Weak::upgrade);
    match d {
        Some(d) => d.on_vendor(),
        None => event_info(vt, e, CL_EVENT_COMMAND_TYPE, 0) != CL_COMMAND_USER,
    }
}

/// The unready commands of one vendor queue (see the module's comment).
#[derive(Default)]
pub struct Tail {
    events: Mutex<Vec<Retained>>,
    /// `events.len()`, read without the lock on the fast path.
    n: AtomicUsize,
}

impl Tail {
    /// Nothing unready of this queue is still incomplete. Inline: every direct command
    /// asks, and mostly there is nothing unready.
    #[inline]
    pub fn ready(&self, vt: &cl_icd_dispatch) -> bool {
        self.n.load(Ordering::Acquire) == 0 || self.settle(vt)
    }

    /// Forgets the unready commands now complete; whether none is left.
    #[cold]
    fn settle(&self, vt: &cl_icd_dispatch) -> bool {
        let mut ev = lock(&self.events);
        ev.retain(|r| {
            let busy = status_of(vt, r.handle()) > CL_COMPLETE as cl_int;
            if !busy {
                lock(&UNREADY).remove(&(r.handle() as usize));
            }
            busy
        });
        self.n.store(ev.len(), Ordering::Release);
        ev.is_empty()
    }

    /// Remembers `e`, the vendor event of a command that reached this queue unready;
    /// retained until it is seen complete.
    pub fn note(&self, vt: &cl_icd_dispatch, e: cl_event) {
        let r = Retained::new(e, vt.clRetainEvent, vt.clReleaseEvent);
        lock(&UNREADY).insert(e as usize);
        let mut ev = lock(&self.events);
        ev.push(r);
        self.n.store(ev.len(), Ordering::Release);
    }
}

impl Drop for Tail {
    fn drop(&mut self) {
        let ev = self.events.get_mut().unwrap_or_else(|e| e.into_inner());
        let mut set = lock(&UNREADY);
        for r in ev.iter() {
            set.remove(&(r.handle() as usize));
        }
    }
}
