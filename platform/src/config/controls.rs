//! The controls table: every configuration key is declared here, once.
//!
//! One `controls!` entry gives a key its Rust type, default, accepted values
//! (`expect`, used in messages and the docs), optional range check (`valid`),
//! optional environment override (`env`) and doc comment. From that the macro
//! builds the serde structs (`deny_unknown_fields`), their `Default`s, and
//! [`CONTROLS`], which drives environment overrides, validation, the
//! effective-config report and the generated `docs/configuration.md`.

use std::path::PathBuf;

use super::types::{
    ControlValue, DeviceMemory, LevelAmounts, Priority, Rule, SafeBinary, SliceMode, YieldMode,
};

/// One declared control, with type-erased accessors into [`Config`].
pub struct Control {
    /// Dotted TOML path, e.g. `sched.max_inflight`.
    pub key: &'static str,
    /// The key inside its table, e.g. `max_inflight`.
    pub name: &'static str,
    /// The `[table]` holding it, `None` at the top level.
    pub section: Option<&'static str>,
    pub rust_type: &'static str,
    /// What values are accepted, phrased to follow "expected".
    pub expect: &'static str,
    pub env: Option<&'static str>,
    /// A sample setting (TOML text) for the docs and the example file.
    pub example: Option<&'static str>,
    pub doc: &'static str,
    render: fn(&Config) -> String,
    valid: fn(&Config) -> bool,
    set_env: fn(&mut Config, &str) -> bool,
}

impl Control {
    /// The control's current value in `cfg`, as TOML text.
    pub fn render(&self, cfg: &Config) -> String {
        (self.render)(cfg)
    }

    /// Whether the value in `cfg` passes this control's range/format check.
    pub fn is_valid(&self, cfg: &Config) -> bool {
        (self.valid)(cfg)
    }

    /// Parses `s` as this control's environment spelling and stores it in
    /// `cfg` if it is valid; on `false`, `cfg` is unchanged.
    pub fn set_from_env(&self, cfg: &mut Config, s: &str) -> bool {
        (self.set_env)(cfg, s)
    }
}

/// A key inside an array-of-tables element (`[[rule]]`); documented and
/// used for messages, but parsed by the element's own serde type.
pub struct SubKey {
    pub key: &'static str,
    pub expect: &'static str,
    pub doc: &'static str,
}

/// A `[table]` of controls.
pub struct Section {
    pub name: &'static str,
    pub doc: &'static str,
}

macro_rules! opt {
    () => {
        None
    };
    ($e:expr) => {
        Some($e)
    };
}

/// Builds the `valid` accessor: no `valid` clause means any value of the
/// type is accepted.
macro_rules! valid_fn {
    ($ty:ty, |$c:ident| $field:expr, ) => {
        |_: &Config| true
    };
    ($ty:ty, |$c:ident| $field:expr, $valid:expr) => {
        |$c: &Config| {
            let check: fn(&$ty) -> bool = $valid;
            check(&$field)
        }
    };
}

macro_rules! control {
    ($section:expr, $key:expr, $name:expr, $ty:ty, $expect:expr, [$($env:literal)?],
     [$($example:expr)?], $doc:expr, |$c:ident| $field:expr, [$($valid:expr)?]) => {
        Control {
            key: $key,
            name: $name,
            section: $section,
            rust_type: stringify!($ty),
            expect: $expect,
            env: opt!($($env)?),
            example: opt!($($example)?),
            doc: $doc,
            render: |$c: &Config| ControlValue::render(&$field),
            valid: valid_fn!($ty, |$c| $field, $($valid)?),
            set_env: |$c: &mut Config, s: &str| {
                let check: fn(&Config) -> bool = valid_fn!($ty, |$c| $field, $($valid)?);
                match <$ty as ControlValue>::from_env(s) {
                    Some(v) => {
                        let old = std::mem::replace(&mut $field, v);
                        if check($c) {
                            true
                        } else {
                            $field = old;
                            false
                        }
                    }
                    None => false,
                }
            },
        }
    };
}

macro_rules! controls {
    (
        $(#[doc = $rdoc:literal])*
        root {
            $( $(#[doc = $doc:literal])*
               $key:ident : $ty:ty = $default:expr, expect $expect:expr
               $(, env $env:literal)? $(, example $example:expr)? $(, valid $valid:expr)? ; )*
        }
        $(
            $(#[doc = $sdoc:literal])*
            [$sec:ident] $Sec:ident {
                $( $(#[doc = $fdoc:literal])*
                   $fkey:ident : $fty:ty = $fdefault:expr, expect $fexpect:expr
                   $(, env $fenv:literal)? $(, example $fexample:expr)? $(, valid $fvalid:expr)? ; )*
            }
        )*
    ) => {
        $(#[doc = $rdoc])*
        #[derive(Debug, Clone, PartialEq, serde::Deserialize)]
        #[serde(deny_unknown_fields, default)]
        pub struct Config {
            $( $(#[doc = $doc])* pub $key: $ty, )*
            $( $(#[doc = $sdoc])* pub $sec: $Sec, )*
        }

        impl Default for Config {
            fn default() -> Self {
                Config {
                    $( $key: $default, )*
                    $( $sec: $Sec::default(), )*
                }
            }
        }

        $(
            $(#[doc = $sdoc])*
            #[derive(Debug, Clone, PartialEq, serde::Deserialize)]
            #[serde(deny_unknown_fields, default)]
            pub struct $Sec {
                $( $(#[doc = $fdoc])* pub $fkey: $fty, )*
            }

            impl Default for $Sec {
                fn default() -> Self {
                    $Sec { $( $fkey: $fdefault, )* }
                }
            }
        )*

        /// Every control, in declaration (and documentation) order.
        pub static CONTROLS: &[Control] = &[
            $( control!(None, stringify!($key), stringify!($key), $ty, $expect, [$($env)?],
                        [$($example)?], concat!($($doc, "\n"),*), |c| c.$key, [$($valid)?]), )*
            $( $( control!(Some(stringify!($sec)), concat!(stringify!($sec), ".", stringify!($fkey)),
                           stringify!($fkey), $fty, $fexpect, [$($fenv)?], [$($fexample)?],
                           concat!($($fdoc, "\n"),*), |c| c.$sec.$fkey, [$($fvalid)?]), )* )*
        ];

        /// The `[table]`s, in declaration order.
        pub static SECTIONS: &[Section] = &[
            $( Section { name: stringify!($sec), doc: concat!($($sdoc, "\n"),*) }, )*
        ];
    };
}

fn in_range<T: PartialOrd>(v: &T, lo: T, hi: T) -> bool {
    lo <= *v && *v <= hi
}

/// Group names go into a `chown` of the shared segment; reject what can
/// never be a group name early, with the line number.
fn is_group_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 32
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

fn log_filter_is_valid(s: &str) -> bool {
    tracing_subscriber::EnvFilter::try_new(s).is_ok()
}

controls! {
    /// The whole configuration: `/etc/softpreempt.toml` (or the file named by
    /// `SOFTPREEMPT_CONFIG`), with environment overrides applied.
    root {
        /// Format version of this file. Only `1` exists; a file written for a
        /// newer SoftPreempt is rejected rather than half-understood.
        version: u32 = 1, expect "1 (the only config format this build reads)",
            valid |v| *v == 1;
        /// Vendor OpenCL drivers to wrap: paths (or `dlopen` names) of vendor ICD
        /// libraries, or `.icd` files naming them. Empty means discover them from
        /// the `.icd` files in `OCL_ICD_VENDORS` or `/etc/OpenCL/vendors`,
        /// skipping SoftPreempt's own entry. The environment variable is
        /// colon-separated.
        vendors: Vec<PathBuf> = Vec::new(),
            expect "a list of vendor library or .icd file paths",
            env "SOFTPREEMPT_VENDORS",
            example r#"vendors = ["/usr/lib/x86_64-linux-gnu/pocl/libpocl.so.2"]"#,
            valid |v| v.iter().all(|p| !p.as_os_str().is_empty());
        /// What to log, as a `tracing` filter: a level (`error`, `warn`, `info`,
        /// `debug`, `trace`, `off`) or per-target directives such as
        /// `softpreempt=debug`. The default logs errors only, so the layer is
        /// silent in a healthy process.
        log: String = "error".to_string(),
            expect "a log filter such as \"info\" or \"softpreempt=debug\"",
            env "SOFTPREEMPT_LOG",
            example r#"log = "softpreempt=debug""#,
            valid |v| log_filter_is_valid(v);
        /// File that log lines are appended to, instead of standard error.
        /// SoftPreempt never writes to the application's standard output.
        log_file: Option<PathBuf> = None, expect "a file path",
            env "SOFTPREEMPT_LOG_FILE",
            example r#"log_file = "/var/log/softpreempt.log""#,
            valid |v| v.iter().all(|p| !p.as_os_str().is_empty());
        /// Priority of this machine's processes when nothing more specific
        /// applies. Order of precedence: the queue's `CL_QUEUE_PRIORITY_KHR`,
        /// then `SOFTPREEMPT_PRIORITY`, then the first matching `[[rule]]`,
        /// then a real-time scheduling class (`chrt`) meaning `high`, then this.
        /// Inside a level, a greater number is more urgent (`high:3` beats
        /// `high:1`, and `high` is `high:0`).
        priority: Priority = Priority::NORMAL, expect Priority::EXPECT,
            env "SOFTPREEMPT_PRIORITY", example r#"priority = "low:2""#;
        /// Per-process priority rules, tried in order; the first match wins.
        /// Each `[[rule]]` table has `exe`, `uid` or both (both must then
        /// match), and `priority`.
        rule: Vec<Rule> = Vec::new(), expect "an array of [[rule]] tables",
            example "[[rule]]\nexe = \"inference-server\"\npriority = \"high\"\n\n\
                     [[rule]]\nuid = 1001\npriority = \"low\"";
        /// Kernels of programs created from binaries or IL are sliced only when
        /// SoftPreempt knows they read no launch geometry (`get_group_id`,
        /// `get_global_offset`, ...) whose values slicing would change: a binary
        /// that SoftPreempt built from source is known to the program store
        /// (`[store]`), and an NVIDIA binary's PTX is analysed. Other binaries
        /// (PoCL's, SPIR-V IL) cannot be inspected: list here the kernel names,
        /// or `sha256:<hex>` hashes of whole program binaries/IL, that you know
        /// are safe to slice.
        safe_binaries: Vec<SafeBinary> = Vec::new(),
            expect "a list of kernel names or \"sha256:<64 hex digits>\" program hashes",
            example r#"safe_binaries = ["matmul_tiled", "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"]"#;
    }

    /// Scheduling: how launches are sliced and how processes share a device.
    [sched] SchedConfig {
        /// When to cut NDRange launches into slices: `contended` (at the slice
        /// target while a higher-priority client on the same device wants it,
        /// else only launches longer than `piece_us`, into pieces of that
        /// length), `always` (at the slice target), or `never`.
        slice: SliceMode = SliceMode::Contended,
            expect "\"contended\", \"always\" or \"never\"", example r#"slice = "always""#;
        /// When kernels run as yielding launches: work-groups that take their
        /// groups from a ticket and stop between two of them when a higher
        /// priority asks, then resume where they stopped (persistent groups on a
        /// GPU; on a CPU device one group for each group of the launch; a kernel
        /// the rewrite cannot take is sliced, or left to the driver). `auto` (launches
        /// predicted to take 0.5 ms or more, 5 ms on a GPU, from the third launch of
        /// a kernel on: the first teaches the prediction, which may be all cold
        /// start, the second confirms or replaces it, and only then are the
        /// program's persistent entries compiled; on a GPU only launches with their
        /// own vendor event, see `yield_wait_us`), `never`, or `chaos` (testing:
        /// every launch the rewrite
        /// can take, short or not, its program's first launch waiting for the
        /// entries' build, and yields are also requested at random moments, half of
        /// the runs as they start, so such launches are stopped and resumed).
        yielding: YieldMode = YieldMode::Auto,
            expect "\"auto\", \"never\" or \"chaos\"", example r#"yielding = "never""#;
        /// The longest time, in microseconds, a higher priority's command waits
        /// for a lower client's yielding launch to leave the device before it is
        /// submitted anyway (rule 10). It waits only as long as that launch says
        /// it needs (its work-group time plus the signal path), at most this. On
        /// a GPU only launches with their own vendor event (their application
        /// asked for one on a queue with profiling on) run as yielding launches
        /// at `yielding = "auto"`: the driver hands the others over in about
        /// 0.2 ms by itself. One that needs longer than the driver's hand-over
        /// of such a launch (2 ms) says it cannot yield, and nobody asks it or
        /// waits for it. `0`: no launch is asked to yield.
        yield_wait_us: u64 = 400, expect "an integer between 0 and 100000",
            valid |v| in_range(v, 0, 100_000);
        /// Target duration of one slice, in microseconds; it also bounds the
        /// predicted device time a queue keeps queued behind its running slice.
        /// Shorter slices let a higher-priority process take over sooner but add
        /// launch overhead. Unset: 250, and 1000 for a `low` queue on a CPU
        /// device whose threads run in the idle class (`cpu_idle_class`; PoCL
        /// costs about 25 µs a command), chosen by the measurements in
        /// docs/benchmarks.md.
        target_slice_us: Option<u64> = None,
            expect "an integer between 50 and 1000000", example "target_slice_us = 500",
            valid |v| v.iter().all(|v| in_range(v, 50, 1_000_000));
        /// Longest piece, in microseconds, of a sliceable launch while no
        /// higher priority wants the device (none registered, or none active in
        /// the last 500 ms): longer launches are cut into pieces of this length
        /// even then, so a higher priority that arrives later waits for at most
        /// one piece instead of whole launches queued before it came. Unset:
        /// 8000 on CPU devices (PoCL pays about 30 µs per launch); on a GPU,
        /// 2000 (about the driver's own hand-over between processes), only for
        /// a kernel's first 16 long launches, which teach what its launches
        /// cost; after them a GPU queue sends its launches whole, as the bare
        /// driver gets them, while no higher priority is active: the driver
        /// hands the device over by itself, and every command behind a cut
        /// launch waits for the layer's thread (tinygrad's training process
        /// kept 0.93-0.96 of its bare throughput alone, and 0.95-0.98 next to
        /// an idle registered one, with every long launch cut; 0.99-1.00
        /// without; docs/benchmarks.md). Set, it applies to every long launch
        /// on a GPU too.
        /// Ignored with `slice = "never"`, and for launches that run as
        /// yielding launches: they are never cut, since they stop at their next
        /// group boundary when asked, from their first group on.
        piece_us: Option<u64> = None,
            expect "an integer between 100 and 1000000", example "piece_us = 4000",
            valid |v| v.iter().all(|v| in_range(v, 100, 1_000_000));
        /// Work-groups the device runs at once (one wave), which no slice is
        /// narrower than: a narrower slice still takes a whole wave's time.
        /// Unset: estimated per launch from the device (compute units times the
        /// groups one unit holds: 2048 work-items in at most 32 groups on a GPU,
        /// one group on a CPU device). Set it where the estimate is wrong for a
        /// driver, or to `1` to slice at any work-group boundary.
        wave_work_groups: Option<u64> = None,
            expect "an integer between 1 and 1000000", example "wave_work_groups = 264",
            valid |v| v.iter().all(|v| in_range(v, 1, 1_000_000));
        /// On CPU devices (PoCL), once a higher priority registers on the
        /// device, move the device's worker threads of a process whose queues
        /// there are `low` to the idle scheduling class (`SCHED_IDLE`): the
        /// operating system then gives a core to any other thread first, so the
        /// slice that runs when a higher priority arrives hardly delays it, and
        /// slices can be longer (see `target_slice_us`). Such a queue's
        /// launches then go to the vendor as they do alone (only those long
        /// enough to be cut into pieces through the layer's queue), which kept
        /// tinygrad's training process at its lone rate next to an idle
        /// registered one (0.60 when every launch waited for the layer's
        /// thread; docs/benchmarks.md). They stay there for the
        /// rest of the process (moving them back needs privilege), also taking
        /// second place to other CPU work. A queue above `low` in the same
        /// process moves them back where the system allows it. `false`: leave
        /// threads alone.
        cpu_idle_class: bool = true, expect "true or false",
            example "cpu_idle_class = false";
        /// Most slices of one queue on the vendor queue at once. `2` keeps the
        /// device busy between slices; `1` gives the shortest takeover latency.
        max_inflight: u32 = 2, expect "an integer between 1 and 2",
            valid |v| in_range(v, 1, 2);
        /// Share of device time (0.0 to 0.5) guaranteed to lower-priority work
        /// while higher-priority work is waiting, so it never starves
        /// entirely. `0.0` is strict priority.
        min_share: f64 = 0.0, expect "a number between 0.0 and 0.5",
            valid |v| in_range(v, 0.0, 0.5);
        /// The longest time, in microseconds, a client keeps its claim on the
        /// device after its last command completes, so that lower-priority work
        /// does not slip in between the commands of a burst. Each queue learns
        /// its own linger from its idle gaps, at most this: the gaps inside its
        /// bursts are covered, the long ones between requests are not (holding
        /// lower priorities off an idle device then gains nothing). `0`: never
        /// linger.
        hp_linger_us: u64 = 2000, expect "an integer between 0 and 1000000",
            valid |v| in_range(v, 0, 1_000_000);
        /// Longest single wait on the arbiter, in milliseconds. After it a
        /// waiter re-checks the grant and whether its peers are alive, so a
        /// crashed process can never block the device for longer.
        arbiter_timeout_ms: u64 = 100, expect "an integer between 1 and 60000",
            valid |v| in_range(v, 1, 60_000);
        /// Unix group allowed to share the per-device arbiter segments between
        /// users (mode 0660): a name, or a numeric group id (as containers
        /// know their supplementary groups). Unset: each user has private
        /// segments (mode 0600), so processes of different users do not
        /// arbitrate.
        shm_group: Option<String> = None, expect "a Unix group name or numeric id",
            example r#"shm_group = "gpu""#,
            valid |v| v.iter().all(|g| is_group_name(g));
        /// Directory that holds the per-device arbiter segments. Every process
        /// that should arbitrate with another must use the same directory.
        shm_dir: PathBuf = PathBuf::from("/dev/shm"), expect "a directory path",
            env "SOFTPREEMPT_SHM_DIR", example r#"shm_dir = "/dev/shm""#;
    }

    /// Device memory by priority. Time slicing shares a device's time, not its
    /// memory: here memory reserved for a priority level is kept from the
    /// levels below it. Every process's live buffers, images, pipes and SVM
    /// allocations on a device are counted (`softpreempt status` shows them,
    /// per process and per level); an allocation of a lower level that would
    /// eat into what a higher level has reserved and does not use yet fails
    /// with `CL_MEM_OBJECT_ALLOCATION_FAILURE`, as on a full device, and logs
    /// one line naming the device, the level, the sizes and the setting. Off
    /// (memory only counted) unless a reserve or a cap is set. Amounts are
    /// bytes, sizes such as `"8 GiB"`, or percentages of the device's
    /// `CL_DEVICE_GLOBAL_MEM_SIZE` such as `"25%"`. A process's level on a
    /// device is the highest of its priority (`priority`, `[[rule]]`,
    /// `SOFTPREEMPT_PRIORITY`, `chrt`) and of the `CL_QUEUE_PRIORITY_KHR` of
    /// the queues it created there before its first allocation there.
    [memory] MemoryConfig {
        /// Memory reserved for each level, on every device: no allocation of a
        /// lower level may eat into the part of it that the level's processes
        /// do not use yet, and an allocation that keeps its own level within
        /// its reserve is never refused. Reserves given as percentages may
        /// not add up to more than 100. Unset levels reserve nothing.
        reserve: LevelAmounts = LevelAmounts::default(), expect LevelAmounts::EXPECT,
            example "# A quarter of every device for the inference class (priority high),\n\
                     # 2 GiB for normal work, none kept for low (training) work.\n\
                     reserve = { high = \"25%\", normal = \"2 GiB\" }",
            valid |v| v.percent_total() <= 100.0;
        /// Most memory all the processes of a level may hold together on a
        /// device; an allocation past it fails as past a reserve. Unset
        /// levels have no cap.
        cap: LevelAmounts = LevelAmounts::default(), expect LevelAmounts::EXPECT,
            example r#"cap = { low = "60%" }"#;
        /// Per-device policy: each `[[memory.device]]` table names a device
        /// (its key as `softpreempt status` shows it, its UUID, or its name)
        /// and gives `reserve` and `cap` levels that replace those of
        /// `[memory]` on it; levels it leaves out keep the `[memory]` values.
        device: Vec<DeviceMemory> = Vec::new(),
            expect "an array of [[memory.device]] tables",
            example "[[memory.device]]\ndevice = \"NVIDIA H100 80GB HBM3\"\nreserve = { high = \"40 GiB\" }",
            valid |v| v.iter().all(|d| !d.device.trim().is_empty() && d.reserve.percent_total() <= 100.0);
    }

    /// The program store: what SoftPreempt learned from the source of a program
    /// (which kernels may be sliced or yield, the rewritten source of those that
    /// read the launch geometry, and the source of those that yield), kept per
    /// user and keyed by the vendor's binary of the application's program, so
    /// that a later process loading that binary from an application's cache
    /// (pyopencl, OpenCV, tinygrad, ...) is scheduled as a source build. It also
    /// keeps the built yielding programs, so they are not compiled again.
    [store] StoreConfig {
        /// Directory of the program store. Unset: `$XDG_CACHE_HOME/softpreempt`,
        /// else `~/.cache/softpreempt`. Created with mode 0700; entries owned by
        /// another user are ignored.
        dir: Option<PathBuf> = None, expect "a directory path",
            env "SOFTPREEMPT_STORE", example r#"dir = "/var/cache/softpreempt-alice""#,
            valid |v| v.iter().all(|p| !p.as_os_str().is_empty());
        /// Largest size of the store, in MiB; past it the least recently used
        /// entries are evicted. `0` turns the store off (binaries of rewritten
        /// programs are then still the bare driver's, but a later process does
        /// not slice their kernels nor run them as yielding launches).
        max_mb: u64 = 256, expect "an integer between 0 and 65536",
            valid |v| in_range(v, 0, 65_536);
    }

    /// Tracing and profiling, for looking at what the scheduler did. Both are
    /// off by default and cost nothing then.
    [trace] TraceConfig {
        /// Directory for timeline traces: every process writes
        /// `softpreempt-<pid>.json` there (Chrome trace event format, with its
        /// slices, grants, waits, preemptions, yield handshakes, the phases of
        /// each yield (request, the yield word's write, until the launch was off
        /// the device), launches sent straight to the vendor and the
        /// application's waits for a queue's deferred commands to reach it).
        /// Join them into one timeline
        /// for Perfetto with `softpreempt trace merge DIR -o FILE`. Unset: no
        /// trace.
        dir: Option<PathBuf> = None, expect "a directory path",
            env "SOFTPREEMPT_TRACE", example r#"dir = "/tmp/softpreempt-trace""#,
            valid |v| v.iter().all(|p| !p.as_os_str().is_empty());
        /// File that per-kernel statistics (launches, slices, yields, launches
        /// never asked to yield because their groups outlast the driver's own
        /// hand-over (`not_asked`), total and mean device time, launches sent
        /// straight to the vendor and not measured (`direct`; `direct_claimed`:
        /// under the budget a registered higher priority sets; `direct_recorded`:
        /// by kernel objects that record their argument values for a yielding
        /// launch to replay), launches that ran as the application's kernel
        /// because their yielding entry was measured slower (`entry_slower`),
        /// yielding launches on a CPU device that ran the kernel's second flat
        /// entry because it was measured faster (`second_entry`), by kernel name
        /// and priority) are appended to, one JSON line per kernel,
        /// when a process exits or releases its last queue.
        /// Unset: no profile.
        profile: Option<PathBuf> = None, expect "a file path",
            env "SOFTPREEMPT_PROFILE", example r#"profile = "/tmp/softpreempt-profile.jsonl""#,
            valid |v| v.iter().all(|p| !p.as_os_str().is_empty());
    }
}

/// Keys of one `[[rule]]` table.
pub static RULE_KEYS: &[SubKey] = &[
    SubKey {
        key: "rule.exe",
        expect: "an executable name, or an absolute path",
        doc: "Executable the rule matches: a bare name is compared with the basename \
              of the process's executable, a value with a `/` with its whole path.",
    },
    SubKey {
        key: "rule.uid",
        expect: "a numeric user id",
        doc: "Real user id the rule matches.",
    },
    SubKey {
        key: "rule.priority",
        expect: Priority::EXPECT,
        doc: "Priority given to matching processes (required).",
    },
];

/// Keys of one `[[memory.device]]` table.
pub static MEMORY_DEVICE_KEYS: &[SubKey] = &[
    SubKey {
        key: "memory.device.device",
        expect: "a device key, UUID or name",
        doc: "The device (required): its key as `softpreempt status` shows it (`uuid-...`), \
              its UUID (with or without dashes), or its name (`CL_DEVICE_NAME`).",
    },
    SubKey {
        key: "memory.device.reserve",
        expect: LevelAmounts::EXPECT,
        doc: "Reserves on this device, by level; levels left out keep `memory.reserve`'s.",
    },
    SubKey {
        key: "memory.device.cap",
        expect: LevelAmounts::EXPECT,
        doc: "Caps on this device, by level; levels left out keep `memory.cap`'s.",
    },
];

/// The keys of every array-of-tables control, by the control's key.
pub static TABLE_KEYS: &[(&str, &[SubKey])] =
    &[("rule", RULE_KEYS), ("memory.device", MEMORY_DEVICE_KEYS)];
