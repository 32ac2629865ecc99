//! The yielding rewrite at the text level: what is skipped and why, returns, `__local`
//! hoisting, attributes, line numbers. The programs run for real in
//! `platform/tests/yield_rewrite.rs`.

use super::*;
use crate::yielding::{FLAT_ONCE, FLAT_ROUNDS, FLAT_UNIFORM};

fn program(src: &str) -> YieldProgram {
    yielding(&analyse(src, &[])).unwrap_or_else(|| {
        panic!(
            "not rewritten: {:?}\n{src}",
            yielding_or_why(&analyse(src, &[])).err()
        )
    })
}

/// Why each kernel of `src` was skipped.
fn why(src: &str) -> Vec<(String, String)> {
    match yielding_or_why(&analyse(src, &[])) {
        Ok(p) => p.skipped,
        Err(all) => all,
    }
}

/// Asserts that `src`'s only kernel is skipped for a reason that contains `reason`.
#[track_caller]
fn skipped(src: &str, reason: &str) {
    let w = why(src);
    assert_eq!(w.len(), 1, "{src}: {w:?}");
    assert!(w[0].1.contains(reason), "{src}: {:?}", w[0].1);
    assert!(yielding(&analyse(src, &[])).is_none(), "{src}");
}

/// The entry kernel of `name` in the program's source.
fn entry<'a>(p: &'a YieldProgram, name: &str) -> &'a str {
    let start = p
        .source
        .find(&format!("the persistent entry of kernel `{name}`"))
        .expect("entry");
    let rest = &p.source[start..];
    let end = rest[1..]
        .find("/* SoftPreempt: the persistent entry")
        .map_or(rest.len(), |e| e + 1);
    &rest[..end]
}

/// The application's part of the program's source (before what goes after its last line).
fn app(p: &YieldProgram) -> &str {
    let tail = format!(
        "\n{}\n/* SoftPreempt: the builtins of a virtual group",
        rewrite::PSABI
    );
    let at = p.source.find(&tail).expect("definitions");
    &p.source[..at]
}

#[test]
fn entry_takes_the_arguments_and_two_more() {
    let src = "kernel void k(global int* o, local int* t, int n) { t[get_local_id(0)] = n; o[get_global_id(0)] = t[0]; }\nkernel void v(void) { }\n";
    let p = program(src);
    assert_eq!(
        p.kernels,
        [
            YieldKernel {
                name: "k".into(),
                entry: "__sp_y_k".into(),
                alt_entry: None,
                args: 3,
                reqd_local: None,
                work_group_dependent: true,
            },
            YieldKernel {
                name: "v".into(),
                entry: "__sp_y_v".into(),
                alt_entry: None,
                args: 0,
                reqd_local: None,
                work_group_dependent: false,
            },
        ]
    );
    assert!(entry(&p, "k").contains(
        "kernel void __sp_y_k(global int* o, local int* t, int n, ulong16 __sp_yg, __global uint* __sp_yc)"
    ));
    assert!(
        entry(&p, "v").contains("kernel void __sp_y_v(ulong16 __sp_yg, __global uint* __sp_yc)")
    );
    assert!(p.skipped.is_empty());
}

#[test]
fn every_geometry_builtin_answers_for_the_virtual_group() {
    let src = "size_t h(uint d) { return get_group_id(d) + get_num_groups(d) + get_global_size(d) + get_global_offset(d) + get_global_linear_id(); }\nkernel void k(global ulong* o) { o[get_global_id(0)] = h(0) + get_local_id(0) + get_local_size(0) + get_work_dim(); }\n";
    let p = program(src);
    let a = app(&p);
    for name in GEOMETRY.iter().chain(&["get_global_id"]) {
        assert!(!a.contains(&format!("{name}(")), "{name}: {a}");
    }
    // The helper gets the geometry, and so does the copy of the body in the entry.
    assert!(a.contains("size_t h(uint d, ulong16 __sp_geom)"), "{a}");
    let e = entry(&p, "k");
    assert!(e.contains("h(0, __sp_geom)"), "{e}");
    // The real ones stay: the entry runs with the original local size and dimensions.
    assert!(
        e.contains("get_local_id(0) + get_local_size(0) + get_work_dim()"),
        "{e}"
    );
}

#[test]
fn returns_go_to_the_next_group_from_nested_loops_and_switches() {
    let src = "kernel void k(global int* o, int n) {\n  for (int i = 0; i < n; i++) {\n    switch (o[i]) {\n    case 1: return;\n    default: while (n) { if (o[n]) return ; n--; }\n    }\n  }\n  if (n) return;\n  o[0] = 1;\n}\n";
    let p = program(src);
    let e = entry(&p, "k");
    assert_eq!(e.matches("goto __sp_next;").count(), 2, "{e}");
    assert_eq!(e.matches("goto __sp_next ;").count(), 1, "{e}");
    assert!(!e.contains("return"), "{e}");
    assert!(e.contains("__sp_next: ;"), "{e}");
    // The application's kernel keeps its returns.
    assert_eq!(app(&p).matches("return").count(), 3);
    // Without a return there is no label (clang could warn about an unused one).
    assert!(
        !entry(&program("kernel void j(global int* o) { o[0] = 1; }"), "j").contains("__sp_next")
    );
}

#[test]
fn returns_that_barriers_may_follow_are_refused() {
    skipped(
        "kernel void k(global int* o) { if (get_local_id(0) > 3) return; barrier(CLK_LOCAL_MEM_FENCE); o[0] = 1; }",
        "`return` on line 1 may be followed by a barrier",
    );
    // In a loop around a barrier, the barrier comes after the return in the next round.
    skipped(
        "kernel void k(global int* o, int n) {\n  for (int i = 0; i < n; i++) {\n    barrier(CLK_LOCAL_MEM_FENCE);\n    if (o[i]) return;\n  }\n}",
        "`return` on line 4",
    );
    // Through a helper, a macro or a work-group function.
    skipped(
        "void sync(void) { barrier(CLK_GLOBAL_MEM_FENCE); }\nkernel void k(global int* o) { if (o[0]) return; sync(); }",
        "may be followed by a barrier",
    );
    skipped(
        "#define SYNC barrier(CLK_LOCAL_MEM_FENCE)\nkernel void k(global int* o) { if (o[0]) return; SYNC; }",
        "may be followed by a barrier",
    );
    skipped(
        "kernel void k(global int* o) { if (o[0]) return; o[1] = work_group_reduce_add(o[2]); }",
        "may be followed by a barrier",
    );
    // A goto may loop back to the barrier.
    skipped(
        "kernel void k(global int* o) { again: barrier(CLK_LOCAL_MEM_FENCE); if (o[0]) return; if (o[1]) goto again; }",
        "may be followed by a barrier",
    );
    // A barrier before the returns, and loops that hold no barrier, are fine.
    let p = program("kernel void k(global int* o, local int* t) {\n  t[get_local_id(0)] = 1;\n  barrier(CLK_LOCAL_MEM_FENCE);\n  for (int i = 0; i < 4; i++)\n    if (t[i]) return;\n  for (int i = 0; i < 4; i++) { o[i] = 0; }\n  o[0] = t[1];\n}");
    assert_eq!(p.kernels.len(), 1);
    // Even where every item of a group takes the return or none does: PoCL 3.1 gave wrong
    // results for a barrier in a branch that all items take alike inside the persistent
    // loop, so uniformity is not worth proving.
    skipped(
        "kernel void k(global int* o, int n) { if (get_group_id(0) >= n) return; barrier(CLK_LOCAL_MEM_FENCE); o[0] = 1; }",
        "may be followed by a barrier",
    );
    // A return that leaves a loop inside a block holding a barrier (PoCL 3.1).
    skipped(
        "kernel void k(global int* o, int n) {\n  if (n > 2) {\n    barrier(CLK_LOCAL_MEM_FENCE);\n    for (int i = 0; i < n; i++)\n      if (o[i]) return;\n  }\n  o[0] = 1;\n}",
        "`return` on line 5 leaves a loop inside a block with a barrier",
    );
    // Outside such a block it is fine.
    let p = program("kernel void k(global int* o, int n) {\n  if (n) { barrier(CLK_LOCAL_MEM_FENCE); if (o[1]) return; }\n  for (int i = 0; i < n; i++) {\n    if (o[i]) return;\n  }\n}");
    assert_eq!(p.kernels.len(), 1);
    // A return inside a macro cannot be redirected.
    skipped(
        "#define BAIL(c) if (c) return\nkernel void k(global int* o) { BAIL(o[0]); o[1] = 1; }",
        "macro `BAIL`, which may return",
    );
}

#[test]
fn local_declarations_move_to_kernel_scope_in_order() {
    let src = "#define TS 4\n#define LOCAL __local\nkernel void k(global float* o, local float* s) {\n  const size_t l = get_local_id(0);\n  local float a[TS][TS];\n  float x = 0.0f;\n  LOCAL int b[TS], c;\n  local float* p = s + l;\n  a[0][l] = *p; b[l] = 1; c = 2;\n  barrier(CLK_LOCAL_MEM_FENCE);\n  o[get_global_id(0)] = a[0][l] + b[0] + c + x;\n}\n";
    let p = program(src);
    let e = entry(&p, "k");
    let (head, body) = e
        .split_once("for (uint __sp_h = 0u;; __sp_h ^= 1u)")
        .unwrap();
    let (a, b) = (
        head.find("local float a[TS][TS];").expect("a hoisted"),
        head.find("LOCAL int b[TS], c;").expect("b hoisted"),
    );
    assert!(a < b, "{head}");
    assert!(
        !body.contains("a[TS][TS]") && !body.contains("b[TS]"),
        "{body}"
    );
    // A private pointer to local memory stays where it was, with its initialiser.
    assert!(body.contains("local float* p = s + l;"), "{body}");
    // The application's kernel is left as it was.
    assert!(app(&p).contains("  local float a[TS][TS];\n  float x = 0.0f;\n  LOCAL int b[TS], c;"));
}

#[test]
fn local_declarations_that_depend_on_the_body_are_refused() {
    skipped(
        "kernel void k(global int* o) { typedef int T; local T t[4]; t[0] = 1; o[0] = t[0]; }",
        "names `T`, which the kernel uses before it",
    );
}

#[test]
fn attributes_are_kept_and_reqd_work_group_size_read() {
    let src = "__kernel __attribute__((reqd_work_group_size(8, 2, 1))) __attribute__((vec_type_hint(float4))) void a(__global int* o) { o[get_global_id(0)] = 1; }\nkernel void b(global int* o) __attribute__((reqd_work_group_size(16u, 1, 1))) { o[0] = 2; }\n";
    let p = program(src);
    assert_eq!(p.kernels[0].reqd_local, Some([8, 2, 1]));
    assert_eq!(p.kernels[1].reqd_local, Some([16, 1, 1]));
    assert!(entry(&p, "a").contains("__kernel __attribute__((reqd_work_group_size(8, 2, 1))) __attribute__((vec_type_hint(float4))) void __sp_y_a("));
    assert!(entry(&p, "b")
        .contains(", __global uint* __sp_yc) __attribute__((reqd_work_group_size(16u, 1, 1))) {"));
    // From a prototype.
    let p = program("kernel __attribute__((reqd_work_group_size(4, 1, 1))) void k(global int* o);\nkernel void k(global int* o) { o[0] = 1; }");
    assert_eq!(p.kernels[0].reqd_local, Some([4, 1, 1]));
    skipped(
        "#define WG __attribute__((reqd_work_group_size(8, 1, 1)))\nkernel WG void k(global int* o) { o[0] = 1; }",
        "reqd_work_group_size comes through macro `WG`",
    );
    skipped(
        "#define N (4 * 2)\nkernel __attribute__((reqd_work_group_size(N, 1, 1))) void k(global int* o) { o[0] = 1; }",
        "not three decimal integers",
    );
    // A macro that names one integer is read.
    let p = program("#define N 8\nkernel __attribute__((reqd_work_group_size(N, N, 1u))) void k(global int* o) { o[0] = 1; }");
    assert_eq!(p.kernels[0].reqd_local, Some([8, 8, 1]));
}

#[test]
fn line_numbers_do_not_move() {
    let src = "/* a */\n#define G(d) \\\n  get_group_id(d)\nsize_t h(void)\n{\n  return G(0) + get_global_id(1);\n}\n\nkernel void k(global int* o,\n  local int* t)\n{\n  local int u[2];\n  if (o[0]) return;\n  o[h()] = t[0] + u[0];\n}\n";
    let p = program(src);
    let a = app(&p);
    assert_eq!(a.lines().count(), src.lines().count(), "{a}");
    for (i, (x, y)) in src.lines().zip(a.lines()).enumerate() {
        // Every line keeps its own text, but for the geometry rewrite's edits.
        assert!(
            x == y || y.contains("__sp_"),
            "line {}: {x:?} became {y:?}",
            i + 1
        );
    }
}

#[test]
fn text_that_could_mean_something_else_past_the_last_line_is_refused() {
    // An include guard: the condition reads otherwise past the last line.
    skipped(
        "#ifndef K_H\n#define K_H\nkernel void k(global int* o) { o[0] = 1; }\n#endif\n",
        "whose condition reads `K_H`, which is defined or #undef'd after it",
    );
    skipped(
        "#define V 1\nkernel void k(global int* o) { o[0] = V; }\n#undef V\n",
        "`V`, which is #undef'd",
    );
    skipped(
        "kernel void k(global int* o) { o[0] = later; }\n#define later 2\n",
        "`later`, which a macro defined at or after the kernel names",
    );
    // The line a copy is on is not the kernel's (the CTS's kernel_preprocessor_macros).
    skipped(
        "kernel void k(global int* o) { o[0] = __LINE__; }",
        "uses `__LINE__`",
    );
    skipped(
        "#define WHERE (__LINE__ + 1)\nkernel void k(global int* o) { o[0] = WHERE; }",
        "uses `__LINE__`",
    );
    skipped(
        "kernel void k(global int* o) { o[0] = 1; __asm__(\"\"); }",
        "uses `__asm__`",
    );
    // A macro that renames what the entry itself uses.
    skipped(
        "#define ulong16 float\nkernel void k(global int* o) { o[0] = 1; }",
        "defines a macro `ulong16`",
    );
    // A kernel whose parameters a macro may multiply.
    skipped(
        "#define PARAMS global int* o, int n\nkernel void k(PARAMS) { o[0] = n; }",
        "parameters are hidden",
    );
}

#[test]
fn one_kernel_skipped_leaves_the_others() {
    let src = "kernel void good(global int* o) { o[get_global_id(0)] = 1; }\nkernel void bad(global int* o) { if (o[0]) return; barrier(CLK_LOCAL_MEM_FENCE); }\n";
    let p = program(src);
    assert_eq!(p.kernels.len(), 1);
    assert_eq!(p.kernels[0].name, "good");
    assert_eq!(p.skipped.len(), 1);
    assert_eq!(p.skipped[0].0, "bad");
    // Nothing rewritable: `None`, and every kernel's reason.
    let w = yielding_or_why(&analyse(
        "kernel void k(global int* o) { o[0] = 1; }\n#if A\n",
        &[],
    ));
    assert!(w.unwrap_err()[0].1.contains("not understood"));
}

#[test]
fn tickets_taken_counts_a_ticket_per_chunk_and_one_past_the_end_per_group() {
    // One group a ticket: total + P.
    assert_eq!(tickets_taken(10, 4, 1), 14);
    assert_eq!(tickets_taken(10, 4, 0), 14);
    // Chunks of 3: 4 tickets (0, 3, 6, 9), then 4 past the end, 3 steps each.
    assert_eq!(tickets_taken(10, 4, 3), 24);
    assert_eq!(tickets_taken(9, 4, 3), 21);
}

#[test]
fn yield_geometry_arg_layout() {
    let bytes = yield_geometry_arg(2, [5, 6, 7], [64, 32, 9], [8, 4, 3], 9, u32::MAX, 3);
    let v: Vec<u64> = bytes
        .chunks(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(
        v,
        [
            5,
            6,
            0,
            64,
            32,
            1,
            8,
            4,
            1,
            2,
            9,
            u64::from(u32::MAX),
            3,
            0,
            0,
            0
        ]
    );
    assert_eq!((YIELD_WORD, TICKET), (0, 1));
}

#[test]
fn slicing_is_unchanged_by_get_global_id() {
    // get_global_id is replaced in yield programs only: slicing needs no rewrite for it.
    let a = analyse(
        "kernel void k(global int* o) { o[get_global_id(0)] = 1; }",
        &[],
    );
    assert!(a.kernel("k").unwrap().geometry.is_empty());
    assert!(rewrite(&a).unwrap().kernels.is_empty());
    assert_eq!(a.blocker("k", false), None);
}

#[test]
fn kernels_in_conditional_groups_keep_their_conditions() {
    let src = "#ifdef FAST\n#if N > 2\nkernel void k(global int* o) { o[0] = 1; }\n#endif\n#else\nkernel void k(global int* o) {\n#ifdef TWO\n  o[0] = 2;\n#else\n  o[0] = 3;\n#endif\n}\n#endif\n";
    let p = program(src);
    assert_eq!(p.kernels.len(), 1);
    let tail = &p.source[app(&p).len()..];
    let first = tail.find("#if (defined(FAST)) && (N > 2)\n").expect(tail);
    let second = tail.find("#if !(defined(FAST)) && (1)\n").expect(tail);
    assert!(first < second, "{tail}");
    assert_eq!(tail.matches("#endif").count(), 3, "{tail}");
    // The group inside the body comes with the copy.
    assert!(
        tail[second..].contains("#ifdef TWO\n  o[0] = 2;\n#else"),
        "{tail}"
    );
    // Definitions in the same branch, or one outside any, are not for choosing between.
    skipped(
        "kernel void k(global int* o) { o[0] = 1; }\n#ifdef A\nkernel void k(global int* o) { o[0] = 2; }\n#endif\n",
        "defined more than once",
    );
    // Definitions that differ in shape are refused.
    skipped(
        "#ifdef A\nkernel void k(global int* o) { o[0] = 1; }\n#else\nkernel void k(global int* o, int n) { o[0] = n; }\n#endif\n",
        "differ in parameters",
    );
    // A __local declaration inside an #if of the body cannot be hoisted alone.
    skipped(
        "kernel void k(global int* o) {\n#ifdef A\n  local int t[4];\n#else\n  local float t[4];\n#endif\n  t[0] = 1; o[0] = t[0];\n}\n",
        "inside an #if",
    );
    // A condition on a macro redefined later is re-read wrongly: refused.
    skipped(
        "#define W 1\n#if W\nkernel void k(global int* o) { o[0] = 1; }\n#endif\n#undef W\n",
        "`W`, which is defined or #undef'd after it",
    );
}

#[test]
fn kernels_and_helpers_in_headers() {
    let h = vec![(
        "k.h".to_string(),
        "size_t gid(void) { return get_global_id(0); }\nkernel void hk(global int* o) { o[gid()] = 1; }\n".to_string(),
    )];
    let p = yielding(&analyse(
        "#include \"k.h\"\nkernel void k(global int* o) { o[gid()] = 2; }\n",
        &h,
    ))
    .unwrap();
    let names: Vec<&str> = p.kernels.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, ["hk", "k"]);
    // The header's helper gets the geometry; the entries, past the main source's last
    // line, pass it on.
    assert!(
        p.headers[0].1.contains("size_t gid(ulong16 __sp_geom)"),
        "{:?}",
        p.headers
    );
    assert!(entry(&p, "hk").contains("o[gid(__sp_geom)] = 1;"));
    assert!(entry(&p, "k").contains("o[gid(__sp_geom)] = 2;"));
}

#[test]
fn the_flat_form_runs_one_virtual_group_a_group_with_one_ticket() {
    let src = "kernel void k(global int* o, int n) {\n  local int t[4];\n  t[get_local_id(0)] = n;\n  barrier(CLK_LOCAL_MEM_FENCE);\n  o[get_global_id(0)] = t[0] + get_group_id(0);\n}\n";
    let a = analyse(src, &[]);
    let flat = yielding_form_or_why(&a, EntryForm::Flat).expect("rewritten");
    let persistent = yielding_or_why(&a).expect("rewritten");
    assert_eq!(
        (flat.form, persistent.form),
        (EntryForm::Flat, EntryForm::Persistent)
    );
    // The same kernels, and the same application's part: only the entries differ.
    assert_eq!(flat.kernels, persistent.kernels);
    assert_eq!(app(&flat), app(&persistent));
    let at = flat
        .source
        .find("one virtual group a group")
        .expect("flat entry");
    let e = &flat.source[at..];
    // A body with barriers runs as zero or one rounds (PoCL 3.1 mishandles barriers under
    // the `if`), no other loop (the body has none); the body's barrier and the ticket's.
    assert_eq!(e.matches("for (").count(), 1, "{e}");
    assert!(e.contains(FLAT_ROUNDS) && !e.contains("while"), "{e}");
    assert_eq!(e.matches("barrier(").count(), 2, "{e}");
    assert!(e.contains("atomic_add(__sp_yc + 1, 1u)"), "{e}");
    // Without barriers: once, under the `if`, and `return` stays: leaving the kernel is
    // leaving the group (the persistent form jumps to the end of its loop's body).
    let plain = "kernel void k(global int* o, int n) {\n  if (n > 3) return;\n  o[get_global_id(0)] = n;\n}\n";
    let a = analyse(plain, &[]);
    let plain = yielding_form_or_why(&a, EntryForm::Flat).expect("rewritten");
    let at = plain
        .source
        .find("one virtual group a group")
        .expect("flat entry");
    let pe = &plain.source[at..];
    assert!(pe.contains(FLAT_ONCE) && !pe.contains("for ("), "{pe}");
    assert!(
        pe.contains("if (n > 3) return;") && !pe.contains("__sp_next"),
        "{pe}"
    );
    // And a second entry, whose condition PoCL finds uniform (`FLAT_UNIFORM`); a body
    // with barriers has none (its kernel has barriers of its own), nor a persistent form.
    assert_eq!(flat.kernels[0].alt_entry, None);
    assert_eq!(plain.kernels[0].alt_entry.as_deref(), Some("__sp_yu_k"));
    let alt = &pe[pe.find("void __sp_yu_k(").expect("second entry")..];
    assert!(
        alt.contains(FLAT_UNIFORM) && !alt.contains(FLAT_ONCE),
        "{alt}"
    );
    assert!(alt.contains("if (n > 3) return;"), "{alt}");
    let persistent = yielding_or_why(&a).expect("rewritten");
    assert_eq!(persistent.kernels[0].alt_entry, None);
    let p = entry(&persistent, "k");
    assert!(
        p.contains("goto __sp_next") && p.contains("__sp_next: ;"),
        "{p}"
    );
    // Refused in the flat form (PoCL 3.1 runs them wrongly), kept in the persistent one:
    // a `return` in a body with a barrier, even after it (no flat form that PoCL runs
    // right was found), and a `return` inside a loop.
    let both = "kernel void k(global int* o, int n) {\n  local int t[4];\n  t[get_local_id(0)] = n;\n  barrier(CLK_LOCAL_MEM_FENCE);\n  if (n > 3) return;\n  o[get_global_id(0)] = t[0];\n}\n";
    let looped = "kernel void k(global int* o, int n) {\n  for (int i = 0; i < n; i++)\n    if (o[i]) return;\n  o[0] = 1;\n}\n";
    for (src, says) in [
        (both, "line 5 is in a body with a barrier"),
        (looped, "leaves a loop"),
    ] {
        let a = analyse(src, &[]);
        let why = yielding_form_or_why(&a, EntryForm::Flat).unwrap_err();
        assert!(
            why[0].1.contains(says) && why[0].1.contains("flat entry"),
            "{why:?}"
        );
        assert!(yielding_or_why(&a).is_ok());
    }
    // The body's `__local` declaration is at kernel scope, before the entry's own.
    let hoisted = e.find("local int t[4];").expect("hoisted");
    assert!(hoisted < e.find("__local uint __sp_yt[4];").unwrap(), "{e}");
    // Runs of at most FLAT_RUN_GROUPS groups, one a virtual group left.
    assert_eq!(flat_run_groups(10, 0), 10);
    assert_eq!(flat_run_groups(10, 7), 3);
    assert_eq!((flat_run_groups(10, 10), flat_run_groups(10, 12)), (0, 0));
    assert_eq!(flat_run_groups(FLAT_RUN_GROUPS * 3, 5), FLAT_RUN_GROUPS);
}
