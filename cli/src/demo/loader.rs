//! How the demo's children reach the device: once through the bare vendor, once through
//! SoftPreempt, each through the real ICD loader with its own vendor list.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::locate::{self, ICD_NAME, LIB_NAME};

/// An environment change: set (`Some`) or remove (`None`).
pub type EnvChange = (&'static str, Option<OsString>);

/// The two loader setups; the temporary vendors directories go away on drop.
pub struct Loaders {
    dir: PathBuf,
    pub bare: Vec<EnvChange>,
    pub layered: Vec<EnvChange>,
}

impl Drop for Loaders {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn join(paths: &[PathBuf]) -> Result<OsString, String> {
    std::env::join_paths(paths).map_err(|e| e.to_string())
}

fn copy_entries(entries: &[PathBuf], to: &Path) -> Result<(), String> {
    std::fs::create_dir_all(to).map_err(|e| format!("{}: {e}", to.display()))?;
    for e in entries {
        let dest = to.join(e.file_name().unwrap_or_default());
        std::fs::copy(e, &dest).map_err(|err| format!("{}: {err}", e.display()))?;
    }
    Ok(())
}

/// Finds the library and the system's vendors and writes the vendors directories.
pub fn prepare() -> Result<Loaders, String> {
    let lib = locate::library()?;
    let dir = std::env::temp_dir().join(format!("softpreempt-demo-{}", std::process::id()));
    let mut l = Loaders {
        dir,
        bare: Vec::new(),
        layered: Vec::new(),
    };
    // A loader given OCL_ICD_FILENAMES loads exactly that list (NVIDIA's CUDA loader
    // knows no vendors directory at all): put SoftPreempt in front of it.
    if let Some(files) = std::env::var_os("OCL_ICD_FILENAMES").filter(|f| !f.is_empty()) {
        let vendors: Vec<PathBuf> = std::env::split_paths(&files)
            .filter(|p| !p.ends_with(LIB_NAME))
            .collect();
        let mut all = vec![lib];
        all.extend(vendors.iter().cloned());
        l.bare = vec![("OCL_ICD_FILENAMES", Some(join(&vendors)?))];
        l.layered = vec![
            ("OCL_ICD_FILENAMES", Some(join(&all)?)),
            // Set at run time, the list would reach the layer cut by a Khronos loader's
            // strtok (see platform/src/core/vendor.rs): name the vendors to it directly.
            ("SOFTPREEMPT_VENDORS", Some(join(&vendors)?)),
        ];
        return Ok(l);
    }
    let entries = locate::vendor_entries(&locate::loader_dir())?;
    if entries.is_empty() {
        return Err(format!(
            "no vendor OpenCL driver is registered in {} (PoCL: scripts/setup.sh)",
            locate::loader_dir().display()
        ));
    }
    let (bare, layered) = (l.dir.join("bare"), l.dir.join("layered"));
    copy_entries(&entries, &bare)?;
    copy_entries(&entries, &layered)?;
    std::fs::write(layered.join(ICD_NAME), format!("{}\n", lib.display()))
        .map_err(|e| format!("{}: {e}", layered.display()))?;
    l.bare = vec![
        ("OCL_ICD_VENDORS", Some(bare.into_os_string())),
        ("OCL_ICD_FILENAMES", None),
    ];
    l.layered = vec![
        ("OCL_ICD_VENDORS", Some(layered.into_os_string())),
        ("OCL_ICD_FILENAMES", None),
    ];
    Ok(l)
}
