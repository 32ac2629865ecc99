//! Priority levels: `high`, `normal`, `low`, with an optional number inside a level
//! (`high:3`). A larger number is more urgent inside its level.

use std::fmt;
use std::str::FromStr;

use crate::error::SchedError;

/// Number of priority levels.
pub const LEVELS: usize = 3;

/// A priority level. Ordered `Low < Normal < High`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Level {
    /// Background work; runs when nothing else wants the device.
    Low = 0,
    /// The default.
    #[default]
    Normal = 1,
    /// Latency-critical work; takes the device over at the next slice boundary.
    High = 2,
}

impl Level {
    /// Index used for the per-level summary words in the segment (0 = low).
    pub fn index(self) -> usize {
        self as usize
    }

    /// Inverse of [`Level::index`]; `None` for out-of-range values read from a segment.
    pub fn from_index(i: u32) -> Option<Level> {
        match i {
            0 => Some(Level::Low),
            1 => Some(Level::Normal),
            2 => Some(Level::High),
            _ => None,
        }
    }

    /// The lower-case name used in config and status output.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Low => "low",
            Level::Normal => "normal",
            Level::High => "high",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Level {
    type Err = SchedError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "low" => Ok(Level::Low),
            "normal" => Ok(Level::Normal),
            "high" => Ok(Level::High),
            other => Err(SchedError::InvalidArgument(format!(
                "unknown priority level {other:?} (expected high, normal or low)"
            ))),
        }
    }
}

/// A full priority: a level and a number inside it. Ordered by level, then number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Priority {
    /// The level.
    pub level: Level,
    /// Order inside the level; larger is more urgent. Default 0.
    pub number: u8,
}

impl Priority {
    /// `high`, number 0.
    pub const HIGH: Priority = Priority::new(Level::High, 0);
    /// `normal`, number 0.
    pub const NORMAL: Priority = Priority::new(Level::Normal, 0);
    /// `low`, number 0.
    pub const LOW: Priority = Priority::new(Level::Low, 0);

    /// A priority from its parts.
    pub const fn new(level: Level, number: u8) -> Self {
        Priority { level, number }
    }

    /// Packed form stored in a slot: `level << 8 | number`.
    pub(crate) fn to_rank(self) -> u32 {
        ((self.level as u32) << 8) | self.number as u32
    }

    /// Unpacks a slot's rank; `None` if the value is out of range (corrupt slot).
    pub(crate) fn from_rank(rank: u32) -> Option<Priority> {
        if rank > 0x2ff {
            return None;
        }
        Some(Priority::new(Level::from_index(rank >> 8)?, rank as u8))
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.number == 0 {
            write!(f, "{}", self.level)
        } else {
            write!(f, "{}:{}", self.level, self.number)
        }
    }
}

impl FromStr for Priority {
    type Err = SchedError;
    /// Parses `high`, `normal`, `low`, optionally followed by `:N` with `N` in 0..=255.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (level, number) = match s.split_once(':') {
            Some((l, n)) => {
                let n = n.trim().parse::<u8>().map_err(|_| {
                    SchedError::InvalidArgument(format!("priority number in {s:?} must be 0..=255"))
                })?;
                (l, n)
            }
            None => (s, 0),
        };
        Ok(Priority::new(level.parse()?, number))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_display_round_trip() {
        for s in ["high", "normal", "low", "high:3", "low:255"] {
            let p: Priority = s.parse().unwrap();
            assert_eq!(p.to_string(), s);
            assert_eq!(Priority::from_rank(p.to_rank()), Some(p));
        }
        assert_eq!("HIGH:0".parse::<Priority>().unwrap(), Priority::HIGH);
        assert!("urgent".parse::<Priority>().is_err());
        assert!("high:256".parse::<Priority>().is_err());
        assert!("high:x".parse::<Priority>().is_err());
    }

    #[test]
    fn ordering_is_level_then_number() {
        let p = |s: &str| s.parse::<Priority>().unwrap();
        assert!(p("high") > p("normal:255"));
        assert!(p("normal:2") > p("normal:1"));
        assert!(p("low:9") < p("normal"));
        assert_eq!(Priority::from_rank(0x300), None);
        assert_eq!(Priority::from_rank(0xffff_ffff), None);
    }
}
