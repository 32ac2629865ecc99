//! Argument checking for every entry point (rusticl style); the work is in `core`.
//!
//! These functions are the C ABI's trust boundary: they receive the application's raw
//! pointers and hand them only to the checked helpers of `core::args` (or, unchanged, to the
//! vendor), so they are safe fns by design.
#![allow(clippy::not_unsafe_ptr_arg_deref, clippy::too_many_arguments)]

pub mod context;
pub mod defer;
pub mod device;
pub mod enqueue;
pub mod event;
pub mod interop;
pub mod kernel;
pub mod mem;
pub mod platform;
pub mod program;
pub mod queue;
pub mod sampler;
