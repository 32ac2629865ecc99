//! Issue 12, CPU devices: a process whose queue on a CPU device (PoCL) is `low` moves the
//! vendor's device threads to the idle scheduling class once a higher priority registers
//! on the device, and not before; a queue above `low` in the same process keeps them in
//! the ordinary class. Its launches then go straight to the vendor, as alone (the
//! operating system already puts them behind the higher priority's). Shown through the
//! threads' scheduling policy and the arbiter's grant counter, never through timing.
//! The higher priority is a real second process (this binary in a child role).

mod common;
mod managed_common;

use common::{ok, Env};
use managed_common as mc;
use opencl_sys::*;
use std::path::Path;
use std::time::Duration;

const ROLE: &str = "SP_CPU_IDLE_ROLE";
const STOP: &str = "SP_CPU_IDLE_STOP";

fn fill_kernel(env: &Env) -> cl_kernel {
    let prog = mc::build(env, &format!("{}{}", mc::MIX_CL, mc::FILL_CL), "")
        .unwrap_or_else(|e| panic!("{e}"));
    let k = env.kernel(prog, "fill");
    mc::arg(k, 0, env.buffer(1024 * 4));
    mc::arg(k, 1, 3u32);
    mc::arg(k, 2, 100u32);
    k
}

fn run(q: cl_command_queue, k: cl_kernel) {
    ok(mc::enqueue(q, k, None, &[1024], Some(&[64]), &[], None));
    mc::finish(q);
}

/// With the device threads in the idle class, the operating system puts the low queue's
/// work behind any other process's, so its launches go straight to the vendor as they do
/// alone, even queued back to back: far more predicted work than the in-flight budget a
/// queue that must defer keeps (`target_slice_us`), each launch far shorter than a piece.
/// True when no launch took a grant once the kernel was learned, and the results are
/// exact.
fn launches_go_direct(dir: &Path, env: &Env, low: cl_command_queue) -> bool {
    const N: usize = 4096;
    const ITERS: u32 = 300;
    let prog = mc::build(env, &format!("{}{}", mc::MIX_CL, mc::FILL_CL), "")
        .unwrap_or_else(|e| panic!("{e}"));
    let k = env.kernel(prog, "fill");
    let out = env.buffer(N * 4);
    let launch = |seed: u32| {
        mc::arg(k, 0, out);
        mc::arg(k, 1, seed);
        mc::arg(k, 2, ITERS);
        ok(mc::enqueue(low, k, None, &[N], Some(&[64]), &[], None));
    };
    // The first launches go through the FIFO and teach the timing model.
    for seed in 0..5 {
        launch(seed);
        mc::finish(low);
    }
    let grants = || -> u64 { mc::clients_at(dir, "low").iter().map(|c| c.grants).sum() };
    let learned = grants();
    for seed in 0..40 {
        launch(100 + seed);
    }
    mc::finish(low);
    let got: Vec<u32> = env.read_on(low, out, N);
    assert_eq!(mc::check_fill(&got, 0, 139, ITERS), None);
    grants() == learned
}

/// Not a test on its own: the high-priority child (see `managed_common::high_child`).
#[test]
fn child_role() {
    mc::high_child(ROLE, STOP);
}

/// The same, in a process that enumerates the vendor's own platform's devices before it
/// touches SoftPreempt's, as an application choosing among all platforms may, and as
/// ocl-icd does itself when it sorts the platforms by their device counts and read the
/// vendor's entry first: PoCL starts its workers then, outside any call of the layer, so
/// the layer must have seen them start when it discovered the vendor. Before session 40 it
/// had not, and the low queue's threads stayed ordinary (pyopencl's pair on PoCL: the HP's
/// p99 above bare's).
#[test]
fn the_device_threads_are_found_when_the_vendor_s_platform_is_enumerated_first() {
    if std::env::var(ROLE).is_ok() || std::env::var_os(VENDOR_FIRST_CHILD).is_some() {
        return;
    }
    // Held while the child runs: this process's own run of that test would otherwise run
    // beside it, two low queues learning and timing their launches at once on a 2-core
    // machine, each beside a high child. One run in twelve here failed in both instances
    // at once (short launches through the FIFO), likely so.
    let _g = mc::serial();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_low_queue_idles_the_cpu_device_threads_once_a_higher_priority_registers",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(VENDOR_FIRST_CHILD, "1")
        // ocl-icd would otherwise count every platform's devices at its first call, in the
        // order it read the entries (which one is first then depends on the directory):
        // the child's own enumeration is to come first.
        .env("OCL_ICD_PLATFORM_SORT", "none")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    // The child ran the test, and enumerated the vendor's platform first.
    assert!(text.contains("1 passed"), "{text}");
    assert!(text.contains(VENDOR_FIRST_DONE), "{text}");
}

/// Set in the child of the test above.
const VENDOR_FIRST_CHILD: &str = "SP_CPU_IDLE_VENDOR_FIRST_CHILD";
/// What that child prints once it has enumerated the vendor's platform's devices.
const VENDOR_FIRST_DONE: &str = "enumerated the vendor's platform first";

#[test]
fn a_low_queue_idles_the_cpu_device_threads_once_a_higher_priority_registers() {
    if std::env::var(ROLE).is_ok() {
        return;
    }
    let dir = mc::init("");
    let _g = mc::serial();
    if std::env::var_os(VENDOR_FIRST_CHILD).is_some() {
        // The vendor's workers start here, in a call the layer never sees.
        common::device(common::bare_platform());
        println!("{VENDOR_FIRST_DONE}");
    }
    let mut env = Env::sp();
    if mc::is_gpu(&env) {
        return; // a GPU's kernels run on no thread of ours
    }
    // Its default queue is `normal`, which would keep the threads ordinary (below).
    env.close_queue();
    let low = mc::priority_queue(&env, CL_QUEUE_PRIORITY_LOW_KHR);
    let k = fill_kernel(&env);
    run(low, k);
    assert_eq!(
        mc::idle_threads(),
        0,
        "alone, the device threads stay ordinary"
    );

    let stop = dir.join("cpu-idle-stop");
    let _ = std::fs::remove_file(&stop);
    let mut high = mc::spawn_high("child_role", ROLE, STOP, &stop);
    mc::eventually("the high child registers", Duration::from_secs(30), || {
        mc::all_clients(dir).iter().any(|c| mc::at_level(c, "high"))
    });
    // The low queue's next command sees the higher priority.
    run(low, k);
    let idle = mc::idle_threads();
    let direct = idle > 0 && launches_go_direct(dir, &env, low);
    std::fs::write(&stop, b"").unwrap();
    assert!(high.wait().unwrap().success(), "high-priority child failed");
    assert!(
        idle > 0,
        "no device thread moved to the idle class\n{}",
        mc::describe(dir)
    );
    assert!(
        direct,
        "with its device threads in the idle class, the low queue's short launches took \
         grants (went through its FIFO) next to the registered higher priority\n{}",
        mc::describe(dir)
    );

    // A queue above low in this process: its kernels run on the same threads, which go
    // back to the ordinary class (allowed here: the tests run as root), or stay idle with
    // one warning where the system refuses.
    // SAFETY: reading the effective uid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let normal = mc::priority_queue(&env, CL_QUEUE_PRIORITY_MED_KHR);
        assert_eq!(
            mc::idle_threads(),
            0,
            "a normal queue keeps the device threads ordinary"
        );
        // ... and while it lives, the low queue leaves them so.
        run(low, k);
        assert_eq!(mc::idle_threads(), 0);
        // SAFETY: queues the test owns.
        ok(unsafe { clReleaseCommandQueue(normal) });
    }
    // SAFETY: queues the test owns.
    ok(unsafe { clReleaseCommandQueue(low) });
}
