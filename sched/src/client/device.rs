//! The yield handshake's public side (rule 10): a lower client's on-device claims, a
//! higher client's bounded wait for them to leave, the watchers' futex word, and the
//! heartbeat that keeps leases. The protocol itself is `handshake.rs` and `lease.rs`.
//!
//! A process's watcher thread (the platform's) runs this loop, per device:
//!
//! ```text
//! loop {
//!     let seen = arbiter.yield_generation();          // 1. generation first,
//!     for c in clients_on_this_device {               // 2. then the epochs,
//!         c.heartbeat();
//!         let e = c.yield_request_epoch();
//!         if e != last_acted[c] { raise the yield words of c's running launches; last_acted[c] = e }
//!     }
//!     arbiter.wait_yield_generation(seen, arbiter.heartbeat_interval()); // 3. then sleep
//! }
//! ```
//!
//! A higher client bumps the epochs before the generation, so a request that step 2 missed
//! changed the generation after step 1, and step 3 returns at once.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{Arbiter, Client, Shared};
use crate::futex;
use crate::handshake::SPIN_NS;
use crate::layout::CANNOT_YIELD;
use crate::liveness;
use crate::priority::Priority;
use crate::sync::Ordering;

/// The outcome of [`Client::claim_device`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Handshake {
    /// How long the caller waited for lower clients to leave the device, ns (0 when none
    /// was asked to yield).
    pub waited_ns: u64,
    /// The bound passed with a lower client still on the device.
    pub expired: bool,
    /// Lower clients on the device that were asked to yield (and waited for).
    pub lower_on_device: u32,
    /// Lower clients on the device whose launches cannot yield: not waited for.
    pub cannot_yield: u32,
    /// Lower clients on the device whose lease lapsed (no progress: a stopped or dead
    /// process): not waited for.
    pub lapsed: u32,
}

/// A client's live on-device claims: the bound its slot publishes is their max.
#[derive(Default)]
struct ClaimList {
    next_id: u64,
    /// (claim id, bound in ns or `CANNOT_YIELD`).
    live: Vec<(u64, u64)>,
    /// The client unregistered: its slot is no longer ours to write.
    closed: bool,
}

impl ClaimList {
    /// The max of the live bounds; `CANNOT_YIELD` is the largest value, so one claim that
    /// cannot yield makes the whole client so.
    fn bound(&self) -> u64 {
        self.live.iter().map(|&(_, b)| b).max().unwrap_or(0)
    }
}

/// What claims need of their client, shared so a claim may outlive a borrow of it (and be
/// left from another thread, such as an event callback).
pub(super) struct ClaimOwner {
    shared: Arc<Shared>,
    slot: usize,
    pri: Priority,
    list: Mutex<ClaimList>,
    /// Threads of this client waiting in `claim_device`: the slot's `handshake_waiting`
    /// bit stays set while any does (set and cleared under this lock, so one thread's
    /// clear never hides another's wait from a leaver).
    hs_waiters: Mutex<u32>,
}

impl ClaimOwner {
    pub(super) fn new(shared: Arc<Shared>, slot: usize, pri: Priority) -> Arc<ClaimOwner> {
        Arc::new(ClaimOwner {
            shared,
            slot,
            pri,
            list: Mutex::new(ClaimList::default()),
            hs_waiters: Mutex::new(0),
        })
    }

    /// Counts a thread into (`on`) or out of the handshake wait, and keeps the slot's
    /// `handshake_waiting` bit set while any thread waits.
    fn handshake_waiting(&self, on: bool) {
        let mut n = self.hs_waiters.lock().unwrap_or_else(|e| e.into_inner());
        let v = self.shared.view();
        if on {
            *n += 1;
            v.set_handshake_waiting(self.slot, true);
        } else {
            *n = n.saturating_sub(1);
            if *n == 0 {
                v.set_handshake_waiting(self.slot, false);
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ClaimList> {
        self.list.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// At unregister: later leaves must not touch a slot that may belong to someone else.
    pub(super) fn close(&self) {
        self.lock().closed = true;
    }

    /// Leaves claim `id` now (its slot's on-device count and bound change, and waiting
    /// higher clients are woken); returns the latency from the latest yield request, if one
    /// came while it was on the device. With `yielded` the yield is counted first, so a
    /// higher client that the leave wakes sees it counted; else [`LeftDevice::settle`] may
    /// count it later. `None` when the client has unregistered.
    fn leave(&self, id: u64, entry_epoch: u32, yielded: bool) -> Option<Option<u64>> {
        let mut l = self.lock();
        if l.closed {
            return None;
        }
        l.live.retain(|&(i, _)| i != id);
        let bound = l.bound();
        let v = self.shared.view();
        let now = liveness::now_ns();
        let latency = v.yield_latency(self.slot, entry_epoch, now);
        if yielded {
            v.count_yield(self.slot, latency);
        }
        let wake = v.leave_device(self.slot, self.pri, bound, now);
        drop(l);
        if wake {
            v.notify_leave();
            futex::wake_all(&v.h.leave_generation);
        }
        Some(latency)
    }

    /// Counts a yield of this client (unless it unregistered meanwhile).
    fn count_yield(&self, latency: Option<u64>) {
        let l = self.lock();
        if !l.closed {
            self.shared.view().count_yield(self.slot, latency);
        }
    }
}

/// A launch that has left the device but does not know yet whether it stopped early (a
/// yielding launch learns that from its ticket, which takes a read from the device: done
/// after leaving, so that the higher client waiting for it does not wait for the read).
/// [`LeftDevice::settle`] counts it; dropped unsettled, it counts as completed.
#[must_use = "settle says whether the launch yielded"]
pub struct LeftDevice {
    owner: Arc<ClaimOwner>,
    /// `None`: the client had unregistered.
    latency: Option<Option<u64>>,
}

impl LeftDevice {
    /// The launch stopped at a yield request (`yielded`: counted, with its latency from
    /// the latest request to its leave in the yield-latency histogram) or completed.
    /// Returns that latency when it was measured and it yielded.
    pub fn settle(self, yielded: bool) -> Option<u64> {
        let latency = self.latency?;
        if yielded {
            self.owner.count_yield(latency);
            latency
        } else {
            None
        }
    }
}

/// A launch of this client on the device (from [`Client::enter_device`]). Hand it back
/// with [`Client::leave_device`]; dropping it leaves the device as "completed" (not
/// yielded), so a claim is never leaked.
#[must_use = "a device claim must be left with Client::leave_device"]
pub struct DeviceClaim {
    owner: Arc<ClaimOwner>,
    id: u64,
    entry_epoch: u32,
    preempted: bool,
    yield_ns: Option<u64>,
    /// Left already (by [`Client::leave_device`]): the drop has nothing to do.
    left: bool,
}

impl std::fmt::Debug for DeviceClaim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceClaim")
            .field("slot", &self.owner.slot)
            .field("id", &self.id)
            .field("entry_epoch", &self.entry_epoch)
            .field("preempted", &self.preempted)
            .field("yield_ns", &self.yield_ns)
            .finish()
    }
}

impl DeviceClaim {
    /// A higher priority already wanted the device when this claim was made (its demand
    /// or linger was up): the launch should yield at its first group boundary. The
    /// higher client may not have seen the claim, so no yield request will come for it.
    pub fn preempted(&self) -> bool {
        self.preempted
    }

    /// The client's yield-request epoch just before the claim: a later epoch
    /// ([`Client::yield_request_epoch`]) means a request came while it was on the device.
    pub fn entry_epoch(&self) -> u32 {
        self.entry_epoch
    }

    /// The bound this claim published (`None`: it cannot yield).
    pub fn yield_ns(&self) -> Option<u64> {
        self.yield_ns
    }

    /// Should this launch yield: a higher priority wanted the device when it was made
    /// ([`DeviceClaim::preempted`]), or a yield request reached its client since (the
    /// client's epoch moved past [`DeviceClaim::entry_epoch`]). One atomic load.
    pub fn yield_requested(&self) -> bool {
        self.preempted
            || self.owner.shared.view().slots[self.owner.slot]
                .yield_epoch
                .load(Ordering::Acquire)
                != self.entry_epoch
    }
}

impl Drop for DeviceClaim {
    fn drop(&mut self) {
        if !self.left {
            self.owner.leave(self.id, self.entry_epoch, false);
        }
    }
}

impl Client {
    /// Lower side: a yieldable launch of this client goes on the device. `yield_ns`: how
    /// long it needs to yield (its learned group time plus the signal path); `None`: it
    /// cannot yield, and higher clients will not wait for it. Claims nest (several
    /// launches in flight); the slot publishes the max bound of the live ones, or "cannot
    /// yield" if any live one cannot. Check [`DeviceClaim::preempted`] before launching.
    pub fn enter_device(&self, yield_ns: Option<u64>) -> DeviceClaim {
        let o = &self.device;
        let bound = yield_ns.map_or(CANNOT_YIELD, |n| n.min(CANNOT_YIELD - 1));
        let v = self.shared.view();
        let mut l = o.lock();
        let id = l.next_id;
        l.next_id += 1;
        l.live.push((id, bound));
        // Read before the claim shows: any request that can see the claim bumps it later.
        let entry_epoch = v.slots[self.slot].yield_epoch.load(Ordering::Acquire);
        let preempted = v.enter_device(self.slot, self.pri, l.bound(), liveness::now_ns());
        drop(l);
        DeviceClaim {
            owner: o.clone(),
            id,
            entry_epoch,
            preempted,
            yield_ns,
            left: false,
        }
    }

    /// Lower side: the launch of `claim` left the device, because it completed or, with
    /// `yielded`, because it stopped at a yield request (counted, with its latency from
    /// the latest request to now in the yield-latency histogram). Returns that latency
    /// when it was measured: what a higher client really waited for this launch, which
    /// its next claims should publish as their bound.
    pub fn leave_device(&self, mut claim: DeviceClaim, yielded: bool) -> Option<u64> {
        claim.left = true;
        let latency = claim.owner.leave(claim.id, claim.entry_epoch, yielded);
        latency.flatten().filter(|_| yielded)
    }

    /// Lower side: the launch of `claim` is off the device, and whether it stopped at a
    /// yield request is not known yet: higher clients waiting for it go on now, and
    /// [`LeftDevice::settle`] counts it once that is known (the latency measured to now).
    pub fn leave_device_now(&self, mut claim: DeviceClaim) -> LeftDevice {
        claim.left = true;
        LeftDevice {
            owner: claim.owner.clone(),
            latency: claim.owner.leave(claim.id, claim.entry_epoch, false),
        }
    }

    /// The yield-request epoch addressed to this client; higher clients bump it. The
    /// watcher compares it with the last one it acted on.
    pub fn yield_request_epoch(&self) -> u32 {
        self.shared.view().slots[self.slot]
            .yield_epoch
            .load(Ordering::Acquire)
    }

    /// When the latest yield request to this client was made (`monotonic_ns`; 0 if none).
    pub fn yield_request_ns(&self) -> u64 {
        self.shared.view().slots[self.slot]
            .yield_request_ns
            .load(Ordering::Acquire)
    }

    /// Live on-device claims of this client.
    pub fn on_device(&self) -> u32 {
        self.shared.view().slots[self.slot]
            .on_device
            .load(Ordering::Relaxed)
    }

    /// A sign of life for the leases (the watcher calls it at least every
    /// [`Arbiter::heartbeat_interval`]): while it comes, this client's on-device claims and
    /// its place in the round robin hold.
    pub fn heartbeat(&self) {
        self.shared
            .view()
            .touch(self.slot, self.pri, liveness::now_ns());
    }

    /// Higher side, on the direct path before forwarding a command: raises demand (as
    /// [`Client::announce_demand`]), asks the lower clients on the device to yield, and
    /// waits until they are all off or the bound passes: `min(cap, the largest yield_ns
    /// they published)`; a lower client that published 0 is asked and not waited for. Spins for up to 20 µs, then futex-waits. Returns at once, having
    /// waited 0, when no lower client is on the device (a few atomic loads). Claims that
    /// cannot yield and claims whose lease lapsed are not waited for.
    pub fn claim_device(&self, cap: Duration) -> Handshake {
        self.claim_device_spinning(cap, Duration::from_nanos(SPIN_NS))
    }

    /// [`Client::claim_device`], spinning for up to `spin` before it futex-waits. A futex
    /// wait ends late: the wake that a leaving client sends reaches a sleeping thread
    /// tens of µs after it, and a wait that times out at the bound sleeps on past it by
    /// up to the thread's timer slack (50 µs by default). Where the device is not the
    /// host's cores (a GPU), the higher client spins for its whole bound, so that it
    /// submits as soon as the lower launches are off; on a CPU device spinning would take
    /// a core from the very threads it waits for.
    pub fn claim_device_spinning(&self, cap: Duration, spin: Duration) -> Handshake {
        let v = self.shared.view();
        if !v.has_demand(self.slot, self.pri) {
            self.announce_demand();
        }
        if !v.lower_on_device(self.slot, self.pri) {
            return Handshake::default();
        }
        let start = liveness::now_ns();
        let r = v.request_yields(self.slot, self.pri, start);
        let mut hs = Handshake {
            lower_on_device: r.count,
            cannot_yield: r.cannot_yield,
            lapsed: r.lapsed,
            ..Default::default()
        };
        if r.count > 0 {
            futex::wake_all(&v.h.yield_generation);
        }
        // Every claim asked published 0: asked, and not waited for (a CPU device's launch
        // whose groups outlast the cap: it frees the cores at its next group boundary,
        // and waiting for that would only delay this client).
        if r.count > 0 && r.bound_ns > 0 {
            let cap_ns = cap.as_nanos().min(u64::MAX as u128) as u64;
            let deadline = start.saturating_add(cap_ns.min(r.bound_ns));
            let spin_ns = spin.as_nanos().min(u64::MAX as u128) as u64;
            let spin_until = start.saturating_add(spin_ns).min(deadline);
            self.device.handshake_waiting(true);
            let mut now = start;
            loop {
                // Generation first, counts second: a leave after the check bumps it.
                let g = v.h.leave_generation.load(Ordering::Acquire);
                if v.all_off(&r) {
                    break;
                }
                if now >= deadline {
                    hs.expired = true;
                    break;
                }
                if now < spin_until {
                    std::hint::spin_loop();
                } else {
                    futex::wait(
                        &v.h.leave_generation,
                        g,
                        Duration::from_nanos(deadline - now),
                    );
                }
                now = liveness::now_ns();
            }
            self.device.handshake_waiting(false);
            hs.waited_ns = liveness::now_ns().saturating_sub(start);
        }
        v.record_handshake(self.slot, &r, hs.waited_ns, hs.expired);
        if hs.expired || hs.lapsed > 0 {
            // A claim that does not leave may be a dead process's: sweep now and then.
            self.shared.sweep_if_due(self.slot);
        }
        hs
    }
}

impl Arbiter {
    /// The device-wide yield generation: higher clients bump it after asking lower ones
    /// to yield. A watcher reads it before it checks its clients' epochs.
    pub fn yield_generation(&self) -> u32 {
        self.shared
            .seg
            .header()
            .yield_generation
            .load(Ordering::Acquire)
    }

    /// Sleeps (futex, bounded by `timeout`) until the yield generation is no longer
    /// `seen`; returns the current one (which may still be `seen` after a timeout).
    pub fn wait_yield_generation(&self, seen: u32, timeout: Duration) -> u32 {
        let word = &self.shared.seg.header().yield_generation;
        if word.load(Ordering::Acquire) == seen {
            futex::wait(word, seen, timeout);
        }
        word.load(Ordering::Acquire)
    }

    /// Wakes every watcher of the device (in every process), as a yield request does but
    /// with none made: each looks at its running launches again. Only for a process's own
    /// timing of yields (`yielding = "chaos"` in the platform, a test setting): a
    /// watcher asleep until its next moment would otherwise miss an earlier one that a
    /// new launch drew. The generation changes, so a watcher about to sleep on the one it
    /// read does not sleep.
    pub fn wake_watchers(&self) {
        let word = &self.shared.seg.header().yield_generation;
        word.fetch_add(1, Ordering::AcqRel);
        futex::wake_all(word);
    }

    /// The segment's lease (see [`crate::ArbiterOptions::lease`]).
    pub fn lease(&self) -> Duration {
        Duration::from_nanos(self.shared.seg.params.lease_ns)
    }

    /// How often a watcher should call [`Client::heartbeat`]: a quarter of the lease.
    pub fn heartbeat_interval(&self) -> Duration {
        self.lease() / 4
    }
}
