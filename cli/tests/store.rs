//! `softpreempt store list|clear` on a program store filled through the library's own
//! store API, in a private `XDG_CACHE_HOME`.

mod common;

use std::ffi::OsStr;

use common::*;
use softpreempt_platform::core::objects::Sliceable;
use softpreempt_platform::store::{Entry, KernelFacts, Key, Recipe, Store, Unit, Yields};

fn entry(rewritten: bool) -> Entry {
    Entry {
        kernels: vec![
            KernelFacts {
                name: "vadd".into(),
                hidden: None,
                sliceable: Sliceable::Yes { null_local: true },
                yields: Yields::Yes,
            },
            KernelFacts {
                name: "groups".into(),
                hidden: rewritten.then_some(2),
                sliceable: if rewritten {
                    Sliceable::Yes { null_local: false }
                } else {
                    Sliceable::No("kernel reads {get_group_id}".into())
                },
                yields: if rewritten {
                    Yields::No("a return may be followed by a barrier".into())
                } else {
                    Yields::Unknown
                },
            },
        ],
        recipe: rewritten.then(|| Recipe {
            units: vec![Unit {
                source: "kernel void groups(global uint* o, ulong16 __sp_geom) {}".into(),
                headers: Vec::new(),
                options: Some("-DBIAS=3u".into()),
            }],
            linked: false,
            link_options: None,
        }),
        rewritten_binary: None,
        source: Some(Unit {
            source: "kernel void vadd(global uint* o) { o[get_global_id(0)] += 1; }".into(),
            headers: Vec::new(),
            options: None,
        }),
    }
}

fn key(n: u8) -> Key {
    Key {
        binary: format!("{n:064x}"),
        device: "Portable Computing Language | OpenCL 3.0 PoCL | cpu | driver 3.1".into(),
    }
}

#[test]
fn lists_and_clears_the_store() {
    let cache = tempfile::tempdir().unwrap();
    let env = [
        ("XDG_CACHE_HOME", cache.path().as_os_str()),
        ("SOFTPREEMPT_CONFIG", OsStr::new("/dev/null")),
    ];
    let store = Store::at(cache.path().join("softpreempt"), 64 << 20);
    let mut rewritten = entry(true);
    rewritten.rewritten_binary = Some(store.put_blob(b"a rewritten binary").unwrap());
    store
        .put_built(&key(9), b"built persistent entries")
        .unwrap();
    store.put(&key(1), &rewritten).unwrap();
    store.put(&key(2), &entry(false)).unwrap();
    // One entry that is not whole: listed as unreadable, never a crash.
    std::fs::write(
        store.entries_dir().join(format!("{}.json", "f".repeat(64))),
        b"{",
    )
    .unwrap();

    let o = run(["store", "list"], &env);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("3 entries, 1 rewritten binary, 1 built yielding program"),
        "{out}"
    );
    assert!(out.contains("rewritten binary sha256:"), "{out}");
    assert!(
        out.contains(&format!("binary sha256:{}", key(1).binary)),
        "{out}"
    );
    assert!(out.contains("kernel groups: sliced (rewritten)"), "{out}");
    assert!(
        out.contains("kernel groups: never sliced: kernel reads"),
        "{out}"
    );
    assert!(out.contains("kernel vadd: sliced; yields"), "{out}");
    assert!(
        out.contains("kernel groups: sliced (rewritten); does not yield: a return may"),
        "{out}"
    );
    assert!(
        out.contains("never sliced: kernel reads {get_group_id}; yielding not recorded"),
        "{out}"
    );
    assert!(out.contains("unreadable"), "{out}");
    assert!(
        !out.contains("ulong16 __sp_geom"),
        "sources only with --verbose: {out}"
    );

    let o = run(["store", "list", "--verbose"], &env);
    assert!(
        stdout(&o).contains("| kernel void groups"),
        "{}",
        stdout(&o)
    );
    assert!(
        stdout(&o).contains("source for yielding (options \"NULL\"):\n      | kernel void vadd"),
        "{}",
        stdout(&o)
    );

    let o = run(["store", "clear"], &env);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("removed 3 entries"), "{}", stdout(&o));
    let o = run(["store", "list"], &env);
    assert!(stdout(&o).contains("0 entries"), "{}", stdout(&o));
}

#[test]
fn the_store_directory_follows_the_configuration() {
    let cache = tempfile::tempdir().unwrap();
    let dir = cache.path().join("elsewhere");
    let env = [
        ("XDG_CACHE_HOME", cache.path().as_os_str()),
        ("SOFTPREEMPT_CONFIG", OsStr::new("/dev/null")),
        ("SOFTPREEMPT_STORE", dir.as_os_str()),
    ];
    Store::at(dir.clone(), 64 << 20)
        .put(&key(1), &entry(true))
        .unwrap();
    let o = run(["store", "list"], &env);
    let out = stdout(&o);
    assert!(out.contains(&dir.display().to_string()), "{out}");
    assert!(out.contains("1 entry,"), "{out}");
}

#[test]
fn bad_command_lines_are_usage_errors() {
    for args in [
        vec!["store"],
        vec!["store", "drop"],
        vec!["store", "list", "extra"],
    ] {
        let o = run(&args, &[("SOFTPREEMPT_CONFIG", OsStr::new("/dev/null"))]);
        let line = one_line_error(&o, 2);
        assert!(line.contains("store"), "{line}");
    }
}
