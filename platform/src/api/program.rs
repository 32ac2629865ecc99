//! `program` entry points.

use crate::core::cl::*;
use std::ffi::{c_char, c_void};

use crate::core::error::CLResult;

/// clCreateProgramWithSource: STUB, not yet forwarded.
pub fn create_program_with_source(_context: cl_context, _count: cl_uint, _strings: *mut *const c_char, _lengths: *const usize) -> CLResult<cl_program> {
    Err(CL_INVALID_OPERATION)
}

/// clCreateProgramWithBinary: STUB, not yet forwarded.
pub fn create_program_with_binary(_context: cl_context, _num_devices: cl_uint, _device_list: *const cl_device_id, _lengths: *const usize, _binaries: *mut *const ::core::ffi::c_uchar, _binary_status: *mut cl_int) -> CLResult<cl_program> {
    Err(CL_INVALID_OPERATION)
}

/// clRetainProgram: STUB, not yet forwarded.
pub fn retain_program(_program: cl_program) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clReleaseProgram: STUB, not yet forwarded.
pub fn release_program(_program: cl_program) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clBuildProgram: STUB, not yet forwarded.
pub fn build_program(_program: cl_program, _num_devices: cl_uint, _device_list: *const cl_device_id, _options: *const c_char, _pfn_notify: Option<unsafe extern "C" fn(program: cl_program, _user_data: *mut c_void)>, _user_data: *mut c_void) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clGetProgramInfo: STUB, not yet forwarded.
pub fn get_program_info(_program: cl_program, _param_name: cl_program_info, _param_value_size: usize, _param_value: *mut c_void, _param_value_size_ret: *mut usize) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clGetProgramBuildInfo: STUB, not yet forwarded.
pub fn get_program_build_info(_program: cl_program, _device: cl_device_id, _param_name: cl_program_build_info, _param_value_size: usize, _param_value: *mut c_void, _param_value_size_ret: *mut usize) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clCreateKernelsInProgram: STUB, not yet forwarded.
pub fn create_kernels_in_program(_program: cl_program, _num_kernels: cl_uint, _kernels: *mut cl_kernel, _num_kernels_ret: *mut cl_uint) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clCreateProgramWithBuiltInKernels: STUB, not yet forwarded.
pub fn create_program_with_built_in_kernels(_context: cl_context, _num_devices: cl_uint, _device_list: *const cl_device_id, _kernel_names: *const c_char) -> CLResult<cl_program> {
    Err(CL_INVALID_OPERATION)
}

/// clCompileProgram: STUB, not yet forwarded.
pub fn compile_program(_program: cl_program, _num_devices: cl_uint, _device_list: *const cl_device_id, _options: *const c_char, _num_input_headers: cl_uint, _input_headers: *const cl_program, _header_include_names: *mut *const c_char, _pfn_notify: Option<unsafe extern "C" fn(program: cl_program, _user_data: *mut c_void)>, _user_data: *mut c_void) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clLinkProgram: STUB, not yet forwarded.
pub fn link_program(_context: cl_context, _num_devices: cl_uint, _device_list: *const cl_device_id, _options: *const c_char, _num_input_programs: cl_uint, _input_programs: *const cl_program, _pfn_notify: Option<unsafe extern "C" fn(program: cl_program, _user_data: *mut c_void)>, _user_data: *mut c_void) -> CLResult<cl_program> {
    Err(CL_INVALID_OPERATION)
}

/// clCreateProgramWithIL: STUB, not yet forwarded.
pub fn create_program_with_il(_context: cl_context, _il: *const c_void, _length: usize) -> CLResult<cl_program> {
    Err(CL_INVALID_OPERATION)
}

/// clSetProgramReleaseCallback: STUB, not yet forwarded.
pub fn set_program_release_callback(_program: cl_program, _pfn_notify: Option<unsafe extern "C" fn(program: cl_program, _user_data: *mut c_void)>, _user_data: *mut c_void) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clSetProgramSpecializationConstant: STUB, not yet forwarded.
pub fn set_program_specialization_constant(_program: cl_program, _spec_id: cl_uint, _spec_size: usize, _spec_value: *const c_void) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}
