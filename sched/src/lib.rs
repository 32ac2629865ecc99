//! Cross-process shared-memory priority arbiter for SoftPreempt (no OpenCL inside).
//!
//! Every process that uses a SoftPreempt device opens the same shared-memory segment for
//! that device (`/dev/shm/softpreempt-<uid>-<key>-<hash>`) and decides, at each slice
//! boundary, whether it may submit its next slice. There is no daemon; any process may
//! die at any moment (its OFD lock tells the others, who reclaim its slot).
//!
//! # API
//!
//! ```no_run
//! use std::time::Duration;
//! use softpreempt_sched::{Arbiter, ArbiterOptions, ClientInfo, Priority};
//!
//! let arb = Arbiter::open("pci-0000:01:00.0", &ArbiterOptions::default())?;
//! let client = arb.register(ClientInfo::new("high".parse()?).with_label("queue 0"))?;
//! if client.higher_priority_registered() {
//!     // Slice launches only when something more urgent shares the device.
//! }
//! client.announce_demand();                          // work queued
//! let grant = client.acquire(Duration::from_secs(1))?; // may wait (futex, bounded)
//! // ... submit one slice, wait for its profiling event ...
//! grant.complete(1_500_000);                         // measured duration, ns
//! client.idle();                                     // queue empty (demand lingers)
//! # Ok::<(), softpreempt_sched::SchedError>(())
//! ```
//!
//! * [`Arbiter::open`]`(device_key, &`[`ArbiterOptions`]`)` opens or creates the segment;
//!   [`Arbiter::register`]`(`[`ClientInfo`]`)` → [`Client`] (one per command queue; several
//!   per process are arbitrated like separate processes); unregistering is `Drop`.
//! * [`Client`]: `announce_demand`, `idle`, `acquire(timeout)`, `try_acquire`,
//!   `higher_priority_registered`, `contended`, `should_yield`, `stats`,
//!   `complete_token`; for a memory client (`ClientInfo::for_memory`, one per process
//!   and device), `charge_memory(bytes, &`[`MemoryPolicy`]`)` and `release_memory`.
//! * [`Grant`]: `complete(duration_ns)`, `into_token` (complete later from another
//!   thread through [`Client::complete_token`]); dropping a grant completes it.
//! * The yield handshake (rule 10): a lower client's [`Client::enter_device`]`(yield_ns)`
//!   → [`DeviceClaim`] and [`Client::leave_device`]`(claim, yielded)`, or
//!   [`Client::leave_device_now`]`(claim)` → [`LeftDevice`]`::settle(yielded)` when
//!   whether it yielded is known only later;
//!   [`Client::yield_request_epoch`]; a higher client's
//!   [`Client::claim_device`]`(cap)` → [`Handshake`]; the watcher's
//!   [`Arbiter::yield_generation`] and [`Arbiter::wait_yield_generation`]; leases:
//!   [`Client::heartbeat`] every [`Arbiter::heartbeat_interval`].
//! * [`Priority`]`{ level: `[`Level`]`, number }`, parsed from `"high"`, `"normal"`,
//!   `"low"`, `"high:3"`.
//! * Status: [`inspect`]`(path)` and [`list_segments`]`(dir)` read segments without
//!   registering; [`Arbiter::snapshot`] does the same for an open one.
//! * Planner (pure): [`NdRange`], [`Slice`], [`slice_at`], [`plan_next`],
//!   [`SlicePlanner`], [`slices`], [`TimingModel`], [`TimingTable`].
//!
//! # Policy
//!
//! Strict priority between (level, number) at slice granularity; round robin by slices,
//! fair in device time, among demanding clients of the same priority; `min_share` lets a blocked lower client
//! take one grant in every N; `hp_linger` keeps demand raised for a while after idle; at
//! most `max_inflight` slices in flight per client. Demand should be raised only when the
//! next slice is ready to submit: a raised demand that never acquires holds back lower
//! priorities and its round-robin peers (until `acquire` times out for them).
//!
//! See `docs/design-sched.md` for the layout, protocols and their model checks.

#![warn(missing_docs)]
// Under loom only the protocol modules are built; the OS-facing helpers go unused.
#![cfg_attr(loom, allow(dead_code))]

mod error;
mod handshake;
mod layout;
mod lease;
mod memory;
mod policy;
mod priority;
mod sync;

#[cfg(not(loom))]
mod client;
#[cfg(not(loom))]
mod fault;
#[cfg(not(loom))]
mod futex;
#[cfg(not(loom))]
mod linger;
#[cfg(not(loom))]
mod liveness;
#[cfg(not(loom))]
mod options;
#[cfg(not(loom))]
pub mod planner;
#[cfg(not(loom))]
mod profile;
#[cfg(not(loom))]
mod segment;
#[cfg(not(loom))]
mod stats;

pub use error::SchedError;
pub use memory::{judge as judge_memory, MemoryPolicy, MemoryRefusal, RefusalReason};
pub use priority::{Level, Priority, LEVELS};

#[cfg(not(loom))]
pub use client::{
    ActivityMark, Arbiter, Client, ClientInfo, DeviceClaim, Grant, GrantToken, Handshake,
    LeftDevice, PolicyParams,
};
#[cfg(not(loom))]
pub use liveness::{now_ns as monotonic_ns, process_alive, process_start_time};
#[cfg(not(loom))]
pub use options::{ArbiterOptions, DEFAULT_LEASE};
#[cfg(not(loom))]
pub use planner::{
    adapted_target, no_dearer, plan_next, rows_for_target, slice_at, slices, slow_start_floor,
    wave_rows, waves, NdRange, Slice, SliceEfficiency, SlicePlanner, TimingModel, TimingTable,
};
#[cfg(not(loom))]
pub use profile::RowProfile;
#[cfg(not(loom))]
pub use segment::{list_segments, segment_name, SEGMENT_PREFIX};
#[cfg(not(loom))]
pub use stats::{inspect, ClientState, ClientStats, SegmentSnapshot};

/// Layout constants, for tools that want to show or check raw segments.
pub mod consts {
    pub use crate::layout::{HEADER_SIZE, MAGIC, MAX_SLOTS, SLOT_SIZE, VERSION};
}
