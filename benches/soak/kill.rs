//! Scenario 1, the kill -9 soak: two low, one normal and one high priority worker run
//! verified sliced launches through SoftPreempt; every round kills one of them with SIGKILL
//! at a chosen kind of moment and starts a replacement, then requires every survivor and
//! the replacement to make progress within a generous bound. Some rounds also kill a
//! freshly started process during start-up, during its program build, or while it creates
//! a new segment (in a directory of its own, which a second process must then be able to
//! use: the dead-creator recovery).

use crate::procs::{spawn_worker, Proc, Setting};
use crate::worker::Spec;
use crate::{Outcome, Rng};
use softpreempt_sched::{inspect, list_segments};
use std::path::Path;
use std::time::{Duration, Instant};

const PRIORITIES: [&str; 4] = ["low", "low", "normal", "high"];

/// Kinds of kill moment, taken in turn.
const MOMENTS: [&str; 5] = ["random", "in-grant", "build", "startup", "creation"];

pub struct Params {
    pub rounds: u32,
    pub items: usize,
    pub iters: u32,
    /// Bound on a survivor's next verified iteration (a liveness bound, not a timing goal).
    pub bound: Duration,
}

fn worker(set: &Setting, prio: &str, p: &Params, seed: u32) -> Proc {
    spawn_worker(set, Spec::sp(None, p.items, p.iters, seed), prio)
}

/// Kills `p` when its client holds a grant with a slice in flight (read from the segment),
/// or after `limit` anyway. True when the kill landed in a grant.
fn kill_in_grant(p: &mut Proc, shm: &Path, limit: Duration) -> bool {
    let start = Instant::now();
    let pid = p.pid();
    while start.elapsed() < limit {
        let busy = list_segments(shm)
            .unwrap_or_default()
            .iter()
            .filter_map(|s| inspect(s).ok())
            .flat_map(|s| s.clients)
            .any(|c| c.pid == pid && c.inflight > 0);
        if busy {
            p.kill9();
            return true;
        }
        std::thread::sleep(Duration::from_micros(300));
    }
    p.kill9();
    false
}

pub fn run(root: &Path, vendors: &Path, p: &Params, rng: &mut Rng) -> Outcome {
    let sched = "slice = \"always\"\ntarget_slice_us = 100";
    let set = Setting::new(root, "kill", sched, vendors);
    let mut out = Outcome::new("kill -9 soak");
    let mut procs: Vec<Proc> = PRIORITIES
        .iter()
        .map(|prio| worker(&set, prio, p, rng.next_u64() as u32))
        .collect();
    for w in procs.iter_mut() {
        if !w.wait_progress(1, p.bound * 2) {
            out.hung += 1;
            out.note(format!(
                "a {} worker never started: {}",
                w.label,
                w.stderr_tail()
            ));
        }
    }
    let (mut in_grant, mut extra_kills, mut creation_ok) = (0u32, 0u32, 0u32);
    let started = Instant::now();
    for round in 0..p.rounds {
        let moment = MOMENTS[round as usize % MOMENTS.len()];
        let victim = rng.below(procs.len() as u64) as usize;
        let before: Vec<u64> = procs.iter().map(|w| w.progress()).collect();
        // Kill a running worker.
        match moment {
            "in-grant" => {
                if kill_in_grant(&mut procs[victim], &set.shm_dir, Duration::from_secs(2)) {
                    in_grant += 1;
                }
            }
            _ => {
                std::thread::sleep(Duration::from_millis(rng.below(400)));
                procs[victim].kill9();
            }
        }
        out.tried += 1;
        let prio = procs[victim].label.clone();
        let mut dead = std::mem::replace(
            &mut procs[victim],
            worker(&set, &prio, p, rng.next_u64() as u32),
        );
        out.record(&format!("round {round} victim"), dead.finish(p.bound), None);
        // Kill a newcomer at an early moment, then start the real replacement.
        if matches!(moment, "build" | "startup") {
            let mut early = std::mem::replace(
                &mut procs[victim],
                worker(&set, &prio, p, rng.next_u64() as u32),
            );
            if moment == "build" {
                early.wait_phase("build", p.bound);
                std::thread::sleep(Duration::from_millis(rng.below(30)));
            } else {
                std::thread::sleep(Duration::from_millis(1 + rng.below(15)));
            }
            early.kill9();
            extra_kills += 1;
            out.tried += 1;
            out.record(
                &format!("round {round} {moment}"),
                early.finish(p.bound),
                None,
            );
        }
        if moment == "creation" {
            if creation_round(root, vendors, p, rng, round, &mut out) {
                creation_ok += 1;
            }
            extra_kills += 1;
            out.tried += 1;
        }
        // Every survivor makes progress, and the replacement gets going.
        for (i, w) in procs.iter_mut().enumerate() {
            let need = if i == victim { 1 } else { before[i] + 1 };
            if !w.wait_progress(need, p.bound) {
                let end = w.exited().is_some();
                if end {
                    let e = w.finish(p.bound);
                    out.record(&format!("round {round} {} worker", w.label), e, None);
                } else {
                    out.hung += 1;
                    out.note(format!(
                        "round {round} ({moment}): the {} worker (pid {}) made no progress in {:?}",
                        w.label,
                        w.pid(),
                        p.bound
                    ));
                }
                let label = w.label.clone();
                *w = worker(&set, &label, p, rng.next_u64() as u32);
            }
        }
    }
    let elapsed = started.elapsed();
    // Stop everyone; each must exit cleanly.
    for w in procs.iter_mut() {
        w.stop();
    }
    let progress: u64 = procs.iter().map(|w| w.progress()).sum();
    for w in procs.iter_mut() {
        let label = w.label.clone();
        out.record(&format!("final {label} worker"), w.finish(p.bound), None);
    }
    // The segment is intact and every dead client is known dead.
    let segs = list_segments(&set.shm_dir).unwrap_or_default();
    let (mut slices, mut launches_seen, mut reclaims) = (0u64, 0u64, 0u64);
    for s in &segs {
        match inspect(s) {
            Ok(snap) => {
                reclaims += snap.reclaims;
                for c in &snap.clients {
                    slices += c.slices;
                    launches_seen += c.grants;
                    if c.lock_held == Some(true) {
                        out.wrong += 1;
                        out.note(format!(
                            "slot of pid {} still locked after all exited",
                            c.pid
                        ));
                    }
                }
            }
            Err(e) => {
                out.wrong += 1;
                out.note(format!("segment unreadable after the soak: {e}"));
            }
        }
    }
    out.note(format!(
        "{} rounds in {:.0?}: {} kills of running workers ({in_grant} inside a grant with a \
         slice in flight), {extra_kills} of starting processes (start-up, program build, \
         segment creation; {creation_ok} fresh segments usable after their creator was \
         killed); {reclaims} slots reclaimed; slices {slices} over {launches_seen} grants \
         in the last clients of each slot",
        p.rounds, elapsed, p.rounds
    ));
    let _ = progress;
    out
}

/// Kills a process while it creates a segment in a directory of its own (the kill lands
/// right after it announces its queue, i.e. inside `clCreateCommandQueue`, which opens the
/// arbiter), then requires a second process to work in that directory within the bound.
fn creation_round(
    root: &Path,
    vendors: &Path,
    p: &Params,
    rng: &mut Rng,
    round: u32,
    out: &mut Outcome,
) -> bool {
    let set = Setting::new(
        root,
        &format!("create-{round}"),
        "slice = \"always\"\ntarget_slice_us = 100",
        vendors,
    );
    let mut first = worker(&set, "low", p, rng.next_u64() as u32);
    first.wait_phase("queue", p.bound);
    std::thread::sleep(Duration::from_micros(rng.below(3000)));
    first.kill9();
    out.record(
        &format!("round {round} creator"),
        first.finish(p.bound),
        None,
    );
    let mut second = worker(&set, "high", p, rng.next_u64() as u32);
    let ok = second.wait_progress(2, p.bound * 2);
    if !ok {
        if second.exited().is_some() {
            let e = second.finish(p.bound);
            out.record(&format!("round {round} after creator"), e, None);
        } else {
            out.hung += 1;
            out.note(format!(
                "round {round}: a process after a killed creator made no progress: {}",
                second.stderr_tail()
            ));
        }
        return false;
    }
    second.stop();
    out.record(
        &format!("round {round} after creator"),
        second.finish(p.bound),
        None,
    );
    let _ = std::fs::remove_dir_all(set.config.parent().unwrap());
    ok
}
