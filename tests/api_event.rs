//! Event entry points through the real loader, side by side with bare PoCL.

mod common;

use common::*;
use opencl_sys::cl_icd::cl_icd_dispatch;
use opencl_sys::*;
use std::ffi::c_void;
use std::ptr::{null, null_mut};
use std::sync::Mutex;

/// Our dispatch table, read from one of our handles exactly as the loader reads it.
fn table(h: *mut c_void) -> &'static cl_icd_dispatch {
    // SAFETY: `h` is one of our live handles; the ICD ABI puts the table pointer first.
    unsafe { &**(h as *const *const cl_icd_dispatch) }
}

fn event_scalar<T: Copy + Default>(e: cl_event, what: cl_event_info) -> T {
    info_scalar(|s, v, r| unsafe { clGetEventInfo(e, what, s, v, r) })
}

fn status(e: cl_event) -> cl_int {
    event_scalar(e, CL_EVENT_COMMAND_EXECUTION_STATUS)
}

fn user_event(env: &Env) -> cl_event {
    let mut err = 0;
    // SAFETY: valid context.
    let e = unsafe { clCreateUserEvent(env.context, &mut err) };
    ok(err);
    e
}

fn marker(q: cl_command_queue, wait: &[cl_event]) -> cl_event {
    let mut e = null_mut();
    let (n, p) = if wait.is_empty() {
        (0, null())
    } else {
        (wait.len() as cl_uint, wait.as_ptr())
    };
    // SAFETY: valid queue and wait list.
    ok(unsafe { clEnqueueMarkerWithWaitList(q, n, p, &mut e) });
    e
}

fn release(e: cl_event) {
    // SAFETY: releasing an event the test owns.
    ok(unsafe { clReleaseEvent(e) });
}

fn wait(events: &[cl_event]) {
    // SAFETY: a valid, non-empty list.
    ok(unsafe { clWaitForEvents(events.len() as cl_uint, events.as_ptr()) });
}

/// Polls (callbacks may run on the vendor's thread just after the wait returns).
fn wait_for(pred: impl Fn() -> bool) -> bool {
    for _ in 0..2000 {
        if pred() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    pred()
}

#[test]
fn event_info_returns_our_wrappers() {
    let env = Env::sp();
    let m = marker(env.queue, &[]);
    assert_eq!(
        event_scalar::<cl_command_queue>(m, CL_EVENT_COMMAND_QUEUE),
        env.queue
    );
    assert_eq!(event_scalar::<cl_context>(m, CL_EVENT_CONTEXT), env.context);
    assert_eq!(
        event_scalar::<cl_command_type>(m, CL_EVENT_COMMAND_TYPE),
        CL_COMMAND_MARKER
    );
    wait(&[m]);
    assert_eq!(status(m), CL_COMPLETE);
    let u = user_event(&env);
    // "For user event objects, a NULL value is returned."
    assert!(event_scalar::<cl_command_queue>(u, CL_EVENT_COMMAND_QUEUE).is_null());
    assert_eq!(event_scalar::<cl_context>(u, CL_EVENT_CONTEXT), env.context);
    assert_eq!(
        event_scalar::<cl_command_type>(u, CL_EVENT_COMMAND_TYPE),
        CL_COMMAND_USER
    );
    assert_eq!(status(u), CL_SUBMITTED);
    // SAFETY: valid user event.
    ok(unsafe { clSetUserEventStatus(u, CL_COMPLETE) });
    assert_eq!(status(u), CL_COMPLETE);
    // Short buffers are refused for the answered queries.
    let mut small = 0u8;
    // SAFETY: a deliberately short buffer.
    let rc = unsafe {
        clGetEventInfo(
            m,
            CL_EVENT_CONTEXT,
            1,
            &mut small as *mut u8 as *mut c_void,
            null_mut(),
        )
    };
    assert_eq!(rc, CL_INVALID_VALUE);
    release(m);
    release(u);
}

#[test]
fn reference_counts_match_bare() {
    for p in [sp_platform(), bare_platform()] {
        let env = Env::new(p);
        let u = user_event(&env);
        // SAFETY: valid event handle.
        unsafe {
            ok(clRetainEvent(u));
            assert_eq!(event_scalar::<cl_uint>(u, CL_EVENT_REFERENCE_COUNT), 2);
            ok(clReleaseEvent(u));
            assert_eq!(event_scalar::<cl_uint>(u, CL_EVENT_REFERENCE_COUNT), 1);
            ok(clSetUserEventStatus(u, CL_COMPLETE));
        }
        release(u);
    }
}

#[test]
fn user_event_gates_a_later_command() {
    let env = Env::sp();
    let buf = env.buffer(64);
    env.write(buf, &[0u32; 16]);
    let u = user_event(&env);
    let data: Vec<u32> = (0..16).collect();
    let mut w = null_mut();
    // SAFETY: a non-blocking write from `data`, which outlives the wait below.
    ok(unsafe {
        clEnqueueWriteBuffer(
            env.queue,
            buf,
            CL_FALSE,
            0,
            64,
            data.as_ptr() as *const c_void,
            1,
            &u,
            &mut w,
        )
    });
    // SAFETY: valid queue.
    ok(unsafe { clFlush(env.queue) });
    // The write cannot have run: its only wait-list event is still pending.
    assert!(
        status(w) > CL_COMPLETE,
        "write ran before its user event completed"
    );
    // SAFETY: valid user event.
    ok(unsafe { clSetUserEventStatus(u, CL_COMPLETE) });
    wait(&[w]);
    assert_eq!(env.read::<u32>(buf, 16), data);
    release(w);
    release(u);
    // SAFETY: our buffer.
    unsafe { clReleaseMemObject(buf) };
}

/// A failed user event fails the commands that wait for it, the same way with and
/// without the layer. (A *blocking* read on a failed event hangs in PoCL itself, with or
/// without the layer, so the read is non-blocking and waited for.)
#[test]
fn failed_user_event_fails_dependent_commands_like_bare() {
    let mut codes = Vec::new();
    for p in [sp_platform(), bare_platform()] {
        let env = Env::new(p);
        let buf = env.buffer(16);
        let u = user_event(&env);
        let mut out = [0u8; 16];
        let mut r = null_mut();
        // SAFETY: a non-blocking read into `out`, which outlives the wait below; then the
        // user event fails (a negative status is an error status).
        unsafe {
            ok(clEnqueueReadBuffer(
                env.queue,
                buf,
                CL_FALSE,
                0,
                16,
                out.as_mut_ptr() as *mut c_void,
                1,
                &u,
                &mut r,
            ));
            ok(clSetUserEventStatus(u, -1));
            codes.push(clWaitForEvents(1, &r));
            codes.push(status(r));
            // Setting a status twice is refused by the vendor.
            codes.push(clSetUserEventStatus(u, CL_COMPLETE));
            codes.push(clFinish(env.queue));
        }
        release(r);
        release(u);
        // SAFETY: our buffer.
        unsafe { clReleaseMemObject(buf) };
    }
    assert_eq!(codes[0], CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);
    assert!(codes[1] < 0, "the read's status is an error: {}", codes[1]);
    assert_eq!(codes[..4], codes[4..]);
}

static CALLS: Mutex<Vec<(usize, cl_int, usize)>> = Mutex::new(Vec::new());

unsafe extern "C" fn on_event(e: cl_event, status: cl_int, user: *mut c_void) {
    CALLS
        .lock()
        .unwrap()
        .push((e as usize, status, user as usize));
}

fn calls_for(user: usize) -> Vec<(usize, cl_int)> {
    CALLS
        .lock()
        .unwrap()
        .iter()
        .filter(|c| c.2 == user)
        .map(|c| (c.0, c.1))
        .collect()
}

#[test]
fn callbacks_fire_with_app_event_and_user_data() {
    let env = Env::sp();
    let u = user_event(&env);
    let m = marker(env.queue, &[u]);
    let (tag_m, tag_u) = (0x5150_0001usize, 0x5150_0002usize);
    // SAFETY: valid events, a callback that only records its arguments.
    unsafe {
        for kind in [CL_SUBMITTED, CL_RUNNING, CL_COMPLETE] {
            ok(clSetEventCallback(
                m,
                kind,
                Some(on_event),
                tag_m as *mut c_void,
            ));
        }
        ok(clSetEventCallback(
            u,
            CL_COMPLETE,
            Some(on_event),
            tag_u as *mut c_void,
        ));
        ok(clSetUserEventStatus(u, CL_COMPLETE));
    }
    wait(&[m]);
    assert!(
        wait_for(|| calls_for(tag_m).len() == 3 && calls_for(tag_u).len() == 1),
        "{:?}",
        CALLS.lock().unwrap()
    );
    let mut got = calls_for(tag_m);
    got.sort_by_key(|c| std::cmp::Reverse(c.1));
    assert_eq!(
        got,
        [
            (m as usize, CL_SUBMITTED),
            (m as usize, CL_RUNNING),
            (m as usize, CL_COMPLETE)
        ]
    );
    assert_eq!(calls_for(tag_u), [(u as usize, CL_COMPLETE)]);
    // The event may be released at once: the callback keeps what it needs.
    let m2 = marker(env.queue, &[]);
    let tag = 0x5150_0003usize;
    // SAFETY: as above.
    ok(unsafe { clSetEventCallback(m2, CL_COMPLETE, Some(on_event), tag as *mut c_void) });
    let m2_handle = m2 as usize;
    release(m2);
    // SAFETY: valid queue.
    ok(unsafe { clFinish(env.queue) });
    assert!(wait_for(|| calls_for(tag).len() == 1));
    assert_eq!(calls_for(tag), [(m2_handle, CL_COMPLETE)]);
    release(m);
    release(u);
}

#[test]
fn bad_callback_arguments_match_bare() {
    let mut codes = Vec::new();
    for p in [sp_platform(), bare_platform()] {
        let env = Env::new(p);
        let u = user_event(&env);
        // SAFETY: valid event; bad callback type or missing function.
        unsafe {
            codes.push(clSetEventCallback(u, 0x7777, Some(on_event), null_mut()));
            codes.push(clSetEventCallback(u, CL_COMPLETE, None, null_mut()));
            codes.push(clSetUserEventStatus(u, 5));
            ok(clSetUserEventStatus(u, CL_COMPLETE));
        }
        release(u);
    }
    assert_eq!(codes[..3], codes[3..]);
    assert_eq!(codes[0], CL_INVALID_VALUE);
    assert_eq!(codes[1], CL_INVALID_VALUE);
}

#[test]
fn profiling_info_matches_bare_shape() {
    for p in [sp_platform(), bare_platform()] {
        let env = Env::new(p);
        let buf = env.buffer(1024);
        let data = [1u8; 1024];
        let mut e = null_mut();
        // SAFETY: blocking write from a live array.
        ok(unsafe {
            clEnqueueWriteBuffer(
                env.queue,
                buf,
                CL_TRUE,
                0,
                1024,
                data.as_ptr() as *const c_void,
                0,
                null(),
                &mut e,
            )
        });
        wait(&[e]);
        let t = |what| {
            info_scalar::<cl_ulong>(|s, v, r| unsafe { clGetEventProfilingInfo(e, what, s, v, r) })
        };
        let (q, s, st, en) = (
            t(CL_PROFILING_COMMAND_QUEUED),
            t(CL_PROFILING_COMMAND_SUBMIT),
            t(CL_PROFILING_COMMAND_START),
            t(CL_PROFILING_COMMAND_END),
        );
        assert!(q <= s && s <= st && st <= en && q > 0, "{q} {s} {st} {en}");
        // User events have no profiling information.
        let u = user_event(&env);
        let mut v = 0u64;
        // SAFETY: one u64 out.
        let rc = unsafe {
            clGetEventProfilingInfo(
                u,
                CL_PROFILING_COMMAND_START,
                8,
                &mut v as *mut u64 as *mut c_void,
                null_mut(),
            )
        };
        assert_eq!(rc, CL_PROFILING_INFO_NOT_AVAILABLE);
        // SAFETY: valid user event.
        ok(unsafe { clSetUserEventStatus(u, CL_COMPLETE) });
        release(u);
        release(e);
        // SAFETY: our buffer.
        unsafe { clReleaseMemObject(buf) };
    }
}

#[test]
fn cross_queue_wait_lists() {
    let env = Env::sp();
    let mut err = 0;
    // SAFETY: valid context and device.
    let q2 =
        unsafe { clCreateCommandQueueWithProperties(env.context, env.device, null(), &mut err) };
    ok(err);
    let buf = env.buffer(64);
    let u = user_event(&env);
    let data: Vec<u32> = (100..116).collect();
    let (mut w, mut r) = (null_mut(), null_mut());
    let mut out = vec![0u32; 16];
    // SAFETY: the write (queue 1) waits for the user event; the read (queue 2) waits for the
    // write; both buffers outlive the waits below.
    unsafe {
        ok(clEnqueueWriteBuffer(
            env.queue,
            buf,
            CL_FALSE,
            0,
            64,
            data.as_ptr() as *const c_void,
            1,
            &u,
            &mut w,
        ));
        ok(clEnqueueReadBuffer(
            q2,
            buf,
            CL_FALSE,
            0,
            64,
            out.as_mut_ptr() as *mut c_void,
            1,
            &w,
            &mut r,
        ));
        ok(clFlush(env.queue));
        ok(clFlush(q2));
    }
    assert!(
        status(r) > CL_COMPLETE,
        "read ran before the write it waits for"
    );
    assert_eq!(
        event_scalar::<cl_command_queue>(r, CL_EVENT_COMMAND_QUEUE),
        q2
    );
    // SAFETY: valid user event.
    ok(unsafe { clSetUserEventStatus(u, CL_COMPLETE) });
    wait(&[w, r]);
    assert_eq!(out, data);
    for e in [w, r, u] {
        release(e);
    }
    // SAFETY: our objects.
    unsafe {
        clReleaseMemObject(buf);
        clReleaseCommandQueue(q2);
    }
}

#[test]
fn wait_for_events_bad_lists_match_bare() {
    let sp = Env::sp();
    let bare = Env::new(bare_platform());
    let other = Env::sp();
    let (a, b) = (user_event(&sp), user_event(&other));
    // "CL_INVALID_VALUE if num_events is zero or event_list is NULL."
    // SAFETY: deliberately bad lists, through our table (the loader would crash on NULL).
    unsafe {
        let t = table(sp.context);
        assert_eq!(t.clWaitForEvents.unwrap()(0, &a), CL_INVALID_VALUE);
        assert_eq!(t.clWaitForEvents.unwrap()(1, null()), CL_INVALID_VALUE);
        // Events from two contexts: the vendor's CL_INVALID_CONTEXT.
        let mixed = [a, b];
        assert_eq!(clWaitForEvents(2, mixed.as_ptr()), CL_INVALID_CONTEXT);
        // Bare PoCL checks this too; NVIDIA's driver waits forever instead.
        if vendor_name() != "Portable Computing Language" {
            for e in [a, b] {
                ok(clSetUserEventStatus(e, CL_COMPLETE));
                release(e);
            }
            return;
        }
        let bu = user_event(&bare);
        let bo = {
            let mut err = 0;
            let e = clCreateUserEvent(Env::new(bare_platform()).context, &mut err);
            ok(err);
            e
        };
        assert_eq!(clWaitForEvents(2, [bu, bo].as_ptr()), CL_INVALID_CONTEXT);
        for e in [a, b, bu, bo] {
            ok(clSetUserEventStatus(e, CL_COMPLETE));
            release(e);
        }
    }
}

/// NULL, a stack address, a bare-PoCL event, a released event and a queue passed as an
/// event all get CL_INVALID_EVENT (or CL_INVALID_EVENT_WAIT_LIST inside a wait list).
#[test]
fn invalid_event_handles() {
    let env = Env::sp();
    let bare = Env::new(bare_platform());
    let bare_event = user_event(&bare);
    let t = table(env.context);
    let mut stack = [0usize; 8];
    let check = |e: cl_event, what: &str| {
        let mut out = [0u8; 64];
        let o = out.as_mut_ptr() as *mut c_void;
        let mut ev = null_mut();
        // SAFETY: every call is through our table; the layer must reject `e` unread.
        unsafe {
            assert_eq!(
                t.clGetEventInfo.unwrap()(e, CL_EVENT_CONTEXT, 64, o, null_mut()),
                CL_INVALID_EVENT,
                "{what}"
            );
            assert_eq!(
                t.clGetEventProfilingInfo.unwrap()(e, CL_PROFILING_COMMAND_END, 64, o, null_mut()),
                CL_INVALID_EVENT,
                "{what}"
            );
            assert_eq!(t.clRetainEvent.unwrap()(e), CL_INVALID_EVENT, "{what}");
            assert_eq!(t.clReleaseEvent.unwrap()(e), CL_INVALID_EVENT, "{what}");
            assert_eq!(
                t.clSetUserEventStatus.unwrap()(e, CL_COMPLETE),
                CL_INVALID_EVENT,
                "{what}"
            );
            assert_eq!(
                t.clSetEventCallback.unwrap()(e, CL_COMPLETE, Some(on_event), null_mut()),
                CL_INVALID_EVENT,
                "{what}"
            );
            assert_eq!(
                t.clWaitForEvents.unwrap()(1, &e),
                CL_INVALID_EVENT,
                "{what}"
            );
            assert_eq!(
                t.clEnqueueWaitForEvents.unwrap()(env.queue, 1, &e),
                CL_INVALID_EVENT,
                "{what}"
            );
            assert_eq!(
                clEnqueueMarkerWithWaitList(env.queue, 1, &e, &mut ev),
                CL_INVALID_EVENT_WAIT_LIST,
                "{what}"
            );
            assert_eq!(
                clEnqueueBarrierWithWaitList(env.queue, 1, &e, null_mut()),
                CL_INVALID_EVENT_WAIT_LIST,
                "{what}"
            );
        }
    };
    check(null_mut(), "NULL");
    check(stack.as_mut_ptr() as cl_event, "stack address");
    check(bare_event, "bare PoCL event");
    check(env.queue as cl_event, "queue as event");
    let gone = user_event(&env);
    // SAFETY: complete it, then drop the last reference.
    ok(unsafe { clSetUserEventStatus(gone, CL_COMPLETE) });
    release(gone);
    check(gone, "released event");
    // Through the loader too: the released wrapper still routes to us.
    // SAFETY: a released handle on purpose.
    assert_eq!(unsafe { clRetainEvent(gone) }, CL_INVALID_EVENT);
    // A bad context for user events.
    let mut err = 0;
    // SAFETY: through our table with a bare context.
    assert!(unsafe { t.clCreateUserEvent.unwrap()(bare.context, &mut err) }.is_null());
    assert_eq!(err, CL_INVALID_CONTEXT);
    // SAFETY: the bare event is complete and released here.
    unsafe {
        ok(clSetUserEventStatus(bare_event, CL_COMPLETE));
        clReleaseEvent(bare_event);
    }
}
