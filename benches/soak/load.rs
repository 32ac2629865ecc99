//! Scenario 2, many processes: N workers at mixed priorities, each a fixed number of
//! verified iterations (two sliced launches each), all started at once; through SoftPreempt
//! and then the same load on the bare vendor. Every process must finish with exact
//! results; the wall times are reported side by side (not a pass/fail timing test).

use crate::procs::{spawn, End, Role, Setting};
use crate::worker::Spec;
use crate::Outcome;
use softpreempt_sched::{inspect, list_segments};
use std::path::Path;
use std::time::{Duration, Instant};

pub struct Params {
    pub procs: usize,
    pub iterations: u64,
    pub items: usize,
    pub iters: u32,
    pub bound: Duration,
}

const LEVELS: [&str; 3] = ["low", "normal", "high"];

/// Runs the load once; returns the wall time.
fn once(sp: bool, set: &Setting, p: &Params, out: &mut Outcome) -> Duration {
    let start = Instant::now();
    let mut procs: Vec<_> = (0..p.procs)
        .map(|i| {
            let spec = Spec {
                sp,
                iterations: Some(p.iterations),
                items: p.items,
                iters: p.iters,
                seed: 77 + i as u32,
            };
            let prio = LEVELS[i % LEVELS.len()];
            spawn(
                &Role::Worker(spec),
                set,
                &[("SOFTPREEMPT_PRIORITY", prio.to_string())],
                prio,
            )
        })
        .collect();
    let platform = if sp { "SoftPreempt" } else { "bare" };
    for w in procs.iter_mut() {
        out.tried += 1;
        let end = w.finish(p.bound);
        let done = w.progress();
        match end {
            End::Clean if done == p.iterations => {}
            End::Clean => {
                out.crashed += 1;
                out.note(format!("{platform}: a worker stopped after {done} iterations"));
            }
            End::Killed => unreachable!("nobody kills in this scenario"),
            End::Wrong(m) => {
                out.wrong += 1;
                out.note(format!("{platform}: wrong result {m}"));
            }
            End::Crashed(m) => {
                out.crashed += 1;
                out.note(format!("{platform}: {m}"));
            }
            End::Hung => {
                out.hung += 1;
                out.note(format!("{platform}: a worker did not finish in {:?}", p.bound));
            }
        }
    }
    start.elapsed()
}

pub fn run(root: &Path, vendors: &Path, p: &Params) -> Outcome {
    let mut out = Outcome::new(&format!("{}-process load", p.procs));
    let set = Setting::new(
        root,
        "load",
        "slice = \"always\"\ntarget_slice_us = 200",
        vendors,
    );
    let sp = once(true, &set, p, &mut out);
    let slices: u64 = list_segments(&set.shm_dir)
        .unwrap_or_default()
        .iter()
        .filter_map(|s| inspect(s).ok())
        .map(|s| s.clients.iter().map(|c| c.slices).sum::<u64>())
        .sum();
    let bare = once(false, &set, p, &mut out);
    out.note(format!(
        "{} processes x {} iterations (2 launches of {} items each): wall time through \
         SoftPreempt {:.1} s ({slices} slices), bare driver {:.1} s",
        p.procs,
        p.iterations,
        p.items,
        sp.as_secs_f64(),
        bare.as_secs_f64()
    ));
    out.figures.push(("load_sp_s".into(), sp.as_secs_f64()));
    out.figures.push(("load_bare_s".into(), bare.as_secs_f64()));
    out
}
