//! What each function and macro reads, closed over calls and macro uses.
//!
//! Functions and macros are the nodes of one graph; an identifier that a function's
//! declaration or body mentions (or a macro's body, its parameters aside) is an edge to
//! every function and macro of that name. Macros are not expanded: a macro is read as
//! everything its bodies (all of them, whichever `#if` branch defined them) mention, so a
//! use of a macro counts as a use of every builtin it may produce. Token pasting (`##`)
//! produces names that cannot be read off the body, so such a macro is not followed.

use std::collections::HashMap;

use super::builtins::{
    geometry_bit, is_kernel_keyword, is_opaque, is_sync, is_work_group_dependent, SLICING,
};
use super::lex::Kind;
use super::parse::{parse, Parsed};
use super::pp::{TokRef, Unit};
use super::{Geometry, KernelInfo};

/// What a node reads, itself or through the nodes it mentions.
#[derive(Clone, Default, PartialEq, Eq, Debug)]
pub struct Features {
    /// Bits of the builtins of [`super::builtins::YIELDING`] it reads.
    pub geometry: u8,
    pub work_group: bool,
    /// It reaches a barrier or another call every item of a group must reach together.
    pub sync: bool,
    /// A macro that may produce `kernel`.
    kernel_keyword: bool,
    /// A macro that may produce `{`, `}` or `;`, so a use outside a function body could
    /// declare a function the parser does not see.
    structural: bool,
    /// A macro whose brackets do not balance: the parser's view of the code is unreliable.
    unbalanced: bool,
    /// Why the node's reads are not fully known.
    pub unsure: Option<String>,
}

impl Features {
    /// Adds `o` to `self`; whether anything changed.
    fn absorb(&mut self, o: &Features) -> bool {
        let before = self.clone();
        self.geometry |= o.geometry;
        self.work_group |= o.work_group;
        self.sync |= o.sync;
        self.kernel_keyword |= o.kernel_keyword;
        self.structural |= o.structural;
        self.unbalanced |= o.unbalanced;
        if self.unsure.is_none() {
            self.unsure.clone_from(&o.unsure);
        }
        *self != before
    }

    /// The features of one mentioned name, itself (not what it resolves to).
    fn of_name(name: &str) -> Features {
        Features {
            geometry: geometry_bit(name).unwrap_or(0),
            work_group: is_work_group_dependent(name),
            sync: is_sync(name),
            kernel_keyword: is_kernel_keyword(name),
            unsure: is_opaque(name).then(|| format!("uses `{name}`")),
            ..Features::default()
        }
    }
}

/// An identifier in a token list.
pub struct Mention<'a> {
    /// Index into the list.
    pub at: usize,
    pub name: &'a str,
    /// After `.` or `->`: a struct member or vector component, never a function or
    /// builtin (but a macro still expands there).
    pub member: bool,
}

/// The identifiers of `toks`.
pub fn mentions<'a>(unit: &'a Unit, toks: &'a [TokRef]) -> impl Iterator<Item = Mention<'a>> {
    toks.iter().enumerate().filter_map(move |(at, &r)| {
        let t = unit.tok(r);
        (t.kind == Kind::Ident).then(|| Mention {
            at,
            name: &t.text,
            member: at > 0 && matches!(unit.text(toks[at - 1]), "." | "->"),
        })
    })
}

/// The parsed program and the closed features of every name, kept for the rewrite.
pub struct Model {
    pub unit: Unit,
    pub parsed: Parsed,
    /// Closed features of each function (all its declarations together).
    pub funcs: HashMap<String, Features>,
    /// Closed features of each macro (all its definitions together).
    pub macros: HashMap<String, Features>,
    pub kernels: Vec<KernelInfo>,
    pub problem: Option<String>,
}

/// Graph building: one node per distinct name of a function or macro.
#[derive(Default)]
struct Graph {
    nodes: Vec<Features>,
    /// Names each node mentions, and whether in member position (then only macros count).
    edges: Vec<Vec<(String, bool)>>,
    func_node: HashMap<String, usize>,
    macro_node: HashMap<String, usize>,
}

impl Graph {
    fn node(&mut self, is_macro: bool, name: &str) -> usize {
        let map = if is_macro {
            &mut self.macro_node
        } else {
            &mut self.func_node
        };
        if let Some(&n) = map.get(name) {
            return n;
        }
        map.insert(name.to_string(), self.nodes.len());
        self.nodes.push(Features::default());
        self.edges.push(Vec::new());
        self.nodes.len() - 1
    }

    /// Records what `toks` mention (skipping the positions `skip` names) for node `n`.
    fn mention_all(
        &mut self,
        unit: &Unit,
        n: usize,
        toks: &[TokRef],
        skip: impl Fn(usize, &str) -> bool,
    ) {
        for m in mentions(unit, toks) {
            if skip(m.at, m.name) {
                continue;
            }
            if !m.member {
                self.nodes[n].absorb(&Features::of_name(m.name));
            }
            self.edges[n].push((m.name.to_string(), m.member));
        }
    }

    /// Resolves every edge and propagates features until nothing changes.
    fn close(&mut self, defined: &HashMap<String, bool>) {
        let resolved: Vec<Vec<usize>> = self
            .edges
            .iter()
            .map(|names| {
                let mut targets: Vec<usize> = names
                    .iter()
                    .flat_map(|(n, member)| {
                        let func = if *member { None } else { self.func_node.get(n) };
                        [func, self.macro_node.get(n)]
                    })
                    .flatten()
                    .copied()
                    .collect();
                targets.sort_unstable();
                targets.dedup();
                targets
            })
            .collect();
        // A call to a function this program only declares could read anything: its
        // definition comes from another compilation unit (clLinkProgram).
        for (name, &n) in &self.func_node {
            if !defined.get(name).copied().unwrap_or(false) {
                self.nodes[n].unsure = Some(format!(
                    "calls `{name}`, which this program declares but does not define"
                ));
            }
        }
        let mut changed = true;
        while changed {
            changed = false;
            for (n, targets) in resolved.iter().enumerate() {
                for &t in targets {
                    if t != n {
                        let f = self.nodes[t].clone();
                        changed |= self.nodes[n].absorb(&f);
                    }
                }
            }
        }
    }
}

/// Features of a macro body itself: its brackets and whether it pastes tokens.
fn macro_shape(unit: &Unit, name: &str, body: &[TokRef]) -> Features {
    let mut f = Features::default();
    let mut depth = 0i64;
    for &r in body {
        match unit.text(r) {
            "{" | "}" | ";" => f.structural = true,
            "##" => f.unsure = Some(format!("uses macro `{name}`, which pastes tokens (##)")),
            _ => {}
        }
        match unit.text(r) {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => depth -= 1,
            _ => {}
        }
        f.unbalanced |= depth < 0;
    }
    f.unbalanced |= depth != 0;
    f
}

pub fn model(unit: Unit) -> Model {
    let parsed = parse(&unit);
    let mut g = Graph::default();
    let mut defined: HashMap<String, bool> = HashMap::new();
    for f in &parsed.funcs {
        let n = g.node(false, &f.name);
        *defined.entry(f.name.clone()).or_default() |= f.body.is_some();
        let name_at = f.name_at;
        g.mention_all(&unit, n, &unit.code[f.header.clone()], |at, _| {
            at + f.header.start == name_at
        });
        if let Some(body) = &f.body {
            g.mention_all(&unit, n, &unit.code[body.clone()], |_, _| false);
        }
    }
    for m in &unit.macros {
        let n = g.node(true, &m.name);
        let shape = macro_shape(&unit, &m.name, &m.body);
        g.nodes[n].absorb(&shape);
        let params = m.params.as_deref().unwrap_or(&[]);
        g.mention_all(&unit, n, &m.body, |_, name| {
            params.iter().any(|p| p == name)
        });
    }
    g.close(&defined);

    let feats = |map: &HashMap<String, usize>| -> HashMap<String, Features> {
        map.iter()
            .map(|(k, &n)| (k.clone(), g.nodes[n].clone()))
            .collect()
    };
    let funcs = feats(&g.func_node);
    let macros = feats(&g.macro_node);
    let problem = unit
        .problem
        .clone()
        .or_else(|| parsed.problem.clone())
        .or_else(|| structure_problem(&unit, &parsed, &macros));
    let kernels = kernels(&unit, &parsed, &funcs, &macros);
    Model {
        unit,
        parsed,
        funcs,
        macros,
        kernels,
        problem,
    }
}

/// Macros that could hide the program's structure from the parser: unbalanced ones
/// anywhere, and ones that produce braces or `;` outside function bodies.
fn structure_problem(
    unit: &Unit,
    parsed: &Parsed,
    macros: &HashMap<String, Features>,
) -> Option<String> {
    let mut outside = vec![false; unit.code.len()];
    for span in parsed.funcs.iter().map(|f| &f.header).chain(&parsed.other) {
        outside[span.clone()].fill(true);
    }
    for m in mentions(unit, &unit.code) {
        let Some(f) = macros.get(m.name) else {
            continue;
        };
        if f.unbalanced {
            return Some(format!("macro `{}` has unbalanced brackets", m.name));
        }
        if f.structural && outside[m.at] {
            return Some(format!("macro `{}` may declare functions", m.name));
        }
    }
    None
}

/// The kernels (defined functions declared `kernel`, directly or through a macro).
fn kernels(
    unit: &Unit,
    parsed: &Parsed,
    funcs: &HashMap<String, Features>,
    macros: &HashMap<String, Features>,
) -> Vec<KernelInfo> {
    let is_kernel = |f: &super::parse::Func| {
        mentions(unit, &unit.code[f.header.clone()]).any(|m| {
            is_kernel_keyword(m.name) || macros.get(m.name).is_some_and(|x| x.kernel_keyword)
        })
    };
    let mut out: Vec<KernelInfo> = Vec::new();
    for f in &parsed.funcs {
        if !is_kernel(f) || out.iter().any(|k| k.name == f.name) {
            continue;
        }
        if !parsed
            .funcs
            .iter()
            .any(|d| d.name == f.name && d.body.is_some())
        {
            continue;
        }
        let Some(feat) = funcs.get(&f.name) else {
            continue;
        };
        out.push(KernelInfo {
            name: f.name.clone(),
            geometry: Geometry(feat.geometry & SLICING),
            work_group_dependent: feat.work_group,
            unsure: feat.unsure.clone(),
        });
    }
    out
}
