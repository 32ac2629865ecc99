//! Whether the vendor keeps its own builds from source across processes, so that the
//! program store need not keep the rewritten program's binary (`core::binaries`).
//!
//! PoCL keeps a kernel cache (`$XDG_CACHE_HOME/pocl/kcache`, on unless
//! `POCL_KERNEL_CACHE=0`) keyed by the source, options and device: a later process that
//! compiles the same rewritten source (the store's recipe) loads the program's bitcode and
//! the work-group functions its kernels' launches compiled from there (a two-kernel
//! program: 1.49 s cold, 0.05-0.08 s from the cache, 0.005 s from its binary). Making
//! the rewritten binary instead costs a cold run a machine-code compile of every rewritten
//! kernel (PoCL makes its binaries so), serialised with the application's own compiles:
//! 70 s of CPU in pyopencl's `test_array` on 2 cores (docs/design.md, "The program
//! store"). So on PoCL with its cache on, the store keeps the recipe only.

use crate::core::cl::*;

/// Whether the vendor of table `vt` keeps its source builds across processes.
pub fn keeps_source_builds(vt: &'static cl_icd_dispatch) -> bool {
    // PoCL reads the variable once, at its start; "0" turns the cache off
    // (`POCL_KERNEL_CACHE`, PoCL's documentation of its environment variables).
    crate::core::concurrent_builds::is_pocl(vt)
        && std::env::var_os("POCL_KERNEL_CACHE").is_none_or(|v| v != "0")
}
