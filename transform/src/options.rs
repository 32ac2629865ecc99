//! The parts of `clBuildProgram`/`clCompileProgram` options that change what the source
//! means: `-D` macros (a kernel may read a builtin through one) and the language.

pub struct Options {
    /// The `-D` definitions as `#define` lines, read like a header before the source.
    pub defines: String,
    pub problem: Option<String>,
}

pub fn read(options: &str) -> Options {
    let mut out = Options {
        defines: String::new(),
        problem: None,
    };
    // Vendors split options on white space and honour quotes differently; a quoted
    // option is not worth guessing about.
    if options.contains(['"', '\'', '\\']) {
        out.problem = Some("quoted build options".into());
        return out;
    }
    let mut words = options.split_whitespace();
    while let Some(w) = words.next() {
        let def = match w {
            "-D" => words.next().unwrap_or(""),
            _ if w.starts_with("-D") => &w[2..],
            _ if w.to_ascii_lowercase().starts_with("-cl-std=clc++") => {
                out.problem = Some("C++ for OpenCL".into());
                return out;
            }
            _ => continue,
        };
        // `-D name` defines name as 1; `-D name=body` as body; `-D f(x)=body` is function-like.
        let (head, body) = def.split_once('=').unwrap_or((def, "1"));
        if !head.is_empty() {
            out.defines += &format!("#define {head} {body}\n");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defines_become_directives() {
        let o = read("-cl-fast-relaxed-math -D N=64 -DDEBUG -DG(d)=get_group_id(d) -I /x");
        assert_eq!(
            o.defines,
            "#define N 64\n#define DEBUG 1\n#define G(d) get_group_id(d)\n"
        );
        assert!(o.problem.is_none());
    }

    #[test]
    fn unsupported_options_are_reported() {
        assert!(read("-D 'X=a b'").problem.is_some());
        assert!(read("-cl-std=CLC++2021").problem.is_some());
        assert!(read("-cl-std=CL3.0").problem.is_none());
    }
}
