//! Reliability soak harness: real processes through the real ICD loader on the vendor
//! (PoCL in CI), under faults and load. Prints a table (scenario | tried | crashed | hung |
//! wrong | notes) and, with `--doc FILE`, writes it into FILE between the markers
//! `<!-- soak:begin -->` and `<!-- soak:end -->` (docs/reliability.md).
//!
//! Run: `cargo build --workspace && cargo bench --bench soak -- [--smoke] [--doc FILE]`
//! (the test command runs `cargo test --bench soak -- --smoke`). `--help` lists the flags.
//! Exits non-zero when any scenario has a crash, hang or wrong result.
//!
//! The parent never touches OpenCL: it runs this binary again in child roles
//! (`SOFTPREEMPT_SOAK_ROLE`), each a real application process.

#[path = "soak/badapi.rs"]
mod badapi;
#[path = "soak/badconfig.rs"]
mod badconfig;
#[path = "../tests/common/mod.rs"]
mod common;
#[path = "soak/fork.rs"]
mod fork;
#[path = "soak/hostile.rs"]
mod hostile;
#[path = "soak/kill.rs"]
mod kill;
#[path = "soak/load.rs"]
mod load;
#[path = "../tests/managed_common/mod.rs"]
mod managed_common;
#[path = "soak/procs.rs"]
mod procs;
#[path = "soak/worker.rs"]
mod worker;

use procs::{spawn, End, Role, Setting};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// One scenario's row.
pub struct Outcome {
    pub scenario: String,
    pub tried: u64,
    pub crashed: u64,
    pub hung: u64,
    pub wrong: u64,
    pub notes: Vec<String>,
    /// Log lines worth quoting in the document.
    pub example_lines: Vec<String>,
    /// Extra markdown for the document (the bad-API comparison).
    pub details: String,
}

impl Outcome {
    pub fn new(scenario: &str) -> Outcome {
        Outcome {
            scenario: scenario.to_string(),
            tried: 0,
            crashed: 0,
            hung: 0,
            wrong: 0,
            notes: Vec::new(),
            example_lines: Vec::new(),
            details: String::new(),
        }
    }
    pub fn note(&mut self, n: String) {
        eprintln!("  [{}] {n}", self.scenario);
        self.notes.push(n);
    }
    /// Counts how a process ended. `progress` is (done, wanted) for a process that had to
    /// finish a number of iterations: a clean exit short of it counts as a crash.
    pub fn record(&mut self, what: &str, end: End, progress: Option<(u64, u64)>) {
        match end {
            End::Clean => {
                if let Some((done, want)) = progress.filter(|(d, w)| d < w) {
                    self.crashed += 1;
                    self.note(format!("{what}: stopped after {done} of {want} iterations"));
                }
            }
            End::Killed => {}
            End::Wrong(m) => {
                self.wrong += 1;
                self.note(format!("{what}: wrong result {m}"));
            }
            End::Crashed(m) => {
                self.crashed += 1;
                self.note(format!("{what}: {m}"));
            }
            End::Hung => {
                self.hung += 1;
                self.note(format!("{what}: did not finish within the bound"));
            }
        }
    }

    fn failed(&self) -> bool {
        self.crashed + self.hung + self.wrong > 0
    }
}

/// xorshift64*: reproducible from `--seed`.
pub struct Rng(u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }
}

const SCENARIOS: [&str; 6] = ["kill", "load", "hostile", "api", "config", "fork"];

const USAGE: &str = "\
usage: soak [FLAGS]
  --smoke          short mode for the test command (about a minute on 2 cores)
  --rounds N       kill -9 rounds (default 100; smoke 5)
  --procs N        processes of the load scenario (default 32; smoke 6)
  --only LIST      scenarios to run: kill,load,hostile,api,config,fork (default all)
  --seed N         random seed (default: from the clock; printed)
  --doc FILE       write the table into FILE between <!-- soak:begin/end --> markers";

struct Options {
    smoke: bool,
    rounds: Option<u32>,
    procs: Option<usize>,
    only: Vec<String>,
    seed: Option<u64>,
    doc: Option<PathBuf>,
}

impl Options {
    fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
        let mut o = Options {
            smoke: false,
            rounds: None,
            procs: None,
            only: SCENARIOS.iter().map(|s| s.to_string()).collect(),
            seed: None,
            doc: None,
        };
        while let Some(a) = args.next() {
            let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
            match a.as_str() {
                "--smoke" => o.smoke = true,
                "--rounds" => o.rounds = Some(value(&a)?.parse().map_err(|e| format!("{e}"))?),
                "--procs" => o.procs = Some(value(&a)?.parse().map_err(|e| format!("{e}"))?),
                "--seed" => o.seed = Some(value(&a)?.parse().map_err(|e| format!("{e}"))?),
                "--doc" => o.doc = Some(PathBuf::from(value(&a)?)),
                "--only" => {
                    o.only = value(&a)?.split(',').map(str::to_string).collect();
                    if let Some(bad) = o.only.iter().find(|s| !SCENARIOS.contains(&s.as_str())) {
                        return Err(format!("unknown scenario {bad}"));
                    }
                }
                // `cargo test --bench` passes harness flags such as --nocapture / --bench.
                "--nocapture" | "--bench" | "--quiet" | "-q" => {}
                "--help" | "-h" => return Err(String::new()),
                other => return Err(format!("unknown flag {other}")),
            }
        }
        Ok(o)
    }
}

fn child_role() -> bool {
    let Ok(json) = std::env::var(procs::ROLE_ENV) else {
        return false;
    };
    let role: Role = serde_json::from_str(&json).expect("role JSON from the parent");
    match role {
        Role::Worker(spec) => worker::run(&spec),
        Role::BadApi { sp } => badapi::run(sp),
        Role::Fork(spec) => worker::fork_role(&spec),
    }
    true
}

fn main() {
    if child_role() {
        return;
    }
    let opts = match Options::parse(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}\n\n{USAGE}");
            std::process::exit(2);
        }
    };
    let seed = opts.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
            | 1
    });
    eprintln!(
        "soak: seed {seed}{}",
        if opts.smoke { " (smoke)" } else { "" }
    );
    let mut rng = Rng(seed);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/soak")
        .join(std::process::id().to_string());
    std::fs::create_dir_all(&root).expect("target/soak");
    let vendors = common::make_vendors_dir("soak");
    eprintln!("soak: library {}", common::library_path().display());
    let smoke = opts.smoke;
    // Liveness bound: generous, since 2 shared cores can be very slow; never a timing goal.
    let bound = Duration::from_secs(90);
    let (items, iters) = if smoke { (8192, 32) } else { (16384, 64) };
    let started = Instant::now();
    let mut rows: Vec<Outcome> = Vec::new();
    for s in &opts.only {
        eprintln!("soak: scenario {s} ...");
        let t = Instant::now();
        let row = match s.as_str() {
            "kill" => kill::run(
                &root,
                &vendors,
                &kill::Params {
                    rounds: opts.rounds.unwrap_or(if smoke { 5 } else { 100 }),
                    items,
                    iters,
                    bound,
                },
                &mut rng,
            ),
            "load" => load::run(
                &root,
                &vendors,
                &load::Params {
                    procs: opts.procs.unwrap_or(if smoke { 6 } else { 32 }),
                    iterations: if smoke { 3 } else { 10 },
                    items,
                    iters,
                    bound: bound * 4,
                },
            ),
            "hostile" => hostile::run(
                &root,
                &vendors,
                &hostile::Params {
                    items,
                    iters,
                    bound,
                    smoke,
                },
                &mut rng,
            ),
            "api" => bad_api(&root, &vendors, bound),
            "config" => badconfig::run(&root, &vendors, bound, items, iters, smoke),
            "fork" => fork::run(&root, &vendors, bound, items, iters),
            _ => unreachable!(),
        };
        eprintln!("soak: {s} took {:.1?}", t.elapsed());
        rows.push(row);
    }
    let table = table(&rows);
    println!("{table}");
    let wall = started.elapsed();
    if let Some(doc) = &opts.doc {
        // Paths of this run's private directories mean nothing to a reader.
        let section = doc_section(&rows, &table, seed, smoke, wall)
            .replace(&root.display().to_string(), "<soak-dir>");
        if let Err(e) = write_doc(doc, &section) {
            eprintln!("soak: {}: {e}", doc.display());
            std::process::exit(1);
        }
        eprintln!("soak: wrote {}", doc.display());
    }
    let _ = std::fs::remove_dir_all(&root);
    let _ = std::fs::remove_dir_all(&vendors);
    let failed: Vec<&str> = rows
        .iter()
        .filter(|r| r.failed())
        .map(|r| r.scenario.as_str())
        .collect();
    if !failed.is_empty() {
        eprintln!("soak: FAILED: {}", failed.join(", "));
        std::process::exit(1);
    }
    eprintln!("soak: all scenarios held ({:.0?})", wall);
}

/// Scenario 4: runs the bad-API driver on the bare platform and through SoftPreempt, and
/// compares.
fn bad_api(root: &Path, vendors: &Path, bound: Duration) -> Outcome {
    let mut out = Outcome::new("bad API input");
    let set = Setting::new(root, "api", "", vendors);
    let mut results = Vec::new();
    for sp in [false, true] {
        let mut p = spawn(&Role::BadApi { sp }, &set, &[], "api");
        let end = p.finish(bound * 4);
        if end != End::Clean {
            out.crashed += sp as u64;
            out.note(format!(
                "the {} driver process ended {end:?}: {}",
                if sp { "SoftPreempt" } else { "bare" },
                p.stderr_tail()
            ));
        }
        let fields = p.seen.fields.lock().unwrap().clone();
        let mut cases = Vec::new();
        let mut name = None;
        for (k, v) in fields {
            match k.as_str() {
                "case" => name = Some(v),
                "result" => {
                    if let Some(n) = name.take() {
                        cases.push((n, v))
                    }
                }
                _ => {}
            }
        }
        results.push(cases);
    }
    let (bare, sp) = (&results[0], &results[1]);
    let mut mismatches = Vec::new();
    let mut bare_crashes = 0;
    for (name, s) in sp {
        out.tried += 1;
        let b = bare
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, r)| r.as_str())
            .unwrap_or("?");
        let loader = name.starts_with("loader-");
        if b.starts_with("signal") {
            bare_crashes += 1;
        }
        if s.starts_with("signal") || s == "no-answer" {
            if loader {
                out.note(format!(
                    "{name}: {} in the ICD loader, before any driver (bare: {})",
                    badapi::describe(s),
                    badapi::describe(b)
                ));
            } else {
                out.crashed += 1;
                out.note(format!("{name}: SoftPreempt {}", badapi::describe(s)));
            }
        }
        if s == "hung" {
            out.hung += 1;
            out.note(format!("{name}: SoftPreempt hung"));
        }
        if s != b {
            mismatches.push(format!(
                "| `{name}` | {} | {} |",
                badapi::describe(b),
                badapi::describe(s)
            ));
        }
    }
    out.note(format!(
        "{} calls each way; the bare driver crashed on {bare_crashes}; {} answers differ \
         (listed below)",
        sp.len(),
        mismatches.len()
    ));
    out.details = format!(
        "Bad-API answers that differ (bare {} vs SoftPreempt):\n\n| call | bare | \
         SoftPreempt |\n|---|---|---|\n{}\n",
        common::vendor_name(),
        mismatches.join("\n")
    );
    eprintln!("{}", out.details);
    out
}

fn table(rows: &[Outcome]) -> String {
    let mut s = String::from(
        "| scenario | tried | crashed | hung | wrong | notes |\n|---|---:|---:|---:|---:|---|\n",
    );
    for r in rows {
        s += &format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            r.scenario,
            r.tried,
            r.crashed,
            r.hung,
            r.wrong,
            r.notes.join("; ").replace('|', "/")
        );
    }
    s
}

fn doc_section(rows: &[Outcome], table: &str, seed: u64, smoke: bool, wall: Duration) -> String {
    let date = Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mut s = format!(
        "Run: `cargo bench --bench soak --{}` on {date}, {cores} cores, vendor {}, seed {seed}, \
         {:.0} s.\n\n{table}\n",
        if smoke { " --smoke" } else { "" },
        common::vendor_name(),
        wall.as_secs_f64()
    );
    for r in rows {
        if !r.example_lines.is_empty() {
            s += &format!("Log lines seen ({}):\n\n", r.scenario);
            for l in &r.example_lines {
                s += &format!("    {l}\n");
            }
            s += "\n";
        }
        if !r.details.is_empty() {
            s += &r.details;
            s += "\n";
        }
    }
    s
}

use std::process::Command;

/// Replaces the text between the markers (or appends them).
fn write_doc(path: &Path, section: &str) -> std::io::Result<()> {
    const BEGIN: &str = "<!-- soak:begin -->";
    const END: &str = "<!-- soak:end -->";
    let old = std::fs::read_to_string(path).unwrap_or_default();
    let new = match (old.find(BEGIN), old.find(END)) {
        (Some(b), Some(e)) if b < e => format!("{}{BEGIN}\n{section}{}", &old[..b], &old[e..]),
        _ => format!("{old}\n{BEGIN}\n{section}{END}\n"),
    };
    std::fs::write(path, new)
}
