//! Which kernels of a PTX module may be sliced (rule 5, for foreign NVIDIA binaries).
//!
//! NVIDIA's OpenCL program binaries are PTX text. A slice is launched with a global work
//! offset, and NVIDIA's OpenCL runtime passes that offset to the kernel in the
//! driver-set environment registers `%envreg3..5` (x, y, z); `%ctaid` (the block index)
//! then counts from 0 inside the slice. So `get_global_id(d)`, which the compiler lowers
//! to `%ctaid.d * %ntid.d + %envreg(3+d) + %tid.d` (a `mad.lo` of the block index and
//! size with the offset, then the thread index added, or the same sum in another order),
//! reads the right value in a slice; any other read of `%ctaid` (`get_group_id`), of
//! `%nctaid` (`get_num_groups`), or of an environment register on its own (the global
//! offset, `%envreg3..5`; the group offset `%envreg0..2`; the group count `%envreg6..8`,
//! from which `get_global_size` is made; or one whose meaning is not known) would not.
//!
//! [`analyse`] follows each special register through `mov` and `cvt` copies, accepts
//! exactly the `get_global_id` shapes above, and blocks every other use (arithmetic,
//! comparisons, stores, call arguments). Calls are followed into the module's own
//! functions; a call to a function defined elsewhere, or through a pointer, blocks the
//! caller. Thread indices and sizes (`%tid`, `%ntid`) outside `get_global_id`, barriers
//! and shared memory make a kernel work-group dependent (sliced only with the local
//! size the application chose, or one pinned for every slice). Whatever the input, the
//! answer errs on the safe side: text that is not understood blocks the kernel.
//!
//! Pure functions over text; no OpenCL.

use std::collections::HashMap;

mod parse;
#[cfg(test)]
mod tests;

use parse::{Function, Instr};

/// What the analysis says of one kernel (`.entry`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kernel {
    pub name: String,
    /// Why it may not be sliced, if it may not.
    pub blocker: Option<String>,
    /// Its results may depend on the work-group size.
    pub work_group_dependent: bool,
}

/// The kernels of one PTX module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Analysis {
    pub kernels: Vec<Kernel>,
}

impl Analysis {
    pub fn kernel(&self, name: &str) -> Option<&Kernel> {
        self.kernels.iter().find(|k| k.name == name)
    }

    /// The kernels of several modules (one per device): a kernel is blocked, or work-group
    /// dependent, if it is in any of them.
    pub fn merged(all: &[Analysis]) -> Analysis {
        let mut out: Vec<Kernel> = Vec::new();
        for k in all.iter().flat_map(|a| &a.kernels) {
            match out.iter_mut().find(|o| o.name == k.name) {
                Some(o) => {
                    o.blocker = o.blocker.take().or_else(|| k.blocker.clone());
                    o.work_group_dependent |= k.work_group_dependent;
                }
                None => out.push(k.clone()),
            }
        }
        Analysis { kernels: out }
    }
}

/// Whether `bytes` look like a PTX module (text with a `.version` and a `.target`
/// directive), as NVIDIA's OpenCL program binaries are.
pub fn is_ptx(bytes: &[u8]) -> bool {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    let Ok(text) = std::str::from_utf8(&bytes[..end]) else {
        return false;
    };
    let mut cut = text.len().min(4096);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let head: String = parse::strip_comments(&text[..cut]);
    let mut words = head.split_whitespace();
    words.clone().any(|w| w == ".version") && words.any(|w| w == ".target")
}

/// Analyses a PTX module; `None` if it is not PTX text.
pub fn analyse(bytes: &[u8]) -> Option<Analysis> {
    if !is_ptx(bytes) {
        return None;
    }
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    let text = std::str::from_utf8(&bytes[..end]).ok()?;
    let run = || analyse_text(text);
    Some(std::panic::catch_unwind(run).unwrap_or_else(|_| Analysis {
        kernels: Vec::new(),
    }))
}

fn analyse_text(text: &str) -> Analysis {
    let module = parse::module(text);
    // What each function reads on its own, then closed over calls.
    let own: HashMap<&str, Reads> = module
        .functions
        .iter()
        .map(|f| (f.name.as_str(), reads(f, module.shared_globals)))
        .collect();
    let kernels = module
        .functions
        .iter()
        .filter(|f| f.entry)
        .map(|f| {
            let r = closed(&f.name, &own, &mut Vec::new());
            Kernel {
                name: f.name.clone(),
                blocker: r.blocker,
                work_group_dependent: r.work_group_dependent,
            }
        })
        .collect();
    Analysis { kernels }
}

/// What one function reads, as far as slicing is concerned.
#[derive(Clone, Debug, Default)]
struct Reads {
    blocker: Option<String>,
    work_group_dependent: bool,
    calls: Vec<String>,
}

/// `f`'s reads with those of everything it calls (`stack`: the call chain, to stop at
/// recursion).
fn closed(f: &str, own: &HashMap<&str, Reads>, stack: &mut Vec<String>) -> Reads {
    let Some(r) = own.get(f) else {
        return Reads {
            blocker: Some(format!("calls {f}, which is not defined in the module")),
            ..Reads::default()
        };
    };
    let mut out = Reads {
        blocker: r.blocker.clone(),
        work_group_dependent: r.work_group_dependent,
        calls: Vec::new(),
    };
    if stack.iter().any(|s| s == f) {
        return out;
    }
    stack.push(f.to_string());
    for callee in &r.calls {
        let c = closed(callee, own, stack);
        out.blocker = out
            .blocker
            .or_else(|| c.blocker.map(|b| format!("{b} (through {callee})")));
        out.work_group_dependent |= c.work_group_dependent;
    }
    stack.pop();
    out
}

/// What a register holds, as far as the launch geometry is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Val {
    /// `%ctaid.d`: the block index.
    Ctaid(u8),
    /// `%ntid.d`: the block size.
    Ntid(u8),
    /// `%tid.d`: the thread index.
    Tid(u8),
    /// `%envregN`.
    Env(u8),
    /// `%ctaid.d * %ntid.d`.
    Product(u8),
    /// `%ctaid.d * %ntid.d + %tid.d`: still needs the offset.
    NoOffset(u8),
    /// `%tid.d + %envreg(3+d)`: still needs `%ctaid.d * %ntid.d` (NVIDIA's 64-bit
    /// lowering of `get_global_id` adds the terms in this order).
    TidOffset(u8),
    /// `%ctaid.d * %ntid.d + %envreg(3+d)`: needs only the thread index, which slicing
    /// leaves alone; as good as plain data.
    WithOffset(u8),
    /// Two of the above reach one register: any use blocks.
    Mixed,
}

/// A special register named directly as an operand.
fn special(op: &str) -> Option<Result<Val, String>> {
    let dim = |s: &str| match s {
        "x" => Some(0u8),
        "y" => Some(1),
        "z" => Some(2),
        _ => None,
    };
    let (base, d) = op.split_once('.').unwrap_or((op, ""));
    Some(Ok(match base {
        "%ctaid" => Val::Ctaid(dim(d)?),
        "%ntid" => Val::Ntid(dim(d)?),
        "%tid" => Val::Tid(dim(d)?),
        "%nctaid" | "%gridid" | "%clusterid" | "%nclusterid" | "%cluster_ctaid"
        | "%cluster_nctaid" | "%cluster_ctarank" | "%cluster_nctarank" => {
            return Some(Err(format!("reads {op}")))
        }
        b => match b.strip_prefix("%envreg").map(str::parse::<u8>) {
            Some(Ok(n)) => Val::Env(n),
            _ => return None,
        },
    }))
}

fn describe(v: Val) -> String {
    let d = |d: u8| ["x", "y", "z"][d as usize % 3];
    match v {
        Val::Ctaid(k) => format!("reads %ctaid.{} (get_group_id) beyond get_global_id", d(k)),
        Val::Ntid(_) | Val::Tid(_) => "reads the thread index or block size".into(),
        Val::Env(n @ 3..=5) => format!("reads %envreg{n} (get_global_offset) on its own"),
        Val::Env(n @ 0..=2) => format!("reads %envreg{n} (the group offset)"),
        Val::Env(n @ 6..=8) => {
            format!("reads %envreg{n} (the group count: get_num_groups, get_global_size)")
        }
        Val::Env(n) => format!("reads %envreg{n}, whose meaning is not known"),
        Val::Product(k) | Val::NoOffset(k) | Val::TidOffset(k) => format!(
            "uses %ctaid.{0} * %ntid.{0} without the global offset",
            d(k)
        ),
        Val::WithOffset(_) => "uses the global id".into(),
        Val::Mixed => "mixes launch-geometry values in one register".into(),
    }
}

/// The value of `op` (a register or special register), if it is a geometry value.
fn value_of(op: &str, regs: &HashMap<String, Val>) -> Option<Result<Val, String>> {
    special(op).or_else(|| regs.get(op).map(|v| Ok(*v)))
}

/// What `get_global_id`'s arithmetic makes of two operands of an add (either order).
fn sum(a: Val, b: Val) -> Option<Val> {
    match (a, b) {
        (Val::Product(k), Val::Env(n)) | (Val::Env(n), Val::Product(k)) if n == k + 3 => {
            Some(Val::WithOffset(k))
        }
        (Val::Product(k), Val::Tid(t)) | (Val::Tid(t), Val::Product(k)) if t == k => {
            Some(Val::NoOffset(k))
        }
        (Val::NoOffset(k), Val::Env(n)) | (Val::Env(n), Val::NoOffset(k)) if n == k + 3 => {
            Some(Val::WithOffset(k))
        }
        (Val::WithOffset(k), Val::Tid(t)) | (Val::Tid(t), Val::WithOffset(k)) if t == k => {
            Some(Val::WithOffset(k))
        }
        (Val::Tid(t), Val::Env(n)) | (Val::Env(n), Val::Tid(t)) if n == t + 3 => {
            Some(Val::TidOffset(t))
        }
        (Val::TidOffset(t), Val::Product(k)) | (Val::Product(k), Val::TidOffset(t)) if t == k => {
            Some(Val::WithOffset(k))
        }
        _ => None,
    }
}

/// The product of a block index and size of one dimension (either order).
fn product(a: Val, b: Val) -> Option<u8> {
    match (a, b) {
        (Val::Ctaid(k), Val::Ntid(n)) | (Val::Ntid(n), Val::Ctaid(k)) if k == n => Some(k),
        _ => None,
    }
}

/// What one instruction makes of its geometry operands: the value of its destination,
/// or `None` when it is not a `get_global_id` step (then every geometry operand is a use).
fn step(i: &Instr, regs: &HashMap<String, Val>) -> Option<Val> {
    let ops: Vec<Option<Val>> = i
        .operands
        .iter()
        .skip(1)
        .map(|o| value_of(o, regs).and_then(Result::ok))
        .collect();
    let op = i.opcode.split('.').next().unwrap_or("");
    let lo = i.opcode.contains(".lo") || i.opcode.contains(".wide");
    match (op, ops.as_slice()) {
        // Copies keep what they copy.
        ("mov" | "cvt" | "cvta", [Some(v)]) => Some(*v),
        ("mul", [Some(a), Some(b)]) if lo => product(*a, *b).map(Val::Product),
        ("mad", [Some(a), Some(b), Some(c)]) if lo => sum(Val::Product(product(*a, *b)?), *c),
        ("add", [Some(a), Some(b)]) => sum(*a, *b),
        _ => None,
    }
}

/// What one function reads on its own (calls are listed, not followed).
fn reads(f: &Function, shared_globals: bool) -> Reads {
    let mut out = Reads {
        work_group_dependent: shared_globals || f.shared,
        ..Reads::default()
    };
    // Register values, to a fixed point (a loop may copy a register defined further on).
    let mut regs: HashMap<String, Val> = HashMap::new();
    for _ in 0..8 {
        let mut changed = false;
        for i in &f.body {
            let Some(dst) = i.operands.first() else {
                continue;
            };
            if let Some(v) = step(i, &regs) {
                let prev = regs.get(dst).copied();
                let merged = match prev {
                    Some(p) if p != v => Val::Mixed,
                    _ => v,
                };
                changed |= prev != Some(merged);
                regs.insert(dst.clone(), merged);
            }
        }
        if !changed {
            break;
        }
    }
    for i in &f.body {
        let op = i.opcode.split('.').next().unwrap_or("");
        if matches!(op, "bar" | "barrier")
            || i.opcode.contains(".shared")
            || op.starts_with("red") && i.opcode.contains(".cta")
        {
            out.work_group_dependent = true;
        }
        if op == "call" {
            match i.callee.as_deref() {
                Some(c) => out.calls.push(c.to_string()),
                None => {
                    out.blocker
                        .get_or_insert_with(|| "calls through a function pointer".into());
                }
            }
        }
        if let Some(why) = &i.unknown {
            out.blocker.get_or_insert_with(|| why.clone());
        }
        // A step of get_global_id uses its operands as it may; every other instruction
        // that reads a geometry value is a use of it.
        if step(i, &regs).is_some() {
            continue;
        }
        let sources = if i.writes_first() {
            &i.operands[1.min(i.operands.len())..]
        } else {
            &i.operands[..]
        };
        for o in sources.iter().flat_map(|o| Instr::names(o)) {
            match value_of(o, &regs) {
                Some(Err(why)) => {
                    out.blocker.get_or_insert(why);
                }
                Some(Ok(Val::Tid(_) | Val::Ntid(_))) => out.work_group_dependent = true,
                Some(Ok(Val::WithOffset(_))) | None => {}
                Some(Ok(v)) => {
                    out.blocker.get_or_insert_with(|| describe(v));
                }
            }
        }
    }
    out
}
