//! Every `clEnqueue*` entry point.
//!
//! They all share one shape: check the queue, check and unwrap the memory objects or
//! kernel against the queue's context, then hand the vendor call to [`submit_with`], the
//! single place where a command reaches the vendor (it unwraps the wait list and wraps the
//! returned event). A managed queue (software FIFO, sliced launches) slots in there.

use crate::core::cl::*;
use std::ffi::c_void;

use crate::core::args::{bytes_of, slice};
use crate::core::callback::{svm_free_notify, Callback, SvmFreeNotify};
use crate::core::error::{check, CLResult};
use crate::core::events::{InnerEvents, OutEvent, Waiter};
use crate::core::forward::Inner;
use crate::core::handle::Obj;
use crate::core::managed::Managed;
use crate::core::objects::{Kernel, Mem, Queue};

use super::defer;
use crate::{vcall, vtry};

type NativeFn = Option<unsafe extern "C" fn(*mut c_void)>;

/// "CL_INVALID_COMMAND_QUEUE if command_queue is not a valid host command-queue."
#[inline]
fn queue<'a>(h: cl_command_queue) -> CLResult<&'a Obj<Queue>> {
    Obj::<Queue>::check(h)
}

/// "CL_INVALID_VALUE if values specified in map_flags are not valid." (clEnqueueMapBuffer,
/// clEnqueueMapImage, clEnqueueSVMMap). Valid are CL_MAP_READ, CL_MAP_WRITE and
/// CL_MAP_WRITE_INVALIDATE_REGION, the last one alone: "CL_MAP_WRITE_INVALIDATE_REGION ...
/// is mutually exclusive with CL_MAP_READ or CL_MAP_WRITE." Checked here because PoCL
/// takes unknown bits as a valid map (and then blocks in a blocking one).
fn check_map_flags(flags: cl_map_flags) -> CLResult<()> {
    let rw = (CL_MAP_READ | CL_MAP_WRITE) as cl_map_flags;
    let invalidate = CL_MAP_WRITE_INVALIDATE_REGION as cl_map_flags;
    if flags & !(rw | invalidate) != 0 || (flags & invalidate != 0 && flags & rw != 0) {
        return Err(CL_INVALID_VALUE);
    }
    Ok(())
}

/// A memory object of the queue's context, unwrapped.
#[inline]
fn mem(q: &Obj<Queue>, h: cl_mem) -> CLResult<cl_mem> {
    // "CL_INVALID_MEM_OBJECT if buffer is not a valid buffer object." (image, memobj, ...)
    let m = Obj::<Mem>::check(h)?.get();
    // "CL_INVALID_CONTEXT if the context associated with command_queue and buffer are not
    // the same."
    if m.context != q.get().context {
        return Err(CL_INVALID_CONTEXT);
    }
    Ok(m.inner.h)
}

/// A list of memory objects (`clEnqueueMigrateMemObjects`, native kernels), unwrapped.
fn mems(q: &Obj<Queue>, n: cl_uint, list: *const cl_mem) -> CLResult<Vec<cl_mem>> {
    slice(list, n as usize)?
        .iter()
        .map(|&m| mem(q, m))
        .collect()
}

/// A kernel of the queue's context.
#[inline]
fn kernel<'a>(q: &Obj<Queue>, h: cl_kernel) -> CLResult<&'a Kernel> {
    // "CL_INVALID_KERNEL if kernel is not a valid kernel object."
    let k = Obj::<Kernel>::check(h)?.get();
    // "CL_INVALID_CONTEXT if context associated with command_queue and kernel are not the
    // same."
    if k.program.get().context != q.get().context {
        return Err(CL_INVALID_CONTEXT);
    }
    // "CL_INVALID_KERNEL_ARGS if the kernel argument values have not been specified."
    // Said here, not left to the vendor: a kernel object's vendor kernel may be a spare
    // of an earlier object (`core::kernel_pool`), whose arguments the vendor still holds.
    if !k.args_set.all() {
        return Err(CL_INVALID_KERNEL_ARGS);
    }
    Ok(k)
}

/// Sends one command to the vendor: `call` gets the inner queue, the inner wait list (count
/// and pointer) and the out-event slot; on success the event becomes the application's
/// wrapper.
///
/// Every direct enqueue goes through here; on a managed queue it first drains the queue's
/// software FIFO (see [`defer::direct`]). Launches and markers may be deferred instead.
#[inline]
fn submit_with<T>(
    q: &Obj<Queue>,
    wait: InnerEvents,
    event: *mut cl_event,
    call: impl FnOnce(&Inner<cl_command_queue>, cl_uint, *const cl_event, *mut cl_event) -> CLResult<T>,
) -> CLResult<T> {
    submit_claimed(q, wait, event, 0, call)
}

/// [`submit_with`] for a short launch that claimed `claim` ns of its queue's direct budget
/// (see `defer::Launch::Direct`).
#[inline]
fn submit_claimed<T>(
    q: &Obj<Queue>,
    wait: InnerEvents,
    event: *mut cl_event,
    claim: u64,
    call: impl FnOnce(&Inner<cl_command_queue>, cl_uint, *const cl_event, *mut cl_event) -> CLResult<T>,
) -> CLResult<T> {
    if let Some(m) = &q.get().managed {
        return defer::direct(m, q, wait, event, claim, call);
    }
    let mut out = OutEvent::new(event);
    let r = call(&q.get().inner, wait.len(), wait.ptr(), out.ptr())?;
    out.publish(q);
    Ok(r)
}

/// [`submit_with`] for the usual `(num_events_in_wait_list, event_wait_list, event)`
/// trailing arguments.
#[inline]
fn submit<T>(
    q: &Obj<Queue>,
    n: cl_uint,
    list: *const cl_event,
    event: *mut cl_event,
    call: impl FnOnce(&Inner<cl_command_queue>, cl_uint, *const cl_event, *mut cl_event) -> CLResult<T>,
) -> CLResult<T> {
    submit_with(q, InnerEvents::wait_list(n, list)?, event, call)
}

/// `submit_blocking!(q, wait, flag, (n, list, event), clEnqueueFoo(a, flag, b))`:
/// [`submit!`] for a command that may block, waiting as `wait` says, with `flag` the
/// blocking flag it chose (see [`Wait::call`]).
macro_rules! submit_blocking {
    ($q:expr, $wait:expr, $flag:ident, ($n:expr, $list:expr, $ev:expr), $f:ident($($a:expr),* $(,)?)) => {
        submit($q, $n, $list, $ev, |i, n, wl, ev| {
            $wait.call(i, ev, |$flag, ev| vtry!(i.vt, $f(i.h, $($a,)* n, wl, ev)))
        })
    };
}

/// `submit!(q, (n, list, event), clEnqueueFoo(a, b))` calls the vendor's
/// `clEnqueueFoo(inner_queue, a, b, n', list', event')` through [`submit`].
macro_rules! submit {
    ($q:expr, ($n:expr, $list:expr, $ev:expr), $f:ident($($a:expr),* $(,)?)) => {
        submit($q, $n, $list, $ev, |i, n, wl, ev| vtry!(i.vt, $f(i.h, $($a,)* n, wl, ev)))
    };
    ($q:expr, $trailing:ident, $f:ident($($a:expr),* $(,)?)) => {{
        let (n, list, ev) = $trailing;
        submit!($q, (n, list, ev), $f($($a),*))
    }};
}

/// The inner list pointer for a possibly empty vector (NULL when empty).
fn ptr_or_null<T>(v: &[T]) -> *const T {
    if v.is_empty() {
        std::ptr::null()
    } else {
        v.as_ptr()
    }
}

/// Runs `f`, a command that blocks when `flag` is set, with how it is to wait ([`Wait`]).
/// On an in-order queue a blocking command returns only once every earlier command of the
/// queue has completed, so the watched direct commands before it are seen complete then
/// (see `Managed::complete_upto`).
fn blocking<T>(
    q: &Obj<Queue>,
    flag: cl_bool,
    n_waits: cl_uint,
    f: impl FnOnce(Wait<'_>) -> CLResult<T>,
) -> CLResult<T> {
    let Some(m) = q.get().managed.as_ref().filter(|_| flag != CL_FALSE) else {
        return f(Wait { flag, m: None });
    };
    let mark = m.vendor_mark();
    let _syncing = m.syncing();
    // A wait list's failed event is the vendor's to answer for as it does (PoCL 3.1 gives
    // CL_SUCCESS, and at times crashes, where the spec says
    // CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST): such a command blocks as made.
    let r = defer::blocking(|| {
        f(Wait {
            flag,
            m: (n_waits == 0).then_some(&**m),
        })
    })?;
    m.complete_upto(mark);
    Ok(r)
}

/// How a blocking command of a managed queue waits. Blocking, as the application made it,
/// unless a yielding run of this process is on a device and only a vendor call can ask it
/// to stop (`yielding::runs_written_by_vendor`): then the command is made non-blocking and
/// its event waited for, which holds none of the context's other threads (NVIDIA holds them
/// all behind a blocking transfer, the watcher's yield-word write included). Decided when
/// the command reaches the vendor, after its own queue's FIFO drained: a client with one
/// queue then has no run on the device, and its transfers stay as they were.
struct Wait<'a> {
    /// The application's blocking flag.
    flag: cl_bool,
    /// The queue, where the command may wait apart (a managed queue's blocking command
    /// with no wait list).
    m: Option<&'a Managed>,
}

impl Wait<'_> {
    /// Runs `f`, the vendor call, with the blocking flag and the event slot to give the
    /// vendor: the application's own, or, waiting apart, `CL_FALSE` and the slot `ev` (one
    /// of ours when `ev` is NULL), then waits for that event. The application sees what
    /// the blocking call gives: the command complete on return. A command that failed (it,
    /// or an earlier one of the in-order queue) gives the wait's error, the spec's answer
    /// for a blocking transfer, and no event.
    fn call<T>(
        self,
        i: &Inner<cl_command_queue>,
        ev: *mut cl_event,
        f: impl FnOnce(cl_bool, *mut cl_event) -> CLResult<T>,
    ) -> CLResult<T> {
        let Some(m) = self
            .m
            .filter(|_| crate::core::managed::yielding::runs_written_by_vendor() > 0)
        else {
            return f(self.flag, ev);
        };
        let from = crate::trace::enabled().then(crate::trace::now_ns);
        let mut own: cl_event = std::ptr::null_mut();
        let slot = if ev.is_null() {
            &mut own as *mut cl_event
        } else {
            ev
        };
        let r = f(CL_FALSE, slot)?;
        // SAFETY: `slot` is `own` or the caller's out-slot, which the vendor filled.
        let e = unsafe { slot.read() };
        let rc = if e.is_null() {
            // No event came back: the queue's end is this command's end.
            vcall!(i.vt, clFinish(i.h))
        } else {
            // "Any blocking commands queued in a command-queue ... perform an implicit
            // flush of the command-queue. These blocking commands are ... clWaitForEvents"
            // (OpenCL 3.0, 5.15): no clFlush first.
            vcall!(i.vt, clWaitForEvents(1, &e))
        };
        if rc != CL_SUCCESS && !e.is_null() {
            // "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST if the read and write
            // operations are blocking and the execution status of any of the events in
            // event_wait_list is a negative integer value" (clEnqueueReadBuffer): what
            // clWaitForEvents says of a failed command too. An error: no event reaches
            // the application.
            // SAFETY: the event the vendor just made, released once; the slot is cleared.
            unsafe { slot.write(std::ptr::null_mut()) };
            vcall!(i.vt, clReleaseEvent(e));
        } else if !own.is_null() {
            vcall!(i.vt, clReleaseEvent(own));
        }
        if let Some(from) = from {
            crate::trace::wait_apart(&m.label, from, crate::trace::now_ns());
        }
        check(rc).map(|()| r)
    }
}

pub fn enqueue_read_buffer(
    command_queue: cl_command_queue,
    buffer: cl_mem,
    blocking_read: cl_bool,
    offset: usize,
    size: usize,
    ptr: *mut c_void,
    num_events_in_wait_list: cl_uint,
    event_wait_list: *const cl_event,
    event: *mut cl_event,
) -> CLResult<()> {
    let q = queue(command_queue)?;
    let b = mem(q, buffer)?;
    blocking(q, blocking_read, num_events_in_wait_list, |wait| {
        submit_blocking!(
            q,
            wait,
            blocking_read,
            (num_events_in_wait_list, event_wait_list, event),
            clEnqueueReadBuffer(b, blocking_read, offset, size, ptr)
        )
    })
}

pub fn enqueue_write_buffer(
    command_queue: cl_command_queue,
    buffer: cl_mem,
    blocking_write: cl_bool,
    offset: usize,
    size: usize,
    ptr: *const c_void,
    num_events_in_wait_list: cl_uint,
    event_wait_list: *const cl_event,
    event: *mut cl_event,
) -> CLResult<()> {
    let q = queue(command_queue)?;
    let b = mem(q, buffer)?;
    blocking(q, blocking_write, num_events_in_wait_list, |wait| {
        submit_blocking!(
            q,
            wait,
            blocking_write,
            (num_events_in_wait_list, event_wait_list, event),
            clEnqueueWriteBuffer(b, blocking_write, offset, size, ptr)
        )
    })
}

pub fn enqueue_copy_buffer(
    command_queue: cl_command_queue,
    src_buffer: cl_mem,
    dst_buffer: cl_mem,
    src_offset: usize,
    dst_offset: usize,
    size: usize,
    num_events_in_wait_list: cl_uint,
    event_wait_list: *const cl_event,
    event: *mut cl_event,
) -> CLResult<()> {
    let q = queue(command_queue)?;
    let (s, d) = (mem(q, src_buffer)?, mem(q, dst_buffer)?);
    submit!(
        q,
        (num_events_in_wait_list, event_wait_list, event),
        clEnqueueCopyBuffer(s, d, src_offset, dst_offset, size)
    )
}

pub fn enqueue_read_image(
    command_queue: cl_command_queue,
    image: cl_mem,
    blocking_read: cl_bool,
    origin: *const usize,
    region: *const usize,
    row_pitch: usize,
    slice_pitch: usize,
    ptr: *mut c_void,
    num_events_in_wait_list: cl_uint,
    event_wait_list: *const cl_event,
    event: *mut cl_event,
) -> CLResult<()> {
    let q = queue(command_queue)?;
    let m = mem(q, image)?;
    blocking(q, blocking_read, num_events_in_wait_list, |wait| {
        submit_blocking!(
            q,
            wait,
            blocking_read,
            (num_events_in_wait_list, event_wait_list, event),
            clEnqueueReadImage(
                m,
                blocking_read,
                origin,
                region,
                row_pitch,
                slice_pitch,
                ptr
            )
        )
    })
}

pub fn enqueue_write_image(
    command_queue: cl_command_queue,
    image: cl_mem,
    blocking_write: cl_bool,
    origin: *const usize,
    region: *const usize,
    input_row_pitch: usize,
    input_slice_pitch: usize,
    ptr: *const c_void,
    num_events_in_wait_list: cl_uint,
    event_wait_list: *const cl_event,
    event: *mut cl_event,
) -> CLResult<()> {
    let q = queue(command_queue)?;
    let m = mem(q, image)?;
    blocking(q, blocking_write, num_events_in_wait_list, |wait| {
        submit_blocking!(
            q,
            wait,
            blocking_write,
            (num_events_in_wait_list, event_wait_list, event),
            clEnqueueWriteImage(
                m,
                blocking_write,
                origin,
                region,
                input_row_pitch,
                input_slice_pitch,
                ptr
            )
        )
    })
}

pub fn enqueue_copy_image(
    command_queue: cl_command_queue,
    src_image: cl_mem,
    dst_image: cl_mem,
    src_origin: *const usize,
    dst_origin: *const usize,
    region: *const usize,
    num_events_in_wait_list: cl_uint,
    event_wait_list: *const cl_event,
    event: *mut cl_event,
) -> CLResult<()> {
    let q = queue(command_queue)?;
    let (s, d) = (mem(q, src_image)?, mem(q, dst_image)?);
    submit!(
        q,
        (num_events_in_wait_list, event_wait_list, event),
        clEnqueueCopyImage(s, d, src_origin, dst_origin, region)
    )
}

pub fn enqueue_copy_image_to_buffer(
    command_queue: cl_command_queue,
    src_image: cl_mem,
    dst_buffer: cl_mem,
    src_origin: *const usize,
    region: *const usize,
    dst_offset: usize,
    num_events_in_wait_list: cl_uint,
    event_wait_list: *const cl_event,
    event: *mut cl_event,
) -> CLResult<()> {
    let q = queue(command_queue)?;
    let (s, d) = (mem(q, src_image)?, mem(q, dst_buffer)?);
    submit!(
        q,
        (num_events_in_wait_list, event_wait_list, event),
        clEnqueueCopyImageToBuffer(s, d, src_origin, region, dst_offset)
    )
}

pub fn enqueue_copy_buffer_to_image(
    command_queue: cl_command_queue,
    src_buffer: cl_mem,
    dst_image: cl_mem,
    src_offset: usize,
    dst_origin: *const usize,
    region: *const usize,
    num_events_in_wait_list: cl_uint,
    event_wait_list: *const cl_event,
    event: *mut cl_event,
) -> CLResult<()> {
    let q = queue(command_queue)?;
    let (s, d) = (mem(q, src_buffer)?, mem(q, dst_image)?);
    submit!(
        q,
        (num_events_in_wait_list, event_wait_list, event),
        clEnqueueCopyBufferToImage(s, d, src_offset, dst_origin, region)
    )
}

/// The vendor's `errcode_ret` out-parameter turned into a result, for calls that return a
/// value (the map functions).
fn with_errcode<T>(f: impl FnOnce(*mut cl_int) -> CLResult<T>) -> CLResult<T> {
    let mut err = CL_SUCCESS;
    let v = f(&mut err)?;
    check(err).map(|()| v)
}

pub fn enqueue_map_buffer(
    command_queue: cl_command_queue,
    buffer: cl_mem,
    blocking_map: cl_bool,
    map_flags: cl_map_flags,
    offset: usize,
    size: usize,
    num_events_in_wait_list: cl_uint,
    event_wait_list: *const cl_event,
    event: *mut cl_event,
) -> CLResult<*mut c_void> {
    let q = queue(command_queue)?;
    let b = mem(q, buffer)?;
    check_map_flags(map_flags)?;
    blocking(q, blocking_map, num_events_in_wait_list, |wait| {
        submit(
            q,
            num_events_in_wait_list,
            event_wait_list,
            event,
            |i, n, wl, ev| {
                wait.call(i, ev, |blocking_map, ev| {
                    with_errcode(|err| {
                        Ok(vcall!(
                            i.vt,
                            clEnqueueMapBuffer(
                                i.h,
                                b,
                                blocking_map,
                                map_flags,
                                offset,
                                size,
                                n,
                                wl,
                                ev,
                                err
                            )
                        ))
                    })
                })
            },
        )
    })
}

pub fn enqueue_map_image(
    command_queue: cl_command_queue,
    image: cl_mem,
    blocking_map: cl_bool,
    map_flags: cl_map_flags,
    origin: *const usize,
    region: *const usize,
    image_row_pitch: *mut usize,
    image_slice_pitch: *mut usize,
    num_events_in_wait_list: cl_uint,
    event_wait_list: *const cl_event,
    event: *mut cl_event,
) -> CLResult<*mut c_void> {
    let q = queue(command_queue)?;
    let m = mem(q, image)?;
    check_map_flags(map_flags)?;
    blocking(q, blocking_map, num_events_in_wait_list, |wait| {
        submit(
            q,
            num_events_in_wait_list,
            event_wait_list,
            event,
            |i, n, wl, ev| {
                wait.call(i, ev, |blocking_map, ev| {
                    with_errcode(|err| {
                        Ok(vcall!(
                            i.vt,
                            clEnqueueMapImage(
                                i.h,
                                m,
                                blocking_map,
                                map_flags,
                                origin,
                                region,
                                image_row_pitch,
                                image_slice_pitch,
                                n,
                                wl,
                                ev,
                                err
                            )
                        ))
                    })
                })
            },
        )
    })
}

pub fn enqueue_unmap_mem_object(
    command_queue: cl_command_queue,
    memobj: cl_mem,
    mapped_ptr: *mut c_void,
    num_events_in_wait_list: cl_uint,
    event_wait_list: *const cl_event,
    event: *mut cl_event,
) -> CLResult<()> {
    let q = queue(command_queue)?;
    let m = mem(q, memobj)?;
    submit!(
        q,
        (num_events_in_wait_list, event_wait_list, event),
        clEnqueueUnmapMemObject(m, mapped_ptr)
    )
}

pub fn enqueue_ndrange_kernel(
    command_queue: cl_command_queue,
    kernel_h: cl_kernel,
    work_dim: cl_uint,
    global_work_offset: *const usize,
    global_work_size: *const usize,
    local_work_size: *const usize,
    num_events_in_wait_list: cl_uint,
    event_wait_list: *const cl_event,
    event: *mut cl_event,
) -> CLResult<()> {
    let q = queue(command_queue)?;
    let k = kernel(q, kernel_h)?;
    let trailing = (num_events_in_wait_list, event_wait_list, event);
    let mut claim = 0;
    if let Some(m) = defer::deferring_launch(q, k, work_dim, global_work_size, local_work_size) {
        let range = defer::Range {
            work_dim,
            offset: global_work_offset,
            global: global_work_size,
            local: local_work_size,
        };
        match defer::launch(m, q, k, CL_COMMAND_NDRANGE_KERNEL, range, trailing)? {
            defer::Launch::Deferred => return Ok(()),
            defer::Launch::Direct(c) => claim = c,
        }
    }
    if let Some(m) = &q.get().managed {
        defer::count_direct(m, k, claim > 0);
    }
    let wait = InnerEvents::wait_list(num_events_in_wait_list, event_wait_list)?;
    submit_claimed(q, wait, event, claim, |i, n, wl, ev| {
        vtry!(
            i.vt,
            clEnqueueNDRangeKernel(
                i.h,
                k.inner.h,
                work_dim,
                global_work_offset,
                global_work_size,
                local_work_size,
                n,
                wl,
                ev
            )
        )
    })
}

pub fn enqueue_task(
    command_queue: cl_command_queue,
    kernel_h: cl_kernel,
    num_events_in_wait_list: cl_uint,
    event_wait_list: *const cl_event,
    event: *mut cl_event,
) -> CLResult<()> {
    let q = queue(command_queue)?;
    let k = kernel(q, kernel_h)?;
    let trailing = (num_events_in_wait_list, event_wait_list, event);
    if let Some(m) = defer::deferring(q) {
        // "clEnqueueTask is equivalent to calling clEnqueueNDRangeKernel with work_dim set
        // to 1, global_work_offset set to NULL, global_work_size[0] set to 1, and
        // local_work_size[0] set to 1."
        let one = 1usize;
        let range = defer::Range {
            work_dim: 1,
            offset: std::ptr::null(),
            global: &one,
            local: &one,
        };
        if let defer::Launch::Direct(claim) =
            defer::launch(m, q, k, CL_COMMAND_TASK, range, trailing)?
        {
            defer::count_direct(m, k, claim > 0);
            let wait = InnerEvents::wait_list(num_events_in_wait_list, event_wait_list)?;
            return submit_claimed(q, wait, event, claim, |i, n, wl, ev| {
                vtry!(i.vt, clEnqueueTask(i.h, k.inner.h, n, wl, ev))
            });
        }
        return Ok(());
    }
    submit!(q, trailing, clEnqueueTask(k.inner.h))
}

/// The application's native-kernel argument block with the inner handle of `mems[i]`
/// written at each `locs[i]` (addresses inside the application's block), and the same
/// locations inside the copy.
fn native_args(
    args: *mut c_void,
    cb_args: usize,
    locs: &[*const c_void],
    mems: &[cl_mem],
) -> CLResult<(Vec<u8>, Vec<*const c_void>)> {
    let mut copy = slice(args as *const u8, cb_args)?.to_vec();
    let width = std::mem::size_of::<cl_mem>();
    let mut offsets = Vec::with_capacity(locs.len());
    for (&loc, m) in locs.iter().zip(mems) {
        // A location outside the block would make the vendor write outside its copy.
        let off = (loc as usize)
            .checked_sub(args as usize)
            .filter(|o| o.checked_add(width).is_some_and(|end| end <= cb_args))
            .ok_or(CL_INVALID_VALUE)?;
        copy[off..off + width].copy_from_slice(bytes_of(m));
        offsets.push(off);
    }
    let base = copy.as_ptr();
    let inner_locs = offsets
        .iter()
        .map(|&o| base.wrapping_add(o) as *const c_void)
        .collect();
    Ok((copy, inner_locs))
}

pub fn enqueue_native_kernel(
    command_queue: cl_command_queue,
    user_func: NativeFn,
    args: *mut c_void,
    cb_args: usize,
    num_mem_objects: cl_uint,
    mem_list: *const cl_mem,
    args_mem_loc: *mut *const c_void,
    num_events_in_wait_list: cl_uint,
    event_wait_list: *const cl_event,
    event: *mut cl_event,
) -> CLResult<()> {
    let q = queue(command_queue)?;
    let n = num_mem_objects as usize;
    // "CL_INVALID_VALUE if user_func is NULL."
    // "CL_INVALID_VALUE if args is a NULL value and cb_args > 0, or if args is a NULL value
    // and num_mem_objects > 0."
    // "CL_INVALID_VALUE if args is not NULL and cb_args is 0."
    // "CL_INVALID_VALUE if num_mem_objects > 0 and mem_list or args_mem_loc are NULL."
    // "CL_INVALID_VALUE if num_mem_objects = 0 and mem_list or args_mem_loc are not NULL."
    if user_func.is_none()
        || (args.is_null() && (cb_args > 0 || n > 0))
        || (!args.is_null() && cb_args == 0)
        || (n > 0 && (mem_list.is_null() || args_mem_loc.is_null()))
        || (n == 0 && (!mem_list.is_null() || !args_mem_loc.is_null()))
    {
        return Err(CL_INVALID_VALUE);
    }
    let inner_mems = mems(q, num_mem_objects, mem_list)?;
    let locs = slice(args_mem_loc as *const *const c_void, n)?;
    let (mut copy, inner_locs) = native_args(args, cb_args, locs, &inner_mems)?;
    let args_ptr = if args.is_null() {
        args
    } else {
        copy.as_mut_ptr() as *mut c_void
    };
    // The vendor copies the block during the call ("The data pointed to by args and cb_args
    // bytes in size will be copied"), so ours may go when it returns.
    submit!(
        q,
        (num_events_in_wait_list, event_wait_list, event),
        clEnqueueNativeKernel(
            user_func,
            args_ptr,
            cb_args,
            num_mem_objects,
            ptr_or_null(&inner_mems),
            ptr_or_null(&inner_locs) as *mut *const c_void
        )
    )
}

pub fn enqueue_marker(command_queue: cl_command_queue, event: *mut cl_event) -> CLResult<()> {
    let q = queue(command_queue)?;
    // "CL_INVALID_VALUE if event is a NULL value." Checked here: while a lower priority is
    // registered, a direct command asks the vendor for an event of its own (to watch its
    // completion), so the vendor would never see the application's NULL.
    if event.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    submit_with(q, InnerEvents::empty(), event, |i, _, _, ev| {
        vtry!(i.vt, clEnqueueMarker(i.h, ev))
    })
}

pub fn enqueue_wait_for_events(
    command_queue: cl_command_queue,
    num_events: cl_uint,
    event_list: *const cl_event,
) -> CLResult<()> {
    let q = queue(command_queue)?;
    let list = InnerEvents::event_list(num_events, event_list, Waiter::Vendor)?;
    // This 1.0 command is exactly a barrier on its list ("a wait for a specific event or a
    // list of events to complete before any future commands queued in the command-queue
    // are executed"), and its 1.2 replacement is what vendors implement: PoCL aborts the
    // process on clEnqueueWaitForEvents itself. So the replacement is used when present.
    // The application gets no event, but a managed queue may ask for one (`ev`) to
    // remember a barrier that waits on incomplete work (see `Managed::ready`).
    submit_with(q, list, std::ptr::null_mut(), |i, n, wl, ev| {
        match i.vt.clEnqueueBarrierWithWaitList {
            Some(_) => vtry!(i.vt, clEnqueueBarrierWithWaitList(i.h, n, wl, ev)),
            None => {
                vtry!(i.vt, clEnqueueWaitForEvents(i.h, n, wl))?;
                if ev.is_null() {
                    return Ok(());
                }
                // A 1.1 vendor: a marker behind the wait stands for it.
                vtry!(i.vt, clEnqueueMarker(i.h, ev))
            }
        }
    })
}

pub fn enqueue_barrier(command_queue: cl_command_queue) -> CLResult<()> {
    let q = queue(command_queue)?;
    submit_with(
        q,
        InnerEvents::empty(),
        std::ptr::null_mut(),
        |i, _, _, _| vtry!(i.vt, clEnqueueBarrier(i.h)),
    )
}

pub fn enqueue_read_buffer_rect(
    command_queue: cl_command_queue,
    buffer: cl_mem,
    blocking_read: cl_bool,
    buffer_origin: *const usize,
    host_origin: *const usize,
    region: *const usize,
    buffer_row_pitch: usize,
    buffer_slice_pitch: usize,
    host_row_pitch: usize,
    host_slice_pitch: usize,
    ptr: *mut c_void,
    num_events_in_wait_list: cl_uint,
    event_wait_list: *const cl_event,
    event: *mut cl_event,
) -> CLResult<()> {
    let q = queue(command_queue)?;
    let b = mem(q, buffer)?;
    blocking(q, blocking_read, num_events_in_wait_list, |wait| {
        submit_blocking!(
            q,
            wait,
            blocking_read,
            (num_events_in_wait_list, event_wait_list, event),
            clEnqueueReadBufferRect(
                b,
                blocking_read,
                buffer_origin,
                host_origin,
                region,
                buffer_row_pitch,
                buffer_slice_pitch,
                host_row_pitch,
                host_slice_pitch,
                ptr
            )
        )
    })
}

pub fn enqueue_write_buffer_rect(
    command_queue: cl_command_queue,
    buffer: cl_mem,
    blocking_write: cl_bool,
    buffer_origin: *const usize,
    host_origin: *const usize,
    region: *const usize,
    buffer_row_pitch: usize,
    buffer_slice_pitch: usize,
    host_row_pitch: usize,
    host_slice_pitch: usize,
    ptr: *const c_void,
    num_events_in_wait_list: cl_uint,
    event_wait_list: *const cl_event,
    event: *mut cl_event,
) -> CLResult<()> {
    let q = queue(command_queue)?;
    let b = mem(q, buffer)?;
    blocking(q, blocking_write, num_events_in_wait_list, |wait| {
        submit_blocking!(
            q,
            wait,
            blocking_write,
            (num_events_in_wait_list, event_wait_list, event),
            clEnqueueWriteBufferRect(
                b,
                blocking_write,
                buffer_origin,
                host_origin,
                region,
                buffer_row_pitch,
                buffer_slice_pitch,
                host_row_pitch,
                host_slice_pitch,
                ptr
            )
        )
    })
}

pub fn enqueue_copy_buffer_rect(
    command_queue: cl_command_queue,
    src_buffer: cl_mem,
    dst_buffer: cl_mem,
    src_origin: *const usize,
    dst_origin: *const usize,
    region: *const usize,
    src_row_pitch: usize,
    src_slice_pitch: usize,
    dst_row_pitch: usize,
    dst_slice_pitch: usize,
    num_events_in_wait_list: cl_uint,
    event_wait_list: *const cl_event,
    event: *mut cl_event,
) -> CLResult<()> {
    let q = queue(command_queue)?;
    let (s, d) = (mem(q, src_buffer)?, mem(q, dst_buffer)?);
    submit!(
        q,
        (num_events_in_wait_list, event_wait_list, event),
        clEnqueueCopyBufferRect(
            s,
            d,
            src_origin,
            dst_origin,
            region,
            src_row_pitch,
            src_slice_pitch,
            dst_row_pitch,
            dst_slice_pitch
        )
    )
}

pub fn enqueue_fill_buffer(
    command_queue: cl_command_queue,
    buffer: cl_mem,
    pattern: *const c_void,
    pattern_size: usize,
    offset: usize,
    size: usize,
    num_events_in_wait_list: cl_uint,
    event_wait_list: *const cl_event,
    event: *mut cl_event,
) -> CLResult<()> {
    let q = queue(command_queue)?;
    let b = mem(q, buffer)?;
    submit!(
        q,
        (num_events_in_wait_list, event_wait_list, event),
        clEnqueueFillBuffer(b, pattern, pattern_size, offset, size)
    )
}

pub fn enqueue_fill_image(
    command_queue: cl_command_queue,
    image: cl_mem,
    fill_color: *const c_void,
    origin: *const usize,
    region: *const usize,
    num_events_in_wait_list: cl_uint,
    event_wait_list: *const cl_event,
    event: *mut cl_event,
) -> CLResult<()> {
    let q = queue(command_queue)?;
    let m = mem(q, image)?;
    submit!(
        q,
        (num_events_in_wait_list, event_wait_list, event),
        clEnqueueFillImage(m, fill_color, origin, region)
    )
}

pub fn enqueue_migrate_mem_objects(
    command_queue: cl_command_queue,
    num_mem_objects: cl_uint,
    mem_objects: *const cl_mem,
    flags: cl_mem_migration_flags,
    num_events_in_wait_list: cl_uint,
    event_wait_list: *const cl_event,
    event: *mut cl_event,
) -> CLResult<()> {
    let q = queue(command_queue)?;
    // "CL_INVALID_VALUE if num_mem_objects is zero or if mem_objects is NULL."
    if num_mem_objects == 0 || mem_objects.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    let list = mems(q, num_mem_objects, mem_objects)?;
    submit!(
        q,
        (num_events_in_wait_list, event_wait_list, event),
        clEnqueueMigrateMemObjects(num_mem_objects, list.as_ptr(), flags)
    )
}

/// Markers and barriers keep their place behind deferred commands without blocking the
/// application: they are deferred too when the FIFO is in use.
macro_rules! marker_like {
    ($name:ident, $f:ident, $kind:expr) => {
        pub fn $name(
            command_queue: cl_command_queue,
            num_events_in_wait_list: cl_uint,
            event_wait_list: *const cl_event,
            event: *mut cl_event,
        ) -> CLResult<()> {
            let q = queue(command_queue)?;
            let trailing = (num_events_in_wait_list, event_wait_list, event);
            if let Some(m) = defer::deferring(q) {
                return defer::call(
                    m,
                    q,
                    $kind,
                    trailing,
                    Box::new(|i, n, wl, ev| vtry!(i.vt, $f(i.h, n, wl, ev))),
                );
            }
            submit!(q, trailing, $f())
        }
    };
}

marker_like!(
    enqueue_marker_with_wait_list,
    clEnqueueMarkerWithWaitList,
    CL_COMMAND_MARKER
);
marker_like!(
    enqueue_barrier_with_wait_list,
    clEnqueueBarrierWithWaitList,
    CL_COMMAND_BARRIER
);

pub fn enqueue_svm_free(
    command_queue: cl_command_queue,
    num_svm_pointers: cl_uint,
    svm_pointers: *mut *mut c_void,
    pfn_free_func: Option<SvmFreeNotify>,
    user_data: *mut c_void,
    num_events_in_wait_list: cl_uint,
    event_wait_list: *const cl_event,
    event: *mut cl_event,
) -> CLResult<()> {
    let q = queue(command_queue)?;
    // SVM pointers are plain addresses: they pass through. The callback, when given, goes
    // through the trampoline so it receives the application's queue.
    let data =
        pfn_free_func.map(|f| Callback::<Queue, SvmFreeNotify>::into_raw(q.hold(), f, user_data));
    let (cb, ud): (Option<SvmFreeNotify>, _) = match data {
        Some(d) => (Some(svm_free_notify), d),
        None => (None, user_data),
    };
    let r = submit!(
        q,
        (num_events_in_wait_list, event_wait_list, event),
        clEnqueueSVMFree(num_svm_pointers, svm_pointers, cb, ud)
    );
    match (r, data) {
        (Err(_), Some(d)) => {
            // SAFETY: the vendor refused the command, so it will never call back with `d`.
            unsafe { Callback::<Queue, SvmFreeNotify>::discard(d) };
        }
        // The pointers are the vendor's to free now. (If the command already ran and
        // another thread's clSVMAlloc got the same address back in this instant, that
        // record would be dropped too: a narrow race, accepted for now.)
        (Ok(()), _) => slice(
            svm_pointers as *const *mut c_void,
            num_svm_pointers as usize,
        )?
        .iter()
        .for_each(|&p| crate::api::mem::svm_forget(p)),
        _ => {}
    }
    r
}

pub fn enqueue_svm_memcpy(
    command_queue: cl_command_queue,
    blocking_copy: cl_bool,
    dst_ptr: *mut c_void,
    src_ptr: *const c_void,
    size: usize,
    num_events_in_wait_list: cl_uint,
    event_wait_list: *const cl_event,
    event: *mut cl_event,
) -> CLResult<()> {
    let q = queue(command_queue)?;
    blocking(q, blocking_copy, num_events_in_wait_list, |wait| {
        submit_blocking!(
            q,
            wait,
            blocking_copy,
            (num_events_in_wait_list, event_wait_list, event),
            clEnqueueSVMMemcpy(blocking_copy, dst_ptr, src_ptr, size)
        )
    })
}

pub fn enqueue_svm_mem_fill(
    command_queue: cl_command_queue,
    svm_ptr: *mut c_void,
    pattern: *const c_void,
    pattern_size: usize,
    size: usize,
    num_events_in_wait_list: cl_uint,
    event_wait_list: *const cl_event,
    event: *mut cl_event,
) -> CLResult<()> {
    let q = queue(command_queue)?;
    submit!(
        q,
        (num_events_in_wait_list, event_wait_list, event),
        clEnqueueSVMMemFill(svm_ptr, pattern, pattern_size, size)
    )
}

pub fn enqueue_svm_map(
    command_queue: cl_command_queue,
    blocking_map: cl_bool,
    flags: cl_map_flags,
    svm_ptr: *mut c_void,
    size: usize,
    num_events_in_wait_list: cl_uint,
    event_wait_list: *const cl_event,
    event: *mut cl_event,
) -> CLResult<()> {
    let q = queue(command_queue)?;
    check_map_flags(flags)?;
    blocking(q, blocking_map, num_events_in_wait_list, |wait| {
        submit_blocking!(
            q,
            wait,
            blocking_map,
            (num_events_in_wait_list, event_wait_list, event),
            clEnqueueSVMMap(blocking_map, flags, svm_ptr, size)
        )
    })
}

pub fn enqueue_svm_unmap(
    command_queue: cl_command_queue,
    svm_ptr: *mut c_void,
    num_events_in_wait_list: cl_uint,
    event_wait_list: *const cl_event,
    event: *mut cl_event,
) -> CLResult<()> {
    let q = queue(command_queue)?;
    submit!(
        q,
        (num_events_in_wait_list, event_wait_list, event),
        clEnqueueSVMUnmap(svm_ptr)
    )
}

pub fn enqueue_svm_migrate_mem(
    command_queue: cl_command_queue,
    num_svm_pointers: cl_uint,
    svm_pointers: *mut *const c_void,
    sizes: *const usize,
    flags: cl_mem_migration_flags,
    num_events_in_wait_list: cl_uint,
    event_wait_list: *const cl_event,
    event: *mut cl_event,
) -> CLResult<()> {
    let q = queue(command_queue)?;
    submit!(
        q,
        (num_events_in_wait_list, event_wait_list, event),
        clEnqueueSVMMigrateMem(num_svm_pointers, svm_pointers, sizes, flags)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_args_writes_inner_handles_inside_the_copy() {
        let mut block = [0u64; 4];
        let base = block.as_mut_ptr() as *mut c_void;
        let locs = [
            block[1..].as_ptr() as *const c_void,
            block[3..].as_ptr() as *const c_void,
        ];
        let mems = [0x1111 as cl_mem, 0x2222 as cl_mem];
        let (copy, inner) = native_args(base, 32, &locs, &mems).unwrap();
        assert_eq!(&copy[8..16], &0x1111u64.to_ne_bytes());
        assert_eq!(&copy[24..32], &0x2222u64.to_ne_bytes());
        assert_eq!(inner[0] as usize - copy.as_ptr() as usize, 8);
        assert_eq!(inner[1] as usize - copy.as_ptr() as usize, 24);
        assert_eq!(block, [0; 4], "the application's block is left alone");
    }

    #[test]
    fn native_args_rejects_locations_outside_the_block() {
        let mut block = [0u64; 2];
        let base = block.as_mut_ptr() as *mut c_void;
        let outside = [block[1..].as_ptr().wrapping_add(1) as *const c_void];
        assert_eq!(
            native_args(base, 16, &outside, &[std::ptr::null_mut()]).err(),
            Some(CL_INVALID_VALUE)
        );
        let straddling = [(base as usize + 12) as *const c_void];
        assert_eq!(
            native_args(base, 16, &straddling, &[std::ptr::null_mut()]).err(),
            Some(CL_INVALID_VALUE)
        );
        let before = [(base as usize - 8) as *const c_void];
        assert_eq!(
            native_args(base, 16, &before, &[std::ptr::null_mut()]).err(),
            Some(CL_INVALID_VALUE)
        );
    }
}
