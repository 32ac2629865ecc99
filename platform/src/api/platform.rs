//! Platform entry points.

use crate::core::cl::*;
use std::ffi::{c_char, c_void};

use crate::core::args::{bytes_of_slice, c_str, set_out, slice, write_info};
use crate::core::error::CLResult;
use crate::core::extensions;
use crate::core::forward::{fetch_info, info_string, string_bytes};
use crate::core::handle::Obj;
use crate::core::platform::{platforms, slot_names, Platform};
use crate::vcall;

pub fn get_platform_ids(
    num_entries: cl_uint,
    out: *mut cl_platform_id,
    num_platforms: *mut cl_uint,
) -> CLResult<()> {
    // "CL_INVALID_VALUE if num_entries is equal to zero and platforms is not NULL or if both
    // num_platforms and platforms are NULL."
    if (num_entries == 0 && !out.is_null()) || (out.is_null() && num_platforms.is_null()) {
        return Err(CL_INVALID_VALUE);
    }
    let all = platforms();
    if !out.is_null() {
        for (i, p) in all.iter().take(num_entries as usize).enumerate() {
            // SAFETY: `out` has room for `num_entries` handles by contract.
            unsafe { out.add(i).write(p.handle()) };
        }
    }
    set_out(num_platforms, all.len() as cl_uint);
    // cl_khr_icd: "CL_PLATFORM_NOT_FOUND_KHR if zero platforms are available."
    if all.is_empty() {
        return Err(CL_PLATFORM_NOT_FOUND_KHR);
    }
    Ok(())
}

/// Resolves a platform argument: NULL means "the" platform only when there is exactly one.
fn platform_arg(platform: cl_platform_id) -> CLResult<&'static Obj<Platform>> {
    Obj::<Platform>::check(platform)
}

fn inner_info(p: &Obj<Platform>, name: cl_platform_info) -> CLResult<Vec<u8>> {
    let i = &p.get().inner;
    fetch_info(|s, v, r| vcall_info(i.vt, i.h, name, s, v, r))
}

fn vcall_info(
    vt: &cl_icd_dispatch,
    h: cl_platform_id,
    name: cl_platform_info,
    s: usize,
    v: *mut c_void,
    r: *mut usize,
) -> cl_int {
    match vt.clGetPlatformInfo {
        // SAFETY: the vendor's own clGetPlatformInfo with its own platform handle and
        // buffers sized by the caller.
        Some(f) => unsafe { f(h, name, s, v, r) },
        None => CL_INVALID_OPERATION,
    }
}

/// The SoftPreempt name for a platform's ICD suffix: unique per wrapped platform.
pub fn icd_suffix(p: &Platform) -> String {
    if p.index == 0 {
        "SoftPreempt".into()
    } else {
        format!("SoftPreempt{}", p.index)
    }
}

pub fn get_platform_info(
    platform: cl_platform_id,
    param_name: cl_platform_info,
    param_value_size: usize,
    param_value: *mut c_void,
    param_value_size_ret: *mut usize,
) -> CLResult<()> {
    // "CL_INVALID_PLATFORM if platform is not a valid platform."
    let p = platform_arg(platform)?;
    let answer = match param_name {
        CL_PLATFORM_NAME => string_bytes("SoftPreempt"),
        // The wrapped vendor's own answer (forwarded below): applications key their
        // vendor quirk tables on it (pyopencl's tests do), and the name, version and ICD
        // suffix still tell the platforms apart.
        CL_PLATFORM_VERSION => {
            let v = info_string(&inner_info(p, CL_PLATFORM_VERSION)?);
            let name = info_string(&inner_info(p, CL_PLATFORM_NAME)?);
            // Keep "OpenCL <major>.<minor> " as the spec requires, then say what we wrap.
            let mut parts = v.splitn(3, ' ');
            let (ocl, num, rest) = (
                parts.next().unwrap_or("OpenCL"),
                parts.next().unwrap_or("1.2"),
                parts.next().unwrap_or(""),
            );
            string_bytes(&format!(
                "{ocl} {num} SoftPreempt {} (wrapping {name}: {rest})",
                env!("CARGO_PKG_VERSION")
            ))
        }
        CL_PLATFORM_ICD_SUFFIX_KHR => string_bytes(&icd_suffix(p.get())),
        CL_PLATFORM_EXTENSIONS => {
            let inner = info_string(&inner_info(p, CL_PLATFORM_EXTENSIONS)?);
            string_bytes(&extensions::filter_list(&inner, extensions::PLATFORM_OURS))
        }
        CL_PLATFORM_EXTENSIONS_WITH_VERSION => {
            let raw = inner_info(p, CL_PLATFORM_EXTENSIONS_WITH_VERSION)?;
            bytes_of_slice(&filter_name_versions(&raw, extensions::PLATFORM_OURS)).to_vec()
        }
        _ => inner_info(p, param_name)?,
    };
    write_info(param_value_size, param_value, param_value_size_ret, &answer)
}

/// Filters a `cl_name_version` array and appends the layer's own extensions.
pub fn filter_name_versions(raw: &[u8], add: &[&str]) -> Vec<cl_name_version> {
    let n = raw.len() / std::mem::size_of::<cl_name_version>();
    let mut out: Vec<cl_name_version> = (0..n)
        .map(|i| {
            // SAFETY: `raw` holds `n` whole cl_name_version records written by the vendor;
            // read_unaligned because a Vec<u8> carries no alignment guarantee.
            unsafe {
                (raw.as_ptr() as *const cl_name_version)
                    .add(i)
                    .read_unaligned()
            }
        })
        .filter(|nv| extensions::keep(&name_of(nv)))
        .collect();
    for ext in add {
        if out.iter().any(|nv| name_of(nv) == *ext) {
            continue;
        }
        let mut nv = cl_name_version {
            version: make_version(1, 0, 0),
            name: [0; CL_NAME_VERSION_MAX_NAME_SIZE],
        };
        for (d, s) in nv.name.iter_mut().zip(ext.bytes()) {
            *d = s as _;
        }
        out.push(nv);
    }
    out
}

fn name_of(nv: &cl_name_version) -> String {
    let bytes: Vec<u8> = nv
        .name
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as _)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

const fn make_version(major: u32, minor: u32, patch: u32) -> cl_version {
    (major << 22) | (minor << 12) | patch
}

pub fn unload_compiler() -> CLResult<()> {
    // OpenCL 1.0's clUnloadCompiler is a hint that always succeeds.
    Ok(())
}

pub fn unload_platform_compiler(platform: cl_platform_id) -> CLResult<()> {
    // "CL_INVALID_PLATFORM if platform is not a valid platform."
    let p = platform_arg(platform)?;
    let i = &p.get().inner;
    crate::core::error::check(vcall!(i.vt, clUnloadPlatformCompiler(i.h)))
}

fn lookup(name: &str, supported: impl Fn(&str) -> bool) -> *mut c_void {
    let Some(&(_, slot)) = extensions::FUNCTIONS.iter().find(|(f, _)| *f == name) else {
        return std::ptr::null_mut();
    };
    if let Some(ext) = extensions::extension_of(name) {
        if ext != "cl_khr_icd" && !supported(ext) {
            return std::ptr::null_mut();
        }
    }
    if slot.is_empty() {
        return crate::core::platform::own_icd_entry();
    }
    let table = crate::core::handle::our_dispatch() as *const u8;
    match slot_names().iter().find(|(n, _)| *n == slot) {
        // SAFETY: `off` is the byte offset of that slot inside our static table.
        Some((_, off)) if !table.is_null() => unsafe { *(table.add(*off) as *const *mut c_void) },
        _ => std::ptr::null_mut(),
    }
}

fn platform_supports(p: &'static Obj<Platform>, ext: &str) -> bool {
    let Ok(list) = inner_info(p, CL_PLATFORM_EXTENSIONS) else {
        return false;
    };
    let mut exts = info_string(&list);
    // Device-level extensions count too (sub-groups, fission, IL are often only there).
    if let Ok(devs) = crate::core::platform::root_devices(p) {
        for d in devs {
            let i = &d.get().inner;
            if let Ok(b) = fetch_info(|s, v, r| match i.vt.clGetDeviceInfo {
                // SAFETY: the vendor's clGetDeviceInfo on its own device.
                Some(f) => unsafe { f(i.h, CL_DEVICE_EXTENSIONS, s, v, r) },
                None => CL_INVALID_OPERATION,
            }) {
                exts.push(' ');
                exts.push_str(&info_string(&b));
            }
        }
    }
    exts.split_ascii_whitespace().any(|e| e == ext)
}

pub fn get_extension_function_address(func_name: *const c_char) -> *mut c_void {
    let Ok(name) = c_str(func_name) else {
        return std::ptr::null_mut();
    };
    let name = name.to_string_lossy();
    lookup(&name, |ext| {
        platforms().iter().any(|p| platform_supports(p, ext))
    })
}

pub fn get_extension_function_address_for_platform(
    platform: cl_platform_id,
    func_name: *const c_char,
) -> *mut c_void {
    let Ok(p) = platform_arg(platform) else {
        return std::ptr::null_mut();
    };
    let Ok(name) = c_str(func_name) else {
        return std::ptr::null_mut();
    };
    let name = name.to_string_lossy();
    lookup(&name, |ext| platform_supports(p, ext))
}

/// Checks an application list of platform handles (used by context properties).
pub fn check_platforms(
    list: *const cl_platform_id,
    n: usize,
) -> CLResult<Vec<&'static Obj<Platform>>> {
    slice(list, n)?.iter().map(|&h| platform_arg(h)).collect()
}
