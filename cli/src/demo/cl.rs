//! The demo's OpenCL side: one context, queue and kernel on a chosen platform's default
//! device, through the real ICD loader.

use std::ffi::{c_void, CString};

use opencl_sys::*;

/// The workload: a Mandelbrot image. Its cost grows with `width`² × `iters`, and every
/// launch computes the same image, so results can be compared bit for bit.
const SOURCE: &str = include_str!("mandel.cl");

/// The SoftPreempt platforms' name.
pub const LAYER_PLATFORM: &str = "SoftPreempt";

fn check(rc: cl_int, what: &str) -> Result<(), String> {
    if rc == CL_SUCCESS {
        Ok(())
    } else {
        Err(format!("{what} failed with OpenCL error {rc}"))
    }
}

/// A string-valued info query through the two-call pattern.
fn info_string(query: impl Fn(usize, *mut c_void, *mut usize) -> cl_int) -> String {
    let mut size = 0;
    if query(0, std::ptr::null_mut(), &mut size) != CL_SUCCESS || size == 0 {
        return String::new();
    }
    let mut buf = vec![0u8; size];
    if query(size, buf.as_mut_ptr() as *mut c_void, std::ptr::null_mut()) != CL_SUCCESS {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

fn platform_name(p: cl_platform_id) -> String {
    // SAFETY: the closure passes through a size and a buffer of that size.
    info_string(|n, buf, ret| unsafe { clGetPlatformInfo(p, CL_PLATFORM_NAME, n, buf, ret) })
}

fn device_name(d: cl_device_id) -> String {
    // SAFETY: as above.
    info_string(|n, buf, ret| unsafe { clGetDeviceInfo(d, CL_DEVICE_NAME, n, buf, ret) })
}

fn platforms() -> Result<Vec<cl_platform_id>, String> {
    let mut n = 0;
    // SAFETY: the two-call pattern into a vector of the reported length.
    unsafe {
        check(
            clGetPlatformIDs(0, std::ptr::null_mut(), &mut n),
            "clGetPlatformIDs",
        )?;
        let mut v = vec![std::ptr::null_mut(); n as usize];
        check(
            clGetPlatformIDs(n, v.as_mut_ptr(), std::ptr::null_mut()),
            "clGetPlatformIDs",
        )?;
        Ok(v)
    }
}

fn default_device(p: cl_platform_id) -> Option<cl_device_id> {
    let mut dev = std::ptr::null_mut();
    // SAFETY: one device id into a local.
    let rc = unsafe {
        clGetDeviceIDs(
            p,
            CL_DEVICE_TYPE_DEFAULT as cl_device_type,
            1,
            &mut dev,
            std::ptr::null_mut(),
        )
    };
    (rc == CL_SUCCESS).then_some(dev)
}

/// The default device of the first platform of the right kind (SoftPreempt's, or a
/// vendor's), preferring one whose device is named `device_hint` (so both runs use the
/// same device when several vendors are installed).
pub fn choose(
    layered: bool,
    device_hint: Option<&str>,
) -> Result<(cl_device_id, String, String), String> {
    let mut found = Vec::new();
    for p in platforms()? {
        let name = platform_name(p);
        if (name == LAYER_PLATFORM) != layered {
            continue;
        }
        if let Some(d) = default_device(p) {
            found.push((d, name, device_name(d)));
        }
    }
    let pick = found
        .iter()
        .position(|(_, _, dev)| Some(dev.as_str()) == device_hint)
        .unwrap_or(0);
    if found.is_empty() {
        return Err(if layered {
            "the SoftPreempt platform is not visible (is libsoftpreempt.so built?)".into()
        } else {
            "no vendor OpenCL platform with a device is installed (PoCL: scripts/setup.sh)".into()
        });
    }
    Ok(found.swap_remove(pick))
}

/// A context, an in-order queue and the built kernel, with an output image.
pub struct Session {
    ctx: cl_context,
    queue: cl_command_queue,
    program: cl_program,
    kernel: cl_kernel,
    out: cl_mem,
    width: usize,
}

impl Session {
    /// Builds the workload for a `width`² image of `iters` iterations on `dev`.
    pub fn new(dev: cl_device_id, width: usize, iters: i32) -> Result<Session, String> {
        let mut err = 0;
        // SAFETY: each call gets handles created just before it (checked), and pointers to
        // locals that outlive the call. Objects created so far are released by `Drop`
        // through the partly filled `Session` when a later step fails.
        unsafe {
            let ctx = clCreateContext(
                std::ptr::null(),
                1,
                &dev,
                None,
                std::ptr::null_mut(),
                &mut err,
            );
            check(err, "clCreateContext")?;
            let mut s = Session {
                ctx,
                queue: std::ptr::null_mut(),
                program: std::ptr::null_mut(),
                kernel: std::ptr::null_mut(),
                out: std::ptr::null_mut(),
                width,
            };
            s.queue = clCreateCommandQueueWithProperties(ctx, dev, std::ptr::null(), &mut err);
            check(err, "clCreateCommandQueueWithProperties")?;
            let src = CString::new(SOURCE).unwrap_or_default();
            let sp = src.as_ptr();
            s.program = clCreateProgramWithSource(ctx, 1, &sp, std::ptr::null(), &mut err);
            check(err, "clCreateProgramWithSource")?;
            check(
                clBuildProgram(
                    s.program,
                    1,
                    &dev,
                    std::ptr::null(),
                    None,
                    std::ptr::null_mut(),
                ),
                "clBuildProgram",
            )?;
            let name = CString::new("mandel").unwrap_or_default();
            s.kernel = clCreateKernel(s.program, name.as_ptr(), &mut err);
            check(err, "clCreateKernel")?;
            s.out = clCreateBuffer(
                ctx,
                CL_MEM_WRITE_ONLY,
                width * width * 4,
                std::ptr::null_mut(),
                &mut err,
            );
            check(err, "clCreateBuffer")?;
            let w = width as i32;
            let args: [(usize, *const c_void); 3] = [
                (
                    std::mem::size_of::<cl_mem>(),
                    &s.out as *const cl_mem as *const c_void,
                ),
                (4, &w as *const i32 as *const c_void),
                (4, &iters as *const i32 as *const c_void),
            ];
            for (i, (size, value)) in args.into_iter().enumerate() {
                check(
                    clSetKernelArg(s.kernel, i as cl_uint, size, value),
                    "clSetKernelArg",
                )?;
            }
            Ok(s)
        }
    }

    /// One launch over the whole image, waited for.
    pub fn launch(&self) -> Result<(), String> {
        let global = [self.width, self.width];
        // SAFETY: live queue and kernel; `global` outlives the call.
        unsafe {
            check(
                clEnqueueNDRangeKernel(
                    self.queue,
                    self.kernel,
                    2,
                    std::ptr::null(),
                    global.as_ptr(),
                    std::ptr::null(),
                    0,
                    std::ptr::null(),
                    std::ptr::null_mut(),
                ),
                "clEnqueueNDRangeKernel",
            )?;
            check(clFinish(self.queue), "clFinish")
        }
    }

    /// FNV-1a of the image, to compare runs bit for bit.
    pub fn checksum(&self) -> Result<u64, String> {
        let mut image = vec![0u32; self.width * self.width];
        // SAFETY: a blocking read into a vector of exactly the buffer's size.
        unsafe {
            check(
                clEnqueueReadBuffer(
                    self.queue,
                    self.out,
                    CL_TRUE,
                    0,
                    image.len() * 4,
                    image.as_mut_ptr() as *mut c_void,
                    0,
                    std::ptr::null(),
                    std::ptr::null_mut(),
                ),
                "clEnqueueReadBuffer",
            )?;
        }
        Ok(image.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &v| {
            (h ^ v as u64).wrapping_mul(0x100_0000_01b3)
        }))
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // SAFETY: each handle is either null (never created) or owned by this session.
        unsafe {
            if !self.out.is_null() {
                clReleaseMemObject(self.out);
            }
            if !self.kernel.is_null() {
                clReleaseKernel(self.kernel);
            }
            if !self.program.is_null() {
                clReleaseProgram(self.program);
            }
            if !self.queue.is_null() {
                clReleaseCommandQueue(self.queue);
            }
            clReleaseContext(self.ctx);
        }
    }
}
