//! Analysis and rewrite over many source forms; the rewritten programs are built and run
//! for real in `platform/tests/kernel_rewrite.rs`.

use super::*;

fn an(src: &str) -> Analysis {
    analyse(src, &[])
}

/// The geometry builtins `kernel` reads.
fn reads(a: &Analysis, kernel: &str) -> Vec<&'static str> {
    assert!(a.conservative.is_none(), "{:?}", a.conservative);
    let k = a
        .kernel(kernel)
        .unwrap_or_else(|| panic!("no kernel {kernel} in {a:?}"));
    k.geometry.names().collect()
}

fn headers(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(n, t)| (n.to_string(), t.to_string()))
        .collect()
}

#[test]
fn direct_reads() {
    let a = an("__kernel void k(__global int* o) { o[get_global_id(0)] = get_group_id(0) + get_num_groups(1); }");
    assert_eq!(reads(&a, "k"), ["get_group_id", "get_num_groups"]);
    assert!(a.kernel("k").unwrap().work_group_dependent);
    assert!(a.blocker("k", false).is_some());
    assert_eq!(a.blocker("k", true), None);
}

#[test]
fn comments_strings_and_chars_are_no_use() {
    let a = an(r#"
        // get_group_id(0)
        kernel void k(global int* o) {
            /* get_num_groups(0) */
            printf("get_global_size(0) %d\n", o[0]);
            char c = '"'; const char* s = "\"get_global_offset";
            o[get_global_id(0)] = 1;
        }"#);
    assert!(reads(&a, "k").is_empty());
    let k = a.kernel("k").unwrap();
    assert!(!k.work_group_dependent && k.unsure.is_none());
    assert_eq!(a.blocker("k", false), None);
}

#[test]
fn line_continuations() {
    let a = an("kernel void k(global int* o) { o[0] = get_global_\\\nsize(0); }\n#define X \\\n get_global_offset(0)\nkernel void j(global int* o) { o[0] = X; }");
    assert_eq!(reads(&a, "k"), ["get_global_size"]);
    assert_eq!(reads(&a, "j"), ["get_global_offset"]);
}

#[test]
fn macros_object_and_function_like() {
    let a = an("
        #define GS get_global_size(0)
        #define GROUP(d) (get_group_id(d) * 2)
        #define TWICE(x) ((x) + (x))
        #define CALL(f, d) f(d)
        #define UNUSED get_num_groups(0)
        #define SHADOW(get_global_offset) (get_global_offset + 1)
        #define INDIRECT GROUP(1)
        kernel void a(global int* o) { o[0] = GS; }
        kernel void b(global int* o) { o[0] = TWICE(GROUP(0)); }
        kernel void c(global int* o) { o[0] = CALL(get_global_offset, 0); }
        kernel void d(global int* o) { o[0] = SHADOW(3); }
        kernel void e(global int* o) { o[0] = INDIRECT; }");
    assert_eq!(reads(&a, "a"), ["get_global_size"]);
    assert_eq!(reads(&a, "b"), ["get_group_id"]);
    assert_eq!(reads(&a, "c"), ["get_global_offset"]);
    assert!(reads(&a, "d").is_empty());
    assert_eq!(reads(&a, "e"), ["get_group_id"]);
}

#[test]
fn token_pasting_makes_a_kernel_unsure() {
    let a = an("
        #define CAT(a, b) a##b
        #define UNUSED(a) x##a
        kernel void p(global int* o) { o[0] = CAT(get_group, _id)(0); }
        kernel void q(global int* o) { o[0] = 1; }");
    assert!(a
        .kernel("p")
        .unwrap()
        .unsure
        .as_deref()
        .unwrap()
        .contains("CAT"));
    assert!(a.blocker("p", true).is_some());
    assert_eq!(a.kernel("q").unwrap().unsure, None);
}

#[test]
fn includes_of_given_headers() {
    let h = headers(&[
        ("util.h", "#include \"inner/deep.h\"\nsize_t groups(void) { return get_num_groups(0); }\n#define GID get_group_id(0)\n"),
        ("inner/deep.h", "#include \"inner/deep.h\"\n#define OFF get_global_offset(0)\n"),
    ]);
    let a = analyse("#include \"util.h\"\n#include <inner/deep.h>\nkernel void k(global int* o) { o[0] = groups() + GID + OFF; }", &h);
    assert_eq!(
        reads(&a, "k"),
        ["get_group_id", "get_num_groups", "get_global_offset"]
    );
    let unknown = analyse(
        "#include \"other.h\"\nkernel void k(global int* o) { o[0] = 1; }",
        &h,
    );
    assert!(unknown.conservative.as_deref().unwrap().contains("other.h"));
    assert!(unknown.blocker("k", true).is_some());
    let computed = analyse("#define H \"util.h\"\n#include H\nkernel void k() {}", &h);
    assert!(computed.conservative.is_some());
}

#[test]
fn attributes_before_and_after() {
    let a = an("
        __kernel __attribute__((reqd_work_group_size(64, 1, 1))) void a(__global float* o) { o[0] = get_global_size(0); }
        kernel void b(global float* o) __attribute__((work_group_size_hint(8, 1, 1))) { o[0] = 0; }
        __attribute__((vec_type_hint(float4))) kernel void c(global float* o) { o[0] = get_num_groups(0); }");
    assert_eq!(reads(&a, "a"), ["get_global_size"]);
    assert!(reads(&a, "b").is_empty());
    assert_eq!(reads(&a, "c"), ["get_num_groups"]);
}

#[test]
fn helpers_transitively_and_kernels_calling_kernels() {
    let a = an("
        size_t leaf(uint d) { return get_global_size(d); }
        size_t mid(void) { return leaf(1) + 1; }
        float pure(float x) { return x * 2.0f; }
        kernel void top(global int* o) { o[0] = mid(); }
        kernel void other(global int* o) { o[0] = pure(1.0f); }
        kernel void caller(global int* o) { top(o); }
        struct S { int leaf; };
        kernel void member(global struct S* s) { s->leaf = 1; }");
    assert_eq!(reads(&a, "top"), ["get_global_size"]);
    assert!(reads(&a, "other").is_empty());
    assert_eq!(reads(&a, "caller"), ["get_global_size"]);
    assert!(reads(&a, "member").is_empty());
    assert_eq!(a.kernels.len(), 4);
}

#[test]
fn prototypes() {
    let a = an("
        size_t later(void);
        size_t elsewhere(void);
        kernel void k(global int* o);
        kernel void k(global int* o) { o[0] = later(); }
        kernel void x(global int* o) { o[0] = elsewhere(); }
        size_t later(void) { return get_global_offset(0); }");
    assert_eq!(reads(&a, "k"), ["get_global_offset"]);
    assert!(a
        .kernel("x")
        .unwrap()
        .unsure
        .as_deref()
        .unwrap()
        .contains("elsewhere"));
    assert_eq!(a.kernels.len(), 2);
}

#[test]
fn conditional_groups() {
    let a = an("
        #if 0
        it's prose in here, with an unterminated ' and get_group_id(0) {
        #else
        #define G get_global_size(0)
        #endif
        #ifdef WIDE
        #define H get_num_groups(0)
        #else
        #define H 1
        #endif
        kernel void k(global int* o) {
        #if 0
            o[0] = get_global_offset(0);
        #elif defined(X)
            o[0] = G;
        #endif
            o[1] = H;
        }");
    assert_eq!(reads(&a, "k"), ["get_num_groups", "get_global_size"]);

    let unbalanced = an("
        kernel void k(global int* o) {
        #ifdef A
            if (o[0]) {
        #else
            if (o[1]) {
        #endif
                o[2] = 1;
            }
        }");
    assert!(unbalanced
        .conservative
        .as_deref()
        .unwrap()
        .contains("unbalanced"));
    assert!(an("#if 1\nkernel void k() {}").conservative.is_some());
    assert!(an("#endif\n").conservative.is_some());
    // Conditionals close in the file that opens them.
    let h = headers(&[("open.h", "#ifdef X\n"), ("close.h", "#endif\n")]);
    assert!(analyse("#include \"open.h\"\n", &h).conservative.is_some());
    assert!(analyse("#ifdef Y\n#include \"close.h\"\n", &h)
        .conservative
        .is_some());
    // A header's braces count in the branch that includes it.
    let h = headers(&[("brace.h", "{\n")]);
    let src = "kernel void k() {\n#ifdef Y\n#include \"brace.h\"\n#endif\n}\n}\n";
    assert!(analyse(src, &h)
        .conservative
        .as_deref()
        .unwrap()
        .contains("unbalanced"));
    assert!(an("#include_next <x.h>\n").conservative.is_some());
}

#[test]
fn work_group_dependence() {
    let cases = [
        (
            "kernel void k(global int* o, local int* t) { o[0] = 1; }",
            true,
        ),
        (
            "kernel void k(global int* o) { __local int t[4]; o[0] = t[0]; }",
            true,
        ),
        (
            "kernel void k(global int* o) { barrier(CLK_LOCAL_MEM_FENCE); }",
            true,
        ),
        (
            "kernel void k(global int* o) { o[0] = work_group_reduce_add(o[1]); }",
            true,
        ),
        (
            "kernel void k(global int* o) { o[0] = sub_group_broadcast(o[1], 0); }",
            true,
        ),
        (
            "kernel void k(global int* o) { o[0] = get_local_id(0); }",
            true,
        ),
        (
            "kernel void k(global int* o) { o[0] = get_enqueued_local_size(0); }",
            true,
        ),
        (
            "#define L __local\nkernel void k(global int* o) { L int t[2]; }",
            true,
        ),
        (
            "kernel void k(global int* o) { o[get_global_id(0)] = get_work_dim(); }",
            false,
        ),
    ];
    for (src, wg) in cases {
        let a = an(src);
        let k = a.kernel("k").unwrap();
        assert_eq!(k.work_group_dependent, wg, "{src}");
        assert!(k.geometry.is_empty(), "{src}");
    }
}

#[test]
fn build_option_macros() {
    let src = "kernel void k(global int* o) { o[0] = GID; }";
    let a = analyse_with_options(src, &[], "-cl-mad-enable -D GID=get_group_id(0)");
    assert_eq!(reads(&a, "k"), ["get_group_id"]);
    let a = analyse_with_options(src, &[], "-DGID=7");
    assert!(reads(&a, "k").is_empty());
    assert!(analyse_with_options(src, &[], "-cl-std=CLC++")
        .conservative
        .is_some());
}

#[test]
fn kernels_through_macros() {
    let a = an("#define KERNEL __kernel\n#define GLOBAL __global\nKERNEL void k(GLOBAL int* o) { o[0] = get_global_size(0); }");
    assert_eq!(reads(&a, "k"), ["get_global_size"]);
    for src in [
        "#define NAME k\nkernel void NAME(global int* o) { o[0] = 1; }",
        "#define DEF(n) kernel void n(global int* o)\nDEF(k) { o[0] = get_group_id(0); }",
        "#define HELPER size_t h(void) { return get_group_id(0); }\nHELPER\nkernel void k(global int* o) { o[0] = h(); }",
        "#define OPEN {\nkernel void k(global int* o) OPEN o[0] = 1; }",
    ] {
        assert!(an(src).conservative.is_some(), "{src}");
    }
}

#[test]
fn sources_left_alone() {
    for src in [
        "kernel void k(global int* o) { o[0] = 1; /* open",
        "kernel void k(global int* o) { o[0] = \"open; }",
        "kernel void k(global int* o) <% o[0] = 1; %>",
        "namespace n { kernel void k() {} }",
        "template <typename T> T f(T x) { return x; }",
        "kernel void k(global int* o) { o[0] = 1; ",
        "kernel void k(global int* o) { o[0] = 1; }}",
    ] {
        let a = an(src);
        assert!(a.conservative.is_some(), "{src}");
        assert!(rewrite(&a).is_none(), "{src}");
    }
    // C identifiers that are C++ keywords are fine.
    assert!(an("kernel void k(global int* class) { int template = 1; }")
        .conservative
        .is_none());
}

#[test]
fn inline_assembly_is_opaque() {
    let a = an("kernel void k(global uint* o) { uint r; asm(\"mov.u32 %0, %%ctaid.x;\" : \"=r\"(r)); o[0] = r; }");
    assert!(a.kernel("k").unwrap().unsure.is_some());
}

#[test]
fn missing_kernel_is_blocked() {
    assert!(an("kernel void k() {}").blocker("j", true).is_some());
}

// ---- rewrite ----

/// Prototypes of the replacements, as [`norm`] shows them.
const P: &str = "_Pragma(\"clang diagnostic ignored \\\"-Wunknown-warning-option\\\"\") _Pragma(\"clang diagnostic ignored \\\"-Wpsabi\\\"\") size_t __sp_group_id_H(ulong16, uint); size_t __sp_num_groups_H(ulong16, uint); size_t __sp_global_size_H(ulong16, uint); size_t __sp_global_offset_H(ulong16, uint); size_t __sp_global_linear_id_H(ulong16); ";

/// `text` (a rewritten file) without the definitions after the application's last line,
/// with the replacements' hash suffix shown as `H` and their prototypes as `<P>`.
fn norm(r: &Rewritten, text: &str) -> String {
    let (_, defs) = r
        .source
        .split_once("\n\n/* SoftPreempt")
        .expect("definitions");
    let at = defs.find("__sp_global_offset_").expect("definition") + "__sp_global_offset_".len();
    let suffix = &defs[at..at + 16];
    let app = text.split("\n\n/* SoftPreempt").next().unwrap_or(text);
    app.replace(suffix, "H").replace(P, "<P>")
}

/// The rewritten main source, without the definitions after the application's last line.
fn body(r: &Rewritten) -> &str {
    r.source
        .split_once("\n\n/* SoftPreempt")
        .expect("definitions")
        .0
}

#[test]
fn rewrite_adds_the_parameter_and_passes_it_on() {
    let src = "\
#define GID(d) get_group_id(d)
#define CALL_MID() mid()
size_t leaf(uint d) { return get_global_size(d) + GID(d); }
size_t mid(void) { return leaf(0); }
size_t mid2() { return CALL_MID() + get_num_groups(0); }
float pure(float x) { return x; }
kernel void k(global ulong* o, float f) { o[0] = mid2() + pure(f) + get_global_offset(0) + get_global_linear_id(); }
kernel void plain(global ulong* o) { o[0] = pure(1.0f); }
";
    let r = rewrite(&an(src)).unwrap();
    assert_eq!(
        norm(&r, &r.source),
        "\
#define GID(d) __sp_group_id_H(__sp_geom, d)
#define CALL_MID() mid(__sp_geom)
<P>size_t leaf(uint d, ulong16 __sp_geom) { return __sp_global_size_H(__sp_geom, d) + GID(d); }
<P>size_t mid(ulong16 __sp_geom) { return leaf(0, __sp_geom); }
<P>size_t mid2(ulong16 __sp_geom) { return CALL_MID() + __sp_num_groups_H(__sp_geom, 0); }
float pure(float x) { return x; }
<P>kernel void k(global ulong* o, float f, ulong16 __sp_geom) { o[0] = mid2(__sp_geom) + pure(f) + __sp_global_offset_H(__sp_geom, 0) + __sp_global_linear_id_H(__sp_geom); }
kernel void plain(global ulong* o) { o[0] = pure(1.0f); }
"
    );
    assert_eq!(r.kernels, [("k".to_string(), 2)]);
    assert_eq!(r.helpers, ["leaf", "mid", "mid2"]);
}

#[test]
fn rewrite_keeps_line_numbers() {
    let src = "/* a */\n#define X \\\n  get_global_size(0)\n\nkernel void k(global int* o,\n  int n)\n{\n  o[0] = X +\n    get_group_id(0);\n}\n";
    let r = rewrite(&an(src)).unwrap();
    assert_eq!(
        norm(&r, &r.source),
        "/* a */\n#define X \\\n  __sp_global_size_H(__sp_geom, 0)\n\n<P>kernel void k(global int* o,\n  int n, ulong16 __sp_geom)\n{\n  o[0] = X +\n    __sp_group_id_H(__sp_geom, 0);\n}\n"
    );
    assert_eq!(r.kernels, [("k".to_string(), 2)]);
}

#[test]
fn rewrite_prototypes_and_void_lists() {
    let src = "size_t h(void);\nkernel void k(void);\nkernel void k(void) { h(); }\nsize_t h(void) { return get_global_size(0); }\n";
    let r = rewrite(&an(src)).unwrap();
    assert_eq!(
        norm(&r, &r.source),
        "<P>size_t h(ulong16 __sp_geom);\n<P>kernel void k(ulong16 __sp_geom);\n<P>kernel void k(ulong16 __sp_geom) { h(__sp_geom); }\n<P>size_t h(ulong16 __sp_geom) { return __sp_global_size_H(__sp_geom, 0); }\n"
    );
    assert_eq!(r.kernels, [("k".to_string(), 0)]);
}

#[test]
fn rewrite_edits_headers() {
    let h = headers(&[(
        "g.h",
        "#pragma once\nsize_t g(void) { return get_global_offset(0); }\n",
    )]);
    let src = "#include \"g.h\"\n#include \"g.h\"\nkernel void k(global int* o) { o[0] = g(); }\n";
    let r = rewrite(&analyse(src, &h)).unwrap();
    assert_eq!(r.headers[0].0, "g.h");
    assert_eq!(
        norm(&r, &r.headers[0].1),
        "#pragma once\n<P>size_t g(ulong16 __sp_geom) { return __sp_global_offset_H(__sp_geom, 0); }\n"
    );
    assert!(body(&r).contains("o[0] = g(__sp_geom);"));
}

#[test]
fn rewrite_without_geometry_is_identity() {
    let src = "kernel void k(global int* o) { o[get_global_id(0)] = get_local_id(0); }";
    let r = rewrite(&an(src)).unwrap();
    assert_eq!(r.source, src);
    assert!(r.kernels.is_empty());
}

#[test]
fn rewrite_names_are_unique_to_the_program() {
    let r1 = rewrite(&an(
        "kernel void k(global int* o) { o[0] = get_group_id(0); }",
    ))
    .unwrap();
    let r2 = rewrite(&an(
        "kernel void k(global int* o) { o[1] = get_group_id(0); }",
    ))
    .unwrap();
    let name = |r: &Rewritten| r.source.split("__sp_group_id_").nth(1).unwrap()[..16].to_string();
    assert_ne!(name(&r1), name(&r2));
}

#[test]
fn rewrite_refuses_what_it_cannot_follow() {
    for src in [
        // The reserved prefix is the application's own.
        "kernel void k(global int* o) { int __sp_x = get_group_id(0); }",
        // A function whose name is passed around rather than called.
        "#define APPLY(f, x) f(x)\nsize_t h(uint d) { return get_global_size(d); }\nkernel void k(global int* o) { o[0] = APPLY(h, 0); }",
        // A builtin likewise.
        "#define APPLY(f, x) f(x)\nkernel void k(global int* o) { o[0] = APPLY(get_group_id, 0); }",
        // A builtin redefined by the application.
        "#define get_group_id(d) 0\nkernel void k(global int* o) { o[0] = get_group_id(0); }",
        // A builtin outside any function body.
        "kernel void k(global int* o, int n[sizeof(get_group_id(0))]) { o[0] = get_group_id(0); }",
        // A kernel whose parameters a macro may multiply.
        "#define PARAMS global int* o, int n\nkernel void k(PARAMS) { o[0] = get_group_id(0); }",
        // A kernel whose parameters depend on the build.
        "kernel void k(global int* o\n#ifdef B\n, global int* b\n#endif\n) { o[0] = get_group_id(0); }",
        // A shadowed helper name.
        "size_t h(void) { return get_num_groups(0); }\nkernel void k(global int* o) { int h = 1; o[0] = h; }",
        // A builtin name spelt across a line splice.
        "kernel void k(global int* o) { o[0] = get_gro\\\nup_id(0); }",
    ] {
        let a = an(src);
        assert!(a.conservative.is_none(), "{src}: {:?}", a.conservative);
        assert!(rewrite(&a).is_none(), "{src}");
    }
    let a = analyse_with_options(
        "kernel void k(global int* o) { o[0] = G; }",
        &[],
        "-DG=get_group_id(0)",
    );
    assert!(rewrite(&a).is_none());
    // An unused `-D` macro that reads the geometry is no obstacle.
    let a = analyse_with_options(
        "kernel void k(global int* o) { o[0] = get_group_id(0); }",
        &[],
        "-DG=get_group_id(0)",
    );
    assert!(rewrite(&a).is_some());
}

#[test]
fn geometry_arg_layout() {
    let (bytes, size) = geometry_arg(2, [5, 6, 7], [64, 32, 9], [8, 4, 3]);
    assert_eq!(size, GEOMETRY_ARG_SIZE);
    assert_eq!(bytes.len(), size);
    let v: Vec<u64> = bytes
        .chunks(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(v, [5, 6, 0, 64, 32, 1, 8, 4, 1, 2, 0, 0, 0, 8, 8, 1]);
    // A piece's first group goes into sa-sc; the rest stays.
    let mut piece = bytes.clone();
    with_first_group(&mut piece, [3, 2, 0]);
    let v: Vec<u64> = piece
        .chunks(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(v, [5, 6, 0, 64, 32, 1, 8, 4, 1, 2, 3, 2, 0, 8, 8, 1]);
}

#[test]
fn every_geometry_builtin_is_replaced_and_defined() {
    for name in GEOMETRY {
        let args = if name == "get_global_linear_id" {
            ""
        } else {
            "1"
        };
        let src = format!("kernel void k(global ulong* o) {{ o[0] = {name}({args}); }}");
        let r = rewrite(&an(&src)).unwrap();
        let stem = name.strip_prefix("get_").unwrap();
        let (app, defs) = r.source.split_once("\n\n/* SoftPreempt").unwrap();
        assert!(!app.contains(name), "{app}");
        assert!(app.contains(&format!("__sp_{stem}_")), "{app}");
        assert!(defs.contains(&format!("size_t __sp_{stem}_")), "{defs}");
    }
}

#[path = "../../tests/rewrite_corpus/rng.rs"]
mod rng;
pub(crate) use rng::Rng;

/// Programs the rewrite handles, as seeds for the fuzz test.
const SEEDS: &[&str] = &[
    "#define G(d) get_group_id(d)\nsize_t h(void) { return G(0); }\nkernel void k(global int* o) { o[0] = h(); }\n",
    "#include \"h.h\"\n__kernel __attribute__((reqd_work_group_size(8, 1, 1))) void k(__global int* o, local int* t) {\n  // get_num_groups\n  o[get_global_id(0)] = hh() + get_global_size(1);\n}\n",
    "size_t a(uint d);\n#if 0\n'\n#else\nsize_t a(uint d) { return get_global_offset(d) + \\\n  get_num_groups(d); }\n#endif\nkernel void k(void) { a(0); }\nkernel void j(global int* o) { k(); o[0] = \"get_group_id\"[0]; }\n",
];

/// Cuts `s` at a character boundary at or below `i`.
fn floor(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[test]
fn fuzz_never_panics() {
    const PIECES: &[&str] = &[
        "kernel",
        "__kernel",
        "void",
        "k",
        "h",
        "(",
        ")",
        "{",
        "}",
        "[",
        "]",
        ";",
        ",",
        " ",
        "\n",
        "#",
        "##",
        "#define ",
        "#if 0\n",
        "#ifdef A\n",
        "#else\n",
        "#elif 0\n",
        "#endif\n",
        "#include \"h.h\"\n",
        "#include <",
        "get_group_id",
        "get_global_size",
        "local",
        "(void)",
        "/*",
        "*/",
        "//",
        "\"",
        "'",
        "\\",
        "\\\n",
        "=",
        "->",
        ".",
        "0",
        "1e+",
        "é",
        "\r\n",
        "::",
        "__attribute__((x))",
        "struct",
        "asm",
        "-",
        "%:",
        "...",
    ];
    let hdrs = headers(&[(
        "h.h",
        "size_t hh(void) { return get_num_groups(0); }\n#include \"h.h\"\n",
    )]);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut analysed, mut rewritten, mut yielded) = (0, 0, 0);
    for round in 0..4000 {
        let mut src = SEEDS[rng.below(SEEDS.len())].to_string();
        match round % 4 {
            0 => src.truncate(floor(&src, rng.below(src.len() + 1))),
            1 => {
                for _ in 0..1 + rng.below(3) {
                    let at = floor(&src, rng.below(src.len() + 1));
                    src.insert_str(at, PIECES[rng.below(PIECES.len())]);
                }
            }
            2 => {
                let a = floor(&src, rng.below(src.len() + 1));
                let b = floor(&src, a + rng.below(8));
                src.replace_range(a..b.max(a), "");
            }
            _ => {
                src = (0..rng.below(60))
                    .map(|_| PIECES[rng.below(PIECES.len())])
                    .collect()
            }
        }
        let a = analyse_unguarded(&src, &hdrs, "-DA=get_global_size(0)");
        // The yielding rewrite keeps the numbering too, and never panics either.
        let form = if rng.below(2) == 0 {
            EntryForm::Persistent
        } else {
            EntryForm::Flat
        };
        if let Ok(y) = yielding::yielding_unguarded(&a, form) {
            let tail = format!("\n{}\n/* SoftPreempt: the builtins", rewrite::PSABI);
            let app = &y.source[..y.source.find(&tail).expect("definitions")];
            assert_eq!(app.lines().count(), src.lines().count(), "{src:?}");
            yielded += 1;
        }
        let r = rewrite::rewrite_unguarded(&a);
        // Whatever comes back keeps the numbering of the application's lines.
        if let Some(r) = r.filter(|r| !r.kernels.is_empty()) {
            assert_eq!(body(&r).lines().count(), src.lines().count(), "{src:?}");
            rewritten += 1;
        }
        analysed += usize::from(a.conservative.is_none());
    }
    // The inputs reach the deep end: many are understood, and many rewritten.
    assert!(
        analysed > 1000 && rewritten > 500 && yielded > 500,
        "{analysed} analysed, {rewritten} rewritten, {yielded} yielding"
    );
}
