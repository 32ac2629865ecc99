//! `mem` entry points.

use crate::core::cl::*;
use std::ffi::c_void;

use crate::core::error::CLResult;

/// clCreateBuffer: STUB, not yet forwarded.
pub fn create_buffer(_context: cl_context, _flags: cl_mem_flags, _size: usize, _host_ptr: *mut c_void) -> CLResult<cl_mem> {
    Err(CL_INVALID_OPERATION)
}

/// clCreateImage2D: STUB, not yet forwarded.
pub fn create_image_2d(_context: cl_context, _flags: cl_mem_flags, _image_format: *const cl_image_format, _image_width: usize, _image_height: usize, _image_row_pitch: usize, _host_ptr: *mut c_void) -> CLResult<cl_mem> {
    Err(CL_INVALID_OPERATION)
}

/// clCreateImage3D: STUB, not yet forwarded.
pub fn create_image_3d(_context: cl_context, _flags: cl_mem_flags, _image_format: *const cl_image_format, _image_width: usize, _image_height: usize, _image_depth: usize, _image_row_pitch: usize, _image_slice_pitch: usize, _host_ptr: *mut c_void) -> CLResult<cl_mem> {
    Err(CL_INVALID_OPERATION)
}

/// clRetainMemObject: STUB, not yet forwarded.
pub fn retain_mem_object(_memobj: cl_mem) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clReleaseMemObject: STUB, not yet forwarded.
pub fn release_mem_object(_memobj: cl_mem) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clGetSupportedImageFormats: STUB, not yet forwarded.
pub fn get_supported_image_formats(_context: cl_context, _flags: cl_mem_flags, _image_type: cl_mem_object_type, _num_entries: cl_uint, _image_formats: *mut cl_image_format, _num_image_formats: *mut cl_uint) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clGetMemObjectInfo: STUB, not yet forwarded.
pub fn get_mem_object_info(_memobj: cl_mem, _param_name: cl_mem_info, _param_value_size: usize, _param_value: *mut c_void, _param_value_size_ret: *mut usize) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clGetImageInfo: STUB, not yet forwarded.
pub fn get_image_info(_image: cl_mem, _param_name: cl_image_info, _param_value_size: usize, _param_value: *mut c_void, _param_value_size_ret: *mut usize) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clCreateSubBuffer: STUB, not yet forwarded.
pub fn create_sub_buffer(_buffer: cl_mem, _flags: cl_mem_flags, _buffer_create_type: cl_buffer_create_type, _buffer_create_info: *const c_void) -> CLResult<cl_mem> {
    Err(CL_INVALID_OPERATION)
}

/// clSetMemObjectDestructorCallback: STUB, not yet forwarded.
pub fn set_mem_object_destructor_callback(_memobj: cl_mem, _pfn_notify: Option<unsafe extern "C" fn(memobj: cl_mem, _user_data: *mut c_void)>, _user_data: *mut c_void) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clCreateImage: STUB, not yet forwarded.
pub fn create_image(_context: cl_context, _flags: cl_mem_flags, _image_format: *const cl_image_format, _image_desc: *const cl_image_desc, _host_ptr: *mut c_void) -> CLResult<cl_mem> {
    Err(CL_INVALID_OPERATION)
}

/// clCreatePipe: STUB, not yet forwarded.
pub fn create_pipe(_context: cl_context, _flags: cl_mem_flags, _pipe_packet_size: cl_uint, _pipe_max_packets: cl_uint, _properties: *const cl_pipe_properties) -> CLResult<cl_mem> {
    Err(CL_INVALID_OPERATION)
}

/// clGetPipeInfo: STUB, not yet forwarded.
pub fn get_pipe_info(_pipe: cl_mem, _param_name: cl_pipe_info, _param_value_size: usize, _param_value: *mut c_void, _param_value_size_ret: *mut usize) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clSVMAlloc: STUB, not yet forwarded.
pub fn svm_alloc(_context: cl_context, _flags: cl_svm_mem_flags, _size: usize, _alignment: cl_uint) -> *mut c_void {
    std::ptr::null_mut()
}

/// clSVMFree: STUB, not yet forwarded.
pub fn svm_free(_context: cl_context, _svm_pointer: *mut c_void) -> () {
    
}

/// clCreateBufferWithProperties: STUB, not yet forwarded.
pub fn create_buffer_with_properties(_context: cl_context, _properties: *const cl_mem_properties, _flags: cl_mem_flags, _size: usize, _host_ptr: *mut c_void) -> CLResult<cl_mem> {
    Err(CL_INVALID_OPERATION)
}

/// clCreateImageWithProperties: STUB, not yet forwarded.
pub fn create_image_with_properties(_context: cl_context, _properties: *const cl_mem_properties, _flags: cl_mem_flags, _image_format: *const cl_image_format, _image_desc: *const cl_image_desc, _host_ptr: *mut c_void) -> CLResult<cl_mem> {
    Err(CL_INVALID_OPERATION)
}
