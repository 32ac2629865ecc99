//! What OpenCL C source reads of the launch geometry (interim: program-wide).
//!
//! Identifiers are collected outside comments and string/char literals; a program that
//! names a geometry builtin anywhere (its own text or a header it was compiled with) has no
//! sliceable kernel. Conservative by construction: a name in dead code or in a kernel that
//! never calls it still counts. Token pasting (`##`) could form a builtin's name from
//! pieces, so a program that uses it is not sliced either.

use std::collections::HashSet;
use std::sync::Arc;

use crate::core::objects::Sliceable;

/// Builtins whose value inside a slice differs from the whole launch's.
const GEOMETRY: &[&str] = &[
    "get_group_id",
    "get_num_groups",
    "get_global_size",
    "get_global_offset",
    "get_enqueued_num_groups",
    "get_global_linear_id",
    "get_enqueued_local_size",
];

/// Names whose value depends on the work-group size: with a NULL local size the vendor
/// chooses it per launch, and may choose differently for a slice.
const WORK_GROUP: &[&str] = &[
    "get_local_id",
    "get_local_size",
    "get_local_linear_id",
    "barrier",
    "work_group_barrier",
    "mem_fence",
    "local",
    "__local",
    "get_sub_group_size",
    "get_max_sub_group_size",
    "get_num_sub_groups",
    "get_enqueued_num_sub_groups",
    "get_sub_group_id",
    "get_sub_group_local_id",
];

/// Whether the name starts a family of work-group or sub-group functions.
fn work_group_family(id: &str) -> bool {
    id.starts_with("work_group_")
        || id.starts_with("sub_group_")
        || id.starts_with("async_work_group")
}

/// The identifiers of `src`, outside comments and literals; `None` if it pastes tokens.
fn identifiers(src: &str, out: &mut HashSet<String>) -> Option<()> {
    let b = src.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                    i += 1;
                }
                i += 2;
            }
            q @ (b'"' | b'\'') => {
                i += 1;
                while i < b.len() && b[i] != q && b[i] != b'\n' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b'#' if b.get(i + 1) == Some(&b'#') => return None,
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                out.insert(src[start..i].to_string());
            }
            _ => i += 1,
        }
    }
    Some(())
}

/// Whether `kernel` may be sliced, from the sources its program was built from.
/// `clCompileProgram`'s headers: (include name, source text).
pub type Headers = [(String, Arc<str>)];

/// One source text with the headers it was compiled with.
pub type SourceUnit<'a> = (&'a str, &'a Headers);

pub fn sliceability(sources: &[SourceUnit<'_>], _kernel: &str) -> Sliceable {
    let mut ids = HashSet::new();
    for (text, headers) in sources {
        let texts = std::iter::once(*text).chain(headers.iter().map(|(_, h)| &**h));
        for t in texts {
            if identifiers(t, &mut ids).is_none() {
                return Sliceable::No(
                    "its program pastes tokens (##), which could form a geometry builtin".into(),
                );
            }
        }
    }
    if let Some(g) = GEOMETRY.iter().find(|g| ids.contains(**g)) {
        return Sliceable::No(format!(
            "its program reads {g}, whose value a slice would change"
        ));
    }
    let null_local = !ids
        .iter()
        .any(|id| WORK_GROUP.contains(&id.as_str()) || work_group_family(id));
    Sliceable::Yes { null_local }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(src: &str) -> Sliceable {
        sliceability(&[(src, &[])], "k")
    }

    #[test]
    fn geometry_builtins_make_a_program_unsliceable() {
        assert!(matches!(
            check("kernel void k(global int*o){o[get_group_id(0)]=1;}"),
            Sliceable::No(_)
        ));
        assert!(matches!(
            check("#define G get_global_size\nkernel void k(){}"),
            Sliceable::No(_)
        ));
    }

    #[test]
    fn comments_and_strings_do_not_count() {
        let src = "// get_group_id\n/* get_num_groups */ kernel void k(global int*o){ o[get_global_id(0)] = 0; }\n";
        assert_eq!(check(src), Sliceable::Yes { null_local: true });
        assert_eq!(
            check("constant char s[] = \"get_group_id\"; kernel void k(){}"),
            Sliceable::Yes { null_local: true }
        );
    }

    #[test]
    fn work_group_use_forbids_null_local_slicing() {
        let src = "kernel void k(global int*o, local int*t){ t[get_local_id(0)]=1; barrier(CLK_LOCAL_MEM_FENCE); }";
        assert_eq!(check(src), Sliceable::Yes { null_local: false });
        assert_eq!(
            check("kernel void k(){ work_group_reduce_add(1); }"),
            Sliceable::Yes { null_local: false }
        );
    }

    #[test]
    fn headers_and_token_pasting_are_followed() {
        let h: Vec<(String, Arc<str>)> = vec![("g.h".into(), "#define N get_num_groups(0)".into())];
        assert!(matches!(
            sliceability(&[("#include \"g.h\"\nkernel void k(){}", &h)], "k"),
            Sliceable::No(_)
        ));
        assert!(matches!(
            check("#define C(a,b) a##b\nkernel void k(){}"),
            Sliceable::No(_)
        ));
    }
}
