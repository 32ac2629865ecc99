//! Every `clEnqueue*` entry point through the real loader, side by side with bare PoCL.
#![allow(deprecated)] // clEnqueueMarker/Barrier/WaitForEvents/Task are entry points to cover.

mod common;

use common::*;
use opencl_sys::cl_icd::cl_icd_dispatch;
use opencl_sys::*;
use std::ffi::c_void;
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Our dispatch table, read from one of our handles exactly as the loader reads it. Calls
/// through it reach the layer with any first argument (a bare-PoCL handle, a stack
/// address) that the loader itself would route elsewhere or crash on.
fn table(h: *mut c_void) -> &'static cl_icd_dispatch {
    // SAFETY: `h` is one of our live handles; the ICD ABI puts the table pointer first.
    unsafe { &**(h as *const *const cl_icd_dispatch) }
}

fn event_scalar<T: Copy + Default>(e: cl_event, what: cl_event_info) -> T {
    info_scalar(|s, v, r| unsafe { clGetEventInfo(e, what, s, v, r) })
}

fn status(e: cl_event) -> cl_int {
    event_scalar(e, CL_EVENT_COMMAND_EXECUTION_STATUS)
}

fn device_scalar<T: Copy + Default>(d: cl_device_id, what: cl_device_info) -> T {
    info_scalar(|s, v, r| unsafe { clGetDeviceInfo(d, what, s, v, r) })
}

fn user_event(env: &Env) -> cl_event {
    let mut err = 0;
    // SAFETY: valid context.
    let e = unsafe { clCreateUserEvent(env.context, &mut err) };
    ok(err);
    e
}

fn complete(e: cl_event) {
    // SAFETY: a user event the test owns.
    ok(unsafe { clSetUserEventStatus(e, CL_COMPLETE) });
}

fn release_event(e: cl_event) {
    // SAFETY: an event the test owns.
    ok(unsafe { clReleaseEvent(e) });
}

fn release_mem(m: cl_mem) {
    // SAFETY: a memory object the test owns.
    ok(unsafe { clReleaseMemObject(m) });
}

fn finish(q: cl_command_queue) {
    // SAFETY: valid queue.
    ok(unsafe { clFinish(q) });
}

fn wait_for(pred: impl Fn() -> bool) -> bool {
    for _ in 0..2000 {
        if pred() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    pred()
}

/// The event is ours: it names our queue and context.
#[track_caller]
fn assert_our_event(env: &Env, e: cl_event, q: cl_command_queue, ty: cl_command_type) {
    assert_eq!(
        event_scalar::<cl_command_queue>(e, CL_EVENT_COMMAND_QUEUE),
        q
    );
    assert_eq!(event_scalar::<cl_context>(e, CL_EVENT_CONTEXT), env.context);
    // The type is the vendor's answer, forwarded: NVIDIA reports its own values for some
    // commands (0x4003 for a marker with a wait list), so only PoCL's are pinned here.
    if vendor_name() == "Portable Computing Language" {
        assert_eq!(
            event_scalar::<cl_command_type>(e, CL_EVENT_COMMAND_TYPE),
            ty
        );
    }
}

#[test]
fn buffer_read_write_copy_fill() {
    let env = Env::sp();
    let (a, b) = (env.buffer(64), env.buffer(64));
    let data: Vec<u8> = (0..64).collect();
    let mut ev = [null_mut(); 4];
    // SAFETY: blocking transfers from / into live vectors; events are owned by the test.
    unsafe {
        ok(clEnqueueWriteBuffer(
            env.queue,
            a,
            CL_TRUE,
            0,
            64,
            data.as_ptr() as *const c_void,
            0,
            null(),
            &mut ev[0],
        ));
        ok(clEnqueueWriteBuffer(
            env.queue,
            b,
            CL_TRUE,
            0,
            64,
            [0u8; 64].as_ptr() as *const c_void,
            0,
            null(),
            null_mut(),
        ));
        ok(clEnqueueCopyBuffer(
            env.queue, a, b, 8, 0, 32, 1, &ev[0], &mut ev[1],
        ));
        let pattern = 0xdead_beef_u32;
        ok(clEnqueueFillBuffer(
            env.queue,
            b,
            &pattern as *const u32 as *const c_void,
            4,
            48,
            16,
            1,
            &ev[1],
            &mut ev[2],
        ));
        let mut out = vec![0u8; 64];
        ok(clEnqueueReadBuffer(
            env.queue,
            b,
            CL_TRUE,
            0,
            64,
            out.as_mut_ptr() as *mut c_void,
            1,
            &ev[2],
            &mut ev[3],
        ));
        assert_eq!(&out[..32], &data[8..40]);
        assert_eq!(&out[32..48], &[0u8; 16]);
        for w in out[48..].chunks(4) {
            assert_eq!(u32::from_ne_bytes(w.try_into().unwrap()), pattern);
        }
    }
    let types = [
        CL_COMMAND_WRITE_BUFFER,
        CL_COMMAND_COPY_BUFFER,
        CL_COMMAND_FILL_BUFFER,
        CL_COMMAND_READ_BUFFER,
    ];
    for (e, ty) in ev.into_iter().zip(types) {
        assert_our_event(&env, e, env.queue, ty);
        release_event(e);
    }
    release_mem(a);
    release_mem(b);
}

#[test]
fn buffer_bad_arguments_match_bare() {
    let mut codes = Vec::new();
    for p in [sp_platform(), bare_platform()] {
        let env = Env::new(p);
        let m = env.buffer(64);
        let mut out = [0u8; 128];
        let o = out.as_mut_ptr() as *mut c_void;
        let pat = [0u8; 3];
        // SAFETY: each call is refused before any memory is touched.
        unsafe {
            codes.push(clEnqueueReadBuffer(
                env.queue,
                m,
                CL_TRUE,
                32,
                64,
                o,
                0,
                null(),
                null_mut(),
            ));
            codes.push(clEnqueueWriteBuffer(
                env.queue,
                m,
                CL_TRUE,
                0,
                128,
                o,
                0,
                null(),
                null_mut(),
            ));
            codes.push(clEnqueueReadBuffer(
                env.queue,
                m,
                CL_TRUE,
                0,
                16,
                null_mut(),
                0,
                null(),
                null_mut(),
            ));
            codes.push(clEnqueueCopyBuffer(
                env.queue,
                m,
                m,
                0,
                8,
                16,
                0,
                null(),
                null_mut(),
            ));
            codes.push(clEnqueueFillBuffer(
                env.queue,
                m,
                pat.as_ptr() as *const c_void,
                3,
                0,
                12,
                0,
                null(),
                null_mut(),
            ));
            let mut err = 0;
            let p = clEnqueueMapBuffer(
                env.queue,
                m,
                CL_TRUE,
                CL_MAP_READ,
                32,
                64,
                0,
                null(),
                null_mut(),
                &mut err,
            );
            assert!(p.is_null());
            codes.push(err);
            // Wait lists: count without list, list without count.
            let u = user_event(&env);
            codes.push(clEnqueueReadBuffer(
                env.queue,
                m,
                CL_TRUE,
                0,
                16,
                o,
                1,
                null(),
                null_mut(),
            ));
            codes.push(clEnqueueReadBuffer(
                env.queue,
                m,
                CL_TRUE,
                0,
                16,
                o,
                0,
                &u,
                null_mut(),
            ));
            codes.push(clEnqueueMarkerWithWaitList(
                env.queue,
                1,
                null(),
                null_mut(),
            ));
            complete(u);
            release_event(u);
        }
        release_mem(m);
    }
    let (sp, bare) = codes.split_at(codes.len() / 2);
    assert_eq!(sp, bare);
    assert_eq!(sp[0], CL_INVALID_VALUE, "read out of bounds");
    assert_eq!(sp[6], CL_INVALID_EVENT_WAIT_LIST);
}

#[test]
fn rect_transfers() {
    let env = Env::sp();
    let (a, b) = (env.buffer(64), env.buffer(64));
    env.write(a, &[0u8; 64]);
    env.write(b, &[0u8; 64]);
    // An 8x8 host image; a 4x3 block at host (1,1) goes to buffer (2,2), both pitch 8.
    let host: Vec<u8> = (0..64).collect();
    let region = [4usize, 3, 1];
    let mut ev = [null_mut(); 3];
    let mut back = vec![0u8; 64];
    // SAFETY: blocking rect transfers within both 64-byte areas.
    unsafe {
        ok(clEnqueueWriteBufferRect(
            env.queue,
            a,
            CL_TRUE,
            [2, 2, 0].as_ptr(),
            [1, 1, 0].as_ptr(),
            region.as_ptr(),
            8,
            0,
            8,
            0,
            host.as_ptr() as *const c_void,
            0,
            null(),
            &mut ev[0],
        ));
        ok(clEnqueueCopyBufferRect(
            env.queue,
            a,
            b,
            [2, 2, 0].as_ptr(),
            [0, 0, 0].as_ptr(),
            region.as_ptr(),
            8,
            0,
            4,
            0,
            0,
            null(),
            &mut ev[1],
        ));
        ok(clEnqueueReadBufferRect(
            env.queue,
            b,
            CL_TRUE,
            [0, 0, 0].as_ptr(),
            [0, 0, 0].as_ptr(),
            region.as_ptr(),
            4,
            0,
            4,
            0,
            back.as_mut_ptr() as *mut c_void,
            0,
            null(),
            &mut ev[2],
        ));
    }
    let whole: Vec<u8> = env.read(a, 64);
    for y in 0..8 {
        for x in 0..8 {
            let inside = (2..6).contains(&x) && (2..5).contains(&y);
            let want = if inside {
                host[(y - 1) * 8 + (x - 1)]
            } else {
                0
            };
            assert_eq!(whole[y * 8 + x], want, "({x},{y})");
        }
    }
    // b holds the block packed with pitch 4.
    for y in 0..3 {
        for x in 0..4 {
            assert_eq!(back[y * 4 + x], host[(y + 1) * 8 + x + 1]);
        }
    }
    let types = [
        CL_COMMAND_WRITE_BUFFER_RECT,
        CL_COMMAND_COPY_BUFFER_RECT,
        CL_COMMAND_READ_BUFFER_RECT,
    ];
    for (e, ty) in ev.into_iter().zip(types) {
        assert_our_event(&env, e, env.queue, ty);
        release_event(e);
    }
    release_mem(a);
    release_mem(b);
}

const RGBA8: cl_image_format = cl_image_format {
    image_channel_order: CL_RGBA,
    image_channel_data_type: CL_UNSIGNED_INT8,
};

fn image_4x4(env: &Env) -> cl_mem {
    // SAFETY: plain zeroed descriptor, filled below.
    let mut d: cl_image_desc = unsafe { std::mem::zeroed() };
    d.image_type = CL_MEM_OBJECT_IMAGE2D;
    d.image_width = 4;
    d.image_height = 4;
    let mut err = 0;
    // SAFETY: valid context, format and descriptor.
    let m = unsafe {
        clCreateImage(
            env.context,
            CL_MEM_READ_WRITE,
            &RGBA8,
            &d,
            null_mut(),
            &mut err,
        )
    };
    ok(err);
    m
}

#[test]
fn image_transfers_fill_and_map() {
    let env = Env::sp();
    if device_scalar::<cl_bool>(env.device, CL_DEVICE_IMAGE_SUPPORT) == CL_FALSE {
        return;
    }
    let (i1, i2, i3) = (image_4x4(&env), image_4x4(&env), image_4x4(&env));
    let buf = env.buffer(64);
    let px: Vec<u8> = (0..64).map(|v| v * 3).collect();
    let (o, full) = ([0usize; 3], [4usize, 4, 1]);
    let mut ev = [null_mut(); 6];
    let read = |img: cl_mem| {
        let mut out = vec![0u8; 64];
        // SAFETY: blocking read of the whole 4x4 RGBA8 image.
        ok(unsafe {
            clEnqueueReadImage(
                env.queue,
                img,
                CL_TRUE,
                o.as_ptr(),
                full.as_ptr(),
                0,
                0,
                out.as_mut_ptr() as *mut c_void,
                0,
                null(),
                null_mut(),
            )
        });
        out
    };
    // SAFETY: blocking transfers between live vectors and images of 64 bytes.
    unsafe {
        ok(clEnqueueWriteImage(
            env.queue,
            i1,
            CL_TRUE,
            o.as_ptr(),
            full.as_ptr(),
            0,
            0,
            px.as_ptr() as *const c_void,
            0,
            null(),
            &mut ev[0],
        ));
        ok(clEnqueueCopyImage(
            env.queue,
            i1,
            i2,
            o.as_ptr(),
            o.as_ptr(),
            full.as_ptr(),
            0,
            null(),
            &mut ev[1],
        ));
        let color = [9u32, 8, 7, 6];
        ok(clEnqueueFillImage(
            env.queue,
            i2,
            color.as_ptr() as *const c_void,
            [2usize, 2, 0].as_ptr(),
            [2usize, 2, 1].as_ptr(),
            0,
            null(),
            &mut ev[2],
        ));
        ok(clEnqueueCopyImageToBuffer(
            env.queue,
            i1,
            buf,
            o.as_ptr(),
            full.as_ptr(),
            0,
            0,
            null(),
            &mut ev[3],
        ));
        ok(clEnqueueCopyBufferToImage(
            env.queue,
            buf,
            i3,
            0,
            o.as_ptr(),
            full.as_ptr(),
            0,
            null(),
            &mut ev[4],
        ));
    }
    assert_eq!(read(i1), px);
    let filled = read(i2);
    for y in 0..4 {
        for x in 0..4 {
            let p = &filled[(y * 4 + x) * 4..][..4];
            if x >= 2 && y >= 2 {
                assert_eq!(p, [9, 8, 7, 6]);
            } else {
                assert_eq!(p, &px[(y * 4 + x) * 4..][..4]);
            }
        }
    }
    assert_eq!(env.read::<u8>(buf, 64), px);
    assert_eq!(read(i3), px);
    // Map the image for reading: the rows are where the row pitch says.
    let (mut row, mut slice) = (0usize, 0usize);
    let mut err = 0;
    // SAFETY: blocking map of the whole image; the pointer is read within `row` bytes per
    // line and unmapped below.
    let p = unsafe {
        clEnqueueMapImage(
            env.queue,
            i1,
            CL_TRUE,
            CL_MAP_READ,
            o.as_ptr(),
            full.as_ptr(),
            &mut row,
            &mut slice,
            0,
            null(),
            &mut ev[5],
            &mut err,
        )
    };
    ok(err);
    assert!(row >= 16);
    for y in 0..4 {
        // SAFETY: row `y` of the mapped image, 16 bytes wide.
        let line = unsafe { std::slice::from_raw_parts((p as *const u8).add(y * row), 16) };
        assert_eq!(line, &px[y * 16..][..16]);
    }
    let mut un = null_mut();
    // SAFETY: unmapping the pointer just mapped.
    ok(unsafe { clEnqueueUnmapMemObject(env.queue, i1, p, 0, null(), &mut un) });
    finish(env.queue);
    let types = [
        CL_COMMAND_WRITE_IMAGE,
        CL_COMMAND_COPY_IMAGE,
        CL_COMMAND_FILL_IMAGE,
        CL_COMMAND_COPY_IMAGE_TO_BUFFER,
        CL_COMMAND_COPY_BUFFER_TO_IMAGE,
        CL_COMMAND_MAP_IMAGE,
    ];
    for (e, ty) in ev.into_iter().zip(types) {
        assert_our_event(&env, e, env.queue, ty);
        release_event(e);
    }
    assert_our_event(&env, un, env.queue, CL_COMMAND_UNMAP_MEM_OBJECT);
    release_event(un);
    for m in [i1, i2, i3, buf] {
        release_mem(m);
    }
}

/// Unknown map flags, or CL_MAP_WRITE_INVALIDATE_REGION with READ or WRITE, are refused
/// (bare PoCL takes them as a valid map and, in a blocking one, waits).
#[test]
fn map_with_invalid_flags_is_refused() {
    let env = Env::sp();
    let m = env.buffer(64);
    let invalidate = CL_MAP_WRITE_INVALIDATE_REGION as cl_map_flags;
    for flags in [0xff00, invalidate | CL_MAP_READ, invalidate | CL_MAP_WRITE] {
        let mut err = 0;
        // SAFETY: a blocking map the layer must refuse before it reaches the vendor.
        let p = unsafe {
            clEnqueueMapBuffer(
                env.queue,
                m,
                CL_TRUE,
                flags,
                0,
                64,
                0,
                null(),
                null_mut(),
                &mut err,
            )
        };
        assert_eq!(err, CL_INVALID_VALUE, "flags {flags:#x}");
        assert!(p.is_null());
    }
    // SAFETY: the same check on SVM maps (no SVM pointer is ever dereferenced).
    let rc = unsafe {
        clEnqueueSVMMap(
            env.queue,
            CL_TRUE,
            0xff00,
            null_mut(),
            64,
            0,
            null(),
            null_mut(),
        )
    };
    assert_eq!(rc, CL_INVALID_VALUE);
    release_mem(m);
}

#[test]
fn map_and_unmap_buffer() {
    let env = Env::sp();
    let m = env.buffer(64);
    env.write(m, &[0u32; 16]);
    let mut err = 0;
    let mut ev = null_mut();
    // SAFETY: blocking map for writing of 64 bytes, written through and unmapped.
    unsafe {
        let p = clEnqueueMapBuffer(
            env.queue,
            m,
            CL_TRUE,
            CL_MAP_WRITE,
            0,
            64,
            0,
            null(),
            &mut ev,
            &mut err,
        );
        ok(err);
        assert!(!p.is_null());
        assert_our_event(&env, ev, env.queue, CL_COMMAND_MAP_BUFFER);
        release_event(ev);
        for i in 0..16 {
            (p as *mut u32).add(i).write(i as u32 * 7);
        }
        ok(clEnqueueUnmapMemObject(
            env.queue,
            m,
            p,
            0,
            null(),
            null_mut(),
        ));
    }
    let want: Vec<u32> = (0..16).map(|i| i * 7).collect();
    assert_eq!(env.read::<u32>(m, 16), want);
    // A non-blocking map completes through its event.
    // SAFETY: as above, reading after the map's event completes.
    unsafe {
        let p = clEnqueueMapBuffer(
            env.queue,
            m,
            CL_FALSE,
            CL_MAP_READ,
            16,
            16,
            0,
            null(),
            &mut ev,
            &mut err,
        );
        ok(err);
        ok(clWaitForEvents(1, &ev));
        assert_eq!(std::slice::from_raw_parts(p as *const u32, 4), &want[4..8]);
        ok(clEnqueueUnmapMemObject(env.queue, m, p, 1, &ev, null_mut()));
        release_event(ev);
    }
    finish(env.queue);
    release_mem(m);
}

const KERNELS: &str = "
__kernel void add(__global int *a, int v) { a[get_global_id(0)] += v; }
__kernel void one(__global int *a) { a[0] = 42; }
";

fn set_arg<T>(k: cl_kernel, i: cl_uint, v: &T) {
    // SAFETY: `v` is a live value of the argument's size.
    ok(unsafe {
        clSetKernelArg(
            k,
            i,
            std::mem::size_of::<T>(),
            v as *const T as *const c_void,
        )
    });
}

#[test]
fn ndrange_and_task() {
    let env = Env::sp();
    let prog = env.program(KERNELS);
    let (add, one) = (env.kernel(prog, "add"), env.kernel(prog, "one"));
    let m = env.buffer(64);
    env.write(m, &[1i32; 16]);
    set_arg(add, 0, &m);
    set_arg(add, 1, &5i32);
    set_arg(one, 0, &m);
    let u = user_event(&env);
    let (mut e1, mut e2, mut e3) = (null_mut(), null_mut(), null_mut());
    let gws = [16usize];
    // SAFETY: valid queue, kernels with all arguments set, 1-D range of 16.
    unsafe {
        ok(clEnqueueNDRangeKernel(
            env.queue,
            add,
            1,
            null(),
            gws.as_ptr(),
            null(),
            1,
            &u,
            &mut e1,
        ));
        ok(clEnqueueNDRangeKernel(
            env.queue,
            add,
            1,
            [8usize].as_ptr(),
            [8usize].as_ptr(),
            [4usize].as_ptr(),
            0,
            null(),
            &mut e2,
        ));
        ok(clEnqueueTask(env.queue, one, 1, &e2, &mut e3));
        ok(clFlush(env.queue));
    }
    // In order, behind a pending user event: nothing has run.
    assert!(status(e3) > CL_COMPLETE);
    complete(u);
    finish(env.queue);
    let mut want = [6i32; 16];
    want[8..].iter_mut().for_each(|v| *v += 5);
    want[0] = 42;
    assert_eq!(env.read::<i32>(m, 16), want);
    assert_our_event(&env, e1, env.queue, CL_COMMAND_NDRANGE_KERNEL);
    // PoCL reports a task as a one-item NDRange; the type is the vendor's either way.
    let ty: cl_command_type = event_scalar(e3, CL_EVENT_COMMAND_TYPE);
    assert!(
        ty == CL_COMMAND_TASK || ty == CL_COMMAND_NDRANGE_KERNEL,
        "{ty:#x}"
    );
    assert_eq!(
        event_scalar::<cl_command_queue>(e3, CL_EVENT_COMMAND_QUEUE),
        env.queue
    );
    for e in [e1, e2, e3, u] {
        release_event(e);
    }
    // Bad launches give the bare driver's codes.
    let bare = Env::new(bare_platform());
    let bprog = bare.program(KERNELS);
    let badd = bare.kernel(bprog, "add");
    let bm = bare.buffer(64);
    set_arg(badd, 0, &bm);
    set_arg(badd, 1, &5i32);
    let launch = |q, k, dim, g: &[usize], l: *const usize| unsafe {
        clEnqueueNDRangeKernel(q, k, dim, null(), g.as_ptr(), l, 0, null(), null_mut())
    };
    for (dim, g, l) in [
        (0u32, [16usize], null()),
        (4, [16], null()),
        (1, [0], null()),
        (1, [16], [5usize].as_ptr()),
    ] {
        assert_eq!(
            launch(env.queue, add, dim, &g, l),
            launch(bare.queue, badd, dim, &g, l),
            "dim {dim} g {g:?}"
        );
    }
    // A zero-sized range is a valid launch (OpenCL 2.1 on), and PoCL compiles the kernel for
    // it on its worker thread. Finish both queues so no compile outlives the test: a process
    // that exits while PoCL's LLVM passes run crashes in LLVM's exit handlers (seen on a cold
    // cache, bare PoCL included: 1 run in 25 with this launch on the bare queue alone).
    finish(env.queue);
    finish(bare.queue);
    // SAFETY: releasing what the test created.
    unsafe {
        for k in [add, one, badd] {
            clReleaseKernel(k);
        }
        clReleaseProgram(prog);
        clReleaseProgram(bprog);
    }
    release_mem(m);
    release_mem(bm);
}

#[repr(C)]
struct NativeArgs {
    mem: *mut c_void,
    n: u32,
    scale: u32,
}

static NATIVE_SEEN: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn native_fill(args: *mut c_void) {
    // SAFETY: the vendor passes its copy of our NativeArgs block, `mem` replaced by the
    // buffer's memory, which holds `n` u32s.
    unsafe {
        let a = &*(args as *const NativeArgs);
        NATIVE_SEEN.store(a.mem as usize, Ordering::SeqCst);
        for i in 0..a.n as usize {
            (a.mem as *mut u32).add(i).write(i as u32 * a.scale);
        }
    }
}

#[test]
fn native_kernel_receives_inner_memory() {
    let env = Env::sp();
    let caps: cl_device_exec_capabilities =
        device_scalar(env.device, CL_DEVICE_EXECUTION_CAPABILITIES);
    if caps & CL_EXEC_NATIVE_KERNEL == 0 {
        return;
    }
    let m = env.buffer(64);
    env.write(m, &[0u32; 16]);
    let mut args = NativeArgs {
        mem: m,
        n: 16,
        scale: 3,
    };
    let loc = [&args.mem as *const *mut c_void as *const c_void];
    let mut ev = null_mut();
    // SAFETY: `args` is a live block; `loc` points at its cl_mem field; mem_list names `m`.
    unsafe {
        ok(clEnqueueNativeKernel(
            env.queue,
            Some(native_fill),
            &mut args as *mut NativeArgs as *mut c_void,
            std::mem::size_of::<NativeArgs>(),
            1,
            &m,
            loc.as_ptr() as *mut *const c_void,
            0,
            null(),
            &mut ev,
        ));
    }
    finish(env.queue);
    let want: Vec<u32> = (0..16).map(|i| i * 3).collect();
    assert_eq!(
        env.read::<u32>(m, 16),
        want,
        "the native kernel wrote through the buffer's memory"
    );
    let seen = NATIVE_SEEN.load(Ordering::SeqCst);
    assert_ne!(seen, 0);
    assert_ne!(seen, m as usize, "the function got memory, not our handle");
    assert_eq!(args.mem, m, "the application's block is untouched");
    assert_our_event(&env, ev, env.queue, CL_COMMAND_NATIVE_KERNEL);
    release_event(ev);
    // Bad arguments give the bare driver's codes.
    let bare = Env::new(bare_platform());
    let bm = bare.buffer(64);
    let code =
        |e: &Env, mem: cl_mem, f: Option<unsafe extern "C" fn(*mut c_void)>, n: u32, cb: usize| {
            let mut a = NativeArgs {
                mem,
                n: 0,
                scale: 0,
            };
            let loc = [&a.mem as *const *mut c_void as *const c_void];
            let (ml, lp) = if n > 0 {
                (&mem as *const cl_mem, loc.as_ptr() as *mut *const c_void)
            } else {
                (null(), null_mut())
            };
            // SAFETY: as above; the vendor refuses before calling anything.
            unsafe {
                clEnqueueNativeKernel(
                    e.queue,
                    f,
                    &mut a as *mut NativeArgs as *mut c_void,
                    cb,
                    n,
                    ml,
                    lp,
                    0,
                    null(),
                    null_mut(),
                )
            }
        };
    let size = std::mem::size_of::<NativeArgs>();
    assert_eq!(code(&env, m, None, 1, size), code(&bare, bm, None, 1, size));
    assert_eq!(code(&env, m, None, 1, size), CL_INVALID_VALUE);
    // "CL_INVALID_VALUE if args is not NULL and cb_args is 0."
    assert_eq!(code(&env, m, Some(native_fill), 1, 0), CL_INVALID_VALUE);
    finish(bare.queue);
    release_mem(bm);
    release_mem(m);
}

#[test]
fn markers_and_barriers_order_commands() {
    let env = Env::sp();
    let mut err = 0;
    let props = [
        CL_QUEUE_PROPERTIES as cl_queue_properties,
        CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE,
        0,
    ];
    // SAFETY: valid context, device and properties.
    let ooo = unsafe {
        clCreateCommandQueueWithProperties(env.context, env.device, props.as_ptr(), &mut err)
    };
    ok(err);
    let (a, b) = (env.buffer(16), env.buffer(16));
    let u = user_event(&env);
    let src = [5u32; 4];
    let mut ev = [null_mut(); 6];
    // SAFETY: non-blocking writes from `src`, which outlives the finish below.
    unsafe {
        // Gated write, then a barrier: the ungated write after it must wait as well.
        ok(clEnqueueWriteBuffer(
            ooo,
            a,
            CL_FALSE,
            0,
            16,
            src.as_ptr() as *const c_void,
            1,
            &u,
            &mut ev[0],
        ));
        ok(clEnqueueBarrierWithWaitList(ooo, 0, null(), &mut ev[1]));
        ok(clEnqueueWriteBuffer(
            ooo,
            b,
            CL_FALSE,
            0,
            16,
            src.as_ptr() as *const c_void,
            0,
            null(),
            &mut ev[2],
        ));
        ok(clEnqueueMarkerWithWaitList(ooo, 1, &ev[2], &mut ev[3]));
        ok(clEnqueueMarker(ooo, &mut ev[4]));
        ok(clEnqueueBarrier(ooo));
        ok(clEnqueueWaitForEvents(
            ooo,
            1,
            &u as *const cl_event as *mut cl_event,
        ));
        ok(clEnqueueMarkerWithWaitList(ooo, 0, null(), &mut ev[5]));
        ok(clFlush(ooo));
    }
    for (k, &e) in ev.iter().enumerate() {
        assert!(
            status(e) > CL_COMPLETE,
            "command {k} ran before the user event completed"
        );
    }
    complete(u);
    finish(ooo);
    for &e in &ev {
        assert_eq!(status(e), CL_COMPLETE);
    }
    assert_our_event(&env, ev[1], ooo, CL_COMMAND_BARRIER);
    assert_our_event(&env, ev[3], ooo, CL_COMMAND_MARKER);
    assert_our_event(&env, ev[4], ooo, CL_COMMAND_MARKER);
    assert_eq!(env.read::<u32>(b, 4), src);
    for e in ev.into_iter().chain([u]) {
        release_event(e);
    }
    // The 1.x marker needs an event out; the vendor's code for its absence.
    let bare = Env::new(bare_platform());
    // SAFETY: NULL event pointers on purpose, through our table and through bare PoCL's.
    unsafe {
        let ours = table(env.queue).clEnqueueMarker.unwrap()(env.queue, null_mut());
        assert_eq!(ours, clEnqueueMarker(bare.queue, null_mut()));
        // "CL_INVALID_VALUE if num_events is zero or event_list is NULL." (not compared:
        // PoCL aborts the process on any clEnqueueWaitForEvents)
        assert_eq!(
            clEnqueueWaitForEvents(env.queue, 0, null_mut()),
            CL_INVALID_VALUE
        );
        ok(clReleaseCommandQueue(ooo));
    }
    release_mem(a);
    release_mem(b);
}

#[test]
fn long_wait_lists_are_unwrapped() {
    let env = Env::sp();
    let users: Vec<cl_event> = (0..20).map(|_| user_event(&env)).collect();
    for n in [1usize, 8, 9, 20] {
        let mut m = null_mut();
        // SAFETY: a list of `n` valid events.
        ok(unsafe { clEnqueueMarkerWithWaitList(env.queue, n as cl_uint, users.as_ptr(), &mut m) });
        assert!(status(m) > CL_COMPLETE);
        release_event(m);
    }
    // A bad event late in a long list is still caught.
    let mut with_bad = users.clone();
    with_bad[15] = env.queue as cl_event;
    // SAFETY: a list with one non-event on purpose.
    let rc = unsafe { clEnqueueMarkerWithWaitList(env.queue, 20, with_bad.as_ptr(), null_mut()) };
    assert_eq!(rc, CL_INVALID_EVENT_WAIT_LIST);
    for &u in &users {
        complete(u);
    }
    finish(env.queue);
    for u in users {
        release_event(u);
    }
}

#[test]
fn migrate_mem_objects() {
    let env = Env::sp();
    let (a, b) = (env.buffer(16), env.buffer(16));
    env.write(a, &[3u32; 4]);
    env.write(b, &[4u32; 4]);
    let mut ev = null_mut();
    // SAFETY: a list of two live buffers.
    unsafe {
        ok(clEnqueueMigrateMemObjects(
            env.queue,
            2,
            [a, b].as_ptr(),
            CL_MIGRATE_MEM_OBJECT_HOST,
            0,
            null(),
            &mut ev,
        ));
        ok(clEnqueueMigrateMemObjects(
            env.queue,
            2,
            [a, b].as_ptr(),
            0,
            1,
            &ev,
            null_mut(),
        ));
    }
    finish(env.queue);
    assert_our_event(&env, ev, env.queue, CL_COMMAND_MIGRATE_MEM_OBJECTS);
    release_event(ev);
    assert_eq!(env.read::<u32>(a, 4), [3; 4]);
    assert_eq!(env.read::<u32>(b, 4), [4; 4]);
    // Bad lists and flags answer like bare PoCL.
    let bare = Env::new(bare_platform());
    let bm = bare.buffer(16);
    let code = |e: &Env, n: u32, list: *const cl_mem, flags| unsafe {
        clEnqueueMigrateMemObjects(e.queue, n, list, flags, 0, null(), null_mut())
    };
    assert_eq!(code(&env, 0, &a, 0), code(&bare, 0, &bm, 0));
    assert_eq!(code(&env, 0, &a, 0), CL_INVALID_VALUE);
    assert_eq!(code(&env, 1, &a, 1 << 20), code(&bare, 1, &bm, 1 << 20));
    // SAFETY: through our table: NULL list and a foreign buffer in the list.
    unsafe {
        let t = table(env.queue);
        assert_eq!(
            t.clEnqueueMigrateMemObjects.unwrap()(env.queue, 1, null(), 0, 0, null(), null_mut()),
            CL_INVALID_VALUE
        );
        assert_eq!(
            t.clEnqueueMigrateMemObjects.unwrap()(
                env.queue,
                2,
                [a, bm].as_ptr(),
                0,
                0,
                null(),
                null_mut()
            ),
            CL_INVALID_MEM_OBJECT
        );
    }
    release_mem(bm);
    release_mem(a);
    release_mem(b);
}

static SVM_FREED: Mutex<Vec<(usize, Vec<usize>, usize)>> = Mutex::new(Vec::new());

/// The context whose SVM pointers `on_svm_free` frees.
static CTX_FOR_FREE: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn on_svm_free(
    q: cl_command_queue,
    n: cl_uint,
    ptrs: *mut *mut c_void,
    user: *mut c_void,
) {
    // SAFETY: the vendor passes the `n` pointers given to clEnqueueSVMFree.
    let list = unsafe { std::slice::from_raw_parts(ptrs, n as usize) };
    SVM_FREED.lock().unwrap().push((
        q as usize,
        list.iter().map(|&p| p as usize).collect(),
        user as usize,
    ));
    // With a callback, freeing is the application's job.
    let ctx = CTX_FOR_FREE.load(Ordering::SeqCst) as cl_context;
    for &p in list {
        // SAFETY: SVM pointers of `ctx`, freed once.
        unsafe { clSVMFree(ctx, p) };
    }
}

#[test]
fn svm_commands() {
    let env = Env::sp();
    let caps: cl_device_svm_capabilities = device_scalar(env.device, CL_DEVICE_SVM_CAPABILITIES);
    if caps & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER == 0 {
        return;
    }
    CTX_FOR_FREE.store(env.context as usize, Ordering::SeqCst);
    // SAFETY: SVM allocations of 64 bytes, used only inside their bounds and while mapped
    // for host access; freed through clEnqueueSVMFree at the end.
    unsafe {
        let a = clSVMAlloc(env.context, CL_MEM_READ_WRITE, 64, 0);
        let b = clSVMAlloc(env.context, CL_MEM_READ_WRITE, 64, 0);
        assert!(!a.is_null() && !b.is_null());
        let mut ev = [null_mut(); 5];
        ok(clEnqueueSVMMap(
            env.queue,
            CL_TRUE,
            CL_MAP_WRITE,
            a,
            64,
            0,
            null(),
            &mut ev[0],
        ));
        for i in 0..16 {
            (a as *mut u32).add(i).write(i as u32 + 100);
        }
        ok(clEnqueueSVMUnmap(env.queue, a, 0, null(), &mut ev[1]));
        let pattern = 0x0102_0304u32;
        ok(clEnqueueSVMMemFill(
            env.queue,
            b,
            &pattern as *const u32 as *const c_void,
            4,
            64,
            0,
            null(),
            &mut ev[2],
        ));
        ok(clEnqueueSVMMemcpy(
            env.queue, CL_TRUE, b, a, 32, 1, &ev[2], &mut ev[3],
        ));
        let ptrs = [a as *const c_void, b as *const c_void];
        ok(clEnqueueSVMMigrateMem(
            env.queue,
            2,
            ptrs.as_ptr() as *mut *const c_void,
            [64usize, 64].as_ptr(),
            0,
            0,
            null(),
            &mut ev[4],
        ));
        ok(clEnqueueSVMMap(
            env.queue,
            CL_TRUE,
            CL_MAP_READ,
            b,
            64,
            0,
            null(),
            null_mut(),
        ));
        let got = std::slice::from_raw_parts(b as *const u32, 16).to_vec();
        ok(clEnqueueSVMUnmap(env.queue, b, 0, null(), null_mut()));
        let want: Vec<u32> = (0..16)
            .map(|i| if i < 8 { i + 100 } else { pattern })
            .collect();
        assert_eq!(got, want);
        let types = [
            CL_COMMAND_SVM_MAP,
            CL_COMMAND_SVM_UNMAP,
            CL_COMMAND_SVM_MEMFILL,
            CL_COMMAND_SVM_MEMCPY,
            CL_COMMAND_SVM_MIGRATE_MEM,
        ];
        for (e, ty) in ev.into_iter().zip(types) {
            assert_our_event(&env, e, env.queue, ty);
            release_event(e);
        }
        // The free callback gets the application's queue, pointers and user data.
        let frees = [a, b];
        let tag = 0x5356_4d00usize;
        let mut fe = null_mut();
        ok(clEnqueueSVMFree(
            env.queue,
            2,
            frees.as_ptr() as *const *const c_void,
            Some(on_svm_free),
            tag as *mut c_void,
            0,
            null(),
            &mut fe,
        ));
        finish(env.queue);
        assert!(wait_for(|| SVM_FREED
            .lock()
            .unwrap()
            .iter()
            .any(|c| c.2 == tag)));
        let calls = SVM_FREED.lock().unwrap().clone();
        assert_eq!(
            calls,
            [(env.queue as usize, vec![a as usize, b as usize], tag)]
        );
        assert_our_event(&env, fe, env.queue, CL_COMMAND_SVM_FREE);
        release_event(fe);
        // Without a callback the vendor frees.
        let c = clSVMAlloc(env.context, CL_MEM_READ_WRITE, 64, 0);
        let one = [c];
        ok(clEnqueueSVMFree(
            env.queue,
            1,
            one.as_ptr() as *const *const c_void,
            None,
            null_mut(),
            0,
            null(),
            null_mut(),
        ));
        finish(env.queue);
        // Bad arguments answer like bare PoCL.
        let bare = Env::new(bare_platform());
        let code = |q| clEnqueueSVMMemcpy(q, CL_TRUE, null_mut(), a, 16, 0, null(), null_mut());
        assert_eq!(code(env.queue), code(bare.queue));
        let code = |q| clEnqueueSVMFree(q, 0, null(), None, null_mut(), 0, null(), null_mut());
        assert_eq!(code(env.queue), code(bare.queue));
    }
}

/// Every enqueue entry point that takes memory objects, called through `t` on queue `q`
/// with otherwise harmless arguments (`m` a buffer, `img` an image); each must be refused
/// at a checked handle. Returns the codes.
fn mem_enqueues(
    t: &cl_icd_dispatch,
    q: cl_command_queue,
    m: cl_mem,
    img: cl_mem,
) -> Vec<(&'static str, cl_int)> {
    let mut out = [0u8; 256];
    let o = out.as_mut_ptr() as *mut c_void;
    let z = [0usize; 3];
    let r1 = [1usize, 1, 1];
    let mut ev = null_mut();
    let mut err = 0;
    let mut v = Vec::new();
    // SAFETY: every call goes through our table; each must be refused at the checked
    // handle before any pointer is used.
    unsafe {
        v.push((
            "ReadBuffer",
            t.clEnqueueReadBuffer.unwrap()(q, m, CL_TRUE, 0, 4, o, 0, null(), &mut ev),
        ));
        v.push((
            "WriteBuffer",
            t.clEnqueueWriteBuffer.unwrap()(q, m, CL_TRUE, 0, 4, o, 0, null(), &mut ev),
        ));
        v.push((
            "CopyBuffer",
            t.clEnqueueCopyBuffer.unwrap()(q, m, m, 0, 8, 4, 0, null(), &mut ev),
        ));
        v.push((
            "ReadBufferRect",
            t.clEnqueueReadBufferRect.unwrap()(
                q,
                m,
                CL_TRUE,
                z.as_ptr(),
                z.as_ptr(),
                r1.as_ptr(),
                0,
                0,
                0,
                0,
                o,
                0,
                null(),
                &mut ev,
            ),
        ));
        v.push((
            "WriteBufferRect",
            t.clEnqueueWriteBufferRect.unwrap()(
                q,
                m,
                CL_TRUE,
                z.as_ptr(),
                z.as_ptr(),
                r1.as_ptr(),
                0,
                0,
                0,
                0,
                o,
                0,
                null(),
                &mut ev,
            ),
        ));
        v.push((
            "CopyBufferRect",
            t.clEnqueueCopyBufferRect.unwrap()(
                q,
                m,
                m,
                z.as_ptr(),
                [8usize, 0, 0].as_ptr(),
                r1.as_ptr(),
                0,
                0,
                0,
                0,
                0,
                null(),
                &mut ev,
            ),
        ));
        v.push((
            "FillBuffer",
            t.clEnqueueFillBuffer.unwrap()(q, m, o, 4, 0, 4, 0, null(), &mut ev),
        ));
        v.push((
            "ReadImage",
            t.clEnqueueReadImage.unwrap()(
                q,
                img,
                CL_TRUE,
                z.as_ptr(),
                r1.as_ptr(),
                0,
                0,
                o,
                0,
                null(),
                &mut ev,
            ),
        ));
        v.push((
            "WriteImage",
            t.clEnqueueWriteImage.unwrap()(
                q,
                img,
                CL_TRUE,
                z.as_ptr(),
                r1.as_ptr(),
                0,
                0,
                o,
                0,
                null(),
                &mut ev,
            ),
        ));
        v.push((
            "CopyImage",
            t.clEnqueueCopyImage.unwrap()(
                q,
                img,
                img,
                z.as_ptr(),
                [1usize, 0, 0].as_ptr(),
                r1.as_ptr(),
                0,
                null(),
                &mut ev,
            ),
        ));
        v.push((
            "FillImage",
            t.clEnqueueFillImage.unwrap()(q, img, o, z.as_ptr(), r1.as_ptr(), 0, null(), &mut ev),
        ));
        v.push((
            "CopyImageToBuffer",
            t.clEnqueueCopyImageToBuffer.unwrap()(
                q,
                img,
                m,
                z.as_ptr(),
                r1.as_ptr(),
                0,
                0,
                null(),
                &mut ev,
            ),
        ));
        v.push((
            "CopyBufferToImage",
            t.clEnqueueCopyBufferToImage.unwrap()(
                q,
                m,
                img,
                0,
                z.as_ptr(),
                r1.as_ptr(),
                0,
                null(),
                &mut ev,
            ),
        ));
        t.clEnqueueMapBuffer.unwrap()(
            q,
            m,
            CL_TRUE,
            CL_MAP_READ,
            0,
            4,
            0,
            null(),
            &mut ev,
            &mut err,
        );
        v.push(("MapBuffer", err));
        let (mut rp, mut sp) = (0, 0);
        t.clEnqueueMapImage.unwrap()(
            q,
            img,
            CL_TRUE,
            CL_MAP_READ,
            z.as_ptr(),
            r1.as_ptr(),
            &mut rp,
            &mut sp,
            0,
            null(),
            &mut ev,
            &mut err,
        );
        v.push(("MapImage", err));
        v.push((
            "UnmapMemObject",
            t.clEnqueueUnmapMemObject.unwrap()(q, m, o, 0, null(), &mut ev),
        ));
        let loc = [o as *const c_void];
        v.push((
            "NativeKernel",
            t.clEnqueueNativeKernel.unwrap()(
                q,
                Some(native_fill),
                o,
                64,
                1,
                &m,
                loc.as_ptr() as *mut *const c_void,
                0,
                null(),
                &mut ev,
            ),
        ));
        v.push((
            "MigrateMemObjects",
            t.clEnqueueMigrateMemObjects.unwrap()(q, 1, &m, 0, 0, null(), &mut ev),
        ));
    }
    assert!(ev.is_null(), "a refused command returned an event");
    v
}

/// The kernel launches, like [`mem_enqueues`].
fn kernel_enqueues(
    t: &cl_icd_dispatch,
    q: cl_command_queue,
    k: cl_kernel,
) -> Vec<(&'static str, cl_int)> {
    let g = [1usize];
    let mut ev = null_mut();
    // SAFETY: as in `mem_enqueues`.
    let v = unsafe {
        vec![
            (
                "NDRangeKernel",
                t.clEnqueueNDRangeKernel.unwrap()(
                    q,
                    k,
                    1,
                    null(),
                    g.as_ptr(),
                    null(),
                    0,
                    null(),
                    &mut ev,
                ),
            ),
            ("Task", t.clEnqueueTask.unwrap()(q, k, 0, null(), &mut ev)),
        ]
    };
    assert!(ev.is_null(), "a refused command returned an event");
    v
}

/// Markers, barriers and SVM commands, like [`mem_enqueues`] (only for bad queues: with a
/// good one these would run).
fn other_enqueues(t: &cl_icd_dispatch, q: cl_command_queue) -> Vec<(&'static str, cl_int)> {
    let mut out = [0u8; 256];
    let o = out.as_mut_ptr() as *mut c_void;
    let mut ev = null_mut();
    let mut svm = [null_mut::<c_void>(); 1];
    let mut svmc = [null::<c_void>(); 1];
    let mut v = Vec::new();
    // SAFETY: as in `mem_enqueues`.
    unsafe {
        v.push(("Marker", t.clEnqueueMarker.unwrap()(q, &mut ev)));
        v.push((
            "MarkerWithWaitList",
            t.clEnqueueMarkerWithWaitList.unwrap()(q, 0, null(), &mut ev),
        ));
        v.push(("Barrier", t.clEnqueueBarrier.unwrap()(q)));
        v.push((
            "BarrierWithWaitList",
            t.clEnqueueBarrierWithWaitList.unwrap()(q, 0, null(), &mut ev),
        ));
        v.push((
            "SVMFree",
            t.clEnqueueSVMFree.unwrap()(
                q,
                1,
                svm.as_mut_ptr(),
                None,
                null_mut(),
                0,
                null(),
                &mut ev,
            ),
        ));
        v.push((
            "SVMMemcpy",
            t.clEnqueueSVMMemcpy.unwrap()(q, CL_TRUE, o, o.add(64), 4, 0, null(), &mut ev),
        ));
        v.push((
            "SVMMemFill",
            t.clEnqueueSVMMemFill.unwrap()(q, o, o, 4, 4, 0, null(), &mut ev),
        ));
        v.push((
            "SVMMap",
            t.clEnqueueSVMMap.unwrap()(q, CL_TRUE, CL_MAP_READ, o, 4, 0, null(), &mut ev),
        ));
        v.push((
            "SVMUnmap",
            t.clEnqueueSVMUnmap.unwrap()(q, o, 0, null(), &mut ev),
        ));
        v.push((
            "SVMMigrateMem",
            t.clEnqueueSVMMigrateMem.unwrap()(q, 1, svmc.as_mut_ptr(), &4, 0, 0, null(), &mut ev),
        ));
    }
    assert!(ev.is_null(), "a refused command returned an event");
    v
}

/// NULL, a stack address, a bare-PoCL queue, a released queue and a context passed as a
/// queue all get CL_INVALID_COMMAND_QUEUE from every enqueue entry point.
#[test]
fn invalid_queue_for_every_enqueue() {
    let env = Env::sp();
    let bare = Env::new(bare_platform());
    let t = table(env.context);
    let m = env.buffer(64);
    let img = image_4x4(&env);
    let prog = env.program(KERNELS);
    let k = env.kernel(prog, "one");
    let mut stack = [0usize; 8];
    let mut gone_err = 0;
    // SAFETY: a queue created and released at once.
    let gone = unsafe {
        clCreateCommandQueueWithProperties(env.context, env.device, null(), &mut gone_err)
    };
    ok(gone_err);
    // SAFETY: releasing it.
    ok(unsafe { clReleaseCommandQueue(gone) });
    for (q, what) in [
        (null_mut(), "NULL"),
        (stack.as_mut_ptr() as cl_command_queue, "stack address"),
        (bare.queue, "bare PoCL queue"),
        (env.context as cl_command_queue, "context as queue"),
        (gone, "released queue"),
    ] {
        let mut codes = mem_enqueues(t, q, m, img);
        codes.extend(kernel_enqueues(t, q, k));
        codes.extend(other_enqueues(t, q));
        assert_eq!(codes.len(), 30);
        for (name, rc) in codes {
            assert_eq!(rc, CL_INVALID_COMMAND_QUEUE, "clEnqueue{name} with {what}");
        }
    }
    // SAFETY: a bare queue through our table, then releasing what the test created.
    unsafe {
        assert_eq!(
            t.clEnqueueWaitForEvents.unwrap()(bare.queue, 1, &null_mut()),
            CL_INVALID_COMMAND_QUEUE
        );
        clReleaseKernel(k);
        clReleaseProgram(prog);
    }
    release_mem(m);
    release_mem(img);
}

/// Foreign or released memory objects and kernels are refused with the kind's code; one
/// from another context gets CL_INVALID_CONTEXT, as bare PoCL says.
#[test]
fn invalid_mem_and_kernel_handles() {
    let env = Env::sp();
    let other = Env::sp();
    let bare = Env::new(bare_platform());
    let t = table(env.context);
    let m = env.buffer(64);
    let img = image_4x4(&env);
    let prog = env.program(KERNELS);
    let k = env.kernel(prog, "one");
    set_arg(k, 0, &m);
    let bare_m = bare.buffer(64);
    let gone = env.buffer(64);
    release_mem(gone);
    let mut stack = [0usize; 8];
    for (bad, what) in [
        (null_mut(), "NULL"),
        (stack.as_mut_ptr() as cl_mem, "stack"),
        (bare_m, "bare PoCL buffer"),
        (gone, "released buffer"),
        (env.queue as cl_mem, "queue as mem"),
    ] {
        for (name, rc) in mem_enqueues(t, env.queue, bad, bad) {
            assert_eq!(rc, CL_INVALID_MEM_OBJECT, "clEnqueue{name} with {what}");
        }
    }
    let bare_prog = bare.program(KERNELS);
    let bare_k = bare.kernel(bare_prog, "one");
    for (bad, what) in [
        (null_mut(), "NULL"),
        (stack.as_mut_ptr() as cl_kernel, "stack"),
        (bare_k, "bare PoCL kernel"),
        (env.queue as cl_kernel, "queue as kernel"),
    ] {
        for (name, rc) in kernel_enqueues(t, env.queue, bad) {
            assert_eq!(rc, CL_INVALID_KERNEL, "clEnqueue{name} with {what}");
        }
    }
    finish(env.queue);
    // Objects of another context.
    let om = other.buffer(64);
    let oprog = other.program(KERNELS);
    let ok_ = other.kernel(oprog, "one");
    set_arg(ok_, 0, &om);
    let bare2 = Env::new(bare_platform());
    let bm2 = bare2.buffer(64);
    let out = [0u8; 64];
    let g = [1usize];
    // SAFETY: valid handles of mismatched contexts, refused before any transfer.
    unsafe {
        let read = |q, m| {
            clEnqueueReadBuffer(
                q,
                m,
                CL_TRUE,
                0,
                4,
                out.as_ptr() as *mut c_void,
                0,
                null(),
                null_mut(),
            )
        };
        assert_eq!(read(env.queue, om), CL_INVALID_CONTEXT);
        assert_eq!(read(env.queue, om), read(bare.queue, bm2));
        assert_eq!(
            clEnqueueCopyBuffer(env.queue, m, om, 0, 0, 4, 0, null(), null_mut()),
            CL_INVALID_CONTEXT
        );
        assert_eq!(
            clEnqueueNDRangeKernel(
                env.queue,
                ok_,
                1,
                null(),
                g.as_ptr(),
                null(),
                0,
                null(),
                null_mut()
            ),
            CL_INVALID_CONTEXT
        );
        assert_eq!(
            clEnqueueTask(env.queue, ok_, 0, null(), null_mut()),
            CL_INVALID_CONTEXT
        );
        assert_eq!(
            clEnqueueMigrateMemObjects(env.queue, 2, [m, om].as_ptr(), 0, 0, null(), null_mut()),
            CL_INVALID_CONTEXT
        );
        // An event of another context in the wait list: the vendor's code, as bare.
        let ou = user_event(&other);
        let bu = user_event(&bare2);
        let w = |q, e: &cl_event| clEnqueueMarkerWithWaitList(q, 1, e, null_mut());
        assert_eq!(w(env.queue, &ou), w(bare.queue, &bu));
        assert_eq!(w(env.queue, &ou), CL_INVALID_CONTEXT);
        complete(ou);
        complete(bu);
        release_event(ou);
        release_event(bu);
        for kk in [k, bare_k, ok_] {
            clReleaseKernel(kk);
        }
        for p in [prog, bare_prog, oprog] {
            clReleaseProgram(p);
        }
    }
    for mm in [m, img, bare_m, om, bm2] {
        release_mem(mm);
    }
}
