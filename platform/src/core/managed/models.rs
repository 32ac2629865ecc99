//! A kernel class's own copies of its timing models, one per device, which the launch path
//! reads (`launch::predicted_ns`) without the process-wide table's lock and hash, and the
//! device time of the class's last two launches observed whole on each device.
//!
//! The process-wide table (`submitter::MODELS`) stays the one the submitter learns in;
//! every change to an entry is copied here under that table's lock (`submitter::observe`,
//! `submitter::forget_kernel`), so a copy always equals its entry.

use smallvec::SmallVec;
use softpreempt_sched::TimingModel;
use std::sync::{Mutex, MutexGuard};

/// What a class knows on one device.
#[derive(Clone, Copy)]
struct OnDevice {
    device: usize,
    model: TimingModel,
    /// The latest launch timed whole, and the one before it.
    launches: [Option<LaunchTime>; 2],
}

/// A launch of the class whose every piece was timed: its size in waves, its own device
/// time (each piece's time divided by the clients that shared the device), and the number
/// of pieces it ran as.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LaunchTime {
    pub waves: f64,
    pub ns: u64,
    pub pieces: u64,
}

impl LaunchTime {
    /// This launch's time scaled to one launch of `waves` waves, the fixed cost of a
    /// launch (`fixed_ns`, the model's) paid once: each of its pieces paid it, and a
    /// launch of one wave, mostly fixed cost, does not make one of a thousand look a
    /// thousand times as long.
    pub fn scaled_to(&self, waves: u64, fixed_ns: f64) -> u64 {
        if self.waves <= 0.0 {
            return 0;
        }
        let ns = self.ns as f64;
        let fixed = fixed_ns.clamp(0.0, ns / self.pieces.max(1) as f64);
        let work = ns - fixed * self.pieces.max(1) as f64;
        (fixed + work * waves as f64 / self.waves).min(u64::MAX as f64) as u64
    }
}

/// How far below its whole launches the model may predict a launch before they bound it.
const BOUND_SLACK: u64 = 4;

/// What a launch of `waves` waves should take: the model's prediction, never shorter than
/// a quarter of the lesser of the class's last two launches timed whole, scaled to this
/// one's size.
/// The model is learned from pieces, and an uneven kernel's cheap rows can make it read a
/// long launch as short (`Submitter::note_launch_time`), which would send the kernel's
/// launches straight to the vendor, untimed, for good. The lesser of two: one launch that
/// paid a cold start (on PoCL a piece of a shape not seen before compiles for 50-80 ms)
/// does not keep a short kernel from going direct. A quarter: the bound is there for a
/// model misled by an order of magnitude or more (the demo's, a hundredfold); within that
/// the model, an average of many pieces, is the better estimate, and a short kernel's two
/// last launches before it goes direct (and is no longer timed) may both have been slow
/// on a loaded machine, which would class it as not short for good (CI's
/// `tests/managed_trace.rs`: a 94 µs kernel's new kernel objects kept recording their
/// arguments). A launch that really got shorter is timed whole again before it goes
/// direct, and then lowers the bound.
pub fn predict_bounded(
    model: &TimingModel,
    launches: [Option<LaunchTime>; 2],
    waves: u64,
) -> Option<u64> {
    model.predict(waves).map(|p| {
        let fixed = model.fit().map_or(0.0, |(fixed, _)| fixed);
        let bound = launches
            .iter()
            .flatten()
            .map(|l| l.scaled_to(waves, fixed) / BOUND_SLACK)
            .min();
        bound.map_or(p, |b| p.max(b))
    })
}

/// The timing models of one kernel class, by device (its inner handle).
#[derive(Default)]
pub struct ClassModels(Mutex<SmallVec<[OnDevice; 1]>>);

impl ClassModels {
    fn lock(&self) -> MutexGuard<'_, SmallVec<[OnDevice; 1]>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn entry<'a>(all: &'a mut SmallVec<[OnDevice; 1]>, device: usize) -> &'a mut OnDevice {
        match all.iter().position(|d| d.device == device) {
            Some(i) => &mut all[i],
            None => {
                all.push(OnDevice {
                    device,
                    model: TimingModel::default(),
                    launches: [None; 2],
                });
                all.last_mut().expect("just pushed")
            }
        }
    }

    /// The class's model on `device`: a fresh one while nothing is learned, as the
    /// process-wide table gives.
    pub fn get(&self, device: usize) -> TimingModel {
        self.with_launches(device).0
    }

    /// The class's model on `device`, and its last two launches timed whole there (the
    /// latest first).
    pub fn with_launches(&self, device: usize) -> (TimingModel, [Option<LaunchTime>; 2]) {
        self.lock()
            .iter()
            .find(|d| d.device == device)
            .map_or((TimingModel::default(), [None; 2]), |d| {
                (d.model, d.launches)
            })
    }

    /// Replaces the copy for `device` (only under the process-wide table's lock).
    pub(super) fn set(&self, device: usize, model: TimingModel) {
        Self::entry(&mut self.lock(), device).model = model;
    }

    /// Records a launch of the class on `device` whose every piece was timed.
    pub(super) fn note_launch(&self, device: usize, launch: LaunchTime) {
        let mut all = self.lock();
        let d = &mut Self::entry(&mut all, device).launches;
        *d = [Some(launch), d[0]];
    }

    /// Forgets every copy (only under the process-wide table's lock).
    pub(super) fn clear(&self) {
        self.lock().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(waves: f64, ns: u64, pieces: u64) -> LaunchTime {
        LaunchTime { waves, ns, pieces }
    }

    #[test]
    fn a_launch_time_scales_with_the_waves_asked() {
        let l = launch(4096.0, 160_000_000, 1);
        assert_eq!(l.scaled_to(4096, 0.0), 160_000_000);
        assert_eq!(l.scaled_to(1024, 0.0), 40_000_000);
        // The fixed cost is paid once, and is never more than a piece.
        assert_eq!(l.scaled_to(1024, 40_000.0), 40_030_000);
        let one = launch(1.0, 50_000, 1);
        assert_eq!(one.scaled_to(1000, 40_000.0), 10_040_000);
        assert_eq!(one.scaled_to(2, 1e9), 50_000);
        assert_eq!(launch(0.0, 5, 1).scaled_to(10, 0.0), 0);
        // Five pieces paid it five times; a whole launch of the same size pays it once.
        assert_eq!(
            launch(100.0, 1_500_000, 5).scaled_to(100, 100_000.0),
            1_100_000
        );
    }

    #[test]
    fn a_model_misled_by_cheap_pieces_is_bounded_by_whole_launches() {
        // The demo's Mandelbrot on PoCL: pieces of its cheap bottom rows teach about 400 ns
        // a wave, while a whole launch of 4096 waves took 160 ms.
        let mut m = TimingModel::default();
        for _ in 0..16 {
            m.observe(1024, 60_000 + 1024 * 400);
            m.observe(256, 60_000 + 256 * 400);
        }
        let short = m.predict(4096).expect("a settled model predicts");
        assert!(short < 5_000_000, "the misled model: {short} ns");
        assert_eq!(predict_bounded(&m, [None; 2], 4096), Some(short));
        let long = launch(4096.0, 160_000_000, 1);
        let bounded = predict_bounded(&m, [Some(long), None], 4096).expect("predicted");
        assert!(bounded >= 159_000_000 / BOUND_SLACK, "{bounded}");
        // Half the launch: about half the time, the fixed cost paid once.
        let half = predict_bounded(&m, [Some(long), Some(long)], 2048).expect("predicted");
        let half_range = 79_000_000 / BOUND_SLACK..=81_000_000 / BOUND_SLACK;
        assert!(half_range.contains(&half), "{half}");
        // Within the slack the model's own average stands: two slow launches of a short
        // kernel (3x its average) do not bound it.
        let slow = launch(4096.0, short * 3, 1);
        assert_eq!(
            predict_bounded(&m, [Some(slow), Some(slow)], 4096),
            Some(short)
        );
        // A model that knows better (dearer than the launches) is left alone.
        let cheap = launch(4096.0, 1_000, 1);
        assert_eq!(predict_bounded(&m, [Some(cheap), None], 4096), Some(short));
        // One launch that paid a cold start does not hold the bound up: the lesser rules.
        assert_eq!(
            predict_bounded(&m, [Some(long), Some(cheap)], 4096),
            Some(short)
        );
        // Nothing learned: no prediction, bound or not.
        assert_eq!(
            predict_bounded(&TimingModel::default(), [Some(long), None], 4096),
            None
        );
    }

    #[test]
    fn the_model_and_the_launches_are_kept_apart_by_device() {
        let c = ClassModels::default();
        let mut m = TimingModel::default();
        m.observe(2, 1_000);
        c.set(7, m);
        let (a, b) = (launch(2.0, 9_000, 1), launch(2.0, 8_000, 2));
        c.note_launch(7, a);
        assert_eq!(c.with_launches(7), (m, [Some(a), None]));
        c.note_launch(7, b);
        assert_eq!(c.with_launches(7).1, [Some(b), Some(a)], "the latest first");
        c.note_launch(7, a);
        assert_eq!(c.with_launches(7).1, [Some(a), Some(b)], "two kept");
        assert_eq!(c.with_launches(8), (TimingModel::default(), [None; 2]));
        c.set(7, TimingModel::default());
        assert_eq!(
            c.with_launches(7).1[0],
            Some(a),
            "a new model keeps the launches"
        );
        c.clear();
        assert_eq!(c.with_launches(7), (TimingModel::default(), [None; 2]));
    }
}
