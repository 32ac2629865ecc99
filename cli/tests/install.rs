//! `softpreempt install` / `uninstall` into temporary prefixes: a user install, an
//! exclusive install that moves a (fake) vendor entry behind SoftPreempt's config, and
//! refusals; `uninstall` must restore the tree byte for byte.

mod common;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use common::*;

/// A sandbox: a fake vendors directory holding a vendor's `.icd`, and a library to
/// install.
struct Sandbox {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Sandbox {
    fn new() -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        std::fs::create_dir_all(root.join("sys/vendors")).unwrap();
        std::fs::write(
            root.join("sys/vendors/fake.icd"),
            "/opt/fake/libfakecl.so\n",
        )
        .unwrap();
        std::fs::create_dir_all(root.join("build")).unwrap();
        std::fs::write(root.join("build/libsoftpreempt.so"), b"\x7fELF not really").unwrap();
        Sandbox { _dir: dir, root }
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// `softpreempt ARGS` (plus `--lib <fake>` for install) with the fake vendors
    /// directory as the loader's.
    fn run(&self, args: &[&OsStr]) -> std::process::Output {
        let mut all: Vec<OsString> = args.iter().map(|a| a.to_os_string()).collect();
        if args[0] == "install" {
            all.push("--lib".into());
            all.push(self.p("build/libsoftpreempt.so").into());
        }
        run(
            all,
            &[("OCL_ICD_VENDORS", self.p("sys/vendors").as_os_str())],
        )
    }
}

fn os(p: &Path) -> &OsStr {
    p.as_os_str()
}

#[test]
fn user_install_and_uninstall_round_trip() {
    let s = Sandbox::new();
    let before = tree(&s.root);
    let prefix = s.p("prefix");
    let o = s.run(&["install".as_ref(), "--prefix".as_ref(), os(&prefix)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let vendors = prefix.join("etc/OpenCL/vendors");
    assert!(
        out.lines().last().unwrap() == format!("export OCL_ICD_VENDORS={}", vendors.display()),
        "{out}"
    );
    let lib = prefix.join("lib/libsoftpreempt.so");
    assert_eq!(std::fs::read(&lib).unwrap(), b"\x7fELF not really");
    assert_eq!(
        std::fs::read_to_string(vendors.join("softpreempt.icd")).unwrap(),
        format!("{}\n", lib.display())
    );
    // The vendor stays visible: its entry is copied next to ours.
    assert_eq!(
        std::fs::read_to_string(vendors.join("fake.icd")).unwrap(),
        "/opt/fake/libfakecl.so\n"
    );
    assert!(s.p("sys/vendors/fake.icd").exists());

    let again = s.run(&["install".as_ref(), "--prefix".as_ref(), os(&prefix)]);
    assert!(one_line_error(&again, 1).contains("already installed"));

    let o = s.run(&["uninstall".as_ref(), "--prefix".as_ref(), os(&prefix)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(tree(&s.root), before);
    let o = s.run(&["uninstall".as_ref(), "--prefix".as_ref(), os(&prefix)]);
    assert!(one_line_error(&o, 1).contains("nothing to uninstall"));
}

#[test]
fn exclusive_install_hides_the_vendor_and_uninstall_puts_it_back() {
    let s = Sandbox::new();
    std::fs::create_dir_all(s.p("etc")).unwrap();
    let config = s.p("etc/softpreempt.toml");
    std::fs::write(
        &config,
        "# mine\nlog = \"info\"\n\n[sched]\nmax_inflight = 1\n",
    )
    .unwrap();
    let before = tree(&s.root);
    let prefix = s.p("prefix");
    let o = s.run(&[
        "install".as_ref(),
        "--exclusive".as_ref(),
        "--prefix".as_ref(),
        os(&prefix),
        "--vendors-dir".as_ref(),
        os(&s.p("sys/vendors")),
        "--config".as_ref(),
        os(&config),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Only SoftPreempt's entry is left where the loader looks.
    let names: Vec<String> = std::fs::read_dir(s.p("sys/vendors"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["softpreempt.icd"]);
    let stored = s.p("etc/softpreempt/vendors/fake.icd");
    assert_eq!(
        std::fs::read_to_string(&stored).unwrap(),
        "/opt/fake/libfakecl.so\n"
    );
    // The config names it, and is still valid, with the user's own settings.
    let o = run([OsStr::new("config"), "check".as_ref(), os(&config)], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report = stdout(&o);
    let file = format!("# file:{}", config.display());
    let vendors_line = report
        .lines()
        .find(|l| l.starts_with("vendors = "))
        .unwrap();
    assert!(
        vendors_line.contains(&stored.display().to_string()),
        "{report}"
    );
    assert!(vendors_line.ends_with(&file), "{report}");
    assert!(report.contains("log = \"info\""), "{report}");

    let o = s.run(&["uninstall".as_ref(), "--prefix".as_ref(), os(&prefix)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(tree(&s.root), before);
}

#[test]
fn refusals_change_nothing() {
    let s = Sandbox::new();
    let prefix = s.p("prefix");
    // A config that chose its vendors already.
    std::fs::create_dir_all(s.p("etc")).unwrap();
    std::fs::write(s.p("etc/softpreempt.toml"), "vendors = [\"/x.so\"]\n").unwrap();
    // A library that install did not put there.
    std::fs::create_dir_all(prefix.join("lib")).unwrap();
    std::fs::write(prefix.join("lib/libsoftpreempt.so"), "someone else's").unwrap();
    let before = tree(&s.root);

    let exclusive = s.run(&[
        "install".as_ref(),
        "--exclusive".as_ref(),
        "--prefix".as_ref(),
        os(&s.p("other")),
        "--config".as_ref(),
        os(&s.p("etc/softpreempt.toml")),
    ]);
    assert!(one_line_error(&exclusive, 1).contains("sets `vendors` already"));
    assert_eq!(tree(&s.root), before);
    let clash = s.run(&["install".as_ref(), "--prefix".as_ref(), os(&prefix)]);
    assert!(one_line_error(&clash, 1).contains("libsoftpreempt.so exists already"));
    assert_eq!(tree(&s.root), before);

    // A failure half way (the loader entry's place is taken) rolls the library back.
    std::fs::remove_file(prefix.join("lib/libsoftpreempt.so")).unwrap();
    std::fs::create_dir_all(prefix.join("etc/OpenCL/vendors/softpreempt.icd")).unwrap();
    let before = tree(&s.root);
    let half = s.run(&["install".as_ref(), "--prefix".as_ref(), os(&prefix)]);
    assert!(one_line_error(&half, 1).contains("softpreempt.icd exists already"));
    assert_eq!(tree(&s.root), before);

    let o = run(
        [
            OsStr::new("install"),
            "--prefix".as_ref(),
            os(&prefix),
            "--lib".as_ref(),
            "/nonexistent.so".as_ref(),
        ],
        &[],
    );
    assert!(one_line_error(&o, 1).contains("/nonexistent.so"));
    assert_eq!(tree(&s.root), before);
}
