//! Rewriting a program so that its kernels can run in slices.
//!
//! Every function that reads a geometry builtin (itself or through what it calls) gets one
//! more parameter, `ulong16 __sp_geom`, holding the whole launch's geometry; every call to
//! such a function passes it on, and each call `get_X(d)` of a builtin becomes
//! `__sp_X_<h>(__sp_geom, d)`, a function that computes the value from the geometry.
//! Calls inside macro bodies are edited the same way, so they work wherever the macro is
//! used (which is always inside a function that has `__sp_geom`: using the macro makes the
//! function read the geometry).
//!
//! Why a by-value `ulong16`: it needs no buffer (a `__global` pointer would need a
//! `cl_mem` per launch) and no type declaration whose layout host and device must agree on
//! (a struct); vector arguments by value are core OpenCL 1.0, so PoCL and NVIDIA take it
//! with a plain 128-byte `clSetKernelArg`. `ulong` keeps sizes and offsets whole on 64-bit
//! devices (it needs 64-bit integers, which every full-profile device has).
//!
//! Line numbers: no edit adds or removes a line. The replacement functions are declared
//! by prototypes inserted, on the same line, just before each function that needs them,
//! and defined after the application's last line. `#line` would be simpler, but NVIDIA's
//! compiler ignores it in its diagnostics (seen with driver 580.159: an error on line 7
//! was reported on line 24, behind a 17-line prelude that ended in `#line 1`). The functions are
//! plain external functions (`static` needs OpenCL C 1.2, and a prototype and its
//! definition must agree); `<h>`, a hash of the sources, keeps two rewritten compilation
//! units from defining the same symbol when linked together.

use super::analyse::{mentions, Model};
use super::builtins::{geometry_bit, SLICING};
use super::lex::Kind;
use super::parse::{matching, Func};
use super::pp::{TokRef, Unit, MAIN};
use super::Analysis;

/// The application source, rewritten.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rewritten {
    pub source: String,
    /// The headers (for `clCompileProgram`), in the order given, edited where needed.
    pub headers: Vec<(String, String)>,
    /// Each kernel that reads the geometry, and the index of its hidden argument (its last;
    /// a caller may check it against `CL_KERNEL_NUM_ARGS` - 1). Every launch of these
    /// kernels from the rewritten program needs the argument set, sliced or not; the
    /// application must not see it (argument counts and info, program source, binaries).
    pub kernels: Vec<(String, u32)>,
    /// Non-kernel functions whose signature changed. They must not be called from another
    /// compilation unit, so a caller that compiles units separately (`clCompileProgram`
    /// then `clLinkProgram`) should not use the rewrite when this is not empty.
    pub helpers: Vec<String>,
}

/// The name of the hidden parameter, and its declaration.
const PARAM: &str = "__sp_geom";
const PARAM_DECL: &str = "ulong16 __sp_geom";

/// See [`Rewriter::prototypes`]. The first pragma keeps compilers whose clang has no
/// `-Wpsabi` group (NVIDIA's) from warning about the second; it also mutes unknown-group
/// warnings for the application's own pragmas, the one difference it makes to its log.
pub(crate) const PSABI: &str =
    "_Pragma(\"clang diagnostic ignored \\\"-Wunknown-warning-option\\\"\") \
                     _Pragma(\"clang diagnostic ignored \\\"-Wpsabi\\\"\") ";

/// Bytes of the hidden argument's value.
pub const GEOMETRY_ARG_SIZE: usize = 128;

/// For each builtin a rewrite may replace (the bit order of
/// [`super::builtins::YIELDING`]: [`super::GEOMETRY`], then `get_global_id`), the stem of
/// its replacement's name and whether it takes a dimension.
const REPLACEMENTS: [(&str, bool); 6] = [
    ("group_id", true),
    ("num_groups", true),
    ("global_size", true),
    ("global_offset", true),
    ("global_linear_id", false),
    ("global_id", true),
];

/// The replacements' definitions, put after the application's last line (`_H` stands for
/// the per-program suffix). The geometry vector holds the global offset in s0–s2, the
/// global size in s3–s5, the enqueued local size in s6–s8, the work dimension in s9, the
/// piece's first work-group in sa–sc ([`with_first_group`]) and the launch's work-group
/// counts in sd–sf; unused dimensions hold offset 0, size 1, local size 1, first group 0
/// and one group, so the formulas give the spec's values past `get_work_dim()` by
/// themselves. A work dimension of 0 (an all-zero vector, [`NATIVE_GEOMETRY`]) means
/// "this launch is not sliced": the builtins answer, so a
/// launch that reaches the vendor whole needs no geometry (and no knowledge of the local
/// size the vendor picks for a NULL one).
///
/// No replacement divides, and `get_group_id` is the piece's own plus its first group: the
/// same for every work-item of a group, as the builtin is, whichever branch runs. Worked
/// out from `get_global_id` (a division per work-item), it made PoCL keep the group id per
/// work-item across the kernel's barriers even in launches sent whole, which never take
/// that branch: tinygrad's
/// matrix-vector kernel (`r_4_256_16_49`, one barrier) ran 3.4 times as long (750 µs
/// against 218) on PoCL, and a lone tinygrad HP paid 14-21% at p50 for it
/// (`docs/benchmarks.md`, session 44).
///
/// `get_global_linear_id` branches once, and its whole-launch branch is the spec's formula
/// over the real builtins (not the builtin itself, which OpenCL C 1.2 does not declare, nor
/// the other replacements, each testing the branch again): on PoCL a 1-D launch of 2^20
/// items that writes its linear id ran 1.15-1.30x its bare time with the formula over the
/// replacements, as fast as bare with this (`benches/kernel_cost.py`'s `linear_id`,
/// session 46).
pub(crate) const DEFINITIONS: &str = "
/* SoftPreempt: the builtins that a slice would answer with its own geometry. */
size_t __sp_global_offset_H(ulong16 g, uint d) { return g.s9 == 0ul ? get_global_offset(d) : (size_t)(d == 0u ? g.s0 : d == 1u ? g.s1 : d == 2u ? g.s2 : 0ul); }
size_t __sp_global_size_H(ulong16 g, uint d) { return g.s9 == 0ul ? get_global_size(d) : (size_t)(d == 0u ? g.s3 : d == 1u ? g.s4 : d == 2u ? g.s5 : 1ul); }
ulong __sp_local_size_H(ulong16 g, uint d) { return d == 0u ? g.s6 : d == 1u ? g.s7 : d == 2u ? g.s8 : 1ul; }
size_t __sp_num_groups_H(ulong16 g, uint d) { return g.s9 == 0ul ? get_num_groups(d) : (size_t)(d == 0u ? g.sd : d == 1u ? g.se : d == 2u ? g.sf : 1ul); }
size_t __sp_group_id_H(ulong16 g, uint d) { if (g.s9 == 0ul) return get_group_id(d); return get_group_id(d) + (size_t)(d == 0u ? g.sa : d == 1u ? g.sb : d == 2u ? g.sc : 0ul); }
size_t __sp_global_linear_id_H(ulong16 g) { if (g.s9 == 0ul) return ((get_global_id(2) - get_global_offset(2)) * get_global_size(1) + (get_global_id(1) - get_global_offset(1))) * get_global_size(0) + (get_global_id(0) - get_global_offset(0)); return (size_t)((((ulong)get_global_id(2) - g.s2) * g.s4 + ((ulong)get_global_id(1) - g.s1)) * g.s3 + ((ulong)get_global_id(0) - g.s0)); }
";

/// The hidden argument's value for a launch that reaches the vendor whole (not sliced):
/// the rewritten builtins then defer to the real ones.
pub const NATIVE_GEOMETRY: [u8; GEOMETRY_ARG_SIZE] = [0; GEOMETRY_ARG_SIZE];

/// The hidden argument's value for a launch of `work_dim` dimensions with this global
/// offset and size and the local size passed to every slice (what the vendor runs with:
/// a caller that slices a launch with a NULL local size must pin one first). Returns the
/// bytes for `clSetKernelArg` and their size.
pub fn geometry_arg(
    work_dim: u32,
    offset: [usize; 3],
    global: [usize; 3],
    local: [usize; 3],
) -> (Vec<u8>, usize) {
    let mut v = [0u64; 16];
    for d in 0..3 {
        let used = (d as u32) < work_dim;
        v[d] = if used { offset[d] as u64 } else { 0 };
        v[3 + d] = if used { global[d] as u64 } else { 1 };
        // A zero local size cannot be launched; 1 keeps the device from dividing by zero.
        v[6 + d] = if used { local[d].max(1) as u64 } else { 1 };
        v[13 + d] = if used {
            global[d].div_ceil(local[d].max(1)) as u64
        } else {
            1
        };
    }
    v[9] = work_dim as u64;
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_ne_bytes()).collect();
    (bytes, GEOMETRY_ARG_SIZE)
}

/// Sets the first work-group of a piece (`first`, per dimension) in a hidden argument's
/// value from [`geometry_arg`]: a piece launched with the global offset `offset + first *
/// local` (whole groups of the launch's own local size) reads its `get_group_id` as the
/// whole launch's. [`geometry_arg`] gives first groups of 0: the whole launch, or its first
/// piece.
pub fn with_first_group(value: &mut [u8], first: [usize; 3]) {
    for (d, f) in first.iter().enumerate() {
        let at = 8 * (10 + d);
        if let Some(slot) = value.get_mut(at..at + 8) {
            slot.copy_from_slice(&(*f as u64).to_ne_bytes());
        }
    }
}

/// One replacement of `start..end` of a file by `text`.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(crate) struct Edit {
    pub file: u32,
    pub start: usize,
    pub end: usize,
    pub text: String,
}

/// The files of the unit as they were given (main source, then the headers).
fn unchanged(unit: &Unit) -> Rewritten {
    Rewritten {
        source: unit.files[MAIN as usize].text.clone(),
        headers: unit.files[1..unit.options_file() as usize]
            .iter()
            .map(|f| (f.name.clone(), f.text.clone()))
            .collect(),
        kernels: Vec::new(),
        helpers: Vec::new(),
    }
}

/// See [`super::rewrite`].
pub(super) fn rewrite_unguarded(analysis: &Analysis) -> Option<Rewritten> {
    if analysis.conservative.is_some() {
        return None;
    }
    let model = analysis.model.as_ref()?;
    if !model.funcs.values().any(|f| f.geometry & SLICING != 0) {
        return Some(unchanged(&model.unit));
    }
    let (r, edits) = plan(model, SLICING, "")?;
    let kernels = r.kernel_indices()?;
    let mut out = r.finish(
        edits,
        &DEFINITIONS.replace("_H(", &format!("_{}(", r.suffix)),
    )?;
    out.kernels = kernels;
    let mut helpers: Vec<String> = model
        .funcs
        .iter()
        .filter(|(n, f)| f.geometry & SLICING != 0 && !out.kernels.iter().any(|k| &k.0 == *n))
        .map(|(n, _)| n.clone())
        .collect();
    helpers.sort();
    out.helpers = helpers;
    Some(out)
}

/// The edits that thread the geometry through every function that reads one of the
/// builtins of `mask` (a set of bits of [`super::builtins::YIELDING`]) and replace those
/// builtins; `tag` goes into the replacements' names. `None` when the program uses a
/// builtin or such a function in a way the rewrite cannot follow.
pub(crate) fn plan<'a>(model: &'a Model, mask: u8, tag: &str) -> Option<(Rewriter<'a>, Vec<Edit>)> {
    let unit = &model.unit;
    let reserved = |t: &super::lex::Tok| {
        t.kind == Kind::Ident
            && t.text
                .get(..5)
                .is_some_and(|p| p.eq_ignore_ascii_case("__sp_"))
    };
    let replaced = |name: &str| geometry_bit(name).is_some_and(|b| b & mask != 0);
    if unit.files.iter().flat_map(|f| &f.toks).any(reserved)
        || unit.macros.iter().any(|m| replaced(&m.name))
    {
        return None;
    }
    let r = Rewriter {
        model,
        unit,
        mask,
        suffix: format!("{tag}{}", suffix(unit)),
    };
    let mut edits = Vec::new();
    for f in &model.parsed.funcs {
        if r.affected(&f.name) {
            edits.push(r.param_edit(f)?);
            edits.push(r.insert_at(unit.code[f.header.start], &r.prototypes()));
        }
        r.check_outside(
            &unit.code[f.header.clone()],
            Some(f.name_at - f.header.start),
        )?;
        if let Some(body) = &f.body {
            r.body_edits(&unit.code[body.clone()], &[], &mut edits)?;
        }
    }
    for span in &model.parsed.other {
        r.check_outside(&unit.code[span.clone()], None)?;
    }
    for m in &unit.macros {
        let mut mine = Vec::new();
        r.body_edits(&m.body, m.params.as_deref().unwrap_or(&[]), &mut mine)?;
        if m.file != unit.options_file() {
            edits.append(&mut mine);
        } else if !mine.is_empty() && r.used(&m.name) {
            return None; // A `-D` option's body cannot be edited.
        }
    }
    Some((r, edits))
}

pub(crate) struct Rewriter<'a> {
    model: &'a Model,
    unit: &'a Unit,
    /// The builtins replaced (bits of [`super::builtins::YIELDING`]).
    mask: u8,
    /// Makes the replacements' names unique to this program.
    pub suffix: String,
}

/// A hash (FNV-1a) of the program's files, as 16 hex digits.
fn suffix(unit: &Unit) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in unit.files.iter().flat_map(|f| f.text.bytes().chain([0])) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

impl Rewriter<'_> {
    /// The files with `edits` applied and `tail` (the replacements' definitions and
    /// whatever else goes after the application's last line) appended to the main source.
    pub fn finish(&self, mut edits: Vec<Edit>, tail: &str) -> Option<Rewritten> {
        let unit = self.unit;
        let end = unit.files[MAIN as usize].text.len();
        edits.push(Edit {
            file: MAIN,
            start: end,
            end,
            // Two newlines: the first may only end a line splice the source ends with.
            text: format!("\n{tail}"),
        });
        let mut out = unchanged(unit);
        out.source = apply(&unit.files[MAIN as usize].text, MAIN, &edits)?;
        for (i, h) in out.headers.iter_mut().enumerate() {
            h.1 = apply(&h.1, i as u32 + 1, &edits)?;
        }
        Some(out)
    }

    pub fn affected(&self, name: &str) -> bool {
        self.model
            .funcs
            .get(name)
            .is_some_and(|f| f.geometry & self.mask != 0)
    }

    /// Whether the code or a macro mentions `name`.
    fn used(&self, name: &str) -> bool {
        let unit = self.unit;
        let macro_toks = unit.macros.iter().flat_map(|m| &m.body);
        unit.code
            .iter()
            .chain(macro_toks)
            .any(|&r| unit.text(r) == name)
    }

    fn macro_affected(&self, name: &str) -> bool {
        self.model
            .macros
            .get(name)
            .is_some_and(|f| f.geometry & self.mask != 0)
    }

    /// The bit number of `name` if it is a builtin this rewrite replaces.
    fn replaced(&self, name: &str) -> Option<usize> {
        geometry_bit(name)
            .filter(|b| b & self.mask != 0)
            .map(|b| b.trailing_zeros() as usize)
    }

    /// The replacement for builtin number `i` of [`super::builtins::YIELDING`].
    fn replacement(&self, i: usize) -> String {
        format!("__sp_{}_{}", REPLACEMENTS[i].0, self.suffix)
    }

    /// Prototypes of the replacements, on one line. Clang (PoCL) warns at every call that
    /// passes a `ulong16` by value on x86 without AVX-512 ("changes the ABI"): the
    /// application's build log must not fill with notes about code it did not write, and
    /// `_Pragma` silences them without a line of its own.
    pub fn prototypes(&self) -> String {
        let mut out = String::from(PSABI);
        for (i, (_, dim)) in REPLACEMENTS.iter().enumerate() {
            if self.mask & (1 << i) == 0 {
                continue;
            }
            let dim = if *dim { ", uint" } else { "" };
            out += &format!("size_t {}(ulong16{dim}); ", self.replacement(i));
        }
        out
    }

    pub fn insert_at(&self, r: TokRef, text: &str) -> Edit {
        let t = self.unit.tok(r);
        Edit {
            file: r.file,
            start: t.start,
            end: t.start,
            text: text.to_string(),
        }
    }

    /// Adds the hidden parameter to a declaration's parameter list.
    fn param_edit(&self, f: &Func) -> Option<Edit> {
        let code = &self.unit.code;
        let inner = &code[f.open + 1..f.close];
        Some(match inner {
            [] => self.insert_at(code[f.close], PARAM_DECL),
            [v] if self.unit.text(*v) == "void" => {
                let t = self.unit.tok(*v);
                if t.spliced {
                    return None;
                }
                Edit {
                    file: v.file,
                    start: t.start,
                    end: t.end,
                    text: PARAM_DECL.to_string(),
                }
            }
            [..] => self.insert_at(code[f.close], &format!(", {PARAM_DECL}")),
        })
    }

    /// Edits for a function body or a macro body (`params` are the macro's parameters,
    /// which stand for the arguments and are never edited).
    pub fn body_edits(
        &self,
        toks: &[TokRef],
        params: &[String],
        edits: &mut Vec<Edit>,
    ) -> Option<()> {
        for m in mentions(self.unit, toks) {
            if m.member || params.iter().any(|p| p == m.name) {
                continue;
            }
            if let Some(i) = self.replaced(m.name) {
                // `get_X(args)` becomes `__sp_X_<h>(__sp_geom, args)`.
                let r = toks[m.at];
                let t = self.unit.tok(r);
                let open = toks.get(m.at + 1).filter(|&&o| self.unit.text(o) == "(")?;
                let close = matching(self.unit, toks, m.at + 1)?;
                if t.spliced {
                    return None;
                }
                edits.push(Edit {
                    file: r.file,
                    start: t.start,
                    end: t.end,
                    text: self.replacement(i),
                });
                let arg = if close == m.at + 2 {
                    PARAM.to_string()
                } else {
                    format!("{PARAM}, ")
                };
                let end = self.unit.tok(*open).end;
                edits.push(Edit {
                    file: open.file,
                    start: end,
                    end,
                    text: arg,
                });
            } else if self.affected(m.name) {
                // Every mention must be a call whose argument list is in the same token
                // list, so the geometry can be passed on.
                if toks.get(m.at + 1).map(|&r| self.unit.text(r)) != Some("(") {
                    return None;
                }
                let close = matching(self.unit, toks, m.at + 1)?;
                let text = if close == m.at + 2 {
                    PARAM.to_string()
                } else {
                    format!(", {PARAM}")
                };
                edits.push(self.insert_at(toks[close], &text));
            }
        }
        Some(())
    }

    /// Outside function bodies (declarations, parameter lists) there is no geometry to
    /// pass on: nothing there may read it. `own` is the declared function's name.
    fn check_outside(&self, toks: &[TokRef], own: Option<usize>) -> Option<()> {
        let bad = mentions(self.unit, toks).any(|m| {
            Some(m.at) != own
                && (self.macro_affected(m.name)
                    || (!m.member && (self.replaced(m.name).is_some() || self.affected(m.name))))
        });
        (!bad).then_some(())
    }

    /// The hidden argument's index for every kernel that reads the geometry: its number of
    /// parameters, which every declaration of it must agree on.
    fn kernel_indices(&self) -> Option<Vec<(String, u32)>> {
        let mut out = Vec::new();
        for k in self.model.kernels.iter().filter(|k| !k.geometry.is_empty()) {
            let mut index = None;
            for f in self.model.parsed.funcs.iter().filter(|f| f.name == k.name) {
                let n = self.param_count(f)?;
                if index.replace(n).is_some_and(|i| i != n) {
                    return None;
                }
            }
            out.push((k.name.clone(), index?));
        }
        Some(out)
    }

    /// Number of parameters of a declaration; `None` if a macro could hide some or a
    /// conditional directive could remove some.
    pub fn param_count(&self, f: &Func) -> Option<u32> {
        if self.unit.regions[f.open] != self.unit.regions[f.close] {
            return None;
        }
        let toks = &self.unit.code[f.open + 1..f.close];
        let hides_params = mentions(self.unit, toks).any(|m| {
            self.unit.macros.iter().any(|d| {
                d.name == m.name
                    && (d.params.is_some() || d.body.iter().any(|&r| self.unit.text(r) == ","))
            })
        });
        if hides_params || toks.iter().any(|&r| self.unit.text(r) == "...") {
            return None;
        }
        if toks.is_empty() || (toks.len() == 1 && self.unit.text(toks[0]) == "void") {
            return Some(0);
        }
        let mut depth = 0;
        let mut n = 1;
        for &r in toks {
            match self.unit.text(r) {
                "(" | "[" | "{" => depth += 1,
                ")" | "]" | "}" => depth -= 1,
                "," if depth == 0 => n += 1,
                _ => {}
            }
        }
        Some(n)
    }
}

/// Applies the edits of `file` to its text; `None` if two of them overlap, or insert at
/// the same place (their order would be a guess). The same edit may come twice (a header
/// included twice yields its tokens twice).
fn apply(text: &str, file: u32, edits: &[Edit]) -> Option<String> {
    apply_in(text, file, edits, 0..usize::MAX)
}

/// [`apply`] to the bytes `range` of `text` only (what the yielding rewrite copies): the
/// edits inside it, `None` if one straddles its bounds.
pub(crate) fn apply_in(
    text: &str,
    file: u32,
    edits: &[Edit],
    range: std::ops::Range<usize>,
) -> Option<String> {
    let mut mine: Vec<&Edit> = Vec::new();
    for e in edits.iter().filter(|e| e.file == file) {
        let inside = e.start >= range.start && e.end <= range.end && e.start < range.end;
        let outside = e.end <= range.start || e.start >= range.end;
        if inside {
            mine.push(e);
        } else if !outside {
            return None;
        }
    }
    mine.sort();
    mine.dedup();
    let end = range.end.min(text.len());
    let mut out = String::with_capacity(end - range.start.min(end) + DEFINITIONS.len());
    let mut pos = range.start;
    let mut last: Option<&Edit> = None;
    for e in mine {
        let both_insert =
            last.is_some_and(|l| l.start == e.start && l.end == l.start && e.end == e.start);
        if e.start < pos || both_insert {
            return None;
        }
        out.push_str(text.get(pos..e.start)?);
        out.push_str(&e.text);
        pos = e.end;
        last = Some(e);
    }
    out.push_str(text.get(pos..end)?);
    Some(out)
}
