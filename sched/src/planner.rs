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
///
/// A kernel's first launch may pay one-off costs: NVIDIA's driver loads the kernel's
/// module lazily at its first launch (OpenCV's FFT kernel took 7 ms on an H200 the first
/// time, 65 µs afterwards), and PoCL compiles a work-group function for each variant a
/// launch needs (its local size, and apparently a zero global offset or not: a sliced
/// first launch of a 0.1 ms kernel paid 130-300 ms in each of its first two slices). Kept at a weight that
/// decays by `1 - alpha` a launch, such observations make a short kernel look long for
/// many launches. So the observations of the kernel's first launch are provisional (the
/// caller says where a launch ends, [`TimingModel::end_launch`]): a later observation
/// that is [`TimingModel::COLD_FACTOR`] times cheaper than each of them replaces them all
/// (see [`TimingModel::observe_units`]). Decisions with a real cost should wait until the
/// model is [`TimingModel::warm`]: an observation of a second launch has settled the
/// first launch's.
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
    /// While the model holds only the first launch's observations: what a later one is
    /// compared with.
    first_launch: Option<FirstLaunch>,
    /// The first run of another vendor form of the kernel (units, ns), held apart until
    /// the next observation settles it (see [`TimingModel::observe_new_variant`]).
    held: Option<(f64, f64)>,
}

/// The observations of a kernel's first launch, which may have been cold.
#[derive(Clone, Copy, Debug, PartialEq)]
struct FirstLaunch {
    /// Their least ns.
    least_ns: f64,
    /// Their least ns per unit.
    least_per_unit: f64,
    /// Whether that launch has ended (the next observation is of another one).
    ended: bool,
}

impl FirstLaunch {
    const NONE_YET: FirstLaunch = FirstLaunch {
        least_ns: f64::INFINITY,
        least_per_unit: f64::INFINITY,
        ended: false,
    };
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
            first_launch: None,
            held: None,
        }
    }

    /// How much cheaper than each of the first launch's observations, scaled to its size,
    /// a later observation must be to show them cold and replace them.
    ///
    /// Warm, a piece costs `overhead + per_unit * units` with `overhead >= 0`: no less than
    /// an earlier piece's cost scaled in proportion below that piece's size, and no less
    /// than its whole cost above it. An observation of `units` that takes less than
    /// `min(least_ns, least_ns_per_unit * units) / COLD_FACTOR` (the least over the first
    /// launch's observations, a bound below each of them scaled so) therefore shows that
    /// each of them paid at least as much again as its work for something else: a cold
    /// start, or the start-up of its own process on the same cores. Both only ever make
    /// early observations dearer, so a factor of 2, not more, is enough evidence. A kernel
    /// whose inputs really shrink after its first launch is then learned from the smaller
    /// ones, as it would be soon anyway.
    pub const COLD_FACTOR: f64 = 2.0;

    /// Records that `work_groups` groups took `ns`.
    pub fn observe(&mut self, work_groups: u64, ns: u64) {
        self.observe_units(work_groups as f64, ns);
    }

    /// Records that `units` of work took `ns`: work-groups or waves, or for an uneven
    /// kernel waves weighted by how dear their rows are (see [`crate::RowProfile`]).
    ///
    /// While the model holds only its first launch's observations, one that is
    /// [`TimingModel::COLD_FACTOR`] times cheaper than each of them (scaled down in
    /// proportion where they were larger) replaces them all. The first observation after
    /// that launch ended ([`TimingModel::end_launch`]) makes the model
    /// [`TimingModel::warm`], whichever way it went.
    pub fn observe_units(&mut self, units: f64, ns: u64) {
        if units <= 0.0 || !units.is_finite() {
            return;
        }
        let (x, y) = (units, ns as f64);
        self.settle_held(x, y);
        let first = match self.first_launch {
            None if self.samples == 0 => Some(FirstLaunch::NONE_YET),
            None => None,
            Some(f) if Self::shows_cold(f.least_ns, f.least_per_unit, x, y) => {
                tracing::debug!(
                    least_ns = f.least_ns,
                    least_ns_per_unit = f.least_per_unit,
                    ns = y,
                    units = x,
                    "timing model: the first launch's observations were cold, replaced"
                );
                *self = TimingModel::new(self.alpha);
                Some(FirstLaunch {
                    ended: f.ended,
                    ..FirstLaunch::NONE_YET
                })
            }
            Some(f) => Some(f),
        };
        // Still in the first launch: this observation is provisional too.
        self.first_launch = first.filter(|f| !f.ended).map(|f| FirstLaunch {
            least_ns: f.least_ns.min(y),
            least_per_unit: f.least_per_unit.min(y / x),
            ended: false,
        });
        self.add(x, y);
    }

    /// Whether `y` ns for `x` units is [`TimingModel::COLD_FACTOR`] times cheaper than
    /// earlier observations whose least ns and least ns per unit are given, each scaled
    /// to `x` units where it was larger (see there).
    fn shows_cold(least_ns: f64, least_per_unit: f64, x: f64, y: f64) -> bool {
        y * Self::COLD_FACTOR < least_ns.min(least_per_unit * x)
    }

    /// Records the first run of another vendor form of the kernel (the yielding
    /// rewrite's entry, another local size), which may pay its own cold start on a warm
    /// model: PoCL compiled a persistent entry's work-group function in its first run,
    /// 257 ms against 16 ms for every later run of a kernel learned at about 16 ms, and
    /// NVIDIA loads the entries' module then. It is held apart, out of the predictions,
    /// until the next observation: one [`TimingModel::COLD_FACTOR`] times cheaper (scaled
    /// down in proportion where smaller) drops it, any other folds it in before itself.
    /// On a model that is not [`TimingModel::warm`] yet, the first launch's rule covers it:
    /// the same as [`TimingModel::observe_units`].
    pub fn observe_new_variant(&mut self, units: f64, ns: u64) {
        if !self.warm() {
            return self.observe_units(units, ns);
        }
        if units <= 0.0 || !units.is_finite() {
            return;
        }
        let (x, y) = (units, ns as f64);
        // One held before is settled by this one, as by any observation.
        self.settle_held(x, y);
        self.held = Some((x, y));
    }

    /// Settles a held observation (see [`TimingModel::observe_new_variant`]) by one of
    /// `x` units that took `y` ns, which the caller records (or holds) itself.
    fn settle_held(&mut self, x: f64, y: f64) {
        if let Some((hx, hy)) = self.held.take() {
            if Self::shows_cold(hy, hy / hx, x, y) {
                tracing::debug!(
                    held_ns = hy,
                    held_units = hx,
                    ns = y,
                    units = x,
                    "timing model: a new variant's first run was cold, dropped"
                );
            } else {
                self.add(hx, hy);
            }
        }
    }

    /// Adds (`x` units, `y` ns) to the decayed sums.
    fn add(&mut self, x: f64, y: f64) {
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

    /// The launch whose pieces were observed so far has ended: the next observation is of
    /// another launch. (A caller that never says so keeps the first launch's rule for
    /// ever, and the model never [`TimingModel::warm`].)
    pub fn end_launch(&mut self) {
        if let Some(f) = &mut self.first_launch {
            f.ended = true;
        }
    }

    /// Observations the model holds (ones replaced as cold no longer count).
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Whether the model rests on more than its first launch: an observation of a later
    /// launch either agreed with the first launch's or showed them cold and replaced them
    /// (see [`TimingModel::observe_units`]). A decision with a real cost (building a
    /// program's persistent entries, a second vendor compile) waits for this: a first
    /// launch may be all cold start.
    pub fn warm(&self) -> bool {
        self.samples > 0 && self.first_launch.is_none()
    }

    /// The fitted (overhead ns, ns per work-group), once there is data.
    ///
    /// The overhead is a launch's fixed cost (about 40 µs on NVIDIA, 30-120 µs on PoCL): a
    /// line whose overhead exceeds [`TimingModel::MAX_OVERHEAD_NS`] reads noise as one, and
    /// the model keeps that much of it and puts the rest in the slope. Pieces of one size
    /// and a remainder piece, timed on a loaded 2-core machine, fitted a slope near zero
    /// and an overhead of a whole piece (4 ms): a fresh-clone CI run's 111 ms launch,
    /// learned from its 4.5 ms pieces, was then predicted at about 5 ms and went straight
    /// to the vendor as a short one.
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
                if overhead <= Self::MAX_OVERHEAD_NS {
                    return Some((overhead, slope));
                }
                if my > Self::MAX_OVERHEAD_NS {
                    let o = Self::MAX_OVERHEAD_NS;
                    return Some((o, (my - o) / mx));
                }
            }
        }
        Some((0.0, my / mx))
    }

    /// The largest fixed cost of a launch [`TimingModel::fit`] believes: ten times the
    /// largest measured (PoCL's, on a 2-core machine).
    pub const MAX_OVERHEAD_NS: f64 = 1_000_000.0;

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

    /// Records the first run of another vendor form of `key`'s kernel (see
    /// [`TimingModel::observe_new_variant`]).
    pub fn observe_new_variant(&mut self, key: K, units: f64, ns: u64) {
        self.models
            .entry(key)
            .or_default()
            .observe_new_variant(units, ns);
    }

    /// The launch of `key` whose pieces were observed so far has ended (see
    /// [`TimingModel::end_launch`]).
    pub fn end_launch(&mut self, key: &K) {
        if let Some(m) = self.models.get_mut(key) {
            m.end_launch();
        }
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

/// The slice target to plan with, given the most recent finished piece of the same kernel
/// (`recent`: its waves and ns). Uneven kernels (a Mandelbrot set, sparse work) cost far
/// more in some parts of the range than the model's average: where the recent piece's
/// work ran slower a wave than the model's, the target shrinks in proportion, so the next
/// slice lands near the target instead of several times over it. Faster recent pieces
/// leave the target alone (latency never pays for the optimism; [`slow_start_floor`]
/// grows short ones).
///
/// The piece's work is its time less the model's fixed cost of a launch, which is no
/// wave's: compared whole, a piece of one wave that is nearly all fixed cost reads as
/// dearer than the model's slope by that cost. PoCL's `get_global_linear_id` kernel
/// (65,536 groups of 64 items, 20 ns a group) ran 2-group pieces of about 20 µs under a
/// model of about 25 µs and 1-3 µs a wave (`benches/lp_arrival.py --kernel linear_id`),
/// which so shrank the target 10-20 times for no uneven row.
pub fn adapted_target(model: &TimingModel, recent: Option<(f64, u64)>, target_ns: u64) -> u64 {
    let Some(((overhead, per_wave), (waves, ns))) = model.fit().zip(recent) else {
        return target_ns;
    };
    let work = (ns as f64 - overhead).max(0.0) / waves.max(1.0);
    if work > per_wave && per_wave > 0.0 {
        ((target_ns as f64 * per_wave / work) as u64).max(1)
    } else {
        target_ns
    }
}

/// The fewest rows the next piece of a kernel should cover in `range`, given its latest
/// retired piece (`recent`: its work-groups and own ns): twice its groups, where it ran in
/// less than half the target (`target_ns`); `None` otherwise. The caller takes them where
/// its row profile believes them no dearer a row than that piece's ([`no_dearer`]), so an
/// uneven kernel's dear rows still go as the profile cuts them, and rows it has not seen
/// get no floor (the model tells no row from another).
///
/// A piece mostly made of a launch's fixed cost teaches a row profile (and, at one size,
/// a model: [`TimingModel::fit`]) that its few groups cost all of it, and a first piece
/// that paid the vendor's compile teaches its rows tens of milliseconds; pieces cut by
/// such a profile stay that short. The first launch of PoCL's `get_global_linear_id`
/// kernel (65,536 groups of 64 items, 20 ns a group) went as 2-group pieces of about
/// 20 µs, its next ones, cut by the profile they taught, as 2-104-group pieces over the
/// same rows: each a launch's fixed cost for a few µs of work, and the kernel's model
/// then predicted 242 ms a launch. Twice the groups take at most about twice as long (the
/// fixed cost is paid once), so slow start goes on until a piece is about as long as the
/// target, and the sizes differ meanwhile, so the model learns the fixed cost apart from
/// the work.
pub fn slow_start_floor(
    recent: Option<(u64, u64)>,
    target_ns: u64,
    range: &NdRange,
) -> Option<u64> {
    let (groups, own_ns) = recent?;
    if own_ns.saturating_mul(2) >= target_ns || groups == 0 {
        return None;
    }
    Some(
        (groups.saturating_mul(2))
            .div_ceil(range.groups_per_row().max(1))
            .max(1),
    )
}

/// Whether `rows` rows believed to cost `ns` are no dearer a row (within a half) than
/// `recent_rows` believed, by the same profile now, to cost `recent_ns` (see
/// [`slow_start_floor`]). A profile that overstates its rows by a constant (a launch's
/// fixed cost, a cold start) overstates both alike.
pub fn no_dearer(rows: u64, ns: f64, recent_rows: u64, recent_ns: f64) -> bool {
    rows > 0 && recent_rows > 0 && ns / rows as f64 <= 1.5 * recent_ns / recent_rows as f64
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
        let s = self.with_tail(s, model);
        self.rows_done += s.rows;
        Some(s)
    }

    /// The next slice of `rows` rows (fewer at the end; more when [`Self::with_tail`]
    /// joins the rest to it), sized by the caller (from a [`crate::RowProfile`]), or
    /// `None` when the range is covered.
    pub fn take(&mut self, rows: u64, model: &TimingModel) -> Option<Slice> {
        let s = slice_at(&self.range, self.rows_done, rows.max(1))?;
        let s = self.with_tail(s, model);
        self.rows_done += s.rows;
        Some(s)
    }

    /// `s` (starting at `rows_done`), extended to the end of the range when what it would
    /// leave is less than one wave and, by `model`, a wave costs no more than a piece's
    /// fixed cost. Such a tail is a piece of its own that costs the LP a launch and could
    /// spare a higher priority at most one wave's wait: cheaper joined. Slices of whole
    /// waves otherwise left one: tinygrad's 32,768-group launches on an H100 (7.8 waves of
    /// 4,224 groups, about 45 µs) went as 7 waves and a 3,200-group tail, 2,170 pieces for
    /// 1,040 launches. Where a wave costs more than a launch (waves of milliseconds), the
    /// tail stays apart, so a slice never grows by more than the time it saves.
    fn with_tail(&self, s: Slice, model: &TimingModel) -> Slice {
        let rest = self.range.rows().saturating_sub(self.rows_done + s.rows);
        let cheap_wave = model
            .fit()
            .is_some_and(|(overhead, per_wave)| per_wave <= overhead);
        if rest == 0 || rest >= self.wave_rows || !cheap_wave {
            return s;
        }
        slice_at(&self.range, self.rows_done, s.rows + rest).unwrap_or(s)
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

    /// A device whose launches cost 20 µs fixed (10-30 µs, in no order) and 20 ns a group,
    /// a 1-D range of 65,536 groups (one a row, two a wave), and a model first taught by
    /// two one-wave pieces, as a first launch's are: planned as the submitter plans from
    /// the model (`adapted_target`), the pieces soon outgrow the fixed cost and the model
    /// predicts the whole launch within a factor of two. (This holds with the fixed cost
    /// counted as work in `adapted_target` too; the unit test of `adapted_target` pins
    /// that change. What kept PoCL's pieces at one wave was a row profile, below.)
    #[test]
    fn pieces_mostly_of_fixed_cost_do_not_shrink_the_target() {
        let cost = |groups: u64, i: u64| 10_000 + (i * 7919 % 13) * 1_700 + 20 * groups;
        let range = NdRange::new(1, &[], &[65_536 * 64], &[64]).unwrap();
        let target = 1_000_000;
        let mut model = TimingModel::default();
        model.observe(1, cost(2, 0));
        model.observe(1, cost(2, 1));
        let mut planner = SlicePlanner::new(range, 2);
        let mut recent = None;
        let mut sizes = Vec::new();
        while sizes.len() < 40 {
            let t = adapted_target(&model, recent, target);
            let Some(s) = planner.next_slice(&model, t) else {
                break;
            };
            let w = waves(s.work_groups, 2);
            let took = cost(s.work_groups, sizes.len() as u64 + 2);
            model.observe(w, took);
            recent = Some((w as f64, took));
            sizes.push(s.work_groups);
        }
        assert!(sizes.len() < 12, "{sizes:?}");
        let pred = model.predict(waves(65_536, 2)).unwrap() as f64;
        let whole = cost(65_536, 6) as f64;
        assert!(
            (whole / 2.0..=whole * 2.0).contains(&pred),
            "{pred} against {whole}"
        );
    }

    /// The next launch of that kernel, planned by a row profile whose first 512 rows were
    /// learned from the first launch's one-wave pieces with their fixed cost read as
    /// work (10 µs a row) and the rest from long pieces (20 ns): cut by the profile alone,
    /// those rows go as 48-row pieces of about 21 µs each; with the floor of the latest
    /// short piece (`slow_start_floor`), each piece about doubles the last, never takes
    /// more than about twice as long, and none runs past the target. The floor never
    /// takes rows believed dearer than the latest piece's.
    #[test]
    fn a_profile_that_read_fixed_cost_as_work_grows_its_pieces() {
        let cost = |rows: u64| 20_000 + 20 * rows;
        let range = NdRange::new(1, &[], &[65_536 * 64], &[64]).unwrap();
        let mut profile = crate::RowProfile::new(range.rows());
        for first in (0..512).step_by(2) {
            profile.observe(first, 2, 20_000.0);
        }
        profile.observe(512, 65_536 - 512, 20.0 * (65_536 - 512) as f64);
        let mut model = TimingModel::default();
        model.observe(1, cost(2));
        model.observe(8_192, cost(16_384));
        let (overhead, _) = model.fit().unwrap();
        let target = 500_000u64;
        let run = |grow: bool| {
            let mut planner = SlicePlanner::new(range, 2);
            let mut recent: Option<(u64, u64, u64, u64)> = None;
            let mut sizes = Vec::new();
            while !planner.is_done() {
                let t = target as f64;
                let budget = t - overhead.min(t / 2.0);
                let first = planner.rows_done();
                let mut rows = profile.rows_within(first, budget, 1).unwrap();
                let floor = recent.filter(|_| grow).and_then(|(groups, ns, _, _)| {
                    slow_start_floor(Some((groups, ns)), target, &range)
                });
                if let (Some(min), Some((_, _, rfirst, rn))) = (floor, recent) {
                    let min = min.min(range.rows() - first);
                    let believed = profile.predict(first, min).unwrap();
                    let before = profile.predict(rfirst, rn).unwrap();
                    if min > rows && no_dearer(min, believed, rn, before) {
                        rows = min;
                    }
                }
                let s = planner.take(rows, &model).unwrap();
                recent = Some((s.work_groups, cost(s.rows), first, s.rows));
                sizes.push(s.rows);
            }
            sizes
        };
        // Pieces until the 512 rows the profile overstates are covered.
        let over = |sizes: &[u64]| {
            let ends = sizes.iter().scan(0, |done, &r| {
                *done += r;
                Some(*done)
            });
            1 + ends.take_while(|&end| end < 512).count()
        };
        let flat = run(false);
        assert!(over(&flat) >= 10, "{flat:?}");
        let grown = run(true);
        assert!(over(&grown) <= 4, "{grown:?}");
        for w in grown.windows(2) {
            assert!(cost(w[1]) <= (cost(w[0]) * 2).max(target), "{grown:?}");
        }
        assert!(no_dearer(96, 960_000.0, 48, 480_000.0));
        assert!(!no_dearer(96, 3_000_000.0, 48, 480_000.0));
    }

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
    fn a_tail_of_less_than_a_wave_joins_the_slice_before_it_where_waves_are_cheap() {
        // 30 groups, 4 a wave: 7 waves and a tail of 2 groups.
        let r = NdRange::new(1, &[], &[30], &[1]).unwrap();
        let mut cheap = TimingModel::default();
        for (waves, ns) in [(1.0, 40_000), (4.0, 55_000), (8.0, 75_000)] {
            cheap.observe_units(waves, ns);
        }
        let (overhead, per_wave) = cheap.fit().unwrap();
        assert!(per_wave < overhead, "{overhead} {per_wave}");
        let mut p = SlicePlanner::new(r, 4);
        assert_eq!(p.take(28, &cheap).unwrap().rows, 30);
        assert!(p.is_done());
        // A rest of a whole wave or more is a slice of its own.
        let mut p = SlicePlanner::new(r, 4);
        assert_eq!(p.take(24, &cheap).unwrap().rows, 24);
        assert_eq!(p.take(24, &cheap).unwrap().rows, 6);
        // Without a fitted model, and where a wave costs more than a launch, the tail stays
        // apart: joined, it would add more wait than it saves.
        let mut dear = TimingModel::default();
        for (waves, ns) in [(1.0, 1_000_000), (2.0, 2_000_000), (4.0, 4_000_000)] {
            dear.observe_units(waves, ns);
        }
        for m in [&dear, &TimingModel::default()] {
            let mut p = SlicePlanner::new(r, 4);
            assert_eq!(p.take(28, m).unwrap().rows, 28);
            assert_eq!(p.take(28, m).unwrap().rows, 2);
        }
        // Slices sized by the model: 18 groups, a target of about 5 waves gives 4 (a power
        // of two), and the 2 left join them.
        let r = NdRange::new(1, &[], &[18], &[1]).unwrap();
        let mut p = SlicePlanner::new(r, 4);
        let target = (overhead + 5.0 * per_wave) as u64;
        assert_eq!(p.next_slice(&cheap, target).unwrap().rows, 18);
        assert!(p.is_done());
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
        assert_eq!(
            adapted_target(&m, Some((2.0, 1_000_000)), 1_000_000),
            200_000
        );
        // Faster, or nothing known: the target as configured.
        assert_eq!(
            adapted_target(&m, Some((1.0, 50_000)), 1_000_000),
            1_000_000
        );
        assert_eq!(adapted_target(&m, None, 1_000_000), 1_000_000);
        assert_eq!(
            adapted_target(&TimingModel::default(), Some((1.0, 1e9 as u64)), 1_000_000),
            1_000_000
        );
        // A launch's fixed cost is no wave's: 40 µs and 10 µs a wave, a piece of one wave
        // that took 52 µs ran 12 µs a wave, not 52.
        let mut fixed = TimingModel::default();
        for (waves, ns) in [(1, 50_000), (8, 120_000), (64, 680_000)] {
            fixed.observe(waves, ns);
        }
        let (overhead, per_wave) = fixed.fit().unwrap();
        assert!((30_000.0..50_000.0).contains(&overhead), "{overhead}");
        let work = 52_000.0 - overhead;
        assert_eq!(
            adapted_target(&fixed, Some((1.0, 52_000)), 1_000_000),
            (1e6 * per_wave / work) as u64
        );
        assert_eq!(
            adapted_target(&fixed, Some((1.0, 45_000)), 1_000_000),
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

    /// Observes one launch's pieces, `(units, ns)` each, and ends the launch.
    fn launch(m: &mut TimingModel, pieces: &[(f64, u64)]) {
        for &(units, ns) in pieces {
            m.observe_units(units, ns);
        }
        m.end_launch();
    }

    #[test]
    fn a_cold_first_launch_is_replaced_by_a_much_cheaper_second() {
        // OpenCV's FFT kernel on an H200: 7 ms at its first launch (the driver loaded its
        // module), 65 µs afterwards; one wave each time.
        let mut m = TimingModel::default();
        launch(&mut m, &[(1.0, 7_000_000)]);
        assert_eq!(m.predict(1), Some(7_000_000));
        assert!(!m.warm(), "a first launch is provisional");
        launch(&mut m, &[(1.0, 65_000)]);
        assert!(m.warm());
        assert_eq!((m.samples(), m.predict(1)), (1, Some(65_000)));
        launch(&mut m, &[(1.0, 66_000)]);
        assert_eq!(m.samples(), 2);
        assert!(m.predict(1).unwrap() < 70_000, "{:?}", m.fit());
        // Without the rule the first would have kept the kernel above 0.5 ms for 5 more
        // launches: a yielding launch's entries built, launches sent through the FIFO.
        let mut all = TimingModel::default();
        launch(&mut all, &[(1.0, 7_000_000)]);
        all.first_launch = None;
        for _ in 0..5 {
            launch(&mut all, &[(1.0, 65_000)]);
        }
        assert!(all.predict(1).unwrap() > 500_000, "{:?}", all.predict(1));

        // PoCL, a first launch of a 0.1 ms kernel cut in two slices: each compiled a
        // work-group function (apparently: offset zero, then not). They agree with each
        // other, and the second launch's first piece shows them both cold.
        let mut m = TimingModel::default();
        launch(&mut m, &[(1.0, 146_000_000), (1.0, 129_000_000)]);
        assert!(!m.warm() && m.samples() == 2);
        m.observe_units(1.0, 148_000);
        assert!(m.warm());
        assert_eq!((m.samples(), m.predict(1)), (1, Some(148_000)));

        // The first launch sliced on NVIDIA: a cold wave, then warm pieces of two waves
        // (more work, yet cheaper) and of half a wave; the launch's warm pieces stay
        // provisional until the next launch.
        let mut m = TimingModel::default();
        m.observe_units(1.0, 7_000_000);
        m.observe_units(2.0, 100_000);
        assert_eq!((m.samples(), m.predict(2)), (1, Some(100_000)));
        m.observe_units(0.5, 45_000);
        assert_eq!(m.samples(), 2, "the fixed cost leaves small pieces dearer");
        m.end_launch();
        assert!(!m.warm());
        m.observe_units(2.0, 101_000);
        assert!(m.warm() && m.samples() == 3);
    }

    #[test]
    fn pieces_of_one_size_and_a_noisy_remainder_do_not_make_a_long_launch_short() {
        // A fresh-clone CI run on PoCL (2 loaded cores): a 106 ms launch of 96 units sent
        // whole, then launches cut into pieces of 4 units at about 4.5 ms, each ending
        // with a remainder of 2 units that took nearly as long. The line through them has
        // a slope near zero and an overhead of a whole piece.
        let mut m = TimingModel::default();
        launch(&mut m, &[(96.0, 106_000_000)]);
        let noisy = [4.1, 4.9, 4.3, 5.0, 4.4, 4.6, 4.2, 4.8, 4.5, 4.7, 4.0];
        for _ in 0..2 {
            let mut pieces: Vec<(f64, u64)> = (0..23)
                .map(|i| (4.0, (noisy[i % noisy.len()] * 1e6) as u64))
                .collect();
            pieces.push((2.0, 3_900_000));
            launch(&mut m, &pieces);
        }
        let whole = m.predict(96).unwrap();
        assert!(whole > 50_000_000, "{whole} {:?}", m.fit());
        // The same sizes timed without noise keep their line, overhead and all.
        let mut m = TimingModel::default();
        let mut pieces: Vec<(f64, u64)> = (0..23).map(|_| (4.0, 100_000 + 4 * 1_100_000)).collect();
        pieces.push((2.0, 100_000 + 2 * 1_100_000));
        launch(&mut m, &pieces);
        let (a, b) = m.fit().unwrap();
        assert!(
            (a - 100_000.0).abs() < 10.0 && (b - 1_100_000.0).abs() < 1.0,
            "{a} {b}"
        );
    }

    #[test]
    fn a_kernel_that_really_is_long_stays_long() {
        // 20 ms cold, 13 ms warm: the first is dearer, but not twice: both kept.
        let mut m = TimingModel::default();
        launch(&mut m, &[(100.0, 20_000_000)]);
        launch(&mut m, &[(100.0, 13_000_000)]);
        assert!(m.warm());
        assert_eq!(m.samples(), 2);
        let p = m.predict(100).unwrap();
        assert!((13_000_000..20_000_000).contains(&p), "{p}");
        // A second launch far bigger and dearer: kept too, and the fit has two points.
        let mut m = TimingModel::default();
        launch(&mut m, &[(10.0, 50_000 + 10 * 1_000)]);
        launch(&mut m, &[(1000.0, 50_000 + 1000 * 1_000)]);
        assert!(m.warm());
        let (a, b) = m.fit().unwrap();
        assert!(
            (a - 50_000.0).abs() < 1.0 && (b - 1_000.0).abs() < 0.01,
            "{a} {b}"
        );
        // A small warm piece after a big warm launch, cheaper than the big one scaled down
        // only by the fixed cost the proportion leaves out: not taken for a cold start.
        let mut m = TimingModel::default();
        launch(&mut m, &[(100.0, 40_000 + 100 * 250)]);
        launch(&mut m, &[(1.0, 40_000 + 250)]);
        assert_eq!(m.samples(), 2);
        // Nor a bigger piece that costs more than half the first.
        let mut m = TimingModel::default();
        launch(&mut m, &[(10.0, 1_000_000)]);
        launch(&mut m, &[(1000.0, 600_000)]);
        assert_eq!(m.samples(), 2);
    }

    #[test]
    fn one_launch_is_not_warm_and_later_ones_are_not_provisional() {
        let mut m = TimingModel::default();
        assert!(!m.warm());
        m.end_launch();
        launch(&mut m, &[(4.0, 400_000), (4.0, 390_000)]);
        assert!(!m.warm());
        assert_eq!(m.samples(), 2);
        assert!(m.predict(8).unwrap() > 700_000, "still used for planning");
        // Ignored observations change nothing.
        m.observe(0, 1);
        m.observe_units(f64::NAN, 1);
        assert!(!m.warm());
        launch(&mut m, &[(4.0, 300_000)]);
        assert!(m.warm());
        // Once warm, a much cheaper observation is decayed in, not taken alone.
        launch(&mut m, &[(4.0, 1_000)]);
        assert_eq!(m.samples(), 4);
        assert!(m.predict(4).unwrap() > 100_000);
        // A table's model starts provisional as well, and `forget` starts it afresh.
        let mut t: TimingTable<u32> = TimingTable::new();
        t.end_launch(&7);
        t.observe(7, 1, 7_000_000);
        t.end_launch(&7);
        assert!(!t.get(&7).warm());
        t.observe(7, 1, 65_000);
        assert!(t.get(&7).warm());
        assert_eq!(t.get(&7).predict(1), Some(65_000));
        t.forget(|&k| k == 7);
        t.observe(7, 1, 7_000_000);
        assert!(!t.get(&7).warm());
    }

    #[test]
    fn a_new_variant_s_cold_first_run_is_dropped() {
        // PoCL: a kernel learned at 16 ms a launch of 32 waves; its persistent entry's
        // first run took 257 ms (its work-group function compiled), the next 16.5 ms.
        let mut m = TimingModel::default();
        for _ in 0..2 {
            launch(&mut m, &[(32.0, 16_000_000)]);
        }
        assert!(m.warm());
        m.observe_new_variant(32.0, 257_000_000);
        assert_eq!(
            m.predict(32),
            Some(16_000_000),
            "held apart from predictions"
        );
        launch(&mut m, &[(32.0, 16_500_000)]);
        assert_eq!(m.samples(), 3);
        assert!(m.predict(32).unwrap() < 16_500_000);
        // A first run that was warm is folded in, before the observation that settles it.
        let mut w = TimingModel::default();
        for _ in 0..2 {
            launch(&mut w, &[(32.0, 16_000_000)]);
        }
        w.observe_new_variant(32.0, 20_000_000);
        w.observe_new_variant(32.0, 18_000_000);
        assert_eq!(
            w.samples(),
            3,
            "the first settled by the second, which is held"
        );
        launch(&mut w, &[(32.0, 17_000_000)]);
        assert_eq!(w.samples(), 5);
        assert!(w.predict(32).unwrap() > 16_500_000);
        // Before the model is warm, the first launch's rule covers a new variant too.
        let mut f = TimingModel::default();
        f.observe_new_variant(1.0, 7_000_000);
        assert_eq!((f.samples(), f.warm()), (1, false));
        f.end_launch();
        f.observe_units(1.0, 65_000);
        assert_eq!(f.predict(1), Some(65_000));
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
/// A slice costs more than its share of the work: its last wave waits on its slowest
/// work-group while the rest of the device idles (an uneven kernel's few dear groups: on an
/// H100 the Mandelbrot LP kept 35% of its bare throughput at 250 µs), and every piece pays
/// the driver's per-command cost and a cold start (a memory-bound LP on PoCL paid about
/// 116 µs a slice: 0.83 of its alone throughput at 1 ms slices, 0.94 at 8 ms). Neither is
/// visible from outside, and long pieces are no reference: they run before the higher
/// priority is active, often next to its start-up (compiling on the same CPU), so they
/// look slow and made dear slices look cheap (the memory LP's slices rated 1.1-1.2 times
/// its long pieces).
///
/// Two rules, then. Where slices are plainly wasteful, as the Mandelbrot's, the kernel
/// learns it at once: while its sliced rate over [`SliceEfficiency::QUICK_PIECES`] pieces
/// is under [`SliceEfficiency::MIN_RATIO`] of its long pieces' (the piece length, or whole
/// launches), its target doubles. A contaminated reference only errs towards keeping short
/// slices, which the second rule corrects.
///
/// And each kernel tries its neighbours under the same conditions: it measures the work
/// done per ns of its own time over a window at its current scale of the target, then
/// over a window at twice (or half) the scale, and keeps the longer slices only if they do
/// at least [`SliceEfficiency::GAIN`] more work per ns: the HP's wait grows with the slice,
/// so a longer slice has to buy real throughput. Trials that change nothing come ever
/// more rarely (up to one window in [`SliceEfficiency::MAX_BACKOFF`]), so the HP seldom
/// meets a trial's longer slices.
#[derive(Clone, Debug)]
pub struct SliceEfficiency {
    /// The settled scale (a power of two, at least 1).
    scale: u64,
    /// The scale on trial, if any.
    trial: Option<u64>,
    /// The window being filled, at `trial` or else at `scale`.
    window: RateWindow,
    /// The last full window at `scale`.
    base: Option<RateWindow>,
    /// Full windows at `scale` to measure before the next trial.
    countdown: u32,
    /// Windows between trials: doubles after each trial that keeps the scale.
    backoff: u32,
    /// Whether the next trial tries a longer slice.
    up_next: bool,
    /// Decayed work-groups and ns of long pieces.
    long: (f64, f64),
    /// Pieces at the settled scale since it last changed, for the quick rule.
    quick: RateWindow,
    /// Launches left to send whole (see [`SliceEfficiency::skip_slicing`]).
    futile: u32,
}

#[derive(Clone, Copy, Debug, Default)]
struct RateWindow {
    work_groups: f64,
    ns: f64,
    pieces: u32,
}

impl RateWindow {
    fn full(&self) -> bool {
        self.ns >= SliceEfficiency::WINDOW_NS as f64 && self.pieces >= SliceEfficiency::MIN_PIECES
    }

    fn add(&mut self, work_groups: u64, ns: u64) {
        self.work_groups += work_groups as f64;
        self.ns += ns as f64;
        self.pieces += 1;
    }

    fn rate(&self) -> f64 {
        self.work_groups / self.ns
    }

    fn piece_work_groups(&self) -> f64 {
        self.work_groups / f64::from(self.pieces.max(1))
    }
}

impl Default for SliceEfficiency {
    fn default() -> Self {
        SliceEfficiency {
            scale: 1,
            trial: None,
            window: RateWindow::default(),
            base: None,
            countdown: 0,
            backoff: 1,
            up_next: true,
            long: (0.0, 0.0),
            quick: RateWindow::default(),
            futile: 0,
        }
    }
}

impl SliceEfficiency {
    /// How much more work per ns a slice twice as long must do to be kept: 2%, about the
    /// noise of a window on a shared 2-core machine; rule 8 lets the LP lose no more.
    pub const GAIN: f64 = 0.02;
    /// A window's own device time (ns): long enough to hold about a dozen of the HP's
    /// requests (one every 20 ms), so that both windows of a comparison meet about as many.
    pub const WINDOW_NS: u64 = 250_000_000;
    /// A window's fewest pieces.
    pub const MIN_PIECES: u32 = 16;
    /// Most windows at the settled scale between two trials.
    pub const MAX_BACKOFF: u32 = 32;
    /// The quick rule: a sliced rate under this share of the long pieces' doubles the
    /// target.
    pub const MIN_RATIO: f64 = 0.85;
    /// The quick rule's pieces at a scale.
    pub const QUICK_PIECES: u32 = 64;
    /// Launches sent whole once slicing was found not to pay, before it is tried again.
    pub const FUTILE_LAUNCHES: u32 = 128;

    /// One retired long piece (the piece length, or a whole launch): the quick rule's
    /// reference. Decayed, so a change of the kernel's inputs is followed.
    pub fn observe_long(&mut self, work_groups: u64, own_ns: u64) {
        if work_groups == 0 || own_ns == 0 {
            return;
        }
        self.long = (
            self.long.0 * 0.9 + work_groups as f64,
            self.long.1 * 0.9 + own_ns as f64,
        );
    }

    /// Moves to `scale` for good, measuring it afresh.
    fn settle(&mut self, scale: u64) {
        self.scale = scale;
        self.trial = None;
        self.window = RateWindow::default();
        self.quick = RateWindow::default();
        self.base = None;
        self.countdown = 0;
    }

    /// One retired piece cut at `scale` times the slice target, with its work-groups and
    /// its own device time; `max_scale` is the most the target may grow (to the piece
    /// length). Pieces planned at another scale than the one measured are ignored.
    ///
    /// `max_futile`: slices as long as a piece give the higher priority nothing the
    /// driver would not (on a GPU the piece length is about the driver's own hand-over
    /// between processes), so a kernel that settles there is sent whole and unheld
    /// instead, for [`SliceEfficiency::FUTILE_LAUNCHES`] launches at a time (on an H100
    /// the Mandelbrot LP settled there and kept 0.82 of its bare throughput with the
    /// bare HP p99).
    pub fn observe(
        &mut self,
        scale: u64,
        work_groups: u64,
        own_ns: u64,
        max_scale: u64,
        max_futile: bool,
    ) {
        let max_scale = max_scale.max(1);
        if self.observe_at(scale, work_groups, own_ns, max_scale)
            && max_futile
            && self.trial.is_none()
            && self.scale * 2 > max_scale
            && self.futile == 0
        {
            tracing::debug!(
                scale = self.scale,
                "slice efficiency: settled at the piece length, no better than the driver"
            );
            self.futile = Self::FUTILE_LAUNCHES;
        }
    }

    /// [`SliceEfficiency::observe`] without the piece-length rule: whether a decision
    /// (a move, or a trial that kept the scale) was taken.
    fn observe_at(&mut self, scale: u64, work_groups: u64, own_ns: u64, max_scale: u64) -> bool {
        if work_groups == 0 || own_ns == 0 || scale != self.scale() {
            return false;
        }
        if self.trial.is_none() && self.quick.pieces < Self::QUICK_PIECES {
            self.quick.add(work_groups, own_ns);
            if self.quick.pieces == Self::QUICK_PIECES
                && self.long.1 <= 0.0
                && self.scale * 2 > max_scale
            {
                // As long as a piece, and no long piece was ever seen (a higher priority
                // was active from the start): one launch goes whole, for the reference.
                self.futile = 1;
                self.quick = RateWindow::default();
                return false;
            }
            if self.quick.pieces == Self::QUICK_PIECES && self.long.1 > 0.0 {
                let ratio = self.quick.rate() / (self.long.0 / self.long.1);
                if ratio < Self::MIN_RATIO {
                    if self.scale * 2 <= max_scale {
                        tracing::debug!(
                            ratio,
                            scale = self.scale * 2,
                            "slice efficiency: slices far slower than long pieces"
                        );
                        self.settle(self.scale * 2);
                        self.backoff = 1;
                    } else {
                        // As long as a piece and still wasteful: slicing cannot beat the
                        // driver's own switching for this kernel.
                        tracing::debug!(ratio, "slice efficiency: slicing does not pay");
                        self.futile = Self::FUTILE_LAUNCHES;
                        self.quick = RateWindow::default();
                    }
                    return true;
                }
            }
        }
        self.window.add(work_groups, own_ns);
        if !self.window.full() {
            return false;
        }
        let done = std::mem::take(&mut self.window);
        match self.trial.take() {
            None => {
                self.base = Some(done);
                if self.countdown > 0 {
                    self.countdown -= 1;
                    return false;
                }
                let up = self.scale * 2 <= max_scale;
                let down = self.scale > 1;
                self.trial = match (self.up_next, up, down) {
                    (true, true, _) | (false, true, false) => Some(self.scale * 2),
                    (_, _, true) => Some(self.scale / 2),
                    _ => {
                        self.countdown = self.backoff;
                        None
                    }
                };
                false
            }
            Some(tried) => {
                let base = self.base.unwrap_or(done);
                let up = tried > self.scale;
                let (long, short) = if up { (done, base) } else { (base, done) };
                // A target twice as long need not cut longer pieces: not below one wave,
                // whole waves, rounded (a wave of the GEMM LP on an H100 outlasts 250 µs, so
                // 250 and 500 µs cut the same one-wave pieces). Then the trial tells nothing
                // and costs nothing: its scale is taken and, going up, the next one tried
                // at once.
                if long.piece_work_groups() < 1.5 * short.piece_work_groups() {
                    self.settle(tried);
                    self.base = Some(done);
                    self.up_next = up;
                    self.countdown = if up { 0 } else { self.backoff };
                    return !up;
                }
                let longer_pays = long.rate() > short.rate() * (1.0 + Self::GAIN);
                let moved = up == longer_pays;
                tracing::debug!(
                    scale = self.scale,
                    tried,
                    ratio = long.rate() / short.rate(),
                    moved,
                    "slice efficiency: longer slices against shorter"
                );
                if moved {
                    // Moving on in the same direction soon: the best scale may be further.
                    self.up_next = up;
                    self.settle(tried);
                    self.base = Some(done);
                    self.backoff = 1;
                } else {
                    self.up_next = !up;
                    self.backoff = (self.backoff * 2).min(Self::MAX_BACKOFF);
                }
                self.countdown = self.backoff;
                true
            }
        }
    }

    /// Whether this kernel's next launch should go whole and unheld, slicing having been
    /// found not to pay at any scale; counts the launch. After
    /// [`SliceEfficiency::FUTILE_LAUNCHES`] launches it is tried again.
    pub fn skip_slicing(&mut self) -> bool {
        if self.futile == 0 {
            return false;
        }
        self.futile -= 1;
        true
    }

    /// The factor on the slice target to plan this kernel's next slice with (a power of
    /// two, at least 1): the settled scale, or the one on trial.
    pub fn scale(&self) -> u64 {
        self.trial.unwrap_or(self.scale)
    }
}

#[cfg(test)]
mod efficiency_tests {
    use super::SliceEfficiency;

    /// A kernel whose slices cost `fixed` ns each beyond 1 ns per work-group, cut at
    /// `target` ns times the scale: feeds it `windows` windows' worth of pieces.
    fn run(e: &mut SliceEfficiency, target: u64, fixed: u64, max_scale: u64, windows: u32) {
        let mut fed = 0;
        while fed < windows as u64 * SliceEfficiency::WINDOW_NS {
            let s = e.scale();
            let piece = target * s;
            e.observe(s, piece, piece + fixed, max_scale, false);
            fed += piece;
        }
    }

    #[test]
    fn uniform_kernels_keep_the_target() {
        let mut e = SliceEfficiency::default();
        // 1% a slice: doubling would gain 0.5%, not worth the HP's wait.
        run(&mut e, 1_000_000, 10_000, 8, 200);
        assert_eq!(e.scale(), 1);
    }

    #[test]
    fn dear_slices_double_until_it_no_longer_pays() {
        let mut e = SliceEfficiency::default();
        // 116 µs a 1 ms slice (the memory-bound LP on PoCL): 2 ms gains 5.5%, 4 ms 2.8%,
        // 8 ms only 1.4%.
        run(&mut e, 1_000_000, 116_000, 8, 400);
        assert_eq!(e.scale, 4, "{e:?}");
        // Never past the piece length.
        let mut e = SliceEfficiency::default();
        run(&mut e, 250_000, 10_000_000, 8, 400);
        assert_eq!(e.scale, 8);
    }

    #[test]
    fn a_kernel_that_turns_cheap_comes_back_down() {
        let mut e = SliceEfficiency::default();
        run(&mut e, 250_000, 1_000_000, 8, 200);
        assert_eq!(e.scale, 8);
        run(&mut e, 250_000, 0, 8, 400);
        assert_eq!(e.scale, 1, "{e:?}");
    }

    #[test]
    fn far_slower_slices_double_at_once_against_long_pieces() {
        let mut e = SliceEfficiency::default();
        for _ in 0..20 {
            e.observe_long(1000, 2_000_000);
        }
        // A third of the long rate: doubled after the quick rule's pieces, long before a
        // window is full.
        for _ in 0..SliceEfficiency::QUICK_PIECES {
            e.observe(1, 40, 250_000, 8, false);
        }
        assert_eq!(e.scale(), 2);
        for _ in 0..SliceEfficiency::QUICK_PIECES {
            e.observe(2, 100, 500_000, 8, false);
        }
        assert_eq!(e.scale(), 4);
        // Good enough at 4x for the quick rule.
        for _ in 0..SliceEfficiency::QUICK_PIECES {
            e.observe(4, 450, 1_000_000, 8, false);
        }
        assert_eq!(e.scale(), 4);
        // Slices faster than long pieces that ran beside start-up work: no change.
        let mut e = SliceEfficiency::default();
        e.observe_long(1000, 4_000_000);
        for _ in 0..SliceEfficiency::QUICK_PIECES {
            e.observe(1, 100, 250_000, 8, false);
        }
        assert_eq!(e.scale(), 1);
    }

    #[test]
    fn targets_that_cut_the_same_pieces_are_passed_over() {
        // One wave takes 350 units and a piece pays 50 more: 250 and 500 both cut one
        // wave, 1000 two (+6.7% work per ns), 2000 four (+3.4%).
        let mut e = SliceEfficiency::default();
        let mut fed = 0;
        while fed < 400 * SliceEfficiency::WINDOW_NS {
            let s = e.scale();
            let waves = (250 * s / 350).max(1);
            let waves = 1 << waves.ilog2();
            let wgs = 350 * waves * 1000;
            e.observe(s, wgs, wgs + 50_000, 8, false);
            fed += wgs;
        }
        assert_eq!(e.scale, 8, "{e:?}");
    }

    #[test]
    fn slicing_that_never_pays_stops_for_a_while() {
        let mut e = SliceEfficiency::default();
        e.observe_long(1000, 1_000_000);
        assert!(!e.skip_slicing());
        for _ in 0..10 * SliceEfficiency::QUICK_PIECES {
            let s = e.scale();
            if e.futile > 0 {
                break;
            }
            // Half the long rate at every scale.
            e.observe(s, 100 * s, 200_000 * s, 8, false);
        }
        assert_eq!(e.scale, 8);
        for _ in 0..SliceEfficiency::FUTILE_LAUNCHES {
            assert!(e.skip_slicing());
        }
        assert!(!e.skip_slicing());
    }

    #[test]
    fn without_long_pieces_one_launch_goes_whole_at_the_piece_length() {
        let mut e = SliceEfficiency::default();
        for _ in 0..SliceEfficiency::QUICK_PIECES {
            e.observe(1, 100, 200_000, 1, false);
        }
        assert!(e.skip_slicing());
        assert!(!e.skip_slicing());
        // Whole launches at twice the sliced rate: slicing stops.
        e.observe_long(100_000, 100_000_000);
        for _ in 0..SliceEfficiency::QUICK_PIECES {
            e.observe(1, 100, 200_000, 1, false);
        }
        assert!(e.skip_slicing());
        assert!(e.futile > 1);
    }

    #[test]
    fn settling_at_the_piece_length_on_a_gpu_hands_the_kernel_to_the_driver() {
        // Every doubling pays 10%: the kernel climbs to the piece length.
        let mut fed = 0;
        let mut e = SliceEfficiency::default();
        while fed < 100 * SliceEfficiency::WINDOW_NS && e.futile == 0 {
            let s = e.scale();
            e.observe(s, 1000 * s, 1000 * s + 200_000, 8, true);
            fed += 1000 * s;
        }
        assert_eq!((e.scale, e.futile), (8, SliceEfficiency::FUTILE_LAUNCHES));
        // Not where the piece length is no such limit (a CPU device).
        let mut fed = 0;
        let mut e = SliceEfficiency::default();
        while fed < 100 * SliceEfficiency::WINDOW_NS {
            let s = e.scale();
            e.observe(s, 1000 * s, 1000 * s + 200_000, 8, false);
            fed += 1000 * s;
        }
        // (At most the one whole launch that gives a first long reference.)
        assert!(e.scale == 8 && e.futile <= 1, "{e:?}");
    }

    #[test]
    fn pieces_of_another_scale_and_empty_ones_are_ignored() {
        let mut e = SliceEfficiency::default();
        for _ in 0..10_000 {
            e.observe(4, 1, 1_000_000, 8, false);
            e.observe(1, 0, 1_000_000, 8, false);
            e.observe(1, 10, 0, 8, false);
        }
        assert_eq!(e.scale(), 1);
        assert!(e.trial.is_none() && e.base.is_none());
    }
}
