//! The slice planner: pure functions that cut an NDRange into slices of whole work-groups
//! along its largest dimension, sized by a per-(kernel, device) timing model.
//!
//! A slice is `(offset[3], size[3])`, launched with `global_work_offset = offset`,
//! `global_work_size = size` and the original local size. Along the sliced dimension a
//! slice covers whole rows of work-groups, starting at a multiple of the local size from
//! the original offset; the last slice also carries the remainder group of a non-uniform
//! NDRange (OpenCL 2.0+). Other dimensions are covered in full.

use std::collections::HashMap;
use std::hash::Hash;

use crate::error::SchedError;

/// An NDRange with its local size fixed. Unused dimensions have offset 0, size 1, local 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NdRange {
    /// 1..=3.
    pub work_dim: u32,
    /// `global_work_offset`.
    pub global_offset: [usize; 3],
    /// `global_work_size`.
    pub global_size: [usize; 3],
    /// `local_work_size`, nonzero.
    pub local_size: [usize; 3],
}

/// One slice of an NDRange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slice {
    /// `global_work_offset` for this slice.
    pub offset: [usize; 3],
    /// `global_work_size` for this slice.
    pub size: [usize; 3],
    /// The sliced dimension.
    pub dim: usize,
    /// First work-group row (along `dim`) covered.
    pub first_row: u64,
    /// Work-group rows covered.
    pub rows: u64,
    /// Work-groups in this slice.
    pub work_groups: u64,
}

impl NdRange {
    /// Builds and checks an NDRange from OpenCL-style arrays of `work_dim` entries
    /// (`offset` may be empty for "no offset").
    pub fn new(
        work_dim: u32,
        offset: &[usize],
        global: &[usize],
        local: &[usize],
    ) -> Result<NdRange, SchedError> {
        let bad = |s: &str| Err(SchedError::InvalidArgument(s.to_string()));
        let d = work_dim as usize;
        if !(1..=3).contains(&d) {
            return bad("work_dim must be 1..=3");
        }
        if global.len() != d || local.len() != d || !(offset.is_empty() || offset.len() == d) {
            return bad("offset, global and local sizes must have work_dim entries");
        }
        let mut r = NdRange {
            work_dim,
            global_offset: [0; 3],
            global_size: [1; 3],
            local_size: [1; 3],
        };
        for i in 0..d {
            if local[i] == 0 {
                return bad("local size must be nonzero");
            }
            r.global_size[i] = global[i];
            r.local_size[i] = local[i];
            r.global_offset[i] = offset.get(i).copied().unwrap_or(0);
            if r.global_offset[i].checked_add(global[i]).is_none() {
                return bad("global offset + size overflows");
            }
        }
        Ok(r)
    }

    /// Work-groups per dimension (a partial remainder group counts as one).
    pub fn groups(&self) -> [u64; 3] {
        std::array::from_fn(|i| self.global_size[i].div_ceil(self.local_size[i].max(1)) as u64)
    }

    /// Total work-groups.
    pub fn total_groups(&self) -> u64 {
        self.groups().iter().product()
    }

    /// The dimension to slice: the one with the most work-groups (lowest index on ties).
    pub fn slice_dim(&self) -> usize {
        let g = self.groups();
        let mut best = 0;
        for i in 1..self.work_dim as usize {
            if g[i] > g[best] {
                best = i;
            }
        }
        best
    }

    /// Work-group rows along the sliced dimension.
    pub fn rows(&self) -> u64 {
        self.groups()[self.slice_dim()]
    }

    /// Work-groups in one row (the product over the other dimensions).
    pub fn groups_per_row(&self) -> u64 {
        let g = self.groups();
        let d = self.slice_dim();
        (0..3).filter(|&i| i != d).map(|i| g[i]).product()
    }
}

/// The slice covering rows `[first_row, first_row + rows)`, clamped to what remains.
/// `None` if `first_row` is past the end or `rows` is 0.
pub fn slice_at(range: &NdRange, first_row: u64, rows: u64) -> Option<Slice> {
    let total = range.rows();
    if rows == 0 || first_row >= total {
        return None;
    }
    let rows = rows.min(total - first_row);
    let d = range.slice_dim();
    let local = range.local_size[d];
    let start = first_row as usize * local;
    let end = ((first_row + rows) as usize * local).min(range.global_size[d]);
    let mut offset = range.global_offset;
    let mut size = range.global_size;
    offset[d] += start;
    size[d] = end - start;
    Some(Slice {
        offset,
        size,
        dim: d,
        first_row,
        rows,
        work_groups: rows * range.groups_per_row(),
    })
}

/// How long a slice of a given size takes, for one (kernel, device): an exponentially
/// weighted least-squares fit of `ns = overhead + per_wg * work_groups`.
///
/// The intercept matters: a launch costs tens of microseconds however small it is (on
/// NVIDIA's OpenCL driver about 40 µs from submission to completion), and a model without
/// it reads a small slice's overhead as work-group cost, so it keeps slices small for ever.
/// With one slice size only there is no fit: the cost is then taken as all per-group
/// (`ns / work_groups`), which errs towards smaller slices.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimingModel {
    /// Decayed sums: weight, x, y, x², xy (x = work-groups, y = ns).
    w: f64,
    sx: f64,
    sy: f64,
    sxx: f64,
    sxy: f64,
    samples: u64,
    alpha: f64,
}

impl Default for TimingModel {
    fn default() -> Self {
        TimingModel::new(0.25)
    }
}

impl TimingModel {
    /// A model with no data; `alpha` (0..=1) is the weight of a new observation.
    pub fn new(alpha: f64) -> Self {
        TimingModel {
            w: 0.0,
            sx: 0.0,
            sy: 0.0,
            sxx: 0.0,
            sxy: 0.0,
            samples: 0,
            alpha: alpha.clamp(0.01, 1.0),
        }
    }

    /// Records that `work_groups` groups took `ns`.
    pub fn observe(&mut self, work_groups: u64, ns: u64) {
        self.observe_units(work_groups as f64, ns);
    }

    /// Records that `units` of work took `ns`: work-groups or waves, or for an uneven
    /// kernel waves weighted by how dear their rows are (see [`crate::RowProfile`]).
    pub fn observe_units(&mut self, units: f64, ns: u64) {
        if units <= 0.0 || !units.is_finite() {
            return;
        }
        let (x, y) = (units, ns as f64);
        let keep = if self.samples == 0 {
            0.0
        } else {
            1.0 - self.alpha
        };
        self.w = self.w * keep + 1.0;
        self.sx = self.sx * keep + x;
        self.sy = self.sy * keep + y;
        self.sxx = self.sxx * keep + x * x;
        self.sxy = self.sxy * keep + x * y;
        self.samples += 1;
    }

    /// Observations so far.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// The fitted (overhead ns, ns per work-group), once there is data.
    pub fn fit(&self) -> Option<(f64, f64)> {
        if self.samples == 0 || self.sx <= 0.0 {
            return None;
        }
        let (mx, my) = (self.sx / self.w, self.sy / self.w);
        let var = self.sxx / self.w - mx * mx;
        let cov = self.sxy / self.w - mx * my;
        // Sizes must differ by a few percent for the slope to mean anything.
        if var > 0.0025 * mx * mx {
            let slope = cov / var;
            let overhead = my - slope * mx;
            if slope > 0.0 && overhead >= 0.0 {
                return Some((overhead, slope));
            }
        }
        Some((0.0, my / mx))
    }

    /// Estimated ns per work-group, once there is data.
    pub fn ns_per_wg(&self) -> Option<f64> {
        self.fit().map(|(_, b)| b)
    }

    /// Predicted ns for `work_groups` groups, once there is data.
    pub fn predict(&self, work_groups: u64) -> Option<u64> {
        self.fit()
            .map(|(a, b)| (a + b * work_groups as f64).min(u64::MAX as f64) as u64)
    }
}

/// Timing models keyed by (kernel, device) or any key the caller chooses.
#[derive(Debug, Default)]
pub struct TimingTable<K: Hash + Eq> {
    models: HashMap<K, TimingModel>,
}

impl<K: Hash + Eq> TimingTable<K> {
    /// An empty table.
    pub fn new() -> Self {
        TimingTable {
            models: HashMap::new(),
        }
    }

    /// The model for `key` (a fresh one if unseen).
    pub fn get(&self, key: &K) -> TimingModel {
        self.models.get(key).copied().unwrap_or_default()
    }

    /// Records an observation for `key`.
    pub fn observe(&mut self, key: K, work_groups: u64, ns: u64) {
        self.models.entry(key).or_default().observe(work_groups, ns);
    }

    /// Records an observation in weighted units (see [`TimingModel::observe_units`]).
    pub fn observe_units(&mut self, key: K, units: f64, ns: u64) {
        self.models.entry(key).or_default().observe_units(units, ns);
    }

    /// Drops the models whose key matches (their kernel is gone, and a new one may get
    /// the same key).
    pub fn forget(&mut self, mut matches: impl FnMut(&K) -> bool) {
        self.models.retain(|k, _| !matches(k));
    }
}

/// Work-group rows that make up one wave: the fewest rows holding at least `wave_wgs`
/// work-groups (the device's resident capacity for the kernel), at least 1.
///
/// A device runs a bounded number of work-groups at once. A slice narrower than that
/// still takes a whole wave's time and leaves the rest of the device idle, so slices are
/// cut in whole waves, never less than one.
pub fn wave_rows(range: &NdRange, wave_wgs: u64) -> u64 {
    wave_wgs
        .max(1)
        .div_ceil(range.groups_per_row().max(1))
        .clamp(1, range.rows().max(1))
}

/// Waves that `work_groups` groups take on a device running `wave_wgs` at once (a partial
/// wave takes a whole wave's time).
pub fn waves(work_groups: u64, wave_wgs: u64) -> u64 {
    work_groups.div_ceil(wave_wgs.max(1))
}

/// Rows per slice that the model predicts fit in `target_ns`, on a device that runs
/// `wave_wgs` work-groups at once: a power of two of whole waves' rows (see [`wave_rows`]),
/// at least one wave; `None` without data. The model is in waves (see [`waves`]): a row
/// may hold many waves (a 2D range with many groups per row) or a wave many rows.
///
/// The rounding keeps the set of slice shapes small: vendors that compile or tune per
/// launch shape (PoCL builds a work-group function per local size it picks for a NULL
/// local size) would otherwise meet a new shape at almost every slice.
pub fn rows_for_target(
    range: &NdRange,
    model: &TimingModel,
    target_ns: u64,
    wave_wgs: u64,
) -> Option<u64> {
    let (overhead, per_wave) = model.fit()?;
    let wave_rows = wave_rows(range, wave_wgs);
    if per_wave <= 0.0 || !per_wave.is_finite() {
        return Some(range.rows().max(1));
    }
    // The work part gets what the fixed cost leaves, but at least half the target: a
    // device whose launch overhead exceeds the target still gets useful slices.
    let budget = target_ns as f64 - overhead.min(target_ns as f64 / 2.0);
    let waves_fit = ((budget / per_wave).floor() as u64).max(1);
    let rows_fit = waves_fit.saturating_mul(wave_wgs.max(1)) / range.groups_per_row().max(1);
    let units = (rows_fit / wave_rows).max(1);
    Some((1u64 << units.ilog2()).saturating_mul(wave_rows))
}

/// The slice target to plan with, given the cost per wave of the most recent finished
/// piece of the same kernel (`recent_ns_per_wave`). Uneven kernels (a Mandelbrot set, sparse
/// work) cost far more in some parts of the range than the model's average: where the
/// recent pieces ran slower than the model predicts, the target shrinks in proportion, so
/// the next slice lands near the target instead of several times over it. Faster recent
/// pieces leave the target alone (the model catches up by itself, and latency never pays
/// for the optimism).
pub fn adapted_target(model: &TimingModel, recent_ns_per_wave: Option<f64>, target_ns: u64) -> u64 {
    match (model.fit(), recent_ns_per_wave) {
        (Some((_, per_wave)), Some(recent)) if recent > per_wave && per_wave > 0.0 => {
            ((target_ns as f64 * per_wave / recent) as u64).max(1)
        }
        _ => target_ns,
    }
}

/// Plans the next slice after `rows_done` rows, in whole waves of `wave_wgs` work-groups.
/// Without model data it takes `slow_start_rows` rows (the caller grows that between
/// slices, see [`SlicePlanner`]).
pub fn plan_next(
    range: &NdRange,
    rows_done: u64,
    model: &TimingModel,
    target_ns: u64,
    slow_start_rows: u64,
    wave_wgs: u64,
) -> Option<Slice> {
    let rows = rows_for_target(range, model, target_ns, wave_wgs)
        .unwrap_or(slow_start_rows.max(wave_rows(range, wave_wgs)).max(1));
    slice_at(range, rows_done, rows)
}

/// Walks one NDRange slice by slice, in whole waves, with slow start for kernels never
/// seen: one wave, then doubling, until the timing model has data.
#[derive(Clone, Debug)]
pub struct SlicePlanner {
    range: NdRange,
    rows_done: u64,
    slow_start_rows: u64,
    wave_rows: u64,
    wave_wgs: u64,
}

impl SlicePlanner {
    /// A planner at the start of `range`, on a device that runs `wave_wgs` of its
    /// work-groups at once.
    pub fn new(range: NdRange, wave_wgs: u64) -> Self {
        let wave_rows = wave_rows(&range, wave_wgs);
        SlicePlanner {
            range,
            rows_done: 0,
            slow_start_rows: wave_rows,
            wave_rows,
            wave_wgs,
        }
    }

    /// The range being planned.
    pub fn range(&self) -> &NdRange {
        &self.range
    }

    /// Rows in one wave.
    pub fn wave_rows(&self) -> u64 {
        self.wave_rows
    }

    /// Rows already handed out.
    pub fn rows_done(&self) -> u64 {
        self.rows_done
    }

    /// True when every row has been handed out.
    pub fn is_done(&self) -> bool {
        self.rows_done >= self.range.rows()
    }

    /// The next slice, or `None` when the range is covered.
    pub fn next_slice(&mut self, model: &TimingModel, target_ns: u64) -> Option<Slice> {
        let s = plan_next(
            &self.range,
            self.rows_done,
            model,
            target_ns,
            self.slow_start_rows,
            self.wave_wgs,
        )?;
        if model.samples() == 0 {
            self.slow_start_rows = self.slow_start_rows.saturating_mul(2);
        }
        self.rows_done += s.rows;
        Some(s)
    }

    /// The next slice of exactly `rows` rows (fewer at the end), sized by the caller (from
    /// a [`crate::RowProfile`]), or `None` when the range is covered.
    pub fn take(&mut self, rows: u64) -> Option<Slice> {
        let s = slice_at(&self.range, self.rows_done, rows.max(1))?;
        self.rows_done += s.rows;
        Some(s)
    }
}

/// Iterates all slices of `range` with a fixed number of rows per slice.
pub fn slices(range: NdRange, rows_per_slice: u64) -> impl Iterator<Item = Slice> {
    let mut next = 0u64;
    std::iter::from_fn(move || {
        let s = slice_at(&range, next, rows_per_slice.max(1))?;
        next += s.rows;
        Some(s)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn slices_largest_dimension_by_groups() {
        // 2D: 64x1000 items, local 1x100 → groups 64 x 10: slice dim 0.
        let r = NdRange::new(2, &[], &[64, 1000], &[1, 100]).unwrap();
        assert_eq!(r.groups(), [64, 10, 1]);
        assert_eq!(r.slice_dim(), 0);
        assert_eq!(r.groups_per_row(), 10);
        let s = slice_at(&r, 4, 3).unwrap();
        assert_eq!(s.offset, [4, 0, 0]);
        assert_eq!(s.size, [3, 1000, 1]);
        assert_eq!(s.work_groups, 30);
    }

    #[test]
    fn remainder_group_goes_in_last_slice() {
        let r = NdRange::new(1, &[5], &[10], &[4]).unwrap();
        let all: Vec<Slice> = slices(r, 2).collect();
        assert_eq!(all.len(), 2);
        assert_eq!((all[0].offset[0], all[0].size[0]), (5, 8));
        assert_eq!((all[1].offset[0], all[1].size[0]), (13, 2));
    }

    #[test]
    fn slow_start_doubles_until_model_has_data() {
        let r = NdRange::new(1, &[], &[1 << 20], &[64]).unwrap();
        let mut p = SlicePlanner::new(r, 1);
        let mut m = TimingModel::default();
        let rows: Vec<u64> = (0..4)
            .map(|_| p.next_slice(&m, 1_000_000).unwrap().rows)
            .collect();
        assert_eq!(rows, vec![1, 2, 4, 8]);
        m.observe(8, 8_000); // 1 µs per work-group
                             // 1000 rows fit; rounded down to a power of two.
        let s = p.next_slice(&m, 1_000_000).unwrap();
        assert_eq!(s.rows, 512);
        assert_eq!(m.predict(1000), Some(1_000_000));
    }

    #[test]
    fn slices_are_whole_waves_never_less_than_one() {
        // 1000 rows of 1 group; the device runs 100 groups at once.
        let r = NdRange::new(1, &[], &[64_000], &[64]).unwrap();
        assert_eq!(wave_rows(&r, 100), 100);
        let mut p = SlicePlanner::new(r, 100);
        let mut m = TimingModel::default();
        // Slow start begins at one wave.
        assert_eq!(p.next_slice(&m, 1_000_000).unwrap().rows, 100);
        assert_eq!(p.next_slice(&m, 1_000_000).unwrap().rows, 200);
        // One wave takes 16 ms (long work-items): a 1 ms target still gets one wave.
        m.observe(waves(100, 100), 16_000_000);
        assert_eq!(p.next_slice(&m, 1_000_000).unwrap().rows, 100);
        // 50 µs waves: 1 ms holds 20 of them, rounded down to 16.
        let mut fast = TimingModel::default();
        fast.observe(1, 50_000);
        assert_eq!(rows_for_target(&r, &fast, 1_000_000, 100), Some(1600));
        // Rows of 10 groups: a wave of 25 groups needs 3 rows.
        let r2 = NdRange::new(2, &[], &[100, 640], &[1, 64]).unwrap();
        assert_eq!(r2.groups_per_row(), 10);
        assert_eq!(wave_rows(&r2, 25), 3);
        assert_eq!(waves(250, 100), 3);
        // Rows of 128 groups on a device running 2 at once: 64 waves a row. At 4 µs a
        // wave, 1 ms holds 250 waves, so 3 rows, rounded down to 2 (not 256 rows).
        let r3 = NdRange::new(2, &[], &[1024, 1024], &[8, 1]).unwrap();
        assert_eq!((r3.groups_per_row(), wave_rows(&r3, 2)), (128, 1));
        let mut m3 = TimingModel::default();
        m3.observe(64, 256_000);
        assert_eq!(rows_for_target(&r3, &m3, 1_000_000, 2), Some(2));
        assert_eq!(waves(0, 100), 0);
    }

    #[test]
    fn uneven_kernels_shrink_the_target_where_they_run_slow() {
        let mut m = TimingModel::default();
        m.observe(1, 100_000); // 100 µs per wave on average
                               // The last piece ran at 500 µs a wave: a fifth of the target keeps slices near it.
        assert_eq!(adapted_target(&m, Some(500_000.0), 1_000_000), 200_000);
        // Faster, or nothing known: the target as configured.
        assert_eq!(adapted_target(&m, Some(50_000.0), 1_000_000), 1_000_000);
        assert_eq!(adapted_target(&m, None, 1_000_000), 1_000_000);
        assert_eq!(
            adapted_target(&TimingModel::default(), Some(1e9), 1_000_000),
            1_000_000
        );
    }

    #[test]
    fn launch_overhead_is_fitted_apart_from_work() {
        // 40 µs per launch plus 1 µs per work-group.
        let mut m = TimingModel::default();
        for wg in [1u64, 2, 4, 8, 16, 32, 64] {
            m.observe(wg, 40_000 + 1_000 * wg);
        }
        let (a, b) = m.fit().unwrap();
        assert!(
            (a - 40_000.0).abs() < 1.0 && (b - 1_000.0).abs() < 0.01,
            "{a} {b}"
        );
        let r = NdRange::new(1, &[], &[1 << 20], &[64]).unwrap();
        // 200 µs target: 160 µs of work fit, 128 after rounding down.
        assert_eq!(rows_for_target(&r, &m, 200_000, 1), Some(128));
    }

    #[test]
    fn ewma_moves_towards_new_observations() {
        let mut m = TimingModel::new(0.5);
        assert_eq!(m.predict(1), None);
        m.observe(10, 1000);
        m.observe(10, 3000);
        // Weights 1/3 and 2/3 (decayed sums): 100 and 300 ns per group.
        assert!((m.ns_per_wg().unwrap() - 700.0 / 3.0).abs() < 1e-9);
        let mut t: TimingTable<(&str, u32)> = TimingTable::new();
        t.observe(("k", 0), 1, 5);
        assert_eq!(t.get(&("k", 0)).samples(), 1);
        assert_eq!(t.get(&("k", 1)).samples(), 0);
    }

    #[test]
    fn rejects_bad_ranges() {
        assert!(NdRange::new(0, &[], &[], &[]).is_err());
        assert!(NdRange::new(4, &[], &[1; 4], &[1; 4]).is_err());
        assert!(NdRange::new(1, &[], &[8], &[0]).is_err());
        assert!(NdRange::new(2, &[], &[8], &[1]).is_err());
        assert!(NdRange::new(1, &[usize::MAX], &[8], &[1]).is_err());
        let empty = NdRange::new(1, &[], &[0], &[4]).unwrap();
        assert_eq!(slices(empty, 1).count(), 0);
    }

    fn arb_range() -> impl Strategy<Value = NdRange> {
        (1u32..=3)
            .prop_flat_map(|d| {
                (
                    Just(d),
                    prop::collection::vec(0usize..50, d as usize),
                    prop::collection::vec(1usize..24, d as usize),
                    prop::collection::vec(1usize..6, d as usize),
                )
            })
            .prop_map(|(d, o, g, l)| NdRange::new(d, &o, &g, &l).unwrap())
    }

    /// Checks that `slices` tile `r` exactly once, aligned to the local size.
    #[allow(clippy::needless_range_loop)]
    fn check_tiling(r: &NdRange, slices: &[Slice]) -> Result<(), TestCaseError> {
        let g = r.global_size;
        let mut hits = vec![0u8; g[0] * g[1] * g[2]];
        let d = r.slice_dim();
        for s in slices {
            for i in 0..3 {
                let rel = s.offset[i] - r.global_offset[i];
                if i == d {
                    prop_assert_eq!(rel % r.local_size[i], 0, "slice start not aligned");
                    let end = rel + s.size[i];
                    prop_assert!(
                        s.size[i] % r.local_size[i] == 0 || end == g[i],
                        "partial group not at the end"
                    );
                } else {
                    prop_assert_eq!(rel, 0);
                    prop_assert_eq!(s.size[i], g[i]);
                }
            }
            for z in 0..s.size[2] {
                for y in 0..s.size[1] {
                    for x in 0..s.size[0] {
                        let (gx, gy, gz) = (
                            s.offset[0] - r.global_offset[0] + x,
                            s.offset[1] - r.global_offset[1] + y,
                            s.offset[2] - r.global_offset[2] + z,
                        );
                        prop_assert!(gx < g[0] && gy < g[1] && gz < g[2], "outside range");
                        hits[(gz * g[1] + gy) * g[0] + gx] += 1;
                    }
                }
            }
        }
        prop_assert!(hits.iter().all(|&h| h == 1), "gap or overlap");
        prop_assert_eq!(
            slices.iter().map(|s| s.work_groups).sum::<u64>(),
            r.total_groups()
        );
        Ok(())
    }

    proptest! {
        #[test]
        fn fixed_slices_tile_exactly_once(r in arb_range(), rows in 1u64..7) {
            let all: Vec<Slice> = slices(r, rows).collect();
            check_tiling(&r, &all)?;
        }

        #[test]
        fn planned_slices_tile_exactly_once(
            r in arb_range(),
            obs in prop::collection::vec((1u64..10, 1u64..100_000), 0..6),
            target in 1u64..200_000,
            wave in 1u64..64,
        ) {
            let mut p = SlicePlanner::new(r, wave);
            let mut m = TimingModel::default();
            let mut out = Vec::new();
            let mut obs = obs.into_iter();
            while let Some(s) = p.next_slice(&m, target) {
                prop_assert!(s.rows >= 1);
                // Whole waves, except the range's last slice.
                let last = s.first_row + s.rows == r.rows();
                prop_assert!(last || s.rows % p.wave_rows() == 0);
                out.push(s);
                if let Some((wg, ns)) = obs.next() {
                    m.observe(wg, ns);
                }
                prop_assert!(out.len() as u64 <= r.rows());
            }
            prop_assert!(p.is_done());
            check_tiling(&r, &out)?;
        }
    }
}

/// Whether slicing at the target pays for one kernel (rule 8), learned from its pieces.
///
/// A slice ends when its slowest work-group does. For uniform kernels that costs a few
/// per cent, but where work-groups differ widely (a Mandelbrot image, sparse work) a
/// slice of a few waves waits on its few dear groups while the rest of the device idles:
/// on an H100 the benchmark's uneven LP kept 35% of its bare throughput when cut at
/// 250 µs, against 98% for a uniform one. So each kernel compares the work it gets done
/// per unit of its own device time in pieces cut at the slice target with that in longer
/// pieces (the piece length, or whole launches), and while the sliced rate falls short of
/// [`SliceEfficiency::MIN_RATIO`] of the long one it doubles its own slice target, up to
/// the piece length. The higher priority then waits longer behind that kernel's slices,
/// never longer than behind a piece.
#[derive(Clone, Debug)]
pub struct SliceEfficiency {
    /// Decayed work-groups and ns of long pieces.
    long: (f64, f64),
    /// Work-groups, ns and pieces cut at the target since the scale last changed.
    sliced: (f64, f64, u32),
    scale: u64,
}

impl Default for SliceEfficiency {
    fn default() -> Self {
        SliceEfficiency {
            long: (0.0, 0.0),
            sliced: (0.0, 0.0, 0),
            scale: 1,
        }
    }
}

impl SliceEfficiency {
    /// The sliced rate below this share of the long one doubles the slice target.
    pub const MIN_RATIO: f64 = 0.85;
    /// Pieces cut at the target that are weighed before the scale changes.
    pub const WINDOW: u32 = 64;

    /// One retired piece: `at_target` if it was cut at the slice target (times the
    /// scale), else a long one; its work-groups and its own device time.
    pub fn observe(&mut self, at_target: bool, work_groups: u64, own_ns: u64, max_scale: u64) {
        if work_groups == 0 || own_ns == 0 {
            return;
        }
        let (w, t) = (work_groups as f64, own_ns as f64);
        if !at_target {
            // Decayed, so a change of the kernel's inputs is followed.
            self.long = (self.long.0 * 0.9 + w, self.long.1 * 0.9 + t);
            return;
        }
        self.sliced = (self.sliced.0 + w, self.sliced.1 + t, self.sliced.2 + 1);
        if self.sliced.2 < Self::WINDOW || self.long.1 <= 0.0 {
            return;
        }
        let ratio = (self.sliced.0 / self.sliced.1) / (self.long.0 / self.long.1);
        if ratio < Self::MIN_RATIO && self.scale * 2 <= max_scale.max(1) {
            self.scale *= 2;
        }
        tracing::debug!(
            ratio,
            scale = self.scale,
            "slice efficiency against long pieces"
        );
        self.sliced = (0.0, 0.0, 0);
    }

    /// The factor on the slice target for this kernel (a power of two, at least 1).
    pub fn scale(&self) -> u64 {
        self.scale
    }
}

#[cfg(test)]
mod efficiency_tests {
    use super::SliceEfficiency;

    fn feed(e: &mut SliceEfficiency, at_target: bool, n: u32, wg: u64, ns: u64) {
        for _ in 0..n {
            e.observe(at_target, wg, ns, 8);
        }
    }

    #[test]
    fn uniform_kernels_keep_the_target() {
        let mut e = SliceEfficiency::default();
        feed(&mut e, false, 20, 1000, 2_000_000);
        // 95% of the long rate: slicing pays.
        feed(&mut e, true, 200, 119, 250_000);
        assert_eq!(e.scale(), 1);
    }

    #[test]
    fn uneven_kernels_double_until_it_pays_up_to_the_piece() {
        let mut e = SliceEfficiency::default();
        feed(&mut e, false, 20, 1000, 2_000_000);
        // A third of the long rate at the target.
        feed(&mut e, true, SliceEfficiency::WINDOW, 40, 250_000);
        assert_eq!(e.scale(), 2);
        feed(&mut e, true, SliceEfficiency::WINDOW, 100, 500_000);
        assert_eq!(e.scale(), 4);
        // Good enough at 4x: stays.
        feed(&mut e, true, 3 * SliceEfficiency::WINDOW, 450, 1_000_000);
        assert_eq!(e.scale(), 4);
        // Never past the piece length (8x the target here).
        let mut e = SliceEfficiency::default();
        feed(&mut e, false, 20, 1000, 2_000_000);
        feed(&mut e, true, 10 * SliceEfficiency::WINDOW, 1, 250_000);
        assert_eq!(e.scale(), 8);
    }

    #[test]
    fn nothing_changes_without_long_pieces_to_compare() {
        let mut e = SliceEfficiency::default();
        feed(&mut e, true, 10 * SliceEfficiency::WINDOW, 1, 250_000);
        assert_eq!(e.scale(), 1);
        e.observe(true, 0, 0, 8);
        assert_eq!(e.scale(), 1);
    }
}
