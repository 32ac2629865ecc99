//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use softpreempt_sched::ArbiterOptions;

pub mod kids;

/// A private segment directory under /dev/shm, removed on drop, so tests run in parallel.
pub struct TestDir(pub PathBuf);

impl TestDir {
    pub fn new(tag: &str) -> TestDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let base = if Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let p = base.join(format!(
            "softpreempt-test-{}-{tag}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).unwrap();
        TestDir(p)
    }

    pub fn opts(&self) -> ArbiterOptions {
        ArbiterOptions {
            shm_dir: self.0.clone(),
            hp_linger: Duration::ZERO,
            liveness_interval: Duration::from_millis(20),
            ..Default::default()
        }
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Polls `cond` until it holds or a generous liveness deadline passes (not a timing test).
pub fn eventually(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + limit;
    while !cond() {
        assert!(
            Instant::now() < end,
            "liveness: {what} did not happen within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}
