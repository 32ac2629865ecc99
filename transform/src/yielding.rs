//! The yielding-launch rewrite: each kernel gets a persistent entry kernel that takes
//! virtual work-groups from a ticket counter and stops between two of them when the host
//! asks (architecture, "Yielding launches"). See the crate documentation for the protocol.
//!
//! The program is first put through the geometry rewrite (see `rewrite.rs`) with one more
//! builtin, `get_global_id`: every function that reads the geometry gets `__sp_geom`, and
//! the replacements answer from it. Here the replacements read the virtual group's id from
//! `__sp_geom` too (`sd`..`sf`), which the entry kernel fills in for each virtual group.
//! Then, after the application's last line (so its line numbers do not move; NVIDIA
//! ignores `#line`), each kernel's entry: the kernel's declaration with another name and two
//! hidden parameters, its `__local` declarations hoisted to kernel scope, and the loop, with
//! a copy of the kernel's (rewritten) body inside, in which `return` jumps to the end of
//! the loop's body.
//!
//! The copy is compiled after the whole application, under the conditions of the `#if`
//! groups around the kernel, so every kernel whose text could mean something else there is
//! skipped (and says why): one that uses a macro that is `#undef`'d or defined (again)
//! after it, one under a condition that reads such a macro, one that returns from inside
//! a macro. So is one whose barriers may not stay uniform: a `return` that may
//! be followed by a barrier or a work-group function in the same execution of the kernel
//! (its items would meet the loop's barriers while others wait in the body's).

use std::collections::HashSet;
use std::ops::Range;

use super::analyse::{mentions, Model};
use super::builtins::{is_sync, YIELDING};
use super::lex::{Kind, Tok};
use super::parse::{matching, Func};
use super::pp::{TokRef, Unit};
use super::rewrite::{apply_in, plan, Edit, Rewriter, GEOMETRY_ARG_SIZE};
use super::{Analysis, KernelInfo};

/// `control[YIELD_WORD]`: the host writes the epoch of the launch it wants to stop.
pub const YIELD_WORD: usize = 0;
/// `control[TICKET]`: the ticket counter (32-bit, wraps; never reset by the host).
pub const TICKET: usize = 1;

/// A program whose kernels can run as yielding launches (see [`super::yielding`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct YieldProgram {
    /// A whole program: compilable on its own. Only its entry kernels are for launching:
    /// the application's kernels in it read the geometry of a persistent group.
    pub source: String,
    /// As [`super::Rewritten::headers`].
    pub headers: Vec<(String, String)>,
    /// One per kernel that could be rewritten.
    pub kernels: Vec<YieldKernel>,
    /// (kernel, why it was not rewritten): shown to users.
    pub skipped: Vec<(String, String)>,
    /// The shape of its entries.
    pub form: EntryForm,
}

/// The shape of a program's entry kernels: how the host launches them (see the crate
/// documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EntryForm {
    /// A grid of persistent groups, each taking tickets for chunks of virtual groups in a
    /// loop: for GPUs, where a group that starts costs a scheduling slot.
    Persistent,
    /// One virtual group for each launched group, no loop ([`ENTRY_FLAT`]'s comment):
    /// for CPU devices, where PoCL runs the persistent loop slowly.
    Flat,
}

/// A kernel's persistent entry in [`YieldProgram::source`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct YieldKernel {
    /// The application's kernel name.
    pub name: String,
    /// The persistent entry kernel in `source`: `__sp_y_<name>`.
    pub entry: String,
    /// A second entry of the same kernel in `source`, `__sp_yu_<name>`, where PoCL may
    /// compile the body's loops differently ([`FLAT_UNIFORM`]): a flat entry of a body
    /// without barriers has one. Neither is faster for every kernel, so the host times
    /// both and runs the faster.
    pub alt_entry: Option<String>,
    /// The application's argument count. The entry takes them, in the same order and with
    /// the same types, followed by two hidden ones: index `args` is the `ulong16` geometry
    /// ([`yield_geometry_arg`]), `args + 1` the `__global uint*` control words
    /// ([`YIELD_WORD`], [`TICKET`]).
    pub args: u32,
    /// Its `reqd_work_group_size`, if any.
    pub reqd_local: Option<[usize; 3]>,
    /// As [`KernelInfo::work_group_dependent`]: a launch with a NULL local size must pin
    /// one (the entry runs with the original local size).
    pub work_group_dependent: bool,
}

/// The hidden geometry argument of an entry kernel: the original launch's offset, global
/// and local size and dimension count (as [`super::geometry_arg`]), the launch's epoch
/// (`sa`), the ticket counter's value when the application's launch began (`sb`) and the
/// chunk (`sc`): how many consecutive virtual groups one ticket hands out (at least 1).
/// The entry fills `sd`..`sf` itself (the virtual group's id).
pub fn yield_geometry_arg(
    work_dim: u32,
    offset: [usize; 3],
    global: [usize; 3],
    local: [usize; 3],
    epoch: u32,
    ticket_base: u32,
    chunk: u32,
) -> [u8; GEOMETRY_ARG_SIZE] {
    let (mut bytes, _) = super::geometry_arg(work_dim, offset, global, local);
    bytes[80..88].copy_from_slice(&u64::from(epoch).to_ne_bytes());
    bytes[88..96].copy_from_slice(&u64::from(ticket_base).to_ne_bytes());
    bytes[96..104].copy_from_slice(&u64::from(chunk.max(1)).to_ne_bytes());
    // Not the slicing geometry's group counts: the entry's virtual group id, its own.
    bytes[104..128].fill(0);
    let mut out = [0; GEOMETRY_ARG_SIZE];
    out.copy_from_slice(&bytes);
    out
}

/// How far a launch of `total` virtual groups on `persistent` groups, handing out `chunk`
/// groups a ticket, moves the ticket counter when it runs to the end unasked: one ticket
/// per chunk, then one past the end for each persistent group (`chunk` counter steps each).
/// The next application launch's base is the old base plus this.
pub fn tickets_taken(total: u64, persistent: u64, chunk: u32) -> u64 {
    let c = u64::from(chunk.max(1));
    c * (total.div_ceil(c) + persistent)
}

/// The replacements' definitions in a yield program (`_H` stands for the suffix), after
/// the application's last line. The geometry is the original launch's, as for slicing
/// (offset s0-s2, global size s3-s5, local size s6-s8; unused dimensions hold 0, 1, 1),
/// and the virtual group's id is in sd-sf, so every builtin answers for the virtual group
/// of the original launch. `get_local_id` is the real one: the entry runs with the
/// original local size, in as many dimensions as the original.
pub(crate) const DEFINITIONS: &str = "
/* SoftPreempt: the builtins of a virtual group of a yielding launch. */
size_t __sp_global_offset_H(ulong16 g, uint d) { return (size_t)(d == 0u ? g.s0 : d == 1u ? g.s1 : d == 2u ? g.s2 : 0ul); }
size_t __sp_global_size_H(ulong16 g, uint d) { return (size_t)(d == 0u ? g.s3 : d == 1u ? g.s4 : d == 2u ? g.s5 : 1ul); }
ulong __sp_local_size_H(ulong16 g, uint d) { return d == 0u ? g.s6 : d == 1u ? g.s7 : d == 2u ? g.s8 : 1ul; }
size_t __sp_num_groups_H(ulong16 g, uint d) { ulong l = __sp_local_size_H(g, d); return (size_t)(((ulong)__sp_global_size_H(g, d) + l - 1ul) / l); }
size_t __sp_group_id_H(ulong16 g, uint d) { return (size_t)(d == 0u ? g.sd : d == 1u ? g.se : d == 2u ? g.sf : 0ul); }
size_t __sp_global_id_H(ulong16 g, uint d) { return d < 3u ? (size_t)((ulong)__sp_global_offset_H(g, d) + (ulong)__sp_group_id_H(g, d) * __sp_local_size_H(g, d) + (ulong)get_local_id(d)) : (size_t)0; }
size_t __sp_global_linear_id_H(ulong16 g) { return (size_t)((((ulong)__sp_global_id_H(g, 2u) - (ulong)__sp_global_offset_H(g, 2u)) * (ulong)__sp_global_size_H(g, 1u) + ((ulong)__sp_global_id_H(g, 1u) - (ulong)__sp_global_offset_H(g, 1u))) * (ulong)__sp_global_size_H(g, 0u) + ((ulong)__sp_global_id_H(g, 0u) - (ulong)__sp_global_offset_H(g, 0u))); }
";

/// An entry kernel. `@HEAD@` is the kernel's declaration up to its name, `@PARAMS@` its
/// parameters followed by a comma (or nothing), `@POST@` what follows the parameter list
/// (attributes), `@HOISTED@` its `__local` declarations, `@BODY@` the copy of its body and
/// `@NEXT@` the label that `return` jumps to (where it has one).
///
/// Item (0,0,0) reads the yield word and takes a ticket for a *chunk* of `sc` consecutive
/// virtual groups (the host picks it from the kernel's group time, so that a chunk of
/// short groups is worth the ticket), and works out the chunk's first group id once, in
/// 32 bits (the host keeps total groups below 2^31); one barrier shares it through
/// `__local` memory, double-buffered so that the next write cannot race this round's
/// reads (a round's reads all come before the next round's barrier, which the lead
/// passes before writing the same half again). The items then run the chunk's groups,
/// stepping the id. On an H100 the per-group round trip of a plain ticket (a read and an
/// atomic in a row, two barriers, 64-bit divisions by every item) cost 8.8 µs groups 4%
/// of their throughput.
///
/// The geometry is a variable of the round, after its barrier: live across the barrier,
/// PoCL 3.1 keeps a copy of it per work-item, and building the entries beside the
/// application's launches then died in LLVM at times ("out of memory": a 32 GB request,
/// in 3 of 10 cold runs of the preemption benchmark's smoke co-run).
///
/// The group counts live in `__local` memory, not in variables: what stays live across
/// the body is what the vendor's compiler must keep beside the kernel's own values, and
/// it schedules the body around it. The benchmark's Mandelbrot kernel, persistent, ran
/// 3.4% slower than the application's kernel with the counts in variables and 6% faster
/// with them in `__local` memory (H100, same output; 16 registers plain, 28-29 either way
/// by `-cl-nv-verbose`; `transform/examples/rewrite.rs` prints the entries timed).
pub(crate) const ENTRY: &str = "
/* SoftPreempt: the persistent entry of kernel `@NAME@` (a yielding launch). */
@HEAD@__sp_y_@NAME@(@PARAMS@ulong16 __sp_yg, __global uint* __sp_yc)@POST@{
@HOISTED@
    __local uint __sp_yt[2][4];
    __local uint __sp_yn[3];
    const uint __sp_chunk = max((uint)__sp_yg.sc, 1u);
    const int __sp_lead = get_local_id(0) == 0 && get_local_id(1) == 0 && get_local_id(2) == 0;
    if (__sp_lead) {
        __sp_yn[0] = (uint)__sp_num_groups_H(__sp_yg, 0u);
        __sp_yn[1] = (uint)__sp_num_groups_H(__sp_yg, 1u);
        __sp_yn[2] = __sp_yn[0] * __sp_yn[1] * (uint)__sp_num_groups_H(__sp_yg, 2u);
    }
    for (uint __sp_h = 0u;; __sp_h ^= 1u) {
        if (__sp_lead) {
            const uint __sp_w = *(volatile __global uint*)(__sp_yc + @WORD@);
            const uint __sp_f = (int)(__sp_w - (uint)__sp_yg.sa) >= 0 ? 0xffffffffu : atomic_add(__sp_yc + @TICKET@, __sp_chunk) - (uint)__sp_yg.sb;
            __sp_yt[__sp_h][0] = __sp_f;
            if (__sp_f < __sp_yn[2]) {
                __sp_yt[__sp_h][1] = __sp_f % __sp_yn[0];
                __sp_yt[__sp_h][2] = __sp_f / __sp_yn[0] % __sp_yn[1];
                __sp_yt[__sp_h][3] = __sp_f / (__sp_yn[0] * __sp_yn[1]);
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        const uint __sp_f = __sp_yt[__sp_h][0];
        if (__sp_f >= __sp_yn[2])
            break;
        ulong16 __sp_geom = __sp_yg;
        __sp_geom.sd = __sp_yt[__sp_h][1];
        __sp_geom.se = __sp_yt[__sp_h][2];
        __sp_geom.sf = __sp_yt[__sp_h][3];
        const uint __sp_c = min(__sp_yn[2] - __sp_f, __sp_chunk);
        for (uint __sp_k = 0u; __sp_k < __sp_c; __sp_k++) {
        if (__sp_k > 0u && ++__sp_geom.sd == (ulong)__sp_yn[0]) {
            __sp_geom.sd = 0ul;
            if (++__sp_geom.se == (ulong)__sp_yn[1]) {
                __sp_geom.se = 0ul;
                __sp_geom.sf++;
            }
        }
@BODY@
@NEXT@        }
    }
}
";

/// The entry of [`EntryForm::Flat`], for CPU devices: one virtual group for each group of
/// the launch, no loop. Item (0,0,0) reads the yield word and takes one ticket; one
/// barrier shares the virtual group's id; a group with no ticket (asked to stop, or past
/// the end) returns at once. The host launches as many groups as virtual groups are
/// left (at most [`FLAT_RUN_GROUPS`]), so an unasked run takes exactly one ticket each.
///
/// PoCL 3.1 (its work-item loops) ran the persistent form's loop around a barrier about
/// 1.3-1.5 times slower than the application's kernel (a 2-D kernel of 4,096 groups: 24-29
/// ms against 18-20, with or without the chunk's inner loop), and this form at least as
/// fast (6-7 ms for that kernel, whose plain form PoCL runs slowly). Groups that find the
/// word set return in about 12 ns each.
pub(crate) const ENTRY_FLAT: &str = "
/* SoftPreempt: the entry of kernel `@NAME@` (a yielding launch, one virtual group a group). */
@HEAD@__sp_y_@NAME@(@PARAMS@ulong16 __sp_yg, __global uint* __sp_yc)@POST@{
@HOISTED@
    __local uint __sp_yt[4];
    if (get_local_id(0) == 0 && get_local_id(1) == 0 && get_local_id(2) == 0) {
        const uint __sp_nx = (uint)__sp_num_groups_H(__sp_yg, 0u);
        const uint __sp_ny = (uint)__sp_num_groups_H(__sp_yg, 1u);
        const uint __sp_n = __sp_nx * __sp_ny * (uint)__sp_num_groups_H(__sp_yg, 2u);
        const uint __sp_w = *(volatile __global uint*)(__sp_yc + @WORD@);
        const uint __sp_f = (int)(__sp_w - (uint)__sp_yg.sa) >= 0 ? 0xffffffffu : atomic_add(__sp_yc + @TICKET@, 1u) - (uint)__sp_yg.sb;
        __sp_yt[0] = __sp_f < __sp_n ? 1u : 0u;
        if (__sp_f < __sp_n) {
            __sp_yt[1] = __sp_f % __sp_nx;
            __sp_yt[2] = __sp_f / __sp_nx % __sp_ny;
            __sp_yt[3] = __sp_f / (__sp_nx * __sp_ny);
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (__sp_yt[0] != 0u && get_local_id(0) < get_local_size(0)) {
    ulong16 __sp_geom = __sp_yg;
    __sp_geom.sd = __sp_yt[1];
    __sp_geom.se = __sp_yt[2];
    __sp_geom.sf = __sp_yt[3];
@BODY@
@NEXT@    }
}
";

/// The most groups one run of a [`EntryForm::Flat`] entry is launched with: the groups
/// of a run that is asked to stop each still start and return (about 12 ns each on PoCL,
/// so under 1 ms here), and a launch of more groups runs as several runs.
pub const FLAT_RUN_GROUPS: u64 = 1 << 16;

/// How many groups the next run of a [`EntryForm::Flat`] entry is launched with, when
/// `done` of the launch's `total` virtual groups have been handed out (0: none left).
pub fn flat_run_groups(total: u64, done: u64) -> u64 {
    total.saturating_sub(done).min(FLAT_RUN_GROUPS)
}

/// How [`ENTRY_FLAT`] runs the body: once, under this condition, unless the body has
/// barriers (then no `return`), where it runs as [`FLAT_ROUNDS`] (see
/// `Yielder::definition`).
///
/// The second test is always true; it is there for PoCL's kernel compiler. A kernel with
/// a barrier (here the entry's own, for the ticket) gets PoCL's implicit loop barriers:
/// each innermost loop that its uniformity analysis finds all work-items running the same
/// number of times is interchanged with the work-item loop, and every value live in it
/// goes to a per-item context array. The application's kernel, with no barrier, never
/// gets them, so a body without barriers ran 4-5 times slower as the entry than as itself
/// (a 2-D kernel with a 32-round loop: 36 ms against 7.3 ms, 288 scatter and 98 gather
/// instructions against none; `docs/results/v32/pocl/flat/`). A condition that reads
/// the local id is not uniform to that analysis, so the body's loops keep their shape:
/// 7.5 ms, the same instructions as the kernel's. It costs one compare per item.
pub(crate) const FLAT_ONCE: &str = "if (__sp_yt[0] != 0u && get_local_id(0) < get_local_size(0)) {";
/// The condition of a body without barriers in the [`YieldKernel::alt_entry`]: uniform to
/// PoCL, so that its implicit loop barriers may interchange the body's loops with the
/// work-item loop. That is what made `groups_2d` 5 times slower (see [`FLAT_ONCE`]), and
/// what made a 1-D kernel whose items each run a long chain of FMAs (the preemption
/// benchmark's compute LP) about 7 times faster than the application's kernel, its items
/// then vectorised across: with only the form of [`FLAT_ONCE`], that LP's groups ran as
/// long as the kernel's, and the HP's p99 next to it rose from 1.2 to 3.3 ms on PoCL.
pub(crate) const FLAT_UNIFORM: &str = "if (__sp_yt[0] != 0u) {";
/// The prefix of [`YieldKernel::alt_entry`] names.
pub const ALT_ENTRY_PREFIX: &str = "__sp_yu_";
/// The body's zero or one rounds.
pub(crate) const FLAT_ROUNDS: &str = "for (uint __sp_go = 0u; __sp_go < __sp_yt[0]; ++__sp_go) {";

/// Keywords that start a statement which may hold other statements.
const COMPOUND: &[&str] = &[
    "if", "else", "for", "while", "do", "switch", "case", "default",
];

/// What `return` becomes in the copy of a body, and the label it jumps to.
const NEXT: &str = "goto __sp_next";
const NEXT_LABEL: &str = "        __sp_next: ;\n";

/// The prefix of entry kernels' names.
pub const ENTRY_PREFIX: &str = "__sp_y_";

/// See [`super::yielding`]: the program, or why no kernel could be rewritten.
pub(super) fn yielding_unguarded(
    analysis: &Analysis,
    form: EntryForm,
) -> Result<YieldProgram, Vec<(String, String)>> {
    let all = |why: String| -> Vec<(String, String)> {
        analysis
            .kernels
            .iter()
            .map(|k| (k.name.clone(), why.clone()))
            .collect()
    };
    if let Some(why) = &analysis.conservative {
        return Err(all(format!("program source not understood: {why}")));
    }
    let Some(model) = analysis.model.as_ref() else {
        return Err(all("program source not analysed".into()));
    };
    let Some((r, edits)) = plan(model, YIELDING, "y") else {
        return Err(all(
            "the program uses a geometry builtin, or a function that reads one, in a way \
             the rewrite cannot follow"
                .into(),
        ));
    };
    // The entries' own code must read as written: no macro may rename what it uses.
    let keys = [
        "HEAD", "PARAMS", "POST", "HOISTED", "BODY", "NEXT", "WORD", "TICKET", "NAME",
    ];
    let blank: Vec<(&str, &str)> = keys.iter().map(|k| (*k, "")).collect();
    let ours = super::lex::lex(&format!(
        "{DEFINITIONS}{}{}",
        fill(ENTRY, &blank),
        fill(ENTRY_FLAT, &blank)
    ))
    .toks;
    let renamed = ours
        .iter()
        .find(|t| t.kind == Kind::Ident && model.unit.macros.iter().any(|m| m.name == t.text));
    if let Some(t) = renamed {
        return Err(all(format!(
            "the program defines a macro `{}`, a name the entry kernels use",
            t.text
        )));
    }
    let y = Yielder::new(model, &r, &edits, form);
    let mut tail = String::from(super::rewrite::PSABI);
    tail += &DEFINITIONS.replace("_H(", &format!("_{}(", r.suffix));
    let (mut kernels, mut skipped) = (Vec::new(), Vec::new());
    for k in &analysis.kernels {
        match y.entry(k) {
            Ok((text, kernel)) => {
                tail += &text;
                kernels.push(kernel);
            }
            Err(why) => skipped.push((k.name.clone(), why)),
        }
    }
    if kernels.is_empty() {
        return Err(skipped);
    }
    let Some(out) = r.finish(edits, &tail) else {
        return Err(all("the rewrite's edits overlap".into()));
    };
    Ok(YieldProgram {
        source: out.source,
        headers: out.headers,
        kernels,
        skipped,
        form,
    })
}

struct Yielder<'a> {
    model: &'a Model,
    unit: &'a Unit,
    r: &'a Rewriter<'a>,
    edits: &'a [Edit],
    /// Macros that may expand to `return`.
    returning: HashSet<&'a str>,
    /// Macros that may expand to `local`/`__local`.
    local: HashSet<&'a str>,
    /// Macros that may expand to `reqd_work_group_size`.
    reqd: HashSet<&'a str>,
    form: EntryForm,
}

impl<'a> Yielder<'a> {
    fn new(model: &'a Model, r: &'a Rewriter<'a>, edits: &'a [Edit], form: EntryForm) -> Self {
        let unit = &model.unit;
        Yielder {
            model,
            unit,
            r,
            edits,
            returning: macros_reaching(unit, &["return"]),
            local: macros_reaching(unit, &["local", "__local"]),
            reqd: macros_reaching(unit, &["reqd_work_group_size", "__reqd_work_group_size__"]),
            form,
        }
    }

    fn tok(&self, i: usize) -> &Tok {
        self.unit.tok(self.unit.code[i])
    }

    fn line(&self, i: usize) -> usize {
        let r = self.unit.code[i];
        self.unit.files[r.file as usize].line_of(self.unit.tok(r).start)
    }

    /// The entry of kernel `k`, or why it has none.
    fn entry(&self, k: &KernelInfo) -> Result<(String, YieldKernel), String> {
        if let Some(why) = &k.unsure {
            return Err(format!("kernel {why}"));
        }
        let defs: Vec<&Func> = (self.model.parsed.funcs.iter())
            .filter(|f| f.name == k.name && f.body.is_some())
            .collect();
        // Several definitions are fine in distinct branches of conditional groups: each
        // gets its entry, under its conditions, and the build keeps one.
        let conds: Vec<u32> = defs
            .iter()
            .map(|f| self.unit.conds[f.header.start])
            .collect();
        let distinct = conds.iter().collect::<HashSet<_>>().len() == conds.len();
        if defs.len() > 1 && (!distinct || conds.contains(&0)) {
            return Err("kernel is defined more than once".into());
        }
        let mut text = String::new();
        // A second entry only where every definition has one (each under its conditions).
        let mut alt_text = Some(String::new());
        let mut shape = None;
        for f in defs {
            let (t, alt, args, reqd) = self.definition(k, f)?;
            if shape
                .replace((args, reqd))
                .is_some_and(|s| s != (args, reqd))
            {
                return Err(
                    "kernel's definitions differ in parameters or reqd_work_group_size".into(),
                );
            }
            text += &t;
            alt_text = alt_text.zip(alt).map(|(a, b)| a + &b);
        }
        let alt_entry = alt_text.map(|alt| {
            text += &alt;
            format!("{ALT_ENTRY_PREFIX}{}", k.name)
        });
        let Some((args, mut reqd_local)) = shape else {
            return Err("kernel has no definition".into());
        };
        // A prototype may carry the attribute that the definition leaves out.
        for f in (self.model.parsed.funcs.iter()).filter(|f| f.name == k.name && f.body.is_none()) {
            match (self.reqd(f)?, reqd_local) {
                (Some(p), None) => reqd_local = Some(p),
                (Some(p), Some(d)) if p != d => {
                    return Err("kernel's declarations differ in reqd_work_group_size".into())
                }
                _ => {}
            }
        }
        Ok((
            text,
            YieldKernel {
                name: k.name.clone(),
                entry: format!("{ENTRY_PREFIX}{}", k.name),
                alt_entry,
                args,
                reqd_local,
                work_group_dependent: k.work_group_dependent,
            },
        ))
    }

    /// The `#if` that puts an entry under the conditions of the groups around code token
    /// `first` (whose conditions are number `id`), or nothing outside groups. The
    /// conditions are evaluated again past the last line: none may read a macro that is
    /// defined or `#undef`'d after its group opens (an include guard, say).
    fn conditions(&self, id: u32, first: usize) -> Result<String, String> {
        let stack = self
            .unit
            .cond_stacks
            .get(id as usize)
            .map_or(&[][..], |s| s);
        for c in stack {
            for name in &c.names {
                let later = self
                    .unit
                    .macros
                    .iter()
                    .any(|m| m.name == *name && m.seq > c.seq);
                if later || self.unit.undefs.contains(name) {
                    return Err(format!(
                        "kernel is inside an #if (around line {}) whose condition reads `{name}`, \
                         which is defined or #undef'd after it",
                        self.line(first)
                    ));
                }
            }
        }
        Ok(match stack {
            [] => String::new(),
            _ => {
                let all: Vec<&str> = stack.iter().map(|c| c.text.as_str()).collect();
                format!("\n#if {}", all.join(" && "))
            }
        })
    }

    /// The entry of one definition `f` of kernel `k` (with its `#if`, if any), its
    /// parameter count and its `reqd_work_group_size`.
    fn definition(
        &self,
        k: &KernelInfo,
        f: &Func,
    ) -> Result<(String, Option<String>, u32, Option<[usize; 3]>), String> {
        let body = f.body.clone().unwrap_or_default();
        let (first, open, close) = (f.header.start, body.start - 1, body.end);
        let file = self.unit.code[first].file;
        if self.unit.code[first..=close].iter().any(|r| r.file != file) {
            return Err("kernel spans more than one file".into());
        }
        // Groups inside the body are copied with it, and their conditions evaluated again.
        let id = self.unit.conds[first];
        let stacks = &self.unit.cond_stacks;
        let outer = &stacks[id as usize];
        let mut inner: HashSet<u32> = HashSet::new();
        for &c in &self.unit.conds[first..=close] {
            if !stacks[c as usize].starts_with(outer) {
                return Err("kernel spans branches of a conditional group".into());
            }
            if c != id && inner.insert(c) {
                self.conditions(c, first)?;
            }
        }
        let wrap = self.conditions(id, first)?;
        let args = self
            .r
            .param_count(f)
            .ok_or("kernel's parameters are hidden by a macro or a conditional group")?;
        self.check_macros(first..close + 1)?;
        let toks = &self.unit.code[body.clone()];
        let returns = self.returns(toks)?;
        self.check_uniform(toks, &returns, body.start)?;
        let hoisted = self.hoisted(toks, body.start)?;
        let reqd_local = self.reqd(f)?;

        let text = &self.unit.files[file as usize].text;
        let span = |a: usize, b: usize| -> Range<usize> { self.tok(a).start..self.tok(b).end };
        let raw = |r: Range<usize>| text.get(r).unwrap_or("").to_string();
        let mut copy_edits: Vec<Edit> = self.edits.to_vec();
        // The flat form runs one virtual group a kernel execution, so its `return`s stay:
        // leaving the kernel is leaving the group (and PoCL 3.1 runs a jump out of a loop
        // below barriers in a branch wrongly, `docs/design.md`).
        let jumps: &[usize] = match self.form {
            EntryForm::Persistent => &returns,
            EntryForm::Flat => &[],
        };
        for &at in jumps {
            let t = self.tok(body.start + at);
            copy_edits.push(Edit {
                file,
                start: t.start,
                end: t.end,
                text: NEXT.into(),
            });
        }
        let mut hoisted_text = String::new();
        for s in &hoisted {
            let range = span(body.start + s.start, body.start + s.end - 1);
            let decl = apply_in(text, file, self.edits, range.clone())
                .ok_or("a __local declaration could not be copied")?;
            hoisted_text += &format!("    {decl}\n");
            copy_edits.push(Edit {
                file,
                start: range.start,
                end: range.end,
                text: String::new(),
            });
        }
        let copy = apply_in(text, file, &copy_edits, span(open, close))
            .ok_or("the kernel's body could not be copied")?;
        let params = if args == 0 {
            String::new()
        } else {
            format!("{}, ", raw(self.tok(f.open).end..self.tok(f.close).start))
        };
        let head = raw(self.tok(first).start..self.tok(f.name_at).start);
        let post = raw(self.tok(f.close).end..self.tok(open).start);
        let next = if jumps.is_empty() { "" } else { NEXT_LABEL };
        // PoCL 3.1 mishandled the barriers of OpenCV's `calculate_histogram` under the flat
        // entry's `if` (a condition loaded from `__local` memory, which it cannot prove
        // uniform) and corrupted its own heap, on bare PoCL too; as a loop of zero or one
        // rounds it ran correctly. A body with barriers has no `return` here: the flat form
        // refuses one (`Yielder::check_uniform`, `docs/compatibility.md`, 2026-11-29).
        let barriers = mentions(self.unit, toks)
            .any(|m| !m.member && matches!(m.name, "barrier" | "work_group_barrier"));
        let template = match self.form {
            EntryForm::Persistent => ENTRY.to_string(),
            EntryForm::Flat if barriers => ENTRY_FLAT.replace(FLAT_ONCE, FLAT_ROUNDS),
            EntryForm::Flat => ENTRY_FLAT.to_string(),
        };
        let alt = (self.form == EntryForm::Flat && !barriers).then(|| {
            ENTRY_FLAT.replace(FLAT_ONCE, FLAT_UNIFORM).replace(
                &format!("{ENTRY_PREFIX}@NAME@("),
                &format!("{ALT_ENTRY_PREFIX}@NAME@("),
            )
        });
        let fill_entry = |template: &str| {
            let template = template.replace("_H(", &format!("_{}(", self.r.suffix));
            let entry = fill(
                &template,
                &[
                    ("HEAD", &head),
                    ("PARAMS", &params),
                    ("POST", &post),
                    ("HOISTED", hoisted_text.trim_end_matches('\n')),
                    ("BODY", &copy),
                    ("NEXT", next),
                    ("WORD", &YIELD_WORD.to_string()),
                    ("TICKET", &TICKET.to_string()),
                    ("NAME", &k.name),
                ],
            );
            match wrap.as_str() {
                "" => entry,
                _ => format!("{wrap}{entry}#endif\n"),
            }
        };
        Ok((
            fill_entry(&template),
            alt.as_deref().map(fill_entry),
            args,
            reqd_local,
        ))
    }

    /// The kernel's text (code tokens `span`) is copied past the last line, where every
    /// macro has its last definition: it may use none that is `#undef`'d, or defined at or
    /// after the kernel, directly or through other macros.
    fn check_macros(&self, span: Range<usize>) -> Result<(), String> {
        let unit = self.unit;
        let mut seen: HashSet<&str> = HashSet::new();
        let mut work: Vec<&str> = mentions(unit, &unit.code[span.clone()])
            .map(|m| m.name)
            .collect();
        while let Some(name) = work.pop() {
            if !seen.insert(name) {
                continue;
            }
            // Its value is the copy's line, not the kernel's, and NVIDIA ignores `#line`
            // (the CTS's kernel_preprocessor_macros checks it).
            if name == "__LINE__" {
                return Err(
                    "uses `__LINE__`, which the copy past the last line would change".into(),
                );
            }
            if unit.undefs.iter().any(|u| u == name) {
                return Err(format!("uses macro `{name}`, which is #undef'd"));
            }
            for m in unit.macros.iter().filter(|m| m.name == name) {
                if m.at > span.start && m.file != unit.options_file() {
                    return Err(format!(
                        "uses `{name}`, which a macro defined at or after the kernel names"
                    ));
                }
                work.extend(mentions(unit, &m.body).map(|x| x.name));
            }
        }
        Ok(())
    }

    /// The positions (in `toks`, a body) of its `return` statements; an error for a
    /// return with a value or one inside a macro.
    fn returns(&self, toks: &[TokRef]) -> Result<Vec<usize>, String> {
        let mut out = Vec::new();
        for m in mentions(self.unit, toks) {
            if m.member {
                continue;
            }
            if self.returning.contains(m.name) {
                return Err(format!(
                    "uses macro `{}`, which may return from the kernel",
                    m.name
                ));
            }
            if m.name == "return" {
                if toks.get(m.at + 1).map(|&r| self.unit.text(r)) != Some(";") {
                    return Err("a `return` with a value".into());
                }
                out.push(m.at);
            }
        }
        Ok(out)
    }

    /// Whether `name` (mentioned in a kernel body) may reach a barrier or another call that
    /// every item of the group must reach together.
    fn syncs(&self, name: &str) -> bool {
        is_sync(name)
            || self.model.funcs.get(name).is_some_and(|f| f.sync)
            || self.model.macros.get(name).is_some_and(|f| f.sync)
    }

    /// Refuses a kernel whose `return` may be followed by a barrier (or a work-group
    /// function) in the same execution: after it or in a loop around it. `base` is the
    /// index of `toks[0]` in the unit's code.
    fn check_uniform(&self, toks: &[TokRef], returns: &[usize], base: usize) -> Result<(), String> {
        let loops = self.loops(toks);
        // PoCL 3.1 ran the flat entry of a kernel with a `return` inside a loop wrongly (a
        // loop after the entry's barrier; items of a group returned early, in the generated
        // cases, with or without barriers in the body, whether the return stayed, became a
        // jump to the end, or the body went inside a branch). The persistent entry of the
        // same kernels is right.
        if self.form == EntryForm::Flat {
            if let Some(&r) = returns
                .iter()
                .find(|&&r| loops.iter().any(|l| l.contains(&r)))
            {
                return Err(format!(
                    "the `return` on line {} leaves a loop (PoCL 3.1 runs that wrongly in a \
                     flat entry)",
                    self.line(base + r)
                ));
            }
        }
        let syncs: Vec<usize> = mentions(self.unit, toks)
            .filter(|m| !m.member && self.syncs(m.name))
            .map(|m| m.at)
            .collect();
        let (Some(&first_return), Some(&last_sync)) = (returns.first(), syncs.last()) else {
            return Ok(());
        };
        // No flat entry that PoCL 3.1 runs right was found for a body with both: under the
        // entry's `if`, OpenCV's `calculate_histogram` with a `return` after its last
        // barrier corrupted PoCL's heap (so did the kernel without it, which now runs as
        // zero or one rounds, `FLAT_ROUNDS`); in those rounds, a `return` that stayed or
        // became a `break` left whole groups unwritten, and one that jumped to the end of
        // the round made PoCL's compiler abort the process on a generated kernel with a
        // `return` in a `switch` ("Could not find a dominating alternative variable";
        // `docs/compatibility.md`, 2026-11-29). Such a kernel is sliced on a CPU device.
        if self.form == EntryForm::Flat {
            return Err(format!(
                "the `return` on line {} is in a body with a barrier or a work-group \
                 function (PoCL 3.1 runs that wrongly in a flat entry)",
                self.line(base + first_return)
            ));
        }
        let refuse = |at: usize| {
            Err(format!(
                "the `return` on line {} may be followed by a barrier or a work-group function \
                 (not every item would reach it)",
                self.line(base + at)
            ))
        };
        if last_sync > first_return {
            return refuse(first_return);
        }
        for &r in returns {
            let around = |l: &Range<usize>| l.contains(&r) && syncs.iter().any(|s| l.contains(s));
            if loops.iter().any(around) {
                return refuse(r);
            }
        }
        // PoCL 3.1 runs the entry wrongly where a `return` leaves a loop from inside a block
        // that also holds a barrier (a jump out of two levels of loops, in a region of
        // barriers; docs/design.md has the reproduction without any rewrite).
        for &r in returns
            .iter()
            .filter(|&&r| loops.iter().any(|l| l.contains(&r)))
        {
            let block_with_sync = (0..r).filter(|&o| self.unit.text(toks[o]) == "{").any(|o| {
                matching(self.unit, toks, o)
                    .is_some_and(|c| c > r && syncs.iter().any(|&s| o < s && s < c))
            });
            if block_with_sync {
                return Err(format!(
                    "the `return` on line {} leaves a loop inside a block with a barrier \
                     (PoCL 3.1 runs that wrongly in a persistent group)",
                    self.line(base + r)
                ));
            }
        }
        Ok(())
    }

    /// The extents (in `toks`) of the loops of a body, over-approximated: a loop without
    /// braces runs to the end of the block around it, and a `goto` may loop over the whole
    /// body.
    fn loops(&self, toks: &[TokRef]) -> Vec<Range<usize>> {
        let text = |i: usize| toks.get(i).map_or("", |&r| self.unit.text(r));
        let mut blocks: Vec<usize> = Vec::new();
        let mut out = Vec::new();
        for i in 0..toks.len() {
            let block_end = || {
                blocks
                    .last()
                    .and_then(|&o| matching(self.unit, toks, o))
                    .unwrap_or(toks.len())
            };
            match text(i) {
                "{" => blocks.push(i),
                "}" => {
                    blocks.pop();
                }
                "goto" => out.push(0..toks.len()),
                "for" | "while" | "do" => {
                    let mut j = i + 1;
                    if text(j) == "(" {
                        j = matching(self.unit, toks, j).map_or(toks.len(), |c| c + 1);
                    }
                    let end = match text(j) {
                        "{" => matching(self.unit, toks, j).map_or(toks.len(), |c| c + 1),
                        // A simple statement ends at its `;`.
                        t if !COMPOUND.contains(&t) => {
                            self.statement_end(toks, j).unwrap_or_else(block_end)
                        }
                        _ => block_end(),
                    };
                    out.push(i..end);
                }
                _ => {}
            }
        }
        out
    }

    /// The end (after its `;`) of the simple statement starting at `toks[j]`.
    fn statement_end(&self, toks: &[TokRef], mut j: usize) -> Option<usize> {
        while j < toks.len() {
            match self.unit.text(toks[j]) {
                "(" | "[" => j = matching(self.unit, toks, j)? + 1,
                "{" | "}" => return None,
                ";" => return Some(j + 1),
                _ => j += 1,
            }
        }
        None
    }

    /// The `__local` declarations at the body's top level (statements that mention
    /// `local` outside brackets, without an initialiser): they move to kernel scope, in
    /// their order. As ranges of `toks` (a body whose first token is code index `base`),
    /// each ending after its `;`.
    fn hoisted(&self, toks: &[TokRef], base: usize) -> Result<Vec<Range<usize>>, String> {
        let text = |i: usize| self.unit.text(toks[i]);
        let mut out = Vec::new();
        let mut start = 0;
        let mut i = 0;
        while i < toks.len() {
            match text(i) {
                "(" | "[" => i = matching(self.unit, toks, i).unwrap_or(toks.len()) + 1,
                "{" => {
                    i = matching(self.unit, toks, i).unwrap_or(toks.len()) + 1;
                    start = i;
                }
                ";" => {
                    if self.is_local_decl(toks, start..i) {
                        if self.unit.conds[base + start] != self.unit.conds[base - 1] {
                            return Err(format!(
                                "the __local declaration on line {} is inside an #if",
                                self.line(base + start)
                            ));
                        }
                        self.check_hoistable(toks, start..i, base)?;
                        out.push(start..i + 1);
                    }
                    i += 1;
                    start = i;
                }
                _ => i += 1,
            }
        }
        Ok(out)
    }

    /// Whether statement `s` of `toks` declares `__local` variables.
    fn is_local_decl(&self, toks: &[TokRef], s: Range<usize>) -> bool {
        const STATEMENTS: &[&str] = &[
            "if", "else", "for", "while", "do", "switch", "case", "default", "return", "goto",
            "break", "continue",
        ];
        let stmt = &toks[s];
        let Some(&first) = stmt.first() else {
            return false;
        };
        if STATEMENTS.contains(&self.unit.text(first))
            || stmt.iter().any(|&r| self.unit.text(r) == "=")
        {
            return false;
        }
        let mut depth = 0;
        stmt.iter().any(|&r| {
            let t = self.unit.text(r);
            match t {
                "(" | "[" => depth += 1,
                ")" | "]" => depth -= 1,
                _ => {}
            }
            depth == 0 && (t == "local" || t == "__local" || self.local.contains(t))
        })
    }

    /// A hoisted declaration moves before everything else in the body: it may not name
    /// anything (a type, a constant, a shadowed global) that the body mentions before it.
    fn check_hoistable(&self, toks: &[TokRef], s: Range<usize>, base: usize) -> Result<(), String> {
        let before: HashSet<&str> = mentions(self.unit, &toks[..s.start])
            .map(|m| m.name)
            .collect();
        for m in mentions(self.unit, &toks[s.clone()]) {
            let macro_name = self.unit.macros.iter().any(|d| d.name == m.name);
            if before.contains(m.name) && !macro_name && !is_type_word(m.name) {
                return Err(format!(
                    "the __local declaration on line {} names `{}`, which the kernel uses before it",
                    self.line(base + s.start),
                    m.name
                ));
            }
        }
        Ok(())
    }

    /// The value of an integer literal, or of an object-like macro whose every definition
    /// is the same one integer literal (`#define WG 64`).
    fn integer(&self, text: &str) -> Option<usize> {
        let literal = |t: &str| {
            t.trim_end_matches(['u', 'U', 'l', 'L'])
                .parse::<usize>()
                .ok()
        };
        if let Some(v) = literal(text) {
            return Some(v);
        }
        let mut defs = self
            .unit
            .macros
            .iter()
            .filter(|d| d.name == text)
            .peekable();
        defs.peek()?;
        let mut value = None;
        for d in defs {
            let v = match (&d.params, d.body.as_slice()) {
                (None, [t]) => literal(self.unit.text(*t))?,
                _ => return None,
            };
            if value.replace(v).is_some_and(|w| w != v) {
                return None;
            }
        }
        value
    }

    /// The kernel's `reqd_work_group_size`, if it has one.
    fn reqd(&self, f: &Func) -> Result<Option<[usize; 3]>, String> {
        let toks = &self.unit.code[f.header.clone()];
        let text = |i: usize| toks.get(i).map_or("", |&r| self.unit.text(r));
        for m in mentions(self.unit, toks) {
            let size_macro = self
                .unit
                .macros
                .iter()
                .any(|d| d.name == m.name && self.integer(m.name).is_some());
            if self.reqd.contains(m.name) && !size_macro {
                return Err(format!(
                    "reqd_work_group_size comes through macro `{}`",
                    m.name
                ));
            }
            if !matches!(m.name, "reqd_work_group_size" | "__reqd_work_group_size__") {
                continue;
            }
            let mut size = [0usize; 3];
            let shape = [
                (m.at + 1, "("),
                (m.at + 3, ","),
                (m.at + 5, ","),
                (m.at + 7, ")"),
            ];
            let literal = |i: usize| self.integer(text(i));
            for (d, v) in size.iter_mut().enumerate() {
                *v = literal(m.at + 2 + 2 * d).unwrap_or(0);
            }
            if shape.iter().any(|(i, p)| text(*i) != *p) || size.contains(&0) {
                return Err(
                    "reqd_work_group_size is not three decimal integers (or macros for them)"
                        .into(),
                );
            }
            return Ok(Some(size));
        }
        Ok(None)
    }
}

/// `template` with each `@KEY@` replaced by its value, in one pass (the values are the
/// application's text, which is not searched for keys).
fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(at) = rest.find('@') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let hit = values
            .iter()
            .find(|(k, _)| after.starts_with(k) && after[k.len()..].starts_with('@'));
        match hit {
            Some((k, v)) => {
                out.push_str(v);
                rest = &after[k.len() + 1..];
            }
            None => {
                out.push('@');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The macros whose bodies (through other macros too) mention one of `names`.
fn macros_reaching<'a>(unit: &'a Unit, names: &[&str]) -> HashSet<&'a str> {
    let mut out: HashSet<&str> = HashSet::new();
    let mut changed = true;
    while changed {
        changed = false;
        for m in &unit.macros {
            if out.contains(m.name.as_str()) {
                continue;
            }
            let params = m.params.as_deref().unwrap_or(&[]);
            let hit = mentions(unit, &m.body).any(|x| {
                !params.iter().any(|p| p == x.name)
                    && (names.contains(&x.name) || out.contains(x.name))
            });
            if hit {
                out.insert(&m.name);
                changed = true;
            }
        }
    }
    out
}

/// Type names and qualifiers: a hoisted declaration may share these with earlier code.
fn is_type_word(name: &str) -> bool {
    const WORDS: &[&str] = &[
        "bool",
        "void",
        "size_t",
        "ptrdiff_t",
        "intptr_t",
        "uintptr_t",
        "signed",
        "unsigned",
        "const",
        "volatile",
        "restrict",
        "struct",
        "union",
        "enum",
        "local",
        "__local",
        "__attribute__",
        "__attribute",
        "aligned",
        "__aligned__",
    ];
    const SCALARS: &[&str] = &[
        "char", "uchar", "short", "ushort", "int", "uint", "long", "ulong", "half", "float",
        "double",
    ];
    let base = name.trim_end_matches(|c: char| c.is_ascii_digit());
    let vector = matches!(&name[base.len()..], "" | "2" | "3" | "4" | "8" | "16");
    WORDS.contains(&name) || (vector && SCALARS.contains(&base))
}
