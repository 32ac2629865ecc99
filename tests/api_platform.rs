//! Platform, device and context entry points through the real loader.
//!
//! SAFETY (for every unsafe block in this file): OpenCL is called with handles created in the
//! same test, or with deliberately bad handles that the layer must reject without reading.

mod common;

use common::*;
use opencl_sys::*;
use std::ffi::{c_char, c_void, CString};
use std::sync::atomic::{AtomicUsize, Ordering};

#[test]
fn platform_identity_strings() {
    let p = sp_platform();
    assert_eq!(platform_string(p, CL_PLATFORM_NAME), "SoftPreempt");
    // The wrapped vendor's, unchanged (applications' vendor quirk tables key on it).
    assert_eq!(
        platform_string(p, CL_PLATFORM_VENDOR),
        platform_string(bare_platform(), CL_PLATFORM_VENDOR)
    );
    let v = platform_string(p, CL_PLATFORM_VERSION);
    let bare_v = platform_string(bare_platform(), CL_PLATFORM_VERSION);
    // "OpenCL<space><major.minor><space>..." with the inner version kept.
    assert_eq!(
        v.split(' ').take(2).collect::<Vec<_>>(),
        bare_v.split(' ').take(2).collect::<Vec<_>>()
    );
    assert!(v.contains(&vendor_name()), "{v}");
    assert_eq!(
        platform_string(p, CL_PLATFORM_PROFILE),
        platform_string(bare_platform(), CL_PLATFORM_PROFILE)
    );
    let suffix = platform_string(p, CL_PLATFORM_ICD_SUFFIX_KHR);
    assert!(!suffix.is_empty());
    assert_ne!(
        suffix,
        platform_string(bare_platform(), CL_PLATFORM_ICD_SUFFIX_KHR)
    );
    let num: cl_version = info_scalar(|s, v, r| unsafe {
        clGetPlatformInfo(p, CL_PLATFORM_NUMERIC_VERSION, s, v, r)
    });
    let bare_num: cl_version = info_scalar(|s, v, r| unsafe {
        clGetPlatformInfo(bare_platform(), CL_PLATFORM_NUMERIC_VERSION, s, v, r)
    });
    assert_eq!(num, bare_num);
}

fn name_versions(b: &[u8]) -> Vec<String> {
    b.chunks_exact(std::mem::size_of::<cl_name_version>())
        .map(|c| cstr(&c[4..]))
        .collect()
}

#[test]
fn extension_lists_are_filtered_and_consistent() {
    let p = sp_platform();
    let exts = platform_string(p, CL_PLATFORM_EXTENSIONS);
    let list: Vec<&str> = exts.split_whitespace().collect();
    assert!(list.contains(&"cl_khr_icd"));
    assert!(list.contains(&"cl_khr_priority_hints"));
    // PoCL's content-size extension has an entry point the layer does not forward.
    assert!(!list.contains(&"cl_pocl_content_size"));
    let wv = info_bytes(|s, v, r| unsafe {
        clGetPlatformInfo(p, CL_PLATFORM_EXTENSIONS_WITH_VERSION, s, v, r)
    });
    let mut a = name_versions(&wv);
    let mut b: Vec<String> = list.iter().map(|s| s.to_string()).collect();
    a.sort();
    b.sort();
    assert_eq!(a, b, "plain and _WITH_VERSION lists must agree");
    let d = device(p);
    let dexts = cstr(&info_bytes(|s, v, r| unsafe {
        clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, s, v, r)
    }));
    assert!(dexts
        .split_whitespace()
        .any(|e| e == "cl_khr_priority_hints"));
    let dwv = info_bytes(|s, v, r| unsafe {
        clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS_WITH_VERSION, s, v, r)
    });
    let mut a = name_versions(&dwv);
    let mut b: Vec<String> = dexts.split_whitespace().map(String::from).collect();
    a.sort();
    b.sort();
    assert_eq!(a, b);
}

#[test]
fn platform_info_bad_arguments() {
    let p = sp_platform();
    let mut small = [0u8; 2];
    // "CL_INVALID_VALUE if ... param_value_size is < size of return type"
    let rc = unsafe {
        clGetPlatformInfo(
            p,
            CL_PLATFORM_NAME,
            2,
            small.as_mut_ptr() as *mut c_void,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(rc, CL_INVALID_VALUE);
    let rc = unsafe { clGetPlatformInfo(p, 0xdead, 0, std::ptr::null_mut(), &mut 0) };
    assert_eq!(
        rc, CL_INVALID_VALUE,
        "unknown param names are the vendor's CL_INVALID_VALUE"
    );
}

#[test]
fn device_info_matches_bare_except_platform_specific() {
    let (sp, bare) = (device(sp_platform()), device(bare_platform()));
    assert_ne!(
        sp, bare,
        "the application gets our wrapper, not the vendor's device"
    );
    for q in [
        CL_DEVICE_NAME,
        CL_DEVICE_VENDOR,
        CL_DEVICE_VERSION,
        CL_DRIVER_VERSION,
        CL_DEVICE_TYPE,
        CL_DEVICE_MAX_COMPUTE_UNITS,
        CL_DEVICE_MAX_WORK_GROUP_SIZE,
        CL_DEVICE_GLOBAL_MEM_SIZE,
        CL_DEVICE_OPENCL_C_VERSION,
        CL_DEVICE_MAX_WORK_ITEM_SIZES,
    ] {
        let a = info_bytes(|s, v, r| unsafe { clGetDeviceInfo(sp, q, s, v, r) });
        let b = info_bytes(|s, v, r| unsafe { clGetDeviceInfo(bare, q, s, v, r) });
        assert_eq!(a, b, "device query {q:#x} differs");
    }
    let plat: cl_platform_id =
        info_scalar(|s, v, r| unsafe { clGetDeviceInfo(sp, CL_DEVICE_PLATFORM, s, v, r) });
    assert_eq!(
        plat,
        sp_platform(),
        "CL_DEVICE_PLATFORM must be our platform"
    );
    let parent: cl_device_id =
        info_scalar(|s, v, r| unsafe { clGetDeviceInfo(sp, CL_DEVICE_PARENT_DEVICE, s, v, r) });
    assert!(parent.is_null());
}

#[test]
fn device_ids_and_type_filters_match_bare() {
    for ty in [
        CL_DEVICE_TYPE_ALL,
        CL_DEVICE_TYPE_DEFAULT,
        CL_DEVICE_TYPE_CPU,
        CL_DEVICE_TYPE_GPU,
        CL_DEVICE_TYPE_ACCELERATOR,
    ] {
        let mut n_sp = 0;
        let mut n_bare = 0;
        let rc_sp = unsafe {
            clGetDeviceIDs(
                sp_platform(),
                ty as cl_device_type,
                0,
                std::ptr::null_mut(),
                &mut n_sp,
            )
        };
        let rc_bare = unsafe {
            clGetDeviceIDs(
                bare_platform(),
                ty as cl_device_type,
                0,
                std::ptr::null_mut(),
                &mut n_bare,
            )
        };
        assert_eq!((rc_sp, n_sp), (rc_bare, n_bare), "type {ty:#x}");
    }
    // "CL_INVALID_VALUE if num_entries is equal to zero and devices is not NULL"
    let mut d = std::ptr::null_mut();
    let rc = unsafe {
        clGetDeviceIDs(
            sp_platform(),
            CL_DEVICE_TYPE_ALL as cl_device_type,
            0,
            &mut d,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(rc, CL_INVALID_VALUE);
}

#[test]
fn sub_devices_are_wrapped_and_counted() {
    let d = device(sp_platform());
    let props = [
        CL_DEVICE_PARTITION_EQUALLY as cl_device_partition_property,
        1,
        0,
    ];
    let mut n = 0;
    let rc = unsafe { clCreateSubDevices(d, props.as_ptr(), 0, std::ptr::null_mut(), &mut n) };
    let bare_rc = unsafe {
        clCreateSubDevices(
            device(bare_platform()),
            props.as_ptr(),
            0,
            std::ptr::null_mut(),
            &mut 0,
        )
    };
    assert_eq!(rc, bare_rc);
    if rc != CL_SUCCESS {
        eprintln!(
            "note: PoCL cannot partition this device ({rc}); only the error path was compared"
        );
        return;
    }
    let mut subs = vec![std::ptr::null_mut(); n as usize];
    ok(unsafe {
        clCreateSubDevices(
            d,
            props.as_ptr(),
            n,
            subs.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    });
    let parent: cl_device_id = info_scalar(|s, v, r| unsafe {
        clGetDeviceInfo(subs[0], CL_DEVICE_PARENT_DEVICE, s, v, r)
    });
    assert_eq!(parent, d);
    ok(unsafe { clRetainDevice(subs[0]) });
    let rc1: cl_uint = info_scalar(|s, v, r| unsafe {
        clGetDeviceInfo(subs[0], CL_DEVICE_REFERENCE_COUNT, s, v, r)
    });
    assert_eq!(rc1, 2);
    for s in &subs {
        ok(unsafe { clReleaseDevice(*s) });
    }
    ok(unsafe { clReleaseDevice(subs[0]) });
    // Released: the handle is no longer valid.
    assert_eq!(unsafe { clRetainDevice(subs[0]) }, CL_INVALID_DEVICE);
    // Root devices are not reference counted.
    ok(unsafe { clRetainDevice(d) });
    ok(unsafe { clReleaseDevice(d) });
}

#[test]
fn host_timers() {
    let d = device(sp_platform());
    let (mut dev, mut host) = (0u64, 0u64);
    let rc = unsafe { clGetDeviceAndHostTimer(d, &mut dev, &mut host) };
    let bare = unsafe { clGetDeviceAndHostTimer(device(bare_platform()), &mut dev, &mut host) };
    assert_eq!(rc, bare);
    assert_eq!(unsafe { clGetHostTimer(d, &mut host) }, unsafe {
        clGetHostTimer(device(bare_platform()), &mut host)
    });
    assert_eq!(
        unsafe { clGetHostTimer(d, std::ptr::null_mut()) },
        CL_INVALID_VALUE
    );
    assert_eq!(
        unsafe { clGetDeviceAndHostTimer(std::ptr::null_mut(), &mut dev, &mut host) },
        CL_INVALID_DEVICE
    );
}

#[test]
fn context_handle_queries_return_app_wrappers() {
    let p = sp_platform();
    let env = Env::new(p);
    let devs =
        info_bytes(|s, v, r| unsafe { clGetContextInfo(env.context, CL_CONTEXT_DEVICES, s, v, r) });
    let d: cl_device_id = unsafe { (devs.as_ptr() as *const cl_device_id).read_unaligned() };
    assert_eq!(d, env.device);
    let props = info_bytes(|s, v, r| unsafe {
        clGetContextInfo(env.context, CL_CONTEXT_PROPERTIES, s, v, r)
    });
    let words: Vec<cl_context_properties> = props
        .chunks_exact(8)
        .map(|c| i64::from_ne_bytes(c.try_into().unwrap()) as cl_context_properties)
        .collect();
    assert_eq!(
        words,
        vec![
            CL_CONTEXT_PLATFORM as cl_context_properties,
            p as cl_context_properties,
            0
        ],
        "the app's own properties"
    );
    let n: cl_uint = info_scalar(|s, v, r| unsafe {
        clGetContextInfo(env.context, CL_CONTEXT_NUM_DEVICES, s, v, r)
    });
    assert_eq!(n, 1);
}

#[test]
fn context_from_type_and_refcounts_match_bare() {
    let counts = |p: cl_platform_id| {
        let props = [
            CL_CONTEXT_PLATFORM as cl_context_properties,
            p as cl_context_properties,
            0,
        ];
        let mut err = 0;
        let c = unsafe {
            clCreateContextFromType(
                props.as_ptr(),
                CL_DEVICE_TYPE_ALL as cl_device_type,
                None,
                std::ptr::null_mut(),
                &mut err,
            )
        };
        ok(err);
        ok(unsafe { clRetainContext(c) });
        let a: cl_uint = info_scalar(|s, v, r| unsafe {
            clGetContextInfo(c, CL_CONTEXT_REFERENCE_COUNT, s, v, r)
        });
        ok(unsafe { clReleaseContext(c) });
        let b: cl_uint = info_scalar(|s, v, r| unsafe {
            clGetContextInfo(c, CL_CONTEXT_REFERENCE_COUNT, s, v, r)
        });
        ok(unsafe { clReleaseContext(c) });
        (a, b)
    };
    assert_eq!(counts(sp_platform()), counts(bare_platform()));
}

static DESTRUCTED: AtomicUsize = AtomicUsize::new(0);
static NOTIFY_SEEN: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn on_destroy(ctx: cl_context, user: *mut c_void) {
    // The callback must see the app's own handle and user data.
    let expected = user as *const cl_context;
    if unsafe { *expected } == ctx {
        DESTRUCTED.fetch_add(1, Ordering::SeqCst);
    }
}

unsafe extern "C" fn on_notify(
    _e: *const c_char,
    _p: *const c_void,
    _cb: usize,
    user: *mut c_void,
) {
    NOTIFY_SEEN.fetch_add(user as usize, Ordering::SeqCst);
}

#[test]
fn context_destructor_callback_gets_app_handle_and_user_data() {
    let p = sp_platform();
    let d = device(p);
    let mut err = 0;
    let c = unsafe {
        clCreateContext(
            std::ptr::null(),
            1,
            &d,
            Some(on_notify),
            7usize as *mut c_void,
            &mut err,
        )
    };
    ok(err);
    let slot = Box::leak(Box::new(c));
    ok(unsafe {
        clSetContextDestructorCallback(c, Some(on_destroy), slot as *mut cl_context as *mut c_void)
    });
    assert_eq!(
        unsafe { clSetContextDestructorCallback(c, None, std::ptr::null_mut()) },
        CL_INVALID_VALUE
    );
    ok(unsafe { clReleaseContext(c) });
    assert_eq!(DESTRUCTED.load(Ordering::SeqCst), 1);
}

#[test]
fn invalid_handles_get_the_kind_error() {
    let env = Env::sp();
    let foreign = &0u64 as *const u64 as *mut c_void;
    let bare_dev = device(bare_platform());
    let mut size = 0;
    // The loader itself dereferences a foreign handle to find its table, so foreign and NULL
    // handles are passed through our table directly, as a loader that checks would.
    let table = unsafe { &**(env.context as *const *const opencl_sys::cl_icd::cl_icd_dispatch) };
    for p in [
        std::ptr::null_mut(),
        foreign as cl_platform_id,
        env.context as cl_platform_id,
        bare_platform(),
    ] {
        let rc = unsafe {
            table.clGetDeviceIDs.unwrap()(
                p,
                CL_DEVICE_TYPE_ALL as cl_device_type,
                0,
                std::ptr::null_mut(),
                &mut 0,
            )
        };
        assert_eq!(rc, CL_INVALID_PLATFORM);
    }
    for d in [std::ptr::null_mut(), foreign as cl_device_id, bare_dev] {
        let rc = unsafe {
            table.clGetDeviceInfo.unwrap()(d, CL_DEVICE_NAME, 0, std::ptr::null_mut(), &mut size)
        };
        assert_eq!(rc, CL_INVALID_DEVICE);
    }
    for c in [std::ptr::null_mut(), foreign as cl_context] {
        let rc = unsafe {
            table.clGetContextInfo.unwrap()(
                c,
                CL_CONTEXT_NUM_DEVICES,
                0,
                std::ptr::null_mut(),
                &mut size,
            )
        };
        assert_eq!(rc, CL_INVALID_CONTEXT);
    }
    // Device: wrong kind (a context) and a bare vendor device passed to our context.
    let rc = unsafe {
        clGetDeviceInfo(
            env.context as cl_device_id,
            CL_DEVICE_NAME,
            0,
            std::ptr::null_mut(),
            &mut size,
        )
    };
    assert_eq!(rc, CL_INVALID_DEVICE);
    let mut err = 0;
    let c = unsafe {
        clCreateContext(
            std::ptr::null(),
            1,
            &bare_dev,
            None,
            std::ptr::null_mut(),
            &mut err,
        )
    };
    // The loader routes by the first device (bare PoCL) here, so this only checks nothing crashes.
    if !c.is_null() {
        unsafe { clReleaseContext(c) };
    }
    let mixed = [env.device, foreign as cl_device_id];
    let c = unsafe {
        clCreateContext(
            std::ptr::null(),
            2,
            mixed.as_ptr(),
            None,
            std::ptr::null_mut(),
            &mut err,
        )
    };
    assert!(c.is_null());
    assert_eq!(err, CL_INVALID_DEVICE);
    // Context: wrong kind, released.
    let rc = unsafe {
        clGetContextInfo(
            env.device as cl_context,
            CL_CONTEXT_NUM_DEVICES,
            0,
            std::ptr::null_mut(),
            &mut size,
        )
    };
    assert_eq!(rc, CL_INVALID_CONTEXT);
    let props = [
        CL_CONTEXT_PLATFORM as cl_context_properties,
        sp_platform() as cl_context_properties,
        0,
    ];
    let c = unsafe {
        clCreateContext(
            props.as_ptr(),
            1,
            &env.device,
            None,
            std::ptr::null_mut(),
            &mut err,
        )
    };
    ok(err);
    ok(unsafe { clReleaseContext(c) });
    assert_eq!(
        unsafe { clRetainContext(c) },
        CL_INVALID_CONTEXT,
        "a released context is invalid"
    );
    // Bad arguments.
    let c = unsafe {
        clCreateContext(
            props.as_ptr(),
            0,
            &env.device,
            None,
            std::ptr::null_mut(),
            &mut err,
        )
    };
    assert!(c.is_null());
    assert_eq!(err, CL_INVALID_VALUE);
    let bad_props = [
        CL_CONTEXT_PLATFORM as cl_context_properties,
        foreign as cl_context_properties,
        0,
    ];
    let c = unsafe {
        table.clCreateContext.unwrap()(
            bad_props.as_ptr(),
            1,
            &env.device,
            None,
            std::ptr::null_mut(),
            &mut err,
        )
    };
    assert!(c.is_null());
    assert_eq!(err, CL_INVALID_PLATFORM);
}

#[test]
fn extension_function_addresses() {
    let p = sp_platform();
    // Through our table: a Khronos loader answers some names (GL sharing) itself.
    let table = unsafe { &**(p as *const *const opencl_sys::cl_icd::cl_icd_dispatch) };
    let get = |name: &str| {
        let c = CString::new(name).unwrap();
        unsafe { table.clGetExtensionFunctionAddressForPlatform.unwrap()(p, c.as_ptr()) }
    };
    // Through the loader too, so the entry point is exercised as applications call it.
    let through_loader =
        unsafe { clGetExtensionFunctionAddressForPlatform(p, c"clNoSuchFunctionKHR".as_ptr()) };
    assert!(through_loader.is_null());
    assert!(!get("clIcdGetPlatformIDsKHR").is_null());
    assert!(
        get("clSetContentSizeBufferPoCL").is_null(),
        "unforwarded extension functions are NULL"
    );
    assert!(get("clNoSuchFunctionKHR").is_null());
    assert!(get("clCreateFromGLBuffer").is_null());
}

#[test]
fn unload_compiler() {
    ok(unsafe { clUnloadPlatformCompiler(sp_platform()) });
    assert_eq!(
        unsafe { clUnloadPlatformCompiler(Env::sp().context as cl_platform_id) },
        CL_INVALID_PLATFORM
    );
}

/// Slots the loader does not export on Linux, called through the tables as a loader would.
#[test]
fn deprecated_and_ext_slots_match_the_vendor() {
    type Table = opencl_sys::cl_icd::cl_icd_dispatch;
    let ours = unsafe { &**(sp_platform() as *const *const Table) };
    let bare = unsafe { &**(bare_platform() as *const *const Table) };
    // OpenCL 1.0's clUnloadCompiler is a hint that always succeeds.
    ok(unsafe { ours.clUnloadCompiler.unwrap()() });
    let (d, bd) = (device(sp_platform()), device(bare_platform()));
    // cl_ext_device_fission: where the vendor has no such slot, the layer says
    // CL_INVALID_OPERATION; otherwise the vendor's answer passes through unchanged.
    let expect = |slot: Option<unsafe extern "C" fn(cl_device_id) -> cl_int>| match slot {
        Some(f) => unsafe { f(bd) },
        None => CL_INVALID_OPERATION,
    };
    assert_eq!(
        unsafe { ours.clRetainDeviceEXT.unwrap()(d) },
        expect(bare.clRetainDeviceEXT)
    );
    assert_eq!(
        unsafe { ours.clReleaseDeviceEXT.unwrap()(d) },
        expect(bare.clReleaseDeviceEXT)
    );
    let props = [0x4050 as cl_device_partition_property_ext, 1, 0]; // CL_DEVICE_PARTITION_EQUALLY_EXT
    let mut n = 0;
    let rc = unsafe {
        ours.clCreateSubDevicesEXT.unwrap()(d, props.as_ptr(), 0, std::ptr::null_mut(), &mut n)
    };
    let bare_rc = match bare.clCreateSubDevicesEXT {
        Some(f) => unsafe { f(bd, props.as_ptr(), 0, std::ptr::null_mut(), &mut n) },
        None => CL_INVALID_OPERATION,
    };
    assert_eq!(rc, bare_rc);
    assert_eq!(
        unsafe { ours.clRetainDeviceEXT.unwrap()(std::ptr::null_mut()) },
        CL_INVALID_DEVICE
    );
}
