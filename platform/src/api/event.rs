//! `event` entry points.

use crate::core::cl::*;
use std::ffi::c_void;

use crate::core::error::CLResult;

/// clWaitForEvents: STUB, not yet forwarded.
pub fn wait_for_events(_num_events: cl_uint, _event_list: *const cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clGetEventInfo: STUB, not yet forwarded.
pub fn get_event_info(_event: cl_event, _param_name: cl_event_info, _param_value_size: usize, _param_value: *mut c_void, _param_value_size_ret: *mut usize) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clRetainEvent: STUB, not yet forwarded.
pub fn retain_event(_event: cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clReleaseEvent: STUB, not yet forwarded.
pub fn release_event(_event: cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clGetEventProfilingInfo: STUB, not yet forwarded.
pub fn get_event_profiling_info(_event: cl_event, _param_name: cl_profiling_info, _param_value_size: usize, _param_value: *mut c_void, _param_value_size_ret: *mut usize) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clSetEventCallback: STUB, not yet forwarded.
pub fn set_event_callback(_event: cl_event, _command_exec_callback_type: cl_int, _pfn_notify: Option< unsafe extern "C" fn( event: cl_event, _event_command_status: cl_int, _user_data: *mut c_void, ), >, _user_data: *mut c_void) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clCreateUserEvent: STUB, not yet forwarded.
pub fn create_user_event(_context: cl_context) -> CLResult<cl_event> {
    Err(CL_INVALID_OPERATION)
}

/// clSetUserEventStatus: STUB, not yet forwarded.
pub fn set_user_event_status(_event: cl_event, _execution_status: cl_int) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}
