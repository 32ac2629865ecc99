//! A light preprocessor: it follows `#include`s of the program's own headers, records
//! `#define`s, drops `#if 0` groups, and yields the code tokens in order — without
//! expanding macros. Conditional groups other than `#if 0` are all kept ("all branches
//! live"): the analysis then over-approximates what a kernel may read, whatever the build
//! options select. That is only sound if every branch is balanced (a branch may not open a
//! brace another one closes), which is checked here.

use super::lex::{lex, Kind, Tok};

/// A token of one of the unit's files.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash, PartialOrd, Ord)]
pub struct TokRef {
    pub file: u32,
    pub idx: u32,
}

pub struct File {
    /// The include name (empty for the main source).
    pub name: String,
    pub text: String,
    pub toks: Vec<Tok>,
    /// What the lexer could not follow.
    problem: Option<String>,
    /// Byte offset of each line's start, for line numbers in messages.
    line_starts: Vec<usize>,
}

/// One `#define` (a name may have several, in different branches: all are kept).
pub struct Macro {
    pub name: String,
    /// `Some` for a function-like macro.
    pub params: Option<Vec<String>>,
    pub body: Vec<TokRef>,
    /// The file of the `#define`.
    pub file: u32,
    /// How many code tokens came before it: a use before that point is not of this body.
    pub at: usize,
    /// How many directives came before it (see [`Cond::seq`]).
    pub seq: usize,
}

/// The condition under which the current branch of one open conditional group is compiled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cond {
    /// A preprocessor expression: the branch's condition, with the negations of those of
    /// the branches before it.
    pub text: String,
    /// The identifiers in it (`defined` aside).
    pub names: Vec<String>,
    /// How many directives came before the group's `#if`.
    pub seq: usize,
}

pub struct Unit {
    pub files: Vec<File>,
    pub macros: Vec<Macro>,
    /// The code tokens, in the order the compiler sees them (includes inlined).
    pub code: Vec<TokRef>,
    /// For each code token, how many conditional directives came before it: tokens with
    /// the same number are present or absent together, whatever the build defines.
    pub regions: Vec<u32>,
    /// For each code token, the conditional groups around it: an index into
    /// [`Unit::cond_stacks`] (0: none).
    pub conds: Vec<u32>,
    /// Stacks of the conditions of open groups, outermost first.
    pub cond_stacks: Vec<Vec<Cond>>,
    /// Directives read so far.
    seq: usize,
    /// The names given to `#undef` (which the analysis otherwise ignores).
    pub undefs: Vec<String>,
    /// Why the unit cannot be analysed with confidence.
    pub problem: Option<String>,
}

/// Index of the main source in [`Unit::files`]; the headers follow, and the pseudo-file
/// holding the build options' `-D` definitions comes last.
pub const MAIN: u32 = 0;

/// Limits that keep hostile input from taking time or memory without bound.
const MAX_INCLUDE_DEPTH: usize = 64;
const MAX_CODE_TOKENS: usize = 8 << 20;

/// One open `#if` group.
struct Group {
    /// The current branch is dropped (`#if 0`, `#elif 0`).
    skipped: bool,
    /// Bracket depths at the start of the current branch, and the lowest seen since.
    start: [i64; 2],
    low: [i64; 2],
    line: usize,
    /// The conditions of the branches before the current one, and the current one's.
    prior: Vec<String>,
    current: String,
    /// The identifiers of all its directives so far.
    names: Vec<String>,
    /// Directives read before its `#if`.
    seq: usize,
}

impl Unit {
    pub fn tok(&self, r: TokRef) -> &Tok {
        &self.files[r.file as usize].toks[r.idx as usize]
    }

    pub fn text(&self, r: TokRef) -> &str {
        &self.tok(r).text
    }

    /// The pseudo-file of the build options' `-D` definitions.
    pub fn options_file(&self) -> u32 {
        self.files.len() as u32 - 1
    }

    /// Reads `source`, the `headers` it may include, and the `-D` definitions in `defines`
    /// (a text of `#define` lines, see [`super::options`]).
    pub fn read(source: &str, headers: &[(String, String)], defines: &str) -> Unit {
        let mut files = vec![File::new("", source)];
        files.extend(headers.iter().map(|(n, t)| File::new(n, t)));
        files.push(File::new("<build options>", defines));
        let mut unit = Unit {
            files,
            macros: Vec::new(),
            code: Vec::new(),
            regions: Vec::new(),
            conds: Vec::new(),
            cond_stacks: vec![Vec::new()],
            seq: 0,
            undefs: Vec::new(),
            problem: None,
        };
        for f in &unit.files {
            if let Some(p) = &f.problem {
                let p = match f.name.as_str() {
                    "" => p.clone(),
                    name => format!("{p} in \"{name}\""),
                };
                unit.problem.get_or_insert(p);
            }
        }
        let mut st = State {
            depth: [0, 0],
            stack: vec![],
            groups: vec![],
            region: 0,
            cond: 0,
        };
        unit.feed(unit.options_file(), &mut st);
        unit.feed(MAIN, &mut st);
        if st.depth != [0, 0] && unit.problem.is_none() {
            unit.problem = Some("unbalanced brackets".into());
        }
        unit
    }

    fn fail(&mut self, why: String) {
        self.problem.get_or_insert(why);
    }

    /// Processes one file's tokens, inlining the includes it names.
    fn feed(&mut self, file: u32, st: &mut State) {
        if st.stack.len() > MAX_INCLUDE_DEPTH {
            return self.fail("includes nest too deeply".into());
        }
        st.stack.push(file);
        // Conditionals must close in the file that opens them.
        let base = st.groups.len();
        let n = self.files[file as usize].toks.len();
        let mut i = 0;
        while i < n && self.problem.is_none() {
            let t = &self.files[file as usize].toks[i];
            if t.kind == Kind::Newline {
                i += 1;
                continue;
            }
            if t.bol && t.is("#") {
                let end = (i..n)
                    .find(|&j| self.files[file as usize].toks[j].kind == Kind::Newline)
                    .unwrap_or(n);
                self.directive(file, i + 1, end, base, st);
                i = end;
                continue;
            }
            if !st.skipping() {
                if t.kind == Kind::Bad {
                    let line = self.files[file as usize].line_of(t.start);
                    self.fail(format!("an unterminated literal on line {line}"));
                }
                st.push_code(
                    self,
                    TokRef {
                        file,
                        idx: i as u32,
                    },
                );
            }
            i += 1;
        }
        if let Some(g) = st.groups.get(base) {
            let line = g.line;
            self.fail(format!("an unterminated #if on line {line}"));
        }
        st.groups.truncate(base);
        st.stack.pop();
    }

    /// Handles the directive whose tokens (after `#`) are `a..b` of `file`, whose own
    /// conditionals are the groups from `base` on.
    fn directive(&mut self, file: u32, a: usize, b: usize, base: usize, st: &mut State) {
        let f = &self.files[file as usize];
        let toks = &f.toks[a..b];
        let Some(name) = toks.first().map(|t| t.text.clone()) else {
            return; // The null directive.
        };
        let line = toks.first().map_or(0, |t| f.line_of(t.start));
        let skipping = st.skipping();
        // `#if 0` and `#elif 0` are the only conditions evaluated; the rest are kept live.
        let is_zero = toks.len() == 2 && toks[1].is("0");
        self.seq += 1;
        let (cond, cond_names) = condition(&name, &toks[1..]);
        if matches!(
            name.as_str(),
            "if" | "ifdef" | "ifndef" | "elif" | "else" | "elifdef" | "elifndef" | "endif"
        ) {
            st.region += 1;
        }
        match name.as_str() {
            "if" | "ifdef" | "ifndef" => {
                st.groups.push(Group {
                    skipped: skipping || (name == "if" && is_zero),
                    start: st.depth,
                    low: st.depth,
                    line,
                    prior: Vec::new(),
                    current: cond,
                    names: cond_names,
                    seq: self.seq,
                });
                self.conditions_changed(st);
            }
            "elif" | "else" | "elifdef" | "elifndef" => {
                let outer = st.groups.len().saturating_sub(1);
                let outer_skipped = st.groups[..outer].iter().any(|g| g.skipped);
                let depth = st.depth;
                let Some(g) = st.groups.get_mut(base..).and_then(|g| g.last_mut()) else {
                    return self.fail(format!("#{name} without #if on line {line}"));
                };
                if !g.skipped && !g.balanced(depth) {
                    return self.fail(format!("a branch ending on line {line} is unbalanced"));
                }
                g.skipped = outer_skipped || (name == "elif" && is_zero);
                g.start = depth;
                g.low = depth;
                let before = std::mem::replace(&mut g.current, cond);
                g.prior.push(before);
                g.names.extend(cond_names);
                self.conditions_changed(st);
            }
            "endif" if st.groups.len() <= base => {
                self.fail(format!("#endif without #if on line {line}"))
            }
            "endif" => {
                match st.groups.pop() {
                    Some(g) if !g.skipped && !g.balanced(st.depth) => {
                        self.fail(format!("a branch ending on line {line} is unbalanced"))
                    }
                    _ => {}
                }
                self.conditions_changed(st);
            }
            _ if skipping => {}
            "include" => self.include(file, a + 1, b, line, st),
            // Other ways to pull in text that the program's headers do not hold.
            "include_next" | "import" | "embed" => self.fail(format!("#{name} on line {line}")),
            "define" => self.define(file, a + 1, b, line),
            // #undef is otherwise ignored: a name keeps every body it ever had (an
            // over-approximation). It is recorded for the yielding rewrite, which copies
            // kernel bodies past the last line, where an #undef'd name means something else.
            "undef" => {
                if let Some(t) = toks.get(1) {
                    let name = t.text.clone();
                    self.undefs.push(name);
                }
            }
            // #pragma, #line, #error, #warning do not change what the code reads.
            _ => {}
        }
    }

    /// Records the conditions of the groups now open, for the code tokens that follow.
    fn conditions_changed(&mut self, st: &mut State) {
        let stack: Vec<Cond> = st
            .groups
            .iter()
            .map(|g| {
                let mut parts: Vec<String> = g.prior.iter().map(|p| format!("!({p})")).collect();
                parts.push(format!("({})", g.current));
                Cond {
                    text: parts.join(" && "),
                    names: g.names.clone(),
                    seq: g.seq,
                }
            })
            .collect();
        st.cond = if stack.is_empty() {
            0
        } else {
            self.cond_stacks.push(stack);
            self.cond_stacks.len() as u32 - 1
        };
    }

    fn include(&mut self, file: u32, a: usize, b: usize, line: usize, st: &mut State) {
        let toks = &self.files[file as usize].toks[a..b];
        let target = match toks.first() {
            Some(t) if t.kind == Kind::Str => t.text.trim_matches('"').to_string(),
            Some(t) if t.is("<") => toks[1..]
                .iter()
                .take_while(|t| !t.is(">"))
                .map(|t| t.text.as_str())
                .collect(),
            _ => return self.fail(format!("a computed #include on line {line}")),
        };
        let headers = 1..self.options_file();
        match headers
            .into_iter()
            .find(|&h| self.files[h as usize].name == target)
        {
            // A header including itself is cut short: a real build would either stop it with
            // an include guard (which the all-branches-live reading ignores) or fail.
            Some(h) if st.stack.contains(&h) => {}
            Some(h) => self.feed(h, st),
            None => self.fail(format!(
                "includes \"{target}\" (line {line}), which is not among the program's headers"
            )),
        }
    }

    fn define(&mut self, file: u32, a: usize, b: usize, line: usize) {
        let f = &self.files[file as usize];
        let toks = &f.toks;
        let Some(name) = toks.get(a).filter(|t| t.kind == Kind::Ident && a < b) else {
            return self.fail(format!("a malformed #define on line {line}"));
        };
        // A `(` right after the name, with no space between, makes it function-like.
        let function_like = a + 1 < b
            && toks[a + 1].is("(")
            && f.text
                .get(name.end..toks[a + 1].start)
                .is_some_and(|gap| gap.bytes().all(|c| matches!(c, b'\\' | b'\r' | b'\n')));
        let mut body_start = a + 1;
        let params = if function_like {
            let close = (a + 2..b).find(|&j| toks[j].is(")"));
            let Some(close) = close else {
                return self.fail(format!("a malformed #define on line {line}"));
            };
            body_start = close + 1;
            Some(
                toks[a + 2..close]
                    .iter()
                    .filter(|t| !t.is(","))
                    .map(|t| {
                        if t.is("...") {
                            "__VA_ARGS__".to_string()
                        } else {
                            t.text.clone()
                        }
                    })
                    .collect(),
            )
        } else {
            None
        };
        let body = (body_start..b)
            .map(|idx| TokRef {
                file,
                idx: idx as u32,
            })
            .collect();
        self.macros.push(Macro {
            name: name.text.clone(),
            params,
            body,
            file,
            at: self.code.len(),
            seq: self.seq,
        });
    }
}

impl File {
    fn new(name: &str, text: &str) -> File {
        let lexed = lex(text);
        File {
            name: name.to_string(),
            text: text.to_string(),
            toks: lexed.toks,
            problem: lexed.problem,
            line_starts: std::iter::once(0)
                .chain(text.match_indices('\n').map(|(i, _)| i + 1))
                .collect(),
        }
    }

    /// 1-based line of a byte offset.
    pub fn line_of(&self, offset: usize) -> usize {
        self.line_starts.partition_point(|&s| s <= offset)
    }
}

struct State {
    /// Brace and paren/bracket depth of the code so far.
    depth: [i64; 2],
    /// Files being read (include recursion guard).
    stack: Vec<u32>,
    /// The open `#if` groups, of every file being read.
    groups: Vec<Group>,
    /// Conditional directives seen so far.
    region: u32,
    /// The conditions around the code that follows (see [`Unit::conds`]).
    cond: u32,
}

impl State {
    fn skipping(&self) -> bool {
        self.groups.iter().any(|g| g.skipped)
    }

    fn push_code(&mut self, unit: &mut Unit, r: TokRef) {
        if unit.code.len() >= MAX_CODE_TOKENS {
            return unit.fail("the program is too large to analyse".into());
        }
        let t = unit.tok(r);
        let (k, d) = match t.text.as_str() {
            "{" => (0, 1),
            "}" => (0, -1),
            "(" | "[" => (1, 1),
            ")" | "]" => (1, -1),
            _ => (0, 0),
        };
        self.depth[k] += d;
        // Only the innermost group needs to know: an inner branch that dips below its
        // start fails its own check, and one that does not cannot lower the outer's low.
        if let Some(g) = self.groups.last_mut() {
            g.low[k] = g.low[k].min(self.depth[k]);
        }
        unit.code.push(r);
        unit.regions.push(self.region);
        unit.conds.push(self.cond);
    }
}

impl Group {
    fn balanced(&self, depth: [i64; 2]) -> bool {
        self.start == depth && self.low == self.start
    }
}

/// The condition a conditional directive named `name` states, as a preprocessor
/// expression, and the identifiers in it.
fn condition(name: &str, toks: &[Tok]) -> (String, Vec<String>) {
    let names = toks
        .iter()
        .filter(|t| t.kind == Kind::Ident && !t.is("defined"))
        .map(|t| t.text.clone())
        .collect();
    let first = toks.first().map_or("", |t| t.text.as_str());
    let text = match name {
        "ifdef" | "elifdef" => format!("defined({first})"),
        "ifndef" | "elifndef" => format!("!defined({first})"),
        "else" => "1".to_string(),
        _ => toks
            .iter()
            .map(|t| t.text.as_str())
            .collect::<Vec<_>>()
            .join(" "),
    };
    (text, names)
}
