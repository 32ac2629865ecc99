//! Atomic types used for every shared field.
//!
//! Normal builds use `std` atomics (they are placed in the shared mapping). Under
//! `--cfg loom` the same layout and policy code is compiled against loom's atomics, so the
//! lock-free protocol in `policy.rs` is model-checked as written (see `policy::loom_tests`).

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicU32, AtomicU64};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicU32, AtomicU64};

pub(crate) use std::sync::atomic::Ordering;
