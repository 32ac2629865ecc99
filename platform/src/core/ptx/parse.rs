//! Just enough of PTX's syntax for the analysis: the module's functions and their
//! instructions (guard, opcode, operands), with comments removed.

/// One function (`.entry` kernel or `.func`) with a body.
pub struct Function {
    pub name: String,
    pub entry: bool,
    /// It declares `.shared` memory of its own.
    pub shared: bool,
    pub body: Vec<Instr>,
}

/// One instruction.
pub struct Instr {
    /// With its type suffixes, e.g. `mad.lo.s32`.
    pub opcode: String,
    /// As written, except that an address (`[%rd1+8]`) is reduced to its base register
    /// and a sign (`-%r1`, `!%p1`) is dropped. A vector (`{%r1, %r2}`) stays one operand.
    pub operands: Vec<String>,
    /// For `call`: the function called directly (`None`: through a register).
    pub callee: Option<String>,
    /// Why the instruction could not be read, if it could not.
    pub unknown: Option<String>,
}

impl Instr {
    /// Whether the first operand is written (not read) by the instruction.
    pub fn writes_first(&self) -> bool {
        let op = self.opcode.split('.').next().unwrap_or("");
        !matches!(
            op,
            "st" | "bra"
                | "brx"
                | "ret"
                | "exit"
                | "bar"
                | "barrier"
                | "membar"
                | "fence"
                | "call"
                | "prefetch"
                | "prefetchu"
                | "trap"
                | "brkpt"
                | "pmevent"
                | "red"
                | "cp"
                | "stmatrix"
        )
    }

    /// The registers an operand names (the members of a vector, or itself).
    pub fn names(operand: &str) -> impl Iterator<Item = &str> {
        operand
            .trim_start_matches('{')
            .trim_end_matches('}')
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
    }
}

/// The module: its functions with bodies, and whether it declares `.shared` variables at
/// module scope (which any function may use).
pub struct Module {
    pub functions: Vec<Function>,
    pub shared_globals: bool,
}

/// The text without `//` and `/* */` comments (string literals do not occur in PTX
/// outside `.file` directives, whose paths hold no comment markers in practice).
pub fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('/') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(t) = tail.strip_prefix("//") {
            rest = t.find('\n').map_or("", |n| &t[n..]);
        } else if let Some(t) = tail.strip_prefix("/*") {
            out.push(' ');
            rest = t.find("*/").map_or("", |n| &t[n + 2..]);
        } else {
            out.push('/');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    out
}

pub fn module(text: &str) -> Module {
    let text = strip_comments(text);
    let mut functions = Vec::new();
    let mut shared_globals = false;
    let mut header = String::new();
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            ';' => {
                // A declaration or module-scope variable.
                shared_globals |= header.split_whitespace().any(|w| w == ".shared");
                header.clear();
            }
            '{' => {
                // A body: up to the matching brace.
                let mut depth = 1;
                let start = i + 1;
                let mut end = text.len();
                for (j, d) in chars.by_ref() {
                    match d {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = j;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                if let Some(f) = function(&header, &text[start..end]) {
                    functions.push(f);
                } else {
                    // An initializer (`.global .u32 t[2] = {1, 2};`) or something else.
                    shared_globals |= header.split_whitespace().any(|w| w == ".shared");
                }
                header.clear();
            }
            c => header.push(c),
        }
    }
    Module {
        functions,
        shared_globals,
    }
}

/// The function whose header (directives before the body) is `header`, if it is one.
fn function(header: &str, body: &str) -> Option<Function> {
    let words: Vec<&str> = header.split_whitespace().collect();
    let at = words.iter().position(|w| *w == ".entry" || *w == ".func")?;
    let entry = words[at] == ".entry";
    // After `.func` may come the return parameters in parentheses.
    let after = header.split_once(words[at])?.1.trim_start();
    let after = match after.strip_prefix('(') {
        Some(r) => r.split_once(')')?.1.trim_start(),
        None => after,
    };
    let name: String = after
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || "_$%.".contains(*c))
        .collect();
    if name.is_empty() {
        return None;
    }
    let mut shared = false;
    let mut instrs = Vec::new();
    for stmt in body.split(';') {
        let s = strip_labels(stmt);
        if s.is_empty() {
            continue;
        }
        if s.starts_with('.') || s.contains(".callprototype") {
            shared |= s.split_whitespace().next() == Some(".shared");
            continue;
        }
        instrs.push(instruction(s));
    }
    Some(Function {
        name,
        entry,
        shared,
        body: instrs,
    })
}

/// A statement without its leading labels (`$L__BB0_2:`) and scope braces.
fn strip_labels(stmt: &str) -> &str {
    let mut s = stmt.trim();
    loop {
        let t = s.trim_start_matches(['{', '}']).trim_start();
        let label_end = t
            .find(':')
            .filter(|&i| {
                !t[..i].is_empty()
                    && t[..i]
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "_$".contains(c))
            })
            .map(|i| i + 1);
        match label_end {
            Some(i) => s = t[i..].trim_start(),
            None => return t,
        }
    }
}

fn instruction(s: &str) -> Instr {
    // A guard predicate: `@%p1 bra L;` or `@!%p1 ...`.
    let s = match s.strip_prefix('@') {
        Some(r) => r.split_once(char::is_whitespace).map_or("", |x| x.1).trim(),
        None => s,
    };
    let (opcode, rest) = s
        .split_once(char::is_whitespace)
        .map_or((s, ""), |(o, r)| (o, r.trim()));
    let (parts, balanced) = split_top(rest);
    let operands: Vec<String> = parts.iter().map(|p| normalise(p)).collect();
    let callee = if opcode.starts_with("call") {
        parts
            .iter()
            .map(|p| p.trim())
            .find(|p| !p.starts_with('('))
            .filter(|p| !p.starts_with('%'))
            .map(str::to_string)
    } else {
        None
    };
    Instr {
        opcode: opcode.to_string(),
        operands,
        callee,
        unknown: (!balanced).then(|| format!("unreadable instruction '{s}'")),
    }
}

/// Splits operands at top-level commas; `false` when the brackets do not balance.
fn split_top(s: &str) -> (Vec<&str>, bool) {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
        if depth < 0 {
            return (out, false);
        }
    }
    if !s[start..].trim().is_empty() {
        out.push(s[start..].trim());
    }
    (out, depth == 0)
}

/// An operand as the analysis compares it: an address's base register, without a sign.
fn normalise(op: &str) -> String {
    let op = op.trim();
    let op = match op.strip_prefix('[').and_then(|o| o.strip_suffix(']')) {
        Some(inner) => inner.split('+').next().unwrap_or("").trim(),
        None => op,
    };
    op.trim_start_matches(['-', '!']).to_string()
}
