//! Graphics/media interop is not supported by the layer: every entry point checks its
//! handles, then returns the error its extension's specification gives for a context or
//! object that is not from that API. GL and EGL go through the loader's exports; the
//! Direct3D and DX9 entry points (which ocl-icd does not export on Linux) are called
//! through our dispatch table, exactly as a loader that exports them would.
#![allow(deprecated)] // clCreateFromGLTexture2D/3D are entry points to cover.
#![allow(non_snake_case)] // table slots bound to their entry-point names.

mod common;

use common::*;
use opencl_sys::cl_d3d10::*;
use opencl_sys::cl_d3d11::*;
use opencl_sys::cl_dx9_media_sharing::*;
use opencl_sys::cl_egl::*;
use opencl_sys::cl_icd::cl_icd_dispatch;
use opencl_sys::*;
use std::ffi::c_void;
use std::ptr::{null, null_mut};

fn table(h: *mut c_void) -> &'static cl_icd_dispatch {
    // SAFETY: `h` is one of our live handles; the ICD ABI puts the table pointer first.
    unsafe { &**(h as *const *const cl_icd_dispatch) }
}

/// What every create-from-foreign-object call must give: `err` on our valid context, and
/// CL_INVALID_CONTEXT for NULL, a stack address and a bare-PoCL context.
fn check_create<H>(e: &Env, err: cl_int, call: impl Fn(cl_context, &mut cl_int) -> *mut H) {
    let mut code = 0;
    assert!(call(e.context, &mut code).is_null());
    assert_eq!(code, err);
    let bare = Env::new(bare_platform());
    let mut stack = [0usize; 8];
    for bad in [null_mut(), stack.as_mut_ptr() as cl_context, bare.context] {
        let mut code = 0;
        assert!(call(bad, &mut code).is_null());
        assert_eq!(code, CL_INVALID_CONTEXT);
    }
}

type AcquireFn = unsafe extern "C" fn(
    cl_command_queue,
    cl_uint,
    *const cl_mem,
    cl_uint,
    *const cl_event,
    *mut cl_event,
) -> cl_int;

/// The shared acquire/release behaviour: handle and argument errors first, an empty list
/// does nothing, and real objects get `err`.
fn check_acquire(e: &Env, f: AcquireFn, err: cl_int, what: &str) {
    let buf = e.buffer(64);
    let bare = Env::new(bare_platform());
    let other = Env::sp();
    let foreign = other.buffer(64);
    let mut stack = [0usize; 8];
    let mut ev: cl_event = stack.as_mut_ptr() as cl_event;
    // SAFETY: every call is through our table or the loader with the arguments described.
    unsafe {
        assert_eq!(f(e.queue, 1, &buf, 0, null(), null_mut()), err, "{what}");
        assert_eq!(
            f(e.queue, 0, null(), 0, null(), &mut ev),
            CL_SUCCESS,
            "{what}: empty list does nothing"
        );
        assert!(ev.is_null(), "{what}: no command, no event");
        assert_eq!(
            f(e.queue, 1, null(), 0, null(), null_mut()),
            CL_INVALID_VALUE,
            "{what}"
        );
        assert_eq!(
            f(e.queue, 0, &buf, 0, null(), null_mut()),
            CL_INVALID_VALUE,
            "{what}"
        );
        for bad in [
            null_mut(),
            stack.as_mut_ptr() as cl_mem,
            e.context as cl_mem,
            foreign,
        ] {
            assert_eq!(
                f(e.queue, 1, &bad, 0, null(), null_mut()),
                CL_INVALID_MEM_OBJECT,
                "{what}"
            );
        }
        assert_eq!(
            f(e.queue, 1, &buf, 1, null(), null_mut()),
            CL_INVALID_EVENT_WAIT_LIST,
            "{what}"
        );
        let bad_ev = stack.as_mut_ptr() as cl_event;
        assert_eq!(
            f(e.queue, 1, &buf, 1, &bad_ev, null_mut()),
            CL_INVALID_EVENT_WAIT_LIST,
            "{what}"
        );
        for bad in [
            null_mut(),
            stack.as_mut_ptr() as cl_command_queue,
            bare.queue,
            e.context as cl_command_queue,
        ] {
            assert_eq!(
                f(bad, 1, &buf, 0, null(), null_mut()),
                CL_INVALID_COMMAND_QUEUE,
                "{what}"
            );
        }
        ok(clReleaseMemObject(foreign));
        ok(clReleaseMemObject(buf));
    }
}

#[test]
fn gl_objects_are_refused() {
    let e = Env::sp();
    let c = e.context;
    let t = table(c);
    let mut err = 0;
    // SAFETY: plain values and our valid context through the loader's exports; bad
    // contexts only through our table (the loader would dereference a stack address).
    unsafe {
        assert!(clCreateFromGLBuffer(c, CL_MEM_READ_WRITE, 1, &mut err).is_null());
        assert_eq!(err, CL_INVALID_CONTEXT);
        assert!(clCreateFromGLTexture(c, CL_MEM_READ_WRITE, 0x0DE1, 0, 1, &mut err).is_null());
        assert_eq!(err, CL_INVALID_CONTEXT);
        assert!(clCreateFromGLTexture2D(c, CL_MEM_READ_WRITE, 0x0DE1, 0, 1, &mut err).is_null());
        assert_eq!(err, CL_INVALID_CONTEXT);
        assert!(clCreateFromGLTexture3D(c, CL_MEM_READ_WRITE, 0x806F, 0, 1, &mut err).is_null());
        assert_eq!(err, CL_INVALID_CONTEXT);
        assert!(clCreateFromGLRenderbuffer(c, CL_MEM_READ_WRITE, 1, &mut err).is_null());
        assert_eq!(err, CL_INVALID_CONTEXT);
        assert!(clCreateEventFromGLsyncKHR(c, 0x1234 as cl_GLsync, &mut err).is_null());
        assert_eq!(err, CL_INVALID_CONTEXT);
        check_create(&e, CL_INVALID_CONTEXT, |c, err| {
            t.clCreateFromGLBuffer.unwrap()(c, 0, 1, err)
        });
        check_create(&e, CL_INVALID_CONTEXT, |c, err| {
            t.clCreateFromGLTexture.unwrap()(c, 0, 0x0DE1, 0, 1, err)
        });
        check_create(&e, CL_INVALID_CONTEXT, |c, err| {
            t.clCreateFromGLTexture2D.unwrap()(c, 0, 0x0DE1, 0, 1, err)
        });
        check_create(&e, CL_INVALID_CONTEXT, |c, err| {
            t.clCreateFromGLTexture3D.unwrap()(c, 0, 0x806F, 0, 1, err)
        });
        check_create(&e, CL_INVALID_CONTEXT, |c, err| {
            t.clCreateFromGLRenderbuffer.unwrap()(c, 0, 1, err)
        });
        check_create(&e, CL_INVALID_CONTEXT, |c, err| {
            t.clCreateEventFromGLsyncKHR.unwrap()(c, 0x1234 as cl_GLsync, err)
        });
    }
}

#[test]
fn gl_queries_on_plain_buffers() {
    let e = Env::sp();
    let buf = e.buffer(64);
    let t = table(e.context);
    let (mut ty, mut name) = (0, 0);
    let mut stack = [0usize; 8];
    // SAFETY: valid out-pointers; bad handles only through our table.
    unsafe {
        assert_eq!(
            clGetGLObjectInfo(buf, &mut ty, &mut name),
            CL_INVALID_GL_OBJECT
        );
        assert_eq!(
            clGetGLTextureInfo(buf, CL_GL_TEXTURE_TARGET, 0, null_mut(), &mut 0),
            CL_INVALID_GL_OBJECT
        );
        for bad in [
            null_mut(),
            stack.as_mut_ptr() as cl_mem,
            e.context as cl_mem,
        ] {
            assert_eq!(
                t.clGetGLObjectInfo.unwrap()(bad, &mut ty, &mut name),
                CL_INVALID_MEM_OBJECT
            );
            assert_eq!(
                t.clGetGLTextureInfo.unwrap()(bad, CL_GL_TEXTURE_TARGET, 0, null_mut(), &mut 0),
                CL_INVALID_MEM_OBJECT
            );
        }
        ok(clReleaseMemObject(buf));
    }
}

#[test]
fn gl_acquire_release() {
    let e = Env::sp();
    let t = table(e.context);
    let buf = e.buffer(64);
    // SAFETY: valid queue and buffer through the loader's exports.
    unsafe {
        assert_eq!(
            clEnqueueAcquireGLObjects(e.queue, 1, &buf, 0, null(), null_mut()),
            CL_INVALID_CONTEXT
        );
        assert_eq!(
            clEnqueueReleaseGLObjects(e.queue, 1, &buf, 0, null(), null_mut()),
            CL_INVALID_CONTEXT
        );
        ok(clReleaseMemObject(buf));
    }
    check_acquire(
        &e,
        t.clEnqueueAcquireGLObjects.unwrap(),
        CL_INVALID_CONTEXT,
        "clEnqueueAcquireGLObjects",
    );
    check_acquire(
        &e,
        t.clEnqueueReleaseGLObjects.unwrap(),
        CL_INVALID_CONTEXT,
        "clEnqueueReleaseGLObjects",
    );
}

#[test]
fn gl_context_info() {
    let p = sp_platform();
    let plat = CL_CONTEXT_PLATFORM as cl_context_properties;
    let query = |props: &[cl_context_properties], name| {
        let mut d: cl_device_id = null_mut();
        // SAFETY: a terminated property list and room for one device.
        unsafe {
            clGetGLContextInfoKHR(
                props.as_ptr(),
                name,
                8,
                &mut d as *mut _ as *mut c_void,
                null_mut(),
            )
        }
    };
    let glx = [
        plat,
        p as isize,
        CL_GL_CONTEXT_KHR,
        0x1000,
        CL_GLX_DISPLAY_KHR,
        0x2000,
        0,
    ];
    assert_eq!(
        query(&glx, CL_CURRENT_DEVICE_FOR_GL_CONTEXT_KHR),
        CL_INVALID_OPERATION
    );
    assert_eq!(
        query(&glx, CL_DEVICES_FOR_GL_CONTEXT_KHR),
        CL_INVALID_OPERATION
    );
    assert_eq!(
        query(&[plat, p as isize, 0], CL_DEVICES_FOR_GL_CONTEXT_KHR),
        CL_INVALID_OPERATION
    );
    assert_eq!(query(&glx, 0x1234), CL_INVALID_VALUE, "unknown param_name");
    assert_eq!(
        query(
            &[plat, p as isize, 0x7777, 1, 0],
            CL_DEVICES_FOR_GL_CONTEXT_KHR
        ),
        CL_INVALID_VALUE,
        "unknown attribute"
    );
}

#[test]
fn d3d_objects_are_refused() {
    let e = Env::sp();
    let t = table(e.context);
    let r = 0x1000 as *mut c_void;
    let clCreateFromD3D10BufferKHR = t.clCreateFromD3D10BufferKHR.unwrap();
    let clCreateFromD3D10Texture2DKHR = t.clCreateFromD3D10Texture2DKHR.unwrap();
    let clCreateFromD3D10Texture3DKHR = t.clCreateFromD3D10Texture3DKHR.unwrap();
    let clCreateFromD3D11BufferKHR = t.clCreateFromD3D11BufferKHR.unwrap();
    let clCreateFromD3D11Texture2DKHR = t.clCreateFromD3D11Texture2DKHR.unwrap();
    let clCreateFromD3D11Texture3DKHR = t.clCreateFromD3D11Texture3DKHR.unwrap();
    let clCreateFromDX9MediaSurfaceKHR = t.clCreateFromDX9MediaSurfaceKHR.unwrap();
    // SAFETY: through our table; the resource pointers are never read.
    unsafe {
        check_create(&e, CL_INVALID_D3D10_RESOURCE_KHR, |c, err| {
            clCreateFromD3D10BufferKHR(c, 0, r, err)
        });
        check_create(&e, CL_INVALID_D3D10_RESOURCE_KHR, |c, err| {
            clCreateFromD3D10Texture2DKHR(c, 0, r, 0, err)
        });
        check_create(&e, CL_INVALID_D3D10_RESOURCE_KHR, |c, err| {
            clCreateFromD3D10Texture3DKHR(c, 0, r, 0, err)
        });
        check_create(&e, CL_INVALID_D3D11_RESOURCE_KHR, |c, err| {
            clCreateFromD3D11BufferKHR(c, 0, r, err)
        });
        check_create(&e, CL_INVALID_D3D11_RESOURCE_KHR, |c, err| {
            clCreateFromD3D11Texture2DKHR(c, 0, r, 0, err)
        });
        check_create(&e, CL_INVALID_D3D11_RESOURCE_KHR, |c, err| {
            clCreateFromD3D11Texture3DKHR(c, 0, r, 0, err)
        });
        check_create(&e, CL_INVALID_OPERATION, |c, err| {
            clCreateFromDX9MediaSurfaceKHR(c, 0, CL_ADAPTER_D3D9_KHR, r, 0, err)
        });
    }
    let clEnqueueAcquireD3D10ObjectsKHR = t.clEnqueueAcquireD3D10ObjectsKHR.unwrap();
    check_acquire(
        &e,
        clEnqueueAcquireD3D10ObjectsKHR,
        CL_INVALID_CONTEXT,
        "clEnqueueAcquireD3D10ObjectsKHR",
    );
    // SAFETY: an empty list on a valid queue.
    assert_eq!(
        unsafe { clEnqueueAcquireD3D10ObjectsKHR(e.queue, 0, null(), 0, null(), null_mut()) },
        CL_SUCCESS
    );
    let clEnqueueReleaseD3D10ObjectsKHR = t.clEnqueueReleaseD3D10ObjectsKHR.unwrap();
    check_acquire(
        &e,
        clEnqueueReleaseD3D10ObjectsKHR,
        CL_INVALID_CONTEXT,
        "clEnqueueReleaseD3D10ObjectsKHR",
    );
    // SAFETY: an empty list on a valid queue.
    assert_eq!(
        unsafe { clEnqueueReleaseD3D10ObjectsKHR(e.queue, 0, null(), 0, null(), null_mut()) },
        CL_SUCCESS
    );
    let clEnqueueAcquireD3D11ObjectsKHR = t.clEnqueueAcquireD3D11ObjectsKHR.unwrap();
    check_acquire(
        &e,
        clEnqueueAcquireD3D11ObjectsKHR,
        CL_INVALID_CONTEXT,
        "clEnqueueAcquireD3D11ObjectsKHR",
    );
    // SAFETY: an empty list on a valid queue.
    assert_eq!(
        unsafe { clEnqueueAcquireD3D11ObjectsKHR(e.queue, 0, null(), 0, null(), null_mut()) },
        CL_SUCCESS
    );
    let clEnqueueReleaseD3D11ObjectsKHR = t.clEnqueueReleaseD3D11ObjectsKHR.unwrap();
    check_acquire(
        &e,
        clEnqueueReleaseD3D11ObjectsKHR,
        CL_INVALID_CONTEXT,
        "clEnqueueReleaseD3D11ObjectsKHR",
    );
    // SAFETY: an empty list on a valid queue.
    assert_eq!(
        unsafe { clEnqueueReleaseD3D11ObjectsKHR(e.queue, 0, null(), 0, null(), null_mut()) },
        CL_SUCCESS
    );
    let clEnqueueAcquireDX9MediaSurfacesKHR = t.clEnqueueAcquireDX9MediaSurfacesKHR.unwrap();
    check_acquire(
        &e,
        clEnqueueAcquireDX9MediaSurfacesKHR,
        CL_INVALID_CONTEXT,
        "clEnqueueAcquireDX9MediaSurfacesKHR",
    );
    // SAFETY: an empty list on a valid queue.
    assert_eq!(
        unsafe { clEnqueueAcquireDX9MediaSurfacesKHR(e.queue, 0, null(), 0, null(), null_mut()) },
        CL_SUCCESS
    );
    let clEnqueueReleaseDX9MediaSurfacesKHR = t.clEnqueueReleaseDX9MediaSurfacesKHR.unwrap();
    check_acquire(
        &e,
        clEnqueueReleaseDX9MediaSurfacesKHR,
        CL_INVALID_CONTEXT,
        "clEnqueueReleaseDX9MediaSurfacesKHR",
    );
    // SAFETY: an empty list on a valid queue.
    assert_eq!(
        unsafe { clEnqueueReleaseDX9MediaSurfacesKHR(e.queue, 0, null(), 0, null(), null_mut()) },
        CL_SUCCESS
    );
}

#[test]
fn d3d_and_dx9_device_queries_find_nothing() {
    let p = sp_platform();
    let t = table(p);
    let obj = 0x1000 as *mut c_void;
    let mut stack = [0usize; 8];
    let mut n: cl_uint = 99;
    let mut d: cl_device_id = null_mut();
    // SAFETY: through our table; the Direct3D objects are never read.
    unsafe {
        let clGetDeviceIDsFromD3D10KHR = t.clGetDeviceIDsFromD3D10KHR.unwrap();
        assert_eq!(
            clGetDeviceIDsFromD3D10KHR(
                p,
                CL_D3D10_DEVICE_KHR,
                obj,
                CL_ALL_DEVICES_FOR_D3D10_KHR,
                0,
                null_mut(),
                &mut n
            ),
            CL_DEVICE_NOT_FOUND
        );
        assert_eq!(n, 0);
        assert_eq!(
            clGetDeviceIDsFromD3D10KHR(
                p,
                0x1,
                obj,
                CL_ALL_DEVICES_FOR_D3D10_KHR,
                0,
                null_mut(),
                &mut n
            ),
            CL_INVALID_VALUE
        );
        assert_eq!(
            clGetDeviceIDsFromD3D10KHR(p, CL_D3D10_DEVICE_KHR, obj, 0x1, 0, null_mut(), &mut n),
            CL_INVALID_VALUE
        );
        assert_eq!(
            clGetDeviceIDsFromD3D10KHR(
                p,
                CL_D3D10_DEVICE_KHR,
                obj,
                CL_ALL_DEVICES_FOR_D3D10_KHR,
                0,
                &mut d,
                &mut n
            ),
            CL_INVALID_VALUE
        );
        assert_eq!(
            clGetDeviceIDsFromD3D10KHR(
                p,
                CL_D3D10_DEVICE_KHR,
                obj,
                CL_ALL_DEVICES_FOR_D3D10_KHR,
                1,
                null_mut(),
                null_mut()
            ),
            CL_INVALID_VALUE
        );
        let clGetDeviceIDsFromD3D11KHR = t.clGetDeviceIDsFromD3D11KHR.unwrap();
        n = 99;
        assert_eq!(
            clGetDeviceIDsFromD3D11KHR(
                p,
                CL_D3D11_DXGI_ADAPTER_KHR,
                obj,
                CL_PREFERRED_DEVICES_FOR_D3D11_KHR,
                1,
                &mut d,
                &mut n
            ),
            CL_DEVICE_NOT_FOUND
        );
        assert_eq!(n, 0);
        assert_eq!(
            clGetDeviceIDsFromD3D11KHR(
                p,
                CL_D3D10_DEVICE_KHR,
                obj,
                CL_ALL_DEVICES_FOR_D3D11_KHR,
                0,
                null_mut(),
                &mut n
            ),
            CL_INVALID_VALUE
        );
        let clGetDeviceIDsFromDX9MediaAdapterKHR = t.clGetDeviceIDsFromDX9MediaAdapterKHR.unwrap();
        let mut types = [CL_ADAPTER_D3D9EX_KHR];
        let set = CL_PREFERRED_DEVICES_FOR_DX9_MEDIA_ADAPTER_KHR;
        assert_eq!(
            clGetDeviceIDsFromDX9MediaAdapterKHR(
                p,
                1,
                types.as_mut_ptr(),
                obj,
                set,
                0,
                null_mut(),
                &mut n
            ),
            CL_DEVICE_NOT_FOUND
        );
        assert_eq!(
            clGetDeviceIDsFromDX9MediaAdapterKHR(
                p,
                0,
                types.as_mut_ptr(),
                obj,
                set,
                0,
                null_mut(),
                &mut n
            ),
            CL_INVALID_VALUE
        );
        assert_eq!(
            clGetDeviceIDsFromDX9MediaAdapterKHR(p, 1, null_mut(), obj, set, 0, null_mut(), &mut n),
            CL_INVALID_VALUE
        );
        assert_eq!(
            clGetDeviceIDsFromDX9MediaAdapterKHR(
                p,
                1,
                types.as_mut_ptr(),
                obj,
                0x1,
                0,
                null_mut(),
                &mut n
            ),
            CL_INVALID_VALUE
        );
        types[0] = 0x1;
        assert_eq!(
            clGetDeviceIDsFromDX9MediaAdapterKHR(
                p,
                1,
                types.as_mut_ptr(),
                obj,
                set,
                0,
                null_mut(),
                &mut n
            ),
            CL_INVALID_VALUE
        );
        types[0] = CL_ADAPTER_D3D9_KHR;
        for bad in [
            null_mut(),
            stack.as_mut_ptr() as cl_platform_id,
            bare_platform(),
        ] {
            assert_eq!(
                clGetDeviceIDsFromD3D10KHR(
                    bad,
                    CL_D3D10_DEVICE_KHR,
                    obj,
                    CL_ALL_DEVICES_FOR_D3D10_KHR,
                    0,
                    null_mut(),
                    &mut n
                ),
                CL_INVALID_PLATFORM
            );
            assert_eq!(
                clGetDeviceIDsFromD3D11KHR(
                    bad,
                    CL_D3D11_DEVICE_KHR,
                    obj,
                    CL_ALL_DEVICES_FOR_D3D11_KHR,
                    0,
                    null_mut(),
                    &mut n
                ),
                CL_INVALID_PLATFORM
            );
            assert_eq!(
                clGetDeviceIDsFromDX9MediaAdapterKHR(
                    bad,
                    1,
                    types.as_mut_ptr(),
                    obj,
                    set,
                    0,
                    null_mut(),
                    &mut n
                ),
                CL_INVALID_PLATFORM
            );
        }
    }
}

#[test]
fn egl_objects_are_refused() {
    let e = Env::sp();
    let t = table(e.context);
    let (display, image, sync) = (
        0x1000 as CLeglDisplayKHR,
        0x2000 as CLeglImageKHR,
        0x3000 as CLeglSyncKHR,
    );
    let buf = e.buffer(64);
    let mut err = 0;
    // SAFETY: the EGL handles are never read; valid handles through the loader's exports,
    // bad ones only through our table.
    unsafe {
        assert!(clCreateFromEGLImageKHR(
            e.context,
            display,
            image,
            CL_MEM_READ_ONLY,
            null(),
            &mut err
        )
        .is_null());
        assert_eq!(err, CL_INVALID_EGL_OBJECT_KHR);
        assert!(clCreateEventFromEGLSyncKHR(e.context, sync, display, &mut err).is_null());
        assert_eq!(err, CL_INVALID_CONTEXT);
        assert_eq!(
            clEnqueueAcquireEGLObjectsKHR(e.queue, 1, &buf, 0, null(), null_mut()),
            CL_INVALID_EGL_OBJECT_KHR
        );
        assert_eq!(
            clEnqueueReleaseEGLObjectsKHR(e.queue, 1, &buf, 0, null(), null_mut()),
            CL_INVALID_EGL_OBJECT_KHR
        );
        ok(clReleaseMemObject(buf));
        check_create(&e, CL_INVALID_EGL_OBJECT_KHR, |c, err| {
            t.clCreateFromEGLImageKHR.unwrap()(c, display, image, 0, null(), err)
        });
        check_create(&e, CL_INVALID_CONTEXT, |c, err| {
            t.clCreateEventFromEGLSyncKHR.unwrap()(c, sync, display, err)
        });
    }
    check_acquire(
        &e,
        t.clEnqueueAcquireEGLObjectsKHR.unwrap(),
        CL_INVALID_EGL_OBJECT_KHR,
        "clEnqueueAcquireEGLObjectsKHR",
    );
    check_acquire(
        &e,
        t.clEnqueueReleaseEGLObjectsKHR.unwrap(),
        CL_INVALID_EGL_OBJECT_KHR,
        "clEnqueueReleaseEGLObjectsKHR",
    );
}
