//! What `softpreempt install` changed, recorded so that `uninstall` restores exactly what
//! was there: every step is done through a [`Transaction`], which can roll back a failed
//! install and is saved as the manifest.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// One change to the file system, and how to undo it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Action {
    /// Created this directory (removed again if empty).
    Dir { path: PathBuf },
    /// Created this file (removed).
    File { path: PathBuf },
    /// Moved a file (moved back, unless something new is at `from`).
    Moved { from: PathBuf, to: PathBuf },
    /// Put `text` in front of the config file `path` (taken off again); `created`: the
    /// file did not exist before.
    Prepended {
        path: PathBuf,
        text: String,
        created: bool,
    },
}

/// The manifest file's content.
#[derive(Debug, Serialize, Deserialize)]
pub struct Manifest {
    /// Format version.
    pub version: u32,
    /// Steps in the order they were done.
    pub actions: Vec<Action>,
}

fn io_err(what: &str, path: &Path, e: std::io::Error) -> String {
    format!("cannot {what} {}: {e}", path.display())
}

/// Creates `path` and its missing parents, recording each new one.
fn create_dirs(path: &Path, done: &mut Vec<Action>) -> Result<(), String> {
    let mut missing = Vec::new();
    let mut p = Some(path);
    while let Some(dir) = p.filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
        missing.push(dir.to_path_buf());
        p = dir.parent();
    }
    for dir in missing.into_iter().rev() {
        std::fs::create_dir(&dir).map_err(|e| io_err("create directory", &dir, e))?;
        done.push(Action::Dir { path: dir });
    }
    Ok(())
}

/// Refuses to overwrite: install never replaces what it did not put there.
fn ensure_absent(path: &Path) -> Result<(), String> {
    if path.symlink_metadata().is_ok() {
        return Err(format!(
            "{} exists already; remove it (or run `softpreempt uninstall`) first",
            path.display()
        ));
    }
    Ok(())
}

/// Steps done so far; rolled back on drop unless committed.
#[derive(Default)]
pub struct Transaction {
    done: Vec<Action>,
    committed: bool,
}

impl Transaction {
    /// Creates the directory `path` and its missing parents.
    pub fn make_dirs(&mut self, path: &Path) -> Result<(), String> {
        create_dirs(path, &mut self.done)
    }

    /// Writes a new file holding `bytes`, with `mode`.
    pub fn write_new(&mut self, path: &Path, bytes: &[u8], mode: u32) -> Result<(), String> {
        use std::os::unix::fs::OpenOptionsExt;
        ensure_absent(path)?;
        create_dirs(path.parent().unwrap_or(Path::new("/")), &mut self.done)?;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(path)
            .map_err(|e| io_err("create", path, e))?;
        self.done.push(Action::File {
            path: path.to_path_buf(),
        });
        f.write_all(bytes).map_err(|e| io_err("write", path, e))
    }

    /// Copies `from` to the new file `to`, keeping its permission bits.
    pub fn copy_new(&mut self, from: &Path, to: &Path) -> Result<(), String> {
        use std::os::unix::fs::PermissionsExt;
        let bytes = std::fs::read(from).map_err(|e| io_err("read", from, e))?;
        let mode = std::fs::metadata(from)
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap_or(0o644);
        self.write_new(to, &bytes, mode)
    }

    /// Moves `from` to the new path `to`.
    pub fn move_file(&mut self, from: &Path, to: &Path) -> Result<(), String> {
        ensure_absent(to)?;
        create_dirs(to.parent().unwrap_or(Path::new("/")), &mut self.done)?;
        move_path(from, to)?;
        self.done.push(Action::Moved {
            from: from.to_path_buf(),
            to: to.to_path_buf(),
        });
        Ok(())
    }

    /// Puts `text` in front of the file at `path` (creating it if absent).
    pub fn prepend(&mut self, path: &Path, text: &str) -> Result<(), String> {
        let old = match std::fs::read_to_string(path) {
            Ok(t) => Some(t),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(io_err("read", path, e)),
        };
        create_dirs(path.parent().unwrap_or(Path::new("/")), &mut self.done)?;
        let new = format!("{text}{}", old.as_deref().unwrap_or(""));
        std::fs::write(path, new).map_err(|e| io_err("write", path, e))?;
        self.done.push(Action::Prepended {
            path: path.to_path_buf(),
            text: text.to_string(),
            created: old.is_none(),
        });
        Ok(())
    }

    /// Keeps the changes and returns them, for the manifest.
    pub fn commit(mut self) -> Vec<Action> {
        self.committed = true;
        std::mem::take(&mut self.done)
    }
}

impl Drop for Transaction {
    fn drop(&mut self) {
        if !self.committed {
            // Best effort: the error that caused the rollback is what gets reported.
            let _ = undo_all(std::mem::take(&mut self.done));
        }
    }
}

fn move_path(from: &Path, to: &Path) -> Result<(), String> {
    match std::fs::rename(from, to) {
        Ok(()) => Ok(()),
        // Across file systems: copy (with permissions), then remove.
        Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
            std::fs::copy(from, to).map_err(|e| io_err("copy", from, e))?;
            std::fs::remove_file(from).map_err(|e| io_err("remove", from, e))
        }
        Err(e) => Err(io_err("move", from, e)),
    }
}

/// Undoes one step.
fn undo(a: &Action) -> Result<(), String> {
    match a {
        Action::Dir { path } => match std::fs::remove_dir(path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err("remove directory", path, e)),
        },
        Action::File { path } => match std::fs::remove_file(path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err("remove", path, e)),
        },
        Action::Moved { from, to } => {
            if from.symlink_metadata().is_ok() {
                return Err(format!(
                    "{} exists again; leaving {} where it is",
                    from.display(),
                    to.display()
                ));
            }
            move_path(to, from)
        }
        Action::Prepended {
            path,
            text,
            created,
        } => {
            let now = std::fs::read_to_string(path).map_err(|e| io_err("read", path, e))?;
            let Some(rest) = now.strip_prefix(text.as_str()) else {
                return Err(format!(
                    "{} no longer starts with the lines install added; remove them by hand:\n{text}",
                    path.display()
                ));
            };
            if *created && rest.is_empty() {
                std::fs::remove_file(path).map_err(|e| io_err("remove", path, e))
            } else {
                std::fs::write(path, rest).map_err(|e| io_err("write", path, e))
            }
        }
    }
}

/// Undoes `actions` from the last to the first. Returns the steps that could not be
/// undone (in their original order) with the first error. A directory that is not empty
/// (someone else's files are in it) stays, without counting as an error.
pub fn undo_all(actions: Vec<Action>) -> (Vec<Action>, Option<String>) {
    let mut failed = Vec::new();
    let mut first = None;
    for a in actions.into_iter().rev() {
        if let Err(e) = undo(&a) {
            if !matches!(a, Action::Dir { .. }) {
                first.get_or_insert(e);
            }
            failed.push(a);
        }
    }
    failed.reverse();
    (failed, first)
}

impl Manifest {
    /// Reads the manifest at `path`.
    pub fn load(path: &Path) -> Result<Manifest, String> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                format!(
                    "nothing to uninstall: no install manifest at {}",
                    path.display()
                )
            } else {
                io_err("read", path, e)
            }
        })?;
        serde_json::from_str(&text)
            .map_err(|e| format!("{}: not an install manifest ({e})", path.display()))
    }

    /// Writes the manifest to `path` (its directory must exist).
    pub fn save(&self, path: &Path) -> Result<(), String> {
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n").map_err(|e| io_err("write", path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rollback_restores_the_tree_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("vendor.icd"), "libv.so\n").unwrap();
        std::fs::write(d.join("conf.toml"), "log = \"info\"\n").unwrap();
        let mut t = Transaction::default();
        t.write_new(&d.join("a/b/lib.so"), b"elf", 0o755).unwrap();
        t.move_file(&d.join("vendor.icd"), &d.join("store/vendor.icd"))
            .unwrap();
        t.prepend(&d.join("conf.toml"), "vendors = []\n").unwrap();
        t.prepend(&d.join("new.toml"), "x = 1\n").unwrap();
        assert!(t.write_new(&d.join("a/b/lib.so"), b"", 0o644).is_err());
        drop(t);
        let mut names: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["conf.toml", "vendor.icd"]);
        assert_eq!(
            std::fs::read_to_string(d.join("conf.toml")).unwrap(),
            "log = \"info\"\n"
        );
    }

    #[test]
    fn undo_refuses_to_clobber_and_reports_what_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("v.icd"), "x").unwrap();
        let mut t = Transaction::default();
        t.move_file(&d.join("v.icd"), &d.join("s/v.icd")).unwrap();
        let actions = t.commit();
        std::fs::write(d.join("v.icd"), "new").unwrap();
        let (left, err) = undo_all(actions);
        assert!(err.unwrap().contains("exists again"));
        assert!(matches!(
            left.as_slice(),
            [Action::Dir { .. }, Action::Moved { .. }]
        ));
        assert_eq!(std::fs::read_to_string(d.join("s/v.icd")).unwrap(), "x");
    }
}
