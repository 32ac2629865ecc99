//! Human-readable durations for tables.

/// `850 ns`, `12.3 µs`, `4.56 ms`, `7.89 s`: three significant digits or so.
pub fn duration_ns(ns: u64) -> String {
    let v = ns as f64;
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{:.1} µs", v / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.2} ms", v / 1e6)
    } else {
        format!("{:.2} s", v / 1e9)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn picks_the_unit() {
        use super::duration_ns as d;
        assert_eq!(d(0), "0 ns");
        assert_eq!(d(12_345), "12.3 µs");
        assert_eq!(d(4_560_000), "4.56 ms");
        assert_eq!(d(7_890_000_000), "7.89 s");
    }
}
