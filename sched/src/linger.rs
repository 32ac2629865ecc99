//! How long a client lingers after it goes idle, learned from its own idle gaps.
//!
//! Lingering keeps a client's claim on the device for a while after its work ran out, so a
//! lower client does not slip a piece in between the commands of a burst. It costs that
//! lower client the device time it could have used meanwhile: for a client that comes back
//! only tens of milliseconds later (an inference server's next request), a fixed linger
//! holds the lower ones off an idle device on every request for nothing. On an H100 a 2 ms
//! linger after a 0.45 ms request every 20 ms cost the LP 11% of its throughput against
//! the bare driver (docs/benchmarks.md).
//!
//! So each client keeps a decayed histogram of its gaps (from going idle, or from the last
//! completion while idle, to raising demand again) and picks the linger that pays:
//! catching a return within the linger saves the client `worth` (what it would otherwise
//! wait for the lower client's queued pieces), and lingering costs the lower clients the
//! time the device sits reserved, `min(gap, linger)`. The linger maximises
//! `P(gap <= L) * worth - E[min(gap, L)]` over a few candidates; none pays, none is taken.
//! A burst's gaps are tens of microseconds and get a linger just above them; Poisson
//! requests 20 ms apart get none. Until a few gaps are known the configured cap is used.
//!
//! Pure arithmetic on caller-supplied times: unit-tested without a clock.

/// Gap buckets: bucket 0 holds gaps under 2 µs, bucket `i` gaps in `[2^i, 2^(i+1))` µs, the
/// last one everything from 2^(BUCKETS-1) µs (about 33 ms) up.
const BUCKETS: usize = 16;
/// Weight of the newest gap in the decayed histogram (about the last 16 gaps count).
const DECAY: f64 = 1.0 / 16.0;
/// Gaps seen before the learned linger replaces the configured one.
const MIN_SAMPLES: u32 = 4;

/// One client's idle-gap history and the linger chosen from it.
#[derive(Clone, Debug, Default)]
pub struct LingerModel {
    weights: [f64; BUCKETS],
    samples: u32,
    /// When the current idle period began (or was last extended by a completion).
    released_at: Option<u64>,
}

/// Bounds of bucket `i` in ns; the last bucket has no upper bound.
fn bucket_bounds(i: usize) -> (u64, Option<u64>) {
    let lo = if i == 0 { 0 } else { (1u64 << i) * 1000 };
    let hi = (i + 1 < BUCKETS).then(|| (1u64 << (i + 1)) * 1000);
    (lo, hi)
}

fn bucket_of(gap_ns: u64) -> usize {
    let us = gap_ns / 1000;
    if us < 2 {
        0
    } else {
        (63 - us.leading_zeros() as usize).min(BUCKETS - 1)
    }
}

impl LingerModel {
    /// The client went idle at `now` (or completed work while idle: the gap counts from
    /// its last sign of life).
    pub fn released(&mut self, now: u64) {
        self.released_at = Some(now);
    }

    /// A completion at `now`: moves the start of the current idle period, if there is one.
    pub fn completed(&mut self, now: u64) {
        if let Some(t) = &mut self.released_at {
            *t = (*t).max(now);
        }
    }

    /// The client raised demand again at `now`: the gap since it went idle is learned.
    pub fn returned(&mut self, now: u64) {
        if let Some(t) = self.released_at.take() {
            self.record(now.saturating_sub(t));
        }
    }

    /// Adds one observed gap.
    pub fn record(&mut self, gap_ns: u64) {
        let b = bucket_of(gap_ns);
        for (i, w) in self.weights.iter_mut().enumerate() {
            *w = *w * (1.0 - DECAY) + if i == b { DECAY } else { 0.0 };
        }
        self.samples = self.samples.saturating_add(1);
    }

    /// Gaps learned so far.
    pub fn samples(&self) -> u32 {
        self.samples
    }

    /// Expected (caught, cost) of lingering `l` ns, per unit of histogram weight: the
    /// weight of gaps no longer than `l`, and the weighted `min(gap, l)`. Within a bucket
    /// gaps are taken as spread evenly.
    fn evaluate(&self, l: u64) -> (f64, f64) {
        let l = l as f64;
        let mut caught = 0.0;
        let mut cost = 0.0;
        for (i, &w) in self.weights.iter().enumerate() {
            if w == 0.0 {
                continue;
            }
            let (lo, hi) = bucket_bounds(i);
            let lo = lo as f64;
            match hi.map(|h| h as f64) {
                Some(hi) if l >= hi => {
                    caught += w;
                    cost += w * (lo + hi) / 2.0;
                }
                Some(hi) if l > lo => {
                    let f = (l - lo) / (hi - lo);
                    caught += w * f;
                    cost += w * (f * (lo + l) / 2.0 + (1.0 - f) * l);
                }
                // Entirely above the linger (or open-ended): the whole linger is spent.
                _ => cost += w * l,
            }
        }
        (caught, cost)
    }

    /// The linger to use now, in ns: at most `cap_ns` (the configured `hp_linger`), the
    /// cap itself until enough gaps are known, and otherwise the candidate (a bucket edge
    /// or the cap) with the best `P(caught) * worth_ns - E[cost]`, or 0 when none beats
    /// not lingering.
    pub fn linger_ns(&self, cap_ns: u64, worth_ns: u64) -> u64 {
        if cap_ns == 0 || self.samples < MIN_SAMPLES {
            return cap_ns;
        }
        let total: f64 = self.weights.iter().sum();
        if total <= 0.0 {
            return cap_ns;
        }
        let edges = (0..BUCKETS).filter_map(|i| bucket_bounds(i).1);
        let mut best = (0.0f64, 0u64);
        for l in edges.filter(|&e| e < cap_ns).chain([cap_ns]) {
            let (caught, cost) = self.evaluate(l);
            let score = (caught * worth_ns as f64 - cost) / total;
            // Strictly better only: ties go to the shorter linger.
            if score > best.0 + 1e-9 {
                best = (score, l);
            }
        }
        best.1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1000;
    const MS: u64 = 1_000_000;

    fn model(gaps: impl IntoIterator<Item = u64>) -> LingerModel {
        let mut m = LingerModel::default();
        for g in gaps {
            m.record(g);
        }
        m
    }

    #[test]
    fn the_cap_until_enough_gaps_are_known() {
        let m = model([30 * MS; 3]);
        assert_eq!(m.linger_ns(2 * MS, 500 * US), 2 * MS);
        assert_eq!(model([30 * MS; 4]).linger_ns(2 * MS, 500 * US), 0);
        assert_eq!(model([30 * MS; 4]).linger_ns(0, 500 * US), 0);
    }

    #[test]
    fn burst_gaps_get_a_linger_just_above_them() {
        // Host turnaround between the kernels of a burst: 20-40 µs.
        let m = model([20 * US, 35 * US, 25 * US, 40 * US, 30 * US, 22 * US]);
        let l = m.linger_ns(2 * MS, 500 * US);
        assert!((40 * US..=64 * US).contains(&l), "linger {l} ns");
    }

    #[test]
    fn long_poisson_gaps_get_none() {
        // Exponential gaps, mean 20 ms (the benchmark's single-kernel HP): about 10% are
        // under 2 ms, which does not pay for lingering on the other 90%.
        let mut g = 0x1234_5678u64;
        let mut m = LingerModel::default();
        for _ in 0..200 {
            g = g
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = ((g >> 11) as f64 / (1u64 << 53) as f64).max(1e-12);
            m.record((-20.0 * MS as f64 * u.ln()) as u64);
        }
        assert_eq!(m.linger_ns(2 * MS, 500 * US), 0);
    }

    #[test]
    fn a_burst_of_five_then_a_long_gap_lingers_for_the_burst() {
        // Five kernels per request: four short gaps, then 20 ms.
        let mut m = LingerModel::default();
        for _ in 0..10 {
            for _ in 0..4 {
                m.record(30 * US);
            }
            m.record(20 * MS);
        }
        let l = m.linger_ns(2 * MS, 500 * US);
        assert!((30 * US..=64 * US).contains(&l), "linger {l} ns");
    }

    #[test]
    fn gaps_longer_than_worth_are_left_to_the_lower_clients() {
        // A CPU stage of 1 ms between kernels: the lower client's piece costs the HP less
        // than reserving the device for the whole gap costs the lower client.
        assert_eq!(model([MS; 8]).linger_ns(2 * MS, 500 * US), 0);
        // A stage of 200 µs is worth covering.
        let l = model([200 * US; 8]).linger_ns(2 * MS, 500 * US);
        assert_eq!(l, 256 * US);
    }

    #[test]
    fn never_above_the_cap() {
        let l = model([80 * US; 8]).linger_ns(100 * US, 10 * MS);
        assert_eq!(l, 100 * US);
        // Gaps all beyond the cap: lingering up to it catches none of them.
        assert_eq!(model([300 * US; 8]).linger_ns(100 * US, 10 * MS), 0);
    }

    #[test]
    fn recent_gaps_outweigh_old_ones() {
        let mut m = model([30 * MS; 20]);
        assert_eq!(m.linger_ns(2 * MS, 500 * US), 0);
        for _ in 0..20 {
            m.record(20 * US);
        }
        assert!(m.linger_ns(2 * MS, 500 * US) > 0);
    }

    #[test]
    fn gaps_count_from_the_last_completion_while_idle() {
        let mut m = LingerModel::default();
        m.returned(5 * MS); // never idle: nothing learned
        assert_eq!(m.samples(), 0);
        m.released(10 * MS);
        m.completed(11 * MS);
        m.completed(10 * MS + 500 * US); // older: ignored
        m.returned(11 * MS + 30 * US);
        m.completed(50 * MS); // not idle: nothing moves
        assert_eq!(m.samples(), 1);
        assert_eq!(bucket_of(30 * US), 4);
        assert!(m.weights[4] > 0.0);
    }

    #[test]
    fn buckets_cover_every_gap() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(1999), 0);
        assert_eq!(bucket_of(2000), 1);
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        for i in 0..BUCKETS - 1 {
            let (lo, hi) = bucket_bounds(i);
            assert_eq!(bucket_of(hi.unwrap() - 1), i);
            assert_eq!(bucket_of(lo.max(2000)), i.max(1));
        }
    }
}
