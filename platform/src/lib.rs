//! SoftPreempt's objects and behaviour, behind the thin C ABI of the `icd` crate.
//!
//! `api/` checks the application's arguments (rusticl style) and `core/` holds the wrapped
//! objects, vendor loading and the forwarding helpers.

pub mod api;
#[cfg(feature = "calltime")]
pub mod calltime;
pub mod config;
pub mod core;
pub mod log;
pub mod store;
pub mod trace;
