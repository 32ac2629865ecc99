//! Programs built from rewritten source (rule 5): what the application's program stands
//! for on the vendor, and how binaries read back from one are recognised later.
//!
//! A source program whose kernels read the launch geometry is built, on the vendor, as a
//! second program object created from the rewritten source in the same context (the
//! [`Exec`]); the application's own vendor program keeps the original source for
//! `CL_PROGRAM_SOURCE` and is only built when the rewrite is not used. Everything that
//! concerns the executable (build status and log, kernels, binaries) is answered from the
//! `Exec`.
//!
//! Binaries: the digest of every binary handed out through `CL_PROGRAM_BINARIES` of such
//! a program is recorded in a process-wide table, with what the rewrite said about its
//! kernels, so `clCreateProgramWithBinary` on the same bytes is recognised. The table
//! lives in memory: another process does not know the digest. There a kernel whose last
//! argument is named [`HIDDEN_NAME`] is still recognised (when the vendor reports argument
//! names), so the application never sees the argument, but it is not sliced.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::core::cl::*;
use crate::core::forward::Inner;
use crate::core::kernel_source::Analysis;

/// The hidden parameter's name in rewritten sources.
pub const HIDDEN_NAME: &str = "__sp_geom";

/// What the rewrite of one program (or of the inputs of one link) said.
pub struct RewriteInfo {
    /// Each kernel that takes the hidden argument, and its index.
    pub kernels: Vec<(String, u32)>,
    /// The original sources' analyses (sliceability of every kernel).
    pub analyses: Vec<Arc<Analysis>>,
}

impl RewriteInfo {
    pub fn hidden(&self, kernel: &str) -> Option<u32> {
        self.kernels.iter().find(|k| k.0 == kernel).map(|k| k.1)
    }

    /// The analysis of the source that defines `kernel`.
    pub fn analysis(&self, kernel: &str) -> Option<&Analysis> {
        self.analyses
            .iter()
            .map(|a| &**a)
            .find(|a| a.kernel(kernel).is_some())
    }

    /// The union of several programs' rewrites (the inputs of a link).
    pub fn merged<'a>(infos: impl Iterator<Item = &'a RewriteInfo>) -> RewriteInfo {
        let mut out = RewriteInfo {
            kernels: Vec::new(),
            analyses: Vec::new(),
        };
        for i in infos {
            out.kernels.extend(i.kernels.iter().cloned());
            out.analyses.extend(i.analyses.iter().cloned());
        }
        out
    }
}

/// A vendor program the layer created for itself, released when dropped.
pub struct OwnedProgram(pub Inner<cl_program>);

impl Drop for OwnedProgram {
    fn drop(&mut self) {
        if let Some(f) = self.0.vt.clReleaseProgram {
            // SAFETY: the program we created; this is our only reference to it.
            unsafe { f(self.0.h) };
        }
    }
}

/// The executable behind an application's program built from rewritten code.
pub struct Exec {
    /// The vendor program built from the rewritten source (released with the last
    /// holder: the program and its kernels); `None` when the application's own vendor
    /// program is the executable (a recognised binary).
    pub program: Option<OwnedProgram>,
    pub info: Arc<RewriteInfo>,
}

fn table() -> &'static Mutex<HashMap<String, Arc<RewriteInfo>>> {
    static T: std::sync::OnceLock<Mutex<HashMap<String, Arc<RewriteInfo>>>> =
        std::sync::OnceLock::new();
    T.get_or_init(Default::default)
}

/// Records a binary handed out from a rewritten program, by SHA-256 (lowercase hex).
pub fn record_binary(digest: String, info: &Arc<RewriteInfo>) {
    let mut t = table().lock().unwrap_or_else(|e| e.into_inner());
    t.insert(digest, info.clone());
}

/// What the rewrite said of a binary recorded by [`record_binary`].
pub fn binary_info(digest: &str) -> Option<Arc<RewriteInfo>> {
    let t = table().lock().unwrap_or_else(|e| e.into_inner());
    t.get(digest).cloned()
}
