//! Multi-process tests: real processes (this test binary re-executed in a child role,
//! selected by `SP_ROLE`) share a segment. Assertions use counters read from the segment
//! and files written by the children; deadlines are generous liveness limits only.
#![cfg(not(loom))]

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::kids::*;
use common::{eventually, TestDir};
use softpreempt_sched::*;

const KEY: &str = "mp-device";

/// Grants of every client by label, from a snapshot.
fn grants_by_label(arb: &Arbiter) -> HashMap<String, u64> {
    arb.snapshot()
        .clients
        .into_iter()
        .filter(|c| c.state != ClientState::Reclaimed)
        .map(|c| (c.label, c.grants))
        .collect()
}

fn write_map(path: &Path, m: &HashMap<String, u64>) {
    let s: String = m.iter().map(|(k, v)| format!("{k} {v}\n")).collect();
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, s).unwrap();
    std::fs::rename(tmp, path).unwrap();
}

fn read_map(path: &Path) -> HashMap<String, u64> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

/// Entry point of every child process; a no-op in the parent's test run.
#[test]
fn child_main() {
    let Some(role) = Role::of_child(KEY) else {
        return;
    };
    let (arb, dir, label, pri) = (&role.arb, &role.dir, &role.label, role.pri);
    match role.name.as_str() {
        // Registers, raises demand, optionally takes a grant, then sleeps until killed.
        "hog" => {
            let c = arb
                .register(ClientInfo::new(pri).with_label(label))
                .unwrap();
            c.announce_demand();
            let grant = (env("SP_HOLD").as_deref() == Some("grant"))
                .then(|| c.try_acquire().expect("hog gets its grant"));
            // A second client of the same process, to show both are reclaimed.
            let extra = env("SP_EXTRA").map(|_| {
                arb.register(ClientInfo::new(pri).with_label(&format!("{label}-2")))
                    .unwrap()
            });
            touch(&dir.join(format!("{label}.ready")));
            std::thread::sleep(Duration::from_secs(600));
            drop((grant, extra));
        }
        // Loops acquire → work → complete; optional idle gap between slices; optional go
        // barrier; writes snapshots of everyone's grants at start and end.
        "worker" => {
            let c = arb
                .register(ClientInfo::new(pri).with_label(label))
                .unwrap();
            let slices = env_u64("SP_SLICES", 0);
            let work = Duration::from_micros(env_u64("SP_WORK_US", 100));
            let gap = Duration::from_micros(env_u64("SP_GAP_US", 0));
            c.announce_demand();
            if let Some(go) = env("SP_GO") {
                touch(&dir.join(format!("{label}.ready")));
                while !Path::new(&go).exists() {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            // Its IPC namespace, for the test that runs workers in namespaces of their own.
            let ns = std::fs::read_link("/proc/self/ns/ipc").unwrap_or_default();
            std::fs::write(
                dir.join(format!("{label}.ipcns")),
                ns.as_os_str().as_encoded_bytes(),
            )
            .unwrap();
            write_map(&dir.join(format!("{label}.start")), &grants_by_label(arb));
            let mut n = 0u64;
            while slices == 0 || n < slices {
                let g = c
                    .acquire(Duration::from_secs(60))
                    .expect("grant within 60 s");
                std::thread::sleep(work);
                g.complete(work.as_nanos() as u64);
                n += 1;
                if n == 1 {
                    touch(&dir.join(format!("{label}.first")));
                }
                if !gap.is_zero() {
                    c.idle();
                    std::thread::sleep(gap);
                    c.announce_demand();
                }
            }
            write_map(&dir.join(format!("{label}.end")), &grants_by_label(arb));
            c.idle();
        }
        other => panic!("unknown role {other}"),
    }
    std::process::exit(0);
}

fn open(dir: &TestDir) -> Arbiter {
    Arbiter::open(KEY, &dir.opts()).unwrap()
}

fn grants_of(arb: &Arbiter, label: &str) -> u64 {
    grants_by_label(arb).get(label).copied().unwrap_or(0)
}

/// A lower level never gets a grant while a higher level has demand (min_share off).
/// Tolerance: one grant per lower client, for a decision already past its re-check when
/// the higher client announced (see the priority protocol in policy.rs).
#[test]
fn lower_levels_get_no_grants_while_higher_has_demand() {
    priorities_hold(&TestDir::new("mp-prio"), &[]);
}

/// Processes in separate IPC namespaces (as pods of one node are) that share the segment
/// directory see one arbiter and obey its priorities: the arbiter uses no System V IPC,
/// only a file mapping and futexes on it. Each child gets a namespace of its own
/// (`unshare --ipc`, or with a user namespace where the test runs unprivileged); where
/// the system allows neither, the test says so and passes only if
/// SOFTPREEMPT_REQUIRE_UNSHARE is unset (the test command sets it where `unshare` works).
#[test]
fn processes_in_separate_ipc_namespaces_share_one_arbiter() {
    let works = |wrap: &[&str]| {
        Command::new(wrap[0])
            .args(&wrap[1..])
            .arg("true")
            .status()
            .is_ok_and(|s| s.success())
    };
    let wrap: &[&str] = if works(&["unshare", "--ipc"]) {
        &["unshare", "--ipc"]
    } else if works(&["unshare", "--user", "--map-root-user", "--ipc"]) {
        &["unshare", "--user", "--map-root-user", "--ipc"]
    } else {
        assert!(
            std::env::var_os("SOFTPREEMPT_REQUIRE_UNSHARE").is_none(),
            "unshare --ipc is required here but does not work"
        );
        eprintln!("unshare --ipc is not permitted here: not tested");
        return;
    };
    let d = TestDir::new("mp-ipcns");
    priorities_hold(&d, wrap);
    let ns = |label: &str| std::fs::read(d.0.join(format!("{label}.ipcns"))).unwrap();
    let mine = std::fs::read_link("/proc/self/ns/ipc").unwrap();
    let all = [ns("low"), ns("normal"), ns("high")];
    assert!(all
        .iter()
        .all(|n| !n.is_empty() && n.as_slice() != mine.as_os_str().as_encoded_bytes()));
    assert!(
        all[0] != all[1] && all[1] != all[2] && all[0] != all[2],
        "{all:?}"
    );
}

/// A low and a normal worker run; a high one with 100 slices comes and goes; the lower
/// ones get no grants while it has demand, and run again after. Every child runs under
/// `wrap`.
fn priorities_hold(d: &TestDir, wrap: &[&str]) {
    let arb = open(d);
    let gap = ("SP_GAP_US", "300".to_string());
    let mut low = spawn_in(wrap, d, "worker", "low", "low", &[]);
    let mut normal = spawn_in(wrap, d, "worker", "normal", "normal", &[gap]);
    eventually("both lower levels run", LIVENESS, || {
        grants_of(&arb, "low") > 0 && grants_of(&arb, "normal") > 0
    });
    let mut high = spawn_in(
        wrap,
        d,
        "worker",
        "high",
        "high",
        &[("SP_SLICES", "100".into()), ("SP_WORK_US", "300".into())],
    );
    high.wait_ok("high finishes its 100 slices");
    let start = read_map(&d.0.join("high.start"));
    let end = read_map(&d.0.join("high.end"));
    assert_eq!(end["high"], 100);
    for l in ["low", "normal"] {
        let during = end[l] - start[l];
        assert!(during <= 1, "{l} got {during} grants while high had demand");
    }
    // Once high is gone, the lower levels proceed again.
    let after = grants_of(&arb, "low");
    eventually("low runs again", LIVENESS, || {
        grants_of(&arb, "low") > after
    });
    low.kill9();
    normal.kill9();
}

/// Round robin inside a level: while all are demanding, no client is ever more than one
/// slice ahead of another.
#[test]
fn round_robin_is_fair_inside_a_level() {
    let d = TestDir::new("mp-rr");
    let go = d.0.join("go");
    let k = 150u64;
    let labels = ["a", "b", "c"];
    let mut kids: Vec<Kid> = labels
        .iter()
        .map(|l| {
            spawn(
                &d,
                "worker",
                "normal",
                l,
                &[
                    ("SP_SLICES", k.to_string()),
                    ("SP_WORK_US", "50".into()),
                    ("SP_GO", go.to_string_lossy().into_owned()),
                ],
            )
        })
        .collect();
    eventually("workers ready", LIVENESS, || {
        labels
            .iter()
            .all(|l| d.0.join(format!("{l}.ready")).exists())
    });
    touch(&go);
    for kid in &mut kids {
        kid.wait_ok("worker finishes");
    }
    for l in labels {
        let end = read_map(&d.0.join(format!("{l}.end")));
        assert_eq!(end[l], k);
        for peer in labels {
            // A peer missing from the snapshot had already finished (and unregistered).
            let got = end.get(peer).copied().unwrap_or(k);
            assert!(
                got + 1 >= k,
                "when {l} finished, {peer} had only {got} of {k} grants"
            );
        }
    }
}

/// kill -9 of higher clients holding a grant, or only demand, never leaves a lower
/// waiter blocked: it reclaims their slots and proceeds.
#[test]
fn kill_9_of_grant_or_demand_holder_unblocks_others() {
    let d = TestDir::new("mp-kill");
    let arb = open(&d);
    // The grant holder ranks highest, so its grant never depends on the other hog.
    let mut g = spawn(
        &d,
        "hog",
        "high:1",
        "holds-grant",
        &[("SP_HOLD", "grant".into())],
    );
    let mut m = spawn(
        &d,
        "hog",
        "high",
        "holds-demand",
        &[("SP_HOLD", "demand".into()), ("SP_EXTRA", "1".into())],
    );
    eventually("hogs ready", LIVENESS, || {
        d.0.join("holds-grant.ready").exists() && d.0.join("holds-demand.ready").exists()
    });
    let mut w = spawn(
        &d,
        "worker",
        "normal",
        "waiter",
        &[("SP_SLICES", "3".into())],
    );
    eventually("waiter blocks", LIVENESS, || {
        arb.snapshot()
            .clients
            .iter()
            .any(|c| c.label == "waiter" && c.state == ClientState::Waiting)
    });
    assert_eq!(grants_of(&arb, "waiter"), 0);
    g.kill9();
    m.kill9();
    w.wait_ok("waiter proceeds after the hogs die");
    let snap = arb.snapshot();
    let reclaimed: Vec<&str> = snap
        .clients
        .iter()
        .filter(|c| c.state == ClientState::Reclaimed)
        .map(|c| c.label.as_str())
        .collect();
    for l in ["holds-grant", "holds-demand", "holds-demand-2"] {
        assert!(reclaimed.contains(&l), "{l} not reclaimed: {reclaimed:?}");
    }
    assert!(snap.reclaims >= 3);
}

/// A low-priority child with two clients, one holding a grant, ready to be killed.
fn spawn_low_hog(d: &TestDir) -> Kid {
    let hog = spawn(
        d,
        "hog",
        "low",
        "hog",
        &[("SP_HOLD", "grant".into()), ("SP_EXTRA", "1".into())],
    );
    eventually("hog ready", LIVENESS, || d.0.join("hog.ready").exists());
    hog
}

/// A dead process's slots are taken over at registration when the segment is full.
#[test]
fn registration_reclaims_slots_of_a_killed_process() {
    let d = TestDir::new("mp-full");
    let mut o = d.opts();
    o.max_clients = 2;
    let arb = Arbiter::open(KEY, &o).unwrap();
    // The child opens the existing segment (2 slots) and fills both.
    let mut hog = spawn_low_hog(&d);
    assert!(matches!(
        arb.register(ClientInfo::new(Priority::NORMAL)),
        Err(SchedError::Full { .. })
    ));
    let snap = inspect(arb.path()).unwrap();
    assert!(snap.clients.iter().all(|c| c.lock_held == Some(true)));
    hog.kill9();
    let snap = inspect(arb.path()).unwrap();
    assert!(snap
        .clients
        .iter()
        .all(|c| c.lock_held == Some(false) && c.process_alive == Some(false)));
    let a = arb.register(ClientInfo::new(Priority::NORMAL)).unwrap();
    let b = arb.register(ClientInfo::new(Priority::LOW)).unwrap();
    b.try_acquire()
        .expect("no dead demand is left in the way")
        .complete(1);
    drop((a, b));
}

/// A dead process's slots are reclaimed at the next registration even when free slots
/// remain, so that live clients' looks at their peers no longer walk them.
#[test]
fn registration_reclaims_dead_slots_when_slots_are_free() {
    let d = TestDir::new("mp-sweep");
    let arb = Arbiter::open(KEY, &d.opts()).unwrap();
    let mut hog = spawn_low_hog(&d);
    hog.kill9();
    let dead = |arb: &Arbiter| {
        arb.snapshot()
            .clients
            .iter()
            .filter(|c| c.state != ClientState::Reclaimed && c.process_alive == Some(false))
            .count()
    };
    assert_eq!(
        dead(&arb),
        2,
        "both of the hog's slots stay until someone reclaims"
    );
    let me = arb.register(ClientInfo::new(Priority::HIGH)).unwrap();
    assert_eq!(dead(&arb), 0, "registration reclaimed them");
    assert!(arb.snapshot().reclaims >= 2);
    assert!(
        !me.lower_priority_registered(),
        "no dead lower client is left registered"
    );
    drop(me);
}
