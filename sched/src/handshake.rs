//! The yield handshake (rule 10), on a view of the shared table: plain atomics and a
//! caller-supplied clock, no system calls (the futex waits and wakes are the caller's).
//!
//! * A lower client with a yielding launch on the device holds an *on-device claim*: its
//!   slot's `on_device` count, its bit in `Header::on_device`, and the bound it publishes
//!   (`yield_bound_ns`: how long its live claims need to yield, or `CANNOT_YIELD`).
//! * A higher client that wants the device has raised its demand. It then asks every
//!   strictly lower client on the device to yield (bumps that slot's `yield_epoch`, stamps
//!   `yield_request_ns`), bumps `Header::yield_generation` (the watchers' futex word) and
//!   waits until they are all off the device, at most for the largest bound it saw,
//!   capped by the caller. Claims that cannot yield, and claims whose lease lapsed
//!   (`lease.rs`), are not waited for at all.
//!
//! Dekker order, twice, each side storing its own word before reading the other's:
//! * `enter_device` raises the on-device count and bit, `fence(SeqCst)`, then reads the
//!   higher demand; a higher client raises demand, `fence(SeqCst)` (in `announce`), then
//!   reads the on-device masks. So either the higher client sees the claim (and asks it to
//!   yield), or the claim sees the demand (the launch yields at once: `preempted`).
//! * `leave_device` drops the count, `fence(SeqCst)`, then reads `handshake_waiting`; a
//!   waiting higher client sets its `handshake_waiting` bit, `fence(SeqCst)`, then reads
//!   the counts, each time after reading `leave_generation`. So either it sees the client
//!   off, or the leaver sees the waiter and bumps `leave_generation` (its futex word).

use crate::layout::{CANNOT_YIELD, MASK_WORDS, SLOT_ACTIVE, YIELD_HIST_BUCKETS};
use crate::policy::{bit, View};
use crate::priority::Priority;
use crate::sync::{fence, AtomicU64, Ordering};

/// How long a higher client spins (re-reading the on-device counts) before it futex-waits
/// for the rest of its bound: a yield takes tens of µs at best, and a futex round trip
/// costs a few µs of its own.
pub(crate) const SPIN_NS: u64 = 20_000;

/// The lower claims a higher client found on the device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Requested {
    /// Slots asked to yield, as a bitmask.
    pub slots: [u64; MASK_WORDS],
    /// How many.
    pub count: u32,
    /// The largest bound they published, ns.
    pub bound_ns: u64,
    /// Lower clients on the device whose claims cannot yield (not waited for).
    pub cannot_yield: u32,
    /// Lower clients on the device whose lease lapsed (not waited for).
    pub lapsed: u32,
}

/// The yield-latency histogram bucket of `ns` (see `YIELD_HIST_BUCKETS`).
pub(crate) fn hist_bucket(ns: u64) -> usize {
    let us = ns / 1000;
    if us < 2 {
        0
    } else {
        ((63 - us.leading_zeros()) as usize).min(YIELD_HIST_BUCKETS - 1)
    }
}

/// The `q` quantile (0..=1) of a yield-latency histogram, as the upper edge of its bucket
/// in ns (so "at most this", within a factor of two); `None` without samples.
pub(crate) fn hist_quantile(counts: &[u64; YIELD_HIST_BUCKETS], q: f64) -> Option<u64> {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
    let mut seen = 0u64;
    for (b, &c) in counts.iter().enumerate() {
        seen += c;
        if seen >= rank {
            return Some((2u64 << b) * 1000);
        }
    }
    Some((2u64 << (YIELD_HIST_BUCKETS - 1)) * 1000)
}

impl View<'_> {
    /// Calls `f(slot)` for each slot of a strictly lower priority than `pri` set in `masks`.
    fn each_lower(
        &self,
        masks: &[[AtomicU64; MASK_WORDS]; crate::priority::LEVELS],
        me: usize,
        pri: Priority,
        mut f: impl FnMut(usize),
    ) {
        let l = pri.level.index();
        for (ll, m) in masks.iter().enumerate().take(l + 1) {
            self.each(m, me, |j| {
                if ll < l || self.number_in(j, pri.level) < pri.number {
                    f(j);
                }
                true
            });
        }
    }

    /// A yieldable (or not: `bound_ns == CANNOT_YIELD`) launch of slot `me` goes on the
    /// device. `bound_ns` is what the slot publishes from now on: the max over its live
    /// claims, this one included (the caller keeps the list). Returns true if a higher
    /// priority already wants the device: the launch should yield at its first chance.
    pub fn enter_device(&self, me: usize, pri: Priority, bound_ns: u64, now: u64) -> bool {
        let s = &self.slots[me];
        s.yield_bound_ns.store(bound_ns, Ordering::Release);
        let before = s.on_device.fetch_add(1, Ordering::Release);
        if before == 0 {
            let (w, b) = bit(me);
            self.h.on_device[pri.level.index()][w].fetch_or(b, Ordering::Release);
        }
        if bound_ns == CANNOT_YIELD {
            s.cannot_yield.fetch_add(1, Ordering::Relaxed);
        }
        self.touch(me, pri, now);
        // Pairs with the fence after a higher client's demand (`announce`).
        fence(Ordering::SeqCst);
        self.blocked_by_higher(me, pri, now).is_some()
    }

    /// A launch of slot `me` left the device; `bound_ns`: what the remaining claims need
    /// (ignored when none remain). Returns true if a higher client waits in the handshake:
    /// the caller then calls [`View::notify_leave`] and wakes `leave_generation`.
    pub fn leave_device(&self, me: usize, pri: Priority, bound_ns: u64, now: u64) -> bool {
        let s = &self.slots[me];
        let before = s
            .on_device
            .fetch_update(Ordering::Release, Ordering::Relaxed, |x| x.checked_sub(1))
            .unwrap_or(0);
        self.touch(me, pri, now);
        if before > 1 {
            s.yield_bound_ns.store(bound_ns, Ordering::Release);
            return false;
        }
        let (w, b) = bit(me);
        self.h.on_device[pri.level.index()][w].fetch_and(!b, Ordering::Release);
        // Pairs with the fence after a waiter's `handshake_waiting` bit.
        fence(Ordering::SeqCst);
        self.h
            .handshake_waiting
            .iter()
            .enumerate()
            .any(|(w, m)| m.load(Ordering::Relaxed) & self.valid_word(w) != 0)
    }

    fn valid_word(&self, w: usize) -> u64 {
        let n = self.slots.len();
        if (w + 1) * 64 <= n {
            u64::MAX
        } else if w * 64 >= n {
            0
        } else {
            (1u64 << (n - w * 64)) - 1
        }
    }

    /// Tells handshake waiters that someone left the device (bump their futex word).
    pub fn notify_leave(&self) {
        self.h.leave_generation.fetch_add(1, Ordering::AcqRel);
    }

    /// The latency from the latest yield request to `now` for a launch of slot `me` that
    /// entered at `entry_epoch`, if a request came while it was on the device. Counts
    /// nothing: read when the launch leaves, counted by [`View::count_yield`] once the
    /// launch knows it stopped early.
    pub fn yield_latency(&self, me: usize, entry_epoch: u32, now: u64) -> Option<u64> {
        let s = &self.slots[me];
        if s.yield_epoch.load(Ordering::Acquire) == entry_epoch {
            return None;
        }
        let asked = s.yield_request_ns.load(Ordering::Relaxed);
        (asked != 0 && asked <= now).then(|| now - asked)
    }

    /// Counts a yield of slot `me`, with its latency when measured ([`View::yield_latency`]).
    pub fn count_yield(&self, me: usize, latency: Option<u64>) {
        let s = &self.slots[me];
        s.yields_done.fetch_add(1, Ordering::Relaxed);
        if let Some(l) = latency {
            s.yield_hist[hist_bucket(l)].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The fast check of a higher client: is any strictly lower client on the device? A
    /// few word loads (one per level for up to 64 slots).
    pub fn lower_on_device(&self, me: usize, pri: Priority) -> bool {
        self.any_lower(&self.h.on_device, me, pri)
    }

    /// Asks every strictly lower client on the device whose claim can yield and whose lease
    /// holds to yield, and bumps the watchers' generation if it asked anyone (the caller
    /// then wakes `yield_generation`). The caller raised its demand first.
    pub fn request_yields(&self, me: usize, pri: Priority, now: u64) -> Requested {
        let mut r = Requested::default();
        self.each_lower(&self.h.on_device, me, pri, |j| {
            let s = &self.slots[j];
            if s.state.load(Ordering::Acquire) != SLOT_ACTIVE
                || s.on_device.load(Ordering::Acquire) == 0
            {
                // A bit left by an overwrite, or a claim just ending.
                return;
            }
            if self.lapsed(j, now) {
                r.lapsed += 1;
                return;
            }
            let bound = s.yield_bound_ns.load(Ordering::Acquire);
            if bound == CANNOT_YIELD {
                r.cannot_yield += 1;
                return;
            }
            // The stamp first: a watcher that sees the new epoch sees when it was asked.
            s.yield_request_ns.store(now, Ordering::Relaxed);
            s.yield_epoch.fetch_add(1, Ordering::Release);
            let (w, b) = bit(j);
            r.slots[w] |= b;
            r.count += 1;
            r.bound_ns = r.bound_ns.max(bound);
        });
        if r.count > 0 {
            self.h.yield_generation.fetch_add(1, Ordering::AcqRel);
        }
        r
    }

    /// Marks slot `me` as waiting in the handshake (or not). Setting it is followed by a
    /// SeqCst fence (pairs with `leave_device`'s).
    pub fn set_handshake_waiting(&self, me: usize, on: bool) {
        let (w, b) = bit(me);
        if on {
            self.h.handshake_waiting[w].fetch_or(b, Ordering::Relaxed);
            fence(Ordering::SeqCst);
        } else {
            self.h.handshake_waiting[w].fetch_and(!b, Ordering::Relaxed);
        }
    }

    /// Has every client in `r` left the device (or lost its slot)?
    pub fn all_off(&self, r: &Requested) -> bool {
        let mut off = true;
        for (w, &bits) in r.slots.iter().enumerate() {
            let mut v = bits;
            while v != 0 && off {
                let j = w * 64 + v.trailing_zeros() as usize;
                v &= v - 1;
                let s = &self.slots[j];
                off = s.on_device.load(Ordering::Acquire) == 0
                    || s.state.load(Ordering::Acquire) != SLOT_ACTIVE;
            }
        }
        off
    }

    /// Counts a handshake of slot `me` in its statistics.
    pub fn record_handshake(&self, me: usize, r: &Requested, waited_ns: u64, expired: bool) {
        let s = &self.slots[me];
        if r.lapsed > 0 {
            s.hs_lapsed.fetch_add(r.lapsed as u64, Ordering::Relaxed);
        }
        if r.count == 0 {
            return;
        }
        s.hs_waits.fetch_add(1, Ordering::Relaxed);
        s.hs_wait_ns.fetch_add(waited_ns, Ordering::Relaxed);
        s.hs_wait_max_ns.fetch_max(waited_ns, Ordering::Relaxed);
        if expired {
            s.hs_expired.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::layout::SLOT_RECLAIMED;
    use crate::policy::{HeapTable, Params, TEST_PARAMS};

    /// Leases of 1 ms, so the tests' clock passes them.
    const P: Params = Params {
        lease_ns: 1_000_000,
        ..TEST_PARAMS
    };

    fn table(pris: &[Priority]) -> HeapTable {
        HeapTable::claimed(pris.len(), P, pris)
    }

    const HI: Priority = Priority::HIGH;
    const LO: Priority = Priority::LOW;

    #[test]
    fn nobody_lower_on_the_device_costs_nothing() {
        let t = table(&[HI, LO]);
        let v = t.view();
        v.announce(0, HI, 10);
        assert!(!v.lower_on_device(0, HI));
        let r = v.request_yields(0, HI, 10);
        assert_eq!(r, Requested::default());
        assert_eq!(t.h.yield_generation.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_lower_claim_is_asked_to_yield_and_counted_off_when_it_leaves() {
        let t = table(&[HI, LO]);
        let v = t.view();
        assert!(
            !v.enter_device(1, LO, 50_000, 10),
            "nobody higher wants it yet"
        );
        v.announce(0, HI, 20);
        assert!(v.lower_on_device(0, HI));
        let epoch = t.slots[1].yield_epoch.load(Ordering::Relaxed);
        let r = v.request_yields(0, HI, 30);
        assert_eq!((r.count, r.bound_ns), (1, 50_000));
        assert_eq!(t.slots[1].yield_epoch.load(Ordering::Relaxed), epoch + 1);
        assert_eq!(t.h.yield_generation.load(Ordering::Relaxed), 1);
        assert!(!v.all_off(&r));
        v.set_handshake_waiting(0, true);
        assert!(v.leave_device(1, LO, 0, 80_030), "the waiter must be woken");
        assert_eq!(v.yield_latency(1, epoch, 80_030), Some(80_000));
        assert_eq!(
            t.slots[1].yields_done.load(Ordering::Relaxed),
            0,
            "not counted yet"
        );
        v.count_yield(1, Some(80_000));
        v.set_handshake_waiting(0, false);
        assert!(v.all_off(&r));
        assert!(!v.lower_on_device(0, HI));
        assert_eq!(t.slots[1].yields_done.load(Ordering::Relaxed), 1);
        // 80 µs from request to off: bucket [64, 128) µs.
        assert_eq!(t.slots[1].yield_hist[6].load(Ordering::Relaxed), 1);
    }

    #[test]
    fn entering_behind_a_higher_demand_is_preempted() {
        let t = table(&[HI, LO]);
        let v = t.view();
        v.announce(0, HI, 1);
        assert!(v.enter_device(1, LO, 1000, 2));
    }

    #[test]
    fn claims_nest_and_publish_their_bound() {
        let t = table(&[HI, LO]);
        let v = t.view();
        v.enter_device(1, LO, 1000, 1);
        v.enter_device(1, LO, 9000, 1);
        assert!(!v.leave_device(1, LO, 1000, 2));
        assert_eq!(t.slots[1].on_device.load(Ordering::Relaxed), 1);
        assert_eq!(t.slots[1].yield_bound_ns.load(Ordering::Relaxed), 1000);
        assert!(v.lower_on_device(0, HI));
        v.leave_device(1, LO, 0, 3);
        assert!(!v.lower_on_device(0, HI));
        // A spare leave does not wrap the count.
        v.leave_device(1, LO, 0, 4);
        assert_eq!(t.slots[1].on_device.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn same_priority_and_higher_are_never_asked() {
        let n2: Priority = "normal:2".parse().unwrap();
        let n1: Priority = "normal:1".parse().unwrap();
        let t = table(&[Priority::NORMAL, Priority::NORMAL, HI, n2, n1]);
        let v = t.view();
        v.enter_device(1, Priority::NORMAL, 1000, 1);
        v.enter_device(2, HI, 1000, 1);
        v.enter_device(3, n2, 1000, 1);
        assert!(!v.lower_on_device(0, Priority::NORMAL));
        assert_eq!(v.request_yields(0, Priority::NORMAL, 2).count, 0);
        // A lower number inside the level is lower.
        v.enter_device(4, n1, 1000, 1);
        let r = v.request_yields(3, n2, 2);
        assert_eq!(r.count, 2, "normal:1 and normal:0, not high");
        let (w, b) = bit(4);
        assert!(r.slots[w] & b != 0);
    }

    #[test]
    fn claims_that_cannot_yield_or_lapsed_are_not_waited_for() {
        let t = table(&[HI, LO, LO]);
        let v = t.view();
        v.enter_device(1, LO, CANNOT_YIELD, 1);
        v.enter_device(2, LO, 1000, 1);
        let r = v.request_yields(0, HI, 2);
        assert_eq!((r.count, r.cannot_yield, r.lapsed), (1, 1, 0));
        assert_eq!(t.slots[1].cannot_yield.load(Ordering::Relaxed), 1);
        // Past the lease (1 ms) without progress, neither is waited for.
        let later = 1 + P.lease_ns + 1;
        let r = v.request_yields(0, HI, later);
        assert_eq!((r.count, r.cannot_yield, r.lapsed), (0, 0, 2));
        v.record_handshake(0, &r, 0, false);
        assert_eq!(t.slots[0].hs_lapsed.load(Ordering::Relaxed), 2);
        assert_eq!(t.slots[0].hs_waits.load(Ordering::Relaxed), 0);
        // A heartbeat renews the lease.
        v.touch(2, LO, later);
        assert_eq!(v.request_yields(0, HI, later).count, 1);
    }

    #[test]
    fn a_reclaimed_claim_is_cleared() {
        let t = table(&[HI, LO]);
        let v = t.view();
        v.enter_device(1, LO, 1000, 1);
        let r = v.request_yields(0, HI, 2);
        v.clear_slot(1, SLOT_RECLAIMED);
        assert!(v.all_off(&r));
        assert!(!v.lower_on_device(0, HI));
        assert_eq!(t.slots[1].on_device.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn histogram_buckets_and_quantiles() {
        assert_eq!(hist_bucket(0), 0);
        assert_eq!(hist_bucket(1_999), 0);
        assert_eq!(hist_bucket(2_000), 1);
        assert_eq!(hist_bucket(35_000), 5);
        assert_eq!(hist_bucket(u64::MAX), YIELD_HIST_BUCKETS - 1);
        let mut c = [0u64; YIELD_HIST_BUCKETS];
        assert_eq!(hist_quantile(&c, 0.5), None);
        c[5] = 98;
        c[7] = 2;
        assert_eq!(hist_quantile(&c, 0.5), Some(64_000));
        assert_eq!(hist_quantile(&c, 0.98), Some(64_000));
        assert_eq!(hist_quantile(&c, 0.99), Some(256_000));
    }
}
