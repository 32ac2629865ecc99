//! `queue` entry points.

use crate::core::cl::*;
use std::ffi::c_void;

use crate::core::error::CLResult;

/// clCreateCommandQueue: STUB, not yet forwarded.
pub fn create_command_queue(_context: cl_context, _device: cl_device_id, _properties: cl_command_queue_properties) -> CLResult<cl_command_queue> {
    Err(CL_INVALID_OPERATION)
}

/// clRetainCommandQueue: STUB, not yet forwarded.
pub fn retain_command_queue(_command_queue: cl_command_queue) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clReleaseCommandQueue: STUB, not yet forwarded.
pub fn release_command_queue(_command_queue: cl_command_queue) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clGetCommandQueueInfo: STUB, not yet forwarded.
pub fn get_command_queue_info(_command_queue: cl_command_queue, _param_name: cl_command_queue_info, _param_value_size: usize, _param_value: *mut c_void, _param_value_size_ret: *mut usize) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clSetCommandQueueProperty: STUB, not yet forwarded.
pub fn set_command_queue_property(_command_queue: cl_command_queue, _properties: cl_command_queue_properties, _enable: cl_bool, _old_properties: *mut cl_command_queue_properties) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clFlush: STUB, not yet forwarded.
pub fn flush(_command_queue: cl_command_queue) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clFinish: STUB, not yet forwarded.
pub fn finish(_command_queue: cl_command_queue) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clCreateCommandQueueWithProperties: STUB, not yet forwarded.
pub fn create_command_queue_with_properties(_context: cl_context, _device: cl_device_id, _properties: *const cl_queue_properties) -> CLResult<cl_command_queue> {
    Err(CL_INVALID_OPERATION)
}

/// clSetDefaultDeviceCommandQueue: STUB, not yet forwarded.
pub fn set_default_device_command_queue(_context: cl_context, _device: cl_device_id, _command_queue: cl_command_queue) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}
