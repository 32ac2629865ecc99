//! A kernel class's own copies of its timing models, one per device, which the launch path
//! reads (`launch::predicted_ns`) without the process-wide table's lock and hash.
//!
//! The process-wide table (`submitter::MODELS`) stays the one the submitter learns in;
//! every change to an entry is copied here under that table's lock (`submitter::observe`,
//! `submitter::forget_kernel`), so a copy always equals its entry.

use smallvec::SmallVec;
use softpreempt_sched::TimingModel;
use std::sync::{Mutex, MutexGuard};

/// The timing models of one kernel class, by device (its inner handle).
#[derive(Default)]
pub struct ClassModels(Mutex<SmallVec<[(usize, TimingModel); 1]>>);

impl ClassModels {
    fn lock(&self) -> MutexGuard<'_, SmallVec<[(usize, TimingModel); 1]>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The class's model on `device`: a fresh one while nothing is learned, as the
    /// process-wide table gives.
    pub fn get(&self, device: usize) -> TimingModel {
        self.lock()
            .iter()
            .find(|(d, _)| *d == device)
            .map_or_else(TimingModel::default, |(_, m)| *m)
    }

    /// Replaces the copy for `device` (only under the process-wide table's lock).
    pub(super) fn set(&self, device: usize, model: TimingModel) {
        let mut all = self.lock();
        match all.iter_mut().find(|(d, _)| *d == device) {
            Some((_, m)) => *m = model,
            None => all.push((device, model)),
        }
    }

    /// Forgets every copy (only under the process-wide table's lock).
    pub(super) fn clear(&self) {
        self.lock().clear();
    }
}
