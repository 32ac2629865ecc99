//! Whether a vendor's compiler takes builds of several threads of one process at once.
//!
//! The application's own program built beside its rewritten one (`own_build`) exists for
//! PoCL, whose compiles take seconds: two at once in two contexts take as long as one, so
//! a cold start pays one compile, not two. Elsewhere it gains nothing and costs a second
//! build running beside the application's. On NVIDIA's OpenCL, builds on threads of the
//! layer beside the application's (tinygrad's training process, which compiles while it
//! trains) crashed the process: `free(): invalid pointer` in `libnvidia-ptxjitcompiler` and
//! a SIGSEGV in `libnvidia-nvvm`, both under a layer thread's `clBuildProgram` (native
//! backtraces on an H200; `docs/design.md`, "Builds on threads"). So the own build runs
//! beside only on a vendor known to take concurrent builds: PoCL, which serialises its own
//! code generation.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::core::cl::*;
use crate::core::forward::{fetch_info, info_string};

/// The platform name of the one vendor known to take concurrent builds.
const CONCURRENT_SAFE: &str = "Portable Computing Language";

/// The answer for each vendor table, by its address.
static KNOWN: Mutex<Option<HashMap<usize, bool>>> = Mutex::new(None);

/// Whether the vendor of table `vt` is known to take builds of several threads at once
/// (see the module's comment).
pub fn safe(vt: &'static cl_icd_dispatch) -> bool {
    is_pocl(vt)
}

/// Whether the vendor of table `vt` keeps its own builds for later processes: PoCL, with
/// its kernel cache on (its default; `POCL_KERNEL_CACHE=0` turns it off). A build of the
/// same source and options then costs a later process tens of milliseconds without the
/// layer keeping a binary of it (`yield_program`'s entries: 28-47 ms, against 190-200 ms
/// compiled anew, on the 2-vCPU development machine; docs/benchmarks.md, session 55).
pub fn caches_builds(vt: &'static cl_icd_dispatch) -> bool {
    is_pocl(vt) && std::env::var_os("POCL_KERNEL_CACHE").is_none_or(|v| v != "0")
}

/// Whether the vendor of table `vt` is PoCL; asked of the vendor once per table.
fn is_pocl(vt: &'static cl_icd_dispatch) -> bool {
    let key = vt as *const cl_icd_dispatch as usize;
    if let Some(&known) = KNOWN
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(|m| m.get(&key))
    {
        return known;
    }
    let name = crate::core::platform::platforms()
        .iter()
        .map(|p| &p.get().inner)
        .find(|inner| std::ptr::eq(inner.vt, vt))
        .and_then(|inner| {
            let f = inner.vt.clGetPlatformInfo?;
            fetch_info(|size, value, ret| {
                // SAFETY: the vendor's own platform handle and a buffer of `size` bytes.
                unsafe { f(inner.h, CL_PLATFORM_NAME, size, value, ret) }
            })
            .ok()
        })
        .map(|bytes| info_string(&bytes));
    let safe = name.as_deref() == Some(CONCURRENT_SAFE);
    tracing::debug!(platform = ?name, safe, "the vendor is PoCL: {safe}");
    KNOWN
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(key, safe);
    safe
}
