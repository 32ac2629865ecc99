//! Value types of the configuration, and how each one is read from the
//! environment and written back out for reports and the reference docs.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

/// A priority level. Declared from least to most urgent so that the derived
/// `Ord` means "more urgent is greater".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    Low,
    Normal,
    High,
}

impl Level {
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
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "high" => Ok(Level::High),
            "normal" => Ok(Level::Normal),
            "low" => Ok(Level::Low),
            _ => Err(format!("expected high, normal or low, found {s:?}")),
        }
    }
}

/// A priority: a level and a number inside it. Ordering is by level, then by
/// number (a greater number is more urgent within the same level).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Priority {
    pub level: Level,
    pub number: u8,
}

impl Priority {
    /// What `priority` text looks like; used in error messages and the docs.
    pub const EXPECT: &'static str =
        "a priority: \"high\", \"normal\" or \"low\", optionally with a number 0-255 inside the level, like \"high:3\"";

    pub const HIGH: Priority = Priority::new(Level::High, 0);
    pub const NORMAL: Priority = Priority::new(Level::Normal, 0);
    pub const LOW: Priority = Priority::new(Level::Low, 0);

    pub const fn new(level: Level, number: u8) -> Self {
        Priority { level, number }
    }
}

impl Default for Priority {
    fn default() -> Self {
        Priority::NORMAL
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // "high" and "high:0" are the same priority; print the short form.
        if self.number == 0 {
            write!(f, "{}", self.level)
        } else {
            write!(f, "{}:{}", self.level, self.number)
        }
    }
}

impl FromStr for Priority {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("expected {}, found {s:?}", Priority::EXPECT);
        let (level, number) = match s.split_once(':') {
            Some((l, n)) => (l, n.trim().parse::<u8>().map_err(|_| bad())?),
            None => (s, 0),
        };
        let level = level.parse::<Level>().map_err(|_| bad())?;
        Ok(Priority { level, number })
    }
}

impl<'de> Deserialize<'de> for Priority {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        from_str_value(d)
    }
}

/// A setting spelled as one of a few words: the enum, its spellings, `Display`,
/// `FromStr` (with the message config errors show), `Deserialize` and `ControlValue`.
macro_rules! word_setting {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $word:literal),+ $(,)? }
     default $default:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vdoc])* $variant,)+
        }

        impl Default for $name {
            fn default() -> Self {
                $name::$default
            }
        }

        impl $name {
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $word,)+
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                $(if s == $word {
                    return Ok($name::$variant);
                })+
                let words: Vec<String> = [$($word),+].iter().map(|w| format!("{w:?}")).collect();
                let (last, rest) = words.split_last().expect("one word at least");
                Err(format!("expected {} or {last}, found {s:?}", rest.join(", ")))
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                from_str_value(d)
            }
        }

        impl ControlValue for $name {
            fn from_env(s: &str) -> Option<Self> {
                s.trim().parse().ok()
            }
            fn render(&self) -> String {
                quote(self.as_str())
            }
        }
    };
}

word_setting! {
    /// When launches are cut into slices.
    SliceMode {
        /// Only while a higher-priority client is registered on the same device.
        Contended = "contended",
        /// Every sliceable launch (testing and measurement).
        Always = "always",
        /// Never; queues still obey the arbiter between whole commands.
        Never = "never",
    } default Contended
}

word_setting! {
    /// When kernels run as yielding launches (persistent work-groups that stop between two
    /// groups when a higher priority asks).
    YieldMode {
        /// Launches the yielding rewrite can take and that are predicted to be long
        /// (0.5 ms or more; 5 ms on a GPU), once the program's entries are built; on
        /// a GPU only those with their own vendor event (see `yield_wait_us`).
        Auto = "auto",
        /// Never: such launches are sliced or left to the driver, as other kernels.
        Never = "never",
        /// Every launch the rewrite can take, short ones too, and yields are also
        /// requested at random moments, so that every yielding launch is stopped and
        /// resumed (testing).
        Chaos = "chaos",
    } default Auto
}

/// An entry of `safe_binaries`: a kernel name, or the SHA-256 of a whole
/// program binary/IL.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SafeBinary {
    Kernel(String),
    /// Lowercase hex, 64 digits.
    Sha256(String),
}

impl SafeBinary {
    pub const EXPECT: &'static str = "a kernel name or \"sha256:<64 hex digits>\"";
}

impl fmt::Display for SafeBinary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SafeBinary::Kernel(name) => f.write_str(name),
            SafeBinary::Sha256(hex) => write!(f, "sha256:{hex}"),
        }
    }
}

impl FromStr for SafeBinary {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("expected {}, found {s:?}", SafeBinary::EXPECT);
        match s.strip_prefix("sha256:") {
            Some(hex) if hex.len() == 64 && hex.chars().all(|c| c.is_ascii_hexdigit()) => {
                Ok(SafeBinary::Sha256(hex.to_ascii_lowercase()))
            }
            Some(_) => Err(bad()),
            None if !s.is_empty() && !s.contains(char::is_whitespace) => {
                Ok(SafeBinary::Kernel(s.to_string()))
            }
            None => Err(bad()),
        }
    }
}

impl<'de> Deserialize<'de> for SafeBinary {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        from_str_value(d)
    }
}

/// Reads a string and parses it with `FromStr`, so the file and the
/// environment accept exactly the same spellings and give the same messages.
/// The parse runs inside the visitor so that toml attaches the span of this
/// very value (a list element, say) to the error.
fn from_str_value<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr<Err = String>,
{
    struct V<T>(PhantomData<T>);
    impl<T: FromStr<Err = String>> Visitor<'_> for V<T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string")
        }
        fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<T, E> {
            s.parse().map_err(E::custom)
        }
    }
    d.deserialize_str(V(PhantomData))
}

/// One `[[rule]]`: processes it matches get `priority`. A rule needs `exe`,
/// `uid`, or both (then both must match).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Executable name (matched against the basename), or an absolute path
    /// (matched against the whole path) when it contains a `/`.
    pub exe: Option<String>,
    /// Real user id of the process.
    pub uid: Option<u32>,
    pub priority: Priority,
}

/// `Rule` before the "needs exe or uid" check.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    exe: Option<String>,
    uid: Option<u32>,
    priority: Priority,
}

impl TryFrom<RawRule> for Rule {
    type Error = String;
    fn try_from(r: RawRule) -> Result<Self, String> {
        if r.exe.is_none() && r.uid.is_none() {
            return Err("a rule needs `exe`, `uid`, or both".to_string());
        }
        if r.exe.as_deref() == Some("") {
            return Err("`exe` must not be empty".to_string());
        }
        Ok(Rule {
            exe: r.exe,
            uid: r.uid,
            priority: r.priority,
        })
    }
}

impl<'de> Deserialize<'de> for Rule {
    /// Checks the rule inside the visitor (not after it, as serde's
    /// `try_from` would), so toml attaches this rule's own span to the error.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Rule;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a [[rule]] table")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Rule, A::Error> {
                let raw = RawRule::deserialize(MapAccessDeserializer::new(map))?;
                Rule::try_from(raw).map_err(serde::de::Error::custom)
            }
        }
        d.deserialize_struct("Rule", &["exe", "uid", "priority"], V)
    }
}

impl Rule {
    /// Whether this rule applies to a process running `exe` (a path or a
    /// bare name) as `uid`.
    pub fn matches(&self, exe: &str, uid: u32) -> bool {
        let exe_ok = match &self.exe {
            None => true,
            Some(want) if want.contains('/') => want == exe,
            Some(want) => exe.rsplit('/').next() == Some(want.as_str()),
        };
        exe_ok && self.uid.iter().all(|&u| u == uid)
    }
}

/// How a control's value is read from an environment variable and written
/// out (as TOML text) for `config check` and the generated reference.
pub trait ControlValue: Sized {
    /// `None` when `s` is not a valid spelling; range checks come later.
    fn from_env(s: &str) -> Option<Self>;
    fn render(&self) -> String;
}

fn quote(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

impl ControlValue for bool {
    fn from_env(s: &str) -> Option<Self> {
        match s.trim() {
            "true" | "1" => Some(true),
            "false" | "0" => Some(false),
            _ => None,
        }
    }
    fn render(&self) -> String {
        self.to_string()
    }
}

impl ControlValue for u32 {
    fn from_env(s: &str) -> Option<Self> {
        s.trim().parse().ok()
    }
    fn render(&self) -> String {
        self.to_string()
    }
}

impl ControlValue for u64 {
    fn from_env(s: &str) -> Option<Self> {
        s.trim().parse().ok()
    }
    fn render(&self) -> String {
        self.to_string()
    }
}

impl ControlValue for f64 {
    fn from_env(s: &str) -> Option<Self> {
        s.trim().parse().ok().filter(|v: &f64| v.is_finite())
    }
    fn render(&self) -> String {
        // `{:?}` keeps a decimal point ("0.0"), which TOML needs for a float.
        format!("{self:?}")
    }
}

impl ControlValue for String {
    fn from_env(s: &str) -> Option<Self> {
        Some(s.to_string())
    }
    fn render(&self) -> String {
        quote(self)
    }
}

impl ControlValue for PathBuf {
    fn from_env(s: &str) -> Option<Self> {
        (!s.is_empty()).then(|| PathBuf::from(s))
    }
    fn render(&self) -> String {
        quote(&self.to_string_lossy())
    }
}

impl ControlValue for Priority {
    fn from_env(s: &str) -> Option<Self> {
        s.parse().ok()
    }
    fn render(&self) -> String {
        quote(&self.to_string())
    }
}

impl ControlValue for SafeBinary {
    fn from_env(s: &str) -> Option<Self> {
        s.parse().ok()
    }
    fn render(&self) -> String {
        quote(&self.to_string())
    }
}

impl ControlValue for Rule {
    fn from_env(_: &str) -> Option<Self> {
        None
    }
    fn render(&self) -> String {
        let mut parts = Vec::new();
        if let Some(exe) = &self.exe {
            parts.push(format!("exe = {}", quote(exe)));
        }
        if let Some(uid) = self.uid {
            parts.push(format!("uid = {uid}"));
        }
        parts.push(format!("priority = {}", self.priority.render()));
        format!("{{ {} }}", parts.join(", "))
    }
}

/// No environment spelling means "unset": the loader treats an empty
/// variable as absent, so an override can only set a value.
impl<T: ControlValue> ControlValue for Option<T> {
    fn from_env(s: &str) -> Option<Self> {
        T::from_env(s).map(Some)
    }
    fn render(&self) -> String {
        match self {
            Some(v) => v.render(),
            None => "(unset)".to_string(),
        }
    }
}

/// Lists come from the environment colon-separated, like `PATH`.
impl<T: ControlValue> ControlValue for Vec<T> {
    fn from_env(s: &str) -> Option<Self> {
        s.split(':')
            .filter(|p| !p.is_empty())
            .map(T::from_env)
            .collect()
    }
    fn render(&self) -> String {
        let items: Vec<String> = self.iter().map(ControlValue::render).collect();
        format!("[{}]", items.join(", "))
    }
}

/// An amount of device memory: bytes, or a percentage of the device's
/// `CL_DEVICE_GLOBAL_MEM_SIZE`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MemAmount {
    Bytes(u64),
    /// Above 0, at most 100.
    Percent(f64),
}

impl MemAmount {
    pub const EXPECT: &'static str = "bytes as an integer, a size such as \"8 GiB\" or \"512MB\", or a percentage of the device's memory such as \"25%\"";

    /// The amount on a device of `device_bytes`.
    pub fn bytes_of(self, device_bytes: u64) -> u64 {
        match self {
            MemAmount::Bytes(b) => b,
            MemAmount::Percent(p) => (device_bytes as f64 * p / 100.0) as u64,
        }
    }
}

impl fmt::Display for MemAmount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemAmount::Bytes(b) => write!(f, "{b}"),
            MemAmount::Percent(p) => write!(f, "{p}%"),
        }
    }
}

impl FromStr for MemAmount {
    type Err = String;
    /// Sizes are read by the `parse-size` crate: `KB`/`MB`/`GB` are powers of 1000,
    /// `KiB`/`MiB`/`GiB` powers of 1024, and a space before the unit is allowed.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("expected {}, found {s:?}", MemAmount::EXPECT);
        let t = s.trim();
        match t.strip_suffix('%') {
            Some(p) => match p.trim().parse::<f64>() {
                Ok(p) if p.is_finite() && p > 0.0 && p <= 100.0 => Ok(MemAmount::Percent(p)),
                _ => Err(bad()),
            },
            None => parse_size::parse_size(t)
                .map(MemAmount::Bytes)
                .map_err(|_| bad()),
        }
    }
}

impl<'de> Deserialize<'de> for MemAmount {
    /// A string as [`FromStr`] reads it, or a plain integer of bytes.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = MemAmount;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(MemAmount::EXPECT)
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<MemAmount, E> {
                s.parse().map_err(E::custom)
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<MemAmount, E> {
                Ok(MemAmount::Bytes(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<MemAmount, E> {
                u64::try_from(v)
                    .map(MemAmount::Bytes)
                    .map_err(|_| E::custom(format!("expected {}, found {v}", MemAmount::EXPECT)))
            }
        }
        d.deserialize_any(V)
    }
}

/// One amount of memory per priority level (`reserve`, `cap`); a level left out
/// has none.
#[derive(Debug, Clone, Copy, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LevelAmounts {
    pub high: Option<MemAmount>,
    pub normal: Option<MemAmount>,
    pub low: Option<MemAmount>,
}

impl LevelAmounts {
    pub const EXPECT: &'static str = "a table of levels (high, normal, low), each with bytes, a size such as \"8 GiB\", or a percentage such as \"25%\"";

    pub fn get(&self, level: Level) -> Option<MemAmount> {
        match level {
            Level::High => self.high,
            Level::Normal => self.normal,
            Level::Low => self.low,
        }
    }

    /// These amounts, with the levels left out taken from `base`.
    pub fn or(self, base: LevelAmounts) -> LevelAmounts {
        LevelAmounts {
            high: self.high.or(base.high),
            normal: self.normal.or(base.normal),
            low: self.low.or(base.low),
        }
    }

    /// The sum of the levels given as percentages (for the check that reserves fit).
    pub fn percent_total(&self) -> f64 {
        [self.high, self.normal, self.low]
            .iter()
            .map(|a| match a {
                Some(MemAmount::Percent(p)) => *p,
                _ => 0.0,
            })
            .sum()
    }
}

impl ControlValue for LevelAmounts {
    fn from_env(_: &str) -> Option<Self> {
        None
    }
    fn render(&self) -> String {
        let parts: Vec<String> = [Level::High, Level::Normal, Level::Low]
            .iter()
            .filter_map(|&l| self.get(l).map(|a| format!("{l} = {}", a.render())))
            .collect();
        if parts.is_empty() {
            "{}".to_string()
        } else {
            format!("{{ {} }}", parts.join(", "))
        }
    }
}

impl ControlValue for MemAmount {
    fn from_env(s: &str) -> Option<Self> {
        s.parse().ok()
    }
    fn render(&self) -> String {
        match self {
            MemAmount::Bytes(b) => b.to_string(),
            MemAmount::Percent(_) => quote(&self.to_string()),
        }
    }
}

/// One `[[memory.device]]`: the memory policy of the device it names, where it
/// differs from `[memory]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceMemory {
    /// The device: its key as `softpreempt status` shows it (`uuid-…`), its UUID,
    /// or its name (`CL_DEVICE_NAME`).
    pub device: String,
    #[serde(default)]
    pub reserve: LevelAmounts,
    #[serde(default)]
    pub cap: LevelAmounts,
}

impl DeviceMemory {
    /// Does this entry name the device with `key` (as in the arbiter) and `name`?
    /// A UUID matches with or without dashes and the `uuid-` prefix, in any case.
    pub fn matches(&self, key: &str, name: &str) -> bool {
        let want = self.device.trim();
        let hex = |s: &str| -> String {
            let s = s.trim().to_ascii_lowercase();
            let s = s.strip_prefix("uuid-").unwrap_or(&s).to_string();
            s.chars().filter(|c| *c != '-').collect()
        };
        want == key || want == name.trim() || (key.starts_with("uuid-") && hex(want) == hex(key))
    }
}

impl ControlValue for DeviceMemory {
    fn from_env(_: &str) -> Option<Self> {
        None
    }
    fn render(&self) -> String {
        format!(
            "{{ device = {}, reserve = {}, cap = {} }}",
            quote(&self.device),
            self.reserve.render(),
            self.cap.render()
        )
    }
}
