//! The arbitration policy and its lock-free protocol, on a view of the shared table.
//!
//! Everything here is plain atomics on a [`View`] (header + slots) and a caller-supplied
//! clock, with no system calls, so the same code runs on the mapped segment, on a heap
//! table in unit tests, and under loom (`policy::loom_tests`).
//!
//! Policy: strict priority between (level, number) at slice granularity; round robin by
//! slices among demanding clients of the same priority (virtual time = device time used,
//! in µs, plus one per grant);
//! `hp_linger` keeps a client's demand raised for a while after it goes idle; a min share
//! lets a blocked lower client through once in every N grants; at most `max_inflight`
//! slices per client.
//!
//! Fast path: the decision reads the per-level summary masks in the header (a few words);
//! it only looks at individual slots that share the caller's level and are demanding or
//! lingering, so idle or lower clients cost nothing.
//!
//! Wake-up protocol (no lost wake-ups, checked by loom):
//! * waiter: set its `waiting` bit; `fence(SeqCst)`; `g = generation` (Acquire); decide;
//!   if blocked, futex-wait while `generation == g`.
//! * waker: change state; `fence(SeqCst)` then, if any `waiting` bit is set, bump
//!   `generation` (AcqRel), `fence(SeqCst)`, re-read the masks and FUTEX_WAKE.
//!
//! Priority protocol: a grant increments the slot's `inflight`, issues `fence(SeqCst)`,
//! then re-checks the higher demand masks and rolls back if one appeared. A higher client
//! sets its demand bit and issues `fence(SeqCst)`. So once `announce` returns, no lower
//! client can take a new grant, and the announcer sees (in `inflight`) every lower grant
//! that won the race.

use crate::layout::{
    Header, LevelMasks, Slot, MASK_WORDS, MAX_LINGER_NS, SLOT_ACTIVE, SLOT_CLAIMING, SLOT_FREE,
    SLOT_RECLAIMED,
};
use crate::priority::{Level, Priority, LEVELS};
use crate::sync::{fence, AtomicU64, Ordering};

/// Policy parameters, read once from the (validated) header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Params {
    pub max_inflight: u32,
    /// One min-share grant every N grants; 0 = off.
    pub share_every: u32,
    pub linger_ns: u64,
    /// How long a client may show no progress before what it holds lapses (`lease.rs`).
    pub lease_ns: u64,
}

/// The outcome of one grant decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Granted; `share` if by the min-share rule; `notify` if a waiter may now proceed.
    Granted { share: bool, notify: bool },
    /// A higher priority (or the round robin) is in the way. `until_ns`: the CLOCK_MONOTONIC
    /// time at which the blocking is known to end by itself (lingering only).
    Blocked { until_ns: Option<u64> },
    /// This client already has `max_inflight` slices granted.
    InflightFull,
}

/// What the clients of a strictly lower priority are doing ([`View::lower_state`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lower {
    /// None is registered.
    None,
    /// One has work queued (demand) or slices in flight.
    Busy,
    /// Registered, none busy; the latest CLOCK_MONOTONIC time any of them did anything.
    Idle { last_activity_ns: u64 },
}

/// The shared table as seen by the policy: a header and `slots.len()` validated slots.
pub(crate) struct View<'a> {
    pub h: &'a Header,
    pub slots: &'a [Slot],
    pub params: Params,
}

#[inline]
pub(crate) fn bit(i: usize) -> (usize, u64) {
    (i / 64, 1u64 << (i % 64))
}

impl<'a> View<'a> {
    #[inline]
    fn words(&self) -> usize {
        self.slots.len().div_ceil(64).min(MASK_WORDS)
    }

    /// Bits of word `w` that name real slots; garbage bits beyond `slot_count` are ignored.
    #[inline]
    fn valid(&self, w: usize) -> u64 {
        let n = self.slots.len();
        if (w + 1) * 64 <= n {
            u64::MAX
        } else {
            (1u64 << (n - w * 64)) - 1
        }
    }

    /// Set bits of a mask (valid range only), excluding `except`.
    #[inline]
    fn mask_word(&self, m: &[AtomicU64; MASK_WORDS], w: usize, except: usize) -> u64 {
        let (ew, eb) = bit(except);
        let mut v = m[w].load(Ordering::Relaxed) & self.valid(w);
        if w == ew {
            v &= !eb;
        }
        v
    }

    #[inline]
    pub(crate) fn any(&self, m: &[AtomicU64; MASK_WORDS], except: usize) -> bool {
        (0..self.words()).any(|w| self.mask_word(m, w, except) != 0)
    }

    /// Calls `f(slot index)` for each set bit, excluding `except`; stops when `f` returns false.
    #[inline]
    pub(crate) fn each(
        &self,
        m: &[AtomicU64; MASK_WORDS],
        except: usize,
        mut f: impl FnMut(usize) -> bool,
    ) {
        for w in 0..self.words() {
            let mut v = self.mask_word(m, w, except);
            while v != 0 {
                let b = v.trailing_zeros() as usize;
                v &= v - 1;
                if !f(w * 64 + b) {
                    return;
                }
            }
        }
    }

    fn any_level(&self, masks: &LevelMasks, except: usize) -> bool {
        masks.iter().any(|m| self.any(m, except))
    }

    #[inline]
    fn is_set(&self, m: &[AtomicU64; MASK_WORDS], i: usize) -> bool {
        let (w, b) = bit(i);
        m[w].load(Ordering::Relaxed) & b != 0
    }

    /// The number inside `level` of slot `i`; a corrupt rank reads as 0.
    #[inline]
    pub(crate) fn number_in(&self, i: usize, level: Level) -> u8 {
        match Priority::from_rank(self.slots[i].rank.load(Ordering::Relaxed)) {
            Some(p) if p.level == level => p.number,
            _ => 0,
        }
    }

    /// Is a strictly higher priority demanding (demand masks only, not linger)?
    fn higher_demand(&self, me: usize, pri: Priority) -> bool {
        let l = pri.level.index();
        if self.h.demand[l + 1..].iter().any(|m| self.any(m, me)) {
            return true;
        }
        let mut blocked = false;
        self.each(&self.h.demand[l], me, |j| {
            blocked = self.number_in(j, pri.level) > pri.number;
            !blocked
        });
        blocked
    }

    /// Latest unexpired linger deadline among strictly higher priorities, if any.
    fn higher_linger(&self, me: usize, pri: Priority, now: u64) -> Option<u64> {
        let l = pri.level.index();
        let mut until: Option<u64> = None;
        for (ll, m) in self.h.linger.iter().enumerate().skip(l) {
            self.each(m, me, |j| {
                if ll > l || self.number_in(j, pri.level) > pri.number {
                    // Clamp so a hostile deadline cannot park us for longer than the
                    // largest linger this build accepts.
                    let t = self.slots[j]
                        .linger_until_ns
                        .load(Ordering::Relaxed)
                        .min(now.saturating_add(MAX_LINGER_NS));
                    if t > now {
                        until = Some(until.map_or(t, |u: u64| u.max(t)));
                    }
                }
                true
            });
        }
        until
    }

    /// `None`: nothing of higher priority is in the way. `Some(until)`: blocked; `until` is
    /// when lingering alone would end it (`None` = only a state change ends it).
    pub fn blocked_by_higher(&self, me: usize, pri: Priority, now: u64) -> Option<Option<u64>> {
        if self.higher_demand(me, pri) {
            return Some(None);
        }
        self.higher_linger(me, pri, now).map(Some)
    }

    /// Round robin inside a priority: go only if no demanding peer of the same priority has
    /// a smaller virtual time (device time used, plus one per grant) than us. A peer whose
    /// lease lapsed (no progress: a stopped process) is passed over; `Err(at)`: when the
    /// lease of the first peer found in the way lapses, a time to decide again.
    fn rr_turn(&self, me: usize, pri: Priority, now: u64) -> Result<(), u64> {
        let my_vt = self.slots[me].vtime.load(Ordering::Relaxed);
        let mut recheck = None;
        self.each(&self.h.demand[pri.level.index()], me, |j| {
            if self.number_in(j, pri.level) == pri.number
                && self.slots[j].vtime.load(Ordering::Relaxed) < my_vt
                && !self.lapsed(j, now)
            {
                recheck = Some(self.lapses_at(j).saturating_add(1));
            }
            recheck.is_none()
        });
        recheck.map_or(Ok(()), Err)
    }

    /// Claims a min-share grant if one is due.
    fn take_share(&self) -> bool {
        let every = self.params.share_every as u64;
        if every == 0 {
            return false;
        }
        let total = self.h.total_grants.load(Ordering::Relaxed);
        let last = self.h.last_share_grant.load(Ordering::Relaxed);
        total.wrapping_sub(last) >= every
            && self
                .h
                .last_share_grant
                .compare_exchange(last, total, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    /// Is slot `me` demanding?
    pub fn has_demand(&self, me: usize, pri: Priority) -> bool {
        self.is_set(&self.h.demand[pri.level.index()], me)
    }

    /// Raises demand (work queued). Idempotent; true if demand was not raised before.
    pub fn announce(&self, me: usize, pri: Priority, now: u64) -> bool {
        let l = pri.level.index();
        if self.has_demand(me, pri) {
            return false;
        }
        let s = &self.slots[me];
        // Join the round robin at the level's current virtual time: no catch-up burst.
        let vc = self.h.vclock[l].load(Ordering::Relaxed);
        if s.vtime.load(Ordering::Relaxed) < vc {
            s.vtime.store(vc, Ordering::Relaxed);
        }
        s.last_activity_ns.store(now, Ordering::Relaxed);
        self.touch(me, pri, now);
        let (w, b) = bit(me);
        self.h.demand[l][w].fetch_or(b, Ordering::Relaxed);
        self.h.linger[l][w].fetch_and(!b, Ordering::Relaxed);
        self.h.activity.fetch_add(1, Ordering::Relaxed);
        // Pairs with the fence in `try_grant`: after this, lower grants see our demand.
        fence(Ordering::SeqCst);
        true
    }

    /// Drops demand; demand lingers until `now + linger_ns` (the client's own choice,
    /// at most the segment's `hp_linger`). Waiters may proceed: the caller must call
    /// [`View::notify`].
    pub fn idle(&self, me: usize, pri: Priority, now: u64, linger_ns: u64) {
        let l = pri.level.index();
        let s = &self.slots[me];
        let (w, b) = bit(me);
        let linger_ns = linger_ns.min(self.params.linger_ns);
        // Linger is raised before demand drops, so lower clients never see a gap.
        let release = now.saturating_add(linger_ns);
        if linger_ns > 0 {
            s.linger_until_ns.store(release, Ordering::Relaxed);
            self.h.linger[l][w].fetch_or(b, Ordering::Relaxed);
        }
        self.h.released_ns.fetch_max(release, Ordering::Relaxed);
        self.h.demand[l][w].fetch_and(!b, Ordering::Relaxed);
        s.last_activity_ns.store(now, Ordering::Relaxed);
        self.touch(me, pri, now);
    }

    /// Records a grant that came after waiting for a higher priority (`since`: when the
    /// wait began): the gap from that client's release (its idle, or its linger's end) to
    /// now, the statistic `softpreempt status` shows as the hand-back gap.
    pub fn note_handback(&self, me: usize, since: u64, now: u64) {
        let released = self.h.released_ns.load(Ordering::Relaxed);
        if released < since || released > now {
            // No release during the wait (a round-robin turn or the in-flight limit).
            return;
        }
        let s = &self.slots[me];
        let gap = now - released;
        s.handbacks.fetch_add(1, Ordering::Relaxed);
        s.handback_ns.fetch_add(gap, Ordering::Relaxed);
        s.handback_max_ns.fetch_max(gap, Ordering::Relaxed);
    }

    /// One grant decision for slot `me`. On `Granted`, the caller must call
    /// [`View::notify`] if `notify` is set.
    pub fn try_grant(&self, me: usize, pri: Priority, now: u64) -> Decision {
        // Deciding is a sign of life: a waiter keeps its place in the round robin.
        self.touch(me, pri, now);
        let s = &self.slots[me];
        let l = pri.level.index();
        let mut share = false;
        match self.blocked_by_higher(me, pri, now) {
            Some(until_ns) => {
                if s.inflight.load(Ordering::Relaxed) >= self.params.max_inflight
                    || !self.take_share()
                {
                    return Decision::Blocked { until_ns };
                }
                share = true;
            }
            None => {
                if let Err(at) = self.rr_turn(me, pri, now) {
                    return Decision::Blocked { until_ns: Some(at) };
                }
            }
        }
        let max = self.params.max_inflight;
        if s.inflight
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |x| {
                (x < max).then_some(x + 1)
            })
            .is_err()
        {
            return Decision::InflightFull;
        }
        let vt = s.vtime.load(Ordering::Relaxed);
        if !share {
            s.vtime.store(vt.saturating_add(1), Ordering::Relaxed);
        }
        // Pairs with the fence in `announce` (priority) and with waiters' fences.
        fence(Ordering::SeqCst);
        if !share && self.higher_demand(me, pri) {
            // A higher client announced while we decided: back out.
            s.vtime.store(vt, Ordering::Relaxed);
            let _ = s
                .inflight
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |x| x.checked_sub(1));
            return Decision::Blocked { until_ns: None };
        }
        if !share {
            self.h.vclock[l].fetch_max(vt.saturating_add(1), Ordering::Relaxed);
        }
        let total = self
            .h
            .total_grants
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_add(1);
        s.grants.fetch_add(1, Ordering::Relaxed);
        self.h.activity.fetch_add(1, Ordering::Relaxed);
        if share {
            s.share_grants.fetch_add(1, Ordering::Relaxed);
        }
        s.last_activity_ns.store(now, Ordering::Relaxed);
        // Round-robin peers may now be eligible; a due min share may let a lower one in.
        let mut notify = self.any(&self.h.waiting[l], me);
        if !notify && self.params.share_every > 0 {
            let due = total.wrapping_sub(self.h.last_share_grant.load(Ordering::Relaxed))
                >= self.params.share_every as u64;
            notify = due && self.h.waiting[..l].iter().any(|m| self.any(m, me));
        }
        Decision::Granted { share, notify }
    }

    /// Reports one slice done; a lingering client's linger (`linger_ns`, at most the
    /// segment's) restarts from now. Returns true if a waiter may proceed (call `notify`).
    pub fn complete(
        &self,
        me: usize,
        pri: Priority,
        now: u64,
        duration_ns: u64,
        linger_ns: u64,
    ) -> bool {
        let s = &self.slots[me];
        let _ = s
            .inflight
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |x| x.checked_sub(1));
        s.slices.fetch_add(1, Ordering::Relaxed);
        s.busy_ns.fetch_add(duration_ns, Ordering::Relaxed);
        // The round robin is fair in device time: a slice costs its virtual time one tick
        // when granted and its length in µs when done, so a peer cutting smaller slices
        // gets more of them instead of a smaller share of the device.
        let l = pri.level.index();
        let vt = s
            .vtime
            .fetch_add(duration_ns / 1000, Ordering::Relaxed)
            .saturating_add(duration_ns / 1000);
        self.h.vclock[l].fetch_max(vt, Ordering::Relaxed);
        s.last_activity_ns.store(now, Ordering::Relaxed);
        self.touch(me, pri, now);
        // Decayed mean piece length, weight 1/8 for the newest (one writer: the owner).
        let old = s.piece_ns.load(Ordering::Relaxed);
        let mean = if old == 0 {
            duration_ns
        } else {
            old - old / 8 + duration_ns / 8
        };
        s.piece_ns.store(mean, Ordering::Relaxed);
        let linger_ns = linger_ns.min(self.params.linger_ns);
        if linger_ns > 0 && self.is_set(&self.h.linger[l], me) {
            // Linger counts from the last completion, not from `idle`.
            let release = now.saturating_add(linger_ns);
            s.linger_until_ns.store(release, Ordering::Relaxed);
            self.h.released_ns.fetch_max(release, Ordering::Relaxed);
        }
        fence(Ordering::SeqCst);
        // Another thread of this client may wait for an in-flight slot, and a peer of the
        // same level may wait for its turn, which our charged time may have given it.
        self.any(&self.h.waiting[l], usize::MAX)
    }

    /// Marks slot `me` as waiting (or not). Setting it is followed by a SeqCst fence.
    pub fn set_waiting(&self, me: usize, pri: Priority, on: bool) {
        let (w, b) = bit(me);
        let m = &self.h.waiting[pri.level.index()][w];
        if on {
            m.fetch_or(b, Ordering::Relaxed);
            fence(Ordering::SeqCst);
        } else {
            m.fetch_and(!b, Ordering::Relaxed);
        }
    }

    /// Current generation (read before deciding, then futex-wait on it).
    pub fn generation(&self) -> u32 {
        self.h.generation.load(Ordering::Acquire)
    }

    /// Publishes a state change: bumps the generation. Returns true if any client waits,
    /// i.e. if the caller should FUTEX_WAKE.
    pub fn notify(&self) -> bool {
        self.h.generation.fetch_add(1, Ordering::AcqRel);
        fence(Ordering::SeqCst);
        self.any_level(&self.h.waiting, usize::MAX)
    }

    /// Is a strictly higher priority registered (even idle)?
    #[inline]
    pub fn higher_registered(&self, me: usize, pri: Priority) -> bool {
        let l = pri.level.index();
        if self.h.registered[l + 1..].iter().any(|m| self.any(m, me)) {
            return true;
        }
        let mut found = false;
        self.each(&self.h.registered[l], me, |j| {
            found = self.number_in(j, pri.level) > pri.number;
            !found
        });
        found
    }

    /// Is a strictly higher priority registered that wanted the device (demand, linger) or
    /// registered within `window_ns` before `now`? A lower client cuts its launches at the
    /// slice target only for such a one, and in longer pieces for one idle longer.
    pub fn higher_active(&self, me: usize, pri: Priority, now: u64, window_ns: u64) -> bool {
        let l = pri.level.index();
        let since = now.saturating_sub(window_ns);
        let mut found = false;
        for (ll, m) in self.h.registered.iter().enumerate().skip(l) {
            self.each(m, me, |j| {
                if ll > l || self.number_in(j, pri.level) > pri.number {
                    let s = &self.slots[j];
                    found = self.is_set(&self.h.demand[ll], j)
                        || s.last_activity_ns.load(Ordering::Relaxed) >= since
                        || s.linger_until_ns.load(Ordering::Relaxed) >= since;
                }
                !found
            });
            if found {
                return true;
            }
        }
        false
    }

    /// Records client `me` active at `now` (no demand, no grant): see
    /// `Client::higher_active_or_note`. Stores only when the recorded time is older than
    /// `every_ns`, so a client calling it per command does not keep taking the cache line
    /// that higher clients read on their every command.
    pub fn note_activity(&self, me: usize, now: u64, every_ns: u64) {
        let s = &self.slots[me];
        if s.last_activity_ns
            .load(Ordering::Relaxed)
            .saturating_add(every_ns)
            < now
        {
            s.last_activity_ns.store(now, Ordering::Relaxed);
        }
    }

    /// Device-wide count of new demands and grants (see `Header::activity`).
    pub fn activity(&self) -> u64 {
        self.h.activity.load(Ordering::Relaxed)
    }

    /// How many other clients have demand or slices in flight.
    pub fn others_busy(&self, me: usize) -> u32 {
        let mut n = 0u32;
        for (l, m) in self.h.registered.iter().enumerate() {
            self.each(m, me, |j| {
                if self.is_set(&self.h.demand[l], j)
                    || self.slots[j].inflight.load(Ordering::Relaxed) > 0
                {
                    n += 1;
                }
                true
            });
        }
        n
    }

    /// Is a strictly lower priority registered (even idle)? Only then does a client need to
    /// announce its demand for work it submits without asking for grants.
    pub fn lower_registered(&self, me: usize, pri: Priority) -> bool {
        self.any_lower(&self.h.registered, me, pri)
    }

    /// Is a slot of a strictly lower priority than `pri` set in `masks`?
    pub(crate) fn any_lower(&self, masks: &LevelMasks, me: usize, pri: Priority) -> bool {
        let l = pri.level.index();
        if masks[..l].iter().any(|m| self.any(m, me)) {
            return true;
        }
        let mut found = false;
        self.each(&masks[l], me, |j| {
            found = self.number_in(j, pri.level) < pri.number;
            !found
        });
        found
    }

    /// What the clients of a strictly lower priority than `pri` are doing, read without a
    /// clock. A lower client is busy with work queued (demand) or slices in flight; one
    /// that is not counts as active while its latest activity is recent (the caller's
    /// window, `Client::lower_priority_active`), so that the higher client's demand is
    /// already raised when it starts again. One pass over the registered masks.
    #[inline]
    pub fn lower_state(&self, me: usize, pri: Priority) -> Lower {
        let l = pri.level.index();
        let mut latest = None::<u64>;
        let mut busy = false;
        for (lvl, m) in self.h.registered[..=l].iter().enumerate() {
            self.each(m, me, |j| {
                if lvl == l && self.number_in(j, pri.level) >= pri.number {
                    return true;
                }
                let s = &self.slots[j];
                busy =
                    self.is_set(&self.h.demand[lvl], j) || s.inflight.load(Ordering::Relaxed) > 0;
                let last = s.last_activity_ns.load(Ordering::Relaxed);
                latest = Some(latest.map_or(last, |x| x.max(last)));
                !busy
            });
            if busy {
                return Lower::Busy;
            }
        }
        match latest {
            None => Lower::None,
            Some(last_activity_ns) => Lower::Idle { last_activity_ns },
        }
    }

    /// Records, and returns, how many lower-priority slices are in flight now: the work a
    /// submission of `me` may queue behind on the device (at most `max_inflight` per
    /// lower client while the arbiter works).
    pub fn note_behind(&self, me: usize, pri: Priority) -> u32 {
        let l = pri.level.index();
        let mut n = 0u32;
        for (lvl, m) in self.h.registered[..=l].iter().enumerate() {
            self.each(m, me, |j| {
                if lvl < l || self.number_in(j, pri.level) < pri.number {
                    n = n.saturating_add(self.slots[j].inflight.load(Ordering::Relaxed));
                }
                true
            });
        }
        self.slots[me]
            .behind_max
            .fetch_max(n as u64, Ordering::Relaxed);
        n
    }

    /// Is any other client of the same or higher priority registered?
    pub fn contended(&self, me: usize, pri: Priority) -> bool {
        let l = pri.level.index();
        if self.h.registered[l + 1..].iter().any(|m| self.any(m, me)) {
            return true;
        }
        let mut found = false;
        self.each(&self.h.registered[l], me, |j| {
            found = self.number_in(j, pri.level) >= pri.number;
            !found
        });
        found
    }

    /// Fills in a slot the caller has just locked, and publishes it as active (tests and
    /// loom models; clients claim through [`View::claim_as`]).
    #[cfg(any(test, loom))]
    pub fn claim(&self, me: usize, pri: Priority, fill: impl FnOnce(&Slot)) {
        self.claim_as(me, pri, false, fill)
    }

    /// [`View::claim`] for a scheduling client (`memory` false: it joins `registered`) or a
    /// memory client (it joins `mem_clients` only, so no scheduler decision sees it).
    pub fn claim_as(&self, me: usize, pri: Priority, memory: bool, fill: impl FnOnce(&Slot)) {
        let s = &self.slots[me];
        s.state.store(SLOT_CLAIMING, Ordering::Relaxed);
        for c in [
            &s.grants,
            &s.share_grants,
            &s.slices,
            &s.yields,
            &s.wait_ns,
            &s.busy_ns,
            &s.linger_until_ns,
            &s.behind_max,
            &s.handbacks,
            &s.handback_ns,
            &s.handback_max_ns,
            &s.piece_ns,
            &s.yield_bound_ns,
            &s.yield_request_ns,
            &s.yields_done,
            &s.cannot_yield,
            &s.hs_waits,
            &s.hs_wait_ns,
            &s.hs_wait_max_ns,
            &s.hs_expired,
            &s.hs_lapsed,
            &s.mem_bytes,
            &s.mem_objects,
            &s.mem_peak,
            &s.mem_refusals,
        ] {
            c.store(0, Ordering::Relaxed);
        }
        for b in &s.yield_hist {
            b.store(0, Ordering::Relaxed);
        }
        s.inflight.store(0, Ordering::Relaxed);
        s.on_device.store(0, Ordering::Relaxed);
        s.rank.store(pri.to_rank(), Ordering::Relaxed);
        s.vtime.store(
            self.h.vclock[pri.level.index()].load(Ordering::Relaxed),
            Ordering::Relaxed,
        );
        s.incarnation.fetch_add(1, Ordering::Relaxed);
        fill(s);
        s.state.store(SLOT_ACTIVE, Ordering::Release);
        let (w, b) = bit(me);
        let masks = if memory {
            &self.h.mem_clients
        } else {
            &self.h.registered
        };
        masks[pri.level.index()][w].fetch_or(b, Ordering::Release);
    }

    /// Clears every summary bit of slot `i` and its in-flight count; leaves it in `state`.
    /// The caller holds the slot's lock (its own, or a dead owner's).
    pub fn clear_slot(&self, i: usize, state: u32) {
        let (w, b) = bit(i);
        for masks in [
            &self.h.demand,
            &self.h.linger,
            &self.h.waiting,
            &self.h.registered,
            &self.h.on_device,
            &self.h.mem_clients,
        ] {
            for m in masks.iter() {
                m[w].fetch_and(!b, Ordering::Relaxed);
            }
        }
        self.h.handshake_waiting[w].fetch_and(!b, Ordering::Relaxed);
        let s = &self.slots[i];
        s.inflight.store(0, Ordering::Relaxed);
        // Its launches are gone with it: a higher client must not wait for them.
        s.on_device.store(0, Ordering::Relaxed);
        s.yield_bound_ns.store(0, Ordering::Relaxed);
        s.state.store(state, Ordering::Release);
        if state == SLOT_RECLAIMED {
            self.h.reclaims.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Releases slot `me` at unregister.
    pub fn release(&self, me: usize) {
        self.clear_slot(me, SLOT_FREE);
    }

    /// Slot `i` is claimed or active (a candidate for the liveness check).
    pub fn occupied(&self, i: usize) -> bool {
        matches!(
            self.slots[i].state.load(Ordering::Acquire),
            SLOT_ACTIVE | SLOT_CLAIMING
        )
    }

    /// Slot `i` is not owned yet shows up in a summary mask, or holds a state no process
    /// writes: values left by something that overwrote the table.
    pub fn stray(&self, i: usize) -> bool {
        let state = self.slots[i].state.load(Ordering::Acquire);
        let known = matches!(
            state,
            SLOT_FREE | SLOT_CLAIMING | SLOT_ACTIVE | SLOT_RECLAIMED
        );
        let (w, b) = bit(i);
        !known
            || self
                .level_bits(i)
                .iter()
                .any(|&(d, l, w, r)| d || l || w || r)
            || self
                .h
                .on_device
                .iter()
                .chain(std::iter::once(&self.h.handshake_waiting))
                .any(|m| m[w].load(Ordering::Relaxed) & b != 0)
    }

    /// Levels as an array, for status output.
    pub fn level_bits(&self, i: usize) -> [(bool, bool, bool, bool); LEVELS] {
        let (w, b) = bit(i);
        std::array::from_fn(|l| {
            (
                self.h.demand[l][w].load(Ordering::Relaxed) & b != 0,
                self.h.linger[l][w].load(Ordering::Relaxed) & b != 0,
                self.h.waiting[l][w].load(Ordering::Relaxed) & b != 0,
                self.h.registered[l][w].load(Ordering::Relaxed) & b != 0,
            )
        })
    }
}

/// A heap-allocated table for unit tests and loom models.
#[cfg(any(test, loom))]
pub(crate) struct HeapTable {
    pub h: Box<Header>,
    pub slots: Vec<Slot>,
    pub params: Params,
}

#[cfg(any(test, loom))]
impl HeapTable {
    pub fn new(n: usize, params: Params) -> Self {
        HeapTable {
            h: Header::new_boxed(),
            slots: (0..n).map(|_| Slot::new_zeroed()).collect(),
            params,
        }
    }
    pub fn view(&self) -> View<'_> {
        View {
            h: &self.h,
            slots: &self.slots,
            params: self.params,
        }
    }

    /// A table of `n` slots whose first ones are claimed with `pris`.
    pub fn claimed(n: usize, params: Params, pris: &[Priority]) -> Self {
        let t = HeapTable::new(n.max(pris.len()), params);
        for (i, p) in pris.iter().enumerate() {
            t.view().claim(i, *p, |_| {});
        }
        t
    }
}

/// Parameters of the unit tests' tables.
#[cfg(any(test, loom))]
pub(crate) const TEST_PARAMS: Params = Params {
    max_inflight: 2,
    share_every: 0,
    linger_ns: 0,
    lease_ns: 1_000_000_000,
};

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    const P: Params = TEST_PARAMS;

    fn table(n: usize, params: Params, pris: &[Priority]) -> HeapTable {
        HeapTable::claimed(n, params, pris)
    }

    fn granted(d: Decision) -> bool {
        matches!(d, Decision::Granted { .. })
    }

    #[test]
    fn alone_grants_up_to_max_inflight() {
        let t = table(4, P, &[Priority::NORMAL]);
        let v = t.view();
        v.announce(0, Priority::NORMAL, 1);
        assert!(granted(v.try_grant(0, Priority::NORMAL, 1)));
        assert!(granted(v.try_grant(0, Priority::NORMAL, 1)));
        assert_eq!(v.try_grant(0, Priority::NORMAL, 1), Decision::InflightFull);
        v.complete(0, Priority::NORMAL, 2, 100, v.params.linger_ns);
        assert!(granted(v.try_grant(0, Priority::NORMAL, 2)));
        assert_eq!(t.slots[0].grants.load(Ordering::Relaxed), 3);
        assert_eq!(t.slots[0].busy_ns.load(Ordering::Relaxed), 100);
    }

    #[test]
    fn higher_is_active_while_it_wants_the_device_and_for_a_window_after() {
        let (hi, lo) = (Priority::HIGH, Priority::LOW);
        let t = table(4, P, &[hi, lo]);
        let v = t.view();
        // Registered at time 0 (last activity 0): active within the window only.
        assert!(v.higher_active(1, lo, 1_000, 5_000));
        assert!(!v.higher_active(1, lo, 10_000, 5_000));
        v.announce(0, hi, 10_000);
        assert!(
            v.higher_active(1, lo, 1_000_000, 5_000),
            "demand is activity"
        );
        v.idle(0, hi, 1_000_000, v.params.linger_ns);
        assert!(v.higher_active(1, lo, 1_004_000, 5_000));
        assert!(!v.higher_active(1, lo, 1_006_000, 5_000));
        // Nobody is above the high client.
        assert!(!v.higher_active(0, hi, 1_000_000, u64::MAX));
    }

    #[test]
    fn higher_demand_blocks_lower_until_idle() {
        let (hi, lo) = (Priority::HIGH, Priority::LOW);
        let t = table(4, P, &[hi, lo]);
        let v = t.view();
        v.announce(0, hi, 1);
        v.announce(1, lo, 1);
        assert_eq!(v.try_grant(1, lo, 1), Decision::Blocked { until_ns: None });
        assert!(granted(v.try_grant(0, hi, 1)));
        v.idle(0, hi, 2, v.params.linger_ns);
        assert!(granted(v.try_grant(1, lo, 2)));
    }

    #[test]
    fn number_inside_level_orders() {
        let a: Priority = "normal:2".parse().unwrap();
        let b: Priority = "normal:1".parse().unwrap();
        let t = table(4, P, &[a, b]);
        let v = t.view();
        v.announce(0, a, 1);
        v.announce(1, b, 1);
        assert!(!granted(v.try_grant(1, b, 1)));
        assert!(granted(v.try_grant(0, a, 1)));
        assert!(v.higher_registered(1, b));
        assert!(!v.higher_registered(0, a));
    }

    #[test]
    fn linger_blocks_lower_until_deadline() {
        let params = Params {
            linger_ns: 1000,
            ..P
        };
        let (hi, lo) = (Priority::HIGH, Priority::LOW);
        let t = table(4, params, &[hi, lo]);
        let v = t.view();
        v.announce(0, hi, 10);
        v.idle(0, hi, 10, v.params.linger_ns);
        v.announce(1, lo, 10);
        assert_eq!(
            v.try_grant(1, lo, 500),
            Decision::Blocked {
                until_ns: Some(1010)
            }
        );
        // A completion while lingering pushes the deadline.
        v.complete(0, hi, 800, 1, v.params.linger_ns);
        assert!(!granted(v.try_grant(1, lo, 1500)));
        assert!(granted(v.try_grant(1, lo, 1801)));
    }

    #[test]
    fn round_robin_alternates() {
        let p = Priority::NORMAL;
        let params = Params {
            max_inflight: 1,
            ..P
        };
        let t = table(4, params, &[p, p, p]);
        let v = t.view();
        for i in 0..3 {
            v.announce(i, p, 1);
        }
        let mut order = Vec::new();
        for _ in 0..30 {
            for i in 0..3 {
                if granted(v.try_grant(i, p, 1)) {
                    order.push(i);
                    v.complete(i, p, 1, 1, v.params.linger_ns);
                }
            }
        }
        let counts: Vec<usize> = (0..3)
            .map(|i| order.iter().filter(|&&x| x == i).count())
            .collect();
        assert_eq!(counts, vec![30, 30, 30]);
        // A client that tries twice in a row is held back until the others had a turn.
        assert!(granted(v.try_grant(0, p, 1)));
        v.complete(0, p, 1, 1, v.params.linger_ns);
        assert!(!granted(v.try_grant(0, p, 1)));
    }

    #[test]
    fn late_joiner_gets_no_catch_up_burst() {
        let p = Priority::NORMAL;
        let t = table(4, P, &[p, p]);
        let v = t.view();
        v.announce(0, p, 1);
        for _ in 0..50 {
            assert!(granted(v.try_grant(0, p, 1)));
            v.complete(0, p, 1, 1, v.params.linger_ns);
        }
        v.announce(1, p, 1);
        // The newcomer starts level with the incumbent: they alternate right away.
        assert!(granted(v.try_grant(0, p, 1)));
        v.complete(0, p, 1, 1, v.params.linger_ns);
        assert!(!granted(v.try_grant(0, p, 1)));
        assert!(granted(v.try_grant(1, p, 1)));
    }

    #[test]
    fn min_share_lets_lower_through() {
        let params = Params {
            share_every: 4,
            ..P
        };
        let (hi, lo) = (Priority::HIGH, Priority::LOW);
        let t = table(4, params, &[hi, lo]);
        let v = t.view();
        v.announce(0, hi, 1);
        v.announce(1, lo, 1);
        let mut low = 0;
        for _ in 0..400 {
            if granted(v.try_grant(0, hi, 1)) {
                v.complete(0, hi, 1, 1, v.params.linger_ns);
            }
            if let Decision::Granted { share, .. } = v.try_grant(1, lo, 1) {
                assert!(share);
                low += 1;
                v.complete(1, lo, 1, 1, v.params.linger_ns);
            }
        }
        let high = t.slots[0].grants.load(Ordering::Relaxed);
        assert!(low > 0);
        // One in four grants overall goes to the lower level.
        assert!(low * 4 <= high + low + 4, "low {low} high {high}");
        assert_eq!(t.slots[1].share_grants.load(Ordering::Relaxed), low);
    }

    #[test]
    fn garbage_masks_and_ranks_do_not_panic() {
        let t = table(3, P, &[Priority::NORMAL]);
        for masks in [&t.h.demand, &t.h.linger, &t.h.waiting, &t.h.registered] {
            for m in masks.iter() {
                for w in m {
                    w.store(u64::MAX, Ordering::Relaxed);
                }
            }
        }
        for s in &t.slots[1..] {
            s.rank.store(u32::MAX, Ordering::Relaxed);
            s.linger_until_ns.store(u64::MAX, Ordering::Relaxed);
            s.vtime.store(u64::MAX, Ordering::Relaxed);
        }
        let v = t.view();
        let d = v.try_grant(0, Priority::NORMAL, 5);
        assert!(matches!(d, Decision::Blocked { .. }), "{d:?}");
        assert!(v.higher_registered(0, Priority::NORMAL));
        for i in 0..3 {
            v.clear_slot(i, SLOT_RECLAIMED);
        }
        assert!(!v.any_level(&t.h.registered, usize::MAX));
    }

    #[test]
    fn clear_slot_drops_demand_of_dead_client() {
        let (hi, lo) = (Priority::HIGH, Priority::LOW);
        let t = table(4, P, &[hi, lo]);
        let v = t.view();
        v.announce(0, hi, 1);
        assert!(granted(v.try_grant(0, hi, 1)));
        v.announce(1, lo, 1);
        assert!(!granted(v.try_grant(1, lo, 1)));
        v.clear_slot(0, SLOT_RECLAIMED);
        assert!(granted(v.try_grant(1, lo, 1)));
        assert_eq!(t.h.reclaims.load(Ordering::Relaxed), 1);
        assert_eq!(t.slots[0].state.load(Ordering::Relaxed), SLOT_RECLAIMED);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Model checks of the protocol, on the real policy code over loom atomics.
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    const P: Params = TEST_PARAMS;

    fn table(pris: &[Priority]) -> Arc<HeapTable> {
        Arc::new(HeapTable::claimed(pris.len(), P, pris))
    }

    /// A lower grant that survives always shows in `inflight` to a higher client that has
    /// announced: no lower grant slips past an announced higher demand unseen.
    #[test]
    fn loom_priority_announce_vs_lower_grant() {
        loom::model(|| {
            let (hi, lo) = (Priority::HIGH, Priority::LOW);
            let t = table(&[hi, lo]);
            let t2 = t.clone();
            let low = thread::spawn(move || {
                let v = t2.view();
                v.announce(1, lo, 0);
                matches!(v.try_grant(1, lo, 0), Decision::Granted { .. })
            });
            let v = t.view();
            v.announce(0, hi, 0);
            let seen = t.slots[1].inflight.load(Ordering::Relaxed);
            let low_granted = low.join().unwrap();
            if low_granted {
                assert_eq!(seen, 1, "lower grant raced past an announced higher demand");
            }
        });
    }

    /// A waiter blocked by a higher client is never left asleep after that client idles:
    /// either its decision sees the change, or its futex value is stale, or the waker sees
    /// its waiting bit and wakes it.
    #[test]
    fn loom_no_lost_wakeup() {
        loom::model(|| {
            let (hi, lo) = (Priority::HIGH, Priority::LOW);
            let t = table(&[hi, lo]);
            t.view().announce(0, hi, 0);
            t.view().announce(1, lo, 0);
            let t2 = t.clone();
            let waker = thread::spawn(move || {
                let v = t2.view();
                v.idle(0, hi, 0, v.params.linger_ns);
                v.notify()
            });
            let v = t.view();
            v.set_waiting(1, lo, true);
            let g = v.generation();
            let granted = matches!(v.try_grant(1, lo, 0), Decision::Granted { .. });
            // Models FUTEX_WAIT's atomic compare: sleeps only if the word is unchanged.
            let would_sleep = !granted && v.h.generation.load(Ordering::Acquire) == g;
            let woke = waker.join().unwrap();
            if would_sleep {
                assert!(woke, "lost wake-up: waiter asleep and waker saw no waiter");
            }
        });
    }

    /// Round-robin peers: after a grant, a peer waiting for its turn is notified.
    #[test]
    fn loom_round_robin_wakeup() {
        loom::model(|| {
            let p = Priority::NORMAL;
            let t = table(&[p, p]);
            let v0 = t.view();
            v0.announce(0, p, 0);
            v0.announce(1, p, 0);
            // Slot 1 is ahead by one slice, so it must wait for slot 0's grant.
            t.slots[1].vtime.store(1, Ordering::Relaxed);
            let t2 = t.clone();
            let granter = thread::spawn(move || match t2.view().try_grant(0, p, 0) {
                Decision::Granted { notify, .. } => notify && t2.view().notify(),
                d => panic!("slot 0 should be granted, got {d:?}"),
            });
            let v = t.view();
            v.set_waiting(1, p, true);
            let g = v.generation();
            let granted = matches!(v.try_grant(1, p, 0), Decision::Granted { .. });
            let would_sleep = !granted && v.h.generation.load(Ordering::Acquire) == g;
            let woke = granter.join().unwrap();
            if would_sleep {
                assert!(woke, "lost round-robin wake-up");
            }
        });
    }

    /// Handshake, first Dekker pair: a lower launch entering the device and a higher
    /// client raising demand never miss each other. Either the higher client sees the
    /// claim (and will ask it to yield) or the claim sees the demand (`preempted`).
    #[test]
    fn loom_claim_vs_demand() {
        loom::model(|| {
            let (hi, lo) = (Priority::HIGH, Priority::LOW);
            let t = table(&[hi, lo]);
            let t2 = t.clone();
            let low = thread::spawn(move || t2.view().enter_device(1, lo, 1000, 0));
            let v = t.view();
            v.announce(0, hi, 0);
            let saw = v.lower_on_device(0, hi);
            let preempted = low.join().unwrap();
            assert!(
                saw || preempted,
                "a launch went on the device unseen and unwarned"
            );
        });
    }

    /// Handshake, second pair: a higher client waiting for a lower one to leave is never
    /// left asleep after it left: either it sees the claim gone, or its futex value is
    /// stale, or the leaver sees its waiting bit and bumps the word.
    #[test]
    fn loom_leave_wakes_the_handshake() {
        loom::model(|| {
            let (hi, lo) = (Priority::HIGH, Priority::LOW);
            let t = table(&[hi, lo]);
            let v = t.view();
            v.enter_device(1, lo, 1000, 0);
            v.announce(0, hi, 0);
            let r = v.request_yields(0, hi, 0);
            assert_eq!(r.count, 1);
            let t2 = t.clone();
            let leaver = thread::spawn(move || {
                let v = t2.view();
                let wake = v.leave_device(1, lo, 0, 0);
                if wake {
                    v.notify_leave();
                }
                wake
            });
            v.set_handshake_waiting(0, true);
            let g = v.h.leave_generation.load(Ordering::Acquire);
            let off = v.all_off(&r);
            let would_sleep = !off && v.h.leave_generation.load(Ordering::Acquire) == g;
            let woke = leaver.join().unwrap();
            if would_sleep {
                assert!(woke, "lost wake-up: the higher client sleeps to its bound");
            }
        });
    }

    /// Handshake, the watcher: one that reads the yield generation, then its client's
    /// epoch, and sees no request, reads a generation that a request bumps afterwards, so
    /// its FUTEX_WAIT on it cannot sleep through that request (the requester wakes the word
    /// after the bump).
    #[test]
    fn loom_yield_request_reaches_the_watcher() {
        loom::model(|| {
            let (hi, lo) = (Priority::HIGH, Priority::LOW);
            let t = table(&[hi, lo]);
            let v = t.view();
            v.enter_device(1, lo, 1000, 0);
            let e0 = t.slots[1].yield_epoch.load(Ordering::Relaxed);
            let t2 = t.clone();
            let higher = thread::spawn(move || {
                let v = t2.view();
                v.announce(0, hi, 0);
                v.request_yields(0, hi, 0).count
            });
            let g = t.h.yield_generation.load(Ordering::Acquire);
            let e = t.slots[1].yield_epoch.load(Ordering::Acquire);
            let asked = higher.join().unwrap();
            assert_eq!(asked, 1);
            if e == e0 {
                assert_ne!(
                    t.h.yield_generation.load(Ordering::Acquire),
                    g,
                    "the watcher missed the request and would sleep on a current word"
                );
            }
        });
    }

    /// Publish protocol: a reader that sees the magic sees every field written before it.
    #[test]
    fn loom_header_publish() {
        use crate::layout::{MAGIC, VERSION};
        loom::model(|| {
            let t = Arc::new(HeapTable::new(1, P));
            let t2 = t.clone();
            let h = &t.h;
            let creator = thread::spawn(move || {
                let h2 = &t2.h;
                h2.version.store(VERSION, Ordering::Relaxed);
                h2.slot_count.store(64, Ordering::Relaxed);
                h2.magic.store(MAGIC, Ordering::Release);
            });
            if h.magic.load(Ordering::Acquire) == MAGIC {
                assert_eq!(h.version.load(Ordering::Relaxed), VERSION);
                assert_eq!(h.slot_count.load(Ordering::Relaxed), 64);
            }
            creator.join().unwrap();
        });
    }
}
