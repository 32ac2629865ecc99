//! Scenario 6, fork() without exec: a process with a context and a managed queue forks
//! children that exit at once, linger, launch on the inherited queue, or exit through
//! exit(); meanwhile a peer process keeps launching. The parent must keep producing exact
//! results, the peer must keep progressing, nobody may hang, and the segment must read
//! back intact with no slot left locked once everyone is gone. Run through SoftPreempt and
//! on the bare driver (the children's fates on the bare driver are the reference: OpenCL
//! leaves a forked child's use of inherited objects undefined).

use crate::procs::{spawn, Role, Setting};
use crate::worker::Spec;
use crate::Outcome;
use softpreempt_sched::{inspect, list_segments};
use std::path::Path;
use std::time::Duration;

pub fn run(root: &Path, vendors: &Path, bound: Duration, items: usize, iters: u32) -> Outcome {
    let mut out = Outcome::new("fork without exec");
    let mut fates = Vec::new();
    let mut all_children = Vec::new();
    for sp in [true, false] {
        let set = Setting::new(
            root,
            if sp { "fork-sp" } else { "fork-bare" },
            "slice = \"always\"\ntarget_slice_us = 100",
            vendors,
        );
        let spec = |seed| Spec {
            sp,
            iterations: None,
            items,
            iters,
            seed,
        };
        let mut peer = spawn(
            &Role::Worker(spec(5)),
            &set,
            &[("SOFTPREEMPT_PRIORITY", "high".into())],
            "peer",
        );
        peer.wait_progress(1, bound * 2);
        out.tried += 1;
        let mut f = spawn(
            &Role::Fork(spec(9)),
            &set,
            &[("SOFTPREEMPT_PRIORITY", "low".into())],
            "fork",
        );
        let at = peer.progress();
        let end = f.finish(bound * 4);
        let platform = if sp { "SoftPreempt" } else { "bare" };
        out.record(&format!("{platform}: the forking parent"), end, None);
        let children: Vec<String> = ["a", "b", "c", "d"]
            .iter()
            .map(|c| {
                format!(
                    "{c}={}",
                    f.seen.field(&format!("child{c}")).unwrap_or("?".into())
                )
            })
            .collect();
        fates.push(format!("{platform}: {}", children.join(" ")));
        all_children.push(children);
        if !peer.wait_progress(at + 1, bound) {
            out.hung += 1;
            out.note(format!("{platform}: the peer made no progress"));
        }
        peer.stop();
        let end = peer.finish(bound);
        out.record(&format!("{platform}: peer"), end, None);
        if sp {
            for s in list_segments(&set.shm_dir).unwrap_or_default() {
                match inspect(&s) {
                    Ok(snap) => {
                        if let Some(c) = snap.clients.iter().find(|c| c.lock_held == Some(true)) {
                            out.wrong += 1;
                            out.note(format!("slot of pid {} still locked at the end", c.pid));
                        }
                    }
                    Err(e) => {
                        out.wrong += 1;
                        out.note(format!("segment damaged: {e}"));
                    }
                }
            }
        }
    }
    // A forked child's fate through SoftPreempt counts against the layer only where the
    // same child fared better on the bare driver (the bare run comes second).
    if let [sp, bare] = &all_children[..] {
        for (s, b) in sp.iter().zip(bare) {
            if s != b && (s.ends_with("hung") || s.contains("signal")) {
                out.hung += s.ends_with("hung") as u64;
                out.crashed += s.contains("signal") as u64;
                out.note(format!(
                    "child {s} through SoftPreempt, {b} on the bare driver"
                ));
            }
        }
    }
    out.note(format!(
        "children (a: _exit at once, b: linger 500 ms, c: launch on the inherited queue, \
         d: exit()): {}",
        fates.join("; ")
    ));
    out
}
