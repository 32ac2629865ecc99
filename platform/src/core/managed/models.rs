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

/// How far above its whole launches the model may predict a launch before they bound it.
const CAP_SLACK: u64 = 2;

/// What a launch of `waves` waves should take: the model's prediction, never shorter than
/// a quarter of the lesser of the class's last two launches timed whole, nor longer than
/// twice the latest of them, scaled to this one's size.
///
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
///
/// Misled the other way, a model learned from pieces that were mostly a launch's fixed
/// cost reads that cost as work and predicts many times the launch: PoCL's
/// `get_global_linear_id` kernel (65,536 groups of 64 items, a launch 1 ms bare and 2.3
/// ms in 48 pieces) was predicted at 391 ms, so its launches went as its yielding entry,
/// which its tiny groups make 7 times slower than the kernel, never judged slower than
/// 391 ms; its LP started next to a busy HP kept 0.08-0.11 of its bare rate
/// (`benches/lp_arrival.py --kernel linear_id`). A whole launch is what the launch costs,
/// the pieces' fixed costs included, so twice it is a safe ceiling. The latest, not the
/// lesser: a kernel whose launches got dearer (more iterations) shows it first in the
/// launch through the layer that taught the model so, and a cheap first launch must not
/// hold its dearer ones under the piece length, straight to the vendor and untimed
/// (`tests/managed_short.rs`); a cold first launch only raises it.
pub fn predict_bounded(
    model: &TimingModel,
    launches: [Option<LaunchTime>; 2],
    waves: u64,
) -> Option<u64> {
    model.predict(waves).map(|p| {
        let fixed = model.fit().map_or(0.0, |(fixed, _)| fixed);
        let scaled = launches.map(|l| l.map(|l| l.scaled_to(waves, fixed)));
        let floor = scaled.iter().flatten().min().map_or(0, |l| l / BOUND_SLACK);
        let ceiling = scaled[0].map_or(u64::MAX, |l| l.saturating_mul(CAP_SLACK).max(1));
        p.max(floor).min(ceiling.max(floor))
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
        // A model dearer than the launches, within twice them, is left alone.
        let quick = launch(4096.0, short * 2 / 3, 1);
        assert_eq!(predict_bounded(&m, [Some(quick), None], 4096), Some(short));
        // One launch that paid a cold start does not hold the bound up: the lesser rules.
        assert_eq!(
            predict_bounded(&m, [Some(long), Some(quick)], 4096),
            Some(short)
        );
        // Nothing learned: no prediction, bound or not.
        assert_eq!(
            predict_bounded(&TimingModel::default(), [Some(long), None], 4096),
            None
        );
    }

    #[test]
    fn a_model_that_read_fixed_cost_as_work_is_capped_by_whole_launches() {
        // PoCL's `get_global_linear_id` kernel: one-wave pieces of about 12 µs taught
        // 12 µs a wave, while its launch of 32,768 waves took 2.3 ms in 48 pieces.
        let mut m = TimingModel::default();
        for _ in 0..16 {
            m.observe(1, 12_000);
        }
        let misled = m.predict(32_768).expect("a settled model predicts");
        assert!(misled > 300_000_000, "{misled}");
        let whole = launch(32_768.0, 2_300_000, 48);
        let cold = launch(32_768.0, 58_000_000, 34);
        assert_eq!(
            predict_bounded(&m, [Some(whole), Some(cold)], 32_768),
            Some(4_600_000)
        );
        // The latest launch caps it: a cheap one before a dear one does not.
        let dear = launch(32_768.0, 400_000_000, 8);
        assert_eq!(
            predict_bounded(&m, [Some(dear), Some(whole)], 32_768),
            Some(misled)
        );
        // Half the launch: half the ceiling.
        assert_eq!(
            predict_bounded(&m, [Some(whole), None], 16_384),
            Some(2_300_000)
        );
        // The cold launch alone only caps it far above.
        assert_eq!(
            predict_bounded(&m, [Some(cold), None], 32_768),
            Some(116_000_000)
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
