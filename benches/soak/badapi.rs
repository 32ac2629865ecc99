//! Scenario 4, bad API input: entry points called with null, garbage, released and
//! wrong-kind handles, null pointers with sizes, huge sizes, invalid enums and bogus wait
//! lists, once on the bare vendor platform and once through SoftPreempt, each call in a
//! forked child (a crash or a hang is recorded, not fatal). The parent compares the codes.
//!
//! A "fake" handle is memory whose first word is the platform's real dispatch table (so
//! the ICD loader forwards it to that platform's driver) followed by garbage: the driver
//! must recognise it is not one of its objects. A "junk" handle has garbage even in its
//! first word; the loader itself jumps through it before any driver is reached.

use crate::common;
use crate::procs::say;
use crate::worker;
use opencl_sys::*;
use std::ffi::{c_void, CString};
use std::ptr::{null, null_mut};

/// The objects a case may use.
pub struct Objs {
    pub platform: cl_platform_id,
    pub device: cl_device_id,
    pub context: cl_context,
    pub queue: cl_command_queue,
    pub buffer: cl_mem,
    pub program: cl_program,
    pub kernel: cl_kernel,
    pub user_event: cl_event,
    pub done_event: cl_event,
    /// Released handles (dangling once released, as an application's stale copy is).
    pub released_buffer: cl_mem,
    pub released_kernel: cl_kernel,
    pub released_event: cl_event,
    pub released_queue: cl_command_queue,
    /// Dispatch table + garbage.
    pub fake: *mut c_void,
    /// Garbage from the first word on.
    pub junk: *mut c_void,
}

type Case = (&'static str, Box<dyn Fn(&Objs) -> cl_int>);

fn err_of<T>(f: impl FnOnce(*mut cl_int) -> T) -> cl_int {
    let mut e: cl_int = 12345;
    let _ = f(&mut e);
    e
}

const KERNEL_SRC: &str = "__kernel void k(__global uint* a, uint b) { a[get_global_id(0)] = b; }";

fn setup(sp: bool) -> Objs {
    let env = worker::env(sp);
    let (ctx, dev, q) = (env.context, env.device, env.queue);
    std::mem::forget(env);
    let mut e = 0;
    // SAFETY (whole block): ordinary valid calls building the objects the cases use; every
    // out pointer is a live local.
    unsafe {
        let buffer = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4096, null_mut(), &mut e);
        let src = CString::new(KERNEL_SRC).unwrap();
        let p = src.as_ptr();
        let program = clCreateProgramWithSource(ctx, 1, &p, null(), &mut e);
        clBuildProgram(program, 1, &dev, null(), None, null_mut());
        let name = CString::new("k").unwrap();
        let kernel = clCreateKernel(program, name.as_ptr(), &mut e);
        let user_event = clCreateUserEvent(ctx, &mut e);
        let mut done_event = null_mut();
        clEnqueueMarkerWithWaitList(q, 0, null(), &mut done_event);
        clFinish(q);
        let released_buffer = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64, null_mut(), &mut e);
        clReleaseMemObject(released_buffer);
        let released_kernel = clCreateKernel(program, name.as_ptr(), &mut e);
        clReleaseKernel(released_kernel);
        let released_event = clCreateUserEvent(ctx, &mut e);
        clSetUserEventStatus(released_event, CL_COMPLETE);
        clReleaseEvent(released_event);
        let released_queue = clCreateCommandQueueWithProperties(ctx, dev, null(), &mut e);
        clReleaseCommandQueue(released_queue);
        // The dispatch table is the first word of every ICD object.
        let dispatch = *(ctx as *const *mut c_void);
        let fake: &'static mut [*mut c_void; 8] =
            Box::leak(Box::new([0x5a5a_5a5a_5a5a_5a5ausize as *mut c_void; 8]));
        fake[0] = dispatch;
        let junk: &'static mut [u64; 8] = Box::leak(Box::new([0x4141_4141_4141_4141; 8]));
        Objs {
            platform: env_platform(sp),
            device: dev,
            context: ctx,
            queue: q,
            buffer,
            program,
            kernel,
            user_event,
            done_event,
            released_buffer,
            released_kernel,
            released_event,
            released_queue,
            fake: fake.as_mut_ptr() as *mut c_void,
            junk: junk.as_mut_ptr() as *mut c_void,
        }
    }
}

fn env_platform(sp: bool) -> cl_platform_id {
    worker::platform(sp)
}

fn read(o: &Objs, q: cl_command_queue, m: cl_mem, size: usize, ptr: *mut c_void) -> cl_int {
    read_waits(o, q, m, size, ptr, 0, null())
}

fn read_waits(
    _o: &Objs,
    q: cl_command_queue,
    m: cl_mem,
    size: usize,
    ptr: *mut c_void,
    n: cl_uint,
    waits: *const cl_event,
) -> cl_int {
    // SAFETY: deliberately bad input; the callee must check it.
    unsafe { clEnqueueReadBuffer(q, m, CL_TRUE, 0, size, ptr, n, waits, null_mut()) }
}

fn ndrange(
    q: cl_command_queue,
    k: cl_kernel,
    dim: cl_uint,
    g: *const usize,
    l: *const usize,
) -> cl_int {
    // SAFETY: deliberately bad input; the callee must check it.
    unsafe { clEnqueueNDRangeKernel(q, k, dim, null(), g, l, 0, null(), null_mut()) }
}

static mut HOST: [u8; 4096] = [0; 4096];

fn host() -> *mut c_void {
    // Only the address is taken (no reference); each forked child owns its copy.
    std::ptr::addr_of_mut!(HOST) as *mut c_void
}

extern "C" fn callback(_: cl_event, _: cl_int, _: *mut c_void) {}

/// Every case: a name (no spaces) and the call. Each returns the status or errcode_ret.
#[allow(clippy::type_complexity)]
fn cases() -> Vec<Case> {
    macro_rules! case {
        ($name:literal, |$o:ident| $body:expr) => {
            (
                $name,
                Box::new(move |$o: &Objs| -> cl_int {
                    // SAFETY: deliberately bad input in a forked child; a crash is the result.
                    #[allow(unused_unsafe)]
                    unsafe {
                        $body
                    }
                }) as Box<dyn Fn(&Objs) -> cl_int>,
            )
        };
    }
    let big = usize::MAX / 2;
    let mut v: Vec<Case> = vec![
        case!("platform-info-bad-enum", |o| clGetPlatformInfo(
            o.platform,
            0x7fff,
            0,
            null_mut(),
            null_mut()
        )),
        case!("device-ids-bad-type", |o| clGetDeviceIDs(
            o.platform,
            0,
            1,
            &mut null_mut(),
            null_mut()
        )),
        case!("device-ids-zero-null", |o| clGetDeviceIDs(
            o.platform,
            CL_DEVICE_TYPE_ALL,
            0,
            null_mut(),
            null_mut()
        )),
        case!("device-info-bad-enum", |o| clGetDeviceInfo(
            o.device,
            0x7fff,
            0,
            null_mut(),
            null_mut()
        )),
        case!("device-info-small-size", |o| clGetDeviceInfo(
            o.device,
            CL_DEVICE_NAME,
            1,
            host(),
            null_mut()
        )),
        case!("device-info-null-with-size", |o| clGetDeviceInfo(
            o.device,
            CL_DEVICE_NAME,
            64,
            null_mut(),
            null_mut()
        )),
        case!("device-info-fake", |o| clGetDeviceInfo(
            o.fake as _,
            CL_DEVICE_NAME,
            0,
            null_mut(),
            null_mut()
        )),
        case!("device-info-wrong-kind", |o| clGetDeviceInfo(
            o.context as _,
            CL_DEVICE_NAME,
            0,
            null_mut(),
            null_mut()
        )),
        case!("context-no-devices", |_o| err_of(|e| clCreateContext(
            null(),
            0,
            null(),
            None,
            null_mut(),
            e
        ))),
        case!("context-null-device", |_o| {
            let d: cl_device_id = null_mut();
            err_of(|e| clCreateContext(null(), 1, &d, None, null_mut(), e))
        }),
        case!("context-fake-device", |o| {
            let d = o.fake as cl_device_id;
            let p = [CL_CONTEXT_PLATFORM, o.platform as isize, 0];
            err_of(|e| clCreateContext(p.as_ptr(), 1, &d, None, null_mut(), e))
        }),
        case!("context-bad-property", |o| {
            let p = [0x7777isize, 1, 0];
            err_of(|e| clCreateContext(p.as_ptr(), 1, &o.device, None, null_mut(), e))
        }),
        case!("context-from-bad-type", |o| {
            let p = [CL_CONTEXT_PLATFORM, o.platform as isize, 0];
            err_of(|e| clCreateContextFromType(p.as_ptr(), 0, None, null_mut(), e))
        }),
        case!("context-info-wrong-kind", |o| clGetContextInfo(
            o.queue as _,
            CL_CONTEXT_NUM_DEVICES,
            0,
            null_mut(),
            null_mut()
        )),
        case!("context-info-fake", |o| clGetContextInfo(
            o.fake as _,
            CL_CONTEXT_NUM_DEVICES,
            0,
            null_mut(),
            null_mut()
        )),
        case!("queue-bad-property", |o| {
            let p = [0x7777u64, 1, 0];
            err_of(|e| clCreateCommandQueueWithProperties(o.context, o.device, p.as_ptr(), e))
        }),
        case!("queue-bad-properties-bits", |o| {
            let p = [CL_QUEUE_PROPERTIES as u64, 0xff00, 0];
            err_of(|e| clCreateCommandQueueWithProperties(o.context, o.device, p.as_ptr(), e))
        }),
        case!("queue-fake-device", |o| err_of(|e| {
            clCreateCommandQueueWithProperties(o.context, o.fake as _, null(), e)
        })),
        case!("queue-null-context", |o| err_of(|e| {
            clCreateCommandQueueWithProperties(null_mut(), o.device, null(), e)
        })),
        case!("finish-released-queue", |o| clFinish(o.released_queue)),
        case!("finish-wrong-kind", |o| clFinish(o.buffer as _)),
        case!("finish-fake", |o| clFinish(o.fake as _)),
        case!("finish-null", |_o| clFinish(null_mut())),
        case!("flush-fake", |o| clFlush(o.fake as _)),
        case!("buffer-size-zero", |o| err_of(|e| clCreateBuffer(
            o.context,
            CL_MEM_READ_WRITE,
            0,
            null_mut(),
            e
        ))),
        case!("buffer-size-huge", |o| err_of(|e| clCreateBuffer(
            o.context,
            CL_MEM_READ_WRITE,
            usize::MAX,
            null_mut(),
            e
        ))),
        case!("buffer-bad-flags", |o| err_of(|e| clCreateBuffer(
            o.context,
            0xffff_0000,
            64,
            null_mut(),
            e
        ))),
        case!("buffer-use-host-null", |o| err_of(|e| clCreateBuffer(
            o.context,
            CL_MEM_USE_HOST_PTR,
            64,
            null_mut(),
            e
        ))),
        case!("buffer-host-ptr-no-flag", |o| err_of(|e| clCreateBuffer(
            o.context,
            CL_MEM_READ_WRITE,
            64,
            host(),
            e
        ))),
        case!("buffer-fake-context", |o| err_of(|e| clCreateBuffer(
            o.fake as _,
            CL_MEM_READ_WRITE,
            64,
            null_mut(),
            e
        ))),
        case!("sub-buffer-bad-type", |o| {
            let r = cl_buffer_region {
                origin: 0,
                size: 64,
            };
            err_of(|e| {
                clCreateSubBuffer(o.buffer, CL_MEM_READ_WRITE, 0x9999, &r as *const _ as _, e)
            })
        }),
        case!("sub-buffer-out-of-range", |o| {
            let r = cl_buffer_region {
                origin: 4096,
                size: 64,
            };
            err_of(|e| {
                clCreateSubBuffer(
                    o.buffer,
                    CL_MEM_READ_WRITE,
                    CL_BUFFER_CREATE_TYPE_REGION,
                    &r as *const _ as _,
                    e,
                )
            })
        }),
        case!("sub-buffer-null-info", |o| err_of(|e| clCreateSubBuffer(
            o.buffer,
            CL_MEM_READ_WRITE,
            CL_BUFFER_CREATE_TYPE_REGION,
            null(),
            e
        ))),
        case!("mem-info-wrong-kind", |o| clGetMemObjectInfo(
            o.kernel as _,
            CL_MEM_SIZE,
            0,
            null_mut(),
            null_mut()
        )),
        case!("mem-info-fake", |o| clGetMemObjectInfo(
            o.fake as _,
            CL_MEM_SIZE,
            0,
            null_mut(),
            null_mut()
        )),
        case!("release-released-buffer", |o| clReleaseMemObject(
            o.released_buffer
        )),
        case!("read-null-ptr", |o| read(
            o,
            o.queue,
            o.buffer,
            64,
            null_mut()
        )),
        case!("read-huge-size", |o| read(
            o,
            o.queue,
            o.buffer,
            big,
            host()
        )),
        case!("read-released-buffer", |o| read(
            o,
            o.queue,
            o.released_buffer,
            64,
            host()
        )),
        case!("read-fake-buffer", |o| read(
            o,
            o.queue,
            o.fake as _,
            64,
            host()
        )),
        case!("read-wrong-kind-buffer", |o| read(
            o,
            o.queue,
            o.kernel as _,
            64,
            host()
        )),
        case!("read-null-queue", |o| read(
            o,
            null_mut(),
            o.buffer,
            64,
            host()
        )),
        case!("waits-count-null-list", |o| read_waits(
            o,
            o.queue,
            o.buffer,
            64,
            host(),
            2,
            null()
        )),
        case!("waits-list-zero-count", |o| read_waits(
            o,
            o.queue,
            o.buffer,
            64,
            host(),
            0,
            &o.done_event
        )),
        case!("waits-null-event", |o| {
            let w = [null_mut()];
            read_waits(o, o.queue, o.buffer, 64, host(), 1, w.as_ptr())
        }),
        case!("waits-fake-event", |o| {
            let w = [o.fake as cl_event];
            read_waits(o, o.queue, o.buffer, 64, host(), 1, w.as_ptr())
        }),
        case!("waits-wrong-kind", |o| {
            let w = [o.buffer as cl_event];
            read_waits(o, o.queue, o.buffer, 64, host(), 1, w.as_ptr())
        }),
        case!("waits-released-event", |o| {
            let w = [o.released_event];
            read_waits(o, o.queue, o.buffer, 64, host(), 1, w.as_ptr())
        }),
        case!("copy-overlap", |o| clEnqueueCopyBuffer(
            o.queue,
            o.buffer,
            o.buffer,
            0,
            32,
            64,
            0,
            null(),
            null_mut()
        )),
        case!("fill-null-pattern", |o| clEnqueueFillBuffer(
            o.queue,
            o.buffer,
            null(),
            4,
            0,
            64,
            0,
            null(),
            null_mut()
        )),
        case!("fill-pattern-size-3", |o| clEnqueueFillBuffer(
            o.queue,
            o.buffer,
            host(),
            3,
            0,
            63,
            0,
            null(),
            null_mut()
        )),
        case!("ndrange-dim-0", |o| ndrange(
            o.queue,
            o.kernel,
            0,
            [64usize].as_ptr(),
            null()
        )),
        case!("ndrange-dim-4", |o| ndrange(
            o.queue,
            o.kernel,
            4,
            [64usize; 4].as_ptr(),
            null()
        )),
        case!("ndrange-null-global", |o| ndrange(
            o.queue,
            o.kernel,
            1,
            null(),
            null()
        )),
        case!("ndrange-args-unset", |o| ndrange(
            o.queue,
            o.kernel,
            1,
            [64usize].as_ptr(),
            null()
        )),
        case!("ndrange-local-not-dividing", |o| {
            let m = o.buffer;
            clSetKernelArg(o.kernel, 0, 8, &m as *const _ as _);
            clSetKernelArg(o.kernel, 1, 4, host());
            ndrange(
                o.queue,
                o.kernel,
                1,
                [100usize].as_ptr(),
                [64usize].as_ptr(),
            )
        }),
        case!("ndrange-local-huge", |o| {
            let m = o.buffer;
            clSetKernelArg(o.kernel, 0, 8, &m as *const _ as _);
            clSetKernelArg(o.kernel, 1, 4, host());
            ndrange(
                o.queue,
                o.kernel,
                1,
                [1usize << 30].as_ptr(),
                [1usize << 30].as_ptr(),
            )
        }),
        case!("ndrange-released-kernel", |o| ndrange(
            o.queue,
            o.released_kernel,
            1,
            [64usize].as_ptr(),
            null()
        )),
        case!("ndrange-fake-kernel", |o| ndrange(
            o.queue,
            o.fake as _,
            1,
            [64usize].as_ptr(),
            null()
        )),
        case!("ndrange-wrong-kind-kernel", |o| ndrange(
            o.queue,
            o.program as _,
            1,
            [64usize].as_ptr(),
            null()
        )),
        case!("map-huge", |o| err_of(|e| clEnqueueMapBuffer(
            o.queue,
            o.buffer,
            CL_TRUE,
            CL_MAP_READ,
            0,
            big,
            0,
            null(),
            null_mut(),
            e
        ))),
        case!("map-bad-flags", |o| err_of(|e| clEnqueueMapBuffer(
            o.queue,
            o.buffer,
            CL_TRUE,
            0xff00,
            0,
            64,
            0,
            null(),
            null_mut(),
            e
        ))),
        case!("unmap-bogus-pointer", |o| clEnqueueUnmapMemObject(
            o.queue,
            o.buffer,
            host(),
            0,
            null(),
            null_mut()
        )),
        case!("program-source-count-0", |o| err_of(|e| {
            clCreateProgramWithSource(o.context, 0, null(), null(), e)
        })),
        case!("program-source-null-string", |o| {
            let s: [*const i8; 1] = [null()];
            err_of(|e| clCreateProgramWithSource(o.context, 1, s.as_ptr(), null(), e))
        }),
        case!("program-binary-null", |o| {
            let l = [0usize];
            let b: [*const u8; 1] = [null()];
            err_of(|e| {
                clCreateProgramWithBinary(
                    o.context,
                    1,
                    &o.device,
                    l.as_ptr(),
                    b.as_ptr(),
                    null_mut(),
                    e,
                )
            })
        }),
        case!("program-binary-garbage", |o| {
            let g = [0x41u8; 100];
            let l = [100usize];
            let b = [g.as_ptr()];
            err_of(|e| {
                clCreateProgramWithBinary(
                    o.context,
                    1,
                    &o.device,
                    l.as_ptr(),
                    b.as_ptr(),
                    null_mut(),
                    e,
                )
            })
        }),
        case!("build-null-device-list", |o| clBuildProgram(
            o.program,
            1,
            null(),
            null(),
            None,
            null_mut()
        )),
        case!("build-fake-program", |o| clBuildProgram(
            o.fake as _,
            0,
            null(),
            null(),
            None,
            null_mut()
        )),
        case!("build-bad-options", |o| {
            let s = CString::new(KERNEL_SRC).unwrap();
            let p = s.as_ptr();
            let mut e = 0;
            let pr = clCreateProgramWithSource(o.context, 1, &p, null(), &mut e);
            let opt = CString::new("-no-such-option-xyz").unwrap();
            clBuildProgram(pr, 0, null(), opt.as_ptr(), None, null_mut())
        }),
        case!("kernel-null-name", |o| err_of(|e| clCreateKernel(
            o.program,
            null(),
            e
        ))),
        case!("kernel-bad-name", |o| {
            let n = CString::new("nope").unwrap();
            err_of(|e| clCreateKernel(o.program, n.as_ptr(), e))
        }),
        case!("kernel-wrong-kind-program", |o| {
            let n = CString::new("k").unwrap();
            err_of(|e| clCreateKernel(o.kernel as _, n.as_ptr(), e))
        }),
        case!("arg-bad-index", |o| clSetKernelArg(o.kernel, 99, 4, host())),
        case!("arg-mem-wrong-size", |o| clSetKernelArg(
            o.kernel,
            0,
            4,
            host()
        )),
        case!("arg-mem-fake", |o| {
            let m = o.fake;
            clSetKernelArg(o.kernel, 0, 8, &m as *const _ as _)
        }),
        case!("arg-mem-wrong-kind", |o| {
            let m = o.queue;
            clSetKernelArg(o.kernel, 0, 8, &m as *const _ as _)
        }),
        case!("arg-mem-released", |o| {
            let m = o.released_buffer;
            clSetKernelArg(o.kernel, 0, 8, &m as *const _ as _)
        }),
        case!("arg-scalar-null-value", |o| clSetKernelArg(
            o.kernel,
            1,
            4,
            null()
        )),
        case!("arg-scalar-huge-size", |o| clSetKernelArg(
            o.kernel,
            1,
            big,
            host()
        )),
        case!("kernel-info-bad-enum", |o| clGetKernelInfo(
            o.kernel,
            0x7fff,
            0,
            null_mut(),
            null_mut()
        )),
        case!("kernel-wg-info-fake-device", |o| clGetKernelWorkGroupInfo(
            o.kernel,
            o.fake as _,
            CL_KERNEL_WORK_GROUP_SIZE,
            0,
            null_mut(),
            null_mut()
        )),
        case!("retain-kernel-wrong-kind", |o| clRetainKernel(
            o.program as _
        )),
        case!("wait-count-0", |_o| clWaitForEvents(0, null())),
        case!("wait-null-event", |_o| {
            let w = [null_mut()];
            clWaitForEvents(1, w.as_ptr())
        }),
        case!("wait-fake-event", |o| {
            let w = [o.fake as cl_event];
            clWaitForEvents(1, w.as_ptr())
        }),
        case!("wait-released-event", |o| {
            let w = [o.released_event];
            clWaitForEvents(1, w.as_ptr())
        }),
        case!("user-event-bad-status", |o| clSetUserEventStatus(
            o.user_event,
            5
        )),
        case!("user-event-not-user", |o| clSetUserEventStatus(
            o.done_event,
            CL_COMPLETE
        )),
        case!("profiling-user-event", |o| {
            let mut t = 0u64;
            clGetEventProfilingInfo(
                o.user_event,
                CL_PROFILING_COMMAND_END,
                8,
                &mut t as *mut u64 as _,
                null_mut(),
            )
        }),
        case!("callback-bad-type", |o| clSetEventCallback(
            o.user_event,
            99,
            Some(callback),
            null_mut()
        )),
        case!("callback-null", |o| clSetEventCallback(
            o.user_event,
            CL_COMPLETE,
            None,
            null_mut()
        )),
        case!("event-info-wrong-kind", |o| clGetEventInfo(
            o.buffer as _,
            CL_EVENT_COMMAND_TYPE,
            0,
            null_mut(),
            null_mut()
        )),
        case!("release-released-event", |o| clReleaseEvent(
            o.released_event
        )),
        case!("sampler-bad-property", |o| {
            let p = [0x7777u64, 1, 0];
            err_of(|e| clCreateSamplerWithProperties(o.context, p.as_ptr(), e))
        }),
        case!("image-null-format", |o| {
            let d: cl_image_desc = std::mem::zeroed();
            err_of(|e| clCreateImage(o.context, CL_MEM_READ_WRITE, null(), &d, null_mut(), e))
        }),
        case!("image-null-desc", |o| {
            let f = cl_image_format {
                image_channel_order: CL_RGBA,
                image_channel_data_type: CL_UNORM_INT8,
            };
            err_of(|e| clCreateImage(o.context, CL_MEM_READ_WRITE, &f, null(), null_mut(), e))
        }),
        case!("image-huge", |o| {
            let f = cl_image_format {
                image_channel_order: CL_RGBA,
                image_channel_data_type: CL_UNORM_INT8,
            };
            let mut d: cl_image_desc = std::mem::zeroed();
            d.image_type = CL_MEM_OBJECT_IMAGE2D;
            d.image_width = 1 << 40;
            d.image_height = 1 << 40;
            err_of(|e| clCreateImage(o.context, CL_MEM_READ_WRITE, &f, &d, null_mut(), e))
        }),
        case!("image-bad-type", |o| {
            let f = cl_image_format {
                image_channel_order: CL_RGBA,
                image_channel_data_type: CL_UNORM_INT8,
            };
            let mut d: cl_image_desc = std::mem::zeroed();
            d.image_type = 0x7777;
            d.image_width = 4;
            err_of(|e| clCreateImage(o.context, CL_MEM_READ_WRITE, &f, &d, null_mut(), e))
        }),
        case!("svm-free-bogus", |o| {
            clSVMFree(o.context, host());
            0
        }),
        case!("loader-junk-handle-finish", |o| clFinish(o.junk as _)),
    ];
    v.shrink_to_fit();
    v
}

/// The role: set up, then one forked child per case; prints `@soak case=NAME result=R`
/// where R is the status, `signal:N` or `hung`.
pub fn run(sp: bool) {
    let objs = setup(sp);
    for (name, f) in cases() {
        let mut fds = [0i32; 2];
        // SAFETY: a pipe for the child's answer.
        unsafe { libc::pipe(fds.as_mut_ptr()) };
        // SAFETY: fork; the child only makes the call, writes 4 bytes and _exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: arms a timer; a hang dies of SIGALRM.
            unsafe { libc::alarm(10) };
            let rc = f(&objs);
            // SAFETY: writes the 4-byte status to the pipe, then leaves.
            unsafe {
                libc::write(fds[1], &rc as *const cl_int as *const c_void, 4);
                libc::_exit(0);
            }
        }
        // SAFETY: closes our copy of the write end; then reads and reaps.
        let result = unsafe {
            libc::close(fds[1]);
            let mut rc: cl_int = 0;
            let n = libc::read(fds[0], &mut rc as *mut cl_int as *mut c_void, 4);
            libc::close(fds[0]);
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
            if libc::WIFSIGNALED(status) {
                match libc::WTERMSIG(status) {
                    libc::SIGALRM => "hung".to_string(),
                    s => format!("signal:{s}"),
                }
            } else if n == 4 {
                rc.to_string()
            } else {
                "no-answer".to_string()
            }
        };
        say(&format!("case={name} result={result}"));
    }
    let _ = common::cstr;
    say("done=1");
}

/// A result's readable form: CL status names for the usual codes.
pub fn describe(r: &str) -> String {
    let Ok(code) = r.parse::<i32>() else {
        return match r.strip_prefix("signal:") {
            Some(s) => format!(
                "crash ({})",
                crate::procs::signal_name(s.parse().unwrap_or(0))
            ),
            None => r.to_string(),
        };
    };
    let name = match code {
        0 => "CL_SUCCESS",
        -5 => "CL_OUT_OF_RESOURCES",
        -6 => "CL_OUT_OF_HOST_MEMORY",
        -8 => "CL_MEM_COPY_OVERLAP",
        -11 => "CL_BUILD_PROGRAM_FAILURE",
        -30 => "CL_INVALID_VALUE",
        -31 => "CL_INVALID_DEVICE_TYPE",
        -32 => "CL_INVALID_PLATFORM",
        -33 => "CL_INVALID_DEVICE",
        -34 => "CL_INVALID_CONTEXT",
        -35 => "CL_INVALID_QUEUE_PROPERTIES",
        -36 => "CL_INVALID_COMMAND_QUEUE",
        -37 => "CL_INVALID_HOST_PTR",
        -38 => "CL_INVALID_MEM_OBJECT",
        -39 => "CL_INVALID_IMAGE_FORMAT_DESCRIPTOR",
        -40 => "CL_INVALID_IMAGE_SIZE",
        -42 => "CL_INVALID_BINARY",
        -43 => "CL_INVALID_BUILD_OPTIONS",
        -44 => "CL_INVALID_PROGRAM",
        -45 => "CL_INVALID_PROGRAM_EXECUTABLE",
        -46 => "CL_INVALID_KERNEL_NAME",
        -48 => "CL_INVALID_KERNEL",
        -49 => "CL_INVALID_ARG_INDEX",
        -50 => "CL_INVALID_ARG_VALUE",
        -51 => "CL_INVALID_ARG_SIZE",
        -52 => "CL_INVALID_KERNEL_ARGS",
        -53 => "CL_INVALID_WORK_DIMENSION",
        -54 => "CL_INVALID_WORK_GROUP_SIZE",
        -55 => "CL_INVALID_WORK_ITEM_SIZE",
        -57 => "CL_INVALID_EVENT_WAIT_LIST",
        -58 => "CL_INVALID_EVENT",
        -59 => "CL_INVALID_OPERATION",
        -61 => "CL_INVALID_BUFFER_SIZE",
        -63 => "CL_INVALID_GLOBAL_WORK_SIZE",
        -64 => "CL_INVALID_PROPERTY",
        -65 => "CL_INVALID_IMAGE_DESCRIPTOR",
        -7 => "CL_PROFILING_INFO_NOT_AVAILABLE",
        12345 => "(errcode_ret untouched)",
        _ => return code.to_string(),
    };
    name.to_string()
}
