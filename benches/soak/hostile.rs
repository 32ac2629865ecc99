//! Scenario 3, a hostile shared segment: the device's segment is damaged before a client
//! starts, or while clients run: garbage written over it, truncated, replaced by a
//! symlink, given loose permissions or another owner, squatted by another user, or all its
//! slots taken. A client must never crash or hang, its results stay exact, a client that
//! meets a damaged segment says so in one log line and runs in pass-through, and another
//! user can neither read nor change a user's segment.

use crate::procs::{spawn_worker, Proc, Setting};
use crate::worker::Spec;
use crate::{Outcome, Rng};
use softpreempt_sched::{
    inspect, list_segments, Arbiter, ArbiterOptions, Client, ClientInfo, Level, Priority,
};
use std::any::Any;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

pub struct Params {
    pub items: usize,
    pub iters: u32,
    pub bound: Duration,
    /// A few cases only (the test command's smoke mode).
    pub smoke: bool,
}

const NOBODY: u32 = 65534;

#[derive(Clone, Copy, PartialEq)]
enum When {
    Before,
    While,
}

/// What a damage does, and what a newcomer must say about it.
#[derive(Clone, Copy)]
enum Damage {
    Garbage,
    Truncate(u64),
    Symlink,
    Chmod,
    Chown,
    /// Another user creates a file at the segment's name first.
    Squat,
    /// Every slot taken by live clients.
    Full,
    /// Another user tries to read and truncate it.
    OtherUserAccess,
}

impl Damage {
    fn name(self) -> String {
        match self {
            Damage::Garbage => "garbage".into(),
            Damage::Truncate(n) => format!("truncated to {n} B"),
            Damage::Symlink => "replaced by a symlink".into(),
            Damage::Chmod => "chmod 0666".into(),
            Damage::Chown => "chown nobody".into(),
            Damage::Squat => "created by another user".into(),
            Damage::Full => "all slots full".into(),
            Damage::OtherUserAccess => "another user reads/truncates".into(),
        }
    }
}

fn worker(set: &Setting, p: &Params, iterations: Option<u64>, seed: u32) -> Proc {
    spawn_worker(set, Spec::sp(iterations, p.items, p.iters, seed), "low")
}

fn as_nobody(shell: &str) -> bool {
    Command::new("setpriv")
        .args([
            "--reuid",
            &NOBODY.to_string(),
            "--regid",
            &NOBODY.to_string(),
            "--clear-groups",
            "--",
            "sh",
            "-c",
            shell,
        ])
        .stderr(std::process::Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Applies the damage to the segment at `seg`; returns whatever must stay alive (the full
/// table's clients) and a note.
fn damage(
    d: Damage,
    seg: &Path,
    shm: &Path,
    rng: &mut Rng,
) -> Result<(Option<Box<dyn Any>>, String), String> {
    let err = |e: std::io::Error| e.to_string();
    match d {
        Damage::Garbage => {
            let len = std::fs::metadata(seg).map_err(err)?.len() as usize;
            let junk: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            use std::os::unix::fs::FileExt;
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(seg)
                .map_err(err)?;
            f.write_all_at(&junk, 0).map_err(err)?;
        }
        Damage::Truncate(n) => {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(seg)
                .map_err(err)?;
            f.set_len(n).map_err(err)?;
        }
        Damage::Symlink => {
            let moved = seg.with_extension("moved");
            std::fs::rename(seg, &moved).map_err(err)?;
            std::os::unix::fs::symlink(&moved, seg).map_err(err)?;
        }
        Damage::Chmod => {
            std::fs::set_permissions(seg, std::fs::Permissions::from_mode(0o666)).map_err(err)?
        }
        Damage::Chown => std::os::unix::fs::chown(seg, Some(NOBODY), None).map_err(err)?,
        Damage::Squat => {
            std::fs::remove_file(seg).map_err(err)?;
            std::fs::set_permissions(shm, std::fs::Permissions::from_mode(0o1777)).map_err(err)?;
            let ok = as_nobody(&format!("head -c 17408 /dev/urandom > '{}'", seg.display()));
            if !ok {
                return Err("setpriv as nobody failed".into());
            }
        }
        Damage::Full => {
            let snap = inspect(seg).map_err(|e| e.to_string())?;
            let opts = ArbiterOptions {
                shm_dir: shm.to_path_buf(),
                ..ArbiterOptions::default()
            };
            let arb = Arbiter::open(&snap.device_key, &opts).map_err(|e| e.to_string())?;
            let mut held: Vec<Client> = Vec::new();
            let info = ClientInfo::new(Priority {
                level: Level::Normal,
                number: 0,
            })
            .with_label("filler");
            while let Ok(c) = arb.register(info.clone()) {
                held.push(c);
            }
            let note = format!("{} slots taken", held.len());
            // The clients borrow nothing from the arbiter: keep both alive.
            return Ok((Some(Box::new((held, arb))), note));
        }
        Damage::OtherUserAccess => {
            // The directory is open to everyone, as /dev/shm is.
            std::fs::set_permissions(shm, std::fs::Permissions::from_mode(0o1777)).map_err(err)?;
            let read = as_nobody(&format!("cat '{}' > /dev/null", seg.display()));
            let trunc = as_nobody(&format!("truncate -s 0 '{}'", seg.display()));
            let write = as_nobody(&format!("echo x >> '{}'", seg.display()));
            if read || trunc || write {
                return Err(format!(
                    "another user could read: {read}, truncate: {trunc}, append: {write}"
                ));
            }
            return Ok((None, "another user could neither read nor write it".into()));
        }
    }
    Ok((None, String::new()))
}

/// The lines the layer wrote on a worker's stderr (the worker itself writes none unless
/// it fails).
fn layer_lines(w: &Proc) -> Vec<String> {
    w.seen
        .stderr_lines()
        .into_iter()
        .filter(|l| l.contains("softpreempt"))
        .collect()
}

/// Whether a newcomer must report the damage in one line (pass-through), or may work
/// normally (the damage is recovered from or does not reach it).
fn newcomer_passes_through(d: Damage, when: When) -> Option<bool> {
    match (d, when) {
        // A segment cut to 0 bytes looks like one whose creator died before sizing it:
        // after a second a newcomer removes it and creates it again (recovery, no
        // pass-through; processes still using the old one carry on in pass-through).
        (Damage::Truncate(0), _) => Some(false),
        (Damage::OtherUserAccess, _) => Some(false),
        // A garbage-filled or truncated segment in use is only detected when the running
        // processes look at the header again; a newcomer opens it and refuses it.
        _ => Some(true),
    }
}

/// A newcomer after the damage: must finish exactly, and log one line iff it runs in
/// pass-through.
fn newcomer(
    out: &mut Outcome,
    set: &Setting,
    p: &Params,
    d: Damage,
    when: When,
    rng: &mut Rng,
) -> String {
    let what = format!("{} ({}) newcomer", d.name(), label(when));
    let mut w = worker(set, p, Some(2), rng.next_u64() as u32);
    let end = w.finish(p.bound * 2);
    out.record(&what, end, Some((w.progress(), 2)));
    let lines = layer_lines(&w);
    let stray = w.seen.stray_stdout.lock().unwrap().clone();
    if !stray.is_empty() {
        out.wrong += 1;
        out.note(format!("{what}: wrote to stdout: {stray:?}"));
    }
    match newcomer_passes_through(d, when) {
        Some(true) if lines.len() != 1 => {
            out.wrong += 1;
            out.note(format!("{what}: expected one log line, got {lines:?}"));
        }
        Some(false) if !lines.is_empty() => {
            out.note(format!("{what}: logged {lines:?}"));
        }
        _ => {}
    }
    match lines.first() {
        Some(l) => format!("{} iterations exact; `{l}`", w.progress()),
        None => format!("{} iterations exact; no log line", w.progress()),
    }
}

fn label(w: When) -> &'static str {
    match w {
        When::Before => "before",
        When::While => "while running",
    }
}

fn segment_of(shm: &Path) -> Option<PathBuf> {
    list_segments(shm).ok()?.into_iter().next()
}

pub fn run(root: &Path, vendors: &Path, p: &Params, rng: &mut Rng) -> Outcome {
    let mut out = Outcome::new("hostile segment");
    let mut rows = Vec::new();
    let mut damages = vec![
        Damage::Garbage,
        Damage::Truncate(0),
        Damage::Truncate(512),
        Damage::Truncate(4096),
        Damage::Symlink,
        Damage::Chmod,
        Damage::Full,
    ];
    if is_root() {
        damages.extend([Damage::Chown, Damage::Squat, Damage::OtherUserAccess]);
    } else {
        out.note("not root: the other-user cases were skipped".into());
    }
    for (i, &d) in damages.iter().enumerate() {
        for when in [When::Before, When::While] {
            let in_smoke = matches!(
                (d, when),
                (Damage::Garbage, When::Before)
                    | (Damage::Truncate(4096), When::While)
                    | (Damage::Full, When::Before)
            );
            if p.smoke && !in_smoke {
                continue;
            }
            if matches!(d, Damage::Squat) && when == When::While {
                continue; // squatting needs the name free
            }
            let set = Setting::new(
                root,
                &format!("hostile-{i}-{}", when as u8),
                "slice = \"always\"\ntarget_slice_us = 200",
                vendors,
            );
            out.tried += 1;
            let what = format!("{} ({})", d.name(), label(when));
            // A first client creates the segment.
            let mut prime = worker(&set, p, Some(1), rng.next_u64() as u32);
            let end = prime.finish(p.bound * 2);
            out.record(
                &format!("{what}: first client"),
                end,
                Some((prime.progress(), 1)),
            );
            let Some(seg) = segment_of(&set.shm_dir) else {
                out.note(format!("{what}: no segment was created"));
                out.wrong += 1;
                continue;
            };
            let mut running = (when == When::While).then(|| {
                let mut w = worker(&set, p, None, rng.next_u64() as u32);
                if !w.wait_progress(2, p.bound * 2) {
                    out.note(format!("{what}: runner did not start: {}", w.stderr_tail()));
                }
                w
            });
            let keep = match damage(d, &seg, &set.shm_dir, rng) {
                Ok((keep, note)) => {
                    if !note.is_empty() {
                        out.note(format!("{what}: {note}"));
                    }
                    keep
                }
                Err(e) => {
                    out.wrong += 1;
                    out.note(format!("{what}: {e}"));
                    None
                }
            };
            let mut ran = "-".to_string();
            if let Some(w) = running.as_mut() {
                let at = w.progress();
                if !w.wait_progress(at + 3, p.bound) && w.exited().is_none() {
                    out.hung += 1;
                    out.note(format!("{what}: the running client made no progress"));
                }
                ran = format!("{} -> {}", at, w.progress());
            }
            let newcomer = newcomer(&mut out, &set, p, d, when, rng);
            if let Some(mut w) = running {
                w.stop();
                let end = w.finish(p.bound);
                let lines = layer_lines(&w);
                ran = format!(
                    "{ran} iterations, {end:?}; {}",
                    match lines.first() {
                        Some(l) => format!("`{l}`"),
                        None => "no log line".into(),
                    }
                );
                out.record(&format!("{what}: running client"), end, None);
            }
            rows.push(format!("| {what} | {ran} | {newcomer} |"));
            drop(keep);
        }
    }
    out.details = format!(
        "Hostile segment, case by case (the running client was started before the damage; \
         the newcomer after it):\n\n| case | running client | newcomer |\n|---|---|---|\n{}\n",
        rows.join("\n")
    );
    out
}
