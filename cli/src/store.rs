//! `softpreempt store list|clear`: the per-user program store (what SoftPreempt learned
//! from programs' sources, keyed by their binaries; see `softpreempt_platform::store`).

use softpreempt_platform::core::objects::Sliceable;
use softpreempt_platform::store::{default_dir, Listed, Store, Yields};

use crate::args::{failed, parse, CliError, Spec};

pub const USAGE: &str = "softpreempt store list [--verbose] | softpreempt store clear";

const LIST: Spec = Spec {
    command: "store list",
    flags: &["--verbose"],
    options: &[],
    short: &[("-v", "--verbose")],
    max_positional: 0,
    trailing: false,
};

const CLEAR: Spec = Spec {
    command: "store clear",
    flags: &[],
    options: &[],
    short: &[],
    max_positional: 0,
    trailing: false,
};

pub fn run(args: &[String]) -> Result<(), CliError> {
    match args.split_first() {
        Some((s, rest)) if s == "list" => list(rest),
        Some((s, rest)) if s == "clear" => clear(rest),
        Some((s, _)) => Err(CliError::Usage(format!(
            "store: unknown subcommand '{s}' (usage: {USAGE})"
        ))),
        None => Err(CliError::Usage(format!("store: usage: {USAGE}"))),
    }
}

/// The store the configuration names (as the library would use it in this environment).
fn store() -> Result<Store, CliError> {
    let cfg = &softpreempt_platform::config::config().store;
    let Some(dir) = cfg.dir.clone().or_else(default_dir) else {
        return failed("store: no store directory (set XDG_CACHE_HOME, HOME or store.dir)");
    };
    if cfg.max_mb == 0 {
        eprintln!("softpreempt store: the store is turned off (store.max_mb = 0)");
    }
    Ok(Store::at(dir, cfg.max_mb << 20))
}

fn list(args: &[String]) -> Result<(), CliError> {
    let verbose = parse(&LIST, args)?.flag("--verbose");
    let s = store()?;
    let entries = s
        .list()
        .or_else(|e| failed(format!("store: {}: {e}", s.entries_dir().display())))?;
    let (blobs, blob_bytes) = s.blobs().unwrap_or((0, 0));
    let (built, built_bytes) = s.built().unwrap_or((0, 0));
    let total: u64 = entries.iter().map(|e| e.bytes).sum::<u64>() + blob_bytes + built_bytes;
    println!(
        "{}: {} entr{}, {blobs} rewritten binar{}, {built} built yielding program{}, {} KiB",
        s.entries_dir().display(),
        entries.len(),
        if entries.len() == 1 { "y" } else { "ies" },
        if blobs == 1 { "y" } else { "ies" },
        if built == 1 { "" } else { "s" },
        total.div_ceil(1024)
    );
    for e in &entries {
        print!("{}", describe(e, verbose));
    }
    Ok(())
}

/// One entry: its binary and device, then one line per kernel.
fn describe(e: &Listed, verbose: bool) -> String {
    let name = e
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (key, entry) = match &e.entry {
        Ok(ke) => ke,
        Err(why) => return format!("  {name}: unreadable ({why})\n"),
    };
    let mut s = format!(
        "  binary sha256:{}  (entry of {} bytes)\n    device: {}\n",
        key.binary, e.bytes, key.device
    );
    if let Some(sha) = &entry.rewritten_binary {
        s += &format!("    rewritten binary sha256:{sha}\n");
    }
    for k in &entry.kernels {
        let how = match (&k.sliceable, k.hidden) {
            (Sliceable::Yes { .. }, Some(_)) => "sliced (rewritten)".to_string(),
            (Sliceable::Yes { .. }, None) => "sliced".to_string(),
            (Sliceable::No(why), _) => format!("never sliced: {why}"),
        };
        let yields = match &k.yields {
            Yields::Yes => "yields".to_string(),
            Yields::No(why) => format!("does not yield: {why}"),
            Yields::Unknown => "yielding not recorded (an entry of an older build)".to_string(),
        };
        s += &format!("    kernel {}: {how}; {yields}\n", k.name);
    }
    if let (true, Some(u)) = (verbose, &entry.source) {
        s += &format!(
            "    source for yielding (options {:?}):\n",
            u.options.as_deref().unwrap_or("NULL")
        );
        for line in u.source.lines() {
            s += &format!("      | {line}\n");
        }
    }
    if let (true, Some(r)) = (verbose, &entry.recipe) {
        for (i, u) in r.units.iter().enumerate() {
            s += &format!(
                "    rewritten unit {i} (options {:?}, {} header(s)):\n",
                u.options.as_deref().unwrap_or("NULL"),
                u.headers.len()
            );
            for line in u.source.lines() {
                s += &format!("      | {line}\n");
            }
        }
    }
    s
}

fn clear(args: &[String]) -> Result<(), CliError> {
    parse(&CLEAR, args)?;
    let s = store()?;
    let n = s
        .clear()
        .or_else(|e| failed(format!("store: {}: {e}", s.entries_dir().display())))?;
    println!(
        "removed {n} entr{} from {}",
        if n == 1 { "y" } else { "ies" },
        s.entries_dir().display()
    );
    Ok(())
}
