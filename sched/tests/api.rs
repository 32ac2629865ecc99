//! In-process tests of the public API (several clients in one process are arbitrated like
//! separate processes).
#![cfg(not(loom))]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{eventually, TestDir};
use softpreempt_sched::*;

const LIVENESS: Duration = Duration::from_secs(30);

fn info(p: &str, label: &str) -> ClientInfo {
    ClientInfo::new(p.parse().unwrap()).with_label(label)
}

#[test]
fn two_clients_in_one_process_obey_priority() {
    let d = TestDir::new("prio");
    let arb = Arbiter::open("dev0", &d.opts()).unwrap();
    let hi = arb.register(info("high", "hq")).unwrap();
    let lo = arb.register(info("low", "lq")).unwrap();
    assert_ne!(hi.slot(), lo.slot());
    assert!(lo.higher_priority_registered());
    assert!(!hi.higher_priority_registered());
    assert!(lo.contended());
    assert!(!hi.contended());

    hi.announce_demand();
    assert!(lo.should_yield());
    assert!(lo.try_acquire().is_none());
    let g = hi.try_acquire().expect("high is granted");
    g.complete(1000);
    assert!(lo.try_acquire().is_none());
    hi.idle();
    assert!(!lo.should_yield());
    lo.try_acquire()
        .expect("low is granted once high is idle")
        .complete(10);

    let st = lo.stats();
    assert_eq!(st.grants, 1);
    assert_eq!(st.slices, 1);
    assert_eq!(st.busy_ns, 10);
    assert_eq!(st.label, "lq");
    assert_eq!(st.priority, Some(Priority::LOW));
}

#[test]
fn acquire_times_out_with_error() {
    let d = TestDir::new("timeout");
    let arb = Arbiter::open("dev0", &d.opts()).unwrap();
    let hi = arb.register(info("high", "h")).unwrap();
    let lo = arb.register(info("normal", "l")).unwrap();
    hi.announce_demand();
    match lo.acquire(Duration::from_millis(30)) {
        Err(SchedError::Timeout) => {}
        other => panic!("expected a timeout, got {:?}", other.map(|_| ())),
    }
    let st = lo.stats();
    assert_eq!(st.yields, 1);
    assert_eq!(st.state, ClientState::Ready);
    assert!(st.demand);
}

#[test]
fn blocked_waiter_wakes_when_higher_goes_idle() {
    let d = TestDir::new("wake");
    let arb = Arc::new(Arbiter::open("dev0", &d.opts()).unwrap());
    let hi = arb.register(info("high", "h")).unwrap();
    hi.announce_demand();
    let arb2 = arb.clone();
    let t = std::thread::spawn(move || {
        let lo = arb2.register(info("low", "l")).unwrap();
        lo.acquire(LIVENESS).map(|g| g.complete(1)).is_ok()
    });
    eventually("low waits", LIVENESS, || {
        arb.snapshot()
            .clients
            .iter()
            .any(|c| c.label == "l" && c.state == ClientState::Waiting)
    });
    hi.idle();
    assert!(t.join().unwrap());
}

#[test]
fn linger_holds_lower_levels_then_expires() {
    let d = TestDir::new("linger");
    let mut o = d.opts();
    o.hp_linger = Duration::from_secs(20);
    let arb = Arbiter::open("long", &o).unwrap();
    let hi = arb.register(info("high", "h")).unwrap();
    let lo = arb.register(info("low", "l")).unwrap();
    hi.announce_demand();
    hi.try_acquire().unwrap().complete(5);
    hi.idle();
    assert!(lo.should_yield(), "demand lingers after idle");
    assert!(lo.try_acquire().is_none());
    assert_eq!(
        arb.snapshot().clients[hi.slot()].state,
        ClientState::Lingering
    );

    o.hp_linger = Duration::from_millis(50);
    let arb = Arbiter::open("short", &o).unwrap();
    let hi = arb.register(info("high", "h")).unwrap();
    let lo = arb.register(info("low", "l")).unwrap();
    hi.announce_demand();
    hi.idle();
    // The waiter sleeps until the linger deadline, with no waker needed.
    lo.acquire(LIVENESS).expect("linger expires").complete(1);
    // ... and the grant counts as one hand-back, with its gap and the piece's length.
    let st = lo.stats();
    assert_eq!(st.handbacks, 1, "{st:?}");
    assert!(st.handback_max_ns <= st.handback_ns && st.handback_ns == st.handback_max_ns);
    assert_eq!(st.piece_ns, 1);
    assert_eq!(hi.stats().handbacks, 0, "the high client never waited");
}

#[test]
fn linger_is_learned_from_idle_gaps() {
    let d = TestDir::new("learned-linger");
    let mut o = d.opts();
    o.hp_linger = Duration::from_millis(5);
    let arb = Arbiter::open("learned", &o).unwrap();
    let worth = Duration::from_millis(1);
    let hi = arb
        .register(info("high", "h").with_linger_worth(worth))
        .unwrap();
    let lo = arb.register(info("low", "l")).unwrap();
    assert_eq!(hi.linger(), o.hp_linger, "the cap until gaps are known");

    // Requests 30 ms apart (longer than the cap): a linger would catch none of them and
    // only hold the low client off an idle device.
    for _ in 0..6 {
        hi.announce_demand();
        hi.try_acquire().unwrap().complete(5);
        hi.idle();
        std::thread::sleep(Duration::from_millis(30));
    }
    assert_eq!(hi.linger_samples(), 5);
    assert_eq!(hi.linger(), Duration::ZERO);
    hi.announce_demand();
    hi.try_acquire().unwrap().complete(5);
    hi.idle();
    assert!(!lo.should_yield(), "no linger after a lone request");
    lo.try_acquire().expect("granted at once").complete(1);

    // Then bursts: the client comes back within about 50 µs, again and again. It lingers
    // again, just long enough for its gaps, never longer than the cap.
    for _ in 0..40 {
        hi.announce_demand();
        hi.idle();
        std::thread::sleep(Duration::from_micros(50));
    }
    let l = hi.linger();
    assert!(l > Duration::ZERO && l <= o.hp_linger, "linger {l:?}");
}

#[test]
fn a_grant_without_a_release_is_no_hand_back() {
    let d = TestDir::new("no-handback");
    let arb = Arbiter::open("dev0", &d.opts()).unwrap();
    let c = arb.register(info("low", "l")).unwrap();
    c.acquire(LIVENESS).unwrap().complete(1_000);
    c.try_acquire().unwrap().complete(3_000);
    let st = c.stats();
    assert_eq!(st.handbacks, 0, "{st:?}");
    // The decayed mean moves an eighth of the way towards the newest piece.
    assert_eq!(st.piece_ns, 1_000 - 1_000 / 8 + 3_000 / 8);
}

#[test]
fn max_inflight_bounds_grants_and_completion_from_another_thread() {
    let d = TestDir::new("inflight");
    let arb = Arbiter::open("dev0", &d.opts()).unwrap();
    assert_eq!(arb.policy().max_inflight, 2);
    let c = Arc::new(arb.register(info("normal", "q")).unwrap());
    let t1 = c.try_acquire().unwrap().into_token();
    let t2 = c.try_acquire().unwrap().into_token();
    assert!(c.try_acquire().is_none());
    assert_eq!(c.stats().inflight, 2);
    assert_eq!(c.stats().state, ClientState::Running);
    let c2 = c.clone();
    let waiter = std::thread::spawn(move || c2.acquire(LIVENESS).map(|g| g.complete(3)).is_ok());
    eventually("waiter blocks", LIVENESS, || {
        c.stats().state == ClientState::Waiting
    });
    c.complete_token(t1, 7);
    assert!(waiter.join().unwrap());
    c.complete_token(t2, 7);
    let st = c.stats();
    assert_eq!((st.inflight, st.slices, st.busy_ns), (0, 3, 17));
}

#[test]
fn dropped_grant_is_completed() {
    let d = TestDir::new("drop");
    let arb = Arbiter::open("dev0", &d.opts()).unwrap();
    let c = arb.register(info("normal", "q")).unwrap();
    for _ in 0..10 {
        let _g = c.try_acquire().unwrap();
    }
    assert_eq!(c.stats().inflight, 0);
}

#[test]
fn min_share_lets_lower_level_through() {
    let d = TestDir::new("share");
    let mut o = d.opts();
    o.min_share = 0.2;
    let arb = Arbiter::open("dev0", &o).unwrap();
    assert_eq!(arb.policy().min_share_every, 5);
    let hi = arb.register(info("high", "h")).unwrap();
    let lo = arb.register(info("low", "l")).unwrap();
    hi.announce_demand();
    lo.announce_demand();
    let mut low = 0u64;
    for _ in 0..200 {
        hi.try_acquire().unwrap().complete(1);
        if let Some(g) = lo.try_acquire() {
            assert!(g.is_share());
            g.complete(1);
            low += 1;
        }
    }
    assert!((30..=51).contains(&low), "low got {low} of 200 high slices");
    assert_eq!(lo.stats().share_grants, low);
}

#[test]
fn threads_in_one_level_all_finish() {
    let d = TestDir::new("threads");
    let arb = Arc::new(Arbiter::open("dev0", &d.opts()).unwrap());
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let arb = arb.clone();
            std::thread::spawn(move || {
                let c = arb.register(info("normal", &format!("t{i}"))).unwrap();
                for _ in 0..300 {
                    c.acquire(LIVENESS).unwrap().complete(1);
                }
                c.idle();
                c.stats().grants
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), 300);
    }
}

#[test]
fn full_segment_is_an_error_and_slots_are_reused() {
    let d = TestDir::new("full");
    let mut o = d.opts();
    o.max_clients = 2;
    let arb = Arbiter::open("dev0", &o).unwrap();
    let a = arb.register(info("normal", "a")).unwrap();
    let _b = arb.register(info("normal", "b")).unwrap();
    match arb.register(info("normal", "c")) {
        Err(e @ SchedError::Full { slots: 2 }) => assert!(e.to_string().contains("2 client slots")),
        other => panic!("expected Full, got {:?}", other.map(|_| ())),
    }
    drop(a);
    arb.register(info("normal", "c")).unwrap();
}

#[test]
fn second_opener_uses_segment_policy_and_inspect_sees_clients() {
    let d = TestDir::new("inspect");
    let mut o = d.opts();
    o.max_inflight = 1;
    let arb = Arbiter::open("gpu:0 UUID", &o).unwrap();
    let c = arb
        .register(info("high:3", "render").with_exe("game"))
        .unwrap();
    c.try_acquire().unwrap().complete(42);
    o.max_inflight = 4;
    let arb2 = Arbiter::open("gpu:0 UUID", &o).unwrap();
    assert_eq!(arb2.path(), arb.path());
    assert_eq!(arb2.policy().max_inflight, 1);

    let segs = list_segments(&d.0).unwrap();
    assert_eq!(segs, vec![arb.path().to_path_buf()]);
    let snap = inspect(&segs[0]).unwrap();
    assert_eq!(snap.device_key, "gpu:0 UUID");
    assert_eq!(snap.slot_count, 64);
    assert_eq!(snap.clients.len(), 1);
    let cs = &snap.clients[0];
    assert_eq!(cs.exe, "game");
    assert_eq!(cs.label, "render");
    assert_eq!(cs.priority.unwrap().to_string(), "high:3");
    assert_eq!((cs.grants, cs.slices, cs.busy_ns), (1, 1, 42));
    assert_eq!(cs.pid, std::process::id());
    assert_eq!(cs.lock_held, Some(true));
    assert_eq!(cs.process_alive, Some(true));
    drop(c);
    assert!(inspect(&segs[0]).unwrap().clients.is_empty());
}

#[test]
fn bad_options_are_rejected() {
    let d = TestDir::new("badopts");
    for f in [
        |o: &mut ArbiterOptions| o.max_clients = 0,
        |o: &mut ArbiterOptions| o.max_clients = 257,
        |o: &mut ArbiterOptions| o.max_inflight = 0,
        |o: &mut ArbiterOptions| o.min_share = 0.9,
        |o: &mut ArbiterOptions| o.hp_linger = Duration::from_secs(61),
    ] {
        let mut o = d.opts();
        f(&mut o);
        assert!(matches!(
            Arbiter::open("dev0", &o),
            Err(SchedError::InvalidArgument(_))
        ));
    }
    assert!(Arbiter::open("", &d.opts()).is_err());
}

/// A claim may be left from another thread (an event callback), and one left after its
/// client unregistered changes nothing: the slot may be someone else's by then.
#[test]
fn device_claims_travel_between_threads_and_outlive_their_client_harmlessly() {
    fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<DeviceClaim>();
    send_sync::<Client>();
    let d = TestDir::new("claims");
    let mut o = d.opts();
    o.max_clients = 1;
    let arb = Arbiter::open("dev-claims", &o).unwrap();
    let lo = Arc::new(arb.register(info("low", "lq")).unwrap());
    let a = lo.enter_device(Some(1000));
    let b = lo.enter_device(None);
    assert_eq!(lo.on_device(), 2);
    assert_eq!(b.yield_ns(), None);
    let lo2 = lo.clone();
    std::thread::spawn(move || lo2.leave_device(b, false))
        .join()
        .unwrap();
    assert_eq!(lo.on_device(), 1);
    assert_eq!(lo.stats().cannot_yield, 1);
    drop(Arc::into_inner(lo).expect("the only client handle"));
    // The one slot goes to a new client, which puts a launch of its own on the device.
    let next = arb.register(info("low", "next")).unwrap();
    let mine = next.enter_device(Some(1000));
    drop(a);
    assert_eq!(
        next.on_device(),
        1,
        "a stale claim changed the new owner's slot"
    );
    next.leave_device(mine, false);
    assert_eq!(next.on_device(), 0);
}

#[test]
fn memory_clients_hold_bytes_per_level_and_lower_ones_are_refused_past_the_reserve() {
    let d = TestDir::new("memory");
    let arb = Arbiter::open("dev0", &d.opts()).unwrap();
    let hi = arb.register(info("high", "memory").for_memory()).unwrap();
    let lo = arb.register(info("low", "memory").for_memory()).unwrap();
    let queue = arb.register(info("normal", "q")).unwrap();
    // A memory client is invisible to the scheduler.
    assert!(!queue.higher_priority_registered());
    assert!(!queue.lower_priority_registered());
    let policy = MemoryPolicy {
        device_bytes: 1000,
        reserve: [0, 0, 400],
        cap: [None; 3],
    };
    lo.charge_memory(600, &policy)
        .expect("low fits beside high's reserve");
    let r = lo.charge_memory(1, &policy).unwrap_err();
    assert_eq!(r.level, Level::Low);
    assert_eq!(r.requested, 1);
    assert!(matches!(
        r.reason,
        RefusalReason::Reserve {
            reserved_above: 400,
            ..
        }
    ));
    // High gets its whole reserve.
    hi.charge_memory(300, &policy).unwrap();
    hi.charge_memory(100, &policy).unwrap();
    assert_eq!(hi.memory_usage(), [600, 0, 400]);
    // Low frees: its next allocation passes again.
    lo.release_memory(600);
    lo.charge_memory(500, &policy).unwrap();

    let snap = arb.snapshot();
    assert_eq!(snap.mem_bytes_by_level(), [500, 0, 400]);
    assert_eq!(snap.mem_refusals, [1, 0, 0]);
    assert_eq!(snap.mem_device_bytes, 1000);
    let l = snap.clients.iter().find(|c| c.slot == lo.slot()).unwrap();
    assert!(l.memory);
    assert_eq!(
        (l.mem_bytes, l.mem_objects, l.mem_refusals, l.mem_peak),
        (500, 1, 1, 600)
    );
    assert!(
        !snap
            .clients
            .iter()
            .find(|c| c.slot == queue.slot())
            .unwrap()
            .memory
    );
    // A client gone takes its bytes with it.
    drop(hi);
    assert_eq!(lo.memory_usage(), [500, 0, 0]);
    // Off (no reserve, no cap): counted, never refused.
    lo.charge_memory(1 << 40, &MemoryPolicy::default()).unwrap();
    assert_eq!(lo.memory_usage(), [500 + (1 << 40), 0, 0]);
}

#[test]
fn wake_watchers_ends_a_watcher_s_wait() {
    let d = TestDir::new("wake");
    let arb = Arc::new(Arbiter::open("dev0", &d.opts()).unwrap());
    let seen = arb.yield_generation();
    let a = arb.clone();
    // Bounded by the liveness limit only: it ends by the wake (or, woken before it slept,
    // at once on the generation it finds changed), never by its timeout on a working
    // system.
    let waiter = std::thread::spawn(move || {
        let t = std::time::Instant::now();
        (a.wait_yield_generation(seen, LIVENESS), t.elapsed())
    });
    std::thread::sleep(Duration::from_millis(20));
    arb.wake_watchers();
    let (generation, waited) = waiter.join().unwrap();
    assert_ne!(generation, seen, "the generation did not change");
    assert!(waited < LIVENESS, "the watcher slept through the wake");
}

/// `lower_priority_active` skips the clock once it has seen every lower client idle past
/// the window: the skip must never hide a lower client that starts again, nor one that
/// registers later.
#[test]
fn lower_activity_is_seen_after_an_idle_verdict() {
    let d = TestDir::new("lower-idle");
    let arb = Arbiter::open("dev0", &d.opts()).unwrap();
    let hi = arb.register(info("high", "h")).unwrap();
    let window = Duration::from_millis(20);
    assert!(!hi.lower_priority_active(window), "no lower client");
    let lo = arb.register(info("low", "l")).unwrap();
    // Registering counts as activity.
    assert!(hi.lower_priority_active(window));
    std::thread::sleep(window * 2);
    assert!(!hi.lower_priority_active(window), "idle past the window");
    assert!(
        !hi.lower_priority_active(window),
        "still idle (no clock read)"
    );
    lo.announce_demand();
    assert!(hi.lower_priority_active(window), "busy again");
    lo.idle();
    assert!(hi.lower_priority_active(window), "active within the window");
    std::thread::sleep(window * 2);
    assert!(!hi.lower_priority_active(window));
    let lo2 = arb.register(info("normal", "n")).unwrap();
    assert!(
        hi.lower_priority_active(window),
        "a new lower client is active"
    );
    drop((lo, lo2));
    assert!(!hi.lower_priority_active(window), "none left");
}

/// A lower client that sends its work straight to the driver while every higher one is
/// idle (`higher_active_or_note`) records its own activity: the higher one's next
/// command finds it active (and raises demand), which the lower one sees at its next.
/// Without the record, neither would ever see the other again.
#[test]
fn a_lower_client_sending_direct_is_seen_by_an_idle_higher_one() {
    let d = TestDir::new("lower-direct");
    let arb = Arbiter::open("dev0", &d.opts()).unwrap();
    let window = Duration::from_millis(40);
    let hi = arb.register(info("high", "h")).unwrap();
    let lo = arb.register(info("low", "l")).unwrap();
    assert!(
        lo.higher_active_or_note(window),
        "registering counts as activity"
    );
    std::thread::sleep(window * 2);
    assert!(
        !hi.lower_priority_active(window),
        "both idle past the window"
    );
    assert!(!lo.higher_active_or_note(window), "the higher one is idle");
    assert!(
        hi.lower_priority_active(window),
        "the lower one's direct work is seen"
    );
    hi.announce_demand();
    assert!(lo.higher_active_or_note(window), "the higher one's demand");
    hi.idle();
    assert!(
        lo.higher_active_or_note(window),
        "within the window after it"
    );
    drop((hi, lo));
}
