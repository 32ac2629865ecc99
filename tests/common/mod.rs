//! Shared set-up for the integration tests: every test binary talks to the real ocl-icd
//! loader, with a private vendors directory that holds `softpreempt.icd` (pointing at the
//! freshly built library) and the system's PoCL entry, exactly as an application would.
#![allow(dead_code)]

use opencl_sys::*;
use std::ffi::{c_void, CString};
use std::path::PathBuf;
use std::sync::Once;

/// The built layer. `cargo build` must have run first (the README's test command does):
/// `cargo test --test X` alone does not rebuild the library, so the newer of the debug and
/// release builds is taken, and a build older than the layer's sources is said on stderr
/// (a test run after a change would otherwise test the library from before it).
pub fn library_path() -> PathBuf {
    if let Ok(p) = std::env::var("SOFTPREEMPT_LIB") {
        return PathBuf::from(p);
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root.join("target"));
    let built = ["debug", "release"]
        .iter()
        .map(|profile| target.join(profile).join("libsoftpreempt.so"))
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .max();
    let Some((when, path)) = built else {
        panic!(
            "libsoftpreempt.so not built: run `cargo build --workspace` first (or set \
             SOFTPREEMPT_LIB)"
        );
    };
    let sources = ["platform/src", "icd/src", "sched/src", "transform/src"];
    if sources.iter().any(|d| newer_than(&root.join(d), when)) {
        static SAID: Once = Once::new();
        SAID.call_once(|| {
            eprintln!(
                "warning: {} is older than the layer's sources: run `cargo build --workspace`",
                path.display()
            )
        });
    }
    path
}

/// Whether a file under `dir` was modified after `when`.
fn newer_than(dir: &std::path::Path, when: std::time::SystemTime) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|e| match e.file_type() {
        Ok(t) if t.is_dir() => newer_than(&e.path(), when),
        _ => e
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|m| m > when),
    })
}

/// The vendor under test: PoCL by default; `SOFTPREEMPT_TEST_ICD` names another `.icd`
/// file (e.g. NVIDIA's on the GPU machine) and `SOFTPREEMPT_TEST_VENDOR` its platform name.
pub fn vendor_icd() -> String {
    std::env::var("SOFTPREEMPT_TEST_ICD").unwrap_or_else(|_| "/etc/OpenCL/vendors/pocl.icd".into())
}

pub fn vendor_name() -> String {
    std::env::var("SOFTPREEMPT_TEST_VENDOR")
        .unwrap_or_else(|_| "Portable Computing Language".into())
}

/// The vendor library, from its .icd file.
pub fn pocl_library() -> String {
    let path = vendor_icd();
    let icd = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{path}: {e} (PoCL is installed by scripts/setup.sh)"));
    icd.lines().next().unwrap().trim().to_string()
}

/// A vendors directory with both entries. Returns its path.
pub fn make_vendors_dir(tag: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("softpreempt-vendors-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("softpreempt.icd"),
        format!("{}\n", library_path().display()),
    )
    .unwrap();
    std::fs::write(dir.join("pocl.icd"), format!("{}\n", pocl_library())).unwrap();
    dir
}

/// The environment that shows the loader SoftPreempt and the vendor under test: a vendors
/// directory (`OCL_ICD_VENDORS`), or, with `SOFTPREEMPT_TEST_FILENAMES=1`, the library list
/// `OCL_ICD_FILENAMES` (for loaders such as NVIDIA's CUDA libOpenCL, which ignore the
/// directory variable). `None` means "remove the variable".
pub fn loader_env(tag: &str) -> Vec<(&'static str, Option<String>)> {
    let dir = make_vendors_dir(tag);
    if std::env::var_os("SOFTPREEMPT_TEST_FILENAMES").is_some() {
        let list = format!("{}:{}", library_path().display(), pocl_library());
        // A variable set at run time cannot be recovered once a Khronos loader has cut it
        // (see platform/src/core/vendor.rs), so name the vendor to the layer directly too.
        vec![
            ("OCL_ICD_FILENAMES", Some(list)),
            ("OCL_ICD_VENDORS", Some(dir.display().to_string())),
            ("SOFTPREEMPT_VENDORS", Some(pocl_library())),
        ]
    } else {
        // ocl-icd prefers OCL_ICD_FILENAMES over the vendors directory.
        vec![
            ("OCL_ICD_VENDORS", Some(dir.display().to_string())),
            ("OCL_ICD_FILENAMES", None),
        ]
    }
}

/// Applies [`loader_env`] to a child process.
pub fn point_loader(cmd: &mut std::process::Command, tag: &str) {
    for (k, v) in loader_env(tag) {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
}

/// Points the loader at SoftPreempt and the vendor. Must run before the first OpenCL call
/// of the process; every helper below calls it.
pub fn setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for (k, v) in loader_env("main") {
            match v {
                Some(v) => std::env::set_var(k, v),
                None => std::env::remove_var(k),
            }
        }
        private_cache();
        // A test machine's /etc/softpreempt.toml must not change what the tests see.
        if std::env::var_os("SOFTPREEMPT_CONFIG").is_none() {
            std::env::set_var("SOFTPREEMPT_CONFIG", "/dev/null");
        }
    });
}

/// Names the environment variable that marks a process tree's private cache directory.
pub const TEST_CACHE: &str = "SOFTPREEMPT_TEST_CACHE";

/// Points `XDG_CACHE_HOME` (where the program store lives) at a directory private to this
/// test process and the processes it starts, so no test reads or leaves a store entry
/// anywhere else. PoCL's own compiler cache stays where it was (`POCL_CACHE_DIR`), so
/// tests do not compile everything afresh.
fn private_cache() {
    if std::env::var_os(TEST_CACHE).is_some() {
        return;
    }
    let real = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")));
    if let (None, Some(real)) = (std::env::var_os("POCL_CACHE_DIR"), real) {
        std::env::set_var("POCL_CACHE_DIR", real.join("pocl"));
    }
    // Named by the process and the time, and emptied if it exists: a directory named by
    // the pid alone was found again by a later process given the same pid (pids wrap at
    // 32768 on the CI machine), whose program-store test then loaded entries an earlier
    // run had stored where it expected to compile them.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir =
        std::env::temp_dir().join(format!("softpreempt-cache-{}-{nanos}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::env::set_var("XDG_CACHE_HOME", &dir);
    std::env::set_var(TEST_CACHE, &dir);
}

pub fn platforms() -> Vec<cl_platform_id> {
    setup();
    let mut n = 0;
    // SAFETY: two-call pattern with valid out pointers.
    unsafe {
        assert_eq!(
            clGetPlatformIDs(0, std::ptr::null_mut(), &mut n),
            CL_SUCCESS
        );
        let mut v = vec![std::ptr::null_mut(); n as usize];
        assert_eq!(
            clGetPlatformIDs(n, v.as_mut_ptr(), std::ptr::null_mut()),
            CL_SUCCESS
        );
        v
    }
}

pub fn platform_string(p: cl_platform_id, what: cl_platform_info) -> String {
    let b = info_bytes(|s, v, r| unsafe { clGetPlatformInfo(p, what, s, v, r) });
    cstr(&b)
}

pub fn cstr(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// Reads a whole info value with the two-call pattern, asserting success.
pub fn info_bytes(f: impl Fn(usize, *mut c_void, *mut usize) -> cl_int) -> Vec<u8> {
    let mut size = 0;
    assert_eq!(
        f(0, std::ptr::null_mut(), &mut size),
        CL_SUCCESS,
        "info size query failed"
    );
    let mut b = vec![0u8; size];
    if size > 0 {
        assert_eq!(
            f(size, b.as_mut_ptr() as *mut c_void, std::ptr::null_mut()),
            CL_SUCCESS
        );
    }
    b
}

/// Reads a plain value from an info query.
pub fn info_scalar<T: Copy + Default>(f: impl Fn(usize, *mut c_void, *mut usize) -> cl_int) -> T {
    let mut v = T::default();
    assert_eq!(
        f(
            std::mem::size_of::<T>(),
            &mut v as *mut T as *mut c_void,
            std::ptr::null_mut()
        ),
        CL_SUCCESS
    );
    v
}

/// The Python that runs pyopencl clients: `SOFTPREEMPT_TEST_PYTHON`, else `python3`.
pub fn python() -> String {
    std::env::var("SOFTPREEMPT_TEST_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Whether [`python`] has pyopencl and numpy. Without them a test says so and passes,
/// unless `SOFTPREEMPT_TEST_REQUIRE_PYOPENCL` is set (the README's test command builds
/// the client venv first and requires it): then it fails.
pub fn has_pyopencl_or_skip() -> bool {
    let has = std::process::Command::new(python())
        .args(["-c", "import pyopencl, numpy"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has {
        assert!(
            std::env::var_os("SOFTPREEMPT_TEST_REQUIRE_PYOPENCL").is_none(),
            "{} has no pyopencl, and SOFTPREEMPT_TEST_REQUIRE_PYOPENCL is set",
            python()
        );
        eprintln!(
            "skipped: {} has no pyopencl (set SOFTPREEMPT_TEST_PYTHON)",
            python()
        );
    }
    has
}

/// The SoftPreempt platform (wrapping PoCL).
pub fn sp_platform() -> cl_platform_id {
    *platforms()
        .iter()
        .find(|&&p| platform_string(p, CL_PLATFORM_NAME) == "SoftPreempt")
        .expect("no SoftPreempt platform visible through the loader")
}

/// The bare vendor platform (PoCL unless told otherwise), for side-by-side comparisons.
pub fn bare_platform() -> cl_platform_id {
    let name = vendor_name();
    *platforms()
        .iter()
        .find(|&&p| platform_string(p, CL_PLATFORM_NAME) == name)
        .unwrap_or_else(|| panic!("no '{name}' platform visible through the loader"))
}

pub fn device(p: cl_platform_id) -> cl_device_id {
    let mut d = std::ptr::null_mut();
    // SAFETY: one device handle out.
    let rc = unsafe {
        clGetDeviceIDs(
            p,
            CL_DEVICE_TYPE_ALL as cl_device_type,
            1,
            &mut d,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(rc, CL_SUCCESS);
    d
}

/// A fresh context, device and in-order queue (with profiling) on `p`.
pub struct Env {
    pub platform: cl_platform_id,
    pub device: cl_device_id,
    pub context: cl_context,
    pub queue: cl_command_queue,
}

/// The first device of `p` and a context on it.
pub fn context(p: cl_platform_id) -> (cl_device_id, cl_context) {
    let device = device(p);
    let props = [
        CL_CONTEXT_PLATFORM as cl_context_properties,
        p as cl_context_properties,
        0,
    ];
    let mut err = 0;
    // SAFETY: valid property list and device.
    let context = unsafe {
        clCreateContext(
            props.as_ptr(),
            1,
            &device,
            None,
            std::ptr::null_mut(),
            &mut err,
        )
    };
    assert_eq!(err, CL_SUCCESS, "clCreateContext");
    (device, context)
}

impl Env {
    pub fn new(p: cl_platform_id) -> Env {
        let (device, context) = context(p);
        let mut env = Env {
            platform: p,
            device,
            context,
            queue: std::ptr::null_mut(),
        };
        env.open_queue();
        env
    }

    /// Creates the in-order profiling queue (after [`Env::close_queue`]): on a SoftPreempt
    /// platform a new queue is a new client of the device's arbiter.
    pub fn open_queue(&mut self) {
        assert!(self.queue.is_null(), "the queue is already open");
        let mut err = 0;
        let qprops = [
            CL_QUEUE_PROPERTIES as cl_queue_properties,
            CL_QUEUE_PROFILING_ENABLE as cl_queue_properties,
            0,
        ];
        // SAFETY: valid context/device and property list.
        self.queue = unsafe {
            clCreateCommandQueueWithProperties(self.context, self.device, qprops.as_ptr(), &mut err)
        };
        assert_eq!(err, CL_SUCCESS, "clCreateCommandQueueWithProperties");
    }

    /// Drains and releases the queue, keeping the context and what was built in it; on a
    /// SoftPreempt platform its arbiter client goes with it.
    pub fn close_queue(&mut self) {
        if self.queue.is_null() {
            return;
        }
        // SAFETY: the queue is valid and released once (then forgotten).
        unsafe {
            ok(clFinish(self.queue));
            ok(clReleaseCommandQueue(self.queue));
        }
        self.queue = std::ptr::null_mut();
    }

    pub fn sp() -> Env {
        Env::new(sp_platform())
    }

    /// Builds `src` and returns the program (panics with the build log on failure).
    pub fn program(&self, src: &str) -> cl_program {
        let c = CString::new(src).unwrap();
        let ptr = c.as_ptr();
        let mut err = 0;
        // SAFETY: one NUL-terminated source string.
        let prog =
            unsafe { clCreateProgramWithSource(self.context, 1, &ptr, std::ptr::null(), &mut err) };
        assert_eq!(err, CL_SUCCESS);
        // SAFETY: valid program and device.
        let rc = unsafe {
            clBuildProgram(
                prog,
                1,
                &self.device,
                std::ptr::null(),
                None,
                std::ptr::null_mut(),
            )
        };
        if rc != CL_SUCCESS {
            let log = info_bytes(|s, v, r| unsafe {
                clGetProgramBuildInfo(prog, self.device, CL_PROGRAM_BUILD_LOG, s, v, r)
            });
            panic!("build failed ({rc}): {}", cstr(&log));
        }
        prog
    }

    pub fn kernel(&self, prog: cl_program, name: &str) -> cl_kernel {
        let c = CString::new(name).unwrap();
        let mut err = 0;
        // SAFETY: valid program and name.
        let k = unsafe { clCreateKernel(prog, c.as_ptr(), &mut err) };
        assert_eq!(err, CL_SUCCESS, "clCreateKernel({name})");
        k
    }

    pub fn buffer(&self, bytes: usize) -> cl_mem {
        let mut err = 0;
        // SAFETY: plain device buffer.
        let m = unsafe {
            clCreateBuffer(
                self.context,
                CL_MEM_READ_WRITE,
                bytes,
                std::ptr::null_mut(),
                &mut err,
            )
        };
        assert_eq!(err, CL_SUCCESS);
        m
    }

    pub fn write<T: Copy>(&self, m: cl_mem, data: &[T]) {
        // SAFETY: blocking write from a live slice.
        let rc = unsafe {
            clEnqueueWriteBuffer(
                self.queue,
                m,
                CL_TRUE,
                0,
                std::mem::size_of_val(data),
                data.as_ptr() as *const c_void,
                0,
                std::ptr::null(),
                std::ptr::null_mut(),
            )
        };
        assert_eq!(rc, CL_SUCCESS);
    }

    pub fn read<T: Copy + Default>(&self, m: cl_mem, n: usize) -> Vec<T> {
        self.read_on(self.queue, m, n)
    }

    /// [`Env::read`] through queue `q` of this context.
    pub fn read_on<T: Copy + Default>(&self, q: cl_command_queue, m: cl_mem, n: usize) -> Vec<T> {
        let mut v = vec![T::default(); n];
        // SAFETY: blocking read into a live vector.
        let rc = unsafe {
            clEnqueueReadBuffer(
                q,
                m,
                CL_TRUE,
                0,
                n * std::mem::size_of::<T>(),
                v.as_mut_ptr() as *mut c_void,
                0,
                std::ptr::null(),
                std::ptr::null_mut(),
            )
        };
        assert_eq!(rc, CL_SUCCESS);
        v
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        // SAFETY: releasing what `new` created.
        unsafe {
            if !self.queue.is_null() {
                clReleaseCommandQueue(self.queue);
            }
            clReleaseContext(self.context);
        }
    }
}

/// Asserts a CL status with a readable message.
#[track_caller]
pub fn ok(rc: cl_int) {
    assert_eq!(rc, CL_SUCCESS, "OpenCL call failed with {rc}");
}
