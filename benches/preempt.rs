//! Preemption benchmark: a latency-critical (HP) process and a best-effort (LP) process
//! that saturates the device, as real processes through the real ICD loader, on the bare
//! vendor and through SoftPreempt. Prints a table of HP turnaround percentiles and LP
//! throughput per mode; `--json FILE` also writes every number and every HP sample.
//!
//! Run: `cargo build --release -p softpreempt-icd && cargo bench --bench preempt -- [FLAGS]`
//! (`--help` lists them; `--smoke` runs every mode for about a second with tiny kernels).
//!
//! The parent never touches OpenCL: it spawns this same binary in a child role (the role
//! travels as JSON in `SOFTPREEMPT_BENCH_SPEC`), so every process picks its platform,
//! priority (`SOFTPREEMPT_PRIORITY`) and configuration the way a real application would.
//! Children answer with `@preempt {json}` lines on stdout (other lines are ignored, so a
//! test harness may wrap the child); the parent says `go` on the child's stdin, and closing
//! stdin means stop.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "preempt/matrix.rs"]
mod matrix;
#[path = "preempt/plot.rs"]
mod plot;

use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Environment variable that carries a child's [`Role`]; its presence makes a child.
const SPEC_ENV: &str = "SOFTPREEMPT_BENCH_SPEC";
/// Prefix of the child's protocol lines on stdout.
const MARK: &str = "@preempt ";

/// The default `sched.target_slice_us` on a GPU and on other devices (a `corun-sp` row
/// without `--target-us` ran at it).
const DEFAULT_TARGET_US: (u64, u64) = (250, 1000);

fn main() {
    if child::run_from_env() {
        return;
    }
    let opts = match Options::parse(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}\n\n{USAGE}");
            std::process::exit(2);
        }
    };
    if let Some(dir) = &opts.matrix {
        if let Err(e) = matrix::write(dir, opts.plots.as_deref()) {
            fail(&format!("matrix: {e}"));
        }
        return;
    }
    if let Some(from) = &opts.plot_from {
        let text = std::fs::read_to_string(from)
            .unwrap_or_else(|e| fail(&format!("{}: {e}", from.display())));
        let report: serde_json::Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| fail(&format!("{}: {e}", from.display())));
        let dir = opts.plots.clone().unwrap_or_else(|| PathBuf::from("."));
        plots(&report, &dir);
        return;
    }
    // The release library, when built, is what users install; children inherit this.
    let release = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/libsoftpreempt.so");
    if std::env::var_os("SOFTPREEMPT_LIB").is_none() && release.exists() {
        std::env::set_var("SOFTPREEMPT_LIB", &release);
    }
    let report = run(&opts, &Launcher::this_binary());
    report.print_table();
    if let Some(path) = &opts.json {
        let text = serde_json::to_string_pretty(&report).expect("report serializes");
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            let _ = std::fs::create_dir_all(dir);
        }
        std::fs::write(path, text).unwrap_or_else(|e| fail(&format!("{}: {e}", path.display())));
    }
    if let Some(dir) = &opts.plots {
        plots(
            &serde_json::to_value(&report).expect("report serializes"),
            dir,
        );
    }
    // Every mode must have run: a failed mode fails the run (the smoke test relies on it).
    let failed: Vec<&str> = report
        .modes
        .iter()
        .filter(|m| m.error.is_some())
        .map(|m| m.label.as_str())
        .collect();
    if !failed.is_empty() {
        fail(&format!("modes failed: {}", failed.join(", ")));
    }
}

fn plots(report: &serde_json::Value, dir: &Path) {
    let gpu = report["calibration"]["gpu"].as_bool().unwrap_or(false);
    let target = if gpu {
        DEFAULT_TARGET_US.0
    } else {
        DEFAULT_TARGET_US.1
    };
    match plot::write_all(report, dir, target) {
        Ok(files) => {
            for f in files {
                eprintln!("wrote {}", f.display());
            }
        }
        Err(e) => fail(&format!("plots: {e}")),
    }
}

fn fail(msg: &str) -> ! {
    eprintln!("preempt: {msg}");
    std::process::exit(1);
}

const USAGE: &str = "\
usage: preempt [FLAGS]
  --duration S       seconds of measurement per mode (default 5)
  --lp-ms MS         LP kernel length alone, calibrated at start (default 20)
  --hp-us US         HP kernel length alone, calibrated at start (default 500)
  --gap-ms MS        mean of the HP's Poisson inter-arrival gap (default 20)
  --hp-burst N       kernels per HP request, run back to back (default 1)
  --lp-depth N       LP launches kept queued (default 2)
  --lp-items N       LP global size (default: by device type and compute units)
  --lp-waves N       long-thread LP: N full device waves per launch, each work-item
                     looping lp-ms / N (default: many short waves)
  --lp-kernel KIND   compute (a chain of FMAs), memory (streams a large buffer),
                     gemm (tiled matrix product, 16x16 tiles; reads get_group_id) or
                     mandel (a 2D Mandelbrot: uneven cost across the range)
  --hp-items N       HP global size (default: by device type and compute units)
  --target-us LIST   [sched] target_slice_us, e.g. 200,1000: one corun-sp mode each
  --max-inflight N   [sched] max_inflight for the SoftPreempt modes
  --sched KEY=VALUE  one more [sched] line, e.g. hp_linger_us=0 (repeatable)
  --modes LIST       modes to run (default: hp-alone,corun-bare,corun-sp,arrival-bare,
                     arrival-sp,lp-bare,lp-sp,lp-sp-idle-hp; also hp-alone-sp,
                     corun-sp-noslice, multi-bare, multi-sp: 2 HP + 3 LP processes)
  --arrival-s S      arrival modes: seconds the HP measures after it arrives (default 1)
  --arrival-reps N   arrival modes: arrivals pooled into the figures (default 3)
  --label NAME       the run's name in the JSON report (the matrix's row name)
  --seed N           seed of the HP arrival sequence (the same in every mode)
  --json FILE        write all numbers (and every HP sample) as JSON
  --plots DIR        draw PNG plots of the run into DIR
  --plot-from FILE   no run: draw the plots of a saved --json report (into --plots DIR)
  --matrix DIR       no run: combine the reports DIR/*.json (and a pyopencl_pair.py
                     --json report) into DIR/matrix.md; with --plots, matrix plots too
  --smoke            every mode for ~1 s with tiny kernels (CI)";

// ---------------------------------------------------------------------------------------
// Options and modes

/// What the parent was asked to do.
#[derive(Clone, Debug, Serialize)]
pub struct Options {
    pub duration_s: f64,
    pub lp_ms: f64,
    pub hp_us: f64,
    pub gap_ms: f64,
    pub hp_burst: u32,
    pub lp_depth: usize,
    pub lp_items: Option<usize>,
    /// A long-thread LP: this many device waves per launch, each work-item looping for
    /// `lp_ms / waves` (Monte-Carlo or hashing kernels), instead of many short waves.
    pub lp_waves: Option<u32>,
    pub hp_items: Option<usize>,
    pub lp_kernel: KernelKind,
    pub target_us: Vec<u64>,
    pub max_inflight: Option<u32>,
    /// More `[sched]` lines (`KEY=VALUE`) for every mode's config file.
    pub sched_extra: Vec<String>,
    pub modes: Vec<Mode>,
    pub seed: u64,
    /// Arrival modes: how long the HP measures after each arrival.
    pub arrival_s: f64,
    /// Arrival modes: how many arrivals (each next to an LP in steady state) are pooled.
    pub arrival_reps: u32,
    /// The run's name (a row of the matrix).
    pub label: Option<String>,
    #[serde(skip)]
    pub json: Option<PathBuf>,
    #[serde(skip)]
    pub plots: Option<PathBuf>,
    #[serde(skip)]
    pub plot_from: Option<PathBuf>,
    #[serde(skip)]
    pub matrix: Option<PathBuf>,
    pub smoke: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            duration_s: 5.0,
            lp_ms: 20.0,
            hp_us: 500.0,
            gap_ms: 20.0,
            hp_burst: 1,
            lp_depth: 2,
            lp_items: None,
            lp_waves: None,
            hp_items: None,
            lp_kernel: KernelKind::Compute,
            target_us: Vec::new(),
            max_inflight: None,
            sched_extra: Vec::new(),
            modes: Mode::DEFAULT.to_vec(),
            seed: 0x5eed,
            arrival_s: 1.0,
            arrival_reps: 3,
            label: None,
            json: None,
            plots: None,
            plot_from: None,
            matrix: None,
            smoke: false,
        }
    }
}

impl Options {
    /// Short runs with tiny kernels: every mode, so every path of the harness runs.
    pub fn smoke() -> Options {
        Options {
            duration_s: 1.0,
            lp_ms: 3.0,
            hp_us: 200.0,
            gap_ms: 10.0,
            lp_items: Some(1024),
            hp_items: Some(64),
            modes: Mode::ALL.to_vec(),
            arrival_reps: 1,
            smoke: true,
            ..Options::default()
        }
    }

    /// Parses the flags; `--smoke` picks the starting point, later flags override it.
    /// Unknown `--bench`-style flags from `cargo bench` are ignored.
    pub fn parse(args: impl Iterator<Item = String>) -> Result<Options, String> {
        let args: Vec<String> = args.collect();
        let mut o = if args.iter().any(|a| a == "--smoke") {
            Options::smoke()
        } else {
            Options::default()
        };
        let mut it = args.into_iter();
        while let Some(flag) = it.next() {
            let mut value = || it.next().ok_or(format!("{flag} needs a value"));
            match flag.as_str() {
                "--duration" => o.duration_s = num(&flag, &value()?)?,
                "--lp-ms" => o.lp_ms = num(&flag, &value()?)?,
                "--hp-us" => o.hp_us = num(&flag, &value()?)?,
                "--gap-ms" => o.gap_ms = num(&flag, &value()?)?,
                "--hp-burst" => o.hp_burst = num(&flag, &value()?)?,
                "--lp-depth" => o.lp_depth = num(&flag, &value()?)?,
                "--lp-items" => o.lp_items = Some(num(&flag, &value()?)?),
                "--lp-waves" => o.lp_waves = Some(num(&flag, &value()?)?),
                "--hp-items" => o.hp_items = Some(num(&flag, &value()?)?),
                "--max-inflight" => o.max_inflight = Some(num(&flag, &value()?)?),
                "--sched" => {
                    let kv = value()?;
                    let (k, v) = kv.split_once('=').ok_or("--sched takes KEY=VALUE")?;
                    o.sched_extra.push(format!("{} = {}", k.trim(), v.trim()));
                }
                "--seed" => o.seed = num(&flag, &value()?)?,
                "--arrival-s" => o.arrival_s = num(&flag, &value()?)?,
                "--arrival-reps" => o.arrival_reps = num(&flag, &value()?)?,
                "--label" => o.label = Some(value()?),
                "--matrix" => o.matrix = Some(PathBuf::from(value()?)),
                "--json" => o.json = Some(PathBuf::from(value()?)),
                "--plots" => o.plots = Some(PathBuf::from(value()?)),
                "--plot-from" => o.plot_from = Some(PathBuf::from(value()?)),
                "--lp-kernel" => o.lp_kernel = KernelKind::parse(&value()?)?,
                "--target-us" => {
                    o.target_us = list(&value()?, |s| num(&flag, s))?;
                }
                "--modes" => o.modes = list(&value()?, Mode::parse)?,
                "--help" | "-h" => return Err("preemption benchmark".into()),
                "--smoke" | "--bench" => {}
                _ => return Err(format!("unknown flag {flag}")),
            }
        }
        if o.hp_burst == 0
            || o.lp_depth == 0
            || o.duration_s <= 0.0
            || o.arrival_s <= 0.0
            || o.arrival_reps == 0
        {
            return Err(
                "--hp-burst, --lp-depth, --duration, --arrival-s and --arrival-reps must be \
                 positive"
                    .into(),
            );
        }
        Ok(o)
    }
}

fn num<T: std::str::FromStr>(flag: &str, s: &str) -> Result<T, String> {
    s.parse().map_err(|_| format!("{flag}: bad number '{s}'"))
}

fn list<T>(s: &str, f: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
    s.split(',').filter(|x| !x.is_empty()).map(f).collect()
}

/// Which vendor platform a child uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    Bare,
    Sp,
}

/// One measured configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// HP alone on the bare vendor: the latency baseline.
    HpAlone,
    /// HP alone through SoftPreempt: the layer's own cost on latency.
    HpAloneSp,
    /// HP + LP, both on the bare vendor (steady state).
    CorunBare,
    /// HP + LP, both through SoftPreempt (steady state).
    CorunSp,
    /// HP + LP through SoftPreempt with `slice = "never"`: whole-kernel scheduling only.
    CorunSpNoslice,
    /// The HP's first second next to an LP already running in steady state, bare vendor.
    ArrivalBare,
    /// The HP's first second next to an LP already running in steady state, SoftPreempt.
    ArrivalSp,
    /// 2 HP + 3 LP processes, all on the bare vendor.
    MultiBare,
    /// 2 HP + 3 LP processes, all through SoftPreempt.
    MultiSp,
    /// LP alone on the bare vendor: the throughput baseline.
    LpBare,
    /// LP alone through SoftPreempt.
    LpSp,
    /// LP through SoftPreempt with an idle high-priority queue registered.
    LpSpIdleHp,
}

/// The processes of a mode.
#[derive(Clone, Copy, Debug, Default)]
struct Procs {
    /// The HP processes' platform and how many there are.
    hp: Option<(Platform, usize)>,
    /// The LP processes' platform and how many there are.
    lp: Option<(Platform, usize)>,
    /// An idle registered high-priority queue (through SoftPreempt) next to the LP.
    idle_hp: bool,
    /// The HP arrives next to an LP in steady state, and measures its first second.
    arrival: bool,
}

impl Mode {
    const ALL: [Mode; 12] = [
        Mode::HpAlone,
        Mode::HpAloneSp,
        Mode::CorunBare,
        Mode::CorunSp,
        Mode::CorunSpNoslice,
        Mode::ArrivalBare,
        Mode::ArrivalSp,
        Mode::MultiBare,
        Mode::MultiSp,
        Mode::LpBare,
        Mode::LpSp,
        Mode::LpSpIdleHp,
    ];
    const DEFAULT: [Mode; 8] = [
        Mode::HpAlone,
        Mode::CorunBare,
        Mode::CorunSp,
        Mode::ArrivalBare,
        Mode::ArrivalSp,
        Mode::LpBare,
        Mode::LpSp,
        Mode::LpSpIdleHp,
    ];

    fn name(self) -> &'static str {
        match self {
            Mode::HpAlone => "hp-alone",
            Mode::HpAloneSp => "hp-alone-sp",
            Mode::CorunBare => "corun-bare",
            Mode::CorunSp => "corun-sp",
            Mode::CorunSpNoslice => "corun-sp-noslice",
            Mode::ArrivalBare => "arrival-bare",
            Mode::ArrivalSp => "arrival-sp",
            Mode::MultiBare => "multi-bare",
            Mode::MultiSp => "multi-sp",
            Mode::LpBare => "lp-bare",
            Mode::LpSp => "lp-sp",
            Mode::LpSpIdleHp => "lp-sp-idle-hp",
        }
    }

    fn parse(s: &str) -> Result<Mode, String> {
        Mode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or(format!("unknown mode '{s}'"))
    }

    fn processes(self) -> Procs {
        use Platform::*;
        let one = |p| Some((p, 1));
        let (hp, lp) = match self {
            Mode::HpAlone => (one(Bare), None),
            Mode::HpAloneSp => (one(Sp), None),
            Mode::CorunBare | Mode::ArrivalBare => (one(Bare), one(Bare)),
            Mode::CorunSp | Mode::CorunSpNoslice | Mode::ArrivalSp => (one(Sp), one(Sp)),
            Mode::MultiBare => (Some((Bare, 2)), Some((Bare, 3))),
            Mode::MultiSp => (Some((Sp, 2)), Some((Sp, 3))),
            Mode::LpBare => (None, one(Bare)),
            Mode::LpSp | Mode::LpSpIdleHp => (None, one(Sp)),
        };
        Procs {
            hp,
            lp,
            idle_hp: self == Mode::LpSpIdleHp,
            arrival: matches!(self, Mode::ArrivalBare | Mode::ArrivalSp),
        }
    }
}

/// One row of the run: a mode with its `[sched]` settings.
#[derive(Clone, Debug, Serialize)]
pub struct Plan {
    pub label: String,
    pub mode: Mode,
    pub sched: Sched,
}

/// The `[sched]` keys written to the run's config file; `None` keeps the default.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Sched {
    pub slice: Option<&'static str>,
    pub target_slice_us: Option<u64>,
    pub max_inflight: Option<u32>,
    pub extra: Vec<String>,
}

impl Sched {
    fn toml(&self) -> String {
        let mut s = String::from("version = 1\n[sched]\n");
        if let Some(v) = self.slice {
            s += &format!("slice = \"{v}\"\n");
        }
        if let Some(v) = self.target_slice_us {
            s += &format!("target_slice_us = {v}\n");
        }
        if let Some(v) = self.max_inflight {
            s += &format!("max_inflight = {v}\n");
        }
        for line in &self.extra {
            s += line;
            s.push('\n');
        }
        s
    }
}

/// The modes in order, `corun-sp` once per `--target-us` value.
pub fn plans(o: &Options) -> Vec<Plan> {
    let base = Sched {
        max_inflight: o.max_inflight,
        extra: o.sched_extra.clone(),
        ..Sched::default()
    };
    let targets: Vec<Option<u64>> = if o.target_us.is_empty() {
        vec![None]
    } else {
        o.target_us.iter().copied().map(Some).collect()
    };
    let mut out = Vec::new();
    for &mode in &o.modes {
        let slice = (mode == Mode::CorunSpNoslice).then_some("never");
        let per_target = if mode == Mode::CorunSp {
            targets.clone()
        } else {
            vec![targets[0]]
        };
        for t in per_target {
            // Every SoftPreempt mode that slices runs at the first target unless it is a
            // corun-sp row of its own: the label says which.
            let slices = matches!(
                mode,
                Mode::CorunSp | Mode::ArrivalSp | Mode::MultiSp | Mode::LpSpIdleHp
            );
            let label = match t {
                Some(t) if slices => format!("{}@{t}us", mode.name()),
                _ => mode.name().to_string(),
            };
            let sched = Sched {
                slice,
                target_slice_us: t,
                ..base.clone()
            };
            out.push(Plan { label, mode, sched });
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// The protocol between parent and children

/// What a child does; serialized into [`SPEC_ENV`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Role {
    /// Sizes both kernels on the bare vendor.
    Calibrate {
        lp_ms: f64,
        hp_us: f64,
        lp_items: Option<usize>,
        hp_items: Option<usize>,
        lp_kind: KernelKind,
        #[serde(default)]
        lp_waves: Option<u32>,
    },
    /// Keeps `depth` long launches queued until stopped.
    Lp {
        platform: Platform,
        kernel: KernelSpec,
        depth: usize,
    },
    /// Short requests at Poisson arrivals for `duration_s`. With `arrivals`, the queue is
    /// closed after the warm-up and opened afresh at each `go` (an arrival), measured for
    /// `duration_s` and closed again; the child says `Ready` after each.
    Hp {
        platform: Platform,
        kernel: KernelSpec,
        gap_ms: f64,
        burst: u32,
        duration_s: f64,
        seed: u64,
        #[serde(default)]
        arrivals: bool,
    },
    /// A high-priority queue that runs one tiny kernel, then sleeps until stopped.
    IdleHp { platform: Platform },
}

/// What a benchmark kernel spends its time on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KernelKind {
    /// A serial chain of FMAs per work-item (`spin`).
    #[default]
    Compute,
    /// Strided reads of a buffer much larger than the caches (`stream`).
    Memory,
    /// A tiled matrix product with `__local` tiles and barriers that reads
    /// `get_group_id` (`gemm`): sliceable only through the kernel rewrite.
    Gemm,
    /// A 2D Mandelbrot escape-time kernel (`mandel`, as in `softpreempt demo`): the cost
    /// of a work-item ranges from one iteration to `iters` across the range, so equal
    /// slices take very unequal times.
    Mandel,
}

impl KernelKind {
    fn name(self) -> &'static str {
        match self {
            KernelKind::Compute => "compute",
            KernelKind::Memory => "memory",
            KernelKind::Gemm => "gemm",
            KernelKind::Mandel => "mandel",
        }
    }

    fn parse(s: &str) -> Result<KernelKind, String> {
        match s {
            "compute" => Ok(KernelKind::Compute),
            "memory" => Ok(KernelKind::Memory),
            "gemm" => Ok(KernelKind::Gemm),
            "mandel" => Ok(KernelKind::Mandel),
            _ => Err(format!(
                "--lp-kernel: expected compute, memory, gemm or mandel, got '{s}'"
            )),
        }
    }
}

/// Size of one benchmark launch.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct KernelSpec {
    pub items: usize,
    pub iters: u32,
    #[serde(default)]
    pub kind: KernelKind,
}

/// A child's message to the parent.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    Ready,
    Calibrated(Calibration),
    Hp(HpResult),
    Lp(LpResult),
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Calibration {
    pub device: String,
    pub gpu: bool,
    pub compute_units: u32,
    pub lp: KernelSpec,
    pub hp: KernelSpec,
    /// Measured device time of one launch alone, after sizing.
    pub lp_ms: f64,
    pub hp_ms: f64,
}

/// One HP request.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct HpSample {
    /// CLOCK_MONOTONIC at the first enqueue, ns: the clock of SoftPreempt's traces, so a
    /// slow request can be found on the `SOFTPREEMPT_TRACE` timeline.
    pub start_ns: u64,
    /// Host clock, first enqueue to last completion, ms.
    pub turnaround_ms: f64,
    /// Device clock, first kernel QUEUED to START (profiling), ms: how long the HP work
    /// waited for the device.
    pub queue_to_start_ms: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HpResult {
    pub samples: Vec<HpSample>,
    pub arbiter: Option<ArbiterStats>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LpResult {
    /// Launches that completed between the first and last counted completion.
    pub launches: u64,
    pub seconds: f64,
    pub per_s: f64,
    pub arbiter: Option<ArbiterStats>,
}

impl LpResult {
    /// Several LP processes as one: launches and rates summed, the longest window.
    fn total(each: &[LpResult]) -> Option<LpResult> {
        let first = each.first()?;
        if each.len() == 1 {
            return Some(first.clone());
        }
        let arbiter = each
            .iter()
            .filter_map(|l| l.arbiter.clone())
            .reduce(|a, b| a.sum(&b));
        Some(LpResult {
            launches: each.iter().map(|l| l.launches).sum(),
            seconds: each.iter().map(|l| l.seconds).fold(0.0, f64::max),
            per_s: each.iter().map(|l| l.per_s).sum(),
            arbiter,
        })
    }

    /// Pieces the LP submitted per second of the measurement (through SoftPreempt only).
    fn slices_per_s(&self) -> Option<f64> {
        let a = self.arbiter.as_ref()?;
        (self.seconds > 0.0).then(|| a.slices as f64 / self.seconds)
    }
}

/// This process's clients in the arbiter segments of the run (`None`: not registered,
/// e.g. on the bare vendor).
/// The yielding-launch figures (rule 10) default to zero in reports written before them.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ArbiterStats {
    pub clients: u32,
    pub grants: u64,
    pub slices: u64,
    /// Times `acquire` waited for a grant.
    pub yields: u64,
    pub wait_ms: f64,
    pub busy_ms: f64,
    /// Yielding launches that left the device on request.
    #[serde(default)]
    pub yields_done: u64,
    /// Yield latency, request to off the device (the worst client's, log2-bucket edges).
    #[serde(default)]
    pub yield_p50_ms: Option<f64>,
    #[serde(default)]
    pub yield_p99_ms: Option<f64>,
    /// On-device claims that said they could not yield in time.
    #[serde(default)]
    pub cannot_yield: u64,
    /// Handshakes in which this process waited for lower clients to leave the device,
    /// their total and longest wait, and those that ended at the bound.
    #[serde(default)]
    pub hs_waits: u64,
    #[serde(default)]
    pub hs_wait_ms: f64,
    #[serde(default)]
    pub hs_wait_max_ms: f64,
    #[serde(default)]
    pub hs_expired: u64,
}

impl ArbiterStats {
    fn sum(&self, o: &ArbiterStats) -> ArbiterStats {
        let max = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        ArbiterStats {
            clients: self.clients + o.clients,
            grants: self.grants + o.grants,
            slices: self.slices + o.slices,
            yields: self.yields + o.yields,
            wait_ms: self.wait_ms + o.wait_ms,
            busy_ms: self.busy_ms + o.busy_ms,
            yields_done: self.yields_done + o.yields_done,
            yield_p50_ms: max(self.yield_p50_ms, o.yield_p50_ms),
            yield_p99_ms: max(self.yield_p99_ms, o.yield_p99_ms),
            cannot_yield: self.cannot_yield + o.cannot_yield,
            hs_waits: self.hs_waits + o.hs_waits,
            hs_wait_ms: self.hs_wait_ms + o.hs_wait_ms,
            hs_wait_max_ms: self.hs_wait_max_ms.max(o.hs_wait_max_ms),
            hs_expired: self.hs_expired + o.hs_expired,
        }
    }

    /// Mean handshake wait, ms.
    fn hs_wait_mean_ms(&self) -> Option<f64> {
        (self.hs_waits > 0).then(|| self.hs_wait_ms / self.hs_waits as f64)
    }
}

// ---------------------------------------------------------------------------------------
// Children

/// How to start a child: this binary, plus arguments a wrapping test harness needs to
/// reach the child entry point.
pub struct Launcher {
    pub exe: PathBuf,
    pub args: Vec<String>,
}

impl Launcher {
    pub fn this_binary() -> Launcher {
        Launcher {
            exe: std::env::current_exe().expect("current_exe"),
            args: Vec::new(),
        }
    }
}

/// Where one mode's processes meet: a private arbiter directory and config file.
struct RunDir {
    shm: PathBuf,
    config: PathBuf,
}

impl RunDir {
    fn new(root: &Path, index: usize, sched: &Sched) -> RunDir {
        let dir = root.join(format!("mode-{index}"));
        let shm = dir.join("shm");
        std::fs::create_dir_all(&shm).expect("create run dir");
        let config = dir.join("softpreempt.toml");
        std::fs::write(&config, sched.toml()).expect("write config");
        RunDir { shm, config }
    }
}

/// A running child process. Dropping it kills the child if it is still running, so an
/// error in one mode never leaves a device hog behind.
struct Child {
    name: &'static str,
    proc: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    stdout: BufReader<std::process::ChildStdout>,
}

impl Child {
    fn spawn(
        name: &'static str,
        launcher: &Launcher,
        role: &Role,
        run: &RunDir,
        priority: &str,
    ) -> Result<Child, String> {
        let mut cmd = Command::new(&launcher.exe);
        cmd.args(&launcher.args)
            .env(
                SPEC_ENV,
                serde_json::to_string(role).expect("role serializes"),
            )
            .env("SOFTPREEMPT_PRIORITY", priority)
            .env("SOFTPREEMPT_SHM_DIR", &run.shm)
            .env("SOFTPREEMPT_CONFIG", &run.config)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut proc = cmd.spawn().map_err(|e| format!("spawn {name}: {e}"))?;
        let stdin = proc.stdin.take();
        let stdout = BufReader::new(proc.stdout.take().expect("piped stdout"));
        Ok(Child {
            name,
            proc,
            stdin,
            stdout,
        })
    }

    /// The next protocol message (skipping other output).
    fn recv(&mut self) -> Result<Msg, String> {
        let mut line = String::new();
        loop {
            line.clear();
            let n = self
                .stdout
                .read_line(&mut line)
                .map_err(|e| format!("{}: {e}", self.name))?;
            if n == 0 {
                return Err(format!("{} exited early (see its stderr)", self.name));
            }
            if let Some(json) = line.trim_end().strip_prefix(MARK) {
                return serde_json::from_str(json)
                    .map_err(|e| format!("{}: bad message {json}: {e}", self.name));
            }
        }
    }

    fn expect_ready(&mut self) -> Result<(), String> {
        match self.recv()? {
            Msg::Ready => Ok(()),
            m => Err(format!("{}: expected Ready, got {m:?}", self.name)),
        }
    }

    fn go(&mut self) -> Result<(), String> {
        let stdin = self.stdin.as_mut().ok_or("stdin closed")?;
        writeln!(stdin, "go")
            .and_then(|_| stdin.flush())
            .map_err(|e| format!("{}: {e}", self.name))
    }

    /// Closing stdin is the stop signal.
    fn stop(&mut self) {
        self.stdin = None;
    }

    fn finish(mut self) -> Result<(), String> {
        self.stop();
        let status = self.proc.wait().map_err(|e| e.to_string())?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("{} failed: {status}", self.name))
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if let Ok(None) = self.proc.try_wait() {
            let _ = self.proc.kill();
            let _ = self.proc.wait();
        }
    }
}

// ---------------------------------------------------------------------------------------
// The parent: calibration, modes, report

/// Everything one run measured.
#[derive(Debug, Serialize)]
pub struct Report {
    pub options: Options,
    pub calibration: Calibration,
    pub modes: Vec<ModeResult>,
}

#[derive(Debug, Serialize)]
pub struct ModeResult {
    pub label: String,
    pub plan: Plan,
    /// The HP (the first of several); in an arrival mode, its pooled first seconds.
    pub hp: Option<HpStats>,
    /// The other HP processes of a multi-process mode.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hp_more: Vec<HpStats>,
    /// The LP; in a multi-process mode, all LPs together (launches and rates summed).
    pub lp: Option<LpResult>,
    /// Each LP process, when there are several.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lp_each: Vec<LpResult>,
    /// HP p50 and p99 over those of `hp-alone`.
    pub hp_p50_vs_alone: Option<f64>,
    pub hp_p99_vs_alone: Option<f64>,
    /// LP throughput over that of `lp-bare`.
    pub lp_vs_alone: Option<f64>,
    pub error: Option<String>,
}

/// HP turnaround summary (ms) plus the raw samples.
#[derive(Debug, Serialize)]
pub struct HpStats {
    pub n: usize,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
    pub queue_to_start_p50_ms: f64,
    pub queue_to_start_p99_ms: f64,
    pub arbiter: Option<ArbiterStats>,
    pub samples: Vec<HpSample>,
}

impl HpStats {
    fn new(r: HpResult) -> HpStats {
        let mut t: Vec<f64> = r.samples.iter().map(|s| s.turnaround_ms).collect();
        let mut q: Vec<f64> = r.samples.iter().map(|s| s.queue_to_start_ms).collect();
        t.sort_by(f64::total_cmp);
        q.sort_by(f64::total_cmp);
        HpStats {
            n: t.len(),
            p50_ms: percentile(&t, 50.0),
            p90_ms: percentile(&t, 90.0),
            p99_ms: percentile(&t, 99.0),
            max_ms: t.last().copied().unwrap_or(f64::NAN),
            mean_ms: t.iter().sum::<f64>() / t.len() as f64,
            queue_to_start_p50_ms: percentile(&q, 50.0),
            queue_to_start_p99_ms: percentile(&q, 99.0),
            arbiter: r.arbiter,
            samples: r.samples,
        }
    }
}

/// Nearest-rank percentile of sorted values (NaN when empty).
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Runs the calibration and every mode. A mode that fails is reported with its error and
/// the run goes on.
pub fn run(o: &Options, launcher: &Launcher) -> Report {
    let root = scratch_dir();
    let calibration = calibrate(o, launcher, &root).unwrap_or_else(|e| {
        let _ = std::fs::remove_dir_all(&root);
        panic!("calibration failed: {e}")
    });
    eprintln!(
        "calibrated on {}: LP {} items x {} iters = {:.2} ms, HP {} items x {} iters = {:.3} ms",
        calibration.device,
        calibration.lp.items,
        calibration.lp.iters,
        calibration.lp_ms,
        calibration.hp.items,
        calibration.hp.iters,
        calibration.hp_ms
    );
    let mut modes = Vec::new();
    for (i, plan) in plans(o).into_iter().enumerate() {
        eprintln!("running {} ({} s)", plan.label, o.duration_s);
        let run = RunDir::new(&root, i + 1, &plan.sched);
        let (hps, lps, error) = match run_mode(&plan, o, &calibration, launcher, &run) {
            Ok((hps, lps)) => (hps, lps, None),
            Err(e) => {
                eprintln!("{}: {e}", plan.label);
                (Vec::new(), Vec::new(), Some(e))
            }
        };
        let mut hps = hps.into_iter().map(HpStats::new);
        let lp = LpResult::total(&lps);
        modes.push(ModeResult {
            label: plan.label.clone(),
            plan,
            hp: hps.next(),
            hp_more: hps.collect(),
            lp,
            lp_each: if lps.len() > 1 { lps } else { Vec::new() },
            hp_p50_vs_alone: None,
            hp_p99_vs_alone: None,
            lp_vs_alone: None,
            error,
        });
    }
    let _ = std::fs::remove_dir_all(&root);
    add_ratios(&mut modes);
    Report {
        options: o.clone(),
        calibration,
        modes,
    }
}

/// A private directory for the run's arbiter segments and config files; on tmpfs where
/// there is one, as the default `/dev/shm` is.
fn scratch_dir() -> PathBuf {
    let base = Path::new("/dev/shm");
    let base = if base.is_dir() {
        base.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    let dir = base.join(format!("softpreempt-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

fn calibrate(o: &Options, launcher: &Launcher, root: &Path) -> Result<Calibration, String> {
    let role = Role::Calibrate {
        lp_ms: o.lp_ms,
        hp_us: o.hp_us,
        lp_items: o.lp_items,
        hp_items: o.hp_items,
        lp_kind: o.lp_kernel,
        lp_waves: o.lp_waves,
    };
    let run = RunDir::new(root, 0, &Sched::default());
    let mut child = Child::spawn("calibrate", launcher, &role, &run, "normal")?;
    let msg = child.recv()?;
    child.finish()?;
    match msg {
        Msg::Calibrated(c) => Ok(c),
        m => Err(format!("expected Calibrated, got {m:?}")),
    }
}

/// Names of the HP and LP processes of a mode (in messages).
const HP_NAMES: [&str; 2] = ["hp", "hp2"];
const LP_NAMES: [&str; 3] = ["lp", "lp2", "lp3"];

/// One mode. Co-run modes start the idle HP, the LPs and the HPs (each ready before the
/// next starts, so the HP measures against an already saturated device), say `go`, and
/// collect the results. Arrival modes start the HP first (it warms up, then closes its
/// queue), then the LP, and let the HP's queue arrive next to the running LP.
fn run_mode(
    plan: &Plan,
    o: &Options,
    cal: &Calibration,
    launcher: &Launcher,
    run: &RunDir,
) -> Result<(Vec<HpResult>, Vec<LpResult>), String> {
    let procs = plan.mode.processes();
    let mut idle = None;
    if procs.idle_hp {
        let role = Role::IdleHp {
            platform: Platform::Sp,
        };
        let mut c = Child::spawn("idle-hp", launcher, &role, run, "high")?;
        c.expect_ready()?;
        idle = Some(c);
    }
    let hp_role = |platform, i: usize| Role::Hp {
        platform,
        kernel: cal.hp,
        gap_ms: o.gap_ms,
        burst: o.hp_burst,
        duration_s: if procs.arrival {
            o.arrival_s
        } else {
            o.duration_s
        },
        // Several HPs are independent streams; one HP sees the same arrivals in every mode.
        seed: o.seed.wrapping_add(i as u64 * 7919),
        arrivals: procs.arrival,
    };
    let spawn_hps = || -> Result<Vec<Child>, String> {
        let Some((platform, n)) = procs.hp else {
            return Ok(Vec::new());
        };
        let mut v = Vec::new();
        for (i, name) in HP_NAMES.iter().take(n).enumerate() {
            let mut c = Child::spawn(name, launcher, &hp_role(platform, i), run, "high")?;
            c.expect_ready()?;
            v.push(c);
        }
        Ok(v)
    };
    // An arriving HP warms up (program build, lazily compiled code, first touch of its
    // buffer) before the LP starts, and closes its queue: what it measures later is the
    // arrival itself, not hidden behind unmeasured warm-up requests next to the LP.
    let mut hps = if procs.arrival {
        spawn_hps()?
    } else {
        Vec::new()
    };
    let mut lps = Vec::new();
    if let Some((platform, n)) = procs.lp {
        for name in LP_NAMES.iter().take(n) {
            let role = Role::Lp {
                platform,
                kernel: cal.lp,
                depth: o.lp_depth,
            };
            let mut c = Child::spawn(name, launcher, &role, run, "low")?;
            c.expect_ready()?;
            lps.push(c);
        }
    }
    let mut hp_results = Vec::new();
    if procs.arrival {
        for c in &mut lps {
            c.go()?;
        }
        // Each arrival: the LP has run alone for at least a second (and several of its
        // launches), long enough for the scheduler to have forgotten any earlier HP
        // (its activity window is 500 ms); then the HP opens a fresh queue (on
        // SoftPreempt, a new arbiter client), measures, and closes it again.
        let settle = (3.0 * o.lp_depth as f64 * cal.lp_ms / 1e3).max(1.0);
        for c in &mut hps {
            for _ in 0..o.arrival_reps {
                std::thread::sleep(Duration::from_secs_f64(settle));
                c.go()?;
                c.expect_ready()?;
            }
            c.stop();
        }
    } else {
        hps = spawn_hps()?;
        // The LP's launches sent before the HP registered are already on the vendor's
        // queue; measure once they have drained, so the figures are the steady state (in
        // every co-run mode alike). The arrival modes measure that transient.
        if !lps.is_empty() && !hps.is_empty() {
            let drain_ms = o.lp_depth as f64 * cal.lp_ms * 1.5 + 20.0;
            std::thread::sleep(Duration::from_secs_f64(drain_ms / 1e3));
        }
        for c in lps.iter_mut().chain(hps.iter_mut()) {
            c.go()?;
        }
        if hps.is_empty() {
            std::thread::sleep(Duration::from_secs_f64(o.duration_s));
        }
    }
    for mut c in hps {
        let r = c.recv()?;
        c.finish()?;
        match r {
            Msg::Hp(r) => hp_results.push(r),
            m => return Err(format!("hp: expected a result, got {m:?}")),
        }
    }
    // Stop every LP first, then collect: they stop at the same moment.
    for c in &mut lps {
        c.stop();
    }
    let mut lp_results = Vec::new();
    for mut c in lps {
        let r = c.recv()?;
        c.finish()?;
        match r {
            Msg::Lp(r) => lp_results.push(r),
            m => return Err(format!("lp: expected a result, got {m:?}")),
        }
    }
    if let Some(c) = idle {
        c.finish()?;
    }
    Ok((hp_results, lp_results))
}

/// Fills in the ratios against the `hp-alone` and `lp-bare` rows, when they ran.
fn add_ratios(modes: &mut [ModeResult]) {
    let base = |m: Mode| modes.iter().find(|r| r.plan.mode == m && r.error.is_none());
    let hp_alone = base(Mode::HpAlone).and_then(|r| r.hp.as_ref().map(|h| (h.p50_ms, h.p99_ms)));
    let lp_alone = base(Mode::LpBare).and_then(|r| r.lp.as_ref().map(|l| l.per_s));
    for r in modes.iter_mut() {
        r.hp_p50_vs_alone = hp_alone.zip(r.hp.as_ref()).map(|(a, h)| h.p50_ms / a.0);
        r.hp_p99_vs_alone = hp_alone.zip(r.hp.as_ref()).map(|(a, h)| h.p99_ms / a.1);
        r.lp_vs_alone = lp_alone.zip(r.lp.as_ref()).map(|(a, l)| l.per_s / a);
    }
}

impl Report {
    pub fn print_table(&self) {
        let c = &self.calibration;
        println!(
            "Preemption benchmark on {} ({} s per mode): LP {} kernel {:.2} ms alone, HP \
             kernel {:.3} ms alone x{}, HP mean gap {} ms",
            c.device,
            self.options.duration_s,
            c.lp.kind.name(),
            c.lp_ms,
            c.hp_ms,
            self.options.hp_burst,
            self.options.gap_ms
        );
        println!(
            "{:<22} {:>5} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>10} {:>9} {:>9} {:>7} {:>8} {:>8} {:>7}",
            "mode",
            "HP n",
            "p50 ms",
            "p90 ms",
            "p99 ms",
            "max ms",
            "q2s p99",
            "p99/alone",
            "LP launch/s",
            "LP/alone",
            "slices/s",
            "yields",
            "yld p99",
            "hs wait",
            "expired"
        );
        let alone_p99 = self
            .modes
            .iter()
            .find(|m| m.plan.mode == Mode::HpAlone)
            .and_then(|m| m.hp.as_ref().map(|h| h.p99_ms));
        for m in &self.modes {
            println!("{}", m.row());
            for (i, h) in m.hp_more.iter().enumerate() {
                let label = format!("  {} hp {}", m.label, i + 2);
                println!("{}", hp_row(&label, h, alone_p99.map(|a| h.p99_ms / a)));
            }
        }
        if self.modes.iter().any(|m| m.plan.mode.processes().arrival) {
            println!(
                "arrival-*: the HP's first {} s after its queue opens next to an LP already \
                 running alone for >= 1 s ({} arrivals pooled); LP figures span the whole mode",
                self.options.arrival_s, self.options.arrival_reps
            );
        }
        if self.modes.iter().any(|m| !m.hp_more.is_empty()) {
            println!("multi-*: LP figures are the 3 LP processes together");
        }
        println!(
            "yields: the LP's launches that left the device on request; yld p99: their \
             latency, request to off the device, ms (log2 bucket edge); hs wait: the HP's \
             mean wait for the LP to leave before it submitted, ms; expired: waits that \
             reached the bound with the LP still on the device"
        );
    }
}

/// An HP-only table row (the second HP of a multi-process mode).
fn hp_row(label: &str, h: &HpStats, vs_alone: Option<f64>) -> String {
    format!(
        "{:<22} {:>5} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>9}",
        label,
        h.n,
        h.p50_ms,
        h.p90_ms,
        h.p99_ms,
        h.max_ms,
        h.queue_to_start_p99_ms,
        vs_alone.map_or("-".into(), |v| format!("{v:.2}"))
    )
}

impl ModeResult {
    fn row(&self) -> String {
        if let Some(e) = &self.error {
            return format!("{:<22} FAILED: {e}", self.label);
        }
        let f = |v: Option<f64>, prec: usize| match v {
            Some(v) => format!("{v:.prec$}"),
            None => "-".into(),
        };
        let hp = self.hp.as_ref();
        let lp = self.lp.as_ref();
        let lpa = lp.and_then(|l| l.arbiter.as_ref());
        let hpa = hp.and_then(|h| h.arbiter.as_ref());
        format!(
            "{:<22} {:>5} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>10} {:>9} {:>9} {:>7} {:>8} {:>8} {:>7}",
            self.label,
            hp.map_or("-".into(), |h| h.n.to_string()),
            f(hp.map(|h| h.p50_ms), 3),
            f(hp.map(|h| h.p90_ms), 3),
            f(hp.map(|h| h.p99_ms), 3),
            f(hp.map(|h| h.max_ms), 3),
            f(hp.map(|h| h.queue_to_start_p99_ms), 3),
            f(self.hp_p99_vs_alone, 2),
            f(lp.map(|l| l.per_s), 2),
            f(self.lp_vs_alone, 4),
            f(lp.and_then(LpResult::slices_per_s), 0),
            lpa.map_or("-".into(), |a| a.yields_done.to_string()),
            f(lpa.and_then(|a| a.yield_p99_ms), 3),
            f(hpa.and_then(ArbiterStats::hs_wait_mean_ms), 3),
            hpa.map_or("-".into(), |a| a.hs_expired.to_string()),
        )
    }
}

// ---------------------------------------------------------------------------------------
// The child roles

pub mod child {
    use super::common::*;
    use super::*;
    use opencl_sys::*;
    use std::collections::VecDeque;
    use std::ffi::c_void;
    use std::sync::{Arc, Condvar, Mutex};

    /// Runs the role named in [`SPEC_ENV`], if any; returns whether this was a child.
    pub fn run_from_env() -> bool {
        let Ok(spec) = std::env::var(SPEC_ENV) else {
            return false;
        };
        let role: Role = serde_json::from_str(&spec).expect("bad SOFTPREEMPT_BENCH_SPEC");
        match role {
            Role::Calibrate {
                lp_ms,
                hp_us,
                lp_items,
                hp_items,
                lp_kind,
                lp_waves,
            } => say(&Msg::Calibrated(calibrate(
                lp_ms, hp_us, lp_items, hp_items, lp_kind, lp_waves,
            ))),
            Role::Lp {
                platform,
                kernel,
                depth,
            } => say(&Msg::Lp(lp(platform, kernel, depth))),
            Role::Hp {
                platform,
                kernel,
                gap_ms,
                burst,
                duration_s,
                seed,
                arrivals,
            } => {
                let load = HpLoad {
                    gap_ms,
                    burst,
                    duration_s,
                    seed,
                };
                say(&Msg::Hp(hp(platform, kernel, load, arrivals)))
            }
            Role::IdleHp { platform } => idle_hp(platform),
        }
        true
    }

    fn say(m: &Msg) {
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "{MARK}{}",
            serde_json::to_string(m).expect("msg serializes")
        )
        .and_then(|_| out.flush())
        .expect("stdout");
    }

    /// A compute-bound kernel: a serial chain of FMAs per work-item, so a work-item's
    /// length is `iters`; it reads only `get_global_id` (sliceable). `out` is indexed
    /// modulo its size (`omask`), so a launch may have far more work-items than it has.
    const SPIN_SRC: &str = "
        __kernel void spin(__global float *out, uint iters, uint omask) {
            size_t i = get_global_id(0);
            float a = (float)(i & 1023) * 1e-3f;
            float b = 1.0f - a * 1e-6f;
            for (uint k = 0; k < iters; ++k)
                a = fma(a, b, 1e-7f);
            out[i & omask] = a;
        }";

    /// A memory-bound kernel: each work-item sums `iters` floats, one per pass over the
    /// launch, so a pass reads `stride` consecutive floats (coalesced) and the passes
    /// stream through a buffer far larger than the caches. Reads only `get_global_id`.
    const STREAM_SRC: &str = "
        __kernel void stream(__global float *out, uint iters, uint omask,
                             __global const float *in, uint imask, uint stride) {
            size_t i = get_global_id(0);
            float acc = 0.0f;
            for (uint k = 0; k < iters; ++k)
                acc += in[(i + (size_t)k * stride) & imask];
            out[i & omask] = acc;
        }";

    /// A tiled matrix product C = A B, 16x16 tiles in `__local` memory, `iters` tiles
    /// deep; C is `items` = side x side, launched 2D with a 16x16 local size. It reads
    /// `get_group_id`, so SoftPreempt slices it only by rewriting it (a hidden geometry
    /// argument). A and B wrap around one 64 MiB buffer (`imask`): the access pattern of
    /// a real GEMM, without gigabytes of operands.
    const GEMM_SRC: &str = "
        #define TS 16
        __kernel void gemm(__global float *out, uint iters, uint omask,
                           __global const float *in, uint imask, uint stride) {
            __local float As[TS][TS];
            __local float Bs[TS][TS];
            size_t lx = get_local_id(0), ly = get_local_id(1);
            size_t col = get_group_id(0) * TS + lx;
            size_t row = get_group_id(1) * TS + ly;
            size_t k_len = (size_t)iters * TS;
            float acc = 0.0f;
            for (uint t = 0; t < iters; ++t) {
                As[ly][lx] = in[(row * k_len + t * TS + lx) & imask];
                Bs[ly][lx] = in[((t * TS + ly) * stride + col + 12345) & imask];
                barrier(CLK_LOCAL_MEM_FENCE);
                for (int k = 0; k < TS; ++k)
                    acc = fma(As[ly][k], Bs[k][lx], acc);
                barrier(CLK_LOCAL_MEM_FENCE);
            }
            out[(row * stride + col) & omask] = acc;
        }";

    /// An uneven kernel: the escape-time Mandelbrot of `softpreempt demo` over the same
    /// view, at most `iters` iterations per point. Points inside the set run all `iters`,
    /// points far outside one or two, so the cost per row peaks in the middle of the range.
    /// Reads only `get_global_id`.
    const MANDEL_SRC: &str = "
        __kernel void mandel(__global uint *out, uint iters, uint omask, uint width) {
            size_t x = get_global_id(0), y = get_global_id(1);
            float cr = -2.0f + 2.5f * (float)x / (float)width;
            float ci = -1.25f + 2.5f * (float)y / (float)width;
            float zr = 0.0f, zi = 0.0f;
            uint i = 0;
            while (i < iters && zr * zr + zi * zi < 4.0f) {
                float t = zr * zr - zi * zi + cr;
                zi = 2.0f * zr * zi + ci;
                zr = t;
                i++;
            }
            out[(y * width + x) & omask] = i;
        }";

    /// The side of a square 2D launch of about `items` work-items (a multiple of 16).
    fn square_side(items: usize) -> usize {
        (((items as f64).sqrt() as usize) / 16).max(1) * 16
    }

    /// Most floats in a kernel's `out` (a power of two): 64 MiB.
    const OUT_FLOATS: usize = 1 << 24;

    /// Bytes of `stream`'s input: 256 MiB on a GPU (past any L2), 64 MiB on a CPU device.
    fn stream_bytes(gpu: bool) -> usize {
        if gpu {
            256 << 20
        } else {
            64 << 20
        }
    }

    /// One queue with a benchmark kernel ready to launch over `items` work-items; its
    /// arguments 0 (`out`), 1 (`iters`) and 2 (`omask`) are common to every kind.
    struct Spin {
        env: Env,
        kernel: cl_kernel,
        out: cl_mem,
        input: Option<cl_mem>,
        items: usize,
        kind: KernelKind,
        /// The side of a square 2D launch (`gemm`: local 16 x 16; `mandel`: NULL local).
        side: Option<usize>,
    }

    fn set_arg<T>(kernel: cl_kernel, index: cl_uint, v: &T) {
        // SAFETY: `v` is a live value of the size passed, of the type the kernel's
        // argument `index` takes (the callers below match SPIN_SRC and STREAM_SRC).
        ok(unsafe {
            clSetKernelArg(
                kernel,
                index,
                std::mem::size_of::<T>(),
                v as *const T as *const c_void,
            )
        });
    }

    impl Spin {
        fn new(platform: Platform, items: usize, kind: KernelKind) -> Spin {
            let env = Env::new(match platform {
                Platform::Bare => bare_platform(),
                Platform::Sp => sp_platform(),
            });
            let (src, name) = match kind {
                KernelKind::Compute => (SPIN_SRC, "spin"),
                KernelKind::Memory => (STREAM_SRC, "stream"),
                KernelKind::Gemm => (GEMM_SRC, "gemm"),
                KernelKind::Mandel => (MANDEL_SRC, "mandel"),
            };
            let side =
                matches!(kind, KernelKind::Gemm | KernelKind::Mandel).then(|| square_side(items));
            let kernel = env.kernel(env.program(src), name);
            // The largest power of two not above `items`, at most OUT_FLOATS.
            let out_floats = 1usize << items.clamp(1, OUT_FLOATS).ilog2();
            let out = env.buffer(out_floats * std::mem::size_of::<f32>());
            set_arg(kernel, 0, &out);
            set_arg(kernel, 2, &((out_floats - 1) as cl_uint));
            if let (KernelKind::Mandel, Some(width)) = (kind, side) {
                set_arg(kernel, 3, &(width as cl_uint));
            }
            let input = matches!(kind, KernelKind::Memory | KernelKind::Gemm).then(|| {
                let dtype: cl_device_type = device_info(env.device, CL_DEVICE_TYPE);
                let bytes = stream_bytes(dtype & CL_DEVICE_TYPE_GPU as cl_device_type != 0);
                let input = env.buffer(bytes);
                let floats = bytes / std::mem::size_of::<f32>();
                let one = 1.0f32;
                // SAFETY: a pattern fill of the whole buffer, waited for by clFinish.
                unsafe {
                    ok(clEnqueueFillBuffer(
                        env.queue,
                        input,
                        &one as *const f32 as *const c_void,
                        std::mem::size_of::<f32>(),
                        0,
                        bytes,
                        0,
                        std::ptr::null(),
                        std::ptr::null_mut(),
                    ));
                    ok(clFinish(env.queue));
                }
                set_arg(kernel, 3, &input);
                set_arg(kernel, 4, &((floats - 1) as cl_uint));
                let stride = side.unwrap_or(items).min(u32::MAX as usize);
                set_arg(kernel, 5, &(stride as cl_uint));
                input
            });
            Spin {
                env,
                kernel,
                out,
                input,
                items,
                kind,
                side,
            }
        }

        fn set_iters(&self, iters: u32) {
            set_arg(self.kernel, 1, &(iters as cl_uint));
        }

        /// Enqueues one launch (NULL local size, as most applications do; `gemm` 2D with
        /// its 16x16 tiles) and flushes it so that the device starts it without waiting
        /// for a later call.
        fn enqueue(&self) -> cl_event {
            let mut ev = std::ptr::null_mut();
            let (dims, global, local) = match (self.side, self.kind) {
                (Some(n), KernelKind::Gemm) => (2, [n, n], Some([16usize, 16])),
                (Some(n), _) => (2, [n, n], None),
                (None, _) => (1, [self.items, 1], None),
            };
            // SAFETY: a valid queue and kernel with every argument set; the size arrays
            // outlive the call; one event out.
            unsafe {
                ok(clEnqueueNDRangeKernel(
                    self.env.queue,
                    self.kernel,
                    dims,
                    std::ptr::null(),
                    global.as_ptr(),
                    local.as_ref().map_or(std::ptr::null(), |l| l.as_ptr()),
                    0,
                    std::ptr::null(),
                    &mut ev,
                ));
                ok(clFlush(self.env.queue));
            }
            ev
        }

        /// One launch waited for; its device time (profiling END - START).
        fn time_once(&self) -> Duration {
            let ev = self.enqueue();
            wait(ev);
            let d = profile(ev, CL_PROFILING_COMMAND_END)
                .saturating_sub(profile(ev, CL_PROFILING_COMMAND_START));
            release(ev);
            Duration::from_nanos(d)
        }
    }

    impl Drop for Spin {
        fn drop(&mut self) {
            self.env.close_queue();
            // SAFETY: releasing what `new` created, once; the queue has drained.
            unsafe {
                clReleaseKernel(self.kernel);
                clReleaseMemObject(self.out);
                if let Some(m) = self.input {
                    clReleaseMemObject(m);
                }
            }
        }
    }

    fn wait(ev: cl_event) {
        // SAFETY: one valid event.
        ok(unsafe { clWaitForEvents(1, &ev) });
    }

    fn release(ev: cl_event) {
        // SAFETY: the event was returned by an enqueue and is released once.
        ok(unsafe { clReleaseEvent(ev) });
    }

    fn profile(ev: cl_event, what: cl_profiling_info) -> u64 {
        // SAFETY: a valid, completed event of a profiling queue; a cl_ulong out value.
        info_scalar(|s, v, r| unsafe { clGetEventProfilingInfo(ev, what, s, v, r) })
    }

    fn device_info<T: Copy + Default>(d: cl_device_id, what: cl_device_info) -> T {
        // SAFETY: a valid device and an out value of the parameter's type.
        info_scalar(|s, v, r| unsafe { clGetDeviceInfo(d, what, s, v, r) })
    }

    /// Sizes `spin` so that one launch takes `target` alone: grow `iters` geometrically
    /// until a launch is long enough to time, then scale linearly (the kernel is a serial
    /// chain, so its time is linear in `iters`) and refine once.
    fn size_iters(spin: &Spin, target: Duration) -> (u32, Duration) {
        let median = |iters: u32| {
            spin.set_iters(iters);
            let mut t: Vec<Duration> = (0..3).map(|_| spin.time_once()).collect();
            t.sort();
            t[1].max(Duration::from_nanos(1))
        };
        let scale = |iters: u32, t: Duration| {
            let v = iters as f64 * target.as_secs_f64() / t.as_secs_f64();
            v.clamp(1.0, u32::MAX as f64) as u32
        };
        let mut iters = 16u32;
        let mut t = median(iters);
        while t < target / 8 && iters < u32::MAX / 8 {
            iters *= 8;
            t = median(iters);
        }
        for _ in 0..2 {
            iters = scale(iters, t);
            t = median(iters);
        }
        (iters, t)
    }

    fn calibrate(
        lp_ms: f64,
        hp_us: f64,
        lp_items: Option<usize>,
        hp_items: Option<usize>,
        lp_kind: KernelKind,
        lp_waves: Option<u32>,
    ) -> Calibration {
        let platform = bare_platform();
        let dev = device(platform);
        let dtype: cl_device_type = device_info(dev, CL_DEVICE_TYPE);
        let gpu = dtype & CL_DEVICE_TYPE_GPU as cl_device_type != 0;
        let cus: cl_uint = device_info(dev, CL_DEVICE_MAX_COMPUTE_UNITS);
        // SAFETY: a valid device; info_bytes passes matching sizes and buffers.
        let name = cstr(&info_bytes(|s, v, r| unsafe {
            clGetDeviceInfo(dev, CL_DEVICE_NAME, s, v, r)
        }));
        // A GPU needs several full waves to be saturated (2048 threads per SM on recent
        // NVIDIA parts); a CPU device needs enough work-groups to slice finely.
        let lp_target = Duration::from_secs_f64(lp_ms / 1e3);
        let hp_target = Duration::from_secs_f64(hp_us / 1e6);
        let size = |kind, items: usize, target| {
            let spin = Spin::new(Platform::Bare, items, kind);
            let (iters, t) = size_iters(&spin, target);
            (KernelSpec { items, iters, kind }, t)
        };
        let ((lp, lp_t), (hp, hp_t)) = if let Some(n) = lp_waves {
            // Long work-items: `n` full waves per launch, `iters` sized to the target.
            let wave = cus as usize * if gpu { 2048 } else { 64 };
            let hp = hp_items.unwrap_or(if gpu { wave } else { cus as usize * 64 });
            (
                size(lp_kind, wave * n.max(1) as usize, lp_target),
                if gpu {
                    size_waves(KernelKind::Compute, hp, hp_target)
                } else {
                    size(KernelKind::Compute, hp, hp_target)
                },
            )
        } else if matches!(lp_kind, KernelKind::Gemm | KernelKind::Mandel) {
            // GEMM: a large C and a K depth that fills the time: thousands of short
            // work-groups, as in a real large GEMM (a deep K with few tiles of C would
            // make each work-group run for milliseconds). Mandelbrot: a large image, its
            // iteration cap sized to the target (the time is close to linear in it, as
            // the points inside the set dominate).
            let side = if gpu { 8192 } else { 512 };
            let hp_items = hp_items.unwrap_or(cus as usize * if gpu { 2048 } else { 64 });
            (
                size(lp_kind, lp_items.unwrap_or(side * side), lp_target),
                if gpu {
                    size_waves(KernelKind::Compute, hp_items, hp_target)
                } else {
                    size(KernelKind::Compute, hp_items, hp_target)
                },
            )
        } else if gpu {
            // Enough work-items to fill every SM (2048 resident threads each on recent
            // NVIDIA parts), so a wave is one pass over the whole device.
            let wave = cus as usize * 2048;
            (
                size_waves(lp_kind, lp_items.unwrap_or(wave), lp_target),
                size_waves(KernelKind::Compute, hp_items.unwrap_or(wave), hp_target),
            )
        } else {
            // A CPU device runs work-items one after another in each work-group, so a
            // work-item is short whatever the launch: only `iters` needs sizing.
            (
                size(lp_kind, lp_items.unwrap_or(cus as usize * 4096), lp_target),
                size(
                    KernelKind::Compute,
                    hp_items.unwrap_or(cus as usize * 64),
                    hp_target,
                ),
            )
        };
        Calibration {
            device: name,
            gpu,
            compute_units: cus,
            lp,
            hp,
            lp_ms: lp_t.as_secs_f64() * 1e3,
            hp_ms: hp_t.as_secs_f64() * 1e3,
        }
    }

    /// Length of one wave of work-items on a GPU, in µs.
    const WAVE_US: u64 = 50;

    /// The GPU shape of a long kernel: many short work-items, as real long kernels have
    /// (a GEMM or a convolution is thousands of short work-groups). One launch of `wave`
    /// work-items is sized to take about [`WAVE_US`]; then the launch gets as many
    /// waves as fill `target`. A kernel made of few long work-items instead could never
    /// be sliced finer than one work-item's time.
    fn size_waves(kind: KernelKind, wave: usize, target: Duration) -> (KernelSpec, Duration) {
        let (iters, t_wave) = size_iters(
            &Spin::new(Platform::Bare, wave, kind),
            Duration::from_micros(WAVE_US),
        );
        let waves = |t: Duration| (target.as_secs_f64() / t.as_secs_f64()).max(1.0);
        let mut items = wave * waves(t_wave).round() as usize;
        let mut t = t_wave;
        // The launch's time is close to linear in its work-items: refine twice, then
        // measure what is kept.
        for round in 0..3 {
            let spin = Spin::new(Platform::Bare, items, kind);
            spin.set_iters(iters);
            let mut ts: Vec<Duration> = (0..3).map(|_| spin.time_once()).collect();
            ts.sort();
            t = ts[1].max(Duration::from_nanos(1));
            if round < 2 {
                // A whole number of 1024-item blocks: with a NULL local size a vendor may
                // otherwise pick a tiny work-group that divides an odd global size.
                let scaled = items as f64 * target.as_secs_f64() / t.as_secs_f64();
                items = ((scaled as usize) / 1024 * 1024).max(wave);
            }
        }
        (KernelSpec { items, iters, kind }, t)
    }

    /// The parent's commands, read from stdin by a helper thread: each `go` starts a
    /// measurement (an arriving HP gets one per arrival), end of input stops it.
    #[derive(Clone)]
    struct Control(Arc<(Mutex<Commands>, Condvar)>);

    #[derive(Clone, Copy, Default)]
    struct Commands {
        gos: u32,
        stop: bool,
    }

    impl Control {
        fn start() -> Control {
            let c = Control(Arc::new((Mutex::default(), Condvar::new())));
            let reader = c.clone();
            std::thread::spawn(move || {
                for line in std::io::stdin().lock().lines() {
                    match line {
                        Ok(l) if l.trim() == "go" => reader.update(|c| c.gos += 1),
                        Ok(_) => {}
                        Err(_) => break,
                    }
                }
                reader.update(|c| c.stop = true);
            });
            c
        }

        fn update(&self, f: impl FnOnce(&mut Commands)) {
            f(&mut self.0 .0.lock().unwrap());
            self.0 .1.notify_all();
        }

        fn now(&self) -> Commands {
            *self.0 .0.lock().unwrap()
        }

        /// Waits for the `n`th `go`; false if stopped before it came.
        fn wait_go(&self, n: u32) -> bool {
            let mut g = self.0 .0.lock().unwrap();
            while g.gos < n && !g.stop {
                g = self.0 .1.wait(g).unwrap();
            }
            g.gos >= n
        }

        fn wait_stop(&self) {
            let mut g = self.0 .0.lock().unwrap();
            while !g.stop {
                g = self.0 .1.wait(g).unwrap();
            }
        }
    }

    /// Keeps `depth` launches queued; counts completions between `go` and stop. The
    /// rate is taken between the first and the last counted completion, so the partly
    /// done launches at either edge do not bias it.
    fn lp(platform: Platform, kernel: KernelSpec, depth: usize) -> LpResult {
        let spin = Spin::new(platform, kernel.items, kernel.kind);
        spin.set_iters(kernel.iters);
        spin.time_once(); // builds lazily compiled code before the clock starts
        let ctl = Control::start();
        say(&Msg::Ready);
        let mut inflight = VecDeque::new();
        let (mut first, mut last, mut count) = (None, None, 0u64);
        loop {
            while inflight.len() < depth {
                inflight.push_back(spin.enqueue());
            }
            let ev = inflight.pop_front().expect("depth >= 1");
            wait(ev);
            let now = Instant::now();
            release(ev);
            let cmd = ctl.now();
            if cmd.stop {
                break;
            }
            if cmd.gos > 0 {
                first.get_or_insert(now);
                last = Some(now);
                count += 1;
            }
        }
        for ev in inflight {
            wait(ev);
            release(ev);
        }
        let seconds = match (first, last) {
            (Some(f), Some(l)) => (l - f).as_secs_f64(),
            _ => 0.0,
        };
        let launches = count.saturating_sub(1);
        LpResult {
            launches,
            seconds,
            // Fewer than two completions in the window: the LP was starved.
            per_s: if seconds > 0.0 {
                launches as f64 / seconds
            } else {
                0.0
            },
            arbiter: own_arbiter_stats(),
        }
    }

    /// The HP's load: requests of `burst` kernels at Poisson arrivals, for `duration_s`.
    struct HpLoad {
        gap_ms: f64,
        burst: u32,
        duration_s: f64,
        seed: u64,
    }

    /// Requests at Poisson arrivals (an open-loop schedule: a request that arrives while
    /// the previous one still runs is issued at once, late). Each request is `burst`
    /// kernels, each waited for before the next.
    ///
    /// With `arrivals`, the warm-up runs now, before the parent starts the LP, and the
    /// queue is then closed: on SoftPreempt its arbiter client goes away, so the LP runs
    /// alone. Each `go` is an arrival: a fresh queue (program, kernel and buffers kept, so
    /// nothing is compiled or first touched while measuring), measured from its first
    /// request, then closed; `Ready` tells the parent it is closed. The samples of every
    /// arrival are pooled.
    fn hp(platform: Platform, kernel: KernelSpec, load: HpLoad, arrivals: bool) -> HpResult {
        let mut spin = Spin::new(platform, kernel.items, kernel.kind);
        spin.set_iters(kernel.iters);
        for _ in 0..3 {
            spin.time_once(); // lazily compiled code, first-touch of the buffer
        }
        if arrivals {
            spin.env.close_queue();
        }
        let ctl = Control::start();
        say(&Msg::Ready);
        let mut samples = Vec::new();
        if !arrivals {
            ctl.wait_go(1);
            requests(&spin, &load, load.seed, &mut samples);
            return HpResult {
                samples,
                arbiter: own_arbiter_stats(),
            };
        }
        let mut arbiter: Option<ArbiterStats> = None;
        let mut n = 0;
        while ctl.wait_go(n + 1) {
            n += 1;
            spin.env.open_queue();
            requests(&spin, &load, load.seed.wrapping_add(n as u64), &mut samples);
            // Read while the queue is open: a closed queue's slot is freed.
            if let Some(a) = own_arbiter_stats() {
                arbiter = Some(arbiter.map_or(a.clone(), |b| b.sum(&a)));
            }
            spin.env.close_queue();
            say(&Msg::Ready);
        }
        HpResult { samples, arbiter }
    }

    /// `load`'s requests, timed from now, into `samples`.
    fn requests(spin: &Spin, load: &HpLoad, seed: u64, samples: &mut Vec<HpSample>) {
        let mut rng = Rng(seed);
        let start = Instant::now();
        let end = start + Duration::from_secs_f64(load.duration_s);
        let mut next = start;
        loop {
            next += Duration::from_secs_f64(rng.exponential(load.gap_ms / 1e3));
            if next >= end {
                break;
            }
            if let Some(d) = next.checked_duration_since(Instant::now()) {
                std::thread::sleep(d);
            }
            samples.push(request(spin, load.burst));
        }
    }

    fn request(spin: &Spin, burst: u32) -> HpSample {
        let start_ns = softpreempt_sched::monotonic_ns();
        let t0 = Instant::now();
        let mut queue_to_start_ms = 0.0;
        for i in 0..burst {
            let ev = spin.enqueue();
            wait(ev);
            if i == 0 {
                let q = profile(ev, CL_PROFILING_COMMAND_QUEUED);
                let s = profile(ev, CL_PROFILING_COMMAND_START);
                queue_to_start_ms = s.saturating_sub(q) as f64 / 1e6;
            }
            release(ev);
        }
        HpSample {
            start_ns,
            turnaround_ms: t0.elapsed().as_secs_f64() * 1e3,
            queue_to_start_ms,
        }
    }

    /// A registered high-priority queue that has run one tiny kernel and stays idle.
    fn idle_hp(platform: Platform) {
        let spin = Spin::new(platform, 1, KernelKind::Compute);
        spin.set_iters(1);
        spin.time_once();
        let ctl = Control::start();
        say(&Msg::Ready);
        ctl.wait_stop();
    }

    /// This process's clients in the run's arbiter segments; read while the queues are
    /// still open, because a closed queue's slot is freed.
    fn own_arbiter_stats() -> Option<ArbiterStats> {
        let dir = std::env::var_os("SOFTPREEMPT_SHM_DIR")?;
        let pid = std::process::id();
        let mut a = ArbiterStats::default();
        for path in softpreempt_sched::list_segments(Path::new(&dir)).ok()? {
            let Ok(snap) = softpreempt_sched::inspect(&path) else {
                continue;
            };
            for c in snap.clients.iter().filter(|c| c.pid == pid) {
                let ms = |ns: u64| ns as f64 / 1e6;
                a = a.sum(&ArbiterStats {
                    clients: 1,
                    grants: c.grants,
                    slices: c.slices,
                    yields: c.yields,
                    wait_ms: ms(c.wait_ns),
                    busy_ms: ms(c.busy_ns),
                    yields_done: c.yields_done,
                    yield_p50_ms: c.yield_p50_ns.map(ms),
                    yield_p99_ms: c.yield_p99_ns.map(ms),
                    cannot_yield: c.cannot_yield,
                    hs_waits: c.hs_waits,
                    hs_wait_ms: ms(c.hs_wait_ns),
                    hs_wait_max_ms: ms(c.hs_wait_max_ns),
                    hs_expired: c.hs_expired,
                });
            }
        }
        (a.clients > 0).then_some(a)
    }

    /// splitmix64: a small, seedable generator, so every mode sees the same arrivals.
    struct Rng(u64);

    impl Rng {
        fn next_f64(&mut self) -> f64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            (z >> 11) as f64 / (1u64 << 53) as f64
        }

        fn exponential(&mut self, mean: f64) -> f64 {
            -mean * (1.0 - self.next_f64()).ln()
        }
    }
}
