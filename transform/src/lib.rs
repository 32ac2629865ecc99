//! Kernel source transforms: OpenCL C text in, OpenCL C text out. No FFI and no OpenCL, so
//! everything here can be fuzzed and tested alone; `softpreempt-platform` calls it when an
//! application builds a program.
//!
//! ## Analysis and the geometry rewrite, for slicing (architecture rule 5)
//!
//! A slice is a launch of its own (a sub-range of whole work-groups with a global offset),
//! so inside it `get_group_id`, `get_num_groups`, `get_global_size`, `get_global_offset`
//! and `get_global_linear_id` return the slice's values, not the application's launch's.
//! [`analyse`] finds which kernels read those builtins (directly, through helper
//! functions, or through macros), and [`rewrite`] produces a program in which they read
//! the whole launch's geometry from a hidden trailing argument ([`geometry_arg`]).
//!
//! Pure functions over text: no OpenCL calls. Whatever the input, the answer errs on the
//! safe side: a kernel the analysis cannot be sure about is reported so, and a program the
//! rewrite cannot handle gets no rewrite.
//!
//! The stages: `lex` (tokens with their byte positions), `pp` (includes, `#define`s,
//! conditional groups; no macro expansion), `parse` (the top-level functions), `analyse`
//! (what each function and macro reads, closed over calls and macro uses), `rewrite`,
//! `yielding`.
//!
//! ## The yielding rewrite (architecture, "Yielding launches")
//!
//! [`yielding`] gives a program in which each kernel `k` that can be rewritten has a
//! persistent entry kernel `__sp_y_k` ([`YieldKernel`]), placed after the application's
//! last line so that no line of the application moves. The entry takes `k`'s arguments,
//! then `ulong16` geometry ([`yield_geometry_arg`]) and `__global uint*` control words.
//!
//! **Launching it.** The host launches the entry as a grid of P persistent groups of the
//! original local size, in as many dimensions as the original launch: global size
//! `[P * local[0], local[1], local[2]]` (first `work_dim` entries), no offset needed. So
//! `get_local_id`, `get_local_size`, `get_enqueued_local_size`, `get_local_linear_id` and
//! `get_work_dim` are the real ones and right; `get_group_id`, `get_global_id`,
//! `get_num_groups`, `get_global_size`, `get_global_offset` and `get_global_linear_id`
//! answer for the virtual group of the original launch, in the kernel and in every helper
//! function it calls. A launch with a NULL local size must pin one first
//! ([`YieldKernel::work_group_dependent`] says whether the choice matters), and
//! non-uniform launches (a partial last group) are not for yielding. `P` is the device's
//! resident capacity for the kernel, or less.
//!
//! **Each persistent group** loops: item (0,0,0) reads `control[YIELD_WORD]` (volatile);
//! if `(int)(word - epoch) >= 0` the group stops. Otherwise it takes a chunk of `c`
//! virtual groups (`c` from the geometry argument, at least 1):
//! `f = atomic_add(&control[TICKET], c) - ticket_base`; `f >= total groups` stops it. One
//! barrier shares `f` and its 3-D id (worked out once, in 32 bits) through double-buffered
//! `__local` memory, and the group runs the kernel's body for virtual groups `f` to
//! `min(f + c, total) - 1` (dimension 0 fastest), where `return` means "next group". That
//! is the whole cost of a chunk: one read, one atomic, one barrier, a little arithmetic.
//! The host sizes `c` so that a chunk of short groups is worth it (a yield waits for the
//! chunk in progress).
//!
//! **The flat form, for CPU devices** ([`EntryForm::Flat`], [`yielding_form_or_why`]).
//! PoCL runs the loop around a barrier slowly, so there the entry has no loop: the host
//! launches one group for each virtual group left (at most [`FLAT_RUN_GROUPS`] a run,
//! [`flat_run_groups`]); item (0,0,0) reads the yield word and takes one ticket (`c` is 1),
//! and a group asked to stop, or past the end, returns at once. A run nobody asked takes
//! exactly one ticket a group (the launch's last run leaves the counter at `base + total`,
//! [`tickets_taken`] with `P = 0`, `c = 1`); a run that was asked is read back as below,
//! and the next run is launched with the groups left.
//!
//! **The host's protocol.**
//! - Each yielding launch of the application's launch gets an epoch; the yield word is
//!   compared with wrapping arithmetic, so stale words are harmless and the word is never
//!   cleared. To stop launch `e`, the host writes `e` into `control[YIELD_WORD]` (where
//!   the running kernel can see it: a device buffer written through a second queue on
//!   NVIDIA; memory the kernel reads in place on CPU devices, such as fine-grained SVM).
//! - The ticket counter is never reset: the host reads it once when the application's
//!   launch begins (or keeps its own count) and passes that value as `ticket_base`.
//! - **No yield requested:** nothing needs reading back. A launch that runs to the end
//!   leaves the counter at exactly `base + c * (ceil(total / c) + P)`
//!   ([`tickets_taken`]): a ticket per chunk, then one final ticket `>= total` for each
//!   persistent group. That holds for the relaunch that ends a yielded application launch
//!   too, so the next application launch's base is that either way.
//! - **After a yield request:** when the launch has completed, the host reads
//!   `control[TICKET]`. `(value - base) >= total` (wrapping) means every virtual group was
//!   handed out, and a group that takes a ticket runs its chunk to the end: the application's
//!   launch is done (and the next base is `value`). Otherwise the groups from
//!   `value - base` on have not run; the host relaunches the same grid with the same base
//!   and a new epoch, and the counter goes on from `value`.
//! - Launches that may run at the same time need control words of their own (one ticket
//!   counter per launch in flight).
//! - The counter is 32 bits and wraps; total groups must stay below `2^31` so that the
//!   differences stay unambiguous.
//!
//! **Conditional groups.** The copy of a kernel past the last line is put under the
//! conditions of the `#if` groups around the kernel (`#if (defined(A)) && !(N > 2) ...`),
//! so that the build keeps the entry exactly when it keeps the kernel, and groups inside
//! the body come with the copy. Definitions of one kernel in distinct branches each get
//! their entry.
//!
//! **What is not rewritten** (each in [`YieldProgram::skipped`] with its reason):
//! - kernels the analysis is unsure of;
//! - kernels whose copy past the last line would read otherwise: that use a macro that is
//!   `#undef`'d or defined at or after them, or sit in (or hold) an `#if` whose condition
//!   reads a macro defined or `#undef`'d after the group opens (an include guard), and
//!   every kernel of a program that defines a macro named like something the entries use
//!   (`ulong16`, `barrier`, ...);
//! - a `return` inside a macro; a `return` that a barrier or another work-group function
//!   may follow in the same execution (after it, or in a loop around it: barriers must
//!   stay uniform), or that leaves a loop from inside a block holding a barrier (PoCL 3.1
//!   runs that shape wrongly in a persistent group; see `docs/design.md`);
//! - a `__local` declaration that names something the body mentions before it, or sits
//!   inside an `#if` of the body (it is hoisted to kernel scope);
//! - a `reqd_work_group_size` that is not three integer literals (or macros for them).
//!
//! [`yielding`] never panics; a program the rewrite cannot follow at all gets `None`.

mod analyse;
mod builtins;
mod lex;
mod options;
mod parse;
mod pp;
mod rewrite;
mod yielding;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod yield_tests;

use std::fmt;

pub use builtins::GEOMETRY;
pub use rewrite::{geometry_arg, with_first_group, Rewritten, GEOMETRY_ARG_SIZE, NATIVE_GEOMETRY};

/// Bump when what the rewrites produce changes other than in their replacements'
/// definitions and the entry templates (those count in [`FINGERPRINT`] by themselves).
const REVISION: &str = "2";

/// A fingerprint of what this build's rewrites produce: programs rewritten or built by
/// another build are not this one's (the program store keys its entries with it, so a
/// layer upgraded to faster definitions does not go on loading the old ones' binaries).
pub const FINGERPRINT: u64 = fnv1a(&[
    REVISION,
    env!("CARGO_PKG_VERSION"),
    rewrite::DEFINITIONS,
    yielding::DEFINITIONS,
    yielding::ENTRY,
    yielding::ENTRY_FLAT,
]);

/// FNV-1a over the texts, each followed by a NUL (at compile time).
const fn fnv1a(texts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut t = 0;
    while t < texts.len() {
        let b = texts[t].as_bytes();
        let mut i = 0;
        while i <= b.len() {
            let byte = if i < b.len() { b[i] } else { 0 };
            h = (h ^ byte as u64).wrapping_mul(0x0000_0100_0000_01b3);
            i += 1;
        }
        t += 1;
    }
    h
}
pub use yielding::{
    flat_run_groups, tickets_taken, yield_geometry_arg, EntryForm, YieldKernel, YieldProgram,
    ENTRY_PREFIX, FLAT_RUN_GROUPS, TICKET, YIELD_WORD,
};

/// A set of [`GEOMETRY`] builtins.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct Geometry(u8);

impl Geometry {
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn contains(self, builtin: &str) -> bool {
        builtins::geometry_bit(builtin).is_some_and(|b| self.0 & b != 0)
    }

    pub fn names(self) -> impl Iterator<Item = &'static str> {
        GEOMETRY
            .iter()
            .enumerate()
            .filter(move |(i, _)| self.0 & (1 << i) != 0)
            .map(|(_, n)| *n)
    }
}

impl fmt::Debug for Geometry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.names()).finish()
    }
}

/// What one kernel reads, through everything it calls or expands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelInfo {
    pub name: String,
    /// The geometry builtins it reads: slicing it unchanged would give other results.
    pub geometry: Geometry,
    /// It reads local ids or sizes, group ids, uses barriers, work-group or sub-group
    /// functions, or local memory: its results may depend on the local size, so a launch
    /// with a NULL local size must have the same local size pinned for every slice.
    pub work_group_dependent: bool,
    /// Why what it reads is not fully known (a call to a function defined elsewhere, a
    /// macro that pastes tokens, inline assembly): such a kernel is never sliced.
    pub unsure: Option<String>,
}

/// The result of [`analyse`].
pub struct Analysis {
    pub kernels: Vec<KernelInfo>,
    /// Why the program as a whole could not be analysed with confidence (an include of an
    /// unknown header, unbalanced brackets in a conditional branch, a macro that may declare
    /// functions, ...). Then no kernel of it may be sliced.
    pub conservative: Option<String>,
    /// The parsed program, for [`rewrite`].
    model: Option<analyse::Model>,
}

impl fmt::Debug for Analysis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Analysis")
            .field("kernels", &self.kernels)
            .field("conservative", &self.conservative)
            .finish()
    }
}

impl Analysis {
    pub fn kernel(&self, name: &str) -> Option<&KernelInfo> {
        self.kernels.iter().find(|k| k.name == name)
    }

    /// Why launches of `kernel` may not be cut into slices, or `None` if they may.
    /// `rewritten`: the kernel comes from the [`rewrite`]n program and its geometry
    /// argument is set. Work-group dependence is left to the caller, since it only matters
    /// when the application leaves the local size to the vendor.
    pub fn blocker(&self, kernel: &str, rewritten: bool) -> Option<String> {
        if let Some(why) = &self.conservative {
            return Some(format!("program source not understood: {why}"));
        }
        let Some(k) = self.kernel(kernel) else {
            return Some("kernel not found in the program source".into());
        };
        if let Some(why) = &k.unsure {
            return Some(format!("kernel {why}"));
        }
        if !rewritten && !k.geometry.is_empty() {
            return Some(format!("kernel reads {:?}", k.geometry));
        }
        None
    }
}

/// Analyses a program's source; `headers` are the (include name, text) pairs given to
/// `clCompileProgram`.
pub fn analyse(source: &str, headers: &[(String, String)]) -> Analysis {
    analyse_with_options(source, headers, "")
}

/// [`analyse`], with the build options: `-D` macros may hide builtins too.
pub fn analyse_with_options(source: &str, headers: &[(String, String)], options: &str) -> Analysis {
    // Nothing here should panic (a fuzz test checks), but a panic must not fail the
    // application's build: it only means this program is not sliced.
    std::panic::catch_unwind(|| analyse_unguarded(source, headers, options)).unwrap_or_else(|_| {
        tracing::warn!("kernel source analysis failed; the program's kernels are not sliced");
        Analysis {
            kernels: Vec::new(),
            conservative: Some("analysis failed".into()),
            model: None,
        }
    })
}

fn analyse_unguarded(source: &str, headers: &[(String, String)], options: &str) -> Analysis {
    let opts = options::read(options);
    let unit = pp::Unit::read(source, headers, &opts.defines);
    let model = analyse::model(unit);
    Analysis {
        kernels: model.kernels.clone(),
        conservative: opts.problem.clone().or_else(|| model.problem.clone()),
        model: Some(model),
    }
}

/// The program rewritten so that its kernels read the whole launch's geometry from a
/// hidden trailing argument (see [`Rewritten`] and [`geometry_arg`]). `None` when that
/// cannot be done safely: the analysis was not sure of the program, or a builtin or
/// function is used in a way the rewrite cannot follow. A program that reads no geometry
/// comes back unchanged, with no kernels. The source must be a whole program (see
/// [`Rewritten::helpers`]).
pub fn rewrite(analysis: &Analysis) -> Option<Rewritten> {
    let run = std::panic::AssertUnwindSafe(|| rewrite::rewrite_unguarded(analysis));
    std::panic::catch_unwind(run).unwrap_or_else(|_| {
        tracing::warn!("kernel source rewrite failed; the program's kernels are not sliced");
        None
    })
}

/// The program rewritten for yielding launches: each kernel that can be rewritten gets a
/// persistent entry kernel (see the crate documentation for what it does and the host's
/// protocol). `None` when no kernel can be rewritten, or the program is not understood;
/// [`yielding_or_why`] says why. Never panics.
pub fn yielding(analysis: &Analysis) -> Option<YieldProgram> {
    yielding_or_why(analysis).ok()
}

/// [`yielding`], or, when no kernel can be rewritten, each kernel with the reason (to show
/// users).
pub fn yielding_or_why(analysis: &Analysis) -> Result<YieldProgram, Vec<(String, String)>> {
    yielding_form_or_why(analysis, EntryForm::Persistent)
}

/// [`yielding_or_why`] with entries of the given form ([`EntryForm`]).
pub fn yielding_form_or_why(
    analysis: &Analysis,
    form: EntryForm,
) -> Result<YieldProgram, Vec<(String, String)>> {
    let run = std::panic::AssertUnwindSafe(|| yielding::yielding_unguarded(analysis, form));
    std::panic::catch_unwind(run).unwrap_or_else(|_| {
        tracing::warn!("yielding rewrite failed; the program's kernels do not yield");
        Err(analysis
            .kernels
            .iter()
            .map(|k| (k.name.clone(), "the yielding rewrite failed".to_string()))
            .collect())
    })
}
