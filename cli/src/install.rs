//! `softpreempt install` and `uninstall`.
//!
//! A system install (no `--prefix`, or `/usr` or `/usr/local`) registers the library in
//! `/etc/OpenCL/vendors`. Any other prefix is a user install: its own vendors directory,
//! holding SoftPreempt's entry and copies of the vendors' entries, which applications
//! reach through `OCL_ICD_VENDORS` (the line to set is printed). `--exclusive` hides the
//! vendors from the loader: their entries go to `<config dir>/softpreempt/vendors/` and
//! the config file's `vendors` key names them, so only SoftPreempt's platforms show.
//! Every change is recorded in `PREFIX/share/softpreempt/install-manifest.json`, which
//! `uninstall` replays backwards.

use std::path::{Path, PathBuf};

use crate::args::{failed, parse, CliError, Spec};
use crate::locate::{self, ICD_NAME, LIB_NAME, SYSTEM_VENDORS};
use crate::manifest::{undo_all, Action, Manifest, Transaction};
use softpreempt_platform::config::DEFAULT_PATH;

pub const INSTALL_USAGE: &str = "softpreempt install [--prefix DIR] [--exclusive] [--lib FILE] \
[--vendors-dir DIR] [--config FILE]";
pub const UNINSTALL_USAGE: &str = "softpreempt uninstall [--prefix DIR]";

const INSTALL: Spec = Spec {
    command: "install",
    flags: &["--exclusive"],
    options: &["--prefix", "--lib", "--vendors-dir", "--config"],
    short: &[],
    max_positional: 0,
    trailing: false,
};

const UNINSTALL: Spec = Spec {
    command: "uninstall",
    flags: &[],
    options: &["--prefix"],
    short: &[],
    max_positional: 0,
    trailing: false,
};

const DEFAULT_PREFIX: &str = "/usr/local";

/// Where everything goes.
struct Layout {
    /// A system install: the system's loader directory and config file.
    system: bool,
    lib: PathBuf,
    /// The loader directory that gets `softpreempt.icd`.
    vendors_dir: PathBuf,
    config: PathBuf,
    /// Where `--exclusive` puts the vendors' entries.
    store: PathBuf,
    manifest: PathBuf,
}

fn absolute(p: &str) -> Result<PathBuf, CliError> {
    std::path::absolute(p).or_else(|e| failed(format!("{p}: {e}")))
}

fn prefix_of(given: Option<&str>) -> Result<(PathBuf, bool), CliError> {
    let prefix = absolute(given.unwrap_or(DEFAULT_PREFIX))?;
    let system = prefix == Path::new("/usr") || prefix == Path::new(DEFAULT_PREFIX);
    Ok((prefix, system))
}

fn manifest_path(prefix: &Path) -> PathBuf {
    prefix.join("share/softpreempt/install-manifest.json")
}

fn layout(a: &crate::args::Parsed) -> Result<Layout, CliError> {
    let (prefix, system) = prefix_of(a.option("--prefix"))?;
    let or = |opt: &str, system_path: &str, user_path: &str| -> Result<PathBuf, CliError> {
        match a.option(opt) {
            Some(p) => absolute(p),
            None if system => Ok(PathBuf::from(system_path)),
            None => Ok(prefix.join(user_path)),
        }
    };
    let config = or("--config", "/etc/softpreempt.toml", "etc/softpreempt.toml")?;
    let store = config
        .parent()
        .unwrap_or(Path::new("/"))
        .join("softpreempt/vendors");
    Ok(Layout {
        system,
        lib: prefix.join("lib").join(LIB_NAME),
        vendors_dir: or("--vendors-dir", SYSTEM_VENDORS, "etc/OpenCL/vendors")?,
        config,
        store,
        manifest: manifest_path(&prefix),
    })
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

/// The config file must not already choose vendors: `--exclusive` sets that key.
fn check_config_free(config: &Path) -> Result<(), CliError> {
    let Ok(text) = std::fs::read_to_string(config) else {
        return Ok(());
    };
    let table: toml::Table = text.parse().or_else(|e| {
        failed(format!(
            "{} does not parse ({e}); fix it before --exclusive",
            config.display()
        ))
    })?;
    if table.contains_key("vendors") {
        return failed(format!(
            "{} sets `vendors` already; --exclusive needs to set it (remove the key, or \
             install without --exclusive)",
            config.display()
        ));
    }
    Ok(())
}

fn toml_list(paths: &[PathBuf]) -> String {
    let items: Vec<String> = paths
        .iter()
        .map(|p| toml::Value::String(p.display().to_string()).to_string())
        .collect();
    format!("[{}]", items.join(", "))
}

pub fn install(args: &[String]) -> Result<(), CliError> {
    let a = parse(&INSTALL, args)?;
    let exclusive = a.flag("--exclusive");
    let l = layout(&a)?;
    let lib_src = match a.option("--lib") {
        Some(p) => absolute(p)?,
        None => locate::library().or_else(failed)?,
    };
    if !lib_src.is_file() {
        return failed(format!("{}: no such library", lib_src.display()));
    }
    if l.manifest.exists() {
        return failed(format!(
            "already installed (manifest {}); run `softpreempt uninstall` first",
            l.manifest.display()
        ));
    }
    // The vendors the loader shows now; for a user install their entries are copied.
    let source = locate::loader_dir();
    let entries = locate::vendor_entries(&source).or_else(failed)?;
    let in_place = same_dir(&source, &l.vendors_dir);
    if exclusive {
        check_config_free(&l.config)?;
    }

    let mut t = Transaction::default();
    let lib_bytes = std::fs::read(&lib_src)
        .or_else(|e| failed(format!("cannot read {}: {e}", lib_src.display())))?;
    let step = |r: Result<(), String>| r.or_else(|e| failed(hint(e, l.system)));
    step(t.write_new(&l.lib, &lib_bytes, 0o755))?;
    let icd = l.vendors_dir.join(ICD_NAME);
    step(t.write_new(&icd, format!("{}\n", l.lib.display()).as_bytes(), 0o644))?;
    let mut lines = vec![
        format!("  library        {}", l.lib.display()),
        format!("  loader entry   {}", icd.display()),
    ];
    let mut hidden = Vec::new();
    for e in &entries {
        let name = e.file_name().unwrap_or_default();
        let (stored, visible) = (l.store.join(name), l.vendors_dir.join(name));
        let line = match (exclusive, in_place) {
            (true, true) => {
                step(t.move_file(e, &stored))?;
                format!("{} moved to {}", e.display(), stored.display())
            }
            (true, false) => {
                step(t.copy_new(e, &stored))?;
                format!("{} copied to {}", e.display(), stored.display())
            }
            (false, true) => format!("{} (left visible)", e.display()),
            (false, false) => {
                step(t.copy_new(e, &visible))?;
                format!("{} copied to {}", e.display(), visible.display())
            }
        };
        lines.push(format!("  vendor entry   {line}"));
        if exclusive {
            hidden.push(stored);
        }
    }
    if exclusive {
        let block = format!(
            "# Set by `softpreempt install --exclusive`; `softpreempt uninstall` removes it.\n\
             vendors = {}\n\n",
            toml_list(&hidden)
        );
        step(t.prepend(&l.config, &block))?;
        lines.push(format!(
            "  config         {} names the hidden vendors",
            l.config.display()
        ));
    }
    step(t.make_dirs(l.manifest.parent().unwrap_or(Path::new("/"))))?;
    let manifest = Manifest {
        version: 1,
        actions: t.commit(),
    };
    manifest.save(&l.manifest).or_else(failed)?;
    lines.push(format!("  manifest       {}", l.manifest.display()));

    println!("installed SoftPreempt");
    for line in lines {
        println!("{line}");
    }
    if !same_dir(&l.vendors_dir, Path::new(SYSTEM_VENDORS)) {
        let mut env = format!("export OCL_ICD_VENDORS={}", l.vendors_dir.display());
        if exclusive && l.config != Path::new(DEFAULT_PATH) {
            env.push_str(&format!(" SOFTPREEMPT_CONFIG={}", l.config.display()));
        }
        println!("For this user install, set in the environment of OpenCL applications:");
        println!("{env}");
    }
    Ok(())
}

fn hint(e: String, system: bool) -> String {
    if system && e.contains("Permission denied") {
        format!("{e} (a system install needs root; or use --prefix DIR for a user install)")
    } else {
        e
    }
}

pub fn uninstall(args: &[String]) -> Result<(), CliError> {
    let a = parse(&UNINSTALL, args)?;
    let (prefix, system) = prefix_of(a.option("--prefix"))?;
    let path = manifest_path(&prefix);
    let m = Manifest::load(&path).or_else(failed)?;
    // The manifest goes first: its directory is one of the steps undone.
    std::fs::remove_file(&path).or_else(|e| {
        failed(hint(
            format!("cannot remove {}: {e}", path.display()),
            system,
        ))
    })?;
    let count = m.actions.len();
    let (left, err) = undo_all(m.actions);
    match err {
        None => {
            println!(
                "uninstalled SoftPreempt from {} ({count} changes undone)",
                prefix.display()
            );
            for a in &left {
                if let Action::Dir { path } = a {
                    println!("  left {} in place: it is not empty", path.display());
                }
            }
            Ok(())
        }
        Some(e) => {
            let keep = Manifest {
                version: m.version,
                actions: left,
            };
            if let Some(dir) = path.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            keep.save(&path).or_else(failed)?;
            failed(format!(
                "{e}; the steps left are in {} (run uninstall again when fixed)",
                path.display()
            ))
        }
    }
}
