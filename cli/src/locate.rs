//! Finding the built library and the vendor entries that the ICD loader reads.

use std::path::{Path, PathBuf};

/// The system's loader directory.
pub const SYSTEM_VENDORS: &str = "/etc/OpenCL/vendors";
/// SoftPreempt's own loader entry.
pub const ICD_NAME: &str = "softpreempt.icd";
/// The library's file name.
pub const LIB_NAME: &str = "libsoftpreempt.so";

/// `libsoftpreempt.so`: `$SOFTPREEMPT_LIB`, else next to this executable (a cargo
/// target directory), else in `../lib` (an installed prefix), else `/usr/local/lib`.
pub fn library() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("SOFTPREEMPT_LIB") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let dir = exe.parent().unwrap_or(Path::new("/"));
    [
        dir.join(LIB_NAME),
        dir.join("../lib").join(LIB_NAME),
        Path::new("/usr/local/lib").join(LIB_NAME),
    ]
    .into_iter()
    .find(|p| p.is_file())
    .ok_or_else(|| {
        format!(
            "{LIB_NAME} not found next to {} or in /usr/local/lib: build it with \
             `cargo build --release -p softpreempt-icd`, or name it with SOFTPREEMPT_LIB",
            exe.display()
        )
    })
}

/// The directory the loader reads now: `$OCL_ICD_VENDORS` when it names a directory,
/// else the system's.
pub fn loader_dir() -> PathBuf {
    std::env::var_os("OCL_ICD_VENDORS")
        .map(PathBuf::from)
        .filter(|p| p.is_dir())
        .unwrap_or_else(|| PathBuf::from(SYSTEM_VENDORS))
}

/// Whether the `.icd` file at `path` registers SoftPreempt (by name or by content).
fn is_ours(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n == ICD_NAME)
        || std::fs::read_to_string(path).is_ok_and(|t| t.trim_end().ends_with(LIB_NAME))
}

/// The vendors' `.icd` files in `dir` (not SoftPreempt's), sorted.
pub fn vendor_entries(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let rd = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut out: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "icd") && p.is_file() && !is_ours(p))
        .collect();
    out.sort();
    Ok(out)
}
