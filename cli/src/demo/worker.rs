//! The demo's child processes: this same binary, started by `softpreempt demo` with
//! `SOFTPREEMPT_DEMO_ROLE` set. Each reports to the parent as JSON lines on stdout.
//!
//! * `lp` (best effort): launches the big image back to back until its stdin closes.
//! * `hp` (latency critical): launches the small image `samples` times, with a pause
//!   between, and reports each launch's latency (enqueue to completion).
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

/// The largest image the `size` role makes: 256 MiB of output (a GPU reaches the LP's
/// target with more iterations after that, which keeps its work-groups short).
const MAX_WIDTH: usize = 8192;
const MAX_ITERS: usize = 1 << 16;

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
    match role {
        "lp" => best_effort(&session),
        "hp" => latency_critical(&session),
        other => Err(format!("unknown demo role '{other}'")),
    }
}

fn best_effort(s: &Session) -> Result<(), String> {
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
        s.launch()?;
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

fn latency_critical(s: &Session) -> Result<(), String> {
    let (samples, pause_ms) = pair(SAMPLES)?;
    for i in 0..samples {
        std::thread::sleep(Duration::from_millis(pause_ms as u64));
        let t = Instant::now();
        s.launch()?;
        send(json!({ "sample": i, "latency_ns": t.elapsed().as_nanos() as u64 }));
    }
    send(json!({ "done": true, "checksum": format!("{:016x}", s.checksum()?) }));
    Ok(())
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
