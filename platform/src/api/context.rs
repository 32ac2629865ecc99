//! Context entry points.

use crate::core::cl::*;
use std::ffi::{c_char, c_void};

use crate::core::args::{bytes_of_slice, property_list, slice, write_info};
use crate::core::callback::{once_obj, Callback, ObjNotify};
use crate::core::error::CLResult;
use crate::core::forward::fetch_info;
use crate::core::handle::{new_obj, Obj, Ref};
use crate::core::objects::Context;
use crate::core::platform::{platforms, Device, Platform};
use crate::core::refcount;
use crate::{vcreate, vtry};

type ContextNotify = Option<unsafe extern "C" fn(*const c_char, *const c_void, usize, *mut c_void)>;

/// The application's properties, checked, and the same list with our platform handle
/// replaced by the vendor's.
struct Props {
    app: Vec<cl_context_properties>,
    inner: Vec<cl_context_properties>,
    platform: Option<&'static Obj<Platform>>,
}

fn context_props(properties: *const cl_context_properties) -> CLResult<Props> {
    let Some(list) = property_list(properties)? else {
        return Ok(Props {
            app: Vec::new(),
            inner: Vec::new(),
            platform: None,
        });
    };
    let mut inner = list.to_vec();
    let mut platform = None;
    let mut k = 0;
    while k + 1 < list.len() {
        if list[k] == CL_CONTEXT_PLATFORM as cl_context_properties {
            // "CL_INVALID_PLATFORM if ... platform value specified in properties is not a
            // valid platform."
            let p = Obj::<Platform>::check(list[k + 1] as cl_platform_id)?;
            // "CL_INVALID_PROPERTY if ... the same property name is specified more than once."
            if platform.is_some() {
                return Err(CL_INVALID_PROPERTY);
            }
            inner[k + 1] = p.get().inner.h as cl_context_properties;
            platform = Some(p);
        }
        k += 2;
    }
    Ok(Props {
        app: list.to_vec(),
        inner,
        platform,
    })
}

fn inner_ptr(v: &[cl_context_properties]) -> *const cl_context_properties {
    if v.is_empty() {
        std::ptr::null()
    } else {
        v.as_ptr()
    }
}

/// Wraps a vendor context and the devices the vendor says it has.
fn wrap_context(
    platform: &'static Obj<Platform>,
    inner: cl_context,
    app_properties: Vec<cl_context_properties>,
) -> CLResult<cl_context> {
    let inner = platform.get().inner.child(inner);
    let raw = fetch_info(|s, v, r| match inner.vt.clGetContextInfo {
        // SAFETY: the vendor's query on the context it just created.
        Some(f) => unsafe { f(inner.h, CL_CONTEXT_DEVICES, s, v, r) },
        None => CL_INVALID_OPERATION,
    });
    let ids: Vec<cl_device_id> = match raw {
        Ok(raw) => raw
            .chunks_exact(std::mem::size_of::<cl_device_id>())
            .map(crate::api::device::read_handle)
            .collect(),
        Err(e) => {
            // SAFETY: releasing the context we cannot describe; the app never saw it.
            unsafe { inner.vt.clReleaseContext.map(|f| f(inner.h)) };
            return Err(e);
        }
    };
    let devices: Vec<Ref<Device>> = ids.iter().map(|&d| Device::wrap(platform, d)).collect();
    Ok(new_obj(Context {
        inner,
        platform,
        devices,
        app_properties,
        memory: Default::default(),
    })
    .handle())
}

pub fn create_context(
    properties: *const cl_context_properties,
    num_devices: cl_uint,
    devices: *const cl_device_id,
    pfn_notify: ContextNotify,
    user_data: *mut c_void,
) -> CLResult<cl_context> {
    let props = context_props(properties)?;
    // "CL_INVALID_VALUE if devices is NULL; if num_devices is equal to zero; or if
    // pfn_notify is NULL but user_data is not NULL."
    if devices.is_null() || num_devices == 0 || (pfn_notify.is_none() && !user_data.is_null()) {
        return Err(CL_INVALID_VALUE);
    }
    // "CL_INVALID_DEVICE if any device in devices is not a valid device."
    let devs: Vec<&Obj<Device>> = slice(devices, num_devices as usize)?
        .iter()
        .map(|&d| Obj::<Device>::check(d))
        .collect::<CLResult<_>>()?;
    let platform = match props.platform {
        Some(p) => p,
        None => devs[0].get().platform,
    };
    if devs
        .iter()
        .any(|d| !std::ptr::eq(d.get().platform, platform))
    {
        return Err(CL_INVALID_DEVICE);
    }
    let inner_devs: Vec<cl_device_id> = devs.iter().map(|d| d.get().inner.h).collect();
    let vt = platform.get().inner.vt;
    // The notify callback carries no handles, so the application's own function and user
    // data go to the vendor unchanged.
    let ctx = vcreate!(
        vt,
        clCreateContext(
            inner_ptr(&props.inner),
            num_devices,
            inner_devs.as_ptr(),
            pfn_notify,
            user_data
        )
    )?;
    wrap_context(platform, ctx, props.app)
}

pub fn create_context_from_type(
    properties: *const cl_context_properties,
    device_type: cl_device_type,
    pfn_notify: ContextNotify,
    user_data: *mut c_void,
) -> CLResult<cl_context> {
    let mut props = context_props(properties)?;
    // "CL_INVALID_VALUE if pfn_notify is NULL but user_data is not NULL."
    if pfn_notify.is_none() && !user_data.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    // Without CL_CONTEXT_PLATFORM the choice is implementation-defined: the loader sent the
    // call here, so use our first platform and say so to the vendor explicitly.
    let platform = match props.platform {
        Some(p) => p,
        None => {
            let p = *platforms().first().ok_or(CL_INVALID_PLATFORM)?;
            if props.inner.is_empty() {
                props.inner.push(0);
            }
            let end = props.inner.len() - 1;
            props.inner.splice(
                end..end,
                [
                    CL_CONTEXT_PLATFORM as cl_context_properties,
                    p.get().inner.h as cl_context_properties,
                ],
            );
            p
        }
    };
    let vt = platform.get().inner.vt;
    let ctx = vcreate!(
        vt,
        clCreateContextFromType(inner_ptr(&props.inner), device_type, pfn_notify, user_data)
    )?;
    wrap_context(platform, ctx, props.app)
}

pub fn retain_context(context: cl_context) -> CLResult<()> {
    refcount::retain::<Context>(context, |c| vtry!(c.inner.vt, clRetainContext(c.inner.h)))
}

pub fn release_context(context: cl_context) -> CLResult<()> {
    refcount::release::<Context>(context, |c| vtry!(c.inner.vt, clReleaseContext(c.inner.h)))
}

pub fn get_context_info(
    context: cl_context,
    param_name: cl_context_info,
    param_value_size: usize,
    param_value: *mut c_void,
    param_value_size_ret: *mut usize,
) -> CLResult<()> {
    // "CL_INVALID_CONTEXT if context is not a valid context."
    let c = Obj::<Context>::check(context)?.get();
    let answer = match param_name {
        CL_CONTEXT_DEVICES => {
            let hs: Vec<cl_device_id> = c.devices.iter().map(|d| d.handle()).collect();
            bytes_of_slice(&hs).to_vec()
        }
        // "Return the properties argument specified in clCreateContext..."
        CL_CONTEXT_PROPERTIES => bytes_of_slice(&c.app_properties).to_vec(),
        _ => fetch_info(|s, v, r| match c.inner.vt.clGetContextInfo {
            // SAFETY: the vendor's query on its own context.
            Some(f) => unsafe { f(c.inner.h, param_name, s, v, r) },
            None => CL_INVALID_OPERATION,
        })?,
    };
    write_info(param_value_size, param_value, param_value_size_ret, &answer)
}

pub fn set_context_destructor_callback(
    context: cl_context,
    pfn_notify: Option<ObjNotify<cl_context>>,
    user_data: *mut c_void,
) -> CLResult<()> {
    // "CL_INVALID_CONTEXT if context is not a valid context."
    let o = Obj::<Context>::check(context)?;
    // "CL_INVALID_VALUE if pfn_notify is NULL."
    let f = pfn_notify.ok_or(CL_INVALID_VALUE)?;
    let data = Callback::<Context, ObjNotify<cl_context>>::into_raw(o.hold(), f, user_data);
    let c = o.get();
    let r = vtry!(
        c.inner.vt,
        clSetContextDestructorCallback(c.inner.h, Some(once_obj::<Context>), data)
    );
    if r.is_err() {
        // SAFETY: the vendor refused, so it will never call back with `data`.
        unsafe { Callback::<Context, ObjNotify<cl_context>>::discard(data) };
    }
    r
}
