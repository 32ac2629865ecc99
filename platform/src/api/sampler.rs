//! Sampler entry points. Samplers hold only their context; sampler properties are plain
//! values, so they reach the vendor unchanged.

// Entry points take the application's raw pointers by nature: they reach only the checked
// helpers of `core::args` and the vendor, never a Rust dereference here.
#![allow(clippy::not_unsafe_ptr_arg_deref, clippy::too_many_arguments)]

use crate::core::cl::*;
use std::ffi::c_void;

use crate::core::args::{bytes_of, property_list, write_info};
use crate::core::error::CLResult;
use crate::core::forward::fetch_info;
use crate::core::handle::{new_obj, Obj};
use crate::core::objects::{Context, Sampler};
use crate::core::refcount;
use crate::{vcreate, vtry};

/// Checks the context, lets `create` call the vendor with it, and wraps the result.
fn create(
    context: cl_context,
    create: impl FnOnce(&Context) -> CLResult<cl_sampler>,
) -> CLResult<cl_sampler> {
    // "CL_INVALID_CONTEXT if context is not a valid context."
    let ctx = Obj::<Context>::check(context)?;
    let c = ctx.get();
    let h = create(c)?;
    Ok(new_obj(Sampler {
        inner: c.inner.child(h),
        context: ctx.hold(),
    })
    .handle())
}

pub fn create_sampler(
    context: cl_context,
    normalized_coords: cl_bool,
    addressing_mode: cl_addressing_mode,
    filter_mode: cl_filter_mode,
) -> CLResult<cl_sampler> {
    // "CL_INVALID_VALUE if addressing_mode, filter_mode, normalized_coords or a combination
    // of these argument values are not valid." Checked here too: some vendors crash on
    // out-of-range enums instead of returning the error.
    Obj::<Context>::check(context)?;
    check_modes(
        Some(normalized_coords),
        Some(addressing_mode),
        Some(filter_mode),
    )?;
    create(context, |c| {
        vcreate!(
            c.inner.vt,
            clCreateSampler(c.inner.h, normalized_coords, addressing_mode, filter_mode)
        )
    })
}

pub fn create_sampler_with_properties(
    context: cl_context,
    sampler_properties: *const cl_sampler_properties,
) -> CLResult<cl_sampler> {
    Obj::<Context>::check(context)?;
    // "CL_INVALID_VALUE if the property name in sampler_properties is not a supported
    // property name, if the value specified for a supported property name is not valid, or
    // if the same property name is specified more than once." (Also checked here: some
    // vendors crash on bad values.)
    if let Some(list) = property_list(sampler_properties)? {
        let mut seen = Vec::new();
        for pair in list[..list.len() - 1].chunks_exact(2) {
            let (name, value) = (pair[0] as cl_uint, pair[1]);
            if seen.contains(&name) {
                return Err(CL_INVALID_VALUE);
            }
            seen.push(name);
            match name {
                CL_SAMPLER_NORMALIZED_COORDS => check_modes(Some(value as cl_bool), None, None)?,
                CL_SAMPLER_ADDRESSING_MODE => check_modes(None, Some(value as cl_uint), None)?,
                CL_SAMPLER_FILTER_MODE => check_modes(None, None, Some(value as cl_uint))?,
                // cl_khr_mipmap_image's filter and LOD range are the vendor's to judge.
                0x1155..=0x1157 => {}
                _ => return Err(CL_INVALID_VALUE),
            }
        }
    }
    create(context, |c| {
        vcreate!(
            c.inner.vt,
            clCreateSamplerWithProperties(c.inner.h, sampler_properties)
        )
    })
}

/// The core sampler enums' valid values.
fn check_modes(
    normalized: Option<cl_bool>,
    addressing: Option<cl_addressing_mode>,
    filter: Option<cl_filter_mode>,
) -> CLResult<()> {
    let ok_norm = normalized.is_none_or(|n| n == CL_TRUE || n == CL_FALSE);
    let ok_addr = addressing.is_none_or(|a| {
        matches!(
            a,
            CL_ADDRESS_NONE
                | CL_ADDRESS_CLAMP_TO_EDGE
                | CL_ADDRESS_CLAMP
                | CL_ADDRESS_REPEAT
                | CL_ADDRESS_MIRRORED_REPEAT
        )
    });
    let ok_filter = filter.is_none_or(|f| f == CL_FILTER_NEAREST || f == CL_FILTER_LINEAR);
    if ok_norm && ok_addr && ok_filter {
        Ok(())
    } else {
        Err(CL_INVALID_VALUE)
    }
}

pub fn retain_sampler(sampler: cl_sampler) -> CLResult<()> {
    refcount::retain::<Sampler>(sampler, |s| vtry!(s.inner.vt, clRetainSampler(s.inner.h)))
}

pub fn release_sampler(sampler: cl_sampler) -> CLResult<()> {
    refcount::release::<Sampler>(sampler, |s| vtry!(s.inner.vt, clReleaseSampler(s.inner.h)))
}

pub fn get_sampler_info(
    sampler: cl_sampler,
    param_name: cl_sampler_info,
    param_value_size: usize,
    param_value: *mut c_void,
    param_value_size_ret: *mut usize,
) -> CLResult<()> {
    // "CL_INVALID_SAMPLER if sampler is a not a valid sampler object."
    let s = Obj::<Sampler>::check(sampler)?.get();
    let answer = match param_name {
        CL_SAMPLER_CONTEXT => bytes_of(&s.context.handle()).to_vec(),
        _ => fetch_info(|sz, v, r| match s.inner.vt.clGetSamplerInfo {
            // SAFETY: the vendor's query on its own sampler.
            Some(f) => unsafe { f(s.inner.h, param_name, sz, v, r) },
            None => CL_INVALID_OPERATION,
        })?,
    };
    write_info(param_value_size, param_value, param_value_size_ret, &answer)
}
