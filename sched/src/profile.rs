//! Where the time goes across one launch geometry: the cost of each work-group row, learned
//! from finished slices, so slices of uneven kernels are sized by the rows they will really
//! cover.
//!
//! A timing model ([`crate::TimingModel`]) knows a kernel's average cost per wave. An uneven
//! kernel (a Mandelbrot set, sparse work) costs many times the average in some rows and
//! almost nothing in others, so a slice sized by the average lands far from the target:
//! on PoCL the demo's 1024² Mandelbrot slices ran from 0.1 to 90 ms against a 1 ms target.
//! Applications launch the same kernel over the same range again and again (frames,
//! training steps, the demo), and the cost of a row barely changes between launches, so
//! the profile of the last launches predicts the next one row by row.
//!
//! Rows are grouped into at most [`BUCKETS`] buckets of equal rows; each holds an
//! exponentially weighted average of the ns per row seen there. Pure arithmetic: no
//! clocks, no OpenCL.

/// Most buckets per profile (bounds memory and the walk per slice).
pub const BUCKETS: usize = 256;

/// Weight of a new observation covering a whole bucket.
const ALPHA: f64 = 0.5;

/// Cost per row, by bucket, of one launch geometry.
#[derive(Clone, Debug, PartialEq)]
pub struct RowProfile {
    rows: u64,
    /// Rows per bucket (the last bucket may hold fewer).
    per_bucket: u64,
    /// ns per row; `None` where no finished slice covered the bucket yet.
    cost: Vec<Option<f64>>,
}

impl RowProfile {
    /// An empty profile of a range of `rows` work-group rows.
    pub fn new(rows: u64) -> Self {
        let rows = rows.max(1);
        let per_bucket = rows.div_ceil(BUCKETS as u64);
        let n = rows.div_ceil(per_bucket) as usize;
        RowProfile {
            rows,
            per_bucket,
            cost: vec![None; n],
        }
    }

    /// Rows of the range.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The buckets that rows `[first, first + n)` overlap, with the rows of each.
    fn overlaps(&self, first: u64, n: u64) -> impl Iterator<Item = (usize, u64)> + '_ {
        let end = first.saturating_add(n).min(self.rows);
        let pb = self.per_bucket;
        let (b0, b1) = if first >= end {
            (0, 0)
        } else {
            ((first / pb) as usize, (end - 1) as usize / pb as usize + 1)
        };
        (b0..b1).map(move |b| {
            let lo = (b as u64 * pb).max(first);
            let hi = ((b as u64 + 1) * pb).min(end);
            (b, hi - lo)
        })
    }

    /// Records that rows `[first, first + n)` took `work_ns` of device time (the slice's
    /// time less its fixed launch cost), spread evenly over them.
    pub fn observe(&mut self, first: u64, n: u64, work_ns: f64) {
        if n == 0 || !work_ns.is_finite() || work_ns < 0.0 {
            return;
        }
        let per_row = work_ns / n.min(self.rows.saturating_sub(first)).max(1) as f64;
        let pb = self.per_bucket as f64;
        let spans: Vec<(usize, u64)> = self.overlaps(first, n).collect();
        for (b, covered) in spans {
            let c = &mut self.cost[b];
            *c = Some(match *c {
                None => per_row,
                // A slice covering part of a bucket says less about all of it.
                Some(old) => {
                    let a = ALPHA * (covered as f64 / pb).min(1.0);
                    old + a * (per_row - old)
                }
            });
        }
    }

    /// Predicted work ns of rows `[first, first + n)`, when every bucket they cover has
    /// been seen.
    pub fn predict(&self, first: u64, n: u64) -> Option<f64> {
        self.overlaps(first, n)
            .map(|(b, covered)| self.cost[b].map(|c| c * covered as f64))
            .sum()
    }

    /// How much dearer than the range's average row the rows `[first, first + n)` are
    /// (1.0: average), when every bucket is known. A timing model fed with a piece's
    /// waves times this factor stays linear in its input for an uneven kernel, whose
    /// profile-sized pieces otherwise take about the same time whatever their waves.
    pub fn relative_cost(&self, first: u64, n: u64) -> Option<f64> {
        let n = n.min(self.rows.saturating_sub(first));
        let all = self.predict(0, self.rows)?;
        let these = self.predict(first, n)?;
        (n > 0 && all > 0.0).then(|| (these / n as f64) / (all / self.rows as f64))
    }

    /// The most rows from `first` whose predicted work fits `budget_ns`, in whole multiples
    /// of `granule` rows (one wave), at least one granule, at most what remains; `None`
    /// when a bucket on the way is unseen before the budget is reached.
    pub fn rows_within(&self, first: u64, budget_ns: f64, granule: u64) -> Option<u64> {
        let left = self.rows.checked_sub(first).filter(|&l| l > 0)?;
        let granule = granule.max(1);
        let mut spent = 0.0;
        let mut fit = 0u64;
        for (b, covered) in self.overlaps(first, left) {
            let per_row = self.cost[b]?;
            if per_row <= 0.0 {
                fit += covered;
                continue;
            }
            let room = ((budget_ns - spent) / per_row).floor().max(0.0) as u64;
            if room < covered {
                fit += room;
                break;
            }
            fit += covered;
            spent += per_row * covered as f64;
        }
        let whole = (fit / granule).max(1) * granule;
        Some(whole.min(left))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn unseen_rows_predict_nothing() {
        let p = RowProfile::new(100);
        assert_eq!(p.predict(0, 10), None);
        assert_eq!(p.rows_within(0, 1e6, 1), None);
    }

    #[test]
    fn uneven_rows_are_sized_by_their_own_cost() {
        // Rows 0..50 cost 10 ns each, rows 50..100 cost 1000 ns each.
        let mut p = RowProfile::new(100);
        p.observe(0, 50, 500.0);
        p.observe(50, 50, 50_000.0);
        assert_eq!(p.rows_within(0, 200.0, 1), Some(20));
        assert_eq!(p.rows_within(50, 5_000.0, 1), Some(5));
        // Crossing from cheap into dear rows stops where the budget runs out.
        assert_eq!(p.rows_within(40, 1_100.0, 1), Some(11));
        assert_eq!(p.predict(40, 11), Some(1_100.0));
    }

    #[test]
    fn whole_granules_at_least_one_at_most_the_rest() {
        let mut p = RowProfile::new(64);
        p.observe(0, 64, 64_000.0);
        assert_eq!(p.rows_within(0, 10_000.0, 4), Some(8));
        assert_eq!(p.rows_within(0, 1.0, 4), Some(4));
        assert_eq!(p.rows_within(62, 1e9, 4), Some(2));
        assert_eq!(p.rows_within(64, 1e9, 4), None);
    }

    #[test]
    fn relative_cost_against_the_average() {
        let mut p = RowProfile::new(4);
        p.observe(0, 2, 100.0);
        assert_eq!(p.relative_cost(0, 1), None);
        p.observe(2, 2, 300.0);
        assert_eq!(p.relative_cost(0, 2), Some(0.5));
        assert_eq!(p.relative_cost(2, 2), Some(1.5));
        assert_eq!(p.relative_cost(0, 4), Some(1.0));
    }

    #[test]
    fn repeated_launches_converge() {
        let mut p = RowProfile::new(10);
        p.observe(0, 10, 1_000.0);
        for _ in 0..20 {
            p.observe(0, 10, 2_000.0);
        }
        let v = p.predict(0, 10).unwrap();
        assert!((v - 2_000.0).abs() < 1.0, "{v}");
    }

    #[test]
    fn many_rows_share_buckets() {
        let rows = 1 << 20;
        let mut p = RowProfile::new(rows);
        assert!(p.cost.len() <= BUCKETS);
        p.observe(0, rows, rows as f64 * 3.0);
        assert_eq!(p.predict(1000, 1000), Some(3000.0));
        assert_eq!(p.rows_within(5, 3.0 * 777.0, 1), Some(777));
    }

    proptest! {
        #[test]
        fn rows_within_respects_budget(
            costs in proptest::collection::vec(0u32..10_000, 1..300),
            first_frac in 0.0f64..1.0,
            budget in 1.0f64..1e6,
            granule in 1u64..8,
        ) {
            let rows = costs.len() as u64;
            let mut p = RowProfile::new(rows);
            for (i, c) in costs.iter().enumerate() {
                p.observe(i as u64, 1, *c as f64);
            }
            let first = ((rows as f64 * first_frac) as u64).min(rows - 1);
            let n = p.rows_within(first, budget, granule).unwrap();
            prop_assert!(n >= 1 && n <= rows - first);
            prop_assert!(n.is_multiple_of(granule) || n == rows - first);
            // Over budget only by the one granule it must take.
            if n > granule {
                prop_assert!(p.predict(first, n).unwrap() <= budget + 1e-6);
            }
        }
    }
}
