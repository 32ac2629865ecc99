//! The yield handshake and leases with real processes: lower clients run in children
//! (this binary re-executed, `SP_ROLE=lp`) that act as a process's watcher does; the
//! higher client is the test itself. Assertions read counters from the segment; the only
//! deadlines are generous liveness limits and bounds long enough never to pass on a
//! working system.
#![cfg(not(loom))]

mod common;

use std::time::Duration;

use common::kids::*;
use common::{eventually, TestDir};
use softpreempt_sched::*;

const KEY: &str = "hs-device";

/// A bound no live lower client should reach here, however loaded the machine: a wait
/// that ends by it did not end by the client leaving.
const NEVER: Duration = Duration::from_secs(5);

/// Entry point of every child process; a no-op in the parent's test run.
#[test]
fn child_main() {
    let Some(role) = Role::of_child(KEY) else {
        return;
    };
    let arb = &role.arb;
    match role.name.as_str() {
        // A lower client with yielding launches: goes on the device whenever nothing
        // higher wants it, and leaves when asked (as its watcher would make it), with a
        // heartbeat while it waits. `SP_YIELD_NS=none`: its launches cannot yield.
        // `SP_SETTLE_MS`: it leaves first and says it yielded that long after (as a
        // yielding launch does once it has read its ticket).
        "lp" => {
            let settle = env("SP_SETTLE_MS").and_then(|v| v.parse().ok());
            let c = role.register();
            let bound = match env("SP_YIELD_NS").as_deref() {
                Some("none") => None,
                v => Some(
                    v.and_then(|v| v.parse().ok())
                        .unwrap_or(NEVER.as_nanos() as u64),
                ),
            };
            role.ready();
            loop {
                while c.should_yield() {
                    c.heartbeat();
                    std::thread::sleep(Duration::from_millis(1));
                }
                let claim = c.enter_device(bound);
                loop {
                    let seen = arb.yield_generation();
                    c.heartbeat();
                    if claim.yield_requested() {
                        break;
                    }
                    arb.wait_yield_generation(seen, arb.heartbeat_interval());
                }
                match settle {
                    Some(ms) => {
                        let left = c.leave_device_now(claim);
                        std::thread::sleep(Duration::from_millis(ms));
                        left.settle(true);
                    }
                    None => {
                        c.leave_device(claim, true);
                    }
                }
            }
        }
        // Demands the device, then shows no sign of life (the test stops it).
        "hog" => {
            let c = role.register();
            c.announce_demand();
            role.ready();
            std::thread::sleep(Duration::from_secs(600));
        }
        other => panic!("unknown role {other}"),
    }
}

fn open(dir: &TestDir, lease: Duration) -> Arbiter {
    let mut o = dir.opts();
    o.lease = lease;
    Arbiter::open(KEY, &o).unwrap()
}

fn lp(d: &TestDir, pri: &str, label: &str, yield_ns: &str) -> Kid {
    lp_with(d, pri, label, &[("SP_YIELD_NS", yield_ns.to_string())])
}

fn lp_with(d: &TestDir, pri: &str, label: &str, env: &[(&str, String)]) -> Kid {
    let k = spawn(d, "lp", pri, label, env);
    eventually("lower client ready", LIVENESS, || {
        d.0.join(format!("{label}.ready")).exists()
    });
    k
}

fn client(arb: &Arbiter, label: &str) -> Option<ClientStats> {
    arb.snapshot()
        .clients
        .into_iter()
        .find(|c| c.label == label && c.state != ClientState::Reclaimed)
}

fn on_device(arb: &Arbiter, label: &str) {
    eventually(&format!("{label} on the device"), LIVENESS, || {
        client(arb, label).is_some_and(|c| c.on_device > 0)
    });
}

fn stats(arb: &Arbiter, label: &str) -> ClientStats {
    client(arb, label).unwrap_or_else(|| panic!("no client {label}"))
}

/// A test's arbiter (leases of `lease`), a low-priority child "lp" publishing
/// `yield_ns`, and the test itself as the high-priority client "hp".
fn hp_over_lp(name: &str, lease: Duration, yield_ns: &str) -> (TestDir, Arbiter, Kid, Client) {
    let d = TestDir::new(name);
    let arb = open(&d, lease);
    let kid = lp(&d, "low", "lp", yield_ns);
    let hp = arb
        .register(ClientInfo::new(Priority::HIGH).with_label("hp"))
        .unwrap();
    (d, arb, kid, hp)
}

/// An HP waits for a lower client that leaves the device when asked, every time, and the
/// yields are counted on both sides.
#[test]
fn hp_waits_for_a_lower_client_that_leaves_when_asked() {
    let (_d, arb, _lp, hp) = hp_over_lp(
        "hs-leave",
        Duration::from_secs(30),
        &NEVER.as_nanos().to_string(),
    );
    let rounds = 10;
    for _ in 0..rounds {
        on_device(&arb, "lp");
        let hs = hp.claim_device(NEVER);
        assert_eq!(hs.lower_on_device, 1, "{hs:?}");
        assert!(!hs.expired, "the lower client did not leave: {hs:?}");
        hp.idle();
    }
    let h = stats(&arb, "hp");
    assert_eq!(h.hs_waits, rounds);
    assert_eq!(h.hs_expired, 0);
    assert!(h.hs_wait_max_ns > 0 && h.hs_wait_ns >= h.hs_wait_max_ns);
    let l = stats(&arb, "lp");
    assert!(l.yields_done >= rounds, "{l:?}");
    assert_eq!(l.yield_hist.iter().sum::<u64>(), rounds);
    assert!(l.yield_p50_ns.is_some() && l.yield_p99_ns >= l.yield_p50_ns);
    assert_eq!(l.yield_epoch as u64, rounds);
}

/// A lower launch that leaves the device before it knows whether it yielded (a yielding
/// launch reads its ticket after leaving) frees the waiting HP at its leave, and its
/// yield is counted when it settles. The HP here spins for its whole bound, as on a GPU.
#[test]
fn hp_goes_on_at_the_leave_and_the_yield_counts_at_the_settle() {
    let d = TestDir::new("hs-settle");
    let arb = open(&d, Duration::from_secs(30));
    let _lp = lp_with(
        &d,
        "low",
        "lp",
        &[
            ("SP_YIELD_NS", NEVER.as_nanos().to_string()),
            ("SP_SETTLE_MS", "3000".into()),
        ],
    );
    let hp = arb
        .register(ClientInfo::new(Priority::HIGH).with_label("hp"))
        .unwrap();
    on_device(&arb, "lp");
    let hs = hp.claim_device_spinning(NEVER, NEVER);
    assert_eq!(hs.lower_on_device, 1, "{hs:?}");
    assert!(!hs.expired, "the lower client did not leave: {hs:?}");
    // Its settle comes 3 s after its leave: the HP went on at the leave.
    assert_eq!(
        stats(&arb, "lp").yields_done,
        0,
        "counted before it settled"
    );
    hp.idle();
    eventually("the yield is counted once settled", LIVENESS, || {
        stats(&arb, "lp").yields_done == 1
    });
    let l = stats(&arb, "lp");
    assert_eq!(l.yield_hist.iter().sum::<u64>(), 1, "{l:?}");
}

/// Alone, or with nobody lower on the device, the HP does not wait.
#[test]
fn nobody_lower_on_the_device_means_no_wait() {
    let d = TestDir::new("hs-alone");
    let arb = open(&d, Duration::from_secs(30));
    let hp = arb.register(ClientInfo::new(Priority::HIGH)).unwrap();
    assert_eq!(hp.claim_device(NEVER), Handshake::default());
    let lo = arb.register(ClientInfo::new(Priority::LOW)).unwrap();
    assert_eq!(hp.claim_device(NEVER), Handshake::default());
    let claim = lo.enter_device(Some(1000));
    assert!(claim.preempted(), "the HP's demand was up when it entered");
    lo.leave_device(claim, false);
    assert_eq!(hp.claim_device(NEVER), Handshake::default());
}

/// A lower client whose claims publish 0 (a CPU device's launch with groups longer than
/// the cap) is asked to yield, and the HP does not wait for it.
#[test]
fn a_lower_client_that_publishes_zero_is_asked_and_not_waited_for() {
    let (_d, arb, _lp, hp) = hp_over_lp("hs-zero", Duration::from_secs(30), "0");
    on_device(&arb, "lp");
    let hs = hp.claim_device(NEVER);
    assert_eq!(hs.lower_on_device, 1, "{hs:?}");
    assert_eq!((hs.waited_ns, hs.expired), (0, false), "{hs:?}");
    eventually("the lower client yields", LIVENESS, || {
        stats(&arb, "lp").yields_done >= 1
    });
    hp.idle();
    let h = stats(&arb, "hp");
    assert_eq!((h.hs_expired, h.hs_wait_ns), (0, 0), "{h:?}");
}

/// A stopped LP: the first wait ends at the bound, and once its lease lapses later waits
/// skip its claim; after SIGCONT it yields again.
#[test]
fn a_stopped_lower_client_is_waited_for_only_until_the_bound_then_skipped() {
    let (_d, arb, lp_kid, hp) = hp_over_lp("hs-stop", Duration::from_secs(1), "50000000");
    on_device(&arb, "lp");
    lp_kid.stop();
    let first = hp.claim_device(NEVER);
    // Its lease (1 s) may already have lapsed on a slow machine: then it is skipped.
    assert!(
        (first.lower_on_device == 1 && first.expired) || first.lapsed == 1,
        "{first:?}"
    );
    hp.idle();
    eventually("the stopped client's claim lapses", LIVENESS, || {
        let hs = hp.claim_device(NEVER);
        hp.idle();
        std::thread::sleep(Duration::from_millis(50));
        hs.lapsed == 1 && hs.lower_on_device == 0 && hs.waited_ns == 0 && !hs.expired
    });
    assert!(stats(&arb, "hp").hs_lapsed >= 1);
    lp_kid.signal(libc::SIGCONT);
    eventually("the resumed client yields again", LIVENESS, || {
        stats(&arb, "lp").yields_done >= 1
    });
    on_device(&arb, "lp");
    let hs = hp.claim_device(NEVER);
    assert_eq!((hs.lower_on_device, hs.expired), (1, false), "{hs:?}");
}

/// A killed LP's claim is reclaimed: after one expired wait at most, nobody waits for it.
#[test]
fn a_killed_lower_client_s_claim_is_reclaimed() {
    let (_d, arb, mut lp_kid, hp) = hp_over_lp("hs-kill", Duration::from_secs(30), "50000000");
    on_device(&arb, "lp");
    lp_kid.kill9();
    eventually("the dead client's slot is reclaimed", LIVENESS, || {
        hp.claim_device(NEVER);
        hp.idle();
        client(&arb, "lp").is_none()
    });
    let snap = arb.snapshot();
    let dead = snap.clients.iter().find(|c| c.label == "lp").unwrap();
    assert_eq!(dead.state, ClientState::Reclaimed);
    assert_eq!(dead.on_device, 0);
    assert_eq!(hp.claim_device(NEVER), Handshake::default());
}

/// An LP whose launches cannot yield is not waited for, nor asked.
#[test]
fn a_lower_client_that_cannot_yield_is_not_waited_for() {
    let d = TestDir::new("hs-cannot");
    let arb = open(&d, Duration::from_secs(30));
    let _lp = lp(&d, "low", "lp", "none");
    let hp = arb.register(ClientInfo::new(Priority::HIGH)).unwrap();
    on_device(&arb, "lp");
    let hs = hp.claim_device(NEVER);
    assert_eq!(
        hs,
        Handshake {
            cannot_yield: 1,
            ..Default::default()
        }
    );
    let l = stats(&arb, "lp");
    assert!(l.cannot_yield >= 1);
    assert_eq!((l.yield_epoch, l.yields_done), (0, 0));
}

/// Two LPs (of two levels) are both asked, and the HP waits until both left.
#[test]
fn two_lower_clients_both_leave() {
    let d = TestDir::new("hs-two");
    let arb = open(&d, Duration::from_secs(30));
    let never = NEVER.as_nanos().to_string();
    let _a = lp(&d, "low", "a", &never);
    let _b = lp(&d, "normal", "b", &never);
    let hp = arb.register(ClientInfo::new(Priority::HIGH)).unwrap();
    for _ in 0..5 {
        on_device(&arb, "a");
        on_device(&arb, "b");
        let hs = hp.claim_device(NEVER);
        assert_eq!((hs.lower_on_device, hs.expired), (2, false), "{hs:?}");
        hp.idle();
    }
    assert!(stats(&arb, "a").yields_done >= 5);
    assert!(stats(&arb, "b").yields_done >= 5);
}

/// A client at the same priority is never asked to yield; a lower one beside it is.
#[test]
fn a_lower_client_at_the_same_level_is_not_asked() {
    let d = TestDir::new("hs-same");
    let arb = open(&d, Duration::from_secs(30));
    let never = NEVER.as_nanos().to_string();
    let _same = lp(&d, "normal", "same", &never);
    let _low = lp(&d, "low", "low", &never);
    let hp = arb.register(ClientInfo::new(Priority::NORMAL)).unwrap();
    on_device(&arb, "same");
    on_device(&arb, "low");
    let hs = hp.claim_device(NEVER);
    assert_eq!((hs.lower_on_device, hs.expired), (1, false), "{hs:?}");
    hp.idle();
    assert_eq!(stats(&arb, "same").yield_epoch, 0);
    assert_eq!(stats(&arb, "same").yields_done, 0);
    assert!(stats(&arb, "low").yields_done >= 1);
}

/// docs/cts.md item 5: a stopped process that demands the device at the same level holds
/// its peers only until its lease lapses, no longer until their acquire times out.
#[test]
fn a_stopped_peer_holds_its_equals_only_for_the_lease() {
    let d = TestDir::new("hs-rr-stop");
    let arb = open(&d, Duration::from_millis(300));
    let hog = spawn(&d, "hog", "normal", "hog", &[]);
    eventually("hog ready", LIVENESS, || d.0.join("hog.ready").exists());
    hog.stop();
    let peer = arb
        .register(ClientInfo::new(Priority::NORMAL).with_label("peer"))
        .unwrap();
    // The hog demands and is behind in virtual time: without leases the peer's second
    // grant would wait for it until the acquire timed out.
    for _ in 0..10 {
        peer.acquire(Duration::from_secs(20))
            .expect("a grant once the stopped peer's lease lapsed")
            .complete(100_000);
    }
    hog.signal(libc::SIGCONT);
}

/// A yield's latency, request to off the device, comes back to the launch that yielded
/// (the platform's next claims of that kernel publish at least that much); a launch that
/// left without a request measured nothing.
#[test]
fn leaving_after_a_request_returns_the_yield_latency() {
    let d = TestDir::new("hs-latency");
    let arb = open(&d, Duration::from_secs(30));
    let lo = arb.register(ClientInfo::new(Priority::LOW)).unwrap();
    let hp = arb.register(ClientInfo::new(Priority::HIGH)).unwrap();
    let claim = lo.enter_device(Some(1_000));
    assert_eq!(
        lo.leave_device(claim, true),
        None,
        "nobody asked it to yield"
    );
    let claim = lo.enter_device(Some(1_000));
    // A zero cap: the request goes out and the wait ends at once.
    let hs = hp.claim_device(Duration::ZERO);
    assert_eq!((hs.lower_on_device, hs.expired), (1, true), "{hs:?}");
    std::thread::sleep(Duration::from_millis(2));
    let ns = lo.leave_device(claim, true).expect("a measured yield");
    assert!((2_000_000..10_000_000_000).contains(&ns), "{ns} ns");
}
