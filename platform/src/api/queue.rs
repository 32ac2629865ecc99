//! Command-queue entry points.

use crate::core::cl::*;
use std::ffi::c_void;
use std::sync::Mutex;

use crate::api::device::{self as device_api, read_handle};
use crate::core::args::{bytes_of, bytes_of_slice, property_list, write_info};
use crate::core::error::CLResult;
use crate::core::forward::Inner;
use crate::core::forward::{fetch_info, info_string};
use crate::core::handle::{new_obj, Obj};
use crate::core::managed::Managed;
use crate::core::objects::{Context, Queue};
use crate::core::platform::Device;
use crate::core::refcount;
use crate::{vcreate, vtry};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Device queues by inner handle. Creating the default device queue twice returns the same
/// vendor queue (with its count raised), which must map to the same wrapper. Host queues
/// are always new objects and never appear here.
static DEVICE_QUEUES: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

fn device_queues() -> std::sync::MutexGuard<'static, Vec<(usize, usize)>> {
    DEVICE_QUEUES.lock().unwrap_or_else(|e| e.into_inner())
}

/// Our wrapper of a vendor device queue, if we made one.
fn lookup_device_queue(inner: cl_command_queue) -> Option<&'static Obj<Queue>> {
    let reg = device_queues();
    let (_, w) = reg.iter().find(|(k, _)| *k == inner as usize)?;
    Obj::<Queue>::check(*w as cl_command_queue).ok()
}

impl Drop for Queue {
    fn drop(&mut self) {
        let key = self.inner.h as usize;
        device_queues().retain(|(k, _)| *k != key);
    }
}

/// The application's queue properties, checked, and the list the vendor gets.
struct Props {
    /// For `CL_QUEUE_PROPERTIES_ARRAY`: `None` when the application passed NULL.
    app: Option<Vec<cl_queue_properties>>,
    inner: Option<Vec<cl_queue_properties>>,
    priority: Option<cl_queue_priority_khr>,
    on_device: bool,
}

fn queue_props(properties: *const cl_queue_properties, device: &Device) -> CLResult<Props> {
    let Some(list) = property_list(properties)? else {
        return Ok(Props {
            app: None,
            inner: None,
            priority: None,
            on_device: false,
        });
    };
    let mut inner = Vec::with_capacity(list.len());
    let mut priority = None;
    let mut on_device = false;
    let mut vendor_has_hints = None;
    for pair in list.chunks_exact(2) {
        let (name, value) = (pair[0], pair[1]);
        if name == CL_QUEUE_PRIORITY_KHR {
            const LEVELS: [cl_queue_priority_khr; 3] = [
                CL_QUEUE_PRIORITY_HIGH_KHR,
                CL_QUEUE_PRIORITY_MED_KHR,
                CL_QUEUE_PRIORITY_LOW_KHR,
            ];
            match cl_queue_priority_khr::try_from(value) {
                Ok(p) if LEVELS.contains(&p) => priority = Some(p),
                // "CL_INVALID_VALUE if values specified in properties are not valid."
                _ => return Err(CL_INVALID_VALUE),
            }
            // The layer advertises cl_khr_priority_hints on every device; a vendor that
            // does not know the property would refuse the whole queue.
            if !*vendor_has_hints
                .get_or_insert_with(|| vendor_has_extension(device, "cl_khr_priority_hints"))
            {
                continue;
            }
        }
        if name == CL_QUEUE_PROPERTIES as cl_queue_properties && value & CL_QUEUE_ON_DEVICE != 0 {
            on_device = true;
        }
        inner.extend_from_slice(pair);
    }
    inner.push(0);
    // cl_khr_priority_hints: "CL_INVALID_QUEUE_PROPERTIES if the CL_QUEUE_PRIORITY_KHR
    // property is specified and the queue is a CL_QUEUE_ON_DEVICE."
    if priority.is_some() && on_device {
        return Err(CL_INVALID_QUEUE_PROPERTIES);
    }
    Ok(Props {
        app: Some(list.to_vec()),
        inner: Some(inner),
        priority,
        on_device,
    })
}

fn vendor_has_extension(device: &Device, name: &str) -> bool {
    device_api::inner_info(device, CL_DEVICE_EXTENSIONS)
        .map(|b| info_string(&b).split_ascii_whitespace().any(|e| e == name))
        .unwrap_or(false)
}

/// Whether the default on-device queue of `device` can be replaced. An OpenCL 3.0 device
/// says so in `CL_DEVICE_DEVICE_ENQUEUE_CAPABILITIES`; a 2.x device does not know that
/// query, and has on-device queues (replaceable from 2.1 on) exactly when it reports a
/// maximum on-device queue size. A 1.x device answers neither and has none.
fn replaceable_default_queue(device: &Device) -> bool {
    match device_api::inner_info(device, CL_DEVICE_DEVICE_ENQUEUE_CAPABILITIES) {
        Ok(caps) => {
            read_handle::<cl_device_device_enqueue_capabilities>(&caps)
                & CL_DEVICE_QUEUE_REPLACEABLE_DEFAULT
                != 0
        }
        Err(_) => device_api::inner_info(device, CL_DEVICE_QUEUE_ON_DEVICE_MAX_SIZE)
            .map(|max| read_handle::<cl_uint>(&max) > 0)
            .unwrap_or(false),
    }
}

/// Checks the context and device, creates the vendor queue with `make`, and wraps it.
fn create(
    context: cl_context,
    device: cl_device_id,
    props: impl FnOnce(&Device) -> CLResult<Props>,
    make: impl FnOnce(&Context, cl_device_id, &Props) -> CLResult<cl_command_queue>,
) -> CLResult<cl_command_queue> {
    // "CL_INVALID_CONTEXT if context is not a valid context."
    let ctx = Obj::<Context>::check(context)?;
    // "CL_INVALID_DEVICE if device is not a valid device or is not associated with
    // context." (the association is the vendor's to check, on the inner objects)
    let dev = Obj::<Device>::check(device)?;
    let props = props(dev.get())?;
    let h = make(ctx.get(), dev.get().inner.h, &props)?;
    if props.on_device {
        if let Some(existing) = lookup_device_queue(h) {
            // The vendor handed back a queue we already wrapped, with one more reference.
            existing.app_retain();
            return Ok(existing.handle());
        }
    }
    let inner = ctx.get().inner.child(h);
    let managed = (!props.on_device).then(|| managed_queue(&inner, dev.get(), props.priority));
    let q = new_obj(Queue {
        inner,
        context: ctx.hold(),
        device: dev.hold(),
        app_properties: props.app,
        priority: props.priority,
        managed,
    });
    if props.on_device {
        device_queues().push((h as usize, q as *const _ as usize));
    }
    Ok(q.handle())
}

/// Every host queue is managed (software FIFO, arbiter client); see `core::managed`.
fn managed_queue(
    inner: &Inner<cl_command_queue>,
    device: &Device,
    hint: Option<cl_queue_priority_khr>,
) -> Arc<Managed> {
    static SERIAL: AtomicUsize = AtomicUsize::new(0);
    let props: cl_command_queue_properties =
        fetch_info(|s, v, r| match inner.vt.clGetCommandQueueInfo {
            // SAFETY: the vendor's query on the queue it just created.
            Some(f) => unsafe { f(inner.h, CL_QUEUE_PROPERTIES, s, v, r) },
            None => CL_INVALID_OPERATION,
        })
        .map(|b| read_handle::<usize>(&b) as cl_command_queue_properties)
        .unwrap_or(0);
    let label = format!("queue{}", SERIAL.fetch_add(1, Ordering::Relaxed));
    Managed::new(
        inner.clone(),
        device,
        hint,
        props & CL_QUEUE_PROFILING_ENABLE != 0,
        props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE != 0,
        &label,
    )
}

pub fn create_command_queue(
    context: cl_context,
    device: cl_device_id,
    properties: cl_command_queue_properties,
) -> CLResult<cl_command_queue> {
    let on_device = properties & CL_QUEUE_ON_DEVICE != 0;
    create(
        context,
        device,
        |_| {
            Ok(Props {
                app: None,
                inner: None,
                priority: None,
                on_device,
            })
        },
        |c, d, _| vcreate!(c.inner.vt, clCreateCommandQueue(c.inner.h, d, properties)),
    )
}

pub fn create_command_queue_with_properties(
    context: cl_context,
    device: cl_device_id,
    properties: *const cl_queue_properties,
) -> CLResult<cl_command_queue> {
    create(
        context,
        device,
        |d| queue_props(properties, d),
        |c, d, p| {
            let list = p.inner.as_ref().map_or(std::ptr::null(), |v| v.as_ptr());
            vcreate!(
                c.inner.vt,
                clCreateCommandQueueWithProperties(c.inner.h, d, list)
            )
        },
    )
}

pub fn retain_command_queue(command_queue: cl_command_queue) -> CLResult<()> {
    refcount::retain::<Queue>(command_queue, |q| {
        vtry!(q.inner.vt, clRetainCommandQueue(q.inner.h))
    })
}

pub fn release_command_queue(command_queue: cl_command_queue) -> CLResult<()> {
    // "clReleaseCommandQueue performs an implicit flush": commands still in software reach
    // the vendor before its queue is released, and the submitter stops.
    let o = Obj::<Queue>::check(command_queue)?;
    if o.app_refs() == 1 {
        if let Some(m) = &o.get().managed {
            m.shutdown();
        }
    }
    refcount::release::<Queue>(command_queue, |q| {
        vtry!(q.inner.vt, clReleaseCommandQueue(q.inner.h))
    })
}

fn inner_info(q: &Queue, name: cl_command_queue_info) -> CLResult<Vec<u8>> {
    let i = &q.inner;
    fetch_info(|s, v, r| match i.vt.clGetCommandQueueInfo {
        // SAFETY: the vendor's query on its own queue, buffers sized by fetch_info.
        Some(f) => unsafe { f(i.h, name, s, v, r) },
        None => CL_INVALID_OPERATION,
    })
}

pub fn get_command_queue_info(
    command_queue: cl_command_queue,
    param_name: cl_command_queue_info,
    param_value_size: usize,
    param_value: *mut c_void,
    param_value_size_ret: *mut usize,
) -> CLResult<()> {
    // "CL_INVALID_COMMAND_QUEUE if command_queue is not a valid command-queue."
    let q = Obj::<Queue>::check(command_queue)?.get();
    let answer = match param_name {
        CL_QUEUE_CONTEXT => bytes_of(&q.context.handle()).to_vec(),
        CL_QUEUE_DEVICE => bytes_of(&q.device.handle()).to_vec(),
        CL_QUEUE_DEVICE_DEFAULT => {
            let inner: cl_command_queue = read_handle(&inner_info(q, param_name)?);
            let ours = lookup_device_queue(inner).map_or(std::ptr::null_mut(), |w| w.handle());
            bytes_of(&ours).to_vec()
        }
        // "If the properties argument specified in clCreateCommandQueueWithProperties used
        // to create command_queue was not NULL, the implementation must return the values
        // specified in the properties argument in the same order and without including
        // additional properties. If command_queue was created using clCreateCommandQueue,
        // or if the properties argument ... was NULL, the implementation must return
        // param_value_size_ret equal to 0."
        CL_QUEUE_PROPERTIES_ARRAY => q
            .app_properties
            .as_deref()
            .map(|p| bytes_of_slice(p).to_vec())
            .unwrap_or_default(),
        _ => inner_info(q, param_name)?,
    };
    write_info(param_value_size, param_value, param_value_size_ret, &answer)
}

pub fn set_command_queue_property(
    command_queue: cl_command_queue,
    properties: cl_command_queue_properties,
    enable: cl_bool,
    old_properties: *mut cl_command_queue_properties,
) -> CLResult<()> {
    // "CL_INVALID_COMMAND_QUEUE if command_queue is not a valid command-queue."
    let q = Obj::<Queue>::check(command_queue)?.get();
    vtry!(
        q.inner.vt,
        clSetCommandQueueProperty(q.inner.h, properties, enable, old_properties)
    )
}

pub fn flush(command_queue: cl_command_queue) -> CLResult<()> {
    // "CL_INVALID_COMMAND_QUEUE if command_queue is not a valid host command-queue."
    let q = Obj::<Queue>::check(command_queue)?.get();
    vtry!(q.inner.vt, clFlush(q.inner.h))
}

pub fn finish(command_queue: cl_command_queue) -> CLResult<()> {
    // "CL_INVALID_COMMAND_QUEUE if command_queue is not a valid host command-queue."
    let q = Obj::<Queue>::check(command_queue)?.get();
    // Commands still in software first reach the vendor, which then finishes them all.
    let _syncing = q.managed.as_ref().map(|m| {
        m.drain();
        m.syncing()
    });
    vtry!(q.inner.vt, clFinish(q.inner.h))?;
    if let Some(m) = &q.managed {
        m.settle_all();
        m.finished_all();
    }
    Ok(())
}

pub fn set_default_device_command_queue(
    context: cl_context,
    device: cl_device_id,
    command_queue: cl_command_queue,
) -> CLResult<()> {
    // "CL_INVALID_CONTEXT if context is not a valid context."
    let c = Obj::<Context>::check(context)?.get();
    // "CL_INVALID_DEVICE if device is not a valid device or is not associated with
    // context."
    let d = Obj::<Device>::check(device)?;
    if !c
        .devices
        .iter()
        .any(|cd| std::ptr::eq::<Obj<Device>>(&**cd, d))
    {
        return Err(CL_INVALID_DEVICE);
    }
    // The capability comes before the queue, as in PoCL: a device without device-side
    // enqueue has no queue that could be valid here, whatever the handle (the CTS passes
    // NULL and expects this error).
    // "CL_INVALID_OPERATION if device does not support a replaceable default on-device
    // queue."
    if !replaceable_default_queue(d.get()) {
        return Err(CL_INVALID_OPERATION);
    }
    let d = d.get();
    // "CL_INVALID_COMMAND_QUEUE if command_queue is not a valid command-queue for device."
    let q = Obj::<Queue>::check(command_queue)?.get();
    vtry!(
        c.inner.vt,
        clSetDefaultDeviceCommandQueue(c.inner.h, d.inner.h, q.inner.h)
    )
}
