//! `interop` entry points.

use crate::core::cl::*;
use std::ffi::c_void;

use crate::core::error::CLResult;

/// clCreateFromGLBuffer: STUB, not yet forwarded.
pub fn create_from_gl_buffer(_context: cl_context, _flags: cl_mem_flags, _bufobj: cl_GLuint) -> CLResult<cl_mem> {
    Err(CL_INVALID_OPERATION)
}

/// clCreateFromGLTexture2D: STUB, not yet forwarded.
pub fn create_from_gl_texture_2d(_context: cl_context, _flags: cl_mem_flags, _target: cl_GLenum, _miplevel: cl_GLint, _texture: cl_GLuint) -> CLResult<cl_mem> {
    Err(CL_INVALID_OPERATION)
}

/// clCreateFromGLTexture3D: STUB, not yet forwarded.
pub fn create_from_gl_texture_3d(_context: cl_context, _flags: cl_mem_flags, _target: cl_GLenum, _miplevel: cl_GLint, _texture: cl_GLuint) -> CLResult<cl_mem> {
    Err(CL_INVALID_OPERATION)
}

/// clCreateFromGLRenderbuffer: STUB, not yet forwarded.
pub fn create_from_gl_renderbuffer(_context: cl_context, _flags: cl_mem_flags, _renderbuffer: cl_GLuint) -> CLResult<cl_mem> {
    Err(CL_INVALID_OPERATION)
}

/// clGetGLObjectInfo: STUB, not yet forwarded.
pub fn get_gl_object_info(_memobj: cl_mem, _gl_object_type: *mut cl_gl_object_type, _gl_object_name: *mut cl_GLuint) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clGetGLTextureInfo: STUB, not yet forwarded.
pub fn get_gl_texture_info(_memobj: cl_mem, _param_name: cl_gl_texture_info, _param_value_size: usize, _param_value: *mut c_void, _param_value_size_ret: *mut usize) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueAcquireGLObjects: STUB, not yet forwarded.
pub fn enqueue_acquire_gl_objects(_command_queue: cl_command_queue, _num_objects: cl_uint, _mem_objects: *const cl_mem, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueReleaseGLObjects: STUB, not yet forwarded.
pub fn enqueue_release_gl_objects(_command_queue: cl_command_queue, _num_objects: cl_uint, _mem_objects: *const cl_mem, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clGetGLContextInfoKHR: STUB, not yet forwarded.
pub fn get_gl_context_info_khr(_properties: *const cl_context_properties, _param_name: cl_gl_context_info, _param_value_size: usize, _param_value: *mut c_void, _param_value_size_ret: *mut usize) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clGetDeviceIDsFromD3D10KHR: STUB, not yet forwarded.
pub fn get_device_ids_from_d3d10_khr(_platform: cl_platform_id, _d3d_device_source: cl_d3d10_device_source_khr, _d3d_object: *mut c_void, _d3d_device_set: cl_d3d10_device_set_khr, _num_entries: cl_uint, _devices: *mut cl_device_id, _num_devices: *mut cl_uint) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clCreateFromD3D10BufferKHR: STUB, not yet forwarded.
pub fn create_from_d3d10_buffer_khr(_context: cl_context, _flags: cl_mem_flags, _resource: ID3D10Buffer_ptr) -> CLResult<cl_mem> {
    Err(CL_INVALID_OPERATION)
}

/// clCreateFromD3D10Texture2DKHR: STUB, not yet forwarded.
pub fn create_from_d3d10_texture_2d_khr(_context: cl_context, _flags: cl_mem_flags, _resource: ID3D10Texture2D_ptr, _subresource: cl_uint) -> CLResult<cl_mem> {
    Err(CL_INVALID_OPERATION)
}

/// clCreateFromD3D10Texture3DKHR: STUB, not yet forwarded.
pub fn create_from_d3d10_texture_3d_khr(_context: cl_context, _flags: cl_mem_flags, _resource: ID3D10Texture3D_ptr, _subresource: cl_uint) -> CLResult<cl_mem> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueAcquireD3D10ObjectsKHR: STUB, not yet forwarded.
pub fn enqueue_acquire_d3d10_objects_khr(_command_queue: cl_command_queue, _num_objects: cl_uint, _mem_objects: *const cl_mem, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueReleaseD3D10ObjectsKHR: STUB, not yet forwarded.
pub fn enqueue_release_d3d10_objects_khr(_command_queue: cl_command_queue, _num_objects: cl_uint, _mem_objects: *const cl_mem, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clCreateEventFromGLsyncKHR: STUB, not yet forwarded.
pub fn create_event_from_gl_sync_khr(_context: cl_context, _sync: cl_GLsync) -> CLResult<cl_event> {
    Err(CL_INVALID_OPERATION)
}

/// clCreateFromGLTexture: STUB, not yet forwarded.
pub fn create_from_gl_texture(_context: cl_context, _flags: cl_mem_flags, _target: cl_GLenum, _miplevel: cl_GLint, _texture: cl_GLuint) -> CLResult<cl_mem> {
    Err(CL_INVALID_OPERATION)
}

/// clGetDeviceIDsFromD3D11KHR: STUB, not yet forwarded.
pub fn get_device_ids_from_d3d11_khr(_platform: cl_platform_id, _d3d_device_source: cl_d3d11_device_source_khr, _d3d_object: *mut c_void, _d3d_device_set: cl_d3d11_device_set_khr, _num_entries: cl_uint, _devices: *mut cl_device_id, _num_devices: *mut cl_uint) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clCreateFromD3D11BufferKHR: STUB, not yet forwarded.
pub fn create_from_d3d11_buffer_khr(_context: cl_context, _flags: cl_mem_flags, _resource: ID3D11Buffer_ptr) -> CLResult<cl_mem> {
    Err(CL_INVALID_OPERATION)
}

/// clCreateFromD3D11Texture2DKHR: STUB, not yet forwarded.
pub fn create_from_d3d11_texture_2d_khr(_context: cl_context, _flags: cl_mem_flags, _resource: ID3D11Texture2D_ptr, _subresource: cl_uint) -> CLResult<cl_mem> {
    Err(CL_INVALID_OPERATION)
}

/// clCreateFromD3D11Texture3DKHR: STUB, not yet forwarded.
pub fn create_from_d3d11_texture_3d_khr(_context: cl_context, _flags: cl_mem_flags, _resource: ID3D11Texture3D_ptr, _subresource: cl_uint) -> CLResult<cl_mem> {
    Err(CL_INVALID_OPERATION)
}

/// clCreateFromDX9MediaSurfaceKHR: STUB, not yet forwarded.
pub fn create_from_dx9_media_surface_khr(_context: cl_context, _flags: cl_mem_flags, _adapter_type: cl_dx9_media_adapter_type_khr, _surface_info: *mut c_void, _plane: cl_uint) -> CLResult<cl_mem> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueAcquireD3D11ObjectsKHR: STUB, not yet forwarded.
pub fn enqueue_acquire_d3d11_objects_khr(_command_queue: cl_command_queue, _num_objects: cl_uint, _mem_objects: *const cl_mem, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueReleaseD3D11ObjectsKHR: STUB, not yet forwarded.
pub fn enqueue_release_d3d11_objects_khr(_command_queue: cl_command_queue, _num_objects: cl_uint, _mem_objects: *const cl_mem, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clGetDeviceIDsFromDX9MediaAdapterKHR: STUB, not yet forwarded.
pub fn get_device_ids_from_dx9_media_adapter_khr(_platform: cl_platform_id, _num_media_adapters: cl_uint, _media_adapter_type: *mut cl_dx9_media_adapter_type_khr, _media_adapters: *mut c_void, _media_adapter_set: cl_dx9_media_adapter_set_khr, _num_entries: cl_uint, _devices: *mut cl_device_id, _num_devices: *mut cl_uint) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueAcquireDX9MediaSurfacesKHR: STUB, not yet forwarded.
pub fn enqueue_acquire_dx9_media_surfaces_khr(_command_queue: cl_command_queue, _num_objects: cl_uint, _mem_objects: *const cl_mem, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueReleaseDX9MediaSurfacesKHR: STUB, not yet forwarded.
pub fn enqueue_release_dx9_media_surfaces_khr(_command_queue: cl_command_queue, _num_objects: cl_uint, _mem_objects: *const cl_mem, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clCreateFromEGLImageKHR: STUB, not yet forwarded.
pub fn create_from_eglimage_khr(_context: cl_context, _egldisplay: CLeglDisplayKHR, _egl_image: CLeglImageKHR, _flags: cl_mem_flags, _properties: *const cl_egl_image_properties_khr) -> CLResult<cl_mem> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueAcquireEGLObjectsKHR: STUB, not yet forwarded.
pub fn enqueue_acquire_egl_objects_khr(_command_queue: cl_command_queue, _num_objects: cl_uint, _mem_objects: *const cl_mem, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueReleaseEGLObjectsKHR: STUB, not yet forwarded.
pub fn enqueue_release_egl_objects_khr(_command_queue: cl_command_queue, _num_objects: cl_uint, _mem_objects: *const cl_mem, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clCreateEventFromEGLSyncKHR: STUB, not yet forwarded.
pub fn create_event_from_egl_sync_khr(_context: cl_context, _sync: CLeglSyncKHR, _display: CLeglDisplayKHR) -> CLResult<cl_event> {
    Err(CL_INVALID_OPERATION)
}
