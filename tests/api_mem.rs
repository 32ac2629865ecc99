//! Memory objects, SVM and pipes through the real loader, side by side with bare PoCL.
#![allow(deprecated)] // clCreateImage2D/3D are entry points to cover.

mod common;

use common::*;
use opencl_sys::cl_icd::cl_icd_dispatch;
use opencl_sys::*;
use std::ffi::c_void;
use std::ptr::{null, null_mut};
use std::sync::Mutex;

/// A context (no queue) on `p`, released on drop.
struct Ctx {
    context: cl_context,
    device: cl_device_id,
}

impl Ctx {
    fn new(p: cl_platform_id) -> Ctx {
        let device = device(p);
        let props = [
            CL_CONTEXT_PLATFORM as cl_context_properties,
            p as cl_context_properties,
            0,
        ];
        let mut err = 0;
        // SAFETY: valid property list and device.
        let context =
            unsafe { clCreateContext(props.as_ptr(), 1, &device, None, null_mut(), &mut err) };
        ok(err);
        Ctx { context, device }
    }

    fn buffer(&self, flags: cl_mem_flags, size: usize, host: *mut c_void) -> (cl_mem, cl_int) {
        let mut err = 0;
        // SAFETY: the arguments are what the test means to pass; errors come back in `err`.
        let m = unsafe { clCreateBuffer(self.context, flags, size, host, &mut err) };
        (m, err)
    }
}

impl Drop for Ctx {
    fn drop(&mut self) {
        // SAFETY: releasing what `new` created.
        unsafe { clReleaseContext(self.context) };
    }
}

/// Our dispatch table, read from one of our handles exactly as the loader reads it. Calls
/// through it reach the layer with any first argument, which the loader itself would
/// route elsewhere (a bare-PoCL handle) or crash on (a stack address).
fn table(h: *mut c_void) -> &'static cl_icd_dispatch {
    // SAFETY: `h` is one of our live handles; the ICD ABI puts the table pointer first.
    unsafe { &**(h as *const *const cl_icd_dispatch) }
}

fn mem_handle(m: cl_mem, q: cl_mem_info) -> cl_mem {
    info_scalar(|s, v, r| unsafe { clGetMemObjectInfo(m, q, s, v, r) })
}

fn mem_uint(m: cl_mem, q: cl_mem_info) -> cl_uint {
    info_scalar(|s, v, r| unsafe { clGetMemObjectInfo(m, q, s, v, r) })
}

fn release(m: cl_mem) {
    // SAFETY: a handle the test owns.
    ok(unsafe { clReleaseMemObject(m) });
}

fn sub_buffer(m: cl_mem, origin: usize, size: usize) -> (cl_mem, cl_int) {
    let region = cl_buffer_region { origin, size };
    let mut err = 0;
    // SAFETY: a region struct that lives across the call.
    let s = unsafe {
        clCreateSubBuffer(
            m,
            CL_MEM_READ_WRITE,
            CL_BUFFER_CREATE_TYPE_REGION,
            &region as *const _ as *const c_void,
            &mut err,
        )
    };
    (s, err)
}

fn base_align(d: cl_device_id) -> usize {
    let bits: cl_uint = info_scalar(|s, v, r| unsafe {
        clGetDeviceInfo(d, CL_DEVICE_MEM_BASE_ADDR_ALIGN, s, v, r)
    });
    (bits / 8) as usize
}

fn image_support(d: cl_device_id) -> bool {
    let b: cl_bool =
        info_scalar(|s, v, r| unsafe { clGetDeviceInfo(d, CL_DEVICE_IMAGE_SUPPORT, s, v, r) });
    b == CL_TRUE
}

const RGBA8: cl_image_format = cl_image_format {
    image_channel_order: CL_RGBA,
    image_channel_data_type: CL_UNSIGNED_INT8,
};

fn desc(ty: cl_mem_object_type, w: usize, h: usize, buffer: cl_mem) -> cl_image_desc {
    cl_image_desc {
        image_type: ty,
        image_width: w,
        image_height: h,
        image_depth: 0,
        image_array_size: 0,
        image_row_pitch: 0,
        image_slice_pitch: 0,
        num_mip_levels: 0,
        num_samples: 0,
        buffer,
    }
}

#[test]
fn buffer_and_sub_buffer_info_return_our_wrappers() {
    let c = Ctx::new(sp_platform());
    let (buf, err) = c.buffer(CL_MEM_READ_WRITE, 4096, null_mut());
    ok(err);
    assert_eq!(mem_handle(buf, CL_MEM_CONTEXT), c.context);
    assert!(mem_handle(buf, CL_MEM_ASSOCIATED_MEMOBJECT).is_null());
    let align = base_align(c.device);
    let (sub, err) = sub_buffer(buf, align, 256);
    ok(err);
    assert_eq!(
        mem_handle(sub, CL_MEM_ASSOCIATED_MEMOBJECT),
        buf,
        "sub-buffer's parent is the app's buffer"
    );
    assert_eq!(mem_handle(sub, CL_MEM_CONTEXT), c.context);
    let off: usize =
        info_scalar(|s, v, r| unsafe { clGetMemObjectInfo(sub, CL_MEM_OFFSET, s, v, r) });
    assert_eq!(off, align);
    let size: usize =
        info_scalar(|s, v, r| unsafe { clGetMemObjectInfo(sub, CL_MEM_SIZE, s, v, r) });
    assert_eq!(size, 256);
    // The parent outlives the app's release while the sub-buffer exists, and the answer
    // stays our handle.
    release(buf);
    assert_eq!(mem_handle(sub, CL_MEM_ASSOCIATED_MEMOBJECT), buf);
    release(sub);
}

#[test]
fn sub_buffer_round_trip_with_host_memory() {
    // Results without a queue: a USE_HOST_PTR buffer's sub-buffer maps into the same
    // host memory at its origin.
    let c = Ctx::new(sp_platform());
    let align = base_align(c.device).max(64);
    let mut host = vec![0u8; 4 * align];
    let (buf, err) = c.buffer(
        CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR,
        host.len(),
        host.as_mut_ptr() as *mut c_void,
    );
    ok(err);
    let (sub, err) = sub_buffer(buf, align, align);
    ok(err);
    let hp: *mut c_void =
        info_scalar(|s, v, r| unsafe { clGetMemObjectInfo(sub, CL_MEM_HOST_PTR, s, v, r) });
    assert_eq!(hp as usize, host.as_ptr() as usize + align);
    release(sub);
    release(buf);
}

#[test]
fn sub_buffer_round_trip_through_queue() {
    let e = Env::sp();
    let align = base_align(e.device) / 4;
    let buf = e.buffer(64 * 4 + align * 4);
    let data: Vec<u32> = (0..(64 + align as u32)).collect();
    e.write(buf, &data);
    let (sub, err) = sub_buffer(buf, align * 4, 64 * 4);
    ok(err);
    let got: Vec<u32> = e.read(sub, 64);
    assert_eq!(got, data[align..align + 64]);
    let ones = vec![7u32; 64];
    e.write(sub, &ones);
    let whole: Vec<u32> = e.read(buf, 64 + align);
    assert_eq!(&whole[..align], &data[..align]);
    assert_eq!(&whole[align..], &ones[..]);
    release(sub);
    release(buf);
}

#[test]
fn buffer_with_properties_matches_bare() {
    let answers: Vec<(cl_int, Vec<u8>)> = [sp_platform(), bare_platform()]
        .iter()
        .map(|&p| {
            let c = Ctx::new(p);
            let props: [cl_mem_properties; 1] = [0];
            let mut err = 0;
            // SAFETY: an empty, terminated property list.
            let m = unsafe {
                clCreateBufferWithProperties(
                    c.context,
                    props.as_ptr(),
                    CL_MEM_READ_ONLY,
                    64,
                    null_mut(),
                    &mut err,
                )
            };
            if err != CL_SUCCESS {
                return (err, Vec::new());
            }
            let b =
                info_bytes(|s, v, r| unsafe { clGetMemObjectInfo(m, CL_MEM_PROPERTIES, s, v, r) });
            let flags: cl_mem_flags =
                info_scalar(|s, v, r| unsafe { clGetMemObjectInfo(m, CL_MEM_FLAGS, s, v, r) });
            assert_eq!(flags, CL_MEM_READ_ONLY);
            assert_eq!(mem_handle(m, CL_MEM_CONTEXT), c.context);
            release(m);
            (err, b)
        })
        .collect();
    assert_eq!(answers[0], answers[1]);
}

#[test]
fn images_and_image_buffers_return_our_wrappers() {
    let c = Ctx::new(sp_platform());
    if !image_support(c.device) {
        println!("note: device has no image support; image checks skipped");
        return;
    }
    let mut err = 0;
    // 1D image buffer over one of our buffers: the descriptor's handle is unwrapped.
    let (buf, e) = c.buffer(CL_MEM_READ_WRITE, 64 * 4, null_mut());
    ok(e);
    let d = desc(CL_MEM_OBJECT_IMAGE1D_BUFFER, 64, 0, buf);
    // SAFETY: a valid format and descriptor.
    let img = unsafe {
        clCreateImage(
            c.context,
            CL_MEM_READ_WRITE,
            &RGBA8,
            &d,
            null_mut(),
            &mut err,
        )
    };
    ok(err);
    let ib: cl_mem =
        info_scalar(|s, v, r| unsafe { clGetImageInfo(img, CL_IMAGE_BUFFER, s, v, r) });
    assert_eq!(ib, buf, "CL_IMAGE_BUFFER is the app's buffer");
    assert_eq!(mem_handle(img, CL_MEM_ASSOCIATED_MEMOBJECT), buf);
    assert_eq!(mem_handle(img, CL_MEM_CONTEXT), c.context);
    let w: usize = info_scalar(|s, v, r| unsafe { clGetImageInfo(img, CL_IMAGE_WIDTH, s, v, r) });
    assert_eq!(w, 64);
    // The same through clCreateImageWithProperties.
    // SAFETY: as above, with no properties.
    let img2 = unsafe {
        clCreateImageWithProperties(
            c.context,
            null(),
            CL_MEM_READ_WRITE,
            &RGBA8,
            &d,
            null_mut(),
            &mut err,
        )
    };
    ok(err);
    assert_eq!(mem_handle(img2, CL_MEM_ASSOCIATED_MEMOBJECT), buf);
    let ib2: cl_mem =
        info_scalar(|s, v, r| unsafe { clGetImageInfo(img2, CL_IMAGE_BUFFER, s, v, r) });
    assert_eq!(ib2, buf);
    release(img2);
    release(img);
    release(buf);
}

#[test]
fn image_2d_3d_and_formats_match_bare() {
    let mut results = Vec::new();
    for p in [sp_platform(), bare_platform()] {
        let c = Ctx::new(p);
        if !image_support(c.device) {
            println!("note: device has no image support; image checks skipped");
            return;
        }
        let mut n = 0;
        // SAFETY: count query.
        ok(unsafe {
            clGetSupportedImageFormats(
                c.context,
                CL_MEM_READ_WRITE,
                CL_MEM_OBJECT_IMAGE2D,
                0,
                null_mut(),
                &mut n,
            )
        });
        let mut formats = vec![RGBA8; n as usize];
        // SAFETY: room for `n` formats.
        ok(unsafe {
            clGetSupportedImageFormats(
                c.context,
                CL_MEM_READ_WRITE,
                CL_MEM_OBJECT_IMAGE2D,
                n,
                formats.as_mut_ptr(),
                null_mut(),
            )
        });
        let fmt: Vec<(u32, u32)> = formats
            .iter()
            .map(|f| (f.image_channel_order, f.image_channel_data_type))
            .collect();
        let mut err = 0;
        let mut fmt_arg = RGBA8;
        // SAFETY: valid format (the 1.1 prototype takes it as *mut); sizes are values.
        let i2 = unsafe {
            clCreateImage2D(
                c.context,
                CL_MEM_READ_WRITE,
                &mut fmt_arg,
                16,
                8,
                0,
                null_mut(),
                &mut err,
            )
        };
        ok(err);
        // SAFETY: as above.
        let i3 = unsafe {
            clCreateImage3D(
                c.context,
                CL_MEM_READ_ONLY,
                &mut fmt_arg,
                8,
                4,
                2,
                0,
                0,
                null_mut(),
                &mut err,
            )
        };
        ok(err);
        let h: usize =
            info_scalar(|s, v, r| unsafe { clGetImageInfo(i2, CL_IMAGE_HEIGHT, s, v, r) });
        let dp: usize =
            info_scalar(|s, v, r| unsafe { clGetImageInfo(i3, CL_IMAGE_DEPTH, s, v, r) });
        let ib: cl_mem =
            info_scalar(|s, v, r| unsafe { clGetImageInfo(i2, CL_IMAGE_BUFFER, s, v, r) });
        assert!(ib.is_null());
        assert_eq!(mem_handle(i3, CL_MEM_CONTEXT), c.context);
        // A NULL descriptor is the vendor's error to give.
        // SAFETY: NULL descriptor on purpose.
        unsafe {
            clCreateImage(
                c.context,
                CL_MEM_READ_WRITE,
                &RGBA8,
                null(),
                null_mut(),
                &mut err,
            )
        };
        results.push((fmt, h, dp, mem_uint(i2, CL_MEM_TYPE), err));
        release(i2);
        release(i3);
    }
    assert_eq!(results[0], results[1]);
}

#[test]
fn image_descriptor_with_foreign_buffer_is_rejected() {
    let c = Ctx::new(sp_platform());
    let bare = Ctx::new(bare_platform());
    let (bare_buf, err) = bare.buffer(CL_MEM_READ_WRITE, 256, null_mut());
    ok(err);
    let mut stack = 0u64;
    for foreign in [
        bare_buf,
        &mut stack as *mut u64 as cl_mem,
        c.context as cl_mem,
    ] {
        let d = desc(CL_MEM_OBJECT_IMAGE1D_BUFFER, 16, 0, foreign);
        let mut err = 0;
        // SAFETY: the layer must reject the handle before anything reads it.
        let m = unsafe {
            clCreateImage(
                c.context,
                CL_MEM_READ_WRITE,
                &RGBA8,
                &d,
                null_mut(),
                &mut err,
            )
        };
        assert!(m.is_null());
        assert_eq!(err, CL_INVALID_IMAGE_DESCRIPTOR);
    }
    release(bare_buf);
}

/// Each bad-argument case gives the same code on SoftPreempt as on bare PoCL.
#[test]
fn bad_arguments_match_bare() {
    let run = |p: cl_platform_id| -> Vec<cl_int> {
        let c = Ctx::new(p);
        let mut host = [0u8; 64];
        let hp = host.as_mut_ptr() as *mut c_void;
        let mut codes = vec![
            c.buffer(CL_MEM_READ_WRITE, 0, null_mut()).1,
            c.buffer(CL_MEM_READ_WRITE, 64, hp).1,
            c.buffer(CL_MEM_USE_HOST_PTR, 64, null_mut()).1,
            c.buffer(CL_MEM_READ_ONLY | CL_MEM_WRITE_ONLY, 64, null_mut())
                .1,
            c.buffer(CL_MEM_USE_HOST_PTR | CL_MEM_ALLOC_HOST_PTR, 64, hp)
                .1,
        ];
        let (buf, err) = c.buffer(CL_MEM_READ_WRITE, 1024, null_mut());
        ok(err);
        codes.push(sub_buffer(buf, 0, 4096).1);
        codes.push(sub_buffer(buf, 0, 0).1);
        let mut err = 0;
        // SAFETY: NULL region on purpose.
        unsafe {
            clCreateSubBuffer(
                buf,
                CL_MEM_READ_WRITE,
                CL_BUFFER_CREATE_TYPE_REGION,
                null(),
                &mut err,
            )
        };
        codes.push(err);
        // SAFETY: NULL callback on purpose.
        codes.push(unsafe { clSetMemObjectDestructorCallback(buf, None, null_mut()) });
        let mut small = 0u8;
        // SAFETY: a one-byte buffer for a pointer-sized answer.
        codes.push(unsafe {
            clGetMemObjectInfo(
                buf,
                CL_MEM_CONTEXT,
                1,
                &mut small as *mut u8 as *mut c_void,
                null_mut(),
            )
        });
        // SAFETY: an unknown parameter name.
        codes.push(unsafe { clGetMemObjectInfo(buf, 0xdead, 0, null_mut(), &mut 0) });
        // SAFETY: an image query on a buffer.
        codes.push(unsafe { clGetImageInfo(buf, CL_IMAGE_WIDTH, 0, null_mut(), &mut 0) });
        // SAFETY: a pipe query on a buffer.
        codes.push(unsafe { clGetPipeInfo(buf, CL_PIPE_PACKET_SIZE, 0, null_mut(), &mut 0) });
        // SAFETY: zero entries with a non-NULL array.
        let mut f = RGBA8;
        codes.push(unsafe {
            clGetSupportedImageFormats(
                c.context,
                CL_MEM_READ_WRITE,
                CL_MEM_OBJECT_IMAGE2D,
                0,
                &mut f,
                null_mut(),
            )
        });
        release(buf);
        codes
    };
    let sp = run(sp_platform());
    let bare = run(bare_platform());
    assert_eq!(sp, bare);
    assert_eq!(sp[0], CL_INVALID_BUFFER_SIZE);
    assert_eq!(sp[1], CL_INVALID_HOST_PTR);
    assert_eq!(sp[2], CL_INVALID_HOST_PTR);
    assert_eq!(sp[8], CL_INVALID_VALUE, "NULL destructor callback");
    assert_eq!(sp[9], CL_INVALID_VALUE, "param_value_size too small");
}

/// NULL, a stack address, a bare-PoCL handle, a released handle and a context passed as a
/// cl_mem all get CL_INVALID_MEM_OBJECT from every entry point taking a cl_mem.
#[test]
fn invalid_mem_handles() {
    let c = Ctx::new(sp_platform());
    let bare = Ctx::new(bare_platform());
    let (bare_buf, err) = bare.buffer(CL_MEM_READ_WRITE, 64, null_mut());
    ok(err);
    let t = table(c.context);
    let mut stack = [0usize; 8];
    let check = |m: cl_mem, what: &str| {
        let mut out = [0u8; 64];
        let o = out.as_mut_ptr() as *mut c_void;
        let region = cl_buffer_region {
            origin: 0,
            size: 16,
        };
        let mut err = 0;
        // SAFETY: every call is through our table; the layer must reject `m` unread.
        unsafe {
            assert_eq!(
                t.clGetMemObjectInfo.unwrap()(m, CL_MEM_SIZE, 64, o, null_mut()),
                CL_INVALID_MEM_OBJECT,
                "{what}"
            );
            assert_eq!(
                t.clGetImageInfo.unwrap()(m, CL_IMAGE_WIDTH, 64, o, null_mut()),
                CL_INVALID_MEM_OBJECT,
                "{what}"
            );
            assert_eq!(
                t.clGetPipeInfo.unwrap()(m, CL_PIPE_PACKET_SIZE, 64, o, null_mut()),
                CL_INVALID_MEM_OBJECT,
                "{what}"
            );
            assert_eq!(
                t.clRetainMemObject.unwrap()(m),
                CL_INVALID_MEM_OBJECT,
                "{what}"
            );
            assert_eq!(
                t.clReleaseMemObject.unwrap()(m),
                CL_INVALID_MEM_OBJECT,
                "{what}"
            );
            assert_eq!(
                t.clSetMemObjectDestructorCallback.unwrap()(m, Some(on_destroy), null_mut()),
                CL_INVALID_MEM_OBJECT,
                "{what}"
            );
            let s = t.clCreateSubBuffer.unwrap()(
                m,
                0,
                CL_BUFFER_CREATE_TYPE_REGION,
                &region as *const _ as *const c_void,
                &mut err,
            );
            assert!(s.is_null());
            assert_eq!(err, CL_INVALID_MEM_OBJECT, "{what}");
        }
    };
    check(null_mut(), "NULL");
    check(stack.as_mut_ptr() as cl_mem, "stack address");
    check(bare_buf, "bare PoCL buffer");
    check(c.context as cl_mem, "context as cl_mem");
    let (gone, err) = c.buffer(CL_MEM_READ_WRITE, 64, null_mut());
    ok(err);
    release(gone);
    check(gone, "released buffer");
    // Through the loader too: the released wrapper still routes to us.
    // SAFETY: a released handle on purpose.
    assert_eq!(unsafe { clRetainMemObject(gone) }, CL_INVALID_MEM_OBJECT);
    release(bare_buf);
}

#[test]
fn invalid_context_for_creation() {
    let c = Ctx::new(sp_platform());
    let t = table(c.context);
    let mut stack = [0usize; 8];
    let bare = Ctx::new(bare_platform());
    let mut err = 0;
    for bad in [null_mut(), stack.as_mut_ptr() as cl_context, bare.context] {
        // SAFETY: through our table; the layer must reject `bad` unread.
        unsafe {
            assert!(
                t.clCreateBuffer.unwrap()(bad, CL_MEM_READ_WRITE, 64, null_mut(), &mut err)
                    .is_null()
            );
            assert_eq!(err, CL_INVALID_CONTEXT);
            assert!(t.clCreateBufferWithProperties.unwrap()(
                bad,
                null(),
                CL_MEM_READ_WRITE,
                64,
                null_mut(),
                &mut err
            )
            .is_null());
            assert_eq!(err, CL_INVALID_CONTEXT);
            assert!(
                t.clCreateImage2D.unwrap()(bad, 0, &RGBA8, 4, 4, 0, null_mut(), &mut err).is_null()
            );
            assert_eq!(err, CL_INVALID_CONTEXT);
            assert!(t.clCreateImage3D.unwrap()(
                bad,
                0,
                &RGBA8,
                4,
                4,
                4,
                0,
                0,
                null_mut(),
                &mut err
            )
            .is_null());
            assert_eq!(err, CL_INVALID_CONTEXT);
            let d = desc(CL_MEM_OBJECT_IMAGE2D, 4, 4, null_mut());
            assert!(t.clCreateImage.unwrap()(bad, 0, &RGBA8, &d, null_mut(), &mut err).is_null());
            assert_eq!(err, CL_INVALID_CONTEXT);
            assert!(t.clCreateImageWithProperties.unwrap()(
                bad,
                null(),
                0,
                &RGBA8,
                &d,
                null_mut(),
                &mut err
            )
            .is_null());
            assert_eq!(err, CL_INVALID_CONTEXT);
            assert!(t.clCreatePipe.unwrap()(bad, 0, 4, 4, null(), &mut err).is_null());
            assert_eq!(err, CL_INVALID_CONTEXT);
            assert_eq!(
                t.clGetSupportedImageFormats.unwrap()(
                    bad,
                    0,
                    CL_MEM_OBJECT_IMAGE2D,
                    0,
                    null_mut(),
                    &mut 0
                ),
                CL_INVALID_CONTEXT
            );
            assert!(
                t.clSVMAlloc.unwrap()(bad, CL_MEM_READ_WRITE, 64, 0).is_null(),
                "clSVMAlloc: NULL on a bad context"
            );
            // Void: must simply not crash or reach the vendor.
            t.clSVMFree.unwrap()(bad, stack.as_mut_ptr() as *mut c_void);
        }
    }
}

#[test]
fn reference_counts_match_bare() {
    let counts: Vec<Vec<cl_uint>> = [sp_platform(), bare_platform()]
        .iter()
        .map(|&p| {
            let c = Ctx::new(p);
            let (buf, err) = c.buffer(CL_MEM_READ_WRITE, 1024, null_mut());
            ok(err);
            let mut v = vec![mem_uint(buf, CL_MEM_REFERENCE_COUNT)];
            // SAFETY: retains/releases of a live buffer the test owns.
            unsafe {
                ok(clRetainMemObject(buf));
                ok(clRetainMemObject(buf));
                v.push(mem_uint(buf, CL_MEM_REFERENCE_COUNT));
                ok(clReleaseMemObject(buf));
                v.push(mem_uint(buf, CL_MEM_REFERENCE_COUNT));
            }
            let (sub, err) = sub_buffer(buf, 0, 64);
            ok(err);
            v.push(mem_uint(buf, CL_MEM_REFERENCE_COUNT));
            v.push(mem_uint(sub, CL_MEM_REFERENCE_COUNT));
            release(sub);
            v.push(mem_uint(buf, CL_MEM_REFERENCE_COUNT));
            release(buf);
            v.push(mem_uint(buf, CL_MEM_REFERENCE_COUNT));
            release(buf);
            v
        })
        .collect();
    assert_eq!(counts[0], counts[1]);
    assert_eq!(counts[0][..3], [1, 3, 2]);
}

static DESTROYED: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

unsafe extern "C" fn on_destroy(m: cl_mem, user: *mut c_void) {
    DESTROYED.lock().unwrap().push((m as usize, user as usize));
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

#[test]
fn destructor_callbacks_get_app_handle_and_user_data() {
    let c = Ctx::new(sp_platform());
    let (buf, err) = c.buffer(CL_MEM_READ_WRITE, 64, null_mut());
    ok(err);
    let (sub, err) = sub_buffer(buf, 0, 32);
    ok(err);
    // SAFETY: registering a callback with tagged user data on live buffers.
    unsafe {
        ok(clSetMemObjectDestructorCallback(
            buf,
            Some(on_destroy),
            0x1111 as *mut c_void,
        ));
        ok(clSetMemObjectDestructorCallback(
            buf,
            Some(on_destroy),
            0x2222 as *mut c_void,
        ));
        ok(clSetMemObjectDestructorCallback(
            sub,
            Some(on_destroy),
            0x3333 as *mut c_void,
        ));
    }
    let mine = |u: usize| {
        DESTROYED
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.1 == u)
            .copied()
            .collect::<Vec<_>>()
    };
    // The app's last release of the parent does not destroy it: the sub-buffer holds it.
    release(buf);
    release(sub);
    assert!(wait_for(|| mine(0x1111).len() == 1
        && mine(0x2222).len() == 1
        && mine(0x3333).len() == 1));
    assert_eq!(mine(0x1111), [(buf as usize, 0x1111)]);
    assert_eq!(mine(0x2222), [(buf as usize, 0x2222)]);
    assert_eq!(mine(0x3333), [(sub as usize, 0x3333)]);
    // "called in the reverse order of registration".
    let order: Vec<usize> = DESTROYED
        .lock()
        .unwrap()
        .iter()
        .map(|e| e.1)
        .filter(|u| [0x1111, 0x2222].contains(u))
        .collect();
    assert_eq!(order, [0x2222, 0x1111]);
}

#[test]
fn svm_alloc_and_free() {
    let c = Ctx::new(sp_platform());
    let caps: cl_device_svm_capabilities = info_scalar(|s, v, r| unsafe {
        clGetDeviceInfo(c.device, CL_DEVICE_SVM_CAPABILITIES, s, v, r)
    });
    if caps == 0 {
        println!("note: device reports no SVM capabilities; SVM allocation skipped");
        return;
    }
    // SAFETY: a plain coarse-grained allocation on a valid context.
    let p = unsafe { clSVMAlloc(c.context, CL_MEM_READ_WRITE, 4096, 0) };
    assert!(!p.is_null());
    // A buffer over SVM memory reports it.
    let (buf, err) = c.buffer(CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, 4096, p);
    ok(err);
    let uses: cl_bool =
        info_scalar(|s, v, r| unsafe { clGetMemObjectInfo(buf, CL_MEM_USES_SVM_POINTER, s, v, r) });
    assert_eq!(uses, CL_TRUE);
    release(buf);
    // SAFETY: freeing what was allocated above, then a NULL (no action).
    unsafe {
        clSVMFree(c.context, p);
        clSVMFree(c.context, null_mut());
        // Not an allocation (any more): dropped by the layer, never a crash.
        clSVMFree(c.context, p);
        let mut stack = [0u64; 4];
        clSVMFree(c.context, stack.as_mut_ptr() as *mut c_void);
    }
    // Invalid arguments are the vendor's: a size of 0 gives NULL.
    // SAFETY: zero-size request on purpose.
    assert!(unsafe { clSVMAlloc(c.context, CL_MEM_READ_WRITE, 0, 0) }.is_null());
}

#[test]
fn pipes_match_bare() {
    let results: Vec<(cl_int, Vec<u8>)> = [sp_platform(), bare_platform()]
        .iter()
        .map(|&p| {
            let c = Ctx::new(p);
            let mut err = 0;
            // SAFETY: plain values and NULL properties.
            let pipe =
                unsafe { clCreatePipe(c.context, CL_MEM_READ_WRITE, 16, 32, null(), &mut err) };
            if err != CL_SUCCESS {
                return (err, Vec::new());
            }
            assert_eq!(mem_handle(pipe, CL_MEM_CONTEXT), c.context);
            let size =
                info_bytes(|s, v, r| unsafe { clGetPipeInfo(pipe, CL_PIPE_PACKET_SIZE, s, v, r) });
            release(pipe);
            (err, size)
        })
        .collect();
    println!(
        "clCreatePipe: SoftPreempt {:?}, bare {:?}",
        results[0].0, results[1].0
    );
    assert_eq!(results[0], results[1]);
}
