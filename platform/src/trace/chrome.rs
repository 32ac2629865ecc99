//! A Chrome trace event file that is valid JSON after every flush: the closing `]}` is
//! always on disk, and each flush writes its events over it and puts it back after them.
//! So a process that dies between flushes leaves a readable, merely shorter, trace.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// What closes the event array and the object; rewritten after every flush.
const TAIL: &str = "\n]}\n";
/// Buffered event text that triggers a write, so long runs do not grow memory.
const FLUSH_BYTES: usize = 64 * 1024;

/// An event argument.
#[derive(Clone, Copy, Debug)]
pub enum Arg<'a> {
    /// A number.
    U64(u64),
    /// A flag.
    Bool(bool),
    /// Text.
    Str(&'a str),
}

impl From<u64> for Arg<'_> {
    fn from(v: u64) -> Self {
        Arg::U64(v)
    }
}

impl From<usize> for Arg<'_> {
    fn from(v: usize) -> Self {
        Arg::U64(v as u64)
    }
}

impl From<u32> for Arg<'_> {
    fn from(v: u32) -> Self {
        Arg::U64(v.into())
    }
}

impl From<bool> for Arg<'_> {
    fn from(v: bool) -> Self {
        Arg::Bool(v)
    }
}

impl<'a> From<&'a str> for Arg<'a> {
    fn from(v: &'a str) -> Self {
        Arg::Str(v)
    }
}

fn push_str(out: &mut String, s: &str) {
    // Serialising a &str cannot fail.
    out.push_str(&serde_json::to_string(s).unwrap_or_default());
}

fn push_args(out: &mut String, args: &[(&str, Arg<'_>)]) {
    out.push('{');
    for (i, (k, v)) in args.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_str(out, k);
        out.push(':');
        match v {
            Arg::U64(n) => {
                let _ = write!(out, "{n}");
            }
            Arg::Bool(b) => {
                let _ = write!(out, "{b}");
            }
            Arg::Str(s) => push_str(out, s),
        }
    }
    out.push('}');
}

/// Chrome's `ts` and `dur` are microseconds; keep the nanoseconds as decimals.
fn push_us(out: &mut String, ns: u64) {
    let _ = write!(out, "{}.{:03}", ns / 1000, ns % 1000);
}

/// Priority names sort more urgent tracks first (Perfetto orders by `sort_index`).
fn sort_index(priority: &str) -> i64 {
    let (level, number) = priority.split_once(':').unwrap_or((priority, "0"));
    let base = match level {
        "high" => 0,
        "normal" => 1000,
        _ => 2000,
    };
    base - number.parse::<i64>().unwrap_or(0)
}

/// One process's trace file.
pub struct TraceFile {
    path: PathBuf,
    file: File,
    pid: u32,
    /// Events not yet written, each preceded by its `,\n` separator.
    pending: String,
    /// Queue label -> track id (`tid`), in order of first use.
    tracks: HashMap<String, u32>,
}

impl TraceFile {
    /// Creates `dir/softpreempt-<pid>.json` (or `-<pid>-<n>.json` when a process with the
    /// same pid left one there), holding the process-name event, already valid JSON.
    pub fn create(dir: &Path, pid: u32, process_label: &str) -> io::Result<TraceFile> {
        std::fs::create_dir_all(dir)?;
        let (path, file) = create_unique(dir, pid)?;
        let mut t = TraceFile {
            path,
            file,
            pid,
            pending: String::new(),
            tracks: HashMap::new(),
        };
        let mut head = String::from("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
        t.push_metadata(
            &mut head,
            "process_name",
            0,
            &[("name", process_label.into())],
        );
        head.push_str(TAIL);
        t.file.write_all(head.as_bytes())?;
        Ok(t)
    }

    /// The file written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn push_metadata(&self, out: &mut String, name: &str, tid: u32, args: &[(&str, Arg<'_>)]) {
        let _ = write!(
            out,
            "{{\"ph\":\"M\",\"name\":\"{name}\",\"pid\":{},\"tid\":{tid},\"args\":",
            self.pid
        );
        push_args(out, args);
        out.push('}');
    }

    /// The track of `queue`; a new one is named `name`, or after the queue.
    fn track(&mut self, queue: &str, name: Option<&str>) -> u32 {
        if let Some(&tid) = self.tracks.get(queue) {
            return tid;
        }
        let tid = self.tracks.len() as u32 + 1;
        self.tracks.insert(queue.to_string(), tid);
        let mut ev = String::from(",\n");
        let name = name.unwrap_or(queue);
        self.push_metadata(&mut ev, "thread_name", tid, &[("name", name.into())]);
        self.pending.push_str(&ev);
        tid
    }

    /// Names `queue`'s track after its label and priority, and orders it by priority.
    pub fn name_queue(&mut self, queue: &str, priority: &str) -> io::Result<()> {
        let name = format!("{queue} [{priority}]");
        let mut ev = String::new();
        let tid = match self.tracks.get(queue) {
            // Renamed: the last name wins.
            Some(&tid) => {
                ev.push_str(",\n");
                self.push_metadata(
                    &mut ev,
                    "thread_name",
                    tid,
                    &[("name", name.as_str().into())],
                );
                tid
            }
            None => self.track(queue, Some(&name)),
        };
        let index = sort_index(priority);
        let _ = write!(
            ev,
            ",\n{{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":{},\"tid\":{tid},\"args\":{{\"sort_index\":{index}}}}}",
            self.pid
        );
        self.push(ev)
    }

    /// A duration event ("X") on `queue`'s track.
    pub fn complete(
        &mut self,
        queue: &str,
        name: &str,
        cat: &str,
        start_ns: u64,
        end_ns: u64,
        args: &[(&str, Arg<'_>)],
    ) -> io::Result<()> {
        let mut ev = self.event_head(queue, name, cat, "X", start_ns);
        ev.push_str(",\"dur\":");
        push_us(&mut ev, end_ns.saturating_sub(start_ns));
        ev.push_str(",\"args\":");
        push_args(&mut ev, args);
        ev.push('}');
        self.push(ev)
    }

    /// An instant event ("i", thread scope) on `queue`'s track.
    pub fn instant(
        &mut self,
        queue: &str,
        name: &str,
        cat: &str,
        at_ns: u64,
        args: &[(&str, Arg<'_>)],
    ) -> io::Result<()> {
        let mut ev = self.event_head(queue, name, cat, "i", at_ns);
        ev.push_str(",\"s\":\"t\",\"args\":");
        push_args(&mut ev, args);
        ev.push('}');
        self.push(ev)
    }

    fn event_head(&mut self, queue: &str, name: &str, cat: &str, ph: &str, ts_ns: u64) -> String {
        let tid = self.track(queue, None);
        let mut ev = String::from(",\n{\"name\":");
        push_str(&mut ev, name);
        let _ = write!(
            ev,
            ",\"cat\":\"{cat}\",\"ph\":\"{ph}\",\"pid\":{},\"tid\":{tid},\"ts\":",
            self.pid
        );
        push_us(&mut ev, ts_ns);
        ev
    }

    fn push(&mut self, ev: String) -> io::Result<()> {
        self.pending.push_str(&ev);
        if self.pending.len() >= FLUSH_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the buffered events over the tail and puts the tail back after them.
    pub fn flush(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        self.pending.push_str(TAIL);
        self.file.seek(SeekFrom::End(-(TAIL.len() as i64)))?;
        self.file.write_all(self.pending.as_bytes())?;
        self.pending.clear();
        Ok(())
    }
}

fn create_unique(dir: &Path, pid: u32) -> io::Result<(PathBuf, File)> {
    let mut last = None;
    for n in 0..100 {
        let name = match n {
            0 => format!("softpreempt-{pid}.json"),
            n => format!("softpreempt-{pid}-{n}.json"),
        };
        let path = dir.join(name);
        match OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(f) => return Ok((path, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no free trace file name")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn read(path: &Path) -> Value {
        let text = std::fs::read_to_string(path).unwrap();
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}:\n{text}"))
    }

    fn events(v: &Value) -> &Vec<Value> {
        v["traceEvents"].as_array().unwrap()
    }

    #[test]
    fn file_is_valid_json_before_and_after_each_flush() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = TraceFile::create(dir.path(), 42, "app \"x\" (pid 42)").unwrap();
        assert_eq!(t.path(), dir.path().join("softpreempt-42.json"));
        let v = read(t.path());
        assert_eq!(events(&v).len(), 1);
        assert_eq!(v["traceEvents"][0]["args"]["name"], "app \"x\" (pid 42)");

        t.name_queue("queue 0", "high:2").unwrap();
        t.complete(
            "queue 0",
            "mandel",
            "slice",
            1_000_500,
            3_000_000,
            &[("rows", 16u64.into()), ("label", "a\nb".into())],
        )
        .unwrap();
        // Buffered, not yet written: the file still parses, with the old events.
        assert_eq!(events(&read(t.path())).len(), 1);
        t.flush().unwrap();
        t.instant(
            "queue 1",
            "preempted",
            "preempt",
            2_000_000,
            &[("share", true.into())],
        )
        .unwrap();
        t.flush().unwrap();
        t.flush().unwrap();

        let v = read(t.path());
        let evs = events(&v);
        let slice = evs.iter().find(|e| e["ph"] == "X").unwrap();
        assert_eq!(slice["name"], "mandel");
        assert_eq!(slice["ts"].as_f64().unwrap(), 1000.5);
        assert_eq!(slice["dur"].as_f64().unwrap(), 1999.5);
        assert_eq!(slice["args"]["label"], "a\nb");
        assert_eq!(slice["tid"], 1);
        let names: Vec<&str> = evs
            .iter()
            .filter(|e| e["name"] == "thread_name")
            .map(|e| e["args"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["queue 0 [high:2]", "queue 1"]);
        let sort = evs
            .iter()
            .find(|e| e["name"] == "thread_sort_index")
            .unwrap();
        assert_eq!(sort["args"]["sort_index"], -2);
        let inst = evs.iter().find(|e| e["ph"] == "i").unwrap();
        assert_eq!(
            (inst["tid"].as_u64(), inst["s"].as_str()),
            (Some(2), Some("t"))
        );
    }

    #[test]
    fn large_buffers_flush_by_themselves_and_names_never_collide() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = TraceFile::create(dir.path(), 7, "a").unwrap();
        let b = TraceFile::create(dir.path(), 7, "b").unwrap();
        assert_eq!(b.path(), dir.path().join("softpreempt-7-1.json"));
        for i in 0..2000u64 {
            a.complete("q", "k", "slice", i * 10, i * 10 + 5, &[])
                .unwrap();
        }
        let written = events(&read(a.path())).len();
        assert!(written > 1 && written < 2002, "{written}");
        a.flush().unwrap();
        assert_eq!(events(&read(a.path())).len(), 2002);
    }

    #[test]
    fn priorities_sort_most_urgent_first() {
        let order = ["high:3", "high", "normal:1", "normal", "low:9", "low"];
        let keys: Vec<i64> = order.iter().map(|p| sort_index(p)).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "{keys:?}");
    }
}
