//! `sampler` entry points.

use crate::core::cl::*;
use std::ffi::c_void;

use crate::core::error::CLResult;

/// clCreateSampler: STUB, not yet forwarded.
pub fn create_sampler(_context: cl_context, _normalized_coords: cl_bool, _addressing_mode: cl_addressing_mode, _filter_mode: cl_filter_mode) -> CLResult<cl_sampler> {
    Err(CL_INVALID_OPERATION)
}

/// clRetainSampler: STUB, not yet forwarded.
pub fn retain_sampler(_sampler: cl_sampler) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clReleaseSampler: STUB, not yet forwarded.
pub fn release_sampler(_sampler: cl_sampler) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clGetSamplerInfo: STUB, not yet forwarded.
pub fn get_sampler_info(_sampler: cl_sampler, _param_name: cl_sampler_info, _param_value_size: usize, _param_value: *mut c_void, _param_value_size_ret: *mut usize) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clCreateSamplerWithProperties: STUB, not yet forwarded.
pub fn create_sampler_with_properties(_context: cl_context, _sampler_properties: *const cl_sampler_properties) -> CLResult<cl_sampler> {
    Err(CL_INVALID_OPERATION)
}
