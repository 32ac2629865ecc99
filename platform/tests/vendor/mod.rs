//! The vendor for the kernel transform tests (`kernel_rewrite.rs`, `yield_rewrite.rs`):
//! PoCL by default, straight through the ocl-icd loader, without SoftPreempt.
//! `SOFTPREEMPT_TEST_ICD` names another vendor's `.icd` file (NVIDIA's on the GPU machine).
#![allow(dead_code)]

use opencl_sys::*;
use std::ffi::{c_void, CString};
use std::ptr::{null, null_mut};
use std::sync::OnceLock;

pub struct Cl {
    pub device: cl_device_id,
    pub context: cl_context,
    pub queue: cl_command_queue,
}

// SAFETY: OpenCL handles may be used from any thread; the in-order queue keeps each
// test's launches and blocking reads in order, whichever threads enqueue between them.
unsafe impl Send for Cl {}
// SAFETY: as above.
unsafe impl Sync for Cl {}

/// Asserts that an OpenCL call succeeded.
#[track_caller]
pub fn ok(rc: cl_int, what: &str) {
    assert_eq!(rc, CL_SUCCESS, "{what} failed");
}

impl Cl {
    pub fn get() -> &'static Cl {
        static CL: OnceLock<Cl> = OnceLock::new();
        CL.get_or_init(|| {
            // Show the loader the vendor alone. Runs before the process's first OpenCL call.
            let icd = std::env::var("SOFTPREEMPT_TEST_ICD")
                .unwrap_or_else(|_| "/etc/OpenCL/vendors/pocl.icd".into());
            let lib = std::fs::read_to_string(&icd).unwrap_or_else(|e| panic!("{icd}: {e}"));
            let lib = lib.lines().next().unwrap_or("").trim().to_string();
            let dir =
                std::env::temp_dir().join(format!("sp-kernel-rewrite-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("vendor.icd"), format!("{lib}\n")).unwrap();
            std::env::set_var("OCL_ICD_VENDORS", &dir);
            std::env::set_var("OCL_ICD_FILENAMES", &lib);
            let mut platform = null_mut();
            let mut device = null_mut();
            let mut err = 0;
            // SAFETY: out pointers to one handle each; the context and queue calls get
            // valid handles and NULL property lists.
            unsafe {
                ok(
                    clGetPlatformIDs(1, &mut platform, null_mut()),
                    "clGetPlatformIDs",
                );
                ok(
                    clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &mut device, null_mut()),
                    "clGetDeviceIDs",
                );
                let context = clCreateContext(null(), 1, &device, None, null_mut(), &mut err);
                ok(err, "clCreateContext");
                #[allow(deprecated)]
                let queue = clCreateCommandQueue(context, device, 0, &mut err);
                ok(err, "clCreateCommandQueue");
                Cl {
                    device,
                    context,
                    queue,
                }
            }
        })
    }

    /// Builds `source` (compiling with `headers` and linking, if there are any). Returns
    /// the program, or the build log on failure.
    pub fn build(
        &self,
        source: &str,
        headers: &[(String, String)],
        options: &str,
    ) -> Result<cl_program, String> {
        let program = self.program_of(source);
        let opts = CString::new(options).unwrap();
        let rc = if headers.is_empty() {
            // SAFETY: a valid program and device, a NUL-terminated option string.
            unsafe { clBuildProgram(program, 1, &self.device, opts.as_ptr(), None, null_mut()) }
        } else {
            let progs: Vec<cl_program> = headers.iter().map(|(_, t)| self.program_of(t)).collect();
            let names: Vec<CString> = headers
                .iter()
                .map(|(n, _)| CString::new(n.as_str()).unwrap())
                .collect();
            let name_ptrs: Vec<*const i8> = names.iter().map(|n| n.as_ptr()).collect();
            // SAFETY: parallel arrays of header programs and names, all valid.
            let rc = unsafe {
                clCompileProgram(
                    program,
                    1,
                    &self.device,
                    opts.as_ptr(),
                    progs.len() as cl_uint,
                    progs.as_ptr(),
                    name_ptrs.as_ptr(),
                    None,
                    null_mut(),
                )
            };
            if rc != CL_SUCCESS {
                return Err(self.log(program));
            }
            let mut err = 0;
            // SAFETY: one compiled program to link, on a valid context and device.
            let linked = unsafe {
                clLinkProgram(
                    self.context,
                    1,
                    &self.device,
                    null(),
                    1,
                    &program,
                    None,
                    null_mut(),
                    &mut err,
                )
            };
            ok(err, "clLinkProgram");
            return Ok(linked);
        };
        if rc != CL_SUCCESS {
            return Err(self.log(program));
        }
        Ok(program)
    }

    pub fn program_of(&self, source: &str) -> cl_program {
        let src = CString::new(source).unwrap();
        let ptr = src.as_ptr();
        let mut err = 0;
        // SAFETY: one NUL-terminated string; NULL lengths.
        let p = unsafe { clCreateProgramWithSource(self.context, 1, &ptr, null(), &mut err) };
        ok(err, "clCreateProgramWithSource");
        p
    }

    pub fn log(&self, program: cl_program) -> String {
        let mut size = 0;
        let mut buf = vec![0u8; 1 << 16];
        // SAFETY: a buffer of the size passed, and a size out pointer.
        let rc = unsafe {
            clGetProgramBuildInfo(
                program,
                self.device,
                CL_PROGRAM_BUILD_LOG,
                buf.len(),
                buf.as_mut_ptr() as *mut c_void,
                &mut size,
            )
        };
        ok(rc, "clGetProgramBuildInfo");
        buf.truncate(size.saturating_sub(1));
        String::from_utf8_lossy(&buf).into_owned()
    }
}

/// The bytes of plain numeric data.
pub fn bytes<T: Copy>(v: &[T]) -> Vec<u8> {
    // SAFETY: plain numeric data viewed as its bytes.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
        .to_vec()
}
