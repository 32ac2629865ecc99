//! `softpreempt demo`: runs one workload on the bare vendor platform and through SoftPreempt,
//! through the real ICD loader, and shows that the results are bit-identical and what the
//! layer costs. (The two-process preemption demo replaces this once managed queues land.)

use opencl_sys::*;
use std::ffi::{c_void, CString};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

const SOURCE: &str = r#"
__kernel void mandel(__global uint *out, int width, int iters) {
    int x = get_global_id(0), y = get_global_id(1);
    float cr = -2.0f + 2.5f * x / width, ci = -1.25f + 2.5f * y / width;
    float zr = 0.0f, zi = 0.0f;
    int i = 0;
    while (i < iters && zr * zr + zi * zi < 4.0f) {
        float t = zr * zr - zi * zi + cr;
        zi = 2.0f * zr * zi + ci;
        zr = t;
        i++;
    }
    out[y * width + x] = i;
}
"#;

/// The built library: next to this executable (target/<profile>/), or installed.
fn library() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("SOFTPREEMPT_LIB") {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    [
        exe.with_file_name("libsoftpreempt.so"),
        PathBuf::from("/usr/local/lib/libsoftpreempt.so"),
    ]
    .into_iter()
    .find(|p| p.exists())
}

/// Points the loader at SoftPreempt plus the system's vendors, unless the caller already did.
fn prepare_loader() -> Result<(), String> {
    let lib = library().ok_or("libsoftpreempt.so not found: run `cargo build --release` first")?;
    let dir = std::env::temp_dir().join(format!("softpreempt-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("softpreempt.icd"), format!("{}\n", lib.display()))
        .map_err(|e| e.to_string())?;
    // A loader given OCL_ICD_FILENAMES loads exactly that list (NVIDIA's CUDA loader knows
    // no vendors directory at all): put SoftPreempt in front of it.
    if let Some(files) = std::env::var_os("OCL_ICD_FILENAMES").filter(|f| !f.is_empty()) {
        let vendors: Vec<PathBuf> = std::env::split_paths(&files)
            .filter(|p| !p.ends_with("libsoftpreempt.so"))
            .collect();
        // Set at run time, the list would reach the layer cut by a Khronos loader's strtok
        // (see platform/src/core/vendor.rs): name the vendors to the layer directly.
        if std::env::var_os("SOFTPREEMPT_VENDORS").is_none() {
            let joined = std::env::join_paths(&vendors).map_err(|e| e.to_string())?;
            std::env::set_var("SOFTPREEMPT_VENDORS", joined);
        }
        let mut list = vec![lib];
        list.extend(vendors);
        let joined = std::env::join_paths(list).map_err(|e| e.to_string())?;
        std::env::set_var("OCL_ICD_FILENAMES", joined);
        return Ok(());
    }
    let system = std::env::var("OCL_ICD_VENDORS").unwrap_or_else(|_| "/etc/OpenCL/vendors".into());
    for e in std::fs::read_dir(&system)
        .map_err(|e| format!("{system}: {e}"))?
        .flatten()
    {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "icd")
            && p.file_name().is_some_and(|n| n != "softpreempt.icd")
        {
            let _ = std::fs::copy(&p, dir.join(p.file_name().unwrap()));
        }
    }
    std::env::set_var("OCL_ICD_VENDORS", &dir);
    Ok(())
}

fn check(rc: cl_int, what: &str) -> Result<(), String> {
    if rc == CL_SUCCESS {
        Ok(())
    } else {
        Err(format!("{what} failed with {rc}"))
    }
}

fn platform_name(p: cl_platform_id) -> String {
    let mut buf = [0u8; 256];
    // SAFETY: a 256-byte buffer for a name.
    unsafe {
        clGetPlatformInfo(
            p,
            CL_PLATFORM_NAME,
            buf.len(),
            buf.as_mut_ptr() as *mut c_void,
            std::ptr::null_mut(),
        )
    };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(0);
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

struct Outcome {
    checksum: u64,
    image: Vec<u32>,
    ms: f64,
}

/// Builds and runs the workload `reps` times on `p`'s first device.
fn run_on(p: cl_platform_id, width: usize, iters: i32, reps: usize) -> Result<Outcome, String> {
    let mut err = 0;
    let mut dev = std::ptr::null_mut();
    // SAFETY: every call below gets valid handles created just before it, and buffers that
    // outlive the blocking calls using them.
    unsafe {
        check(
            clGetDeviceIDs(
                p,
                CL_DEVICE_TYPE_DEFAULT as cl_device_type,
                1,
                &mut dev,
                std::ptr::null_mut(),
            ),
            "clGetDeviceIDs",
        )?;
        let ctx = clCreateContext(
            std::ptr::null(),
            1,
            &dev,
            None,
            std::ptr::null_mut(),
            &mut err,
        );
        check(err, "clCreateContext")?;
        let q = clCreateCommandQueueWithProperties(ctx, dev, std::ptr::null(), &mut err);
        check(err, "clCreateCommandQueueWithProperties")?;
        let src = CString::new(SOURCE).unwrap();
        let sp = src.as_ptr();
        let prog = clCreateProgramWithSource(ctx, 1, &sp, std::ptr::null(), &mut err);
        check(err, "clCreateProgramWithSource")?;
        check(
            clBuildProgram(prog, 1, &dev, std::ptr::null(), None, std::ptr::null_mut()),
            "clBuildProgram",
        )?;
        let name = CString::new("mandel").unwrap();
        let k = clCreateKernel(prog, name.as_ptr(), &mut err);
        check(err, "clCreateKernel")?;
        let bytes = width * width * 4;
        let out = clCreateBuffer(
            ctx,
            CL_MEM_WRITE_ONLY,
            bytes,
            std::ptr::null_mut(),
            &mut err,
        );
        check(err, "clCreateBuffer")?;
        let w = width as i32;
        check(
            clSetKernelArg(k, 0, 8, &out as *const cl_mem as *const c_void),
            "clSetKernelArg",
        )?;
        check(
            clSetKernelArg(k, 1, 4, &w as *const i32 as *const c_void),
            "clSetKernelArg",
        )?;
        check(
            clSetKernelArg(k, 2, 4, &iters as *const i32 as *const c_void),
            "clSetKernelArg",
        )?;
        let global = [width, width];
        let t = Instant::now();
        for _ in 0..reps {
            check(
                clEnqueueNDRangeKernel(
                    q,
                    k,
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
        }
        check(clFinish(q), "clFinish")?;
        let ms = t.elapsed().as_secs_f64() * 1e3 / reps as f64;
        let mut image = vec![0u32; width * width];
        check(
            clEnqueueReadBuffer(
                q,
                out,
                CL_TRUE,
                0,
                bytes,
                image.as_mut_ptr() as *mut c_void,
                0,
                std::ptr::null(),
                std::ptr::null_mut(),
            ),
            "clEnqueueReadBuffer",
        )?;
        clReleaseMemObject(out);
        clReleaseKernel(k);
        clReleaseProgram(prog);
        clReleaseCommandQueue(q);
        clReleaseContext(ctx);
        let checksum = image.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &v| {
            (h ^ v as u64).wrapping_mul(0x100_0000_01b3)
        });
        Ok(Outcome {
            checksum,
            image,
            ms,
        })
    }
}

pub fn run(args: &[String]) -> ExitCode {
    if let Some(a) = args.first() {
        eprintln!("softpreempt demo: unexpected argument '{a}'");
        return ExitCode::from(2);
    }
    match demo() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("softpreempt demo: {e}");
            ExitCode::FAILURE
        }
    }
}

fn demo() -> Result<(), String> {
    prepare_loader()?;
    let mut n = 0;
    // SAFETY: two-call pattern into a local vector.
    let plats = unsafe {
        check(
            clGetPlatformIDs(0, std::ptr::null_mut(), &mut n),
            "clGetPlatformIDs",
        )?;
        let mut v = vec![std::ptr::null_mut(); n as usize];
        check(
            clGetPlatformIDs(n, v.as_mut_ptr(), std::ptr::null_mut()),
            "clGetPlatformIDs",
        )?;
        v
    };
    let sp = *plats
        .iter()
        .find(|&&p| platform_name(p) == "SoftPreempt")
        .ok_or("the SoftPreempt platform is not visible")?;
    let bare = *plats
        .iter()
        .find(|&&p| platform_name(p) != "SoftPreempt")
        .ok_or("no vendor platform is installed")?;
    let (width, iters, reps) = (512, 256, 5);
    println!("SoftPreempt demo: {width}x{width} Mandelbrot, {iters} iterations, {reps} launches per platform");
    println!("vendor platform: {}", platform_name(bare));
    let a = run_on(bare, width, iters, reps)?;
    let b = run_on(sp, width, iters, reps)?;
    println!();
    println!(
        "{:<28} {:>12} {:>20}",
        "platform", "ms/launch", "result checksum"
    );
    println!("{:<28} {:>12.2} {:>20x}", "bare vendor", a.ms, a.checksum);
    println!(
        "{:<28} {:>12.2} {:>20x}",
        "through SoftPreempt", b.ms, b.checksum
    );
    if a.image != b.image {
        return Err("results differ between the bare vendor and SoftPreempt".into());
    }
    println!(
        "\nresults are bit-identical; cost through the layer: {:+.1}%",
        (b.ms / a.ms - 1.0) * 100.0
    );
    println!("(the two-process preemption demo arrives with managed queues)");
    Ok(())
}
