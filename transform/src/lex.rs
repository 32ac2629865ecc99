//! Preprocessing tokens of OpenCL C source (C99 translation phases 1–3), with the byte
//! positions a rewrite needs to edit the original text in place.
//!
//! Comments become whitespace, line splices (`\` + newline) are followed, string and
//! character literals are single tokens (so a builtin's name inside one is no use of it),
//! and the newlines that end preprocessor directives are kept as tokens.

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Ident,
    Number,
    Str,
    Char,
    Punct,
    /// A newline outside comments: it ends a directive.
    Newline,
    /// An unterminated string or character literal: the compiler would reject it, unless
    /// it sits in a group that `#if 0` skips.
    Bad,
    /// Any other byte (`\`, `@`, a stray backquote).
    Other,
}

#[derive(Clone, Debug)]
pub struct Tok {
    pub kind: Kind,
    /// Byte range in the original text, line splices inside it included.
    pub start: usize,
    pub end: usize,
    /// The spelling with line splices removed.
    pub text: String,
    /// First token on its logical line: a `#` here starts a directive.
    pub bol: bool,
    /// The spelling crosses a line splice, so it cannot be replaced in place without
    /// changing the line numbering.
    pub spliced: bool,
}

impl Tok {
    pub fn is(&self, s: &str) -> bool {
        self.text == s
    }
}

pub struct Lexed {
    pub toks: Vec<Tok>,
    /// Why the text cannot be trusted as a whole (an unterminated comment, digraphs, C++).
    pub problem: Option<String>,
}

/// Multi-character punctuators that matter to the analysis: `##` pastes, `->` selects a
/// member, `::` only exists in C++ for OpenCL, and the digraphs would hide brackets and
/// `#` from a lexer that does not know them. The others may be split into single
/// characters without changing what the analysis sees.
const PUNCTS: &[&str] = &["...", "##", "->", "::", "<:", ":>", "<%", "%>", "%:"];

/// Digraphs and `::`: sources that use them are left alone (see [`Lexed::problem`]).
const UNSUPPORTED: &[(&str, &str)] = &[
    ("<:", "digraphs"),
    (":>", "digraphs"),
    ("<%", "digraphs"),
    ("%>", "digraphs"),
    ("%:", "digraphs"),
    ("::", "C++ for OpenCL"),
];

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

/// The text with line splices removed: the bytes, and for each its offset in the original.
struct Logical {
    bytes: Vec<u8>,
    orig: Vec<usize>,
    len: usize,
}

impl Logical {
    fn new(text: &str) -> Self {
        let src = text.as_bytes();
        let mut bytes = Vec::with_capacity(src.len());
        let mut orig = Vec::with_capacity(src.len() + 1);
        let mut i = 0;
        while i < src.len() {
            if src[i] == b'\\' {
                let nl = match (src.get(i + 1), src.get(i + 2)) {
                    (Some(b'\n'), _) => 2,
                    (Some(b'\r'), Some(b'\n')) => 3,
                    _ => 0,
                };
                if nl > 0 {
                    i += nl;
                    continue;
                }
            }
            bytes.push(src[i]);
            orig.push(i);
            i += 1;
        }
        orig.push(src.len());
        Logical {
            bytes,
            orig,
            len: src.len(),
        }
    }

    fn at(&self, i: usize) -> u8 {
        self.bytes.get(i).copied().unwrap_or(0)
    }

    fn starts_with(&self, i: usize, s: &str) -> bool {
        self.bytes
            .get(i..i + s.len())
            .is_some_and(|b| b == s.as_bytes())
    }

    /// Original byte range of logical range `a..b` (non-empty).
    fn span(&self, a: usize, b: usize) -> (usize, usize) {
        let end = if b == 0 {
            0
        } else {
            (self.orig[b - 1] + 1).min(self.len)
        };
        (self.orig[a], end)
    }
}

/// Splits `text` into preprocessing tokens. Never fails: what it cannot read becomes a
/// [`Kind::Bad`] or [`Kind::Other`] token, or a [`Lexed::problem`].
pub fn lex(text: &str) -> Lexed {
    let s = Logical::new(text);
    let n = s.bytes.len();
    let mut toks = Vec::new();
    let mut problem = None;
    let mut bol = true;
    let mut i = 0;
    while i < n {
        let c = s.at(i);
        let start = i;
        let kind = match c {
            b'\n' => {
                i += 1;
                Kind::Newline
            }
            b' ' | b'\t' | b'\r' | 0x0b | 0x0c => {
                i += 1;
                continue;
            }
            b'/' if s.at(i + 1) == b'/' => {
                while i < n && s.at(i) != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'/' if s.at(i + 1) == b'*' => {
                match (i + 2..n.saturating_sub(1)).find(|&j| s.starts_with(j, "*/")) {
                    Some(j) => i = j + 2,
                    None => {
                        problem.get_or_insert_with(|| "an unterminated comment".to_string());
                        i = n;
                    }
                }
                continue;
            }
            b'"' | b'\'' => {
                i += 1;
                loop {
                    match s.at(i) {
                        _ if i >= n => break Kind::Bad,
                        b'\n' => break Kind::Bad,
                        b'\\' => i += 2,
                        q if q == c => {
                            i += 1;
                            break if c == b'"' { Kind::Str } else { Kind::Char };
                        }
                        _ => i += 1,
                    }
                }
            }
            b'0'..=b'9' => {
                i = pp_number_end(&s, i);
                Kind::Number
            }
            b'.' if s.at(i + 1).is_ascii_digit() => {
                i = pp_number_end(&s, i);
                Kind::Number
            }
            c if is_ident_byte(c) => {
                while i < n && is_ident_byte(s.at(i)) {
                    i += 1;
                }
                Kind::Ident
            }
            c if c.is_ascii_punctuation() => {
                let len = PUNCTS
                    .iter()
                    .find(|p| s.starts_with(i, p))
                    .map_or(1, |p| p.len());
                i += len;
                Kind::Punct
            }
            _ => {
                i += 1;
                Kind::Other
            }
        };
        let i_end = i.min(n);
        let (ostart, oend) = s.span(start, i_end);
        let text = String::from_utf8_lossy(&s.bytes[start..i_end]).into_owned();
        if kind == Kind::Punct {
            if let Some((_, why)) = UNSUPPORTED.iter().find(|(p, _)| *p == text) {
                problem.get_or_insert_with(|| format!("source uses {why}"));
            }
        }
        toks.push(Tok {
            kind,
            start: ostart,
            end: oend,
            spliced: oend - ostart != i_end - start,
            text,
            bol,
        });
        bol = kind == Kind::Newline;
    }
    Lexed { toks, problem }
}

/// End of a pp-number starting at `i`: digits, letters, `_`, `.`, and a sign after an
/// exponent letter (`1e-5f`, `0x1p+3`).
fn pp_number_end(s: &Logical, mut i: usize) -> usize {
    let n = s.bytes.len();
    while i < n {
        let c = s.at(i);
        let sign = matches!(c, b'+' | b'-') && matches!(s.at(i - 1), b'e' | b'E' | b'p' | b'P');
        if !(sign || c.is_ascii_alphanumeric() || c == b'_' || c == b'.') {
            break;
        }
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(src: &str) -> Vec<String> {
        lex(src)
            .toks
            .into_iter()
            .filter(|t| t.kind != Kind::Newline)
            .map(|t| t.text)
            .collect()
    }

    #[test]
    fn comments_and_literals_hide_names() {
        let t = texts("a /* get_group_id */ b // get_num_groups\n\"get_global_size\" 'x'");
        assert_eq!(t, ["a", "b", "\"get_global_size\"", "'x'"]);
    }

    #[test]
    fn splices_join_identifiers_and_keep_offsets() {
        let src = "get_gro\\\nup_id(0)";
        let l = lex(src);
        assert_eq!(l.toks[0].text, "get_group_id");
        assert!(l.toks[0].spliced);
        assert_eq!(&src[l.toks[1].start..l.toks[1].end], "(");
        assert!(!l.toks[1].spliced);
    }

    #[test]
    fn line_comment_continues_over_a_splice() {
        assert_eq!(texts("// a \\\n get_group_id\nx"), ["x"]);
    }

    #[test]
    fn directive_starts_are_marked() {
        let l = lex("  #define A 1\nx # y");
        let hashes: Vec<bool> = l.toks.iter().filter(|t| t.is("#")).map(|t| t.bol).collect();
        assert_eq!(hashes, [true, false]);
    }

    #[test]
    fn numbers_do_not_leak_identifiers() {
        assert_eq!(
            texts("1e-5f+x 0x1p+3 .5f"),
            ["1e-5f", "+", "x", "0x1p+3", ".5f"]
        );
    }

    #[test]
    fn problems_are_reported() {
        assert!(lex("a /* b").problem.is_some());
        assert!(lex("a <% b %>").problem.is_some());
        assert!(lex("a::b").problem.is_some());
        assert!(lex("a ? b : c").problem.is_none());
        assert_eq!(lex("\"abc\n").toks[0].kind, Kind::Bad);
        assert_eq!(lex("'\\''").toks[0].kind, Kind::Char);
    }
}
