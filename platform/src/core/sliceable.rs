//! Which kernels may be cut into slices (rule 5), from where their program came from.
//!
//! A slice is launched with a global offset, so a kernel that reads `get_group_id`,
//! `get_num_groups`, `get_global_size`, `get_global_offset` (or their 2.0 relatives) would
//! see other values inside a slice. Source is analysed (the `softpreempt-transform` crate). A binary the
//! layer built from source is known to the program store (`crate::store`, answered by
//! `core::binaries` before this module is asked); of other binaries, PTX (NVIDIA's) is
//! analysed (`core::ptx`); the rest are sliced only when the configuration vouches for
//! them (`safe_binaries`).

use std::sync::Arc;

use crate::config::{self, SafeBinary};
use crate::core::cl::*;
use crate::core::objects::Sliceable;
use crate::core::ptx;
use crate::store::KernelFacts;
use softpreempt_transform::{self as kernel_source, Analysis};

/// Where a program's code came from, as far as slicing is concerned.
#[derive(Clone, Default)]
pub enum Origin {
    /// Built-in kernels, or a program we could not follow.
    #[default]
    Opaque,
    /// OpenCL C source, with the headers `clCompileProgram` was given (name, text), and
    /// its analysis with the last build's options.
    Source {
        text: Arc<str>,
        headers: Arc<[(String, Arc<str>)]>,
        analysis: Option<Arc<Analysis>>,
    },
    /// A binary or IL, by the SHA-256 of its bytes (all devices' binaries, in order;
    /// lowercase hex), and what could be read in it (NVIDIA's binaries are PTX text).
    Binary {
        digest: String,
        ptx: Option<Arc<ptx::Analysis>>,
    },
    /// A program linked from others.
    Linked(Vec<Origin>),
}

impl Origin {
    /// The source text of `clCreateProgramWithSource`'s arguments (the vendor accepted
    /// them, so the pointers are valid). `None` if they cannot be read.
    pub fn source(
        count: cl_uint,
        strings: *const *const std::ffi::c_char,
        lengths: *const usize,
    ) -> Origin {
        let Ok(parts) = crate::core::args::slice(strings, count as usize) else {
            return Origin::Opaque;
        };
        let lens =
            crate::core::args::slice(lengths, if lengths.is_null() { 0 } else { count as usize })
                .unwrap_or(&[]);
        let mut text = String::new();
        for (i, &p) in parts.iter().enumerate() {
            let bytes = match lens.get(i).copied().filter(|&n| n > 0) {
                Some(n) => crate::core::args::slice(p as *const u8, n).unwrap_or(&[]),
                None => crate::core::args::c_str(p)
                    .map(|s| s.to_bytes())
                    .unwrap_or(&[]),
            };
            text.push_str(&String::from_utf8_lossy(bytes));
        }
        Origin::Source {
            text: text.into(),
            headers: Arc::new([]),
            analysis: None,
        }
    }

    /// A program of binaries or IL (one per device): its digest, and the analysis of
    /// its kernels when every binary is PTX.
    pub fn binaries(each: &[&[u8]]) -> Origin {
        let digest = sha256_hex(&each.concat());
        let ptx: Option<Vec<ptx::Analysis>> = each.iter().map(|b| ptx::analyse(b)).collect();
        Origin::Binary {
            digest,
            ptx: ptx
                .filter(|all| !all.is_empty())
                .map(|all| Arc::new(ptx::Analysis::merged(&all))),
        }
    }

    /// The analysis of a source program, made by [`Origin::analysed`].
    pub fn analysis(&self) -> Option<Arc<Analysis>> {
        match self {
            Origin::Source { analysis, .. } => analysis.clone(),
            _ => None,
        }
    }

    /// The same source about to be built with `options` and compiled with `headers`
    /// (`clCompileProgram`; `None` keeps those it has), analysed for slicing.
    pub fn analysed(&self, options: &str, headers: Option<Vec<(String, Arc<str>)>>) -> Origin {
        match self {
            Origin::Source {
                text, headers: old, ..
            } => {
                let headers: Arc<[(String, Arc<str>)]> =
                    headers.map_or_else(|| old.clone(), Into::into);
                let pairs: Vec<(String, String)> = headers
                    .iter()
                    .map(|(n, t)| (n.clone(), t.to_string()))
                    .collect();
                let analysis = kernel_source::analyse_with_options(text, &pairs, options);
                Origin::Source {
                    text: text.clone(),
                    headers,
                    analysis: Some(Arc::new(analysis)),
                }
            }
            other => other.clone(),
        }
    }
}

/// SHA-256 of `bytes`, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    let d = sha2::Sha256::digest(bytes);
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// What the analysis of a source says of each of its kernels, `hidden` naming those of
/// the rewritten program that take the geometry argument (and its index): they read the
/// whole launch's geometry from it, so may be sliced.
pub fn facts(a: &Analysis, hidden: &[(String, u32)]) -> Vec<KernelFacts> {
    a.kernels
        .iter()
        .map(|k| {
            let h = hidden.iter().find(|(n, _)| *n == k.name).map(|(_, i)| *i);
            KernelFacts {
                name: k.name.clone(),
                hidden: h,
                sliceable: of_analysed(a, &k.name, h.is_some()),
                yields: crate::store::Yields::Unknown,
            }
        })
        .collect()
}

/// Whether `kernel` of a program of `origin` may be sliced.
pub fn of_kernel(origin: &Origin, kernel: &str) -> Sliceable {
    match origin {
        Origin::Opaque => Sliceable::No("built-in kernels, or a program of unknown origin".into()),
        Origin::Source { analysis, .. } => {
            // Analysed at build time; a program built through a path we did not see is
            // analysed now, without its build options.
            let fresh;
            let a = match analysis {
                Some(a) => a,
                None => {
                    fresh = origin.analysed("", None);
                    match &fresh {
                        Origin::Source {
                            analysis: Some(a), ..
                        } => a,
                        _ => return Sliceable::No("program source not analysed".into()),
                    }
                }
            };
            of_analysed(a, kernel, false)
        }
        Origin::Binary { digest, ptx } => of_binary(digest, ptx.as_deref(), kernel),
        // The kernel is defined in one input; a helper it calls in another makes its
        // analysis "unsure", so it is not sliced.
        Origin::Linked(inputs) => inputs.iter().find(|i| defines(i, kernel)).map_or_else(
            || Sliceable::No("linked from inputs that cannot be analysed".into()),
            |i| of_kernel(i, kernel),
        ),
    }
}

/// Whether `origin` is where `kernel` is defined (as far as can be told).
fn defines(origin: &Origin, kernel: &str) -> bool {
    match origin {
        Origin::Source {
            analysis: Some(a), ..
        } => a.kernel(kernel).is_some(),
        Origin::Linked(inputs) => inputs.iter().any(|i| defines(i, kernel)),
        // A binary input may define it; it decides then.
        Origin::Binary { .. } => true,
        _ => false,
    }
}

/// `rewritten`: the kernel comes from the rewritten program and takes the geometry
/// argument; otherwise a kernel that reads the geometry is never sliced.
fn of_analysed(a: &Analysis, kernel: &str, rewritten: bool) -> Sliceable {
    if let Some(why) = a.blocker(kernel, rewritten) {
        return Sliceable::No(why);
    }
    let wgd = a.kernel(kernel).is_none_or(|k| k.work_group_dependent);
    Sliceable::Yes { null_local: !wgd }
}

/// Kernels of binaries and IL (not known to the program store): sliced when their PTX
/// shows they may be, or when the configuration vouches for them.
fn of_binary(digest: &str, ptx: Option<&ptx::Analysis>, kernel: &str) -> Sliceable {
    let safe = config::config().safe_binaries.iter().any(|s| match s {
        SafeBinary::Kernel(name) => name == kernel,
        SafeBinary::Sha256(hex) => hex == digest,
    });
    if let (false, Some(k)) = (safe, ptx.and_then(|p| p.kernel(kernel))) {
        return match &k.blocker {
            Some(why) => Sliceable::No(format!("its PTX {why}")),
            None => Sliceable::Yes {
                null_local: !k.work_group_dependent,
            },
        };
    }
    if !safe {
        return Sliceable::No(format!(
            "its program is a binary or IL (sha256:{digest}); list it in safe_binaries to slice it"
        ));
    }
    // Nothing tells whether a listed binary depends on the work-group size the vendor
    // would choose: it is sliced only with an explicit local size.
    Sliceable::Yes { null_local: false }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ptx_binaries_are_judged_by_their_code() {
        let geometry = include_bytes!("ptx/fixtures/geometry.ptx");
        let o = Origin::binaries(&[geometry]);
        assert_eq!(
            of_kernel(&o, "plain_2d"),
            Sliceable::Yes { null_local: true }
        );
        assert!(matches!(of_kernel(&o, "group_ids"), Sliceable::No(why) if why.contains("PTX")));
        // Two devices: the worst of both.
        let vadd = include_bytes!("ptx/fixtures/vadd.ptx");
        let two = Origin::binaries(&[vadd, vadd]);
        assert_eq!(of_kernel(&two, "vadd"), Sliceable::Yes { null_local: true });
        // Not PTX (a PoCL binary): not sliced.
        let pocl = Origin::binaries(&[b"poclbin\0\x0c{0]"]);
        assert!(matches!(of_kernel(&pocl, "vadd"), Sliceable::No(_)));
        // One PTX and one other binary: not judged from the PTX alone.
        let mixed = Origin::binaries(&[vadd, b"poclbin\0"]);
        assert!(matches!(of_kernel(&mixed, "vadd"), Sliceable::No(_)));
    }
}
