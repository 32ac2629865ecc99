//! Prints what SoftPreempt makes of an OpenCL C file, for looking at or timing by hand:
//! `cargo run -p softpreempt-transform --example rewrite -- [--yielding|--geometry] FILE
//! [BUILD OPTIONS]`. `--yielding` (the default) prints the program with its persistent
//! entries, `--geometry` the geometry rewrite; kernels left out are listed on stderr.
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let geometry = match args.first().map(String::as_str) {
        Some("--geometry") => {
            args.remove(0);
            true
        }
        Some("--yielding") => {
            args.remove(0);
            false
        }
        _ => false,
    };
    let Some(path) = args.first() else {
        eprintln!("usage: rewrite [--yielding|--geometry] FILE [BUILD OPTIONS]");
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
    if geometry {
        match softpreempt_transform::rewrite(&analysis) {
            Some(r) => print!("{}", r.source),
            None => {
                eprintln!("{path}: nothing to rewrite (no kernel reads the geometry, or unsure)");
                return ExitCode::FAILURE;
            }
        }
        return ExitCode::SUCCESS;
    }
    match softpreempt_transform::yielding_or_why(&analysis) {
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
