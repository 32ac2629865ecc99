//! The row-cost profiles of this process's launch geometries (see
//! [`softpreempt_sched::RowProfile`]): what each work-group row of a (kernel, device,
//! range) cost in the launches already finished, so slices of an uneven kernel are cut by
//! the cost of the rows they will cover. Shared by every queue of the process, as the
//! timing models are.

use once_cell::sync::Lazy;
use softpreempt_sched::{NdRange, RowProfile};
use std::collections::HashMap;
use std::sync::Mutex;

use super::submitter::ModelKey;

/// A launch geometry: the kernel and device, and the range with its slicing block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProfileKey {
    model: ModelKey,
    offset: [usize; 3],
    global: [usize; 3],
    unit: [usize; 3],
}

impl ProfileKey {
    pub fn new(model: ModelKey, range: &NdRange) -> Self {
        ProfileKey {
            model,
            offset: range.global_offset,
            global: range.global_size,
            unit: range.local_size,
        }
    }
}

/// Most geometries remembered: a process launching ever new ranges (a growing batch) must
/// not grow this without bound; past it the table starts over, as a new process would.
const MAX_PROFILES: usize = 512;

static PROFILES: Lazy<Mutex<HashMap<ProfileKey, RowProfile>>> =
    Lazy::new(|| Mutex::new(HashMap::new()));

fn table() -> std::sync::MutexGuard<'static, HashMap<ProfileKey, RowProfile>> {
    PROFILES.lock().unwrap_or_else(|e| e.into_inner())
}

/// Rows from `first` whose learned cost fits `budget_ns`, in whole `granule`s (see
/// [`RowProfile::rows_within`]); `None` where this geometry's rows are not known yet.
pub fn rows_within(key: &ProfileKey, first: u64, budget_ns: f64, granule: u64) -> Option<u64> {
    table().get(key)?.rows_within(first, budget_ns, granule)
}

/// The learned work ns of rows `[first, first + n)`, when known.
pub fn predict(key: &ProfileKey, first: u64, n: u64) -> Option<f64> {
    table().get(key)?.predict(first, n)
}

/// How much dearer than the geometry's average row rows `[first, first + n)` are, when
/// known (see [`RowProfile::relative_cost`]).
pub fn relative_cost(key: &ProfileKey, first: u64, n: u64) -> Option<f64> {
    table().get(key)?.relative_cost(first, n)
}

/// Records that rows `[first, first + n)` of a range of `rows` rows took `work_ns`.
pub fn observe(key: ProfileKey, rows: u64, first: u64, n: u64, work_ns: f64) {
    let mut t = table();
    if t.len() >= MAX_PROFILES && !t.contains_key(&key) {
        t.clear();
    }
    t.entry(key)
        .or_insert_with(|| RowProfile::new(rows))
        .observe(first, n, work_ns);
}

/// Forgets the profiles of kernel class `h` (`KernelClass::id`).
pub fn forget_kernel(h: usize) {
    table().retain(|k, _| k.model.0 != h);
}
