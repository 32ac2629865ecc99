//! Device memory by priority: what each process holds on a device, and the reserve and
//! cap policy that a lower level's allocation must not break.
//!
//! Every process that allocates on a device registers one *memory client* there (a slot
//! in the `mem_clients` masks, never in `registered`, so the scheduler does not see it).
//! Its slot's `mem_bytes` is the device memory its live objects hold. A level's usage is
//! the sum over the live memory clients of that level: a dead process's bytes leave the
//! sum when its slot is reclaimed, as its demand does.
//!
//! Reservation protocol (race-free without a lock that a dying process could keep):
//! 1. add the request to the own slot's `mem_bytes` (`fetch_add`), then `fence(SeqCst)`;
//! 2. sum every memory client's `mem_bytes` per level (the own request included);
//! 3. judge ([`judge`]); if refused, take the request back out (`fetch_sub`).
//!
//! Of two concurrent allocators, each stores before it loads with a SeqCst fence
//! between, so at least one sees the other's bytes and judges both together: the two
//! can never both pass on sums that leave the other out. A request is counted from the
//! moment it is added, so a concurrent judge sees more than will stay (conservative),
//! never less. A request within its own level's reserve is not judged against other
//! levels at all, so such an in-flight request of a lower level can never make a higher
//! level's allocation within its reserve fail.

use crate::layout::{Slot, MASK_WORDS, SLOT_ACTIVE};
use crate::policy::View;
use crate::priority::{Level, LEVELS};
use crate::sync::{fence, AtomicU64, Ordering};

/// The memory policy of one device, in bytes (percentages already resolved).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryPolicy {
    /// `CL_DEVICE_GLOBAL_MEM_SIZE`; 0 when unknown (nothing is then refused for a
    /// reserve, since the free memory cannot be known).
    pub device_bytes: u64,
    /// Memory reserved for each level (index [`Level::index`]): no lower level's
    /// allocation may eat into what of it that level does not use yet.
    pub reserve: [u64; LEVELS],
    /// Most memory all the clients of a level may hold together; `None`: no cap.
    pub cap: [Option<u64>; LEVELS],
}

impl MemoryPolicy {
    /// Does this policy refuse anything? Without a reserve or a cap, memory is only
    /// counted.
    pub fn enabled(&self) -> bool {
        self.reserve.iter().any(|&r| r > 0) || self.cap.iter().any(Option::is_some)
    }
}

/// Why an allocation was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefusalReason {
    /// The level's clients would hold more than the level's cap.
    Cap {
        /// The cap, bytes.
        cap: u64,
    },
    /// The allocation would eat into memory reserved for higher levels.
    Reserve {
        /// Memory reserved for the higher levels that they do not use yet, bytes.
        reserved_above: u64,
        /// Bytes held by all memory clients of the device before the request.
        device_used: u64,
        /// `CL_DEVICE_GLOBAL_MEM_SIZE`.
        device_bytes: u64,
    },
}

/// An allocation the memory policy refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryRefusal {
    /// The allocating client's level.
    pub level: Level,
    /// Bytes asked for.
    pub requested: u64,
    /// Bytes the level's clients held before the request.
    pub level_bytes: u64,
    /// What was in the way.
    pub reason: RefusalReason,
}

impl std::fmt::Display for MemoryRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "a {} allocation of {} bytes (level holds {} bytes) ",
            self.level, self.requested, self.level_bytes
        )?;
        match self.reason {
            RefusalReason::Cap { cap } => write!(f, "would pass the level's cap of {cap} bytes"),
            RefusalReason::Reserve {
                reserved_above,
                device_used,
                device_bytes,
            } => write!(
                f,
                "would eat into the {reserved_above} bytes reserved for higher levels and \
                 not used by them ({device_used} of {device_bytes} bytes in use)"
            ),
        }
    }
}

/// Judges a request of `requested` bytes at `level`, given every level's usage *with the
/// request already added*. Pure.
///
/// * Over the level's cap: refused.
/// * Within the level's own reserve: allowed (never judged against other levels).
/// * Otherwise refused when higher levels have reserve left unused and the device's
///   counted usage plus that unused reserve would pass the device's size. Without unused
///   higher reserve nothing is refused: the vendor decides, as on the bare driver.
pub fn judge(
    policy: &MemoryPolicy,
    level: Level,
    usage: &[u64; LEVELS],
    requested: u64,
) -> Result<(), MemoryRefusal> {
    let l = level.index();
    let refusal = |reason| MemoryRefusal {
        level,
        requested,
        level_bytes: usage[l].saturating_sub(requested),
        reason,
    };
    if let Some(cap) = policy.cap[l] {
        if usage[l] > cap {
            return Err(refusal(RefusalReason::Cap { cap }));
        }
    }
    if usage[l] <= policy.reserve[l] || policy.device_bytes == 0 {
        return Ok(());
    }
    let reserved_above: u64 = (l + 1..LEVELS)
        .map(|m| policy.reserve[m].saturating_sub(usage[m]))
        .fold(0, u64::saturating_add);
    let used: u64 = usage.iter().fold(0, |a, &b| a.saturating_add(b));
    if reserved_above > 0 && used.saturating_add(reserved_above) > policy.device_bytes {
        return Err(refusal(RefusalReason::Reserve {
            reserved_above,
            device_used: used.saturating_sub(requested),
            device_bytes: policy.device_bytes,
        }));
    }
    Ok(())
}

fn bit(i: usize) -> (usize, u64) {
    (i / 64, 1u64 << (i % 64))
}

impl View<'_> {
    /// Bytes held per level by the live memory clients (the `mem_clients` masks; a slot
    /// counts only while active, so a reclaimed one's bytes are gone).
    pub fn mem_usage(&self) -> [u64; LEVELS] {
        let n = self.slots.len();
        std::array::from_fn(|l| {
            let mut sum = 0u64;
            for w in 0..n.div_ceil(64).min(MASK_WORDS) {
                let mut m = self.h.mem_clients[l][w].load(Ordering::Relaxed);
                while m != 0 {
                    let i = w * 64 + m.trailing_zeros() as usize;
                    m &= m - 1;
                    if let Some(s) = self.slots.get(i) {
                        if s.state.load(Ordering::Relaxed) == SLOT_ACTIVE {
                            sum = sum.saturating_add(s.mem_bytes.load(Ordering::Relaxed));
                        }
                    }
                }
            }
            sum
        })
    }

    /// Is slot `i` a memory client?
    pub fn is_memory_client(&self, i: usize) -> bool {
        let (w, b) = bit(i);
        self.h
            .mem_clients
            .iter()
            .any(|m| m[w].load(Ordering::Relaxed) & b != 0)
    }

    /// Counts `bytes` for memory client `me` without judging (no policy configured).
    pub fn mem_add(&self, me: usize, bytes: u64) {
        self.slots[me].mem_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Steps 1 and 2 of the reservation protocol for memory client `me`: adds
    /// `bytes` and returns every level's usage with them.
    pub fn mem_reserve(&self, me: usize, bytes: u64) -> [u64; LEVELS] {
        self.slots[me].mem_bytes.fetch_add(bytes, Ordering::Relaxed);
        // Pairs with the same fence of every other allocator (see the module doc).
        fence(Ordering::SeqCst);
        self.mem_usage()
    }

    /// An allocation of `bytes` passed: it is now one more live object.
    pub fn mem_admitted(&self, me: usize) {
        let s: &Slot = &self.slots[me];
        s.mem_objects.fetch_add(1, Ordering::Relaxed);
        s.mem_peak
            .fetch_max(s.mem_bytes.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    /// Step 3 of the protocol on refusal: takes the request back out and counts it.
    pub fn mem_refused(&self, me: usize, level: Level, bytes: u64) {
        let s = &self.slots[me];
        sub(&s.mem_bytes, bytes);
        s.mem_refusals.fetch_add(1, Ordering::Relaxed);
        self.h.mem_refusals[level.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// An object of `bytes` was released.
    pub fn mem_release(&self, me: usize, bytes: u64) {
        let s = &self.slots[me];
        sub(&s.mem_bytes, bytes);
        sub(&s.mem_objects, 1);
    }

    /// Records the device's size for status output (a store only when it changed).
    pub fn note_device_bytes(&self, bytes: u64) {
        if bytes != 0 && self.h.mem_device_bytes.load(Ordering::Relaxed) != bytes {
            self.h.mem_device_bytes.store(bytes, Ordering::Relaxed);
        }
    }
}

/// Subtracts, stopping at zero (a value from shared memory may have been damaged).
fn sub(a: &AtomicU64, v: u64) {
    let _ = a.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |x| {
        Some(x.saturating_sub(v))
    });
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::policy::{HeapTable, Params};
    use crate::priority::Priority;

    const GIB: u64 = 1 << 30;
    const P: Params = Params {
        max_inflight: 2,
        share_every: 0,
        linger_ns: 0,
        lease_ns: 1_000_000,
    };

    fn policy(reserve: [u64; 3], cap: [Option<u64>; 3]) -> MemoryPolicy {
        MemoryPolicy {
            device_bytes: 10 * GIB,
            reserve,
            cap,
        }
    }

    fn usage(low: u64, normal: u64, high: u64) -> [u64; 3] {
        [low, normal, high]
    }

    #[test]
    fn off_without_reserve_or_cap() {
        let p = policy([0; 3], [None; 3]);
        assert!(!p.enabled());
        assert_eq!(judge(&p, Level::Low, &usage(20 * GIB, 0, 0), GIB), Ok(()));
        assert!(policy([0, 0, 1], [None; 3]).enabled());
        assert!(policy([0; 3], [Some(0), None, None]).enabled());
    }

    #[test]
    fn lower_level_cannot_eat_into_unused_higher_reserve() {
        let p = policy([0, 0, 4 * GIB], [None; 3]);
        // 6 GiB free for low while high uses nothing of its 4 GiB.
        assert_eq!(judge(&p, Level::Low, &usage(6 * GIB, 0, 0), GIB), Ok(()));
        let r = judge(&p, Level::Low, &usage(6 * GIB + 1, 0, 0), GIB).unwrap_err();
        assert_eq!(r.level, Level::Low);
        assert_eq!(r.level_bytes, 5 * GIB + 1);
        assert_eq!(
            r.reason,
            RefusalReason::Reserve {
                reserved_above: 4 * GIB,
                device_used: 5 * GIB + 1,
                device_bytes: 10 * GIB
            }
        );
        // Normal is below high too.
        assert!(judge(&p, Level::Normal, &usage(3 * GIB, 4 * GIB, 0), GIB).is_err());
        // What high uses of its reserve is no longer reserved: low may use the rest.
        assert_eq!(
            judge(&p, Level::Low, &usage(6 * GIB, 0, 3 * GIB), GIB),
            Ok(())
        );
        assert!(judge(&p, Level::Low, &usage(6 * GIB, 0, 3 * GIB + 1), GIB).is_ok());
        assert!(judge(&p, Level::Low, &usage(7 * GIB, 0, 3 * GIB + 1), GIB).is_err());
    }

    #[test]
    fn higher_level_is_never_refused_within_its_reserve() {
        let p = policy([0, 2 * GIB, 4 * GIB], [None; 3]);
        // Even on a device that other levels filled (by counting) to the brim.
        assert_eq!(
            judge(&p, Level::High, &usage(10 * GIB, 10 * GIB, 4 * GIB), GIB),
            Ok(())
        );
        assert_eq!(
            judge(&p, Level::Normal, &usage(10 * GIB, 2 * GIB, 0), GIB),
            Ok(())
        );
        // High has no level above it: only a cap refuses it.
        assert_eq!(
            judge(&p, Level::High, &usage(4 * GIB, 2 * GIB, 9 * GIB), GIB),
            Ok(())
        );
    }

    #[test]
    fn cap_bounds_a_level_whatever_its_reserve() {
        let p = policy([0, 0, 4 * GIB], [Some(3 * GIB), None, Some(8 * GIB)]);
        assert_eq!(judge(&p, Level::Low, &usage(3 * GIB, 0, 0), GIB), Ok(()));
        let r = judge(&p, Level::Low, &usage(3 * GIB + 1, 0, 0), GIB).unwrap_err();
        assert_eq!(r.reason, RefusalReason::Cap { cap: 3 * GIB });
        assert!(judge(&p, Level::High, &usage(0, 0, 8 * GIB + 1), GIB).is_err());
        assert!(r.to_string().contains("cap of 3221225472 bytes"), "{r}");
    }

    #[test]
    fn unknown_device_size_refuses_only_by_cap() {
        let mut p = policy([0, 0, 4 * GIB], [None; 3]);
        p.device_bytes = 0;
        assert_eq!(judge(&p, Level::Low, &usage(100 * GIB, 0, 0), GIB), Ok(()));
    }

    #[test]
    fn usage_sums_active_memory_clients_per_level() {
        let t = HeapTable::new(70, P);
        let v = t.view();
        v.claim_as(0, Priority::LOW, true, |_| {});
        v.claim_as(65, Priority::LOW, true, |_| {});
        v.claim_as(3, Priority::HIGH, true, |_| {});
        v.claim(4, Priority::HIGH, |_| {});
        assert!(v.is_memory_client(3) && !v.is_memory_client(4));
        assert_eq!(v.mem_reserve(0, 10), [10, 0, 0]);
        assert_eq!(v.mem_reserve(65, 5), [15, 0, 0]);
        assert_eq!(v.mem_reserve(3, 7), [15, 0, 7]);
        v.mem_admitted(3);
        v.mem_refused(65, Level::Low, 5);
        assert_eq!(v.mem_usage(), [10, 0, 7]);
        assert_eq!(t.slots[65].mem_refusals.load(Ordering::Relaxed), 1);
        assert_eq!(t.h.mem_refusals[0].load(Ordering::Relaxed), 1);
        v.mem_release(3, 7);
        assert_eq!(v.mem_usage(), [10, 0, 0]);
        // A reclaimed (dead) client's bytes leave the sum with its slot.
        v.clear_slot(0, crate::layout::SLOT_RECLAIMED);
        assert_eq!(v.mem_usage(), [0, 0, 0]);
        assert!(!v.is_memory_client(0));
        // A new claim starts from zero.
        v.claim_as(0, Priority::NORMAL, true, |_| {});
        assert_eq!(t.slots[0].mem_bytes.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn memory_clients_are_invisible_to_the_scheduler() {
        let t = HeapTable::new(4, P);
        let v = t.view();
        v.claim(0, Priority::LOW, |_| {});
        v.claim_as(1, Priority::HIGH, true, |_| {});
        assert!(!v.higher_registered(0, Priority::LOW));
        assert!(!v.contended(0, Priority::LOW));
    }
}

#[cfg(loom)]
mod loom_tests {
    //! Model check of the reservation protocol, on the real code over loom atomics.
    use super::*;
    use crate::policy::{HeapTable, Params};
    use crate::priority::Priority;
    use loom::sync::Arc;
    use loom::thread;

    /// Two low allocations race for the last room beside a high reserve, where only one
    /// fits: they never both pass (at least one sees the other's bytes), and the bytes
    /// that stay are exactly those of the ones that passed.
    #[test]
    fn loom_two_allocations_never_both_pass_where_one_fits() {
        loom::model(|| {
            let t = HeapTable::new(
                2,
                Params {
                    max_inflight: 1,
                    share_every: 0,
                    linger_ns: 0,
                    lease_ns: 1_000_000_000,
                },
            );
            t.view().claim_as(0, Priority::LOW, true, |_| {});
            t.view().claim_as(1, Priority::LOW, true, |_| {});
            let t = Arc::new(t);
            // 100 bytes, 60 reserved for high: 40 for low, and each asks for 30.
            let policy = MemoryPolicy {
                device_bytes: 100,
                reserve: [0, 0, 60],
                cap: [None; LEVELS],
            };
            let alloc = move |t: &HeapTable, me: usize| {
                let v = t.view();
                let usage = v.mem_reserve(me, 30);
                let ok = judge(&policy, Level::Low, &usage, 30).is_ok();
                if ok {
                    v.mem_admitted(me);
                } else {
                    v.mem_refused(me, Level::Low, 30);
                }
                ok
            };
            let t2 = t.clone();
            let other = thread::spawn(move || alloc(&t2, 1));
            let mine = alloc(&t, 0);
            let theirs = other.join().unwrap();
            assert!(!(mine && theirs), "both passed where only one fits");
            let held = t.view().mem_usage()[Level::Low.index()];
            assert_eq!(held, 30 * (u64::from(mine) + u64::from(theirs)));
        });
    }
}
