//! Leases: what a client holds in the table (a place in the round robin, an on-device
//! claim) lapses when it shows no progress for `lease_ns`.
//!
//! A process that is stopped (SIGSTOP, a debugger, job control) keeps its OFD lock, so
//! dead-peer recovery cannot tell it from a live one; on the bare driver, though, a stopped
//! process holds nobody up. So every owner touches its slot's `progress_ns` at each sign of
//! life (demand, grant decisions, completions, idle, device enter and leave, and the
//! watcher's heartbeat), and peers skip what a client holds once that stamp is older than
//! the lease. A client that comes back after its lease lapsed rejoins the round robin at
//! the level's virtual clock, as a newcomer does: the peers did not wait for it, so it is
//! owed no catch-up burst.

use crate::layout::{MAX_LEASE_NS, MIN_LEASE_NS};
use crate::policy::View;
use crate::priority::Priority;
use crate::sync::Ordering;

/// The lease a segment records when the creator asks for none in range.
pub(crate) fn clamp_lease(ns: u64) -> u64 {
    ns.clamp(MIN_LEASE_NS, MAX_LEASE_NS)
}

impl View<'_> {
    /// Records a sign of life of slot `me` (its owner only). If its lease had lapsed while
    /// it demanded, it rejoins the round robin at the level's virtual clock.
    pub fn touch(&self, me: usize, pri: Priority, now: u64) {
        let s = &self.slots[me];
        let before = s.progress_ns.load(Ordering::Relaxed);
        s.progress_ns.store(now, Ordering::Relaxed);
        if before != 0
            && before.saturating_add(self.params.lease_ns) < now
            && self.has_demand(me, pri)
        {
            let vc = self.h.vclock[pri.level.index()].load(Ordering::Relaxed);
            s.vtime.fetch_max(vc, Ordering::Relaxed);
        }
    }

    /// When slot `j`'s lease lapses (CLOCK_MONOTONIC ns) unless it shows progress first.
    pub fn lapses_at(&self, j: usize) -> u64 {
        self.slots[j]
            .progress_ns
            .load(Ordering::Relaxed)
            .saturating_add(self.params.lease_ns)
    }

    /// Has slot `j` shown no progress for longer than the lease?
    pub fn lapsed(&self, j: usize, now: u64) -> bool {
        self.lapses_at(j) < now
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::policy::{Decision, HeapTable, Params, TEST_PARAMS};
    use crate::priority::Priority;
    use crate::sync::Ordering;

    /// Leases of 1 ms, so the tests' clock passes them.
    const P: Params = Params {
        lease_ns: 1_000_000,
        ..TEST_PARAMS
    };

    fn granted(d: Decision) -> bool {
        matches!(d, Decision::Granted { .. })
    }

    fn table(pris: &[Priority]) -> HeapTable {
        HeapTable::claimed(pris.len(), P, pris)
    }

    /// docs/cts.md item 5: a stopped process at the same level held its peers until their
    /// acquire timed out (90 s); now only until its lease lapses.
    #[test]
    fn a_same_level_peer_that_stops_loses_its_turn_after_the_lease() {
        let p = Priority::NORMAL;
        let t = table(&[p, p]);
        let v = t.view();
        v.announce(0, p, 1);
        v.announce(1, p, 1);
        assert!(granted(v.try_grant(1, p, 1)));
        v.complete(1, p, 2, 1000, 0);
        // Slot 0 (behind in virtual time) now shows no progress: slot 1 waits for it only
        // until its lease lapses, and is told when that is.
        let lapse = v.lapses_at(0);
        assert_eq!(
            v.try_grant(1, p, 3),
            Decision::Blocked {
                until_ns: Some(lapse + 1)
            }
        );
        assert!(granted(v.try_grant(1, p, lapse + 1)));
        // When it comes back it joins at the level's clock: no catch-up burst.
        v.complete(1, p, lapse + 2, 1000, 0);
        let now = lapse + 3;
        assert!(granted(v.try_grant(0, p, now)));
        assert!(
            t.slots[0].vtime.load(Ordering::Relaxed) >= t.slots[1].vtime.load(Ordering::Relaxed)
        );
    }
}
