//! `softpreempt demo`: a best-effort process (LP, priority low) keeps the default device
//! busy with long kernels while a latency-critical process (HP, priority high) issues
//! short ones; first on the bare vendor, then through SoftPreempt. Prints HP latency
//! (p50/p99) and LP throughput for both, and checks that the results are bit-identical.
//!
//! The two processes are this same binary in child roles (see `worker.rs`); they talk to
//! the device through the real ICD loader, as any application would.

mod cl;
mod loader;
mod report;
mod worker;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use softpreempt_platform::config::ENV_PRIORITY;

use crate::args::{failed, parse, CliError, Spec};
use loader::{EnvChange, Loaders};
use report::{Outcome, Progress};

pub const USAGE: &str = "softpreempt demo [--quick] [--samples N]";

const SPEC: Spec = Spec {
    command: "demo",
    flags: &["--quick"],
    options: &["--samples"],
    short: &[],
    max_positional: 0,
    trailing: false,
};

/// Sizes of the two workloads.
struct Plan {
    /// LP image: width, iterations (one launch takes long, a fraction of a second).
    lp: (usize, usize),
    /// HP image: width, iterations (one launch takes a few ms alone).
    hp: (usize, usize),
    samples: usize,
    pause_ms: usize,
}

/// Longest time one scenario may take before the demo gives up on it.
const SCENARIO_LIMIT: Duration = Duration::from_secs(300);

/// Runs a demo child role instead of the command line when `SOFTPREEMPT_DEMO_ROLE` is
/// set; the exit code is the role's.
pub fn child_role() -> Option<ExitCode> {
    std::env::var(worker::ROLE)
        .ok()
        .map(|role| worker::main(&role))
}

pub fn run(args: &[String]) -> Result<(), CliError> {
    let a = parse(&SPEC, args)?;
    let quick = a.flag("--quick");
    let samples = match a.option("--samples") {
        Some(v) => v.parse::<usize>().ok().filter(|&n| n > 0).ok_or_else(|| {
            CliError::Usage(format!(
                "demo: --samples needs a positive number, not '{v}'"
            ))
        })?,
        None if quick => 8,
        None => 200,
    };
    let plan = Plan {
        lp: if quick { (256, 256) } else { (1024, 512) },
        hp: (128, 256),
        samples,
        pause_ms: 40,
    };
    demo(plan, !quick).or_else(|e| failed(format!("demo: {e}")))
}

/// What one launch of each image should take at least about, for the demo to show
/// anything: the LP's long enough that the bare driver makes the HP wait behind it (on
/// PoCL 1024² at 512 iterations takes about 180 ms, on an H100 about 0.1 ms), the HP's a
/// request of some substance (PoCL: about 1.5 ms).
const LP_TARGET: Duration = Duration::from_millis(150);
const HP_TARGET: Duration = Duration::from_micros(500);

/// A scenario: which path, and whether the LP process runs.
struct Scenario {
    name: &'static str,
    layered: bool,
    with_lp: bool,
}

const SCENARIOS: [Scenario; 4] = [
    Scenario {
        name: "HP alone, bare vendor",
        layered: false,
        with_lp: false,
    },
    Scenario {
        name: "HP + LP, bare vendor",
        layered: false,
        with_lp: true,
    },
    Scenario {
        name: "HP alone, through SoftPreempt",
        layered: true,
        with_lp: false,
    },
    Scenario {
        name: "HP + LP, through SoftPreempt",
        layered: true,
        with_lp: true,
    },
];

fn demo(mut plan: Plan, sized: bool) -> Result<(), String> {
    let loaders = loader::prepare()?;
    println!(
        "SoftPreempt demo: a latency-critical process (HP, priority high) launches a short \
         kernel about every {} ms\n(at random times, as requests reach a server), while a \
         best-effort process (LP, priority low) keeps\nthe device busy with long kernels.\n",
        plan.pause_ms
    );
    let sizing = if sized { 2 } else { 0 };
    let mut progress = Progress::new(SCENARIOS.len() * (plan.samples + 2) + sizing);
    let mut launch_us = None;
    if sized {
        let (lp, lp_us) = size_for(plan.lp, LP_TARGET, &loaders, &mut progress)?;
        let (hp, hp_us) = size_for(plan.hp, HP_TARGET, &loaders, &mut progress)?;
        (plan.lp, plan.hp) = (lp, hp);
        launch_us = Some((lp_us, hp_us));
    }
    let mut outcomes = Vec::new();
    let mut device: Option<String> = None;
    for sc in &SCENARIOS {
        let o = scenario(sc, &plan, &loaders, device.as_deref(), &mut progress)?;
        device.get_or_insert_with(|| o.device.clone());
        outcomes.push(o);
    }
    progress.finish();

    let first = &outcomes[0];
    println!(
        "device: {} (vendor platform: {})",
        first.device, first.platform
    );
    println!(
        "LP: {0}x{0} Mandelbrot, {1} iterations, back to back; HP: {2}x{2}, {3} iterations, {4} launches",
        plan.lp.0, plan.lp.1, plan.hp.0, plan.hp.1, plan.samples
    );
    if let Some((lp, hp)) = launch_us {
        println!(
            "(sized for this device: one launch alone, bare, took {} (LP) and {} (HP))",
            crate::units::duration_ns(lp * 1000),
            crate::units::duration_ns(hp * 1000)
        );
    }
    println!();
    let rows: Vec<(&str, &Outcome)> = SCENARIOS.iter().map(|s| s.name).zip(&outcomes).collect();
    print!("{}", report::table(&rows));
    verdict(&outcomes)
}

/// Compares the results of every run and says what the numbers mean.
fn verdict(o: &[Outcome]) -> Result<(), String> {
    let hp_same = o.iter().all(|x| x.hp_checksum == o[0].hp_checksum);
    let lp: Vec<&String> = o.iter().filter_map(|x| x.lp_checksum.as_ref()).collect();
    let lp_same = lp.iter().all(|c| *c == lp[0]);
    if !(hp_same && lp_same) {
        return Err("results differ between the bare vendor and SoftPreempt".into());
    }
    println!(
        "\nresults bit-identical on every path: yes (HP {}, LP {})",
        o[0].hp_checksum, lp[0]
    );
    // In `SCENARIOS`' order.
    let [bare_alone, bare, layered_alone, layered] = o else {
        return Err(format!(
            "{} scenarios ran, not {}",
            o.len(),
            SCENARIOS.len()
        ));
    };
    let pct = |x: &Outcome, p: f64| report::percentile(&x.latencies, p) as f64;
    let rate = |x: &Outcome| x.lp.map_or(0.0, |(n, s)| n as f64 / s.max(1e-9));
    println!(
        "through SoftPreempt, HP p99 is {:.2}x the bare vendor's ({:.2}x the HP alone), and LP throughput {:+.0}%",
        pct(layered, 99.0) / pct(bare, 99.0).max(1.0),
        pct(layered, 99.0) / pct(bare_alone, 99.0).max(1.0),
        (rate(layered) / rate(bare).max(1e-9) - 1.0) * 100.0
    );
    // Rule 8: the layer costs a lone HP nothing.
    println!(
        "the HP alone pays {:+.0}% p50 through SoftPreempt",
        (pct(layered_alone, 50.0) / pct(bare_alone, 50.0).max(1.0) - 1.0) * 100.0
    );
    Ok(())
}

/// What a child said, or that it is gone.
enum Event {
    Line(Value),
    Exited,
}

/// A running child role.
struct Worker {
    role: &'static str,
    child: Child,
    stderr: Arc<Mutex<String>>,
}

impl Worker {
    fn spawn(
        role: &'static str,
        env: &[EnvChange],
        vars: &[(&str, String)],
        tx: Sender<(&'static str, Event)>,
    ) -> Result<Worker, String> {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let mut cmd = Command::new(exe);
        cmd.arg("demo")
            .env(worker::ROLE, role)
            .env(ENV_PRIORITY, if role == "hp" { "high" } else { "low" })
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        for (k, v) in vars {
            cmd.env(k, v);
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start the {role} process: {e}"))?;
        let stdout = child.stdout.take().ok_or("no pipe to the child")?;
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(v) = serde_json::from_str(&line) {
                    let _ = tx.send((role, Event::Line(v)));
                }
            }
            let _ = tx.send((role, Event::Exited));
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        if let Some(mut pipe) = child.stderr.take() {
            let keep = stderr.clone();
            std::thread::spawn(move || {
                let mut text = String::new();
                let _ = pipe.read_to_string(&mut text);
                *keep.lock().unwrap_or_else(|p| p.into_inner()) = text;
            });
        }
        Ok(Worker {
            role,
            child,
            stderr,
        })
    }

    /// Closes stdin: the LP role's signal to stop.
    fn stop(&mut self) {
        drop(self.child.stdin.take());
    }

    /// The last lines the child wrote on stderr, for error messages.
    fn stderr_tail(&self) -> String {
        // The child has just exited: give the stderr reader a moment to collect it.
        std::thread::sleep(Duration::from_millis(100));
        let text = self
            .stderr
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let lines: Vec<&str> = text.lines().rev().take(3).collect();
        lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // A child that reported "done" exits by itself in a moment; one that did not (the
        // demo failed) must not outlive the demo.
        for _ in 0..200 {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The children's messages, and which children finished their work.
struct Inbox {
    rx: Receiver<(&'static str, Event)>,
    finished: Vec<&'static str>,
    deadline: Instant,
}

impl Inbox {
    /// Waits for the next message of `role` that has `key`. A child's error, or a child
    /// that ends before it is done, fails the demo with the child's own words.
    fn expect(&mut self, workers: &[&Worker], role: &str, key: &str) -> Result<Value, String> {
        loop {
            let left = self.deadline.saturating_duration_since(Instant::now());
            let (from, ev) = match self.rx.recv_timeout(left) {
                Ok(m) => m,
                Err(RecvTimeoutError::Timeout) => {
                    return Err(format!("the {role} process took too long"))
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err("lost the child processes".into())
                }
            };
            match ev {
                Event::Line(v) if v.get("error").is_some() => {
                    return Err(format!(
                        "{from} process: {}",
                        v["error"].as_str().unwrap_or("?")
                    ))
                }
                Event::Line(v) => {
                    if v.get("done").is_some() {
                        self.finished.push(from);
                    }
                    if from == role && v.get(key).is_some() {
                        return Ok(v);
                    }
                }
                Event::Exited if self.finished.contains(&from) => {}
                Event::Exited => {
                    let w = workers.iter().find(|w| w.role == from);
                    return Err(format!(
                        "the {from} process ended early: {}",
                        w.map(|w| w.stderr_tail()).unwrap_or_default()
                    ));
                }
            }
        }
    }
}

/// Grows image `start` on the bare vendor's device until a launch takes about `target`
/// (the `size` child role); the size and what its launch took, in µs.
fn size_for(
    start: (usize, usize),
    target: Duration,
    loaders: &Loaders,
    progress: &mut Progress,
) -> Result<((usize, usize), u64), String> {
    progress.phase("sizing the workloads for this device".to_string());
    let (tx, rx) = channel();
    let mut inbox = Inbox {
        rx,
        finished: Vec::new(),
        deadline: Instant::now() + SCENARIO_LIMIT,
    };
    let vars = [
        (worker::LAYERED, "0".to_string()),
        (worker::SIZE, format!("{},{}", start.0, start.1)),
        (worker::TARGET_US, target.as_micros().to_string()),
    ];
    let w = Worker::spawn("size", &loaders.bare, &vars, tx)?;
    let v = inbox.expect(&[&w], "size", "size")?;
    progress.tick();
    let n = |i: usize| v["size"][i].as_u64().map(|x| x as usize);
    match (n(0), n(1)) {
        (Some(width), Some(iters)) => Ok(((width, iters), v["launch_us"].as_u64().unwrap_or(0))),
        _ => Err(format!("the size process answered {v}")),
    }
}

fn scenario(
    sc: &Scenario,
    plan: &Plan,
    loaders: &Loaders,
    device: Option<&str>,
    progress: &mut Progress,
) -> Result<Outcome, String> {
    let deadline = Instant::now() + SCENARIO_LIMIT;
    let env = if sc.layered {
        &loaders.layered
    } else {
        &loaders.bare
    };
    let mut vars = vec![(
        worker::LAYERED,
        if sc.layered { "1" } else { "0" }.to_string(),
    )];
    if let Some(d) = device {
        vars.push((worker::DEVICE, d.to_string()));
    }
    let (tx, rx) = channel();
    let mut inbox = Inbox {
        rx,
        finished: Vec::new(),
        deadline,
    };
    let mut lp = None;
    if sc.with_lp {
        progress.phase(format!("{}: starting the LP process", sc.name));
        let mut v = vars.clone();
        v.push((worker::SIZE, format!("{},{}", plan.lp.0, plan.lp.1)));
        let w = Worker::spawn("lp", env, &v, tx.clone())?;
        inbox.expect(&[&w], "lp", "ready")?;
        lp = Some(w);
    }
    progress.tick();
    progress.phase(format!("{}: starting the HP process", sc.name));
    let mut v = vars;
    v.push((worker::SIZE, format!("{},{}", plan.hp.0, plan.hp.1)));
    v.push((
        worker::SAMPLES,
        format!("{},{}", plan.samples, plan.pause_ms),
    ));
    let hp = Worker::spawn("hp", env, &v, tx)?;
    let all: Vec<&Worker> = lp.iter().chain([&hp]).collect();
    let ready = inbox.expect(&all, "hp", "ready")?;
    let mut o = Outcome {
        platform: ready["platform"].as_str().unwrap_or("?").into(),
        device: ready["device"].as_str().unwrap_or("?").into(),
        ..Default::default()
    };
    for i in 0..plan.samples {
        progress.note(format!("{}: HP launch {}/{}", sc.name, i + 1, plan.samples));
        let s = inbox.expect(&all, "hp", "sample")?;
        o.latencies.push(s["latency_ns"].as_u64().unwrap_or(0));
        progress.tick();
    }
    let done = inbox.expect(&all, "hp", "done")?;
    o.hp_checksum = done["checksum"].as_str().unwrap_or("?").into();
    o.latencies.sort_unstable();
    drop(all);
    if let Some(mut w) = lp {
        progress.phase(format!("{}: stopping the LP process", sc.name));
        w.stop();
        let done = inbox.expect(&[&w, &hp], "lp", "done")?;
        o.lp = Some((
            done["launches"].as_u64().unwrap_or(0),
            done["seconds"].as_f64().unwrap_or(0.0),
        ));
        o.lp_checksum = done["checksum"].as_str().map(String::from);
    }
    progress.tick();
    Ok(o)
}
