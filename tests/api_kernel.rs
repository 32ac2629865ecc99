//! Kernels through the real loader, side by side with bare PoCL: handle-valued info,
//! argument translation (buffers, images, samplers, local memory, NULL buffers, SVM),
//! cloning, the work-group / argument / sub-group queries, bad handles and arguments,
//! reference counts, and kernel objects made again from a released one's vendor kernel.

mod common;

use common::*;
use opencl_sys::cl_icd::cl_icd_dispatch;
use opencl_sys::*;
use std::ffi::{c_void, CString};
use std::ptr::{null, null_mut};

const SRC: &str = r#"
__kernel void scale(__global int *o, int f) { int i = get_global_id(0); o[i] = i * f; }

__kernel void maybe(__global int *o, __global int *opt) {
    int i = get_global_id(0);
    o[i] = opt ? opt[i] + 100 : -1;
}

/* Each work-item reads its pixel through the sampler, shares it through local memory and
   writes its right neighbour's value (wrapping inside the group), doubled. */
__kernel void neighbours(__read_only image2d_t img, sampler_t s, __local float *tmp,
                      __global float *out) {
    int i = get_global_id(0);
    int l = get_local_id(0);
    int n = get_local_size(0);
    tmp[l] = read_imagef(img, s, (int2)(i, 0)).x;
    barrier(CLK_LOCAL_MEM_FENCE);
    out[i] = 2.0f * tmp[(l + 1) % n];
}
"#;

fn set_arg<T>(k: cl_kernel, i: cl_uint, v: &T) -> cl_int {
    // SAFETY: `v` is readable for size_of::<T>() bytes.
    unsafe {
        clSetKernelArg(
            k,
            i,
            std::mem::size_of::<T>(),
            v as *const T as *const c_void,
        )
    }
}

fn run(env: &Env, k: cl_kernel, global: usize, local: Option<usize>) {
    let l = local.as_ref().map_or(null(), |l| l as *const usize);
    // SAFETY: a kernel with all arguments set, one dimension.
    ok(unsafe {
        clEnqueueNDRangeKernel(env.queue, k, 1, null(), &global, l, 0, null(), null_mut())
    });
    // SAFETY: a valid queue.
    ok(unsafe { clFinish(env.queue) });
}

fn release_kernel(k: cl_kernel) {
    // SAFETY: a kernel the test owns.
    ok(unsafe { clReleaseKernel(k) });
}

fn release_mem(m: cl_mem) {
    // SAFETY: a buffer the test owns.
    ok(unsafe { clReleaseMemObject(m) });
}

fn release_program(p: cl_program) {
    // SAFETY: a program the test owns.
    ok(unsafe { clReleaseProgram(p) });
}

fn kernel_handle<H: Copy + Default>(k: cl_kernel, q: cl_kernel_info) -> H {
    info_scalar(|s, v, r| unsafe { clGetKernelInfo(k, q, s, v, r) })
}

#[test]
fn info_returns_our_wrappers() {
    let env = Env::sp();
    let bare = Env::new(bare_platform());
    let (p, bp) = (env.program(SRC), bare.program(SRC));
    let (k, bk) = (env.kernel(p, "neighbours"), bare.kernel(bp, "neighbours"));
    assert_eq!(kernel_handle::<cl_program>(k, CL_KERNEL_PROGRAM), p);
    assert_eq!(
        kernel_handle::<cl_context>(k, CL_KERNEL_CONTEXT),
        env.context
    );
    // SAFETY: cloning a live kernel.
    let mut err = 0;
    let c = unsafe { clCloneKernel(k, &mut err) };
    ok(err);
    assert_ne!(c, k);
    assert_eq!(kernel_handle::<cl_program>(c, CL_KERNEL_PROGRAM), p);
    assert_eq!(
        kernel_handle::<cl_context>(c, CL_KERNEL_CONTEXT),
        env.context
    );
    for q in [
        CL_KERNEL_FUNCTION_NAME,
        CL_KERNEL_NUM_ARGS,
        CL_KERNEL_ATTRIBUTES,
    ] {
        let a = info_bytes(|s, v, r| unsafe { clGetKernelInfo(k, q, s, v, r) });
        let b = info_bytes(|s, v, r| unsafe { clGetKernelInfo(bk, q, s, v, r) });
        assert_eq!(a, b, "query {q:#x}");
    }
    // Argument metadata and work-group queries (with and without the device).
    for i in 0..4 {
        for q in [
            CL_KERNEL_ARG_ADDRESS_QUALIFIER,
            CL_KERNEL_ARG_ACCESS_QUALIFIER,
            CL_KERNEL_ARG_TYPE_NAME,
            CL_KERNEL_ARG_NAME,
        ] {
            // Vendors without -cl-kernel-arg-info may answer
            // CL_KERNEL_ARG_INFO_NOT_AVAILABLE (NVIDIA does): then both must.
            let get = |kern: cl_kernel| {
                let mut size = 0;
                // SAFETY: a size query, then a read into a buffer of that size.
                let rc = unsafe { clGetKernelArgInfo(kern, i, q, 0, null_mut(), &mut size) };
                if rc != CL_SUCCESS {
                    return (rc, Vec::new());
                }
                (
                    rc,
                    info_bytes(|s, v, r| unsafe { clGetKernelArgInfo(kern, i, q, s, v, r) }),
                )
            };
            assert_eq!(get(k), get(bk), "arg {i} query {q:#x}");
        }
    }
    let mut one = [0u8; 64];
    // SAFETY: an out-of-range argument index.
    let (a, b) = unsafe {
        (
            clGetKernelArgInfo(
                k,
                9,
                CL_KERNEL_ARG_NAME,
                64,
                one.as_mut_ptr() as *mut c_void,
                null_mut(),
            ),
            clGetKernelArgInfo(
                bk,
                9,
                CL_KERNEL_ARG_NAME,
                64,
                one.as_mut_ptr() as *mut c_void,
                null_mut(),
            ),
        )
    };
    assert_eq!(a, b, "the vendor's answer, forwarded");
    // NVIDIA says CL_INVALID_VALUE here; PoCL gives the spec's code.
    if vendor_name() == "Portable Computing Language" {
        assert_eq!(a, CL_INVALID_ARG_INDEX);
    }
    for q in [
        CL_KERNEL_WORK_GROUP_SIZE,
        CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE,
        CL_KERNEL_LOCAL_MEM_SIZE,
    ] {
        let a: usize =
            info_scalar(|s, v, r| unsafe { clGetKernelWorkGroupInfo(k, env.device, q, s, v, r) });
        let a_null: usize =
            info_scalar(|s, v, r| unsafe { clGetKernelWorkGroupInfo(k, null_mut(), q, s, v, r) });
        let b: usize =
            info_scalar(|s, v, r| unsafe { clGetKernelWorkGroupInfo(bk, bare.device, q, s, v, r) });
        assert_eq!((a, a_null), (b, b), "query {q:#x}");
    }
    // Spec size rule on a handle-valued answer.
    // SAFETY: one byte offered for a pointer.
    let rc = unsafe {
        clGetKernelInfo(
            k,
            CL_KERNEL_PROGRAM,
            1,
            one.as_mut_ptr() as *mut c_void,
            null_mut(),
        )
    };
    assert_eq!(rc, CL_INVALID_VALUE);
    for x in [k, c, bk] {
        release_kernel(x);
    }
    release_program(p);
    release_program(bp);
}

/// Reads the image + sampler + local-memory kernel's output on `env`.
fn neighbours(env: &Env, clone_it: bool) -> Vec<f32> {
    const N: usize = 16;
    let p = env.program(SRC);
    let k = env.kernel(p, "neighbours");
    let mut fmt = cl_image_format {
        image_channel_order: CL_R,
        image_channel_data_type: CL_FLOAT,
    };
    let mut pixels: Vec<f32> = (0..N).map(|i| i as f32 + 0.5).collect();
    let mut err = 0;
    // SAFETY: a 16x1 float image copied from `pixels`.
    #[allow(deprecated)]
    let img = unsafe {
        clCreateImage2D(
            env.context,
            CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
            &mut fmt,
            N,
            1,
            0,
            pixels.as_mut_ptr() as *mut c_void,
            &mut err,
        )
    };
    ok(err);
    // SAFETY: a plain sampler.
    #[allow(deprecated)]
    let s = unsafe {
        clCreateSampler(
            env.context,
            CL_FALSE,
            CL_ADDRESS_CLAMP_TO_EDGE,
            CL_FILTER_NEAREST,
            &mut err,
        )
    };
    ok(err);
    let out = env.buffer(N * 4);
    ok(set_arg(k, 0, &img));
    ok(set_arg(k, 1, &s));
    // SAFETY: a __local argument: a size and a NULL value.
    ok(unsafe { clSetKernelArg(k, 2, 4 * 4, null()) });
    ok(set_arg(k, 3, &out));
    let k = if clone_it {
        // The clone carries the arguments; the original goes away first.
        let mut err = 0;
        // SAFETY: cloning a kernel with all arguments set.
        let c = unsafe { clCloneKernel(k, &mut err) };
        ok(err);
        release_kernel(k);
        c
    } else {
        k
    };
    run(env, k, N, Some(4));
    let v = env.read::<f32>(out, N);
    release_kernel(k);
    // SAFETY: objects the test owns.
    unsafe {
        ok(clReleaseSampler(s));
    }
    release_mem(img);
    release_mem(out);
    release_program(p);
    v
}

#[test]
fn buffer_image_sampler_and_local_args_compute() {
    let expect: Vec<f32> = (0..16)
        .map(|i| 2.0 * ((i / 4) * 4 + (i % 4 + 1) % 4) as f32 + 1.0)
        .collect();
    let sp = neighbours(&Env::sp(), false);
    assert_eq!(sp, expect);
    assert_eq!(sp, neighbours(&Env::new(bare_platform()), false));
}

#[test]
fn cloned_kernel_keeps_the_arguments() {
    let expect: Vec<f32> = (0..16)
        .map(|i| 2.0 * ((i / 4) * 4 + (i % 4 + 1) % 4) as f32 + 1.0)
        .collect();
    assert_eq!(neighbours(&Env::sp(), true), expect);
}

#[test]
fn arguments_may_change_after_set() {
    let env = Env::sp();
    let p = env.program(SRC);
    let k = env.kernel(p, "scale");
    let (a, b) = (env.buffer(16), env.buffer(16));
    ok(set_arg(k, 0, &a));
    ok(set_arg(k, 1, &2i32));
    run(&env, k, 4, None);
    ok(set_arg(k, 0, &b));
    ok(set_arg(k, 1, &3i32));
    run(&env, k, 4, None);
    assert_eq!(env.read::<i32>(a, 4), vec![0, 2, 4, 6]);
    assert_eq!(env.read::<i32>(b, 4), vec![0, 3, 6, 9]);
    // A NULL buffer is allowed for a global pointer ("point to a NULL value").
    let m = env.kernel(p, "maybe");
    env.write(a, &[5i32, 6, 7, 8]);
    ok(set_arg(m, 0, &b));
    ok(set_arg(m, 1, &a));
    run(&env, m, 4, None);
    assert_eq!(env.read::<i32>(b, 4), vec![105, 106, 107, 108]);
    ok(set_arg(m, 1, &(null_mut() as cl_mem)));
    run(&env, m, 4, None);
    assert_eq!(env.read::<i32>(b, 4), vec![-1; 4]);
    ok(set_arg(m, 1, &a));
    // SAFETY: a NULL arg_value for a buffer argument.
    ok(unsafe { clSetKernelArg(m, 1, std::mem::size_of::<cl_mem>(), null()) });
    run(&env, m, 4, None);
    assert_eq!(env.read::<i32>(b, 4), vec![-1; 4]);
    for x in [k, m] {
        release_kernel(x);
    }
    release_mem(a);
    release_mem(b);
    release_program(p);
}

#[test]
fn bad_arguments_match_bare() {
    let codes = |env: &Env| {
        let p = env.program(SRC);
        let k = env.kernel(p, "scale");
        let sh = env.kernel(p, "neighbours");
        let buf = env.buffer(16);
        let out = vec![
            // Index past the last argument.
            set_arg(k, 9, &buf),
            set_arg(k, 2, &7i32),
            // A buffer of the wrong size; a scalar of the wrong size.
            set_arg(k, 0, &0u32),
            set_arg(k, 1, &0u64),
            // A __local argument with size 0 / with a value.
            // SAFETY: size 0, NULL value.
            unsafe { clSetKernelArg(sh, 2, 0, null()) },
            set_arg(sh, 2, &1u32),
            // A scalar with a NULL value.
            // SAFETY: NULL value on purpose.
            unsafe { clSetKernelArg(k, 1, 4, null()) },
            // A NULL sampler.
            set_arg(sh, 1, &(null_mut() as cl_sampler)),
            // A buffer where an image is expected.
            set_arg(sh, 0, &buf),
            // SAFETY: enqueue with an argument unset.
            unsafe {
                let g = 4usize;
                clEnqueueNDRangeKernel(
                    env.queue,
                    env.kernel(p, "maybe"),
                    1,
                    null(),
                    &g,
                    null(),
                    0,
                    null(),
                    null_mut(),
                )
            },
        ];
        release_kernel(k);
        release_kernel(sh);
        release_mem(buf);
        release_program(p);
        out
    };
    let sp = codes(&Env::sp());
    assert_eq!(sp[0], CL_INVALID_ARG_INDEX);
    assert_eq!(sp[2], CL_INVALID_ARG_SIZE);
    assert_eq!(sp, codes(&Env::new(bare_platform())));
}

/// Values that are not our handles where a handle is expected never reach the vendor.
#[test]
fn foreign_handle_arguments_are_rejected() {
    let env = Env::sp();
    let bare = Env::new(bare_platform());
    let p = env.program(SRC);
    let k = env.kernel(p, "neighbours");
    let bare_buf = bare.buffer(16);
    let mut stack = [0usize; 8];
    let sp_buf = env.buffer(16);
    for (v, what) in [
        (stack.as_mut_ptr() as *mut c_void, "stack address"),
        (bare_buf, "bare PoCL buffer"),
        (env.context, "context"),
    ] {
        assert_eq!(
            set_arg(k, 3, &v),
            CL_INVALID_MEM_OBJECT,
            "{what} as a buffer"
        );
        assert_eq!(
            set_arg(k, 0, &v),
            CL_INVALID_MEM_OBJECT,
            "{what} as an image"
        );
        assert_eq!(set_arg(k, 1, &v), CL_INVALID_SAMPLER, "{what} as a sampler");
    }
    assert_eq!(
        set_arg(k, 1, &sp_buf),
        CL_INVALID_SAMPLER,
        "a buffer as a sampler"
    );
    let gone = env.buffer(16);
    release_mem(gone);
    assert_eq!(
        set_arg(k, 3, &gone),
        CL_INVALID_MEM_OBJECT,
        "released buffer"
    );
    release_kernel(k);
    release_mem(bare_buf);
    release_mem(sp_buf);
    release_program(p);
}

#[test]
fn svm_pointer_and_exec_info_match_bare() {
    let go = |env: &Env| {
        let caps: cl_device_svm_capabilities = info_scalar(|s, v, r| unsafe {
            clGetDeviceInfo(env.device, CL_DEVICE_SVM_CAPABILITIES, s, v, r)
        });
        let p = env.program(SRC);
        let k = env.kernel(p, "scale");
        // SAFETY: a 64-byte SVM allocation, freed below.
        let svm = unsafe { clSVMAlloc(env.context, CL_MEM_READ_WRITE, 64, 0) };
        let mut out = Vec::new();
        if !svm.is_null() {
            // SAFETY: an SVM pointer of this context.
            out.push(unsafe { clSetKernelArgSVMPointer(k, 0, svm) });
            ok(set_arg(k, 1, &4i32));
            let ptrs = [svm];
            // SAFETY: an array of one SVM pointer.
            out.push(unsafe {
                clSetKernelExecInfo(
                    k,
                    CL_KERNEL_EXEC_INFO_SVM_PTRS,
                    8,
                    ptrs.as_ptr() as *const c_void,
                )
            });
            run(env, k, 4, None);
            // SAFETY: map, read and unmap the coarse-grained allocation.
            unsafe {
                ok(clEnqueueSVMMap(
                    env.queue,
                    CL_TRUE,
                    CL_MAP_READ,
                    svm,
                    16,
                    0,
                    null(),
                    null_mut(),
                ));
                out.extend(std::slice::from_raw_parts(svm as *const i32, 4));
                ok(clEnqueueSVMUnmap(env.queue, svm, 0, null(), null_mut()));
                ok(clFinish(env.queue));
                clSVMFree(env.context, svm);
            }
        }
        let flag: cl_bool = CL_FALSE;
        // SAFETY: a boolean exec-info value; then an unknown name.
        unsafe {
            out.push(clSetKernelExecInfo(
                k,
                CL_KERNEL_EXEC_INFO_SVM_FINE_GRAIN_SYSTEM,
                4,
                &flag as *const cl_bool as *const c_void,
            ));
            out.push(clSetKernelExecInfo(
                k,
                0x7777,
                4,
                &flag as *const cl_bool as *const c_void,
            ));
            out.push(clSetKernelArgSVMPointer(k, 9, null()));
        }
        release_kernel(k);
        release_program(p);
        (caps, out)
    };
    let sp = go(&Env::sp());
    assert_eq!(sp, go(&Env::new(bare_platform())));
    if sp.0 != 0 {
        assert_eq!(&sp.1[2..6], &[0, 4, 8, 12]);
    }
}

/// Our dispatch table, read from one of our handles as the loader reads it.
fn table(h: *mut c_void) -> &'static cl_icd_dispatch {
    // SAFETY: `h` is one of our live handles; the ICD ABI puts the table pointer first.
    unsafe { &**(h as *const *const cl_icd_dispatch) }
}

/// What an empty `clGetKernelSubGroupInfoKHR` slot means: not supported.
unsafe extern "C" fn sub_group_unsupported(
    _: cl_kernel,
    _: cl_device_id,
    _: cl_kernel_sub_group_info,
    _: usize,
    _: *const c_void,
    _: usize,
    _: *mut c_void,
    _: *mut usize,
) -> cl_int {
    CL_INVALID_OPERATION
}

/// The sub-group queries and the suggested local size: reached through our table (PoCL
/// does not advertise the extensions), compared with the bare vendor's own answers.
#[test]
fn sub_group_and_suggested_local_size_match_bare() {
    let go = |env: &Env, ours: bool| {
        let p = env.program(SRC);
        let k = env.kernel(p, "scale");
        // Ours for the layer, PoCL's own table for the bare context.
        let t = table(env.context);
        let local = 4usize;
        let mut v = 0usize;
        let mut out = Vec::new();
        let vp = &mut v as *mut usize as *mut c_void;
        let lp = &local as *const usize as *const c_void;
        // SAFETY: valid kernel/device, a one-dimension local size in, a size_t out.
        unsafe {
            out.push(clGetKernelSubGroupInfo(
                k,
                env.device,
                CL_KERNEL_MAX_SUB_GROUP_SIZE_FOR_NDRANGE,
                8,
                lp,
                8,
                vp,
                null_mut(),
            ));
            out.push(clGetKernelSubGroupInfo(
                k,
                null_mut(),
                CL_KERNEL_MAX_SUB_GROUP_SIZE_FOR_NDRANGE,
                8,
                lp,
                8,
                vp,
                null_mut(),
            ));
            // An empty vendor slot means "not supported": CL_INVALID_OPERATION, as the layer says.
            #[allow(non_snake_case)]
            let clGetKernelSubGroupInfoKHR = t
                .clGetKernelSubGroupInfoKHR
                .unwrap_or(sub_group_unsupported);
            out.push(clGetKernelSubGroupInfoKHR(
                k,
                env.device,
                CL_KERNEL_MAX_SUB_GROUP_SIZE_FOR_NDRANGE,
                8,
                lp,
                8,
                vp,
                null_mut(),
            ));
        }
        let g = 64usize;
        let mut suggested = 0usize;
        let code = if ours {
            // SAFETY: our table's slot (a 3.1 entry): valid queue, kernel and sizes.
            #[allow(non_snake_case)]
            let clGetKernelSuggestedLocalWorkSize = t.clGetKernelSuggestedLocalWorkSize.unwrap();
            // SAFETY: as above.
            unsafe {
                clGetKernelSuggestedLocalWorkSize(env.queue, k, 1, null(), &g, &mut suggested)
            }
        } else {
            let name = CString::new("clGetKernelSuggestedLocalWorkSizeKHR").unwrap();
            // SAFETY: the vendor's lookup by name.
            let f =
                unsafe { clGetExtensionFunctionAddressForPlatform(env.platform, name.as_ptr()) };
            if f.is_null() {
                CL_INVALID_OPERATION
            } else {
                type F = unsafe extern "C" fn(
                    cl_command_queue,
                    cl_kernel,
                    cl_uint,
                    *const usize,
                    *const usize,
                    *mut usize,
                ) -> cl_int;
                // SAFETY: the extension's signature.
                unsafe {
                    std::mem::transmute::<*mut c_void, F>(f)(
                        env.queue,
                        k,
                        1,
                        null(),
                        &g,
                        &mut suggested,
                    )
                }
            }
        };
        out.push(code);
        release_kernel(k);
        release_program(p);
        (out, suggested)
    };
    let sp = go(&Env::sp(), true);
    let bare = go(&Env::new(bare_platform()), false);
    assert_eq!(sp, bare);
}

#[test]
fn bad_queue_for_suggested_local_size() {
    let env = Env::sp();
    let p = env.program(SRC);
    let k = env.kernel(p, "scale");
    let t = table(env.context);
    let g = 64usize;
    let mut out = 0usize;
    let f = t.clGetKernelSuggestedLocalWorkSize.unwrap();
    // SAFETY: bad handles through our table on purpose.
    unsafe {
        assert_eq!(
            f(env.context as cl_command_queue, k, 1, null(), &g, &mut out),
            CL_INVALID_COMMAND_QUEUE
        );
        assert_eq!(
            f(env.queue, env.context as cl_kernel, 1, null(), &g, &mut out),
            CL_INVALID_KERNEL
        );
    }
    release_kernel(k);
    release_program(p);
}

/// NULL, a stack address, a bare-PoCL kernel, a released kernel and a program passed as a
/// kernel all get CL_INVALID_KERNEL from every entry point taking one.
#[test]
fn invalid_kernel_handles() {
    let env = Env::sp();
    let bare = Env::new(bare_platform());
    let bp = bare.program(SRC);
    let bare_k = bare.kernel(bp, "scale");
    let p = env.program(SRC);
    let t = table(env.context);
    let mut stack = [0usize; 16];
    let check = |k: cl_kernel, what: &str| {
        let mut o = [0u8; 64];
        let o = o.as_mut_ptr() as *mut c_void;
        let v = 0i32;
        let vp = &v as *const i32 as *const c_void;
        let mut err = 0;
        // SAFETY: every call goes through our table; the layer must reject `k` unread.
        unsafe {
            let codes = [
                t.clRetainKernel.unwrap()(k),
                t.clReleaseKernel.unwrap()(k),
                t.clSetKernelArg.unwrap()(k, 1, 4, vp),
                t.clSetKernelArgSVMPointer.unwrap()(k, 0, null()),
                t.clSetKernelExecInfo.unwrap()(k, CL_KERNEL_EXEC_INFO_SVM_FINE_GRAIN_SYSTEM, 4, vp),
                t.clGetKernelInfo.unwrap()(k, CL_KERNEL_PROGRAM, 64, o, null_mut()),
                t.clGetKernelWorkGroupInfo.unwrap()(
                    k,
                    null_mut(),
                    CL_KERNEL_WORK_GROUP_SIZE,
                    64,
                    o,
                    null_mut(),
                ),
                t.clGetKernelArgInfo.unwrap()(k, 0, CL_KERNEL_ARG_NAME, 64, o, null_mut()),
                t.clGetKernelSubGroupInfo.unwrap()(
                    k,
                    null_mut(),
                    CL_KERNEL_MAX_SUB_GROUP_SIZE_FOR_NDRANGE,
                    0,
                    null(),
                    64,
                    o,
                    null_mut(),
                ),
                t.clGetKernelSubGroupInfoKHR.unwrap()(
                    k,
                    null_mut(),
                    CL_KERNEL_MAX_SUB_GROUP_SIZE_FOR_NDRANGE,
                    0,
                    null(),
                    64,
                    o,
                    null_mut(),
                ),
            ];
            assert_eq!(codes, [CL_INVALID_KERNEL; 10], "{what}");
            assert!(t.clCloneKernel.unwrap()(k, &mut err).is_null());
            assert_eq!(err, CL_INVALID_KERNEL, "{what}");
        }
    };
    check(null_mut(), "NULL");
    check(stack.as_mut_ptr() as cl_kernel, "stack address");
    check(bare_k, "bare PoCL kernel");
    check(p as cl_kernel, "program as cl_kernel");
    let gone = env.kernel(p, "scale");
    release_kernel(gone);
    check(gone, "released kernel");
    // SAFETY: a released handle on purpose; the wrapper still routes to us.
    assert_eq!(unsafe { clRetainKernel(gone) }, CL_INVALID_KERNEL);
    // A bad device for the device queries.
    let k = env.kernel(p, "scale");
    let mut o = [0u8; 64];
    // SAFETY: a bad device handle on purpose.
    let rc = unsafe {
        t.clGetKernelWorkGroupInfo.unwrap()(
            k,
            stack.as_mut_ptr() as cl_device_id,
            CL_KERNEL_WORK_GROUP_SIZE,
            64,
            o.as_mut_ptr() as *mut c_void,
            null_mut(),
        )
    };
    assert_eq!(rc, CL_INVALID_DEVICE);
    release_kernel(k);
    release_kernel(bare_k);
    release_program(p);
    release_program(bp);
}

#[test]
fn reference_counts_match_bare() {
    let go = |env: &Env| {
        let p = env.program(SRC);
        let k = env.kernel(p, "scale");
        let rc = |k| -> cl_uint { kernel_handle(k, CL_KERNEL_REFERENCE_COUNT) };
        let mut seq = vec![rc(k)];
        // SAFETY: retaining a live kernel.
        ok(unsafe { clRetainKernel(k) });
        seq.push(rc(k));
        let buf = env.buffer(16);
        let mem_rc = || -> cl_uint {
            info_scalar(|s, v, r| unsafe {
                clGetMemObjectInfo(buf, CL_MEM_REFERENCE_COUNT, s, v, r)
            })
        };
        seq.push(mem_rc());
        ok(set_arg(k, 0, &buf));
        seq.push(mem_rc());
        let mut err = 0;
        // SAFETY: cloning a live kernel.
        let c = unsafe { clCloneKernel(k, &mut err) };
        ok(err);
        seq.push(rc(c));
        seq.push(mem_rc());
        release_kernel(k);
        seq.push(rc(k));
        release_kernel(k);
        release_kernel(c);
        release_mem(buf);
        release_program(p);
        seq
    };
    let sp = go(&Env::sp());
    assert_eq!(sp[..2], [1, 2]);
    assert_eq!(sp, go(&Env::new(bare_platform())));
}

/// Kernel objects made for one launch and released after it, as OpenCV makes them: the
/// layer keeps the released object's vendor kernel and gives it to the next object of the
/// same name (`core::kernel_pool`). The new object must look new: no argument set (the
/// vendor kernel still holds the old ones), one reference, the same metadata.
#[test]
fn a_kernel_made_again_has_no_arguments_and_one_reference() {
    let go = |env: &Env| {
        let p = env.program(SRC);
        let (a, b) = (env.buffer(16), env.buffer(16));
        let k = env.kernel(p, "scale");
        ok(set_arg(k, 0, &a));
        ok(set_arg(k, 1, &2i32));
        run(env, k, 4, None);
        release_kernel(k);
        let mut seen = Vec::new();
        for round in 0..3 {
            let k = env.kernel(p, "scale");
            let rc: cl_uint = kernel_handle(k, CL_KERNEL_REFERENCE_COUNT);
            let args: cl_uint = kernel_handle(k, CL_KERNEL_NUM_ARGS);
            seen.push((rc, args));
            let g = 4usize;
            let launch = || {
                // SAFETY: a valid queue and kernel; one dimension.
                unsafe {
                    clEnqueueNDRangeKernel(
                        env.queue,
                        k,
                        1,
                        null(),
                        &g,
                        null(),
                        0,
                        null(),
                        null_mut(),
                    )
                }
            };
            assert_eq!(launch(), CL_INVALID_KERNEL_ARGS, "round {round}: none set");
            ok(set_arg(k, 1, &(3i32 + round)));
            assert_eq!(launch(), CL_INVALID_KERNEL_ARGS, "round {round}: one unset");
            // SAFETY: a valid queue and kernel.
            #[allow(deprecated)]
            let task = unsafe { clEnqueueTask(env.queue, k, 0, null(), null_mut()) };
            assert_eq!(task, CL_INVALID_KERNEL_ARGS, "round {round}: task");
            ok(set_arg(k, 0, &b));
            run(env, k, 4, None);
            seen.push((env.read::<i32>(b, 4).iter().sum::<i32>() as cl_uint, 0));
            // A clone of it has its arguments; a second reference is counted.
            let mut err = 0;
            // SAFETY: cloning a live kernel.
            let c = unsafe { clCloneKernel(k, &mut err) };
            ok(err);
            // SAFETY: retaining a live kernel.
            ok(unsafe { clRetainKernel(k) });
            seen.push((kernel_handle(k, CL_KERNEL_REFERENCE_COUNT), 0));
            release_kernel(k);
            release_kernel(k);
            env.write(b, &[0i32; 4]);
            run(env, c, 4, None);
            seen.push((env.read::<i32>(b, 4).iter().sum::<i32>() as cl_uint, 1));
            release_kernel(c);
        }
        assert_eq!(
            env.read::<i32>(a, 4),
            vec![0, 2, 4, 6],
            "the first launch's"
        );
        release_mem(a);
        release_mem(b);
        release_program(p);
        seen
    };
    let sp = go(&Env::sp());
    assert_eq!(sp[0], (1, 2));
    assert_eq!(sp[1], (18, 0), "0+3+6+9");
    assert_eq!(sp, go(&Env::new(bare_platform())));
}

/// A released kernel object's vendor kernel serves the next object while the first
/// object's launch still waits (behind a user event): the vendor took the arguments at
/// enqueue, so both launches compute with their own.
#[test]
fn a_kernel_made_again_while_the_last_launch_waits() {
    let env = Env::sp();
    let p = env.program(SRC);
    let bufs: Vec<cl_mem> = (0..4).map(|_| env.buffer(16)).collect();
    let mut err = 0;
    // SAFETY: a valid context.
    let gate = unsafe { clCreateUserEvent(env.context, &mut err) };
    ok(err);
    for (i, &b) in bufs.iter().enumerate() {
        let k = env.kernel(p, "scale");
        ok(set_arg(k, 0, &b));
        ok(set_arg(k, 1, &(i as i32 + 2)));
        let g = 4usize;
        // SAFETY: a kernel with its arguments set, waiting for the user event.
        ok(unsafe {
            clEnqueueNDRangeKernel(env.queue, k, 1, null(), &g, null(), 1, &gate, null_mut())
        });
        release_kernel(k);
    }
    // SAFETY: our user event, completed once.
    ok(unsafe { clSetUserEventStatus(gate, CL_COMPLETE as cl_int) });
    // SAFETY: a valid queue.
    ok(unsafe { clFinish(env.queue) });
    for (i, &b) in bufs.iter().enumerate() {
        let f = i as i32 + 2;
        assert_eq!(
            env.read::<i32>(b, 4),
            vec![0, f, 2 * f, 3 * f],
            "launch {i}"
        );
        release_mem(b);
    }
    // SAFETY: our user event.
    ok(unsafe { clReleaseEvent(gate) });
    release_program(p);
}

/// Spare vendor kernels stay attached to the vendor program: a build after the kernel
/// objects were released must succeed, for a plain program and for one the layer
/// rewrote (which reads `get_group_id`), and the kernels made after it run the new build.
#[test]
fn a_program_builds_again_after_its_kernels_were_released() {
    let env = Env::sp();
    let srcs = [
        "__kernel void put(__global int *o) { o[get_global_id(0)] = 1; }",
        "__kernel void put(__global int *o) { o[get_global_id(0)] = (int)get_group_id(0) + 1; }",
    ];
    for src in srcs {
        let p = env.program(src);
        let b = env.buffer(16);
        for _ in 0..2 {
            for _ in 0..3 {
                let k = env.kernel(p, "put");
                ok(set_arg(k, 0, &b));
                run(&env, k, 4, Some(1));
                release_kernel(k);
            }
            // SAFETY: a program with no kernel objects left, built again for its device.
            let rc = unsafe { clBuildProgram(p, 1, &env.device, null(), None, null_mut()) };
            assert_eq!(rc, CL_SUCCESS, "{src}");
        }
        assert_eq!(
            env.read::<i32>(b, 4)[3],
            if src.contains("group") { 4 } else { 1 }
        );
        // A live kernel object still blocks a build, as on the bare driver.
        let k = env.kernel(p, "put");
        // SAFETY: as above, with a kernel object attached.
        let rc = unsafe { clBuildProgram(p, 1, &env.device, null(), None, null_mut()) };
        assert_eq!(rc, CL_INVALID_OPERATION, "{src}");
        release_kernel(k);
        release_mem(b);
        release_program(p);
    }
}

/// OpenCV releases its kernel objects on the vendor's callback thread while its main
/// thread makes new ones: one thread makes, sets and launches, another releases.
#[test]
fn kernels_made_and_released_on_two_threads() {
    const LAUNCHES: usize = 300;
    let env = Env::sp();
    let p = env.program("__kernel void add(__global int *o, int f) { o[get_global_id(0)] += f; }");
    let b = env.buffer(16);
    env.write(b, &[0i32; 4]);
    let (tx, rx) = std::sync::mpsc::channel::<usize>();
    let releaser = std::thread::spawn(move || {
        for k in rx {
            release_kernel(k as cl_kernel);
        }
    });
    for i in 0..LAUNCHES {
        let k = env.kernel(p, "add");
        let rc: cl_uint = kernel_handle(k, CL_KERNEL_REFERENCE_COUNT);
        assert_eq!(rc, 1, "launch {i}");
        ok(set_arg(k, 0, &b));
        ok(set_arg(k, 1, &1i32));
        let g = 4usize;
        // SAFETY: a kernel with its arguments set.
        ok(unsafe {
            clEnqueueNDRangeKernel(env.queue, k, 1, null(), &g, null(), 0, null(), null_mut())
        });
        tx.send(k as usize).unwrap();
    }
    drop(tx);
    releaser.join().unwrap();
    // SAFETY: a valid queue.
    ok(unsafe { clFinish(env.queue) });
    assert_eq!(env.read::<i32>(b, 4), vec![LAUNCHES as i32; 4]);
    release_mem(b);
    release_program(p);
}
