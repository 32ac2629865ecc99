//! Graphics and media interop (OpenGL, Direct3D 10/11, DX9 media surfaces, EGL).
//!
//! The layer does not support any of these APIs: their extensions are filtered out of the
//! lists it reports, and a context on our platform is never created from a GL context, a
//! Direct3D device or a media adapter. Each entry point still checks its handles first
//! (so a bad handle gets its own `CL_INVALID_*`), and then returns the error its
//! extension's specification gives for a context or object that is not from that API.
//! Nothing here reaches the vendor.

// Entry points take the application's raw pointers by nature: they reach only the checked
// helpers of `core::args` and the vendor, never a Rust dereference here.
#![allow(clippy::not_unsafe_ptr_arg_deref, clippy::too_many_arguments)]

use crate::core::cl::*;
use opencl_sys::cl_d3d10::*;
use opencl_sys::cl_d3d11::*;
use opencl_sys::cl_dx9_media_sharing::*;
use opencl_sys::cl_egl::CL_INVALID_EGL_OBJECT_KHR;
use std::ffi::c_void;

use crate::core::args::{property_list, set_out, slice};
use crate::core::error::{CLResult, Code};
use crate::core::events::wait_list;
use crate::core::handle::Obj;
use crate::core::objects::{Context, Mem, Queue};
use crate::core::platform::Platform;

/// A creation call on a valid context: `err` is the extension's error for a context (or
/// resource) that is not shared with that API.
fn refuse_create<H>(context: cl_context, err: Code) -> CLResult<H> {
    // "CL_INVALID_CONTEXT if context is not a valid context."
    Obj::<Context>::check(context)?;
    Err(err)
}

/// A query about a memory object: ours are never created from a GL object.
fn refuse_gl_query(memobj: cl_mem) -> CLResult<()> {
    // "CL_INVALID_MEM_OBJECT if memobj is not a valid OpenCL memory object."
    Obj::<Mem>::check(memobj)?;
    // "CL_INVALID_GL_OBJECT if there is no GL object associated with memobj." (and, for
    // clGetGLTextureInfo, "... no GL texture object associated with memobj.")
    Err(CL_INVALID_GL_OBJECT)
}

/// The acquire/release commands of every interop extension share one shape and one list
/// of errors; only the last one (`err`, the queue's context or the objects are not from
/// that API) differs.
fn refuse_acquire(
    command_queue: cl_command_queue,
    num_objects: cl_uint,
    mem_objects: *const cl_mem,
    num_events: cl_uint,
    event_wait_list: *const cl_event,
    event: *mut cl_event,
    err: Code,
) -> CLResult<()> {
    // "CL_INVALID_COMMAND_QUEUE if command_queue is not a valid command-queue."
    let q = Obj::<Queue>::check(command_queue)?.get();
    // "CL_INVALID_VALUE if num_objects is zero and mem_objects is not a NULL value or if
    // num_objects > 0 and mem_objects is NULL."
    if (num_objects == 0) != mem_objects.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    // "CL_INVALID_MEM_OBJECT if memory objects in mem_objects are not valid OpenCL memory
    // objects [in the context associated with command_queue]."
    for &m in slice(mem_objects, num_objects as usize)? {
        if Obj::<Mem>::check(m)?.get().context != q.context {
            return Err(CL_INVALID_MEM_OBJECT);
        }
    }
    // "CL_INVALID_EVENT_WAIT_LIST if event_wait_list is NULL and num_events_in_wait_list
    // > 0, or event_wait_list is not NULL and num_events_in_wait_list is 0, or if event
    // objects in event_wait_list are not valid events."
    wait_list(num_events, event_wait_list)?;
    if num_objects == 0 {
        // "If num_objects is 0 and mem_objects is NULL the function does nothing and
        // returns CL_SUCCESS." No command, so no event either.
        set_out(event, std::ptr::null_mut());
        return Ok(());
    }
    Err(err)
}

/// Generates acquire/release entry points that only differ in the final error.
macro_rules! refuse_acquire_fns {
    ($($(#[$doc:meta])* $name:ident => $err:expr;)*) => {$(
        $(#[$doc])*
        pub fn $name(
            command_queue: cl_command_queue,
            num_objects: cl_uint,
            mem_objects: *const cl_mem,
            num_events_in_wait_list: cl_uint,
            event_wait_list: *const cl_event,
            event: *mut cl_event,
        ) -> CLResult<()> {
            refuse_acquire(command_queue, num_objects, mem_objects, num_events_in_wait_list, event_wait_list, event, $err)
        }
    )*};
}

refuse_acquire_fns! {
    /// "CL_INVALID_CONTEXT if context associated with command_queue was not created from
    /// an OpenGL context."
    enqueue_acquire_gl_objects => CL_INVALID_CONTEXT;
    /// As clEnqueueAcquireGLObjects.
    enqueue_release_gl_objects => CL_INVALID_CONTEXT;
    /// "CL_INVALID_CONTEXT if context associated with command_queue was not created from
    /// an Direct3D 10 context."
    enqueue_acquire_d3d10_objects_khr => CL_INVALID_CONTEXT;
    /// "CL_INVALID_CONTEXT if context associated with command_queue was not created from
    /// a Direct3D 10 device."
    enqueue_release_d3d10_objects_khr => CL_INVALID_CONTEXT;
    /// "CL_INVALID_CONTEXT if context associated with command_queue was not created from
    /// a Direct3D 11 context."
    enqueue_acquire_d3d11_objects_khr => CL_INVALID_CONTEXT;
    /// As clEnqueueAcquireD3D11ObjectsKHR.
    enqueue_release_d3d11_objects_khr => CL_INVALID_CONTEXT;
    /// "CL_INVALID_CONTEXT if context associated with command_queue was not created from
    /// a device that can share the media surface referenced by mem_objects."
    enqueue_acquire_dx9_media_surfaces_khr => CL_INVALID_CONTEXT;
    /// As clEnqueueAcquireDX9MediaSurfacesKHR.
    enqueue_release_dx9_media_surfaces_khr => CL_INVALID_CONTEXT;
    /// EGL sharing needs no special context: "CL_INVALID_EGL_OBJECT_KHR if memory objects
    /// in mem_objects have not been created from EGL resources."
    enqueue_acquire_egl_objects_khr => CL_INVALID_EGL_OBJECT_KHR;
    /// As clEnqueueAcquireEGLObjectsKHR.
    enqueue_release_egl_objects_khr => CL_INVALID_EGL_OBJECT_KHR;
}

// ---- OpenGL (cl_khr_gl_sharing, cl_khr_gl_event) ----

// "CL_INVALID_CONTEXT if context is not a valid context or was not created from a GL
// context." (the same for every clCreateFromGL* and for clCreateEventFromGLsyncKHR)

pub fn create_from_gl_buffer(
    context: cl_context,
    _flags: cl_mem_flags,
    _bufobj: cl_GLuint,
) -> CLResult<cl_mem> {
    refuse_create(context, CL_INVALID_CONTEXT)
}

pub fn create_from_gl_texture(
    context: cl_context,
    _flags: cl_mem_flags,
    _target: cl_GLenum,
    _miplevel: cl_GLint,
    _texture: cl_GLuint,
) -> CLResult<cl_mem> {
    refuse_create(context, CL_INVALID_CONTEXT)
}

pub fn create_from_gl_texture_2d(
    context: cl_context,
    flags: cl_mem_flags,
    target: cl_GLenum,
    miplevel: cl_GLint,
    texture: cl_GLuint,
) -> CLResult<cl_mem> {
    create_from_gl_texture(context, flags, target, miplevel, texture)
}

pub fn create_from_gl_texture_3d(
    context: cl_context,
    flags: cl_mem_flags,
    target: cl_GLenum,
    miplevel: cl_GLint,
    texture: cl_GLuint,
) -> CLResult<cl_mem> {
    create_from_gl_texture(context, flags, target, miplevel, texture)
}

pub fn create_from_gl_renderbuffer(
    context: cl_context,
    _flags: cl_mem_flags,
    _renderbuffer: cl_GLuint,
) -> CLResult<cl_mem> {
    refuse_create(context, CL_INVALID_CONTEXT)
}

pub fn create_event_from_gl_sync_khr(context: cl_context, _sync: cl_GLsync) -> CLResult<cl_event> {
    refuse_create(context, CL_INVALID_CONTEXT)
}

pub fn get_gl_object_info(
    memobj: cl_mem,
    _gl_object_type: *mut cl_gl_object_type,
    _gl_object_name: *mut cl_GLuint,
) -> CLResult<()> {
    refuse_gl_query(memobj)
}

pub fn get_gl_texture_info(
    memobj: cl_mem,
    _param_name: cl_gl_texture_info,
    _param_value_size: usize,
    _param_value: *mut c_void,
    _param_value_size_ret: *mut usize,
) -> CLResult<()> {
    refuse_gl_query(memobj)
}

pub fn get_gl_context_info_khr(
    properties: *const cl_context_properties,
    param_name: cl_gl_context_info,
    _param_value_size: usize,
    _param_value: *mut c_void,
    _param_value_size_ret: *mut usize,
) -> CLResult<()> {
    let list = property_list(properties)?.unwrap_or(&[]);
    for pair in list.chunks_exact(2) {
        match pair[0] {
            // The same rule as clCreateContext: "CL_INVALID_PLATFORM if ... platform value
            // specified in properties is not a valid platform."
            p if p == CL_CONTEXT_PLATFORM as cl_context_properties => {
                Obj::<Platform>::check(pair[1] as cl_platform_id)?;
            }
            CL_GL_CONTEXT_KHR
            | CL_EGL_DISPLAY_KHR
            | CL_GLX_DISPLAY_KHR
            | CL_WGL_HDC_KHR
            | CL_CGL_SHAREGROUP_KHR => {}
            p if p == CL_CONTEXT_INTEROP_USER_SYNC as cl_context_properties => {}
            // "CL_INVALID_VALUE if an attribute name other than those specified in table
            // 4.5 is specified in properties."
            _ => return Err(CL_INVALID_VALUE),
        }
    }
    // "CL_INVALID_VALUE if param_name is not one of the values listed in the table ..."
    if param_name != CL_CURRENT_DEVICE_FOR_GL_CONTEXT_KHR
        && param_name != CL_DEVICES_FOR_GL_CONTEXT_KHR
    {
        return Err(CL_INVALID_VALUE);
    }
    // "CL_INVALID_OPERATION if a context was specified ... and ... A context or share group
    // object was specified for one of CGL, EGL, GLX, or WGL and the OpenGL implementation
    // does not support that window-system binding API." The layer supports none, so no
    // property list can identify a GL context it could share with.
    Err(CL_INVALID_OPERATION)
}

// ---- Direct3D 10 / 11 (cl_khr_d3d10_sharing, cl_khr_d3d11_sharing) ----

/// The shared checks of the `clGetDeviceIDsFrom*` queries; no device of ours can share
/// with any Direct3D or media adapter.
fn no_devices(
    platform: cl_platform_id,
    values_ok: bool,
    num_entries: cl_uint,
    devices: *mut cl_device_id,
    num_devices: *mut cl_uint,
) -> CLResult<()> {
    // "CL_INVALID_PLATFORM if platform is not a valid platform."
    Obj::<Platform>::check(platform)?;
    // "CL_INVALID_VALUE if d3d_device_source is not a valid value, d3d_device_set is not a
    // valid value, num_entries is equal to zero and devices is not NULL, or if both
    // num_devices and devices are NULL."
    if !values_ok
        || (num_entries == 0 && !devices.is_null())
        || (num_devices.is_null() && devices.is_null())
    {
        return Err(CL_INVALID_VALUE);
    }
    set_out(num_devices, 0);
    // "CL_DEVICE_NOT_FOUND if no OpenCL devices that correspond to d3d_object were found."
    Err(CL_DEVICE_NOT_FOUND)
}

pub fn get_device_ids_from_d3d10_khr(
    platform: cl_platform_id,
    source: cl_d3d10_device_source_khr,
    _d3d_object: *mut c_void,
    set: cl_d3d10_device_set_khr,
    num_entries: cl_uint,
    devices: *mut cl_device_id,
    num_devices: *mut cl_uint,
) -> CLResult<()> {
    let ok = matches!(source, CL_D3D10_DEVICE_KHR | CL_D3D10_DXGI_ADAPTER_KHR)
        && matches!(
            set,
            CL_PREFERRED_DEVICES_FOR_D3D10_KHR | CL_ALL_DEVICES_FOR_D3D10_KHR
        );
    no_devices(platform, ok, num_entries, devices, num_devices)
}

pub fn get_device_ids_from_d3d11_khr(
    platform: cl_platform_id,
    source: cl_d3d11_device_source_khr,
    _d3d_object: *mut c_void,
    set: cl_d3d11_device_set_khr,
    num_entries: cl_uint,
    devices: *mut cl_device_id,
    num_devices: *mut cl_uint,
) -> CLResult<()> {
    let ok = matches!(source, CL_D3D11_DEVICE_KHR | CL_D3D11_DXGI_ADAPTER_KHR)
        && matches!(
            set,
            CL_PREFERRED_DEVICES_FOR_D3D11_KHR | CL_ALL_DEVICES_FOR_D3D11_KHR
        );
    no_devices(platform, ok, num_entries, devices, num_devices)
}

// "CL_INVALID_D3D10_RESOURCE_KHR if resource is not a Direct3D 10 buffer [texture]
// resource, ... or if context was not created against the same Direct3D 10 device from
// which resource was created." (D3D11 the same, with its own code.)

pub fn create_from_d3d10_buffer_khr(
    context: cl_context,
    _flags: cl_mem_flags,
    _resource: ID3D10Buffer_ptr,
) -> CLResult<cl_mem> {
    refuse_create(context, CL_INVALID_D3D10_RESOURCE_KHR)
}

pub fn create_from_d3d10_texture_2d_khr(
    context: cl_context,
    _flags: cl_mem_flags,
    _resource: ID3D10Texture2D_ptr,
    _subresource: cl_uint,
) -> CLResult<cl_mem> {
    refuse_create(context, CL_INVALID_D3D10_RESOURCE_KHR)
}

pub fn create_from_d3d10_texture_3d_khr(
    context: cl_context,
    _flags: cl_mem_flags,
    _resource: ID3D10Texture3D_ptr,
    _subresource: cl_uint,
) -> CLResult<cl_mem> {
    refuse_create(context, CL_INVALID_D3D10_RESOURCE_KHR)
}

pub fn create_from_d3d11_buffer_khr(
    context: cl_context,
    _flags: cl_mem_flags,
    _resource: ID3D11Buffer_ptr,
) -> CLResult<cl_mem> {
    refuse_create(context, CL_INVALID_D3D11_RESOURCE_KHR)
}

pub fn create_from_d3d11_texture_2d_khr(
    context: cl_context,
    _flags: cl_mem_flags,
    _resource: ID3D11Texture2D_ptr,
    _subresource: cl_uint,
) -> CLResult<cl_mem> {
    refuse_create(context, CL_INVALID_D3D11_RESOURCE_KHR)
}

pub fn create_from_d3d11_texture_3d_khr(
    context: cl_context,
    _flags: cl_mem_flags,
    _resource: ID3D11Texture3D_ptr,
    _subresource: cl_uint,
) -> CLResult<cl_mem> {
    refuse_create(context, CL_INVALID_D3D11_RESOURCE_KHR)
}

// ---- DX9 media surfaces (cl_khr_dx9_media_sharing) ----

pub fn get_device_ids_from_dx9_media_adapter_khr(
    platform: cl_platform_id,
    num_media_adapters: cl_uint,
    media_adapter_type: *mut cl_dx9_media_adapter_type_khr,
    media_adapters: *mut c_void,
    media_adapter_set: cl_dx9_media_adapter_set_khr,
    num_entries: cl_uint,
    devices: *mut cl_device_id,
    num_devices: *mut cl_uint,
) -> CLResult<()> {
    Obj::<Platform>::check(platform)?;
    // "CL_INVALID_VALUE if num_media_adapters is zero or if media_adapters_type is NULL or
    // if media_adapters is NULL." / "... if any of the entries in media_adapters_type ...
    // is not a valid value." / "... if media_adapter_set is not a valid value."
    if num_media_adapters == 0 || media_adapter_type.is_null() || media_adapters.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    let types = slice(
        media_adapter_type as *const cl_dx9_media_adapter_type_khr,
        num_media_adapters as usize,
    )?;
    let ok = types.iter().all(|t| {
        matches!(
            *t,
            CL_ADAPTER_D3D9_KHR | CL_ADAPTER_D3D9EX_KHR | CL_ADAPTER_DXVA_KHR
        )
    }) && matches!(
        media_adapter_set,
        CL_PREFERRED_DEVICES_FOR_DX9_MEDIA_ADAPTER_KHR | CL_ALL_DEVICES_FOR_DX9_MEDIA_ADAPTER_KHR
    );
    no_devices(platform, ok, num_entries, devices, num_devices)
}

pub fn create_from_dx9_media_surface_khr(
    context: cl_context,
    _flags: cl_mem_flags,
    _adapter_type: cl_dx9_media_adapter_type_khr,
    _surface_info: *mut c_void,
    _plane: cl_uint,
) -> CLResult<cl_mem> {
    // "CL_INVALID_OPERATION if there are no devices in context that support adapter_type."
    refuse_create(context, CL_INVALID_OPERATION)
}

// ---- EGL (cl_khr_egl_image, cl_khr_egl_event) ----

pub fn create_from_eglimage_khr(
    context: cl_context,
    _egldisplay: CLeglDisplayKHR,
    _egl_image: CLeglImageKHR,
    _flags: cl_mem_flags,
    _properties: *const cl_egl_image_properties_khr,
) -> CLResult<cl_mem> {
    // "CL_INVALID_EGL_OBJECT_KHR if image is not a valid EGLImage object." The layer
    // imports no EGL image, so none is valid for it.
    refuse_create(context, CL_INVALID_EGL_OBJECT_KHR)
}

pub fn create_event_from_egl_sync_khr(
    context: cl_context,
    _sync: CLeglSyncKHR,
    _display: CLeglDisplayKHR,
) -> CLResult<cl_event> {
    // "CL_INVALID_CONTEXT if context is not a valid context, or was not created from a GL
    // context."
    refuse_create(context, CL_INVALID_CONTEXT)
}
