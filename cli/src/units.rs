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

/// `0 B`, `512 B`, `12.0 KiB`, `512.0 MiB`, `1.50 GiB`: binary units, as device memory
/// is usually given.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit >= 2 && v < 10.0 {
        format!("{v:.2} {}", UNITS[unit])
    } else {
        format!("{v:.1} {}", UNITS[unit])
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

    #[test]
    fn bytes_in_binary_units() {
        use super::bytes as b;
        assert_eq!(b(0), "0 B");
        assert_eq!(b(12 * 1024), "12.0 KiB");
        assert_eq!(b(512 << 20), "512.0 MiB");
        assert_eq!(b(3 << 29), "1.50 GiB");
        assert_eq!(b(80 << 40), "80.0 TiB");
    }
}
