//! Joining the device's arbiter: the device key, the arbiter segment (one per physical
//! device, opened once per process), and the queue's priority.

use once_cell::sync::OnceCell;
use softpreempt_sched::{Arbiter, ArbiterOptions, ClientInfo, Level, Priority};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::config::{self, Config};
use crate::core::cl::*;
use crate::core::forward::{fetch_info, info_string};
use crate::core::platform::Device;

/// The physical device a (sub-)device belongs to: arbitration is per physical device.
pub(crate) fn root_of(d: &Device) -> &Device {
    match &d.parent {
        Some(p) => root_of(p.get()),
        None => d,
    }
}

pub(crate) fn device_info(d: &Device, name: cl_device_info) -> Option<Vec<u8>> {
    let i = &d.inner;
    fetch_info(|s, v, r| match i.vt.clGetDeviceInfo {
        // SAFETY: the vendor's own query on its own device.
        Some(f) => unsafe { f(i.h, name, s, v, r) },
        None => CL_INVALID_OPERATION,
    })
    .ok()
}

const CL_DEVICE_UUID_KHR: cl_device_info = 0x106A;
const CL_DEVICE_PCI_BUS_INFO_KHR: cl_device_info = 0x410F;
const CL_DEVICE_PCI_BUS_ID_NV: cl_device_info = 0x4008;
const CL_DEVICE_PCI_SLOT_ID_NV: cl_device_info = 0x4009;
const CL_DEVICE_PCI_DOMAIN_ID_NV: cl_device_info = 0x400A;

/// A key that names the same physical device in every process: its UUID, else its PCI
/// address, else vendor id, name and position on its platform.
pub fn device_key(d: &Device) -> String {
    let d = root_of(d);
    let exts = device_info(d, CL_DEVICE_EXTENSIONS)
        .map(|b| info_string(&b))
        .unwrap_or_default();
    let has = |e: &str| exts.split_ascii_whitespace().any(|x| x == e);
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    if has("cl_khr_device_uuid") {
        if let Some(u) = device_info(d, CL_DEVICE_UUID_KHR).filter(|u| u.len() == 16) {
            return format!("uuid-{}", hex(&u));
        }
    }
    if has("cl_khr_pci_bus_info") {
        if let Some(p) = device_info(d, CL_DEVICE_PCI_BUS_INFO_KHR).filter(|p| p.len() == 16) {
            return format!("pci-{}", hex(&p));
        }
    }
    if has("cl_nv_device_attribute_query") {
        let part = |n| device_info(d, n).map(|b| hex(&b)).unwrap_or_default();
        return format!(
            "pci-nv-{}-{}-{}",
            part(CL_DEVICE_PCI_DOMAIN_ID_NV),
            part(CL_DEVICE_PCI_BUS_ID_NV),
            part(CL_DEVICE_PCI_SLOT_ID_NV)
        );
    }
    let vendor = device_info(d, CL_DEVICE_VENDOR_ID)
        .map(|b| hex(&b))
        .unwrap_or_default();
    let name = device_info(d, CL_DEVICE_NAME)
        .map(|b| info_string(&b))
        .unwrap_or_default();
    let index = crate::core::platform::root_devices(d.platform)
        .ok()
        .and_then(|all| all.iter().position(|r| std::ptr::eq(r.get(), d)))
        .unwrap_or(0);
    format!("{vendor}-{name}-{index}")
}

fn options(cfg: &Config) -> ArbiterOptions {
    let s = &cfg.sched;
    ArbiterOptions {
        shm_dir: s.shm_dir.clone(),
        max_inflight: s.max_inflight,
        min_share: s.min_share,
        hp_linger: Duration::from_micros(s.hp_linger_us),
        group: s.shm_group.as_deref().and_then(group_id),
        ..ArbiterOptions::default()
    }
}

/// The group's id: by name from the group database, else a number taken as the id itself
/// (containers know their supplementary groups by number, and their images rarely name
/// the group a node shares).
fn group_id(name: &str) -> Option<u32> {
    let c = std::ffi::CString::new(name).ok()?;
    // SAFETY: getgrnam reads the group database; the returned record is only read here,
    // before any other getgr* call on this thread.
    let g = unsafe { libc::getgrnam(c.as_ptr()) };
    if !g.is_null() {
        // SAFETY: non-NULL record from getgrnam.
        return Some(unsafe { (*g).gr_gid });
    }
    if let Ok(gid) = name.parse::<u32>() {
        return Some(gid);
    }
    tracing::error!("softpreempt: shm_group '{name}' does not exist; segments stay private");
    None
}

/// The arbiter of each device this process uses, opened on first use. `None` records a
/// device whose segment could not be opened (its queues run in pass-through).
static ARBITERS: OnceCell<Mutex<HashMap<String, Option<Arc<Arbiter>>>>> = OnceCell::new();

/// The device's arbiter, or `None` (logged once per device) when it cannot be opened.
pub fn arbiter_for(d: &Device) -> Option<Arc<Arbiter>> {
    let key = device_key(d);
    let map = ARBITERS.get_or_init(|| Mutex::new(HashMap::new()));
    let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
    map.entry(key.clone())
        .or_insert_with(|| match Arbiter::open(&key, &options(config::config())) {
            Ok(a) => Some(Arc::new(a)),
            Err(e) => {
                tracing::error!(
                    "softpreempt: cannot open the arbiter for device '{key}': {e}; \
                     its queues run in pass-through (no preemption)"
                );
                None
            }
        })
        .clone()
}

/// `CL_QUEUE_PRIORITY_KHR` as an arbiter priority.
fn from_hint(hint: cl_queue_priority_khr) -> Priority {
    let level = match hint {
        CL_QUEUE_PRIORITY_HIGH_KHR => Level::High,
        CL_QUEUE_PRIORITY_LOW_KHR => Level::Low,
        _ => Level::Normal,
    };
    Priority { level, number: 0 }
}

fn from_config(p: config::Priority) -> Priority {
    let level = match p.level {
        config::Level::High => Level::High,
        config::Level::Normal => Level::Normal,
        config::Level::Low => Level::Low,
    };
    Priority {
        level,
        number: p.number,
    }
}

/// This process's executable name, for rules and for `softpreempt status`.
pub fn exe_name() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| format!("pid{}", std::process::id()))
}

/// Whether the process runs under a real-time class (`chrt -f` / `chrt -r`): the earlier
/// SoftPreempt prototype's way of marking latency-critical processes.
fn realtime() -> bool {
    // SAFETY: sched_getscheduler(0) only queries the calling process.
    let policy = unsafe { libc::sched_getscheduler(0) };
    policy == libc::SCHED_FIFO || policy == libc::SCHED_RR
}

/// The queue's priority, in the order of the architecture brief: the queue property, then
/// `SOFTPREEMPT_PRIORITY`, then config rules (by executable or uid), then a real-time
/// scheduling class, then the configured default.
pub fn queue_priority(hint: Option<cl_queue_priority_khr>) -> Priority {
    if let Some(h) = hint {
        return from_hint(h);
    }
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let (p, source) = config::priority_for_process(config::config(), &exe_name(), uid);
    if matches!(source, config::Source::Default) && realtime() {
        return Priority {
            level: Level::High,
            number: 0,
        };
    }
    from_config(p)
}

/// The client description for a queue.
pub fn client_info(priority: Priority, label: &str) -> ClientInfo {
    ClientInfo::new(priority)
        .with_exe(&exe_name())
        .with_label(label)
}

#[cfg(test)]
mod tests {
    use super::group_id;

    #[test]
    fn groups_by_name_or_number() {
        assert_eq!(group_id("root"), Some(0));
        assert_eq!(group_id("4242"), Some(4242));
        assert_eq!(group_id("no-such-group-softpreempt"), None);
    }
}
