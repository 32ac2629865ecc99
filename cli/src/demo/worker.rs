//! The demo's child processes: this same binary, started by `softpreempt demo` with
//! `SOFTPREEMPT_DEMO_ROLE` set. Each reports to the parent as JSON lines on stdout.
//!
//! * `lp` (best effort): launches the big image back to back until its stdin closes.
//! * `hp` (latency critical): launches the small image `samples` times, at Poisson-spaced
//!   times, and reports each launch's latency (enqueue to completion).
//! * `size`: grows an image from its starting size until one launch takes about
//!   `SOFTPREEMPT_DEMO_TARGET_US` on this device, and reports the size (`size`).

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::cl::{self, Session};

pub const ROLE: &str = "SOFTPREEMPT_DEMO_ROLE";
pub const LAYERED: &str = "SOFTPREEMPT_DEMO_LAYERED";
pub const DEVICE: &str = "SOFTPREEMPT_DEMO_DEVICE";
/// `width,iterations` of the image.
pub const SIZE: &str = "SOFTPREEMPT_DEMO_SIZE";
/// `samples,pause_ms` (hp only).
pub const SAMPLES: &str = "SOFTPREEMPT_DEMO_SAMPLES";
/// The launch time, in µs, that the `size` role grows an image to.
pub const TARGET_US: &str = "SOFTPREEMPT_DEMO_TARGET_US";
/// A directory where the lp and hp children write each measured launch's start and end
/// (`start_ns end_ns`, nanoseconds of the system clock, so the two processes' lines can be
/// set side by side). A diagnosis of the demo's tail: which HP launches began just after
/// an LP launch did. Unset, nothing is written.
pub const TIMELINE: &str = "SOFTPREEMPT_DEMO_TIMELINE";

/// The largest image the `size` role makes: 256 MiB of output (a GPU reaches the LP's
/// target with more iterations after that, which keeps its work-groups short).
const MAX_WIDTH: usize = 8192;
const MAX_ITERS: usize = 1 << 16;

/// The seed of the HP's request arrivals: the same in every scenario.
const ARRIVAL_SEED: u64 = 11;

/// An lp child whose parent vanished stops by itself after this.
const LP_LIMIT: Duration = Duration::from_secs(600);

fn send(v: Value) {
    let mut out = std::io::stdout().lock();
    // The parent reads line by line; a vanished parent just ends the demo.
    let _ = writeln!(out, "{v}").and_then(|_| out.flush());
}

fn pair(var: &str) -> Result<(usize, usize), String> {
    let v = std::env::var(var).map_err(|_| format!("{var} is not set"))?;
    let (a, b) = v
        .split_once(',')
        .ok_or_else(|| format!("{var}={v}: expected A,B"))?;
    match (a.parse(), b.parse()) {
        (Ok(a), Ok(b)) => Ok((a, b)),
        _ => Err(format!("{var}={v}: expected two numbers")),
    }
}

/// Runs the role named in the environment; the exit code says whether it worked.
pub fn main(role: &str) -> std::process::ExitCode {
    match work(role) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            send(json!({ "error": e }));
            std::process::ExitCode::FAILURE
        }
    }
}

fn work(role: &str) -> Result<(), String> {
    let layered = std::env::var(LAYERED).is_ok_and(|v| v == "1");
    let hint = std::env::var(DEVICE).ok();
    let (dev, platform, device) = cl::choose(layered, hint.as_deref())?;
    let (width, iters) = pair(SIZE)?;
    if role == "size" {
        return size(dev, width, iters);
    }
    let session = Session::new(dev, width, iters as i32)?;
    // The first launch builds caches and warms the device; it is not measured.
    session.launch()?;
    send(json!({ "ready": true, "platform": platform, "device": device }));
    let mut timeline = Timeline::open(role, layered)?;
    match role {
        "lp" => best_effort(&session, &mut timeline),
        "hp" => latency_critical(&session, &mut timeline),
        other => Err(format!("unknown demo role '{other}'")),
    }
}

/// The launches' times, written to `TIMELINE`'s directory when it is set.
struct Timeline(Option<std::fs::File>);

impl Timeline {
    fn open(role: &str, layered: bool) -> Result<Self, String> {
        let Some(dir) = std::env::var_os(TIMELINE) else {
            return Ok(Self(None));
        };
        let name = format!(
            "{role}-{}-{}.txt",
            if layered { "layered" } else { "bare" },
            std::process::id()
        );
        let path = std::path::Path::new(&dir).join(name);
        std::fs::File::create(&path)
            .map(|f| Self(Some(f)))
            .map_err(|e| format!("{}: {e}", path.display()))
    }

    fn now_ns() -> u128 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    }

    /// One line per launch, written after it ended, outside what is timed.
    fn record(&mut self, start: u128, end: u128) -> Result<(), String> {
        match &mut self.0 {
            Some(f) => writeln!(f, "{start} {end}").map_err(|e| format!("{TIMELINE}: {e}")),
            None => Ok(()),
        }
    }
}

fn best_effort(s: &Session, timeline: &mut Timeline) -> Result<(), String> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    std::thread::spawn(move || {
        // Anything on stdin, or its end, means stop.
        let _ = std::io::stdin().read(&mut [0u8; 1]);
        flag.store(true, Ordering::Relaxed);
    });
    let start = Instant::now();
    let mut launches = 0u64;
    let mut busy = Duration::ZERO;
    while !stop.load(Ordering::Relaxed) && start.elapsed() < LP_LIMIT {
        let t0 = Timeline::now_ns();
        s.launch()?;
        timeline.record(t0, Timeline::now_ns())?;
        launches += 1;
        // Up to the last completion: a launch cut short by the stop is not counted.
        busy = start.elapsed();
    }
    send(json!({
        "done": true,
        "launches": launches,
        "seconds": busy.as_secs_f64(),
        "checksum": format!("{:016x}", s.checksum()?),
    }));
    Ok(())
}

fn latency_critical(s: &Session, timeline: &mut Timeline) -> Result<(), String> {
    let (samples, pause_ms) = pair(SAMPLES)?;
    // Requests arrive as they do at a server: a Poisson process of mean `pause_ms`, from a
    // fixed seed, so every scenario meets the same arrivals (as `benches/pair_common.py`'s
    // HP does). A fixed period beats against the LP's launches and holds the HP at a few
    // phases of them for a whole run: on NVIDIA, whether one of those phases fell within
    // the driver's 2.5 ms after an LP submission set the run's p99, bare and layered
    // alike (session 40, `docs/benchmarks.md`).
    let gaps = arrival_gaps(Duration::from_millis(pause_ms as u64));
    for (i, gap) in (0..samples).zip(gaps) {
        std::thread::sleep(gap);
        let t0 = Timeline::now_ns();
        let t = Instant::now();
        s.launch()?;
        let took = t.elapsed();
        timeline.record(t0, Timeline::now_ns())?;
        send(json!({ "sample": i, "latency_ns": took.as_nanos() as u64 }));
    }
    send(json!({ "done": true, "checksum": format!("{:016x}", s.checksum()?) }));
    Ok(())
}

/// The pauses before the HP's requests: exponential with mean `mean` (Poisson arrivals),
/// the same sequence in every process.
fn arrival_gaps(mean: Duration) -> impl Iterator<Item = Duration> {
    let mut rng = fastrand::Rng::with_seed(ARRIVAL_SEED);
    // 1 - u is in (0, 1], so the logarithm is finite.
    std::iter::repeat_with(move || mean.mul_f64(-(1.0 - rng.f64()).ln()))
}

/// Grows a `width`² image of `iters` iterations until one launch (after a warm one) takes
/// at least half the target, the width first (more work-groups of the same length), then
/// the iterations. The demo's sizes are chosen for a CPU device (PoCL), where they already
/// meet their targets; a GPU runs them in microseconds, too short to show anything.
fn size(dev: opencl_sys::cl_device_id, mut width: usize, mut iters: usize) -> Result<(), String> {
    let us: u64 = std::env::var(TARGET_US)
        .ok()
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("{TARGET_US} is not set"))?;
    let target = Duration::from_micros(us);
    loop {
        let s = Session::new(dev, width, iters as i32)?;
        s.launch()?;
        let t = Instant::now();
        s.launch()?;
        let took = t.elapsed();
        if took * 2 >= target || (width >= MAX_WIDTH && iters >= MAX_ITERS) {
            send(json!({ "size": [width, iters], "launch_us": took.as_micros() as u64 }));
            return Ok(());
        }
        let grow = (target.as_secs_f64() / took.as_secs_f64().max(1e-6)).max(2.0);
        if width < MAX_WIDTH {
            let w = (width as f64 * grow.sqrt()).ceil() as usize;
            width = w.next_multiple_of(64).min(MAX_WIDTH);
        } else {
            iters = ((iters as f64 * grow).ceil() as usize).min(MAX_ITERS);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scenario_meets_the_same_poisson_arrivals() {
        let mean = Duration::from_millis(40);
        let a: Vec<Duration> = arrival_gaps(mean).take(20_000).collect();
        let b: Vec<Duration> = arrival_gaps(mean).take(20_000).collect();
        assert_eq!(a, b, "the same seed in every process");
        let avg = a.iter().sum::<Duration>().as_secs_f64() / a.len() as f64;
        assert!((avg - 0.040).abs() < 0.002, "mean gap {avg}");
        // An exponential's coefficient of variation is 1 (a fixed period's is 0), and
        // about 1 - e^(-1/16) = 6% of its gaps are under a 16th of the mean.
        let var = a
            .iter()
            .map(|g| (g.as_secs_f64() - avg).powi(2))
            .sum::<f64>()
            / a.len() as f64;
        assert!(
            (var.sqrt() / avg - 1.0).abs() < 0.05,
            "cv {}",
            var.sqrt() / avg
        );
        let short = a.iter().filter(|g| **g < mean / 16).count() as f64 / a.len() as f64;
        assert!((0.05..0.07).contains(&short), "short gaps {short}");
    }
}
