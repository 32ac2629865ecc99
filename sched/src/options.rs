//! Options for opening a device's arbiter.

use std::path::PathBuf;
use std::time::Duration;

use crate::error::SchedError;
use crate::layout::{MAX_INFLIGHT_LIMIT, MAX_LINGER_NS, MAX_SHARE_EVERY, MAX_SLOTS};

/// How to open (or create) a device's segment.
///
/// `max_clients`, `max_inflight`, `min_share` and `hp_linger` are *segment-wide*: the
/// process that creates the segment records them in the header, and every process then
/// arbitrates with the recorded values (a differing local setting is logged and ignored),
/// so all processes on a device follow one policy.
#[derive(Clone, Debug)]
pub struct ArbiterOptions {
    /// Directory holding segments. Default `/dev/shm`.
    pub shm_dir: PathBuf,
    /// Client slots, fixed at creation, 1..=256. Default 64.
    pub max_clients: u32,
    /// Slices a client may have granted and not completed, 1..=64. Default 2.
    pub max_inflight: u32,
    /// Fraction of grants that lower levels may take while a higher level has demand,
    /// 0.0 (off, strict priority) to 0.5. Stored as "one grant in N", N = round(1/share).
    pub min_share: f64,
    /// How long a client's demand stays raised after it goes idle (and after each
    /// completion while idle). At most 60 s. Default 1 ms.
    pub hp_linger: Duration,
    /// Share segments with this group: mode 0660, group-owned, named after the group.
    /// Default `None`: mode 0600, named after the user.
    pub group: Option<u32>,
    /// Owner a segment must have; default the effective uid (tests override it).
    pub expected_uid: Option<u32>,
    /// How long to wait for another process to publish a segment's header. Default 2 s.
    pub open_timeout: Duration,
    /// How often a blocked waiter checks that the clients in its way are alive. Default
    /// 50 ms.
    pub liveness_interval: Duration,
    /// Leases: how long a client may show no progress (a stopped process) before its
    /// place in the round robin and its on-device claims lapse, so that peers stop waiting
    /// for it. Segment-wide; 1 ms..=60 s (clamped). Default 250 ms. A process's watcher
    /// calls [`crate::Client::heartbeat`] well within it (see
    /// [`crate::Arbiter::heartbeat_interval`]).
    pub lease: Duration,
}

/// [`ArbiterOptions::lease`] by default: long enough that a live process's watcher (which
/// beats at a quarter of it) and a waiter (which decides at least every
/// `liveness_interval`) never miss it, short enough that a stopped peer holds the others up
/// for no longer than a few of the HP's requests.
pub const DEFAULT_LEASE: Duration = Duration::from_millis(250);

impl Default for ArbiterOptions {
    fn default() -> Self {
        ArbiterOptions {
            shm_dir: PathBuf::from("/dev/shm"),
            max_clients: 64,
            max_inflight: 2,
            min_share: 0.0,
            hp_linger: Duration::from_millis(1),
            group: None,
            expected_uid: None,
            open_timeout: Duration::from_secs(2),
            liveness_interval: Duration::from_millis(50),
            lease: DEFAULT_LEASE,
        }
    }
}

impl ArbiterOptions {
    /// Checks ranges; called by `Arbiter::open`.
    pub fn validate(&self) -> Result<(), SchedError> {
        let bad = |s: String| Err(SchedError::InvalidArgument(s));
        if self.max_clients == 0 || self.max_clients as usize > MAX_SLOTS {
            return bad(format!(
                "max_clients {} not in 1..={MAX_SLOTS}",
                self.max_clients
            ));
        }
        if self.max_inflight == 0 || self.max_inflight > MAX_INFLIGHT_LIMIT {
            return bad(format!(
                "max_inflight {} not in 1..={MAX_INFLIGHT_LIMIT}",
                self.max_inflight
            ));
        }
        if !(0.0..=0.5).contains(&self.min_share) {
            return bad(format!("min_share {} not in 0.0..=0.5", self.min_share));
        }
        if self.hp_linger.as_nanos() > MAX_LINGER_NS as u128 {
            return bad(format!("hp_linger {:?} is over 60 s", self.hp_linger));
        }
        if self.liveness_interval.is_zero() {
            return bad("liveness_interval must be nonzero".into());
        }
        Ok(())
    }

    /// `min_share` as "one grant in N" (0 = off).
    pub fn share_every(&self) -> u32 {
        if self.min_share <= 0.0 {
            0
        } else {
            ((1.0 / self.min_share).round() as u32).clamp(2, MAX_SHARE_EVERY)
        }
    }
}
