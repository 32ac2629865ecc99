//! Issue 13 as a user meets it: a pyopencl script run twice with one `XDG_CACHE_HOME`.
//! The second run loads its programs from pyopencl's binary cache; through SoftPreempt it
//! must still see the application's argument counts (pyopencl checks them), compute what
//! the bare driver computes, and have its geometry-reading kernel sliced.
//!
//! Needs a Python with pyopencl (from PyPI): `SOFTPREEMPT_TEST_PYTHON` names it, else
//! `python3` is tried. Without pyopencl the test says so and passes; CI's venv has it.

mod common;
mod managed_common;

use managed_common as mc;
use std::path::{Path, PathBuf};
use std::process::Command;

const SCRIPT: &str = r#"
import sys
import numpy as np
import pyopencl as cl
import pyopencl.array as cla

plat = [p for p in cl.get_platforms() if p.name == sys.argv[1]][0]
ctx = cl.Context(plat.get_devices())
q = cl.CommandQueue(ctx)
src = """
kernel void groups(global uint* o, uint k) {
    size_t i = get_global_id(0);
    o[i] = (uint)get_group_id(0) * 1000u + (uint)get_num_groups(0) + k;
}
kernel void plain(global uint* o, uint k) { size_t i = get_global_id(0); o[i] = o[i] * 3u + k; }
"""
prg = cl.Program(ctx, src).build()
groups, plain = cl.Kernel(prg, "groups"), cl.Kernel(prg, "plain")
n = 1 << 16
a = cla.zeros(q, n, np.uint32)
groups(q, (n,), (64,), a.data, np.uint32(7))
plain(q, (n,), (64,), a.data, np.uint32(5))
h = a.get()
i = np.arange(n, dtype=np.uint64)
want = (((i // 64) * 1000 + n // 64 + 7) * 3 + 5).astype(np.uint32)
x = cla.arange(q, 100000, dtype=np.float32)
print("@result", "ok" if (h == want).all() else "WRONG", groups.num_args, float(cla.sum(x).get()))
"#;

/// Runs the script on `platform`; its `@result` line.
fn run(dir: &Path, script: &Path, cache: &Path, platform: &str, profile: &Path) -> String {
    let mut cmd = Command::new(common::python());
    cmd.arg(script)
        .arg(platform)
        .env("XDG_CACHE_HOME", cache)
        .env(
            "SOFTPREEMPT_CONFIG",
            mc::write_config(dir, "slice = \"always\"\ntarget_slice_us = 50"),
        )
        .env("SOFTPREEMPT_PROFILE", profile)
        .env_remove("PYOPENCL_NO_CACHE")
        .env_remove("PYOPENCL_CTX");
    common::point_loader(&mut cmd, "pyopencl");
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{platform}: {text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .find_map(|l| l.strip_prefix("@result "))
        .unwrap_or_else(|| panic!("no result: {text}"))
        .to_string()
}

/// Slices of `kernel` in a profile file.
fn slices(profile: &Path, kernel: &str) -> u64 {
    std::fs::read_to_string(profile)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["kernel"] == kernel)
        .filter_map(|v| v["slices"].as_u64())
        .sum()
}

#[test]
fn a_second_run_from_pyopencls_cache_is_right_and_sliced() {
    if !common::has_pyopencl_or_skip() {
        return;
    }
    common::setup();
    let dir = mc::private_dir("pyopencl");
    let script = dir.join("cached.py");
    std::fs::write(&script, SCRIPT).unwrap();
    let cache = |tag: &str| -> PathBuf {
        let c = dir.join(tag);
        std::fs::create_dir_all(&c).unwrap();
        c
    };
    let bare_cache = cache("bare-cache");
    let sp_cache = cache("sp-cache");
    let want = run(
        &dir,
        &script,
        &bare_cache,
        &common::vendor_name(),
        &dir.join("bare.jsonl"),
    );
    assert!(want.starts_with("ok 2 "), "bare: {want}");
    for round in 1..=2 {
        let profile = dir.join(format!("sp{round}.jsonl"));
        let got = run(&dir, &script, &sp_cache, "SoftPreempt", &profile);
        assert_eq!(got, want, "round {round} through SoftPreempt");
        assert!(
            slices(&profile, "groups") >= 2,
            "round {round}: the geometry-reading kernel was not sliced"
        );
        assert!(slices(&profile, "plain") >= 2, "round {round}");
    }
    // The second round loaded pyopencl's cache, whose binaries the store knew.
    assert!(
        sp_cache.join("pyopencl").is_dir(),
        "pyopencl cached nothing"
    );
    assert!(
        std::fs::read_dir(sp_cache.join("softpreempt").join("programs"))
            .map(|d| d.count())
            .unwrap_or(0)
            > 0,
        "the program store is empty"
    );
}
