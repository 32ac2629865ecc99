//! Device memory by priority (`[memory]` in the configuration): every memory object and
//! SVM allocation a process makes on a SoftPreempt context is counted in the device's
//! arbiter segment, and a lower priority's allocation that would eat into memory
//! reserved for higher ones is refused with `CL_MEM_OBJECT_ALLOCATION_FAILURE`.
//!
//! One memory client per process and physical device (`softpreempt_sched`'s
//! `ClientInfo::for_memory`), registered when a context on that device first allocates
//! (rule 2: being loaded, or creating a context, touches no segment) and kept while a
//! context or an object of the process holds it. Its level is the highest of the process's priority
//! (`queue_priority(None)`) and of the queues the process created on the device before
//! that first allocation: memory belongs to a context, not to a queue, but an application
//! that marks its queue high (`CL_QUEUE_PRIORITY_KHR`) means its work, memory included.
//! Each object holds a [`Charges`]; dropping it (with the wrapper, once the vendor object
//! is released) returns the bytes.

use once_cell::sync::OnceCell;
use softpreempt_sched::{Client, Level, MemoryPolicy, MemoryRefusal, Priority, LEVELS};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::config::{self, LevelAmounts, MemoryConfig};
use crate::core::cl::*;
use crate::core::error::CLResult;
use crate::core::forward::info_string;
use crate::core::managed::arbiter::{
    arbiter_for, client_info, device_info, device_key, queue_priority, root_of,
};
use crate::core::objects::Context;
use crate::core::platform::Device;

/// The label of memory clients in `softpreempt status`.
pub const LABEL: &str = "device memory";

/// This process's memory client on one physical device, with the device's policy.
pub struct DeviceMemory {
    client: Client,
    policy: MemoryPolicy,
    /// `CL_DEVICE_NAME` and the arbiter's key, for the refusal line.
    name: String,
    key: String,
    /// The policy as configured, for the refusal line.
    setting: String,
    /// Whether a refusal was logged as an error already (later ones log as warnings).
    refused_before: AtomicBool,
    /// `CL_DEVICE_MAX_MEM_ALLOC_SIZE` (0: unknown).
    max_alloc: u64,
}

impl DeviceMemory {
    fn open(d: &Device) -> Option<DeviceMemory> {
        let arbiter = arbiter_for(d)?;
        let key = device_key(d);
        let root = root_of(d);
        let name = device_info(root, CL_DEVICE_NAME)
            .map(|b| info_string(&b))
            .unwrap_or_default();
        let ulong = |param| {
            device_info(root, param)
                .and_then(|b| b.get(..8).and_then(|b| b.try_into().ok()))
                .map_or(0, u64::from_ne_bytes)
        };
        let device_bytes = ulong(CL_DEVICE_GLOBAL_MEM_SIZE);
        let max_alloc = ulong(CL_DEVICE_MAX_MEM_ALLOC_SIZE);
        let (policy, setting) = resolve(&config::config().memory, &key, &name, device_bytes);
        let priority = level_for(&key);
        let client = match arbiter.register(client_info(priority, LABEL).for_memory()) {
            Ok(c) => c,
            // Only a configured policy makes this worth an error of its own: without one
            // nothing would be refused anyway, and a full segment is reported already by
            // the queues that could not register (rule 7: one message).
            Err(e) if policy.enabled() => {
                tracing::error!(
                    "softpreempt: cannot count device memory on '{name}' ({key}): {e}; \
                     its allocations are neither counted nor refused"
                );
                return None;
            }
            Err(e) => {
                tracing::debug!("softpreempt: device memory on '{name}' ({key}) not counted: {e}");
                return None;
            }
        };
        Some(DeviceMemory {
            client,
            policy,
            name,
            key,
            setting,
            refused_before: AtomicBool::new(false),
            max_alloc,
        })
    }

    fn refused(&self, what: &str, bytes: u64, r: &MemoryRefusal) {
        let line = format!(
            "softpreempt: refused {what} of {bytes} bytes on device '{}' ({}): {r}; setting: {}",
            self.name, self.key, self.setting
        );
        // The first refusal is seen at the default log level; the ones after it (an
        // allocating loop) only where warnings are logged.
        if self.refused_before.swap(true, Ordering::Relaxed) {
            tracing::warn!("{line}");
        } else {
            tracing::error!("{line}");
        }
    }
}

/// The policy of the device with arbiter key `key` and name `name`: `[memory]`, with
/// the levels that the first matching `[[memory.device]]` gives replaced, in bytes of a
/// device of `device_bytes`; and its description for log lines. Reserves that add up to
/// more than the device are an error (logged once per device and process): the device
/// then only counts.
pub fn resolve(
    cfg: &MemoryConfig,
    key: &str,
    name: &str,
    device_bytes: u64,
) -> (MemoryPolicy, String) {
    let (reserve, cap, from) = match cfg.device.iter().find(|d| d.matches(key, name)) {
        Some(d) => (
            d.reserve.or(cfg.reserve),
            d.cap.or(cfg.cap),
            format!("[[memory.device]] {:?}", d.device),
        ),
        None => (cfg.reserve, cfg.cap, "[memory]".to_string()),
    };
    let bytes = |a: &LevelAmounts| -> [Option<u64>; LEVELS] {
        let mut out = [None; LEVELS];
        for level in [Level::Low, Level::Normal, Level::High] {
            out[level.index()] = a.get(config_level(level)).map(|v| v.bytes_of(device_bytes));
        }
        out
    };
    use config::ControlValue;
    let setting = format!(
        "{from} reserve = {}, cap = {} (device memory {device_bytes} bytes)",
        reserve.render(),
        cap.render()
    );
    let mut policy = MemoryPolicy {
        device_bytes,
        reserve: bytes(&reserve).map(|r| r.unwrap_or(0)),
        cap: bytes(&cap),
    };
    let total = policy
        .reserve
        .iter()
        .fold(0u64, |a, &b| a.saturating_add(b));
    if device_bytes > 0 && total > device_bytes {
        tracing::error!(
            "softpreempt: the memory reserves of device '{name}' ({key}) add up to {total} \
             bytes, more than its {device_bytes}; {setting}; its memory is only counted"
        );
        policy = MemoryPolicy {
            device_bytes,
            ..MemoryPolicy::default()
        };
    }
    (policy, setting)
}

fn config_level(l: Level) -> config::Level {
    match l {
        Level::Low => config::Level::Low,
        Level::Normal => config::Level::Normal,
        Level::High => config::Level::High,
    }
}

/// The highest priority of the queues this process created, per device key.
static QUEUE_PRIORITIES: OnceCell<Mutex<HashMap<String, Priority>>> = OnceCell::new();

/// A managed queue of `priority` was created on `d`: the process's memory on that device
/// is counted at that level at least (if it has allocated nothing there yet; after, the
/// level stays, since bytes already counted cannot move between levels race-free).
pub fn note_queue_priority(d: &Device, priority: Priority) {
    let key = device_key(d);
    let map = QUEUE_PRIORITIES.get_or_init(Default::default);
    let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
    let e = map.entry(key).or_insert(priority);
    *e = (*e).max(priority);
}

/// The memory level of this process on the device with `key`.
fn level_for(key: &str) -> Priority {
    let own = queue_priority(None);
    let queues = QUEUE_PRIORITIES.get().and_then(|m| {
        m.lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .copied()
    });
    queues.map_or(own, |q| q.max(own))
}

/// This process's memory client per device key, while a context or an object holds it:
/// once the process has released them all, its slot is freed (as a queue's is), so a
/// process that exits cleanly leaves no dead client behind.
static DEVICES: OnceCell<Mutex<HashMap<String, Weak<DeviceMemory>>>> = OnceCell::new();

fn for_device(d: &Device) -> Option<Arc<DeviceMemory>> {
    let key = device_key(d);
    let map = DEVICES.get_or_init(Default::default);
    let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(m) = map.get(&key).and_then(Weak::upgrade) {
        return Some(m);
    }
    // A device whose client could not be opened is tried again by the next context
    // (the arbiter's own failure is logged once, by `arbiter_for`).
    let m = Arc::new(DeviceMemory::open(d)?);
    map.insert(key, Arc::downgrade(&m));
    Some(m)
}

/// The memory clients of a context's physical devices (each once), found on its
/// first allocation and kept by the context.
pub type ContextMemory = OnceCell<Box<[Arc<DeviceMemory>]>>;

fn of_context(ctx: &Context) -> &[Arc<DeviceMemory>] {
    ctx.memory.get_or_init(|| {
        let mut out: Vec<Arc<DeviceMemory>> = Vec::new();
        for d in &ctx.devices {
            if let Some(m) = for_device(d.get()) {
                if !out.iter().any(|o| Arc::ptr_eq(o, &m)) {
                    out.push(m);
                }
            }
        }
        out.into_boxed_slice()
    })
}

/// Bytes an object holds on each device of its context, returned when dropped.
#[derive(Default)]
pub struct Charges(Vec<(Arc<DeviceMemory>, u64)>);

impl Charges {
    /// An object that holds no device memory of its own (a sub-buffer, an image on a
    /// buffer).
    pub fn none() -> Charges {
        Charges(Vec::new())
    }
}

impl Drop for Charges {
    fn drop(&mut self) {
        for (m, bytes) in self.0.drain(..) {
            m.client.release_memory(bytes);
        }
    }
}

/// Counts `bytes` of a new object (`what`: "a buffer", for the log line) in `ctx` on each of its
/// devices, or refuses it: "CL_MEM_OBJECT_ALLOCATION_FAILURE if there is a failure to
/// allocate memory for" the object. Whatever was counted before a refusal is returned.
pub fn charge(ctx: &Context, bytes: usize, what: &'static str) -> CLResult<Charges> {
    let bytes = bytes as u64;
    let mut out = Charges(Vec::with_capacity(1));
    for m in of_context(ctx) {
        // "CL_INVALID_BUFFER_SIZE if size is 0 or if size is greater than
        // CL_DEVICE_MAX_MEM_ALLOC_SIZE": the vendor's error to give, not a refusal of
        // ours; nothing of such a request is counted.
        if bytes == 0 || (m.max_alloc > 0 && bytes > m.max_alloc) {
            continue;
        }
        if let Err(r) = m.client.charge_memory(bytes, &m.policy) {
            m.refused(what, bytes, &r);
            return Err(CL_MEM_OBJECT_ALLOCATION_FAILURE);
        }
        out.0.push((m.clone(), bytes));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{DeviceMemory as DeviceEntry, MemAmount};

    const GIB: u64 = 1 << 30;

    #[test]
    fn resolves_percentages_and_per_device_levels() {
        let mut cfg = MemoryConfig::default();
        cfg.reserve.high = Some(MemAmount::Percent(25.0));
        cfg.cap.low = Some(MemAmount::Bytes(GIB));
        cfg.device.push(DeviceEntry {
            device: "Big GPU".into(),
            reserve: LevelAmounts {
                normal: Some(MemAmount::Bytes(2 * GIB)),
                ..Default::default()
            },
            cap: LevelAmounts::default(),
        });
        let (p, setting) = resolve(&cfg, "uuid-00", "Small GPU", 8 * GIB);
        assert_eq!(p.reserve, [0, 0, 2 * GIB]);
        assert_eq!(p.cap, [Some(GIB), None, None]);
        assert!(
            setting.starts_with("[memory] reserve = { high = \"25%\" }"),
            "{setting}"
        );
        let (p, setting) = resolve(&cfg, "uuid-01", "Big GPU", 8 * GIB);
        assert_eq!(p.reserve, [0, 2 * GIB, 2 * GIB]);
        assert!(setting.contains("\"Big GPU\""), "{setting}");
        assert!(!resolve(&MemoryConfig::default(), "k", "n", GIB).0.enabled());
    }

    #[test]
    fn reserves_larger_than_the_device_only_count() {
        let mut cfg = MemoryConfig::default();
        cfg.reserve.high = Some(MemAmount::Bytes(3 * GIB));
        let (p, _) = resolve(&cfg, "k", "n", 2 * GIB);
        assert!(!p.enabled());
        assert_eq!(p.device_bytes, 2 * GIB);
    }
}
