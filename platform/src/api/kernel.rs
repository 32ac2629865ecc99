//! `kernel` entry points.

use crate::core::cl::*;
use std::ffi::{c_char, c_void};

use crate::core::error::CLResult;

/// clCreateKernel: STUB, not yet forwarded.
pub fn create_kernel(_program: cl_program, _kernel_name: *const c_char) -> CLResult<cl_kernel> {
    Err(CL_INVALID_OPERATION)
}

/// clRetainKernel: STUB, not yet forwarded.
pub fn retain_kernel(_kernel: cl_kernel) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clReleaseKernel: STUB, not yet forwarded.
pub fn release_kernel(_kernel: cl_kernel) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clSetKernelArg: STUB, not yet forwarded.
pub fn set_kernel_arg(_kernel: cl_kernel, _arg_index: cl_uint, _arg_size: usize, _arg_value: *const c_void) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clGetKernelInfo: STUB, not yet forwarded.
pub fn get_kernel_info(_kernel: cl_kernel, _param_name: cl_kernel_info, _param_value_size: usize, _param_value: *mut c_void, _param_value_size_ret: *mut usize) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clGetKernelWorkGroupInfo: STUB, not yet forwarded.
pub fn get_kernel_work_group_info(_kernel: cl_kernel, _device: cl_device_id, _param_name: cl_kernel_work_group_info, _param_value_size: usize, _param_value: *mut c_void, _param_value_size_ret: *mut usize) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clGetKernelArgInfo: STUB, not yet forwarded.
pub fn get_kernel_arg_info(_kernel: cl_kernel, _arg_index: cl_uint, _param_name: cl_kernel_arg_info, _param_value_size: usize, _param_value: *mut c_void, _param_value_size_ret: *mut usize) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clSetKernelArgSVMPointer: STUB, not yet forwarded.
pub fn set_kernel_arg_svm_pointer(_kernel: cl_kernel, _arg_index: cl_uint, _arg_value: *const c_void) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clSetKernelExecInfo: STUB, not yet forwarded.
pub fn set_kernel_exec_info(_kernel: cl_kernel, _param_name: cl_kernel_exec_info, _param_value_size: usize, _param_value: *const c_void) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clGetKernelSubGroupInfoKHR: STUB, not yet forwarded.
pub fn get_kernel_sub_group_info_khr(_in_kernel: cl_kernel, _in_device: cl_device_id, _param_name: cl_kernel_sub_group_info, _input_value_size: usize, _input_value: *const c_void, _param_value_size: usize, _param_value: *mut c_void, _param_value_size_ret: *mut usize) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clCloneKernel: STUB, not yet forwarded.
pub fn clone_kernel(_source_kernel: cl_kernel) -> CLResult<cl_kernel> {
    Err(CL_INVALID_OPERATION)
}

/// clGetKernelSubGroupInfo: STUB, not yet forwarded.
pub fn get_kernel_sub_group_info(_kernel: cl_kernel, _device: cl_device_id, _param_name: cl_kernel_sub_group_info, _input_value_size: usize, _input_value: *const c_void, _param_value_size: usize, _param_value: *mut c_void, _param_value_size_ret: *mut usize) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clGetKernelSuggestedLocalWorkSize: STUB, not yet forwarded.
pub fn get_kernel_suggested_local_work_size(_command_queue: cl_command_queue, _kernel: cl_kernel, _work_dim: cl_uint, _global_work_offset: *const usize, _global_work_size: *const usize, _suggested_local_work_size: *mut usize) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}
