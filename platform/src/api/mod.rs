//! Argument checking for every entry point (rusticl style); the work is in `core`.

pub mod context;
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
