//! Which kernels may be cut into slices (rule 5), from where their program came from.
//!
//! A slice is launched with a global offset, so a kernel that reads `get_group_id`,
//! `get_num_groups`, `get_global_size`, `get_global_offset` (or their 2.0 relatives) would
//! see other values inside a slice. Only source can be inspected: kernels of binaries and
//! IL are sliced only when the configuration vouches for them (`safe_binaries`).

use std::sync::Arc;

use crate::config::{self, SafeBinary};
use crate::core::cl::*;
use crate::core::kernel_source;
use crate::core::objects::Sliceable;

/// Where a program's code came from, as far as slicing is concerned.
#[derive(Clone, Debug, Default)]
pub enum Origin {
    /// Built-in kernels, or a program we could not follow.
    #[default]
    Opaque,
    /// OpenCL C source, with the headers `clCompileProgram` was given (name, text).
    Source {
        text: Arc<str>,
        headers: Arc<[(String, Arc<str>)]>,
    },
    /// A binary or IL, by the SHA-256 of its bytes (lowercase hex).
    Binary(String),
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
        }
    }

    /// A binary or IL program, by digest.
    pub fn binary(bytes: &[u8]) -> Origin {
        use sha2::Digest;
        let d = sha2::Sha256::digest(bytes);
        Origin::Binary(d.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// The same source compiled with `headers` (clCompileProgram).
    pub fn with_headers(&self, headers: Vec<(String, Arc<str>)>) -> Origin {
        match self {
            Origin::Source { text, .. } => Origin::Source {
                text: text.clone(),
                headers: headers.into(),
            },
            other => other.clone(),
        }
    }
}

/// Whether `kernel` of a program of `origin` may be sliced.
pub fn of_kernel(origin: &Origin, kernel: &str) -> Sliceable {
    let mut c = Collected {
        sources: Vec::new(),
        null_local: true,
    };
    if let Err(why) = collect(origin, kernel, &mut c) {
        return Sliceable::No(why);
    }
    if c.sources.is_empty() {
        return Sliceable::Yes {
            null_local: c.null_local,
        };
    }
    match kernel_source::sliceability(&c.sources, kernel) {
        Sliceable::Yes { null_local } => Sliceable::Yes {
            null_local: null_local && c.null_local,
        },
        no => no,
    }
}

/// The sources a kernel's code may come from.
struct Collected<'a> {
    sources: Vec<kernel_source::SourceUnit<'a>>,
    /// Whether launches with a NULL local size may be sliced, as far as the non-source
    /// parts go.
    null_local: bool,
}

/// Gathers the sources of `origin`, or says why its kernels cannot be sliced.
fn collect<'a>(origin: &'a Origin, kernel: &str, c: &mut Collected<'a>) -> Result<(), String> {
    match origin {
        Origin::Opaque => Err("built-in kernels, or a program of unknown origin".into()),
        Origin::Source { text, headers } => {
            c.sources.push((text, headers));
            Ok(())
        }
        Origin::Binary(digest) => {
            let safe = config::config().safe_binaries.iter().any(|s| match s {
                SafeBinary::Kernel(name) => name == kernel,
                SafeBinary::Sha256(hex) => hex == digest,
            });
            if !safe {
                return Err(format!(
                    "its program is a binary or IL (sha256:{digest}); list it in safe_binaries to slice it"
                ));
            }
            // Nothing tells whether a listed binary depends on the work-group size the
            // vendor would choose: it is sliced only with an explicit local size.
            c.null_local = false;
            Ok(())
        }
        Origin::Linked(inputs) => inputs.iter().try_for_each(|i| collect(i, kernel, c)),
    }
}
