//! Finds the functions (definitions and prototypes) among the code tokens of a [`Unit`].
//!
//! Only the top level is parsed: a declaration runs to a `;` or to a function body. A `{`
//! opens a body when the declaration so far names a function (`name ( ... )`, then only
//! attributes or identifiers) and has no `=`; otherwise it is a struct body or an
//! initialiser and is skipped.

use super::builtins::{is_cplusplus, is_keyword};
use super::lex::Kind;
use super::pp::{TokRef, Unit};

/// A half-open range of indices into [`Unit::code`].
pub type Span = std::ops::Range<usize>;

#[derive(Debug)]
pub struct Func {
    pub name: String,
    /// Index of the name token.
    pub name_at: usize,
    /// Indices of the parameter list's `(` and `)`.
    pub open: usize,
    pub close: usize,
    /// The declaration before the body (or before the `;` of a prototype).
    pub header: Span,
    /// Inside the braces, for a definition.
    pub body: Option<Span>,
}

pub struct Parsed {
    pub funcs: Vec<Func>,
    /// Tokens of top-level declarations that are not functions.
    pub other: Vec<Span>,
    pub problem: Option<String>,
}

/// Index (in `toks`) of the bracket closing the one at `open`.
pub fn matching(unit: &Unit, toks: &[TokRef], open: usize) -> Option<usize> {
    let mut depth = 0i64;
    for (j, &r) in toks.iter().enumerate().skip(open) {
        match unit.text(r) {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => {
                depth -= 1;
                if depth == 0 {
                    return Some(j);
                }
            }
            _ => {}
        }
    }
    None
}

pub fn parse(unit: &Unit) -> Parsed {
    let mut p = Parsed {
        funcs: Vec::new(),
        other: Vec::new(),
        problem: None,
    };
    let n = unit.code.len();
    if let Some(w) = (0..n).find(|&i| cplusplus_at(unit, i)) {
        p.problem = Some(format!("C++ for OpenCL (`{}`)", unit.text(unit.code[w])));
        return p;
    }
    let mut decl = 0;
    let mut i = 0;
    while i < n {
        match unit.text(unit.code[i]) {
            "(" | "[" => match matching(unit, &unit.code, i) {
                Some(j) => i = j + 1,
                None => return p.fail("unbalanced brackets"),
            },
            ")" | "]" | "}" => return p.fail("unbalanced brackets"),
            ";" => {
                match function_head(unit, decl, i) {
                    Some(f) => p.funcs.push(f),
                    None => p.other.push(decl..i),
                }
                i += 1;
                decl = i;
            }
            "{" => {
                let Some(close) = matching(unit, &unit.code, i) else {
                    return p.fail("unbalanced brackets");
                };
                if let Some(mut f) = function_head(unit, decl, i) {
                    f.body = Some(i + 1..close);
                    p.funcs.push(f);
                    decl = close + 1;
                }
                i = close + 1;
            }
            _ => i += 1,
        }
    }
    if decl < n {
        p.other.push(decl..n);
    }
    for f in &p.funcs {
        if unit.macros.iter().any(|m| m.name == f.name) {
            let why = format!("function `{}` is named through a macro", f.name);
            return p.fail(&why);
        }
    }
    p
}

impl Parsed {
    fn fail(mut self, why: &str) -> Parsed {
        self.problem = Some(why.to_string());
        self
    }
}

/// The C++ for OpenCL keywords, where they cannot be C identifiers.
fn cplusplus_at(unit: &Unit, i: usize) -> bool {
    let t = unit.tok(unit.code[i]);
    t.kind == Kind::Ident
        && is_cplusplus(&t.text)
        && unit.code.get(i + 1).is_some_and(|&r| {
            let next = unit.tok(r);
            next.kind == Kind::Ident || next.is("<") || next.is("{")
        })
}

/// The function that declaration `a..b` names, if it is one: the last parameter list
/// that follows an identifier, followed only by attributes or identifiers (macros that
/// expand to attributes, say), with no `=` anywhere.
fn function_head(unit: &Unit, a: usize, b: usize) -> Option<Func> {
    let text = |j: usize| unit.text(unit.code[j]);
    let mut candidate = None;
    let mut i = a;
    while i < b {
        match text(i) {
            "=" => return None,
            "(" => {
                let close = matching(unit, &unit.code[..b], i)?;
                let prev = (i > a).then(|| unit.tok(unit.code[i - 1]));
                match prev {
                    Some(t) if matches!(t.text.as_str(), "__attribute__" | "__attribute") => {}
                    Some(t) if t.kind == Kind::Ident && !is_keyword(&t.text) => {
                        candidate = Some((i - 1, i, close));
                    }
                    _ => candidate = None,
                }
                i = close + 1;
            }
            "[" | "{" => {
                candidate = None;
                i = matching(unit, &unit.code[..b], i)? + 1;
            }
            _ => {
                if candidate.is_some() && unit.tok(unit.code[i]).kind != Kind::Ident {
                    candidate = None;
                }
                i += 1;
            }
        }
    }
    let (name_at, open, close) = candidate?;
    Some(Func {
        name: text(name_at).to_string(),
        name_at,
        open,
        close,
        header: a..b,
        body: None,
    })
}
