//! Prints what SoftPreempt makes of an OpenCL C file, for looking at or timing by hand:
//! `cargo run -p softpreempt-transform --example rewrite -- [--yielding|--flat|--geometry]
//! FILE [BUILD OPTIONS]`. `--yielding` (the default) prints the program with its persistent
//! entries, `--flat` with the entries a CPU device gets, `--geometry` the geometry rewrite;
//! kernels left out are listed on stderr.
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    use softpreempt_transform::EntryForm;
    // None: the geometry rewrite.
    let form = match args.first().map(String::as_str) {
        Some("--geometry") => None,
        Some("--flat") => Some(EntryForm::Flat),
        Some("--yielding") => Some(EntryForm::Persistent),
        _ => Some(EntryForm::Persistent),
    };
    if args.first().is_some_and(|a| a.starts_with("--")) {
        args.remove(0);
    }
    let Some(path) = args.first() else {
        eprintln!("usage: rewrite [--yielding|--flat|--geometry] FILE [BUILD OPTIONS]");
        return ExitCode::from(2);
    };
    let source = match std::fs::read_to_string(path) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let options = args[1..].join(" ");
    let analysis = softpreempt_transform::analyse_with_options(&source, &[], &options);
    let Some(form) = form else {
        match softpreempt_transform::rewrite(&analysis) {
            Some(r) => print!("{}", r.source),
            None => {
                eprintln!("{path}: nothing to rewrite (no kernel reads the geometry, or unsure)");
                return ExitCode::FAILURE;
            }
        }
        return ExitCode::SUCCESS;
    };
    match softpreempt_transform::yielding_form_or_why(&analysis, form) {
        Ok(p) => {
            for (kernel, why) in &p.skipped {
                eprintln!("{kernel}: not rewritten: {why}");
            }
            print!("{}", p.source);
            ExitCode::SUCCESS
        }
        Err(why) => {
            for (kernel, why) in why {
                eprintln!("{kernel}: not rewritten: {why}");
            }
            ExitCode::FAILURE
        }
    }
}
