//! Issue 12 through the real loader: slices of an uneven kernel are cut by the cost of
//! the rows they cover. A kernel whose first quarter of work-items costs 64 times the
//! rest is launched a few times over the same range with a NULL local size; once its row
//! profile is learned, the slices over the dear rows must hold far fewer rows than those
//! over the cheap ones (a cost-blind planner cuts them alike), a launch's first slice, after
//! the cheap end of the launch before, must be no wider than the other dear ones, the
//! slices must tile every
//! launch, and the results must be exact. The work runs in a child process (this binary
//! in the `SP_UNEVEN_ROLE` role), whose trace is complete once its queue is released.

mod common;
mod managed_common;

use common::{ok, Env};
use managed_common as mc;
use serde_json::Value;
use std::process::Command;

const ROLE: &str = "SP_UNEVEN_ROLE";
const N: usize = 64 * 1024;
const LAUNCHES: usize = 5;

const SRC: &str = "
__kernel void uneven(__global uint *out, uint iters, uint heavy) {
    size_t i = get_global_id(0);
    uint n = i < heavy ? iters : iters / 64;
    uint x = (uint)i;
    for (uint k = 0; k < n; ++k)
        x = x * 1664525u + 1013904223u;
    out[i] = x;
}";

fn expected(i: usize, iters: u32, heavy: usize) -> u32 {
    let n = if i < heavy { iters } else { iters / 64 };
    let mut x = i as u32;
    for _ in 0..n {
        x = x.wrapping_mul(1664525).wrapping_add(1013904223);
    }
    x
}

/// The child: `LAUNCHES` launches over the same range, checked after each.
#[test]
fn child_role() {
    if std::env::var_os(ROLE).is_none() {
        return;
    }
    // Slicing is under test: yielding launches are off (`tests/managed_yield.rs`).
    mc::init("slice = \"always\"\ntarget_slice_us = 500\nyielding = \"never\"");
    let env = Env::sp();
    let prog = mc::build(&env, SRC, "").unwrap_or_else(|e| panic!("{e}"));
    let k = env.kernel(prog, "uneven");
    let n = mc::sliceable_items(&env, N);
    // About 20 ms of the dear quarter on PoCL's two threads; a GPU is far faster.
    let iters: u32 = if mc::is_gpu(&env) { 64_000 } else { 2_000 };
    let heavy = n / 4;
    println!("@items {n} heavy {heavy}");
    let out = env.buffer(n * 4);
    mc::arg(k, 0, out);
    mc::arg(k, 1, iters);
    mc::arg(k, 2, heavy as u32);
    for _ in 0..LAUNCHES {
        ok(mc::enqueue(env.queue, k, None, &[n], None, &[], None));
        let got = env.read::<u32>(out, n);
        if let Some(i) = (0..n).find(|&i| got[i] != expected(i, iters, heavy)) {
            panic!("index {i}: got {:#x}", got[i]);
        }
    }
}

fn slices_of(dir: &std::path::Path) -> Vec<(u64, u64)> {
    let file = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .expect("a trace file");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "slice")
        .map(|e| {
            let a = &e["args"];
            (
                a["first_row"].as_u64().unwrap(),
                a["rows"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn dear_rows_get_narrower_slices() {
    if std::env::var_os(ROLE).is_some() {
        return;
    }
    let dir = mc::private_dir("uneven");
    let traces = dir.join("traces");
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["child_role", "--exact", "--nocapture", "--test-threads=1"])
        .env(ROLE, "1")
        .env("SOFTPREEMPT_TRACE", &traces)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (items, heavy): (u64, u64) = stdout
        .lines()
        .find_map(|l| {
            let mut w = l.split("@items ").nth(1)?.split_whitespace();
            let n = w.next()?.parse().ok()?;
            let h = w.nth(1)?.parse().ok()?;
            Some((n, h))
        })
        .expect("the child's sizes");
    let slices = slices_of(&traces);
    // Launches start at row 0: split the slices into launches and check each is tiled.
    let mut launches: Vec<Vec<(u64, u64)>> = Vec::new();
    for s in slices {
        if s.0 == 0 {
            launches.push(Vec::new());
        }
        launches
            .last_mut()
            .expect("a launch starts at row 0")
            .push(s);
    }
    assert_eq!(launches.len(), LAUNCHES, "launches in the trace");
    let rows = launches[0].iter().map(|s| s.1).sum::<u64>();
    for l in &launches {
        let mut next = 0;
        for &(first, n) in l {
            assert_eq!(first, next, "slices tile the launch: {l:?}");
            next += n;
        }
        assert_eq!(next, rows, "slices cover the launch: {l:?}");
    }
    // Rows are work-groups along the range; the dear quarter is the first rows/4.
    let dear_end = rows * heavy / items;
    let last = launches.last().unwrap();
    let mean = |it: Vec<u64>| it.iter().sum::<u64>() as f64 / it.len().max(1) as f64;
    let dear = mean(
        last.iter()
            .filter(|s| s.0 + s.1 <= dear_end)
            .map(|s| s.1)
            .collect(),
    );
    // Slices mostly over cheap rows (one slice may start in the last dear rows).
    let cheap = mean(
        last.iter()
            .filter(|s| s.0 + s.1 / 2 >= dear_end)
            .map(|s| s.1)
            .collect(),
    );
    assert!(
        last.len() > 2 && dear > 0.0 && cheap > 0.0,
        "the last launch was cut over both parts: {last:?}"
    );
    // The first slice of a launch follows the cheap end of the one before: sized by the
    // latest pieces or the kernel's average cost, it would take several times the rows
    // of the other slices over the dear quarter; by the row profile it takes about the
    // same.
    let mut dear_rows: Vec<u64> = last
        .iter()
        .filter(|s| s.0 + s.1 <= dear_end)
        .map(|s| s.1)
        .collect();
    dear_rows.sort_unstable();
    let median = dear_rows[dear_rows.len() / 2];
    assert!(
        last[0].1 <= 2 * median,
        "the first slice holds {} rows, the median slice over dear rows {median}: {last:?}",
        last[0].1
    );
    // The cost per row differs 64-fold; a slice over cheap rows must hold at least 4
    // times the rows of one over dear rows (equal rows if the planner ignored the cost).
    assert!(
        cheap >= 4.0 * dear,
        "rows per slice: {dear:.1} over dear rows, {cheap:.1} over cheap ones: {last:?}"
    );
}
