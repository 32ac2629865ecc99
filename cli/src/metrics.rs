//! `softpreempt metrics` and `softpreempt exporter`: the arbiter segments this user can
//! read, in the Prometheus text exposition format (version 0.0.4), once on stdout or
//! served over HTTP for scraping, as NVIDIA's DCGM exporter serves GPU metrics.
//!
//! Each scrape reads the segments afresh without registering (like `status`: it changes
//! nothing and needs no privilege beyond reading the segment directory). A segment that
//! cannot be read is counted in `softpreempt_segment_errors` and left out; it never breaks
//! the scrape. Names follow the Prometheus conventions: the `softpreempt_` prefix,
//! `_total` on counters, base units (seconds).

use std::fmt::Write as _;
use std::path::Path;

use softpreempt_sched::{ClientState, ClientStats, SegmentSnapshot};

use crate::args::{failed, parse, CliError, Spec};
use crate::status::{collect, one_line, priority, segment_dir, state, Report, LEVELS_DOWN};

pub const METRICS_USAGE: &str = "softpreempt metrics [--dir DIR]";
pub const EXPORTER_USAGE: &str = "softpreempt exporter [--listen ADDR] [--dir DIR]";

/// Where the exporter listens by default: a port of its own, on every interface, as
/// exporters do (the scrape annotation in deploy/kubernetes names it).
pub const DEFAULT_LISTEN: &str = "0.0.0.0:9863";

/// The content type of the text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

const METRICS_SPEC: Spec = Spec {
    command: "metrics",
    flags: &[],
    options: &["--dir"],
    short: &[],
    max_positional: 0,
    trailing: false,
};

const EXPORTER_SPEC: Spec = Spec {
    command: "exporter",
    flags: &[],
    options: &["--listen", "--dir"],
    short: &[],
    max_positional: 0,
    trailing: false,
};

#[derive(Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        }
    }
}

const NS: f64 = 1e-9;

/// A metric family with one sample per client (name, type, help, value); every one is
/// declared here once.
struct ClientFamily(&'static str, Kind, &'static str, fn(&ClientStats) -> f64);

const CLIENT_FAMILIES: &[ClientFamily] = &[
    ClientFamily("softpreempt_client_demand", Kind::Gauge, "1 while the client wants the device (has work to submit).", |c| f64::from(u8::from(c.demand))),
    ClientFamily("softpreempt_client_inflight_slices", Kind::Gauge, "Slices granted to the client and not yet completed.", |c| f64::from(c.inflight)),
    ClientFamily("softpreempt_client_grants_total", Kind::Counter, "Grants the client obtained.", |c| c.grants as f64),
    ClientFamily("softpreempt_client_share_grants_total", Kind::Counter, "Grants obtained through the minimum share while a higher priority waited.", |c| c.share_grants as f64),
    ClientFamily("softpreempt_client_slices_total", Kind::Counter, "Slices the client reported done.", |c| c.slices as f64),
    ClientFamily("softpreempt_client_yields_total", Kind::Counter, "Times the client had to wait for a grant.", |c| c.yields as f64),
    ClientFamily("softpreempt_client_wait_seconds_total", Kind::Counter, "Time the client spent waiting for grants.", |c| c.wait_ns as f64 * NS),
    ClientFamily("softpreempt_client_busy_seconds_total", Kind::Counter, "Device time of the client's slices, as reported by the client.", |c| c.busy_ns as f64 * NS),
    ClientFamily("softpreempt_client_handbacks_total", Kind::Counter, "Grants that followed a higher priority's release of the device.", |c| c.handbacks as f64),
    ClientFamily("softpreempt_client_handback_seconds_total", Kind::Counter, "Summed gap from a higher priority's release to this client's next grant.", |c| c.handback_ns as f64 * NS),
    ClientFamily("softpreempt_client_handback_max_seconds", Kind::Gauge, "Longest gap from a higher priority's release to this client's next grant.", |c| c.handback_max_ns as f64 * NS),
    ClientFamily("softpreempt_client_piece_seconds", Kind::Gauge, "Mean length of the client's recent pieces: how long a higher priority may wait behind one (its preemption granularity).", |c| c.piece_ns as f64 * NS),
    ClientFamily("softpreempt_client_on_device_launches", Kind::Gauge, "Yielding launches of the client on the device now (its on-device claims).", |c| f64::from(c.on_device)),
    ClientFamily("softpreempt_client_device_yields_total", Kind::Counter, "Launches of the client that left the device at a higher priority's request.", |c| c.yields_done as f64),
    ClientFamily("softpreempt_client_yield_latency_p50_seconds", Kind::Gauge, "Median time from a yield request to the client's launch leaving the device (upper edge of its log2 bucket; NaN before the first).", |c| c.yield_p50_ns.map_or(f64::NAN, |v| v as f64 * NS)),
    ClientFamily("softpreempt_client_yield_latency_p99_seconds", Kind::Gauge, "99th percentile of the same.", |c| c.yield_p99_ns.map_or(f64::NAN, |v| v as f64 * NS)),
    ClientFamily("softpreempt_client_cannot_yield_total", Kind::Counter, "Launches the client put on the device that could not yield (higher priorities do not wait for them).", |c| c.cannot_yield as f64),
    ClientFamily("softpreempt_client_handshake_waits_total", Kind::Counter, "Times the client waited for lower clients to leave the device before submitting.", |c| c.hs_waits as f64),
    ClientFamily("softpreempt_client_handshake_wait_seconds_total", Kind::Counter, "Summed time of those waits.", |c| c.hs_wait_ns as f64 * NS),
    ClientFamily("softpreempt_client_handshake_wait_max_seconds", Kind::Gauge, "Longest of those waits.", |c| c.hs_wait_max_ns as f64 * NS),
    ClientFamily("softpreempt_client_handshake_expired_total", Kind::Counter, "Waits that reached their bound with a lower client still on the device.", |c| c.hs_expired as f64),
    ClientFamily("softpreempt_client_handshake_lapsed_total", Kind::Counter, "Lower on-device claims not waited for because their holder showed no progress for a lease (a stopped process).", |c| c.hs_lapsed as f64),
];

/// Families of memory clients only (one per process and device that allocated): the
/// device memory of the process's live objects. Queue clients hold none.
const MEMORY_CLIENT_FAMILIES: &[ClientFamily] = &[
    ClientFamily("softpreempt_client_memory_bytes", Kind::Gauge, "Device memory held by the process's live buffers, images, pipes and SVM allocations on the device.", |c| c.mem_bytes as f64),
    ClientFamily("softpreempt_client_memory_objects", Kind::Gauge, "Live memory objects and SVM allocations counted in softpreempt_client_memory_bytes.", |c| c.mem_objects as f64),
    ClientFamily("softpreempt_client_memory_refusals_total", Kind::Counter, "Allocations of the process refused by the memory policy (CL_MEM_OBJECT_ALLOCATION_FAILURE).", |c| c.mem_refusals as f64),
];

/// A metric family with one sample per device and priority level (name, type, help,
/// value of the level with that index).
struct LevelFamily(
    &'static str,
    Kind,
    &'static str,
    fn(&SegmentSnapshot, usize) -> f64,
);

const LEVEL_FAMILIES: &[LevelFamily] = &[
    LevelFamily(
        "softpreempt_level_memory_bytes",
        Kind::Gauge,
        "Device memory held by the live processes of the priority level.",
        |s, l| s.mem_bytes_by_level()[l] as f64,
    ),
    LevelFamily(
        "softpreempt_level_memory_refusals_total",
        Kind::Counter,
        "Allocations of the priority level refused by the memory policy, since the segment was created.",
        |s, l| s.mem_refusals[l] as f64,
    ),
];

/// A metric family with one sample per device segment (name, type, help, value).
struct DeviceFamily(
    &'static str,
    Kind,
    &'static str,
    fn(&SegmentSnapshot) -> f64,
);

const DEVICE_FAMILIES: &[DeviceFamily] = &[
    DeviceFamily(
        "softpreempt_device_slots",
        Kind::Gauge,
        "Client slots in the device's arbiter segment.",
        |s| s.slot_count as f64,
    ),
    DeviceFamily(
        "softpreempt_device_clients",
        Kind::Gauge,
        "Clients registered on the device whose process is alive.",
        |s| s.clients.iter().filter(|c| live(c)).count() as f64,
    ),
    DeviceFamily(
        "softpreempt_device_grants_total",
        Kind::Counter,
        "Grants issued on the device, to all clients since the segment was created.",
        |s| s.total_grants as f64,
    ),
    DeviceFamily(
        "softpreempt_device_reclaims_total",
        Kind::Counter,
        "Client slots reclaimed from processes that died.",
        |s| s.reclaims as f64,
    ),
    DeviceFamily(
        "softpreempt_device_memory_bytes",
        Kind::Gauge,
        "The device's memory (CL_DEVICE_GLOBAL_MEM_SIZE) as the latest allocating process saw it; 0 before any.",
        |s| s.mem_device_bytes as f64,
    ),
];

/// Clients shown: every slot not yet reclaimed (a dead one shows until it is, as in
/// `status`); a reclaimed slot's numbers belong to nobody.
fn shown(c: &ClientStats) -> bool {
    c.state != ClientState::Reclaimed
}

fn live(c: &ClientStats) -> bool {
    shown(c) && state(c) != "dead"
}

/// A label value in the exposition format: backslash, double quote and line feed escaped.
fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for ch in v.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

fn labels(pairs: &[(&str, &str)]) -> String {
    let inner: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect();
    format!("{{{}}}", inner.join(","))
}

fn header(out: &mut String, name: &str, kind: Kind, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {}", kind.as_str());
}

/// A sample value: integers as integers, others in Rust's shortest round-trip form
/// (both are valid Go `ParseFloat` input, as the format requires).
fn value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// The identity of a client's series: the device, its slot and pid, its queue and
/// priority (what dashboards group by). Its state and executable are in
/// `softpreempt_client_info`, so a state change does not start new series.
fn client_labels(s: &SegmentSnapshot, c: &ClientStats) -> Vec<(&'static str, String)> {
    vec![
        ("device", s.device_key.clone()),
        ("slot", c.slot.to_string()),
        ("pid", c.pid.to_string()),
        ("queue", c.label.clone()),
        ("priority", priority(c)),
    ]
}

fn as_refs<'a>(v: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    v.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// The whole exposition for one look at the segment directory.
pub(crate) fn render(r: &Report) -> String {
    let mut out = up(true);
    for (name, help, v) in [
        (
            "softpreempt_segments",
            "Arbiter segments (one per device) read in this scrape.",
            r.segments.len(),
        ),
        (
            "softpreempt_segment_errors",
            "Segments that could not be read (another layout version, corruption); see the exporter's log.",
            r.errors.len(),
        ),
        (
            "softpreempt_segments_other_users",
            "Segments of other users that this user may not read.",
            r.denied,
        ),
    ] {
        header(&mut out, name, Kind::Gauge, help);
        let _ = writeln!(out, "{name} {v}");
    }
    for DeviceFamily(name, kind, help, get) in DEVICE_FAMILIES {
        header(&mut out, name, *kind, help);
        for s in &r.segments {
            let l = labels(&[("device", &s.device_key)]);
            let _ = writeln!(out, "{name}{l} {}", value(get(s)));
        }
    }
    header(
        &mut out,
        "softpreempt_client_info",
        Kind::Gauge,
        "1 for every registered client, with its executable and state (running, waiting, idle, claiming, dead).",
    );
    for s in &r.segments {
        for c in s.clients.iter().filter(|c| shown(c)) {
            let mut l = client_labels(s, c);
            l.push(("exe", c.exe.clone()));
            l.push(("state", state(c).to_string()));
            let _ = writeln!(out, "softpreempt_client_info{} 1", labels(&as_refs(&l)));
        }
    }
    client_families(&mut out, r, CLIENT_FAMILIES, |_| true);
    client_families(&mut out, r, MEMORY_CLIENT_FAMILIES, |c| c.memory);
    for LevelFamily(name, kind, help, get) in LEVEL_FAMILIES {
        header(&mut out, name, *kind, help);
        for s in &r.segments {
            for level in LEVELS_DOWN {
                let l = labels(&[("device", &s.device_key), ("priority", level.as_str())]);
                let _ = writeln!(out, "{name}{l} {}", value(get(s, level.index())));
            }
        }
    }
    out
}

/// Every family of `families`, one sample per shown client that `which` selects.
fn client_families(
    out: &mut String,
    r: &Report,
    families: &[ClientFamily],
    which: fn(&ClientStats) -> bool,
) {
    for ClientFamily(name, kind, help, get) in families {
        header(out, name, *kind, help);
        for s in &r.segments {
            for c in s.clients.iter().filter(|c| shown(c) && which(c)) {
                let l = client_labels(s, c);
                let _ = writeln!(out, "{name}{} {}", labels(&as_refs(&l)), value(get(c)));
            }
        }
    }
}

/// The exposition's first family: whether the segment directory could be listed. Alone,
/// it is the answer when the directory cannot be: the exporter still answers, so the
/// scrape shows the failure instead of a missing target.
fn up(listed: bool) -> String {
    let mut out = String::new();
    header(
        &mut out,
        "softpreempt_up",
        Kind::Gauge,
        "1 when the segment directory could be listed.",
    );
    let _ = writeln!(out, "softpreempt_up {}", u8::from(listed));
    out
}

/// One scrape: the exposition, and the problems to log.
fn scrape(dir: &Path) -> (String, Vec<String>) {
    match collect(dir) {
        Ok(r) => {
            let problems = r
                .errors
                .iter()
                .map(|(_, e)| one_line(e))
                .collect::<Vec<_>>();
            (render(&r), problems)
        }
        Err(CliError::Failed(e) | CliError::Usage(e)) => (up(false), vec![e]),
    }
}

pub fn metrics(args: &[String]) -> Result<(), CliError> {
    let a = parse(&METRICS_SPEC, args)?;
    let dir = segment_dir(a.option("--dir"));
    let r = collect(&dir)?;
    for (_, e) in &r.errors {
        eprintln!("softpreempt metrics: {}", one_line(e));
    }
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    // A closed pipe (`| head`) ends the command quietly.
    let _ = stdout.write_all(render(&r).as_bytes());
    Ok(())
}

pub fn exporter(args: &[String]) -> Result<(), CliError> {
    let a = parse(&EXPORTER_SPEC, args)?;
    let dir = segment_dir(a.option("--dir"));
    let listen = a.option("--listen").unwrap_or(DEFAULT_LISTEN);
    let server = match tiny_http::Server::http(listen) {
        Ok(s) => s,
        Err(e) => return failed(format!("exporter: cannot listen on {listen}: {e}")),
    };
    // The address actually bound (port 0 picks one): tests and scripts read it here.
    match server.server_addr().to_ip() {
        Some(addr) => eprintln!(
            "softpreempt exporter: serving http://{addr}/metrics from {}",
            dir.display()
        ),
        None => eprintln!("softpreempt exporter: serving on {listen}"),
    }
    let content_type = tiny_http::Header::from_bytes("Content-Type", CONTENT_TYPE)
        .map_err(|_| CliError::Failed("exporter: bad content type".into()))?;
    for request in server.incoming_requests() {
        let path = request.url().split('?').next().unwrap_or("").to_string();
        let response = match (request.method(), path.as_str()) {
            (tiny_http::Method::Get | tiny_http::Method::Head, "/metrics") => {
                let (body, problems) = scrape(&dir);
                for p in problems {
                    eprintln!("softpreempt exporter: {p}");
                }
                tiny_http::Response::from_string(body).with_header(content_type.clone())
            }
            (tiny_http::Method::Get | tiny_http::Method::Head, "/") => {
                tiny_http::Response::from_string(
                    "SoftPreempt exporter: metrics at /metrics\n".to_string(),
                )
            }
            _ => tiny_http::Response::from_string("not found\n".to_string()).with_status_code(404),
        };
        // A scraper that went away is not the exporter's failure.
        let _ = request.respond(response);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{escape, labels, value};

    #[test]
    fn label_values_are_escaped_as_the_format_requires() {
        assert_eq!(escape(r#"a\b"c"#), r#"a\\b\"c"#);
        assert_eq!(escape("x\ny"), "x\\ny");
        assert_eq!(
            labels(&[("device", "gpu \"0\""), ("queue", "q")]),
            r#"{device="gpu \"0\"",queue="q"}"#
        );
    }

    #[test]
    fn values_are_integers_or_shortest_floats() {
        assert_eq!(value(3.0), "3");
        assert_eq!(value(0.25), "0.25");
        assert_eq!(value(1.5e-7), "0.00000015");
    }
}
