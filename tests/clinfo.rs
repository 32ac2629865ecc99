//! `clinfo`, a real OpenCL application, run through the loader: it must list SoftPreempt and
//! its device, with the device's properties equal to the bare PoCL device's except what is
//! platform-specific.

mod common;

use std::collections::BTreeMap;
use std::process::Command;

/// Device properties that legitimately differ: the extension lists (filtered, plus
/// cl_khr_priority_hints) and handle values.
const PLATFORM_SPECIFIC: &[&str] = &[
    "CL_DEVICE_EXTENSIONS",
    "CL_DEVICE_EXTENSIONS_WITH_VERSION",
    "CL_DEVICE_PLATFORM",
];

/// Properties of extensions the layer does not advertise (cl_khr_command_buffer,
/// cl_khr_external_memory, cl_khr_semaphore and relatives).
const FILTERED_EXTENSION_PROPS: &[&str] = &["COMMAND_BUFFER", "EXTERNAL_MEMORY", "SEMAPHORE"];

fn raw_clinfo() -> String {
    let mut cmd = Command::new("clinfo");
    cmd.arg("--raw").env("SOFTPREEMPT_CONFIG", "/dev/null");
    common::point_loader(&mut cmd, "clinfo");
    let out = cmd
        .output()
        .expect("clinfo is not installed: run scripts/setup.sh");
    assert!(
        out.status.success(),
        "clinfo failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `[TAG/0] CL_DEVICE_X value` lines of one platform's first device.
fn device_props(text: &str, tag: &str) -> BTreeMap<String, String> {
    let prefix = format!("[{tag}/0]");
    text.lines()
        .filter_map(|l| l.trim_start().strip_prefix(&prefix))
        .map(|rest| {
            let rest = rest.trim_start();
            let (k, v) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            (k.to_string(), v.trim().to_string())
        })
        .collect()
}

#[test]
fn clinfo_lists_softpreempt_and_matches_bare_device() {
    let text = raw_clinfo();
    assert!(
        text.contains("CL_PLATFORM_NAME                                SoftPreempt"),
        "{text}"
    );
    let sp = device_props(&text, "SoftPreempt");
    let suffix = std::env::var("SOFTPREEMPT_TEST_SUFFIX").unwrap_or_else(|_| "POCL".into());
    let bare = device_props(&text, &suffix);
    assert!(
        sp.len() > 50,
        "SoftPreempt's device was not listed in full: {} properties",
        sp.len()
    );
    for k in sp.keys() {
        assert!(bare.contains_key(k), "{k} is listed for SoftPreempt only");
    }
    // clinfo only asks for an extension's properties when the extension is listed; the
    // layer filters out extensions whose entry points it does not forward.
    let missing: Vec<&String> = bare.keys().filter(|k| !sp.contains_key(*k)).collect();
    assert!(
        missing
            .iter()
            .all(|k| FILTERED_EXTENSION_PROPS.iter().any(|f| k.contains(f))),
        "properties missing through SoftPreempt: {missing:?}"
    );
    let diffs: Vec<String> = sp
        .iter()
        .filter(|(k, v)| !PLATFORM_SPECIFIC.contains(&k.as_str()) && bare.get(*k) != Some(v))
        .map(|(k, v)| format!("{k}: softpreempt={v:?} bare={:?}", bare.get(k)))
        .collect();
    assert!(
        diffs.is_empty(),
        "device properties differ:\n{}",
        diffs.join("\n")
    );
    assert!(sp["CL_DEVICE_EXTENSIONS"].contains("cl_khr_priority_hints"));
    // The platforms stay apart in clinfo's listing: same vendor (the wrapped one's), but
    // their own name and version. clinfo lists each platform's NAME, VENDOR and VERSION
    // on consecutive lines.
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let value = |l: &str, key: &str| l.strip_prefix(key).map(|v| v.trim().to_string());
    let platforms: Vec<(String, String, String)> = lines
        .windows(3)
        .filter_map(|w| {
            Some((
                value(w[0], "CL_PLATFORM_NAME")?,
                value(w[1], "CL_PLATFORM_VENDOR")?,
                value(w[2], "CL_PLATFORM_VERSION")?,
            ))
        })
        .collect();
    let find = |name: &str| {
        platforms
            .iter()
            .find(|p| p.0 == name)
            .unwrap_or_else(|| panic!("platform {name} not listed: {platforms:?}"))
    };
    let (ours, bare) = (find("SoftPreempt"), find(&common::vendor_name()));
    assert_eq!(ours.1, bare.1, "CL_PLATFORM_VENDOR is the wrapped vendor's");
    assert_ne!(ours.2, bare.2, "CL_PLATFORM_VERSION");
    assert!(ours.2.contains("SoftPreempt"), "{}", ours.2);
}
