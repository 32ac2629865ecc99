//! The wrapped objects and the machinery to forward them to the vendor.

pub mod args;
pub mod binaries;
pub mod build_threads;
pub mod callback;
pub mod cl;
pub mod concurrent_builds;
pub mod error;
pub mod events;
pub mod extensions;
pub mod forward;
pub mod handle;
pub mod held_context;
pub mod kernel_pool;
pub mod managed;
pub mod memory;
pub mod objects;
pub mod os_priority;
pub mod own_build;
pub mod platform;
pub mod ptx;
pub mod refcount;
pub mod rewritten;
pub mod sliceable;
pub mod vendor;
pub mod yield_program;
