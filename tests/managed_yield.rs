//! Yielding launches (issue 23), through the real loader on PoCL. With `yielding =
//! "chaos"` every yielding launch is asked to stop at a random moment and resumes from its
//! ticket: the results must be exactly those of the whole launch, and the arbiter's
//! counters must show that yields happened (so the test cannot pass by never yielding).
//! Kernels that read the launch geometry through helpers, `__local` memory with barriers,
//! and 2-D ranges with an offset are covered, built from source and loaded from a binary
//! in another process (through the program store, as from pyopencl's or tinygrad's cache).

mod common;
mod managed_common;

use common::{bare_platform, ok, Env};
use managed_common as mc;
use opencl_sys::*;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const SCHED: &str = "yielding = \"chaos\"\nhp_linger_us = 0";

/// A kernel that reads its geometry through a helper and sums a tile in `__local`
/// memory behind barriers; each item's value depends on its group, its place in it and
/// the launch's offset, so a virtual group that ran with the wrong geometry, twice or not
/// at all shows in the output. A third of the items write nothing, under a condition
/// rather than by `return`: on a CPU device a body with barriers and a `return` gets no
/// flat entry (PoCL 3.1 runs some of those wrongly) and would never yield here.
const SRC: &str = r#"
uint mix(uint x, uint n) {
    for (uint i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        x ^= x >> 13;
    }
    return x;
}
size_t flat_group(void) { return get_group_id(1) * get_num_groups(0) + get_group_id(0); }
__kernel void tiles(__global uint* out, uint iters) {
    __local uint tile[64];
    size_t l = get_local_id(1) * get_local_size(0) + get_local_id(0);
    tile[l] = mix((uint)(get_global_id(0) * 7 + get_global_id(1)), iters);
    barrier(CLK_LOCAL_MEM_FENCE);
    uint sum = 0;
    for (uint k = 0; k < 64; k++) sum += tile[k];
    barrier(CLK_LOCAL_MEM_FENCE);
    size_t w = get_global_size(0);
    size_t x = get_global_id(0) - get_global_offset(0), y = get_global_id(1) - get_global_offset(1);
    if (x % 3 != 2) out[y * w + x] = sum ^ (uint)flat_group();
}
"#;

const W: usize = 512;
const H: usize = 256;
const ITERS: u32 = 400;

fn expected(offset: [usize; 2]) -> Vec<u32> {
    let mut out = vec![0u32; W * H];
    let groups_x = W / 8;
    for gy in 0..H / 8 {
        for gx in 0..groups_x {
            let mut sum = 0u32;
            for ly in 0..8 {
                for lx in 0..8 {
                    let (x, y) = (offset[0] + gx * 8 + lx, offset[1] + gy * 8 + ly);
                    sum = sum.wrapping_add(mc::mix((x * 7 + y) as u32, ITERS));
                }
            }
            for ly in 0..8 {
                for lx in 0..8 {
                    let (x, y) = (gx * 8 + lx, gy * 8 + ly);
                    if x % 3 != 2 {
                        out[y * W + x] = sum ^ (gy * groups_x + gx) as u32;
                    }
                }
            }
        }
    }
    out
}

fn yields(dir: &std::path::Path) -> u64 {
    mc::sum_of(&mc::clients_of(dir, std::process::id()), None, |c| {
        c.yields_done
    })
}

/// Launches `k` (`SRC`'s `tiles`) on the low queue until the process has yielded at least
/// `min_yields` times over at least `min_launches` launches, checking every result.
fn launch_until_yields(
    dir: &Path,
    env: &Env,
    low: cl_command_queue,
    k: cl_kernel,
    min_yields: u64,
    min_launches: usize,
) {
    let out = env.buffer(W * H * 4);
    let offset = [16usize, 8];
    let want = expected(offset);
    // The persistent entries build on a thread of the layer: the first launches go as
    // before, later ones yield. Each result is checked either way.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut launches = 0;
    while yields(dir) < min_yields || launches < min_launches {
        assert!(
            Instant::now() < deadline,
            "{} yields after {launches} launches\n{}",
            yields(dir),
            mc::describe(dir)
        );
        let zero = vec![0u32; W * H];
        env.write(out, &zero);
        mc::arg(k, 0, out);
        mc::arg(k, 1, ITERS);
        ok(mc::enqueue(
            low,
            k,
            Some(&offset),
            &[W, H],
            Some(&[8, 8]),
            &[],
            None,
        ));
        mc::finish(low);
        // SAFETY: a blocking read of the test's buffer into a vector of its size.
        let got: Vec<u32> = {
            let mut v = vec![0u32; W * H];
            ok(unsafe {
                clEnqueueReadBuffer(
                    low,
                    out,
                    CL_TRUE,
                    0,
                    W * H * 4,
                    v.as_mut_ptr() as *mut std::ffi::c_void,
                    0,
                    std::ptr::null(),
                    std::ptr::null_mut(),
                )
            });
            v
        };
        assert_eq!(
            got,
            want,
            "launch {launches}: {}",
            mc::first_difference(&got, &want)
        );
        launches += 1;
    }
    mc::release_mems(&[out]);
}

/// A low-priority queue and an idle high-priority one (so the low queue's launches go
/// through its FIFO), released by [`release_queues`].
fn low_and_high(env: &Env) -> [cl_command_queue; 2] {
    [
        mc::priority_queue(env, CL_QUEUE_PRIORITY_LOW_KHR),
        mc::priority_queue(env, CL_QUEUE_PRIORITY_HIGH_KHR),
    ]
}

fn release_queues(qs: [cl_command_queue; 2]) {
    for q in qs {
        // SAFETY: queues the test owns.
        ok(unsafe { clReleaseCommandQueue(q) });
    }
}

#[test]
fn chaos_yields_and_resumes_give_exact_results() {
    let dir = mc::init(SCHED);
    let _g = mc::serial();
    let env = Env::sp();
    let qs = low_and_high(&env);
    let prog = mc::build(&env, SRC, "").unwrap_or_else(|e| panic!("{e}"));
    let k = env.kernel(prog, "tiles");
    launch_until_yields(dir, &env, qs[0], k, 3, 4);
    release_queues(qs);
}

/// Build options of the programs loaded from binaries below: programs of their own
/// (PoCL's binary depends on them), so no other test's program or stored entries are
/// theirs.
const STORED_OPTIONS: &str = "-DSP_TEST_VARIANT=1";
const UNKNOWN_OPTIONS: &str = "-DSP_TEST_VARIANT=2";

/// The child processes below: the binary they load, and whether it must yield.
const BINARY: &str = "SP_TEST_YIELD_BINARY";
const MUST_YIELD: &str = "SP_TEST_MUST_YIELD";

/// The log lines of `core::yield_program` that tell where a program's entries came from.
const LOADED: &str = "persistent entries loaded from the program store";
const COMPILED: &str = "persistent entries compiled";
const NO_SOURCE: &str = "no persistent entries: the program's source is not known";

/// Runs `binary_child` (a process of this test binary) on the binary in `bin`, with `core::yield_program`'s debug log;
/// returns that log (its standard error). PoCL's kernel cache is off in it: with it on,
/// the entries' binary is not stored (see the last test of these).
fn run_binary_child(bin: &Path, must_yield: bool) -> String {
    run_binary_child_with(bin, must_yield, "0")
}

/// [`run_binary_child`] with `POCL_KERNEL_CACHE` set to `pocl_cache`.
fn run_binary_child_with(bin: &Path, must_yield: bool, pocl_cache: &str) -> String {
    let must_yield = if must_yield { "1" } else { "0" };
    let bin = bin.as_os_str();
    run_logged_child(
        "binary_child",
        &[
            (BINARY, bin),
            (MUST_YIELD, must_yield.as_ref()),
            ("POCL_KERNEL_CACHE", pocl_cache.as_ref()),
        ],
        "binary child ok",
    )
}

/// Runs the test `name` of this binary in a process of its own, with `env` and
/// `core::yield_program`'s debug log, and checks that it succeeded and printed `marker`;
/// returns that log (its standard error).
fn run_logged_child(name: &str, env: &[(&str, &std::ffi::OsStr)], marker: &str) -> String {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .envs(env.iter().copied())
        .env(
            "SOFTPREEMPT_LOG",
            "softpreempt_platform::core::yield_program=debug",
        )
        .output()
        .unwrap();
    let (text, log) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(
        out.status.success() && text.contains(marker),
        "{text}\n{log}"
    );
    log
}

/// The process of the tests below: loads the binary at low priority under chaos, checks
/// every result, and that it yielded (or never did, for a binary the store does not know).
#[test]
fn binary_child() {
    let Some(bin) = std::env::var_os(BINARY).map(PathBuf::from) else {
        return;
    };
    let must_yield = std::env::var(MUST_YIELD).as_deref() == Ok("1");
    let dir = mc::init(SCHED);
    let env = Env::sp();
    let qs = low_and_high(&env);
    let prog = mc::program_from_binary(&env, &std::fs::read(bin).unwrap(), "");
    let k = env.kernel(prog, "tiles");
    if must_yield {
        launch_until_yields(dir, &env, qs[0], k, 3, 4);
    } else {
        launch_until_yields(dir, &env, qs[0], k, 0, 4);
        assert_eq!(yields(dir), 0, "{}", mc::describe(dir));
    }
    release_queues(qs);
    println!("binary child ok");
}

/// This process tree's program store (see `common::private_cache`).
fn store_dir() -> PathBuf {
    PathBuf::from(std::env::var_os("XDG_CACHE_HOME").unwrap())
        .join("softpreempt")
        .join("programs")
}

/// The store's files whose name ends in `.ext`.
fn store_files(ext: &str) -> Vec<PathBuf> {
    std::fs::read_dir(store_dir())
        .map(|rd| rd.flatten().map(|e| e.path()).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect()
}

/// A program built from source here, its binary fetched (so the store records it), then
/// loaded from that binary by other processes: the first compiles its persistent entries
/// and keeps their binary in the store, the second loads them from there; with that
/// binary corrupt, the third compiles them again. All yield, with exact results.
#[test]
fn a_binary_loaded_in_another_process_yields() {
    mc::init(SCHED);
    // Held throughout: this process's other tests write the same store.
    let _g = mc::serial();
    let env = Env::sp();
    let prog = mc::build(&env, SRC, STORED_OPTIONS).unwrap_or_else(|e| panic!("{e}"));
    let before = store_files("json");
    let bin = mc::private_dir("yield-binary").join("tiles.bin");
    std::fs::write(&bin, mc::binary_of(prog)).unwrap();
    // SAFETY: our program.
    unsafe { clReleaseProgram(prog) };
    // The store's entry for it keeps the source, and says the kernel yields.
    let fresh: Vec<PathBuf> = store_files("json")
        .into_iter()
        .filter(|e| !before.contains(e))
        .collect();
    assert_eq!(fresh.len(), 1, "one store entry for the binary");
    let text = std::fs::read_to_string(&fresh[0]).unwrap();
    let entry: serde_json::Value = serde_json::from_str(text.split_once('\n').unwrap().1).unwrap();
    assert_eq!(entry["kernels"][0]["yields"], "Yes", "{entry}");
    assert_eq!(entry["source"]["options"], STORED_OPTIONS, "{entry}");

    let built_before = store_files("built");
    let log = run_binary_child(&bin, true);
    assert!(log.contains(COMPILED) && !log.contains(LOADED), "{log}");
    let built: Vec<PathBuf> = store_files("built")
        .into_iter()
        .filter(|e| !built_before.contains(e))
        .collect();
    assert_eq!(built.len(), 1, "the entries' binary is stored");

    let log = run_binary_child(&bin, true);
    assert!(log.contains(LOADED) && !log.contains(COMPILED), "{log}");

    let mut bytes = std::fs::read(&built[0]).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x5a;
    std::fs::write(&built[0], &bytes).unwrap();
    let log = run_binary_child(&bin, true);
    assert!(log.contains(COMPILED) && !log.contains(LOADED), "{log}");
    assert_ne!(
        std::fs::read(&built[0]).unwrap(),
        bytes,
        "compiled again, the entries' binary is stored whole again"
    );
}

/// Build options of the program below: a program of its own, whose entries no other test
/// stores.
const POCL_CACHED_OPTIONS: &str = "-DSP_TEST_VARIANT=3";

/// Where the vendor keeps its builds itself (PoCL with its kernel cache on, its default),
/// the entries' binary is not stored: on PoCL it cost a compile of every entry on the
/// launch's thread, and PoCL's cache makes a later process's rebuild cheap. The child
/// compiles them, yields with exact results, and the store gains no entries' binary
/// (with the cache off it gains one: the test above).
#[test]
fn entries_are_not_stored_where_the_vendor_caches_builds() {
    if !mc::is_pocl() {
        return;
    }
    mc::init(SCHED);
    let _g = mc::serial();
    let env = Env::sp();
    let prog = mc::build(&env, SRC, POCL_CACHED_OPTIONS).unwrap_or_else(|e| panic!("{e}"));
    let bin = mc::private_dir("yield-binary-pocl-cached").join("tiles.bin");
    std::fs::write(&bin, mc::binary_of(prog)).unwrap();
    // SAFETY: our program.
    unsafe { clReleaseProgram(prog) };
    let built_before = store_files("built");
    let log = run_binary_child_with(&bin, true, "1");
    assert!(log.contains(COMPILED) && !log.contains(LOADED), "{log}");
    let built: Vec<PathBuf> = store_files("built")
        .into_iter()
        .filter(|e| !built_before.contains(e))
        .collect();
    assert!(built.is_empty(), "stored: {built:?}");
}

/// A binary the store does not know (built on the bare platform) gets no persistent
/// entries: it runs exactly, and never yields.
#[test]
fn an_unknown_binary_does_not_yield() {
    mc::init(SCHED);
    let _g = mc::serial();
    let bare = Env::new(bare_platform());
    let prog = mc::build(&bare, SRC, UNKNOWN_OPTIONS).unwrap_or_else(|e| panic!("{e}"));
    let bin = mc::private_dir("unknown-binary").join("tiles.bin");
    std::fs::write(&bin, mc::binary_of(prog)).unwrap();
    // SAFETY: our program.
    unsafe { clReleaseProgram(prog) };
    let log = run_binary_child(&bin, false);
    assert!(log.contains(NO_SOURCE), "{log}");
    assert!(!log.contains(COMPILED) && !log.contains(LOADED), "{log}");
}

/// Whether a thread of the layer still builds persistent entries (its thread name, cut to
/// the 15 bytes Linux keeps).
fn entries_building() -> bool {
    std::fs::read_dir("/proc/self/task")
        .map(|rd| {
            rd.flatten().any(|t| {
                std::fs::read_to_string(t.path().join("comm"))
                    .is_ok_and(|c| c.trim_end() == "softpreempt-yie")
            })
        })
        .unwrap_or(false)
}

/// A kernel of a few milliseconds on PoCL (so that at the default configuration its
/// third launch asks for its program's persistent entries: the first launch teaches the
/// timing model, the second makes it warm), which PoCL compiles much faster than it builds
/// those entries (all of the source, again).
const QUICK_SRC: &str = r#"
__kernel void quick(__global uint* out, uint k) {
    uint x = (uint)get_global_id(0);
    for (uint i = 0; i < k; i++) {
        x = x * 1664525u + 1013904223u;
    }
    out[get_global_id(0)] = x;
}
"#;

/// What `QUICK_SRC`'s kernel writes at `x`.
fn quick(mut x: u32, k: u32) -> u32 {
    for _ in 0..k {
        x = x.wrapping_mul(1664525).wrapping_add(1013904223);
    }
    x
}

/// Runs `QUICK_SRC`'s kernel three times in a new context whose program has build options
/// `options` (the third launch starts the entries' build),
/// checks the result, and releases everything right away; returns whether the program's
/// persistent entries were still building then.
fn quick_round(options: &str) -> bool {
    let env = Env::sp();
    let qs = low_and_high(&env);
    let building = run_quick(&env, qs[0], options, (16384, 2000), 3);
    release_queues(qs);
    drop(env);
    building
}

/// Builds `QUICK_SRC` with `options` and runs its kernel `launches` times on `q` over
/// `n` items with its argument `k` (`(n, k)`), each waited for; checks the result and
/// releases everything of it. Returns whether persistent entries were still building right
/// after the launches.
fn run_quick(
    env: &Env,
    q: cl_command_queue,
    options: &str,
    (n, k): (usize, u32),
    launches: usize,
) -> bool {
    let prog = mc::build(env, QUICK_SRC, options).unwrap_or_else(|e| panic!("{e}"));
    let kernel = env.kernel(prog, "quick");
    let out = env.buffer(n * 4);
    mc::arg(kernel, 0, out);
    mc::arg(kernel, 1, k);
    for _ in 0..launches {
        ok(mc::enqueue(q, kernel, None, &[n], Some(&[64]), &[], None));
        mc::finish(q);
    }
    let building = entries_building();
    let want: Vec<u32> = (0..n as u32).map(|x| quick(x, k)).collect();
    assert_eq!(env.read::<u32>(out, n), want);
    mc::release_mems(&[out]);
    // SAFETY: the test's kernel and program, released once.
    unsafe {
        ok(clReleaseKernel(kernel));
        ok(clReleaseProgram(prog));
    }
    building
}

/// Makes glibc fill freed memory (with this byte's complement) in the child below: a
/// vendor object used after it was freed then holds no valid pointer, so the use crashes
/// instead of passing unnoticed.
const PERTURB: &str = "MALLOC_PERTURB_";

/// The application releases its kernel, program, queues and context right after the
/// launch that started its program's persistent entries' build, while they still build on
/// the layer's thread, as pyopencl's tests do at their end. The build must hold the vendor context:
/// building in a context PoCL had destroyed corrupted its heap, and pyopencl's suite under
/// chaos crashed in a later clCreateContext (issue 23). Without the hold, the child
/// crashed (SIGBUS or SIGSEGV, mostly at its exit) in 7 runs of 10.
#[test]
fn releasing_the_context_while_its_entries_build() {
    // Its child stores entries' binaries in this process tree's program store, which
    // `a_binary_loaded_in_another_process_yields` counts.
    let _g = mc::serial();
    mc::run_child(
        "releasing_child",
        (PERTURB, std::ffi::OsStr::new("165")),
        "releasing child ok",
    );
}

/// The process of the test above. The options are new to PoCL's compiler cache, so the
/// entries' build (started by a round's third launch) takes seconds and the launches do
/// not; then a new context runs the kernel exactly while that build goes on, and once more
/// after it ended.
#[test]
fn releasing_child() {
    if std::env::var_os(PERTURB).is_none() {
        return;
    }
    // The default configuration: the entries build on a thread of the layer (under chaos
    // a launch waits for them, so there is no race to test).
    mc::init("hp_linger_us = 0");
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    // The race is the point: a round whose entries were built before its launch ended (a
    // busy machine) tests nothing, so up to three rounds with new options. On a CPU device
    // (PoCL) there is no race any more: the launch waits for the build there
    // (`core::yield_program`: a process exiting while PoCL compiled on our thread died in
    // LLVM), so the rounds must find nothing still building, and the releases and new
    // contexts below must still work.
    let caught = (0..3).any(|attempt| {
        quick_round(&format!(
            "-DSP_TEST_RELEASE={}_{nonce}_{attempt}",
            std::process::id()
        ))
    });
    if mc::is_pocl() {
        assert!(
            !caught,
            "on a CPU device the launch that starts the entries' build waits for it"
        );
    } else {
        assert!(
            caught,
            "a round's third launch starts the entries' build, which is still running when \
             it ends"
        );
    }
    quick_round("-DSP_TEST_RELEASE=0");
    mc::eventually("the entries' builds end", Duration::from_secs(60), || {
        !entries_building()
    });
    quick_round("-DSP_TEST_RELEASE=0");
    println!("releasing child ok");
}

/// The log line of `core::yield_program` when a program's persistent entries start to
/// build (compiled, or loaded from the program store).
const BUILD_STARTED: &str = "persistent entries: build started";
/// Marks, in the child's log, where its long kernel's launches begin.
const LONG_BEGINS: &str = "cold child: the long kernel now";
/// Set for the child process of the test below.
const COLD_CHILD: &str = "SP_TEST_COLD_CHILD";

/// A kernel's first launch may be all cold start: PoCL compiles its work-group functions
/// then (with its kernel cache off, as here, in every process: 130-300 ms for a kernel of
/// 0.1 ms), NVIDIA loads its module. Building the program's persistent entries (a second
/// vendor compile of the whole program) on that evidence alone would be for nothing, so a
/// kernel launched twice starts no build: its second launch is the first the model can
/// learn the kernel's warm time from. (The model that kept the first launch's time found
/// the second launch long and started one; whether the later launches of a short kernel
/// start one depends on its warm time on this machine, so it is not tested here.) A long
/// kernel starts one at its third launch, once its second confirmed it long (so the test
/// can fail).
#[test]
fn a_cold_first_launch_starts_no_entries_build() {
    // The long kernel is long on PoCL's CPU device; a GPU runs it in microseconds.
    if !mc::is_pocl() {
        return;
    }
    // Its child stores entries' binaries too (see the test above).
    let _g = mc::serial();
    let log = run_logged_child(
        "cold_child",
        &[
            (COLD_CHILD, "1".as_ref()),
            ("POCL_KERNEL_CACHE", "0".as_ref()),
        ],
        "cold child ok",
    );
    let (short, long) = log.split_once(LONG_BEGINS).expect(&log);
    assert!(!short.contains(BUILD_STARTED), "short kernel: {short}");
    assert_eq!(
        long.matches(BUILD_STARTED).count(),
        1,
        "long kernel: {long}"
    );
}

/// The process of the test above: the default configuration, a low queue beside an idle
/// high one (so its launches go through the FIFO and teach the model), each kernel in a
/// program of its own, every result checked.
#[test]
fn cold_child() {
    if std::env::var_os(COLD_CHILD).is_none() {
        return;
    }
    mc::init("hp_linger_us = 0");
    let env = Env::sp();
    let qs = low_and_high(&env);
    // Two launches of a short kernel, then three of a long one.
    for (n, k, launches) in [(256usize, 4u32, 2), (4096, 20_000, 3)] {
        if launches == 3 {
            eprintln!("{LONG_BEGINS}");
        }
        run_quick(
            &env,
            qs[0],
            &format!("-DSP_TEST_COLD={k}"),
            (n, k),
            launches,
        );
    }
    release_queues(qs);
    println!("cold child ok");
}
