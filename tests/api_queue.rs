//! Command-queue entry points through the real loader, side by side with bare PoCL.
#![allow(deprecated)] // clCreateCommandQueue is an entry point to cover.

mod common;

use common::*;
use opencl_sys::cl_icd::cl_icd_dispatch;
use opencl_sys::*;
use std::ffi::c_void;
use std::ptr::{null, null_mut};

/// Our dispatch table, read from one of our handles exactly as the loader reads it. Calls
/// through it reach the layer with any first argument (a bare-PoCL handle, a stack address)
/// that the loader itself would route elsewhere or crash on.
fn table(h: *mut c_void) -> &'static cl_icd_dispatch {
    // SAFETY: `h` is one of our live handles; the ICD ABI puts the table pointer first.
    unsafe { &**(h as *const *const cl_icd_dispatch) }
}

fn queue_info(q: cl_command_queue, what: cl_command_queue_info) -> Vec<u8> {
    info_bytes(|s, v, r| unsafe { clGetCommandQueueInfo(q, what, s, v, r) })
}

fn queue_scalar<T: Copy + Default>(q: cl_command_queue, what: cl_command_queue_info) -> T {
    info_scalar(|s, v, r| unsafe { clGetCommandQueueInfo(q, what, s, v, r) })
}

fn props_of(b: &[u8]) -> Vec<cl_queue_properties> {
    b.chunks_exact(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

/// `clCreateCommandQueueWithProperties` as (queue, status).
fn create_with(env: &Env, props: &[cl_queue_properties]) -> (cl_command_queue, cl_int) {
    let mut err = 0;
    let p = if props.is_empty() {
        null()
    } else {
        props.as_ptr()
    };
    // SAFETY: valid context and device; `props` is zero-terminated or NULL.
    let q = unsafe { clCreateCommandQueueWithProperties(env.context, env.device, p, &mut err) };
    (q, err)
}

fn release(q: cl_command_queue) {
    // SAFETY: releasing a queue the test created.
    ok(unsafe { clReleaseCommandQueue(q) });
}

#[test]
fn queue_info_returns_our_wrappers() {
    let env = Env::sp();
    let bare = Env::new(bare_platform());
    for e in [&env, &bare] {
        assert_eq!(
            queue_scalar::<cl_context>(e.queue, CL_QUEUE_CONTEXT),
            e.context
        );
        assert_eq!(
            queue_scalar::<cl_device_id>(e.queue, CL_QUEUE_DEVICE),
            e.device
        );
    }
    // Forwarded values equal the bare driver's.
    for what in [
        CL_QUEUE_PROPERTIES,
        CL_QUEUE_REFERENCE_COUNT,
        CL_QUEUE_PROPERTIES_ARRAY,
    ] {
        assert_eq!(
            queue_info(env.queue, what),
            queue_info(bare.queue, what),
            "query {what:#x}"
        );
    }
    // Env::new's own array comes back, terminator included, exactly as bare PoCL does it.
    let arr = props_of(&queue_info(env.queue, CL_QUEUE_PROPERTIES_ARRAY));
    assert_eq!(
        arr,
        [
            CL_QUEUE_PROPERTIES as cl_queue_properties,
            CL_QUEUE_PROFILING_ENABLE,
            0
        ]
    );
    // The default device queue: whatever bare says (an error, or NULL on PoCL) and never an
    // inner handle.
    let mut v: cl_command_queue = 1 as cl_command_queue;
    let mut bv: cl_command_queue = 1 as cl_command_queue;
    let sz = std::mem::size_of::<cl_command_queue>();
    // SAFETY: one handle out.
    let rc = unsafe {
        clGetCommandQueueInfo(
            env.queue,
            CL_QUEUE_DEVICE_DEFAULT,
            sz,
            &mut v as *mut _ as *mut c_void,
            null_mut(),
        )
    };
    // SAFETY: as above.
    let brc = unsafe {
        clGetCommandQueueInfo(
            bare.queue,
            CL_QUEUE_DEVICE_DEFAULT,
            sz,
            &mut bv as *mut _ as *mut c_void,
            null_mut(),
        )
    };
    assert_eq!(rc, brc);
    if rc == CL_SUCCESS {
        assert!(bv.is_null() == v.is_null());
        assert!(v.is_null() || v == env.queue);
    }
    // Size rules are ours for the answered queries.
    let mut small = 0u8;
    // SAFETY: a deliberately short buffer.
    let rc = unsafe {
        clGetCommandQueueInfo(
            env.queue,
            CL_QUEUE_CONTEXT,
            1,
            &mut small as *mut u8 as *mut c_void,
            null_mut(),
        )
    };
    assert_eq!(rc, CL_INVALID_VALUE);
    // An unknown query: the vendor's answer.
    let mut sink = [0u8; 64];
    let mut unknown = |q| unsafe {
        clGetCommandQueueInfo(q, 0x7777, 64, sink.as_mut_ptr() as *mut c_void, null_mut())
    };
    assert_eq!(unknown(env.queue), unknown(bare.queue));
}

#[test]
fn legacy_create_and_set_property_match_bare() {
    for p in [sp_platform(), bare_platform()] {
        let env = Env::new(p);
        let mut err = 0;
        // SAFETY: valid context and device.
        let q = unsafe {
            clCreateCommandQueue(env.context, env.device, CL_QUEUE_PROFILING_ENABLE, &mut err)
        };
        ok(err);
        assert_eq!(queue_scalar::<cl_context>(q, CL_QUEUE_CONTEXT), env.context);
        assert_eq!(queue_scalar::<cl_device_id>(q, CL_QUEUE_DEVICE), env.device);
        assert_eq!(
            queue_scalar::<cl_command_queue_properties>(q, CL_QUEUE_PROPERTIES),
            CL_QUEUE_PROFILING_ENABLE
        );
        // "If command_queue was created using clCreateCommandQueue ... param_value_size_ret
        // equal to 0."
        assert!(queue_info(q, CL_QUEUE_PROPERTIES_ARRAY).is_empty());
        release(q);
        // Bad properties: the vendor's code.
        // SAFETY: as above.
        let q = unsafe { clCreateCommandQueue(env.context, env.device, 1 << 40, &mut err) };
        assert!(q.is_null());
        assert_eq!(err, CL_INVALID_VALUE);
    }
    // The deprecated property setter answers like bare PoCL; a vendor without it gets the
    // layer's CL_INVALID_OPERATION (the loader would have had nothing to call).
    let sp = Env::sp();
    let bare = Env::new(bare_platform());
    let set = |q: cl_command_queue| {
        let mut old: cl_command_queue_properties = 0;
        // libOpenCL does not export this deprecated function any more: take it from the
        // queue's own table, as the loader would.
        #[allow(non_snake_case)]
        let clSetCommandQueueProperty = table(q).clSetCommandQueueProperty?;
        // SAFETY: valid queue and out-pointer.
        Some(unsafe { clSetCommandQueueProperty(q, CL_QUEUE_PROFILING_ENABLE, CL_TRUE, &mut old) })
    };
    let ours = set(sp.queue).expect("every slot of our table is filled");
    assert_eq!(ours, set(bare.queue).unwrap_or(CL_INVALID_OPERATION));
}

#[test]
fn null_properties_give_an_empty_properties_array() {
    let env = Env::sp();
    let (q, err) = create_with(&env, &[]);
    ok(err);
    assert!(queue_info(q, CL_QUEUE_PROPERTIES_ARRAY).is_empty());
    assert_eq!(
        queue_scalar::<cl_command_queue_properties>(q, CL_QUEUE_PROPERTIES),
        0
    );
    release(q);
    // An empty list (just the terminator) is returned as given.
    let (q, err) = create_with(&env, &[0]);
    ok(err);
    assert_eq!(props_of(&queue_info(q, CL_QUEUE_PROPERTIES_ARRAY)), [0]);
    release(q);
}

#[test]
fn priority_hint_is_accepted_recorded_and_validated() {
    let env = Env::sp();
    let prio = CL_QUEUE_PRIORITY_KHR;
    for level in [
        CL_QUEUE_PRIORITY_HIGH_KHR,
        CL_QUEUE_PRIORITY_MED_KHR,
        CL_QUEUE_PRIORITY_LOW_KHR,
    ] {
        let props = [
            CL_QUEUE_PROPERTIES as cl_queue_properties,
            CL_QUEUE_PROFILING_ENABLE,
            prio,
            level as cl_queue_properties,
            0,
        ];
        let (q, err) = create_with(&env, &props);
        ok(err);
        // The app's own array, priority included, even though PoCL never saw it.
        assert_eq!(props_of(&queue_info(q, CL_QUEUE_PROPERTIES_ARRAY)), props);
        assert_eq!(
            queue_scalar::<cl_command_queue_properties>(q, CL_QUEUE_PROPERTIES),
            CL_QUEUE_PROFILING_ENABLE
        );
        // The queue works.
        let m = env.buffer(16);
        // SAFETY: a blocking write of 16 bytes from a live array, then a finish.
        unsafe {
            let data = [7u8; 16];
            ok(clEnqueueWriteBuffer(
                q,
                m,
                CL_TRUE,
                0,
                16,
                data.as_ptr() as *const c_void,
                0,
                null(),
                null_mut(),
            ));
            ok(clFinish(q));
            clReleaseMemObject(m);
        }
        release(q);
    }
    // Priority alone, first in the list.
    let (q, err) = create_with(
        &env,
        &[prio, CL_QUEUE_PRIORITY_LOW_KHR as cl_queue_properties, 0],
    );
    ok(err);
    release(q);
    // "CL_INVALID_VALUE if values specified in properties are not valid."
    for bad in [0u64, 3, 8, 1 << 33] {
        let (q, err) = create_with(&env, &[prio, bad, 0]);
        assert!(q.is_null());
        assert_eq!(err, CL_INVALID_VALUE, "priority {bad}");
    }
    // "CL_INVALID_QUEUE_PROPERTIES if the CL_QUEUE_PRIORITY_KHR property is specified and
    // the queue is a CL_QUEUE_ON_DEVICE."
    let on_dev = CL_QUEUE_ON_DEVICE | CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE;
    let (q, err) = create_with(
        &env,
        &[
            CL_QUEUE_PROPERTIES as cl_queue_properties,
            on_dev,
            prio,
            CL_QUEUE_PRIORITY_HIGH_KHR as cl_queue_properties,
            0,
        ],
    );
    assert!(q.is_null());
    assert_eq!(err, CL_INVALID_QUEUE_PROPERTIES);
}

#[test]
fn bad_properties_match_bare() {
    let sp = Env::sp();
    let bare = Env::new(bare_platform());
    // (PoCL exits the process on CL_QUEUE_ON_DEVICE, so device queues are not tried.)
    let cases: [&[cl_queue_properties]; 3] = [
        &[CL_QUEUE_PROPERTIES as cl_queue_properties, 1 << 40, 0],
        &[0x7777, 1, 0],
        &[CL_QUEUE_SIZE as cl_queue_properties, 1024, 0],
    ];
    for props in cases {
        let (a, ea) = create_with(&sp, props);
        let (b, eb) = create_with(&bare, props);
        assert_eq!(ea, eb, "{props:?}");
        assert_eq!(a.is_null(), b.is_null());
        if !a.is_null() {
            release(a);
            release(b);
        }
    }
}

#[test]
fn retain_release_flush_finish() {
    let sp = Env::sp();
    let bare = Env::new(bare_platform());
    for e in [&sp, &bare] {
        let (q, err) = create_with(e, &[0]);
        ok(err);
        // SAFETY: valid queue handles throughout.
        unsafe {
            ok(clRetainCommandQueue(q));
            assert_eq!(queue_scalar::<cl_uint>(q, CL_QUEUE_REFERENCE_COUNT), 2);
            ok(clFlush(q));
            ok(clFinish(q));
            ok(clReleaseCommandQueue(q));
            assert_eq!(queue_scalar::<cl_uint>(q, CL_QUEUE_REFERENCE_COUNT), 1);
            ok(clReleaseCommandQueue(q));
        }
    }
}

#[test]
fn creation_with_bad_context_or_device() {
    let env = Env::sp();
    let bare = Env::new(bare_platform());
    let t = table(env.context);
    let mut stack = [0usize; 8];
    let mut err = 0;
    let props = [0 as cl_queue_properties];
    // SAFETY: every call goes through our table; the layer must reject the bad handles unread.
    unsafe {
        for bad in [
            null_mut(),
            stack.as_mut_ptr() as cl_context,
            bare.context,
            env.queue as cl_context,
        ] {
            assert!(t.clCreateCommandQueue.unwrap()(bad, env.device, 0, &mut err).is_null());
            assert_eq!(err, CL_INVALID_CONTEXT);
            assert!(t.clCreateCommandQueueWithProperties.unwrap()(
                bad,
                env.device,
                props.as_ptr(),
                &mut err
            )
            .is_null());
            assert_eq!(err, CL_INVALID_CONTEXT);
        }
        for bad in [
            null_mut(),
            stack.as_mut_ptr() as cl_device_id,
            bare.device,
            env.context as cl_device_id,
        ] {
            assert!(t.clCreateCommandQueue.unwrap()(env.context, bad, 0, &mut err).is_null());
            assert_eq!(err, CL_INVALID_DEVICE);
            assert!(t.clCreateCommandQueueWithProperties.unwrap()(
                env.context,
                bad,
                props.as_ptr(),
                &mut err
            )
            .is_null());
            assert_eq!(err, CL_INVALID_DEVICE);
        }
    }
}

/// NULL, a stack address, a bare-PoCL queue, a released queue and a context passed as a
/// queue all get CL_INVALID_COMMAND_QUEUE.
#[test]
fn invalid_queue_handles() {
    let env = Env::sp();
    let bare = Env::new(bare_platform());
    let t = table(env.context);
    let mut stack = [0usize; 8];
    let set_default_refusal = if replaceable_default_queue(env.device) {
        CL_INVALID_COMMAND_QUEUE
    } else {
        CL_INVALID_OPERATION
    };
    let check = |q: cl_command_queue, what: &str| {
        let mut out = [0u8; 64];
        let o = out.as_mut_ptr() as *mut c_void;
        let mut old = 0;
        // SAFETY: every call is through our table; the layer must reject `q` unread.
        unsafe {
            assert_eq!(
                t.clGetCommandQueueInfo.unwrap()(q, CL_QUEUE_CONTEXT, 64, o, null_mut()),
                CL_INVALID_COMMAND_QUEUE,
                "{what}"
            );
            assert_eq!(
                t.clRetainCommandQueue.unwrap()(q),
                CL_INVALID_COMMAND_QUEUE,
                "{what}"
            );
            assert_eq!(
                t.clReleaseCommandQueue.unwrap()(q),
                CL_INVALID_COMMAND_QUEUE,
                "{what}"
            );
            assert_eq!(t.clFlush.unwrap()(q), CL_INVALID_COMMAND_QUEUE, "{what}");
            assert_eq!(t.clFinish.unwrap()(q), CL_INVALID_COMMAND_QUEUE, "{what}");
            assert_eq!(
                t.clSetCommandQueueProperty.unwrap()(q, 0, CL_FALSE, &mut old),
                CL_INVALID_COMMAND_QUEUE,
                "{what}"
            );
            // A device without a replaceable default on-device queue refuses before it
            // looks at the queue (see set_default_device_queue_matches_bare).
            assert_eq!(
                t.clSetDefaultDeviceCommandQueue.unwrap()(env.context, env.device, q),
                set_default_refusal,
                "{what}"
            );
        }
    };
    check(null_mut(), "NULL");
    check(stack.as_mut_ptr() as cl_command_queue, "stack address");
    check(bare.queue, "bare PoCL queue");
    check(env.context as cl_command_queue, "context as queue");
    let (gone, err) = create_with(&env, &[0]);
    ok(err);
    release(gone);
    check(gone, "released queue");
    // Through the loader too: the released wrapper still routes to us.
    // SAFETY: a released handle on purpose.
    assert_eq!(
        unsafe { clRetainCommandQueue(gone) },
        CL_INVALID_COMMAND_QUEUE
    );
}

/// A plain device value, or `None` when the device does not know the query.
fn device_value<T: Copy + Default>(d: cl_device_id, what: cl_device_info) -> Option<T> {
    let mut v = T::default();
    // SAFETY: one T out.
    let rc = unsafe {
        clGetDeviceInfo(
            d,
            what,
            std::mem::size_of::<T>(),
            &mut v as *mut T as *mut c_void,
            null_mut(),
        )
    };
    (rc == CL_SUCCESS).then_some(v)
}

/// What the device itself says about replacing its default on-device queue: 3.0 devices
/// in `CL_DEVICE_DEVICE_ENQUEUE_CAPABILITIES`, 2.x devices by having on-device queues.
fn replaceable_default_queue(d: cl_device_id) -> bool {
    match device_value::<cl_device_device_enqueue_capabilities>(
        d,
        CL_DEVICE_DEVICE_ENQUEUE_CAPABILITIES,
    ) {
        Some(caps) => caps & CL_DEVICE_QUEUE_REPLACEABLE_DEFAULT != 0,
        None => {
            device_value::<cl_uint>(d, CL_DEVICE_QUEUE_ON_DEVICE_MAX_SIZE).is_some_and(|m| m > 0)
        }
    }
}

#[test]
fn set_default_device_queue_matches_bare() {
    let sp = Env::sp();
    let bare = Env::new(bare_platform());
    let replaceable = replaceable_default_queue(bare.device);
    assert_eq!(
        replaceable_default_queue(sp.device),
        replaceable,
        "the layer reports the vendor's device-enqueue capability"
    );
    let t = table(sp.context);
    let (gone, err) = create_with(&sp, &[0]);
    ok(err);
    release(gone);
    let mut stack = [0usize; 8];
    // The Khronos CTS (test_api consistency_device_enqueue) passes NULL on a device
    // without device-side enqueue and requires CL_INVALID_OPERATION; a host queue or a bad
    // handle gets the same answer there, as from the bare driver.
    let cases: [(cl_command_queue, cl_command_queue, &str); 4] = [
        (null_mut(), null_mut(), "NULL queue"),
        (sp.queue, bare.queue, "host queue"),
        // The bare driver gets NULL for the handles only the layer can be asked about.
        (gone, null_mut(), "released queue"),
        (stack.as_mut_ptr() as _, null_mut(), "stack address"),
    ];
    for (ours, theirs, what) in cases {
        // SAFETY: valid context and device; the queue handle is what is under test, and
        // the layer's call goes through its own table so a foreign handle reaches it.
        let (a, b) = unsafe {
            (
                t.clSetDefaultDeviceCommandQueue.unwrap()(sp.context, sp.device, ours),
                clSetDefaultDeviceCommandQueue(bare.context, bare.device, theirs),
            )
        };
        assert_ne!(a, CL_SUCCESS, "{what}: not a default device queue");
        if !replaceable {
            assert_eq!(a, CL_INVALID_OPERATION, "{what}");
            assert_eq!(a, b, "{what}: as the bare driver");
        }
    }
    // SAFETY: through our table with bad context / device handles.
    unsafe {
        assert_eq!(
            t.clSetDefaultDeviceCommandQueue.unwrap()(bare.context, sp.device, null_mut()),
            CL_INVALID_CONTEXT
        );
        assert_eq!(
            t.clSetDefaultDeviceCommandQueue.unwrap()(sp.context, bare.device, null_mut()),
            CL_INVALID_DEVICE
        );
    }
    // A valid device of ours that the context does not hold: a sub-device of its device.
    let props = [
        CL_DEVICE_PARTITION_EQUALLY as cl_device_partition_property,
        1,
        0,
    ];
    let mut n = 0;
    // SAFETY: a count query.
    let rc = unsafe { clCreateSubDevices(sp.device, props.as_ptr(), 0, null_mut(), &mut n) };
    if rc != CL_SUCCESS {
        eprintln!("note: the device cannot be partitioned ({rc}); association not checked");
        return;
    }
    let mut subs = vec![null_mut(); n as usize];
    // SAFETY: room for `n` sub-devices.
    ok(unsafe { clCreateSubDevices(sp.device, props.as_ptr(), n, subs.as_mut_ptr(), null_mut()) });
    for sub in subs {
        // SAFETY: valid handles; the sub-device is not in sp.context.
        unsafe {
            assert_eq!(
                clSetDefaultDeviceCommandQueue(sp.context, sub, null_mut()),
                CL_INVALID_DEVICE,
                "a device the context does not hold"
            );
            ok(clReleaseDevice(sub));
        }
    }
}
