//! Device entry points.

use crate::core::cl::*;
use std::ffi::c_void;

use crate::api::platform::filter_name_versions;
use crate::core::args::{bytes_of, bytes_of_slice, set_out, slice, write_info};
use crate::core::error::CLResult;
use crate::core::extensions;
use crate::core::forward::{fetch_info, info_string, string_bytes};
use crate::core::handle::Obj;
use crate::core::platform::{Device, Platform};
use crate::core::refcount;
use crate::{vcall, vtry};

pub fn get_device_ids(
    platform: cl_platform_id,
    device_type: cl_device_type,
    num_entries: cl_uint,
    devices: *mut cl_device_id,
    num_devices: *mut cl_uint,
) -> CLResult<()> {
    // "CL_INVALID_PLATFORM if platform is not a valid platform."
    let p = Obj::<Platform>::check(platform)?;
    // "CL_INVALID_VALUE if num_entries is equal to zero and devices is not NULL or if both
    // num_devices and devices are NULL."
    if (num_entries == 0 && !devices.is_null()) || (devices.is_null() && num_devices.is_null()) {
        return Err(CL_INVALID_VALUE);
    }
    // Let the vendor apply its own type rules (CL_DEVICE_TYPE_DEFAULT, errors), then map.
    let i = &p.get().inner;
    let ids = match p.get().enumerate(|| vendor_devices(i, device_type)) {
        // NVIDIA refuses CL_DEVICE_TYPE_CUSTOM, a valid type since OpenCL 1.2; the spec's
        // answer is the devices of that type, none here: "CL_DEVICE_NOT_FOUND if no
        // OpenCL devices that matched device_type were found." (Applications that know
        // NVIDIA's quirk by its platform name no longer see that name.)
        Err(CL_INVALID_DEVICE_TYPE) if device_type == CL_DEVICE_TYPE_CUSTOM => {
            let all = vendor_devices(i, CL_DEVICE_TYPE_ALL)?;
            let custom: Vec<cl_device_id> = all
                .into_iter()
                .filter(|&d| {
                    fetch_info(|s, v, r| match i.vt.clGetDeviceInfo {
                        // SAFETY: the vendor's own query on its own device.
                        Some(f) => unsafe { f(d, CL_DEVICE_TYPE, s, v, r) },
                        None => CL_INVALID_OPERATION,
                    })
                    .ok()
                    .and_then(|b| {
                        b.get(..8)
                            .map(|x| u64::from_ne_bytes(x.try_into().unwrap_or([0; 8])))
                    })
                    .is_some_and(|t| t & CL_DEVICE_TYPE_CUSTOM != 0)
                })
                .collect();
            if custom.is_empty() {
                return Err(CL_DEVICE_NOT_FOUND);
            }
            custom
        }
        r => r?,
    };
    let wrapped: Vec<cl_device_id> = ids.iter().map(|&d| Device::wrap(p, d).handle()).collect();
    if !devices.is_null() {
        for (k, d) in wrapped.iter().take(num_entries as usize).enumerate() {
            // SAFETY: `devices` has room for `num_entries` handles by contract.
            unsafe { devices.add(k).write(*d) };
        }
    }
    set_out(num_devices, wrapped.len() as cl_uint);
    Ok(())
}

/// The vendor's devices of `device_type` (its own errors as they are).
fn vendor_devices(
    i: &crate::core::forward::Inner<cl_platform_id>,
    device_type: cl_device_type,
) -> CLResult<Vec<cl_device_id>> {
    let mut n: cl_uint = 0;
    vtry!(
        i.vt,
        clGetDeviceIDs(i.h, device_type, 0, std::ptr::null_mut(), &mut n)
    )?;
    let mut ids = vec![std::ptr::null_mut(); n as usize];
    vtry!(
        i.vt,
        clGetDeviceIDs(i.h, device_type, n, ids.as_mut_ptr(), std::ptr::null_mut())
    )?;
    Ok(ids)
}

/// The vendor's raw answer to a device query, unfiltered.
pub(crate) fn inner_info(d: &Device, name: cl_device_info) -> CLResult<Vec<u8>> {
    let i = &d.inner;
    fetch_info(|s, v, r| match i.vt.clGetDeviceInfo {
        // SAFETY: the vendor's own query on its own device, buffers sized by the caller.
        Some(f) => unsafe { f(i.h, name, s, v, r) },
        None => CL_INVALID_OPERATION,
    })
}

/// Maps a vendor device handle (possibly NULL) to ours.
fn wrap_device(inner: cl_device_id) -> cl_device_id {
    if inner.is_null() {
        return inner;
    }
    Device::lookup(inner)
        .map(|d| d.handle())
        .unwrap_or(std::ptr::null_mut())
}

pub fn get_device_info(
    device: cl_device_id,
    param_name: cl_device_info,
    param_value_size: usize,
    param_value: *mut c_void,
    param_value_size_ret: *mut usize,
) -> CLResult<()> {
    // "CL_INVALID_DEVICE if device is not valid."
    let o = Obj::<Device>::check(device)?;
    let d = o.get();
    let answer = match param_name {
        CL_DEVICE_PLATFORM => bytes_of(&d.platform.handle()).to_vec(),
        CL_DEVICE_PARENT_DEVICE => {
            let raw = inner_info(d, param_name)?;
            let inner = read_handle::<cl_device_id>(&raw);
            let ours = d
                .parent
                .as_ref()
                .map(|p| p.handle())
                .unwrap_or_else(|| wrap_device(inner));
            bytes_of(&ours).to_vec()
        }
        CL_DEVICE_EXTENSIONS => string_bytes(&extensions::filter_list(
            &info_string(&inner_info(d, param_name)?),
            extensions::DEVICE_OURS,
        )),
        CL_DEVICE_EXTENSIONS_WITH_VERSION => bytes_of_slice(&filter_name_versions(
            &inner_info(d, param_name)?,
            extensions::DEVICE_OURS,
        ))
        .to_vec(),
        _ => inner_info(d, param_name)?,
    };
    write_info(param_value_size, param_value, param_value_size_ret, &answer)
}

/// The first handle in an info answer.
pub fn read_handle<H: Copy + Default>(raw: &[u8]) -> H {
    if raw.len() < std::mem::size_of::<H>() {
        return H::default();
    }
    // SAFETY: `raw` holds at least one H written by the vendor; unaligned read.
    unsafe { (raw.as_ptr() as *const H).read_unaligned() }
}

pub fn create_sub_devices(
    in_device: cl_device_id,
    properties: *const cl_device_partition_property,
    num_devices: cl_uint,
    out_devices: *mut cl_device_id,
    num_devices_ret: *mut cl_uint,
) -> CLResult<()> {
    // "CL_INVALID_DEVICE if in_device is not valid."
    let parent = Obj::<Device>::check(in_device)?;
    let pd = parent.get();
    let i = &pd.inner;
    let mut n: cl_uint = 0;
    vtry!(
        i.vt,
        clCreateSubDevices(i.h, properties, 0, std::ptr::null_mut(), &mut n)
    )?;
    if out_devices.is_null() {
        set_out(num_devices_ret, n);
        return Ok(());
    }
    // "CL_INVALID_VALUE if out_devices is not NULL and num_devices is less than the number
    // of sub-devices created by the partition scheme."
    if num_devices < n {
        return Err(CL_INVALID_VALUE);
    }
    let mut ids = vec![std::ptr::null_mut(); n as usize];
    vtry!(
        i.vt,
        clCreateSubDevices(i.h, properties, n, ids.as_mut_ptr(), std::ptr::null_mut())
    )?;
    for (k, &sub) in ids.iter().enumerate() {
        let w = Device::register(i.child(sub), pd.platform, Some(parent.hold()), false);
        // SAFETY: `out_devices` has room for `num_devices >= n` handles by contract.
        unsafe { out_devices.add(k).write(w.handle()) };
    }
    set_out(num_devices_ret, n);
    Ok(())
}

pub fn create_sub_devices_ext(
    in_device: cl_device_id,
    properties: *const cl_device_partition_property_ext,
    num_entries: cl_uint,
    out_devices: *mut cl_device_id,
    num_devices: *mut cl_uint,
) -> CLResult<()> {
    // The EXT properties use different enum values; forward them to the vendor's EXT entry.
    let parent = Obj::<Device>::check(in_device)?;
    let pd = parent.get();
    let i = &pd.inner;
    let mut n: cl_uint = 0;
    vtry!(
        i.vt,
        clCreateSubDevicesEXT(i.h, properties, 0, std::ptr::null_mut(), &mut n)
    )?;
    if out_devices.is_null() {
        set_out(num_devices, n);
        return Ok(());
    }
    if num_entries < n {
        return Err(CL_INVALID_VALUE);
    }
    let mut ids = vec![std::ptr::null_mut(); n as usize];
    vtry!(
        i.vt,
        clCreateSubDevicesEXT(i.h, properties, n, ids.as_mut_ptr(), std::ptr::null_mut())
    )?;
    for (k, &sub) in ids.iter().enumerate() {
        let w = Device::register(i.child(sub), pd.platform, Some(parent.hold()), false);
        // SAFETY: room for `num_entries >= n` handles by contract.
        unsafe { out_devices.add(k).write(w.handle()) };
    }
    set_out(num_devices, n);
    Ok(())
}

/// Root devices are not reference counted ("the reference count of a root level device
/// is not changed"); sub-devices are.
fn retain_release(device: cl_device_id, retain: bool, ext: bool) -> CLResult<()> {
    let o = Obj::<Device>::check(device)?;
    let vendor = |d: &Device| -> CLResult<()> {
        let i = &d.inner;
        match (retain, ext) {
            (true, false) => vtry!(i.vt, clRetainDevice(i.h)),
            (false, false) => vtry!(i.vt, clReleaseDevice(i.h)),
            (true, true) => vtry!(i.vt, clRetainDeviceEXT(i.h)),
            (false, true) => vtry!(i.vt, clReleaseDeviceEXT(i.h)),
        }
    };
    if o.get().is_root {
        return vendor(o.get());
    }
    if retain {
        refcount::retain::<Device>(device, vendor)
    } else {
        refcount::release::<Device>(device, vendor)
    }
}

pub fn retain_device(device: cl_device_id) -> CLResult<()> {
    retain_release(device, true, false)
}

pub fn release_device(device: cl_device_id) -> CLResult<()> {
    retain_release(device, false, false)
}

pub fn retain_device_ext(device: cl_device_id) -> CLResult<()> {
    retain_release(device, true, true)
}

pub fn release_device_ext(device: cl_device_id) -> CLResult<()> {
    retain_release(device, false, true)
}

pub fn get_device_and_host_timer(
    device: cl_device_id,
    device_timestamp: *mut cl_ulong,
    host_timestamp: *mut cl_ulong,
) -> CLResult<()> {
    // "CL_INVALID_DEVICE if device is not a valid device."
    let d = Obj::<Device>::check(device)?.get();
    // "CL_INVALID_VALUE if host_timestamp or device_timestamp is NULL."
    if device_timestamp.is_null() || host_timestamp.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    crate::core::error::check(vcall!(
        d.inner.vt,
        clGetDeviceAndHostTimer(d.inner.h, device_timestamp, host_timestamp)
    ))
}

pub fn get_host_timer(device: cl_device_id, host_timestamp: *mut cl_ulong) -> CLResult<()> {
    // "CL_INVALID_DEVICE if device is not a valid device."
    let d = Obj::<Device>::check(device)?.get();
    // "CL_INVALID_VALUE if host_timestamp is NULL."
    if host_timestamp.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    crate::core::error::check(vcall!(
        d.inner.vt,
        clGetHostTimer(d.inner.h, host_timestamp)
    ))
}

/// Checks a device list and returns the inner handles (all must share one platform).
pub fn unwrap_devices(n: cl_uint, list: *const cl_device_id) -> CLResult<Vec<cl_device_id>> {
    slice(list, n as usize)?
        .iter()
        .map(|&h| Obj::<Device>::check(h).map(|d| d.get().inner.h))
        .collect()
}
