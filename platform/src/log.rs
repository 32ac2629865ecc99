//! Logging for the layer's own copy of `tracing`.
//!
//! The layer lives inside someone else's process, so logging is silent by
//! default (errors only), goes to standard error or `log_file` and never to
//! standard output, prefixes every line with `softpreempt[pid]:`, and can
//! never panic. The filter comes from `SOFTPREEMPT_LOG` or the config's
//! `log` key.

use std::collections::HashSet;
use std::fmt;
use std::fs::OpenOptions;
use std::sync::{Mutex, Once};

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::writer::BoxMakeWriter;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::EnvFilter;

use crate::config::Config;

#[doc(hidden)]
pub use tracing as __tracing;

/// Installs logging (and loads the configuration, which says how).
/// Idempotent; after the first call it costs one atomic load.
pub fn init() {
    let _ = crate::config::effective();
}

static INSTALL: Once = Once::new();

/// Installs the subscriber described by `cfg`, once per process; later
/// calls do nothing. [`init`] calls this with the process's configuration;
/// a tool with its own `Config` may call it first.
pub fn install(cfg: &Config) {
    INSTALL.call_once(|| {
        let mut problems = Vec::new();
        let filter = match EnvFilter::try_new(&cfg.log) {
            Ok(f) => f,
            Err(e) => {
                problems.push(format!(
                    "bad log filter {:?} ({e}); logging errors only",
                    cfg.log
                ));
                EnvFilter::new("error")
            }
        };
        let writer = match &cfg.log_file {
            None => BoxMakeWriter::new(std::io::stderr),
            Some(path) => match OpenOptions::new().create(true).append(true).open(path) {
                Ok(file) => BoxMakeWriter::new(Mutex::new(file)),
                Err(e) => {
                    problems.push(format!(
                        "cannot open log_file {} ({e}); logging to standard error",
                        path.display()
                    ));
                    BoxMakeWriter::new(std::io::stderr)
                }
            },
        };
        let subscriber = tracing_subscriber::fmt()
            .with_writer(writer)
            .with_env_filter(filter)
            .event_format(Prefixed)
            .finish();
        // Fails only if a global subscriber exists already (a test harness,
        // or a tool that set its own); keep that one.
        let _ = tracing::subscriber::set_global_default(subscriber);
        for p in problems {
            tracing::error!("{p}");
        }
    });
}

/// `softpreempt[pid]: level: message fields`, one line per event.
struct Prefixed;

impl<S, N> FormatEvent<S, N> for Prefixed
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let level = match *meta.level() {
            Level::ERROR => "error",
            Level::WARN => "warn",
            Level::INFO => "info",
            Level::DEBUG => "debug",
            Level::TRACE => "trace",
        };
        // The pid is read per event, so a forked child reports its own.
        write!(writer, "softpreempt[{}]: {level}: ", std::process::id())?;
        if *meta.level() >= Level::DEBUG {
            write!(writer, "{}: ", meta.target())?;
        }
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

/// Keys already logged by the `*_once!` macros. Bounded, so that keys made
/// from runtime data (kernel names) cannot grow it without limit; past the
/// bound, new keys are no longer logged.
static SEEN: Mutex<Option<HashSet<String>>> = Mutex::new(None);
const SEEN_MAX: usize = 4096;

/// `true` the first time `key` is seen in this process. Used by the
/// `*_once!` macros.
#[doc(hidden)]
pub fn first_time(key: &str) -> bool {
    // A poisoned lock only means another thread panicked while holding it;
    // the set is still usable, and logging must not panic.
    let mut guard = SEEN.lock().unwrap_or_else(|p| p.into_inner());
    let seen = guard.get_or_insert_with(HashSet::new);
    if seen.contains(key) || seen.len() >= SEEN_MAX {
        return false;
    }
    seen.insert(key.to_string());
    true
}

/// Logs at `level` only the first time for `key`, e.g. to say once why a
/// kernel is not sliced. `key` is anything `AsRef<str>`; `_` keys by the
/// call site instead.
///
/// ```text
/// log_once!(WARN, kernel_name, "kernel {kernel_name} reads get_group_id; not sliced");
/// log_once!(INFO, _, "arbiter unavailable; pass-through");
/// ```
#[macro_export]
macro_rules! log_once {
    ($level:ident, _, $($arg:tt)+) => {{
        static DONE: ::std::sync::atomic::AtomicBool = ::std::sync::atomic::AtomicBool::new(false);
        if !DONE.swap(true, ::std::sync::atomic::Ordering::Relaxed) {
            $crate::log::__tracing::event!($crate::log::__tracing::Level::$level, $($arg)+);
        }
    }};
    ($level:ident, $key:expr, $($arg:tt)+) => {{
        if $crate::log::first_time(::std::convert::AsRef::<str>::as_ref(&$key)) {
            $crate::log::__tracing::event!($crate::log::__tracing::Level::$level, $($arg)+);
        }
    }};
}

/// `warn!` once per key (or per call site with `_`); see [`log_once!`].
#[macro_export]
macro_rules! warn_once {
    ($($arg:tt)+) => { $crate::log_once!(WARN, $($arg)+) };
}

/// `error!` once per key (or per call site with `_`); see [`log_once!`].
#[macro_export]
macro_rules! error_once {
    ($($arg:tt)+) => { $crate::log_once!(ERROR, $($arg)+) };
}

/// `info!` once per key (or per call site with `_`); see [`log_once!`].
#[macro_export]
macro_rules! info_once {
    ($($arg:tt)+) => { $crate::log_once!(INFO, $($arg)+) };
}
