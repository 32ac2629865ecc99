//! Rule 10 at the default configuration, through the real loader on PoCL, with two real
//! processes: a low-priority process runs long launches back to back (each far over the
//! 0.5 ms that makes a launch worth a yielding launch), then a high-priority process
//! arrives and launches short kernels. The low process's launches must stop on the high
//! one's request and resume from their tickets with exact results, and the high process's
//! handshake must have waited for the low one to leave the device. No timing is asserted:
//! only that yields and handshakes happened, within a generous bound.

mod common;
mod managed_common;

use common::{ok, Env};
use managed_common as mc;
use opencl_sys::*;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Set in the high-priority child: the file whose existence tells it to stop.
const HP_ENV: &str = "SOFTPREEMPT_TEST_ARRIVAL_HP";

/// The low-priority launch: 16384 items of 1000 mixing rounds (tens of ms on PoCL) in
/// groups of 64 (well under a millisecond each).
#[test]
fn a_high_priority_arrival_makes_long_low_launches_yield() {
    arrival(
        "a_high_priority_arrival_makes_long_low_launches_yield",
        16384,
        1000,
        Objects::One,
    );
}

/// OpenCV's way: a kernel object made for each launch and released after. The kernel's
/// first launches are short, so the objects made after them record no argument values
/// (which a yielding launch replays); once its launches are long, the objects made after
/// that record again, and they yield.
#[test]
fn kernel_objects_made_per_launch_yield_once_launches_are_long() {
    arrival(
        "kernel_objects_made_per_launch_yield_once_launches_are_long",
        16384,
        1000,
        Objects::PerLaunch,
    );
}

/// Groups of several milliseconds each: 1024 items of 300000 rounds (on a GPU, groups
/// past the driver's own hand-over are not asked; a CPU device has none, and its
/// launch's threads hold the cores until it ends, so they must be asked all the same).
#[test]
fn on_a_cpu_device_launches_with_long_groups_yield_too() {
    arrival(
        "on_a_cpu_device_launches_with_long_groups_yield_too",
        1024,
        300_000,
        Objects::One,
    );
}

/// How the low process makes its kernel objects.
#[derive(Clone, Copy, PartialEq)]
enum Objects {
    /// One, its arguments set before every launch.
    One,
    /// A new one for every launch, released after it, and first a few short launches so.
    PerLaunch,
}

/// The scenario, as test `name` (the high-priority child reruns it): launches of `n`
/// items of `iters` rounds in groups of 64, by kernel objects made as `objects` says.
fn arrival(name: &str, n: usize, iters: u32, objects: Objects) {
    if let Some(stop) = std::env::var_os(HP_ENV) {
        return high_priority_child(PathBuf::from(stop));
    }
    // One at a time: the tests of this file share the process's arbiter directory, and
    // each counts the yields and handshakes of every client there.
    let _serial = mc::serial();
    // Defaults, only the arbiter directory is private.
    let dir = mc::init("");
    let env = Env::sp();
    let low = mc::priority_queue(&env, CL_QUEUE_PRIORITY_LOW_KHR);
    let prog = mc::build(&env, &format!("{}{}", mc::MIX_CL, mc::FILL_CL), "")
        .unwrap_or_else(|e| panic!("{e}"));
    let one = env.kernel(prog, "fill");
    let out = env.buffer(n * 4);
    if objects == Objects::PerLaunch {
        // Short launches (64 items of 4 rounds), each by a kernel object of its own.
        let want = mc::fill_expected(64, 7, 4);
        for _ in 0..6 {
            let k = env.kernel(prog, "fill");
            mc::arg(k, 0, out);
            mc::arg(k, 1, 7u32);
            mc::arg(k, 2, 4u32);
            ok(mc::enqueue(low, k, None, &[64], Some(&[64]), &[], None));
            mc::finish(low);
            assert_eq!(env.read::<u32>(out, 64), want);
            // SAFETY: the kernel object made above, released once.
            ok(unsafe { clReleaseKernel(k) });
        }
    }
    // Per test: the tests of this file share the process's arbiter directory.
    let stop = dir.join(format!("{name}.stop"));
    let mut hp: Option<std::process::Child> = None;
    let seed = 0x5eed_u32;
    let zero = vec![0u32; n];
    let mut launches = 0u32;
    let (mut yields, mut hs_waits) = (0u64, 0u64);
    let deadline = Instant::now() + Duration::from_secs(90);
    while yields < 2 || hs_waits == 0 {
        assert!(
            Instant::now() < deadline,
            "after {launches} launches: {yields} yields, {hs_waits} handshake waits\n{}",
            mc::describe(dir)
        );
        // Cleared first, so a launch that skipped groups cannot pass on the last one's.
        env.write(out, &zero);
        let k = match objects {
            Objects::One => one,
            Objects::PerLaunch => env.kernel(prog, "fill"),
        };
        mc::arg(k, 0, out);
        mc::arg(k, 1, seed);
        mc::arg(k, 2, iters);
        ok(mc::enqueue(low, k, None, &[n], Some(&[64]), &[], None));
        mc::finish(low);
        if objects == Objects::PerLaunch {
            // SAFETY: this launch's kernel object, released once (the launch holds it).
            ok(unsafe { clReleaseKernel(k) });
        }
        let got: Vec<u32> = env.read(out, n);
        // Every item where the host twin is quick; else at a stride and every group's
        // last item (the twin is slow in debug builds), so that a group skipped or run
        // twice by a resume cannot pass.
        let checked: Vec<usize> = if n as u64 * u64::from(iters) <= 20_000_000 {
            (0..n).collect()
        } else {
            (0..n).step_by(61).chain((63..n).step_by(64)).collect()
        };
        if let Some(&i) = checked
            .iter()
            .find(|&&i| got[i] != mc::mix(i as u32 ^ seed, iters))
        {
            panic!("launch {launches}: index {i} of {n} differs from the host's");
        }
        launches += 1;
        // The first launches teach the prediction and build the persistent entries with
        // nobody else on the device; then the high priority arrives.
        if launches == 3 {
            hp = Some(
                std::process::Command::new(std::env::current_exe().unwrap())
                    .args(["--exact", name, "--nocapture"])
                    .env(HP_ENV, &stop)
                    .spawn()
                    .unwrap(),
            );
        }
        // Read while both run: a client's statistics go with its queue.
        let all = mc::all_clients(dir);
        yields = yields.max(mc::sum_of(&all, Some("low"), |c| c.yields_done));
        hs_waits = hs_waits.max(mc::sum_of(&all, Some("high"), |c| c.hs_waits));
    }
    println!("{launches} launches, {yields} yields, {hs_waits} handshake waits");
    std::fs::write(&stop, b"").unwrap();
    let status = hp.expect("the high priority started").wait().unwrap();
    assert!(status.success(), "the high-priority child failed");
    // SAFETY: the test's own queue.
    ok(unsafe { clReleaseCommandQueue(low) });
}

/// The high-priority process: short launches every few milliseconds, each checked, until
/// the low-priority test creates `stop`.
fn high_priority_child(stop: PathBuf) {
    common::setup();
    let env = Env::sp();
    let high = mc::priority_queue(&env, CL_QUEUE_PRIORITY_HIGH_KHR);
    let prog = mc::build(&env, &format!("{}{}", mc::MIX_CL, mc::FILL_CL), "")
        .unwrap_or_else(|e| panic!("{e}"));
    let k = env.kernel(prog, "fill");
    let n = 256;
    let out = env.buffer(n * 4);
    let want = mc::fill_expected(n, 7, 4);
    let deadline = Instant::now() + Duration::from_secs(120);
    while !stop.exists() && Instant::now() < deadline {
        mc::arg(k, 0, out);
        mc::arg(k, 1, 7u32);
        mc::arg(k, 2, 4u32);
        ok(mc::enqueue(high, k, None, &[n], None, &[], None));
        mc::finish(high);
        let got: Vec<u32> = env.read(out, n);
        assert_eq!(got, want);
        std::thread::sleep(Duration::from_millis(5));
    }
    // SAFETY: the child's own queue.
    ok(unsafe { clReleaseCommandQueue(high) });
}
