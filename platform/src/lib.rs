//! SoftPreempt's objects and behaviour, behind the thin C ABI of the `icd` crate.
//!
//! `api/` checks the application's arguments (rusticl style) and `core/` holds the wrapped
//! objects, vendor loading and the forwarding helpers.

pub mod api;
#[cfg(feature = "calltime")]
pub mod calltime;

/// `calltime!("name", expr)`: `expr`, timed as `name` in a diagnostic build (cargo feature
/// `calltime`, see `calltime.rs`), and nothing more in any other.
#[macro_export]
macro_rules! calltime {
    ($name:literal, $e:expr) => {{
        #[cfg(feature = "calltime")]
        let _t = $crate::calltime::Timer::new($name);
        $e
    }};
}
pub mod config;
pub mod core;
pub mod log;
pub mod store;
pub mod trace;
