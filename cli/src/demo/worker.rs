//! The demo's child processes: this same binary, started by `softpreempt demo` with
//! `SOFTPREEMPT_DEMO_ROLE` set. Each reports to the parent as JSON lines on stdout.
//!
//! * `lp` (best effort): launches the big image back to back until its stdin closes.
//! * `hp` (latency critical): launches the small image `samples` times, with a pause
//!   between, and reports each launch's latency (enqueue to completion).

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
