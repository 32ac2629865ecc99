//! Arbiter benchmarks (not tests): prints a table.
//!
//! `cargo bench -p softpreempt-sched --bench arbiter` runs the full set; without `--bench`
//! (e.g. under `cargo test --benches`) it runs a quick smoke pass.
//!
//! * grant+done: `try_acquire` + `complete`, uncontended.
//! * decision cost with 1/8/64 registered clients: grant+done with the others registered
//!   idle; a blocked decision (a higher client demands); `should_yield`; and the round robin
//!   with every client demanding at one level (the only case that reads other slots).
//! * device memory: `charge_memory` (judged against a higher level's reserve) and
//!   `release_memory` with 1/8/64 memory clients on the device.
//! * wake-up latency: a child process blocks in `acquire` behind our high-priority demand;
//!   we go idle and measure until the child holds its grant (CLOCK_MONOTONIC is
//!   system-wide, so both sides read the same clock).
//! * yield handshake: `claim_device` with nobody lower on the device (what a high
//!   priority pays on every direct command), `enter_device` + `leave_device` (what a
//!   yielding launch pays); and the handshake's wait across processes: a child's launch
//!   is on the device and its watcher sleeps on the yield generation; we `claim_device`
//!   and measure `waited_ns` until it left (the signal path, without any GPU work).

use std::hint::black_box;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use softpreempt_sched::*;

fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer for the call.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn opts(dir: &Path) -> ArbiterOptions {
    ArbiterOptions {
        shm_dir: dir.to_path_buf(),
        hp_linger: Duration::ZERO,
        max_clients: 64,
        ..Default::default()
    }
}

fn ns_per(iters: u64, f: impl FnMut()) -> f64 {
    let mut f = f;
    // Warm up, then take the best of 5 runs (the least disturbed by other load).
    for _ in 0..iters / 10 {
        f();
    }
    (0..5)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            t.elapsed().as_nanos() as f64 / iters as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn child() {
    let dir = PathBuf::from(std::env::var("SP_BENCH_DIR").unwrap());
    let arb = Arbiter::open("bench-wake", &opts(&dir)).unwrap();
    let lo = arb
        .register(ClientInfo::new(Priority::LOW).with_label("child"))
        .unwrap();
    let mut stdin = std::io::stdin().lock();
    let mut stdout = std::io::stdout().lock();
    let mut b = [0u8; 1];
    while stdin.read_exact(&mut b).is_ok() {
        let g = lo.acquire(Duration::from_secs(10)).expect("grant");
        let t1 = now_ns();
        g.complete(1);
        lo.idle();
        stdout.write_all(&t1.to_le_bytes()).unwrap();
        stdout.flush().unwrap();
    }
}

/// Our high client on device `key`, and a child (this binary, in role `role`) on the same
/// device, its stdin and stdout piped.
fn high_and_child(dir: &Path, key: &str, role: &str) -> (Arbiter, Client, std::process::Child) {
    let arb = Arbiter::open(key, &opts(dir)).unwrap();
    let hi = arb
        .register(ClientInfo::new(Priority::HIGH).with_label("parent"))
        .unwrap();
    let kid = Command::new(std::env::current_exe().unwrap())
        .env("SP_BENCH_CHILD", role)
        .env("SP_BENCH_DIR", dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    (arb, hi, kid)
}

fn wake_latency(dir: &Path, rounds: usize) -> Vec<u64> {
    let (arb, hi, mut kid) = high_and_child(dir, "bench-wake", "1");
    let mut to = kid.stdin.take().unwrap();
    let mut from = kid.stdout.take().unwrap();
    let mut lat = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        hi.announce_demand();
        to.write_all(b"x").unwrap();
        to.flush().unwrap();
        // Wait until the child sits in its futex wait, then give it time to sleep.
        while !arb
            .snapshot()
            .clients
            .iter()
            .any(|c| c.label == "child" && c.state == ClientState::Waiting)
        {
            std::thread::sleep(Duration::from_micros(100));
        }
        std::thread::sleep(Duration::from_micros(500));
        let t0 = now_ns();
        hi.idle();
        let mut buf = [0u8; 8];
        from.read_exact(&mut buf).unwrap();
        lat.push(u64::from_le_bytes(buf).saturating_sub(t0));
    }
    drop(to);
    let _ = kid.wait();
    lat.sort_unstable();
    lat
}

/// A child's lower client that acts as a process's watcher: on the device whenever nothing
/// higher wants it, off at once when asked.
fn lp_child() {
    let dir = PathBuf::from(std::env::var("SP_BENCH_DIR").unwrap());
    let arb = Arbiter::open("bench-hs", &opts(&dir)).unwrap();
    let lo = arb
        .register(ClientInfo::new(Priority::LOW).with_label("lp"))
        .unwrap();
    loop {
        while lo.should_yield() {
            lo.heartbeat();
            std::thread::sleep(Duration::from_micros(200));
        }
        let claim = lo.enter_device(Some(1_000_000_000));
        loop {
            let seen = arb.yield_generation();
            lo.heartbeat();
            if claim.yield_requested() {
                break;
            }
            arb.wait_yield_generation(seen, arb.heartbeat_interval());
        }
        lo.leave_device(claim, true);
    }
}

fn handshake_latency(dir: &Path, rounds: usize) -> Vec<u64> {
    let (arb, hi, mut kid) = high_and_child(dir, "bench-hs", "lp");
    let mut waits = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        while !arb
            .snapshot()
            .clients
            .iter()
            .any(|c| c.label == "lp" && c.on_device > 0)
        {
            std::thread::sleep(Duration::from_micros(100));
        }
        // Let the child's watcher fall asleep on the yield generation.
        std::thread::sleep(Duration::from_micros(500));
        let hs = hi.claim_device(Duration::from_secs(1));
        assert!(hs.lower_on_device == 1 && !hs.expired, "{hs:?}");
        waits.push(hs.waited_ns);
        hi.idle();
    }
    let _ = kid.kill();
    let _ = kid.wait();
    waits.sort_unstable();
    waits
}

fn pct(v: &[u64], p: f64) -> f64 {
    v[((v.len() - 1) as f64 * p).round() as usize] as f64 / 1000.0
}

fn main() {
    match std::env::var("SP_BENCH_CHILD").as_deref() {
        Ok("lp") => return lp_child(),
        Ok(_) => return child(),
        Err(_) => {}
    }
    let full = std::env::args().any(|a| a == "--bench");
    let iters: u64 = if full { 200_000 } else { 1_000 };
    let rounds = if full { 2_000 } else { 20 };
    let dir = std::env::temp_dir().join(format!("softpreempt-bench-{}", std::process::id()));
    let shm = PathBuf::from("/dev/shm");
    let dir = if shm.is_dir() {
        shm.join(dir.file_name().unwrap())
    } else {
        dir
    };
    std::fs::create_dir_all(&dir).unwrap();

    println!("| benchmark | clients | result |");
    println!("|---|---:|---:|");
    let mut key = 0;
    for n in [1usize, 8, 64] {
        key += 1;
        let arb = Arbiter::open(&format!("bench-{key}"), &opts(&dir)).unwrap();
        let me = arb.register(ClientInfo::new(Priority::NORMAL)).unwrap();
        let others: Vec<Client> = (1..n)
            .map(|i| {
                let p = [Priority::LOW, Priority::NORMAL, Priority::HIGH][i % 3];
                arb.register(ClientInfo::new(p)).unwrap()
            })
            .collect();
        me.announce_demand();
        let t = ns_per(iters, || me.try_acquire().unwrap().complete(black_box(1)));
        println!("| grant+done, others registered idle | {n} | {t:.0} ns |");
        let t = ns_per(iters, || {
            black_box(me.claim_device(Duration::from_millis(1)));
        });
        println!("| claim_device, nobody lower on the device | {n} | {t:.0} ns |");
        let t = ns_per(iters, || {
            me.leave_device(me.enter_device(Some(1000)), false);
        });
        println!("| enter_device+leave_device, nobody higher | {n} | {t:.0} ns |");
        let t = ns_per(iters, || {
            black_box(me.should_yield());
        });
        println!("| should_yield | {n} | {t:.0} ns |");
        if let Some(h) = others.iter().find(|c| c.priority() == Priority::HIGH) {
            h.announce_demand();
            let t = ns_per(iters, || assert!(me.try_acquire().is_none()));
            println!("| blocked decision (higher demands) | {n} | {t:.0} ns |");
            h.idle();
        }
        drop(others);
        // Round robin: every client demands at one level; each grant scans its peers.
        let peers: Vec<Client> = (1..n)
            .map(|_| arb.register(ClientInfo::new(Priority::NORMAL)).unwrap())
            .collect();
        let all: Vec<&Client> = std::iter::once(&me).chain(peers.iter()).collect();
        for c in &all {
            c.announce_demand();
        }
        let mut i = 0usize;
        let t = ns_per(iters, || {
            all[i % all.len()].try_acquire().unwrap().complete(1);
            i += 1;
        });
        println!("| grant+done, round robin, all demanding | {n} | {t:.0} ns |");
        drop(all);
        drop(peers);
        drop(me);
        // Device memory: one allocation counted, judged against the unused reserve of a
        // higher level (the sum visits every memory client), and returned.
        let mems: Vec<Client> = (0..n)
            .map(|i| {
                let p = [Priority::LOW, Priority::NORMAL, Priority::HIGH][i % 3];
                arb.register(ClientInfo::new(p).for_memory()).unwrap()
            })
            .collect();
        let policy = MemoryPolicy {
            device_bytes: 1 << 34,
            reserve: [0, 0, 1 << 30],
            cap: [None; 3],
        };
        let m = &mems[0];
        let t = ns_per(iters, || {
            m.charge_memory(black_box(4096), &policy).unwrap();
            m.release_memory(4096);
        });
        println!("| memory charge+release, judged (memory clients) | {n} | {t:.0} ns |");
    }
    let lat = wake_latency(&dir, rounds);
    println!(
        "| cross-process wake-up, p50 | 2 | {:.1} µs |",
        pct(&lat, 0.50)
    );
    println!(
        "| cross-process wake-up, p99 | 2 | {:.1} µs |",
        pct(&lat, 0.99)
    );
    println!(
        "| cross-process wake-up, max ({} rounds) | 2 | {:.1} µs |",
        lat.len(),
        pct(&lat, 1.0)
    );
    let hs = handshake_latency(&dir, rounds);
    for (what, p) in [("p50", 0.50), ("p99", 0.99)] {
        println!(
            "| cross-process yield handshake wait, {what} | 2 | {:.1} µs |",
            pct(&hs, p)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
