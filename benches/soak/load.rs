//! Scenario 2, many processes: N workers at mixed priorities, each a fixed number of
//! verified iterations (two launches each), all started at once: on the bare vendor,
//! through SoftPreempt at the default configuration, and through SoftPreempt with every
//! launch cut into 200 µs slices. Every process must finish with exact results; the wall
//! times are reported side by side (not a pass/fail timing test).

use crate::procs::{spawn, Role, Setting};
use crate::worker::Spec;
use crate::Outcome;
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

/// Runs the load once; returns the wall time and the slices the workers reported.
fn once(sp: bool, set: &Setting, p: &Params, out: &mut Outcome) -> (Duration, u64) {
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
    let mut slices = 0;
    for w in procs.iter_mut() {
        out.tried += 1;
        let end = w.finish(p.bound);
        slices += w
            .seen
            .field("slices")
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
        let done = w.progress();
        out.record(
            &format!("{platform} worker"),
            end,
            Some((done, p.iterations)),
        );
    }
    (start.elapsed(), slices)
}

pub fn run(root: &Path, vendors: &Path, p: &Params) -> Outcome {
    let mut out = Outcome::new(&format!("{}-process load", p.procs));
    // Every launch cut into 200 µs slices (the stress), and the default configuration
    // (slices only while a higher priority is registered, 1000 µs target).
    let forced = Setting::new(
        root,
        "load",
        "slice = \"always\"\ntarget_slice_us = 200",
        vendors,
    );
    let default = Setting::new(root, "load-default", "", vendors);
    // Warm the vendor's kernel cache on both platforms (the rewritten program is another
    // source), so no timed run pays a first compilation.
    for sp in [true, false] {
        let spec = Spec {
            sp,
            iterations: Some(1),
            items: p.items,
            iters: p.iters,
            seed: 1,
        };
        let _ = spawn(&Role::Worker(spec), &forced, &[], "warm-up").finish(p.bound);
    }
    let (bare, _) = once(false, &forced, p, &mut out);
    let (sp_default, slices_default) = once(true, &default, p, &mut out);
    let (sp_forced, slices_forced) = once(true, &forced, p, &mut out);
    out.note(format!(
        "{} processes x {} iterations (2 verified launches of {} items each, priorities \
         low/normal/high in turn): wall time on the bare driver {:.1} s; through SoftPreempt \
         at the default configuration {:.1} s ({slices_default} slices), with every launch \
         cut into 200 µs slices {:.1} s ({slices_forced} slices)",
        p.procs,
        p.iterations,
        p.items,
        bare.as_secs_f64(),
        sp_default.as_secs_f64(),
        sp_forced.as_secs_f64()
    ));
    out
}
