//! The shape of the shared library as the ICD loader sees it, and how it behaves when it is
//! loaded but not used, or when its vendor or configuration is broken. Child processes are
//! used wherever the loader must start with a different environment.

mod common;

use opencl_sys::*;
use std::process::Command;

fn tool(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(out.status.success(), "{cmd} failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn exports_exactly_the_three_icd_symbols() {
    let lib = common::library_path();
    let text = tool("nm", &["-D", "--defined-only", lib.to_str().unwrap()]);
    let mut syms: Vec<&str> = text
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_addr, kind, name) = (f.next()?, f.next()?, f.next()?);
            (kind == "T" || kind == "D" || kind == "B" || kind == "W" || kind == "V")
                .then_some(name)
        })
        .collect();
    syms.sort();
    assert_eq!(
        syms,
        [
            "clGetExtensionFunctionAddress",
            "clGetPlatformInfo",
            "clIcdGetPlatformIDsKHR"
        ]
    );
}

#[test]
fn does_not_link_libopencl() {
    let lib = common::library_path();
    let text = tool("readelf", &["-d", lib.to_str().unwrap()]);
    let needed: Vec<&str> = text.lines().filter(|l| l.contains("(NEEDED)")).collect();
    assert!(!needed.is_empty(), "readelf output unexpected: {text}");
    assert!(
        needed.iter().all(|l| !l.contains("libOpenCL")),
        "{needed:?}"
    );
}

/// Runs this test binary again as a child that reports what the loader shows it.
fn child(role: &str, envs: &[(&str, &str)]) -> (String, String) {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", "child_role", "--nocapture", "--test-threads=1"])
        .env("SOFTPREEMPT_TEST_ROLE", role)
        .env("SOFTPREEMPT_CONFIG", "/dev/null")
        .env_remove("SOFTPREEMPT_LOG");
    common::point_loader(&mut cmd, role);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "child {role} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn platform_names() -> Vec<String> {
    let mut n = 0;
    // SAFETY: two-call pattern; the loader returns an error when there is no platform.
    unsafe {
        if clGetPlatformIDs(0, std::ptr::null_mut(), &mut n) != CL_SUCCESS {
            return Vec::new();
        }
        let mut v = vec![std::ptr::null_mut(); n as usize];
        clGetPlatformIDs(n, v.as_mut_ptr(), std::ptr::null_mut());
        v.iter()
            .map(|&p| common::platform_string(p, CL_PLATFORM_NAME))
            .collect()
    }
}

/// The names of this process's threads, sorted.
fn threads() -> String {
    let mut v: Vec<String> = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| {
            std::fs::read_to_string(e.path().join("comm"))
                .unwrap_or_default()
                .trim()
                .to_string()
        })
        .collect();
    v.sort();
    v.join(",")
}

/// The body of the child processes (a no-op when run as a normal test).
#[test]
fn child_role() {
    let Ok(role) = std::env::var("SOFTPREEMPT_TEST_ROLE") else {
        return;
    };
    match role.as_str() {
        "names" => println!("PLATFORMS={}", platform_names().join("|")),
        "threads" => {
            // Enumerate every platform's devices, as applications do before choosing: the
            // vendor (PoCL) starts its own workers then, in both processes alike. The layer
            // itself must add nothing until a context exists on its platform.
            let names = platform_names();
            let mut n = 0;
            // SAFETY: two-call pattern into a local vector.
            unsafe {
                clGetPlatformIDs(0, std::ptr::null_mut(), &mut n);
                let mut v = vec![std::ptr::null_mut(); n as usize];
                clGetPlatformIDs(n, v.as_mut_ptr(), std::ptr::null_mut());
                for p in v {
                    let mut nd = 0;
                    clGetDeviceIDs(
                        p,
                        CL_DEVICE_TYPE_ALL as cl_device_type,
                        0,
                        std::ptr::null_mut(),
                        &mut nd,
                    );
                }
            }
            println!("THREADS={}", threads());
            println!("PLATFORMS={}", names.join("|"));
        }
        _ => panic!("unknown role {role}"),
    }
}

fn field<'a>(out: &'a str, key: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.split_once(key).map(|(_, v)| v))
        .unwrap_or_else(|| panic!("{key} missing in {out}"))
}

#[test]
fn missing_vendor_gives_zero_platforms_and_one_log_line() {
    let (out, err) = child(
        "names",
        &[("SOFTPREEMPT_VENDORS", "/nonexistent/libnot-a-driver.so")],
    );
    let names = field(&out, "PLATFORMS=");
    assert_eq!(
        names,
        common::vendor_name(),
        "the loader's other platforms keep working"
    );
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("softpreempt")).collect();
    assert!(
        lines.iter().any(|l| l.contains("libnot-a-driver.so")),
        "a clear log line names the vendor: {err}"
    );
    assert!(
        lines.len() <= 2,
        "one clear message, not a flood: {lines:?}"
    );
}

#[test]
fn broken_vendor_library_is_skipped() {
    // A file that is not a shared library at all.
    let bogus = std::env::temp_dir().join(format!("softpreempt-bogus-{}.so", std::process::id()));
    std::fs::write(&bogus, b"not an ELF file").unwrap();
    let (out, _) = child("names", &[("SOFTPREEMPT_VENDORS", bogus.to_str().unwrap())]);
    let names: Vec<&str> = field(&out, "PLATFORMS=").split('|').collect();
    assert!(
        names.contains(&common::vendor_name().as_str()) && !names.contains(&"SoftPreempt"),
        "{names:?}"
    );
}

#[test]
fn bad_config_falls_back_to_defaults() {
    let cfg = std::env::temp_dir().join(format!("softpreempt-bad-{}.toml", std::process::id()));
    std::fs::write(&cfg, "version = 1\nno_such_key = true\n").unwrap();
    let (out, err) = child("names", &[("SOFTPREEMPT_CONFIG", cfg.to_str().unwrap())]);
    assert!(field(&out, "PLATFORMS=").contains("SoftPreempt"));
    assert!(
        err.contains("no_such_key") && err.contains(":2"),
        "error names file:line and key: {err}"
    );
}

#[test]
fn loaded_but_unused_costs_no_thread_and_no_shared_memory() {
    let shm_before: Vec<_> = list_shm();
    let (with, _) = child("threads", &[]);
    let bare_dir = std::env::temp_dir().join(format!("softpreempt-bare-{}", std::process::id()));
    std::fs::create_dir_all(&bare_dir).unwrap();
    std::fs::write(bare_dir.join("pocl.icd"), common::pocl_library() + "\n").unwrap();
    let vendor = common::pocl_library();
    let mut bare_env = vec![("OCL_ICD_VENDORS", bare_dir.to_str().unwrap())];
    if std::env::var_os("SOFTPREEMPT_TEST_FILENAMES").is_some() {
        bare_env.push(("OCL_ICD_FILENAMES", vendor.as_str()));
    }
    let (without, _) = child("threads", &bare_env);
    assert!(field(&with, "PLATFORMS=").contains("SoftPreempt"));
    assert!(!field(&without, "PLATFORMS=").contains("SoftPreempt"));
    assert_eq!(
        field(&with, "THREADS="),
        field(&without, "THREADS="),
        "the layer started a thread at load"
    );
    assert_eq!(
        list_shm(),
        shm_before,
        "the layer created shared memory at load"
    );
}

fn list_shm() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/dev/shm")
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains("softpreempt"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}
