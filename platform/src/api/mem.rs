//! Memory objects (buffers, sub-buffers, images, pipes) and SVM allocations.
//!
//! Every `cl_mem` the vendor returns is wrapped with counted references to its context and,
//! for sub-buffers and images built on another object, to that parent; handle-valued
//! queries (`CL_MEM_CONTEXT`, `CL_MEM_ASSOCIATED_MEMOBJECT`, `CL_IMAGE_BUFFER`) are answered
//! from those references. Image descriptors are copied and their `buffer`/`mem_object`
//! replaced by the inner handle before the vendor sees them.

// Entry points take the application's raw pointers by nature: they reach only the checked
// helpers of `core::args` and the vendor, never a Rust dereference here.
#![allow(clippy::not_unsafe_ptr_arg_deref, clippy::too_many_arguments)]

use crate::core::cl::*;
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::Mutex;

use crate::core::args::{bytes_of, slice, write_info};
use crate::core::callback::{once_obj, Callback, ObjNotify};
use crate::core::error::CLResult;
use crate::core::forward::fetch_info;
use crate::core::handle::{new_obj, Obj, Ref};
use crate::core::memory::{self, Charges};
use crate::core::objects::{Context, Mem, SvmRecord};
use crate::core::refcount;
use crate::{vcall, vcreate, vtry};

type MemInfoFn = unsafe extern "C" fn(cl_mem, cl_uint, usize, *mut c_void, *mut usize) -> cl_int;

/// "CL_INVALID_CONTEXT if context is not a valid context."
fn check_context(context: cl_context) -> CLResult<&'static Obj<Context>> {
    Obj::<Context>::check(context)
}

/// Wraps a memory object the vendor just created in `ctx`.
fn wrap(ctx: &Obj<Context>, inner: cl_mem, parent: Option<Ref<Mem>>, charges: Charges) -> cl_mem {
    let c = ctx.get();
    new_obj(Mem {
        inner: c.inner.child(inner),
        context: ctx.hold(),
        parent,
        charges,
    })
    .handle()
}

/// "CL_MEM_OBJECT_ALLOCATION_FAILURE if there is a failure to allocate memory for buffer
/// object": counts a buffer's `size` bytes on the context's devices before the vendor
/// allocates them, or refuses them under the memory policy (`core::memory`). A buffer on
/// the application's memory (`CL_MEM_USE_HOST_PTR`) counts too: a discrete device keeps
/// its own copy of it (see docs/design.md).
fn charge_buffer(ctx: &Obj<Context>, size: usize) -> CLResult<Charges> {
    memory::charge(ctx.get(), size, "a buffer")
}

/// Wraps an image or a pipe the vendor just created, counting the bytes the vendor
/// reports for it (`CL_MEM_SIZE`); an image on a buffer (`parent`) holds none of its own.
/// "CL_MEM_OBJECT_ALLOCATION_FAILURE if there is a failure to allocate memory for" it,
/// which here is a refusal by the memory policy: the vendor object is released again.
fn wrap_counted(
    ctx: &Obj<Context>,
    inner: cl_mem,
    parent: Option<Ref<Mem>>,
    what: &'static str,
) -> CLResult<cl_mem> {
    let c = ctx.get();
    if parent.is_some() {
        return Ok(wrap(ctx, inner, parent, Charges::none()));
    }
    let mut size = 0usize;
    let f = c.inner.vt.clGetMemObjectInfo;
    // SAFETY: the vendor's query on the object it just created, into a usize.
    let got = f.map(|f| unsafe {
        f(
            inner,
            CL_MEM_SIZE,
            std::mem::size_of::<usize>(),
            &mut size as *mut usize as *mut c_void,
            std::ptr::null_mut(),
        )
    });
    if got != Some(CL_SUCCESS) {
        tracing::debug!("softpreempt: no CL_MEM_SIZE for a new {what}; counted as 0 bytes");
    }
    match memory::charge(c, size, what) {
        Ok(charges) => Ok(wrap(ctx, inner, parent, charges)),
        Err(e) => {
            // SAFETY: the vendor's release of the object the application never saw.
            unsafe { c.inner.vt.clReleaseMemObject.map(|f| f(inner)) };
            Err(e)
        }
    }
}

pub fn create_buffer(
    context: cl_context,
    flags: cl_mem_flags,
    size: usize,
    host_ptr: *mut c_void,
) -> CLResult<cl_mem> {
    let ctx = check_context(context)?;
    let c = ctx.get();
    let charges = charge_buffer(ctx, size)?;
    let h = vcreate!(c.inner.vt, clCreateBuffer(c.inner.h, flags, size, host_ptr))?;
    Ok(wrap(ctx, h, None, charges))
}

/// The core 3.0 memory properties carry no handles, so the list goes to the vendor as is
/// (and `CL_MEM_PROPERTIES` gives it back unchanged).
pub fn create_buffer_with_properties(
    context: cl_context,
    properties: *const cl_mem_properties,
    flags: cl_mem_flags,
    size: usize,
    host_ptr: *mut c_void,
) -> CLResult<cl_mem> {
    let ctx = check_context(context)?;
    let c = ctx.get();
    let charges = charge_buffer(ctx, size)?;
    let h = vcreate!(
        c.inner.vt,
        clCreateBufferWithProperties(c.inner.h, properties, flags, size, host_ptr)
    )?;
    Ok(wrap(ctx, h, None, charges))
}

pub fn create_sub_buffer(
    buffer: cl_mem,
    flags: cl_mem_flags,
    buffer_create_type: cl_buffer_create_type,
    buffer_create_info: *const c_void,
) -> CLResult<cl_mem> {
    // "CL_INVALID_MEM_OBJECT if buffer is not a valid buffer object ..."
    let parent = Obj::<Mem>::check(buffer)?;
    let p = parent.get();
    // The region (a cl_buffer_region) holds no handles; the vendor checks it.
    let h = vcreate!(
        p.inner.vt,
        clCreateSubBuffer(p.inner.h, flags, buffer_create_type, buffer_create_info)
    )?;
    let sub = Mem {
        inner: p.inner.child(h),
        context: p.context.clone(),
        parent: Some(parent.hold()),
        // Its bytes are its parent's, counted once there.
        charges: Charges::none(),
    };
    Ok(new_obj(sub).handle())
}

/// The application's image descriptor with `buffer`/`mem_object` unwrapped, and the
/// wrapper it named (the new image's parent). NULL stays NULL for the vendor to reject.
struct Desc {
    inner: Option<cl_image_desc>,
    parent: Option<Ref<Mem>>,
}

impl Desc {
    fn read(desc: *const cl_image_desc) -> CLResult<Desc> {
        if desc.is_null() {
            return Ok(Desc {
                inner: None,
                parent: None,
            });
        }
        // "CL_INVALID_IMAGE_DESCRIPTOR if values specified in image_desc are not valid ..."
        let mut d = *slice(desc, 1)
            .map_err(|_| CL_INVALID_IMAGE_DESCRIPTOR)?
            .first()
            .ok_or(CL_INVALID_IMAGE_DESCRIPTOR)?;
        let parent = match Obj::<Mem>::check_opt(d.buffer) {
            // A handle that is not one of our memory objects is not a valid `buffer` /
            // `mem_object` value, so the descriptor is invalid; it never reaches the vendor.
            Err(_) => return Err(CL_INVALID_IMAGE_DESCRIPTOR),
            Ok(None) => None,
            Ok(Some(m)) => {
                d.buffer = m.get().inner.h;
                Some(m.hold())
            }
        };
        Ok(Desc {
            inner: Some(d),
            parent,
        })
    }

    fn ptr(&self) -> *const cl_image_desc {
        self.inner
            .as_ref()
            .map_or(std::ptr::null(), |d| d as *const cl_image_desc)
    }
}

pub fn create_image(
    context: cl_context,
    flags: cl_mem_flags,
    image_format: *const cl_image_format,
    image_desc: *const cl_image_desc,
    host_ptr: *mut c_void,
) -> CLResult<cl_mem> {
    let ctx = check_context(context)?;
    let desc = Desc::read(image_desc)?;
    let c = ctx.get();
    let h = vcreate!(
        c.inner.vt,
        clCreateImage(c.inner.h, flags, image_format, desc.ptr(), host_ptr)
    )?;
    wrap_counted(ctx, h, desc.parent, "an image")
}

pub fn create_image_with_properties(
    context: cl_context,
    properties: *const cl_mem_properties,
    flags: cl_mem_flags,
    image_format: *const cl_image_format,
    image_desc: *const cl_image_desc,
    host_ptr: *mut c_void,
) -> CLResult<cl_mem> {
    let ctx = check_context(context)?;
    let desc = Desc::read(image_desc)?;
    let c = ctx.get();
    let h = vcreate!(
        c.inner.vt,
        clCreateImageWithProperties(
            c.inner.h,
            properties,
            flags,
            image_format,
            desc.ptr(),
            host_ptr
        )
    )?;
    wrap_counted(ctx, h, desc.parent, "an image")
}

pub fn create_image_2d(
    context: cl_context,
    flags: cl_mem_flags,
    image_format: *const cl_image_format,
    width: usize,
    height: usize,
    row_pitch: usize,
    host_ptr: *mut c_void,
) -> CLResult<cl_mem> {
    let ctx = check_context(context)?;
    let c = ctx.get();
    let h = vcreate!(
        c.inner.vt,
        clCreateImage2D(
            c.inner.h,
            flags,
            image_format,
            width,
            height,
            row_pitch,
            host_ptr
        )
    )?;
    wrap_counted(ctx, h, None, "an image")
}

pub fn create_image_3d(
    context: cl_context,
    flags: cl_mem_flags,
    image_format: *const cl_image_format,
    width: usize,
    height: usize,
    depth: usize,
    row_pitch: usize,
    slice_pitch: usize,
    host_ptr: *mut c_void,
) -> CLResult<cl_mem> {
    let ctx = check_context(context)?;
    let c = ctx.get();
    let h = vcreate!(
        c.inner.vt,
        clCreateImage3D(
            c.inner.h,
            flags,
            image_format,
            width,
            height,
            depth,
            row_pitch,
            slice_pitch,
            host_ptr
        )
    )?;
    wrap_counted(ctx, h, None, "an image")
}

pub fn create_pipe(
    context: cl_context,
    flags: cl_mem_flags,
    pipe_packet_size: cl_uint,
    pipe_max_packets: cl_uint,
    properties: *const cl_pipe_properties,
) -> CLResult<cl_mem> {
    let ctx = check_context(context)?;
    let c = ctx.get();
    let h = vcreate!(
        c.inner.vt,
        clCreatePipe(
            c.inner.h,
            flags,
            pipe_packet_size,
            pipe_max_packets,
            properties
        )
    )?;
    wrap_counted(ctx, h, None, "a pipe")
}

pub fn retain_mem_object(memobj: cl_mem) -> CLResult<()> {
    refcount::retain::<Mem>(memobj, |m| vtry!(m.inner.vt, clRetainMemObject(m.inner.h)))
}

pub fn release_mem_object(memobj: cl_mem) -> CLResult<()> {
    refcount::release::<Mem>(memobj, |m| vtry!(m.inner.vt, clReleaseMemObject(m.inner.h)))
}

pub fn get_supported_image_formats(
    context: cl_context,
    flags: cl_mem_flags,
    image_type: cl_mem_object_type,
    num_entries: cl_uint,
    image_formats: *mut cl_image_format,
    num_image_formats: *mut cl_uint,
) -> CLResult<()> {
    let c = check_context(context)?.get();
    // Formats are plain values: the vendor writes the application's arrays directly.
    vtry!(
        c.inner.vt,
        clGetSupportedImageFormats(
            c.inner.h,
            flags,
            image_type,
            num_entries,
            image_formats,
            num_image_formats
        )
    )
}

/// The vendor's whole answer to one of the `cl_mem` info queries.
fn vendor_info(m: &Mem, f: Option<MemInfoFn>, param: cl_uint) -> CLResult<Vec<u8>> {
    let f = f.ok_or(CL_INVALID_OPERATION)?;
    // SAFETY: the vendor's own query on its own object, with fetch_info's buffers.
    fetch_info(|s, v, r| unsafe { f(m.inner.h, param, s, v, r) })
}

/// Maps a memory object the vendor named in an answer about `m` (its associated memory
/// object or image buffer) to our wrapper, found among `m`'s recorded ancestors.
fn related(m: &Mem, raw: &[u8]) -> Vec<u8> {
    let inner: cl_mem = crate::api::device::read_handle(raw);
    let ours = if inner.is_null() {
        inner
    } else {
        std::iter::successors(m.parent.as_ref(), |p| p.get().parent.as_ref())
            .find(|p| p.get().inner.h == inner)
            .map_or_else(
                || {
                    // Never hand out the inner handle: NULL is the only safe answer left.
                    tracing::warn!(
                        "softpreempt: vendor named a memory object the layer did not record"
                    );
                    std::ptr::null_mut()
                },
                |p| p.handle(),
            )
    };
    bytes_of(&ours).to_vec()
}

pub fn get_mem_object_info(
    memobj: cl_mem,
    param_name: cl_mem_info,
    param_value_size: usize,
    param_value: *mut c_void,
    param_value_size_ret: *mut usize,
) -> CLResult<()> {
    // "CL_INVALID_MEM_OBJECT if memobj is a not a valid memory object."
    let m = Obj::<Mem>::check(memobj)?.get();
    let vendor = || vendor_info(m, m.inner.vt.clGetMemObjectInfo, param_name);
    let answer = match param_name {
        CL_MEM_CONTEXT => bytes_of(&m.context.handle()).to_vec(),
        CL_MEM_ASSOCIATED_MEMOBJECT => related(m, &vendor()?),
        _ => vendor()?,
    };
    write_info(param_value_size, param_value, param_value_size_ret, &answer)
}

pub fn get_image_info(
    image: cl_mem,
    param_name: cl_image_info,
    param_value_size: usize,
    param_value: *mut c_void,
    param_value_size_ret: *mut usize,
) -> CLResult<()> {
    // "CL_INVALID_MEM_OBJECT if image is a not a valid image object."
    let m = Obj::<Mem>::check(image)?.get();
    let raw = vendor_info(m, m.inner.vt.clGetImageInfo, param_name)?;
    let answer = if param_name == CL_IMAGE_BUFFER {
        related(m, &raw)
    } else {
        raw
    };
    write_info(param_value_size, param_value, param_value_size_ret, &answer)
}

pub fn get_pipe_info(
    pipe: cl_mem,
    param_name: cl_pipe_info,
    param_value_size: usize,
    param_value: *mut c_void,
    param_value_size_ret: *mut usize,
) -> CLResult<()> {
    // "CL_INVALID_MEM_OBJECT if pipe is a not a valid pipe object."
    let m = Obj::<Mem>::check(pipe)?.get();
    // Pipe queries return only sizes and the (handle-free) property list.
    let answer = vendor_info(m, m.inner.vt.clGetPipeInfo, param_name)?;
    write_info(param_value_size, param_value, param_value_size_ret, &answer)
}

/// The callback box holds a reference to the wrapper, so the application's `cl_mem` is
/// still ours when the vendor destroys the inner object, even after the last app release.
pub fn set_mem_object_destructor_callback(
    memobj: cl_mem,
    pfn_notify: Option<ObjNotify<cl_mem>>,
    user_data: *mut c_void,
) -> CLResult<()> {
    // "CL_INVALID_MEM_OBJECT if memobj is not a valid memory object."
    let o = Obj::<Mem>::check(memobj)?;
    // "CL_INVALID_VALUE if pfn_notify is NULL."
    let f = pfn_notify.ok_or(CL_INVALID_VALUE)?;
    let data = Callback::<Mem, ObjNotify<cl_mem>>::into_raw(o.hold(), f, user_data);
    let m = o.get();
    let r = vtry!(
        m.inner.vt,
        clSetMemObjectDestructorCallback(m.inner.h, Some(once_obj::<Mem>), data)
    );
    if r.is_err() {
        // SAFETY: the vendor refused, so it will never call back with `data`.
        unsafe { Callback::<Mem, ObjNotify<cl_mem>>::discard(data) };
    }
    r
}

/// Live SVM allocations by start address.
static SVM: Mutex<BTreeMap<usize, SvmRecord>> = Mutex::new(BTreeMap::new());

fn svm_table() -> std::sync::MutexGuard<'static, BTreeMap<usize, SvmRecord>> {
    SVM.lock().unwrap_or_else(|e| e.into_inner())
}

/// The context that owns the SVM allocation containing `ptr`, if it came from
/// `clSVMAlloc` on one of our contexts.
pub fn svm_owner(ptr: *const c_void) -> Option<Ref<Context>> {
    let addr = ptr as usize;
    let table = svm_table();
    let (_, rec) = table.range(..=addr).next_back()?;
    (addr < rec.ptr as usize + rec.size.max(1)).then(|| rec.context.clone())
}

/// Forgets an allocation freed by other means (`clEnqueueSVMFree`).
pub fn svm_forget(ptr: *const c_void) {
    svm_table().remove(&(ptr as usize));
}

/// "clSVMAlloc returns a valid non-NULL shared virtual memory address if the SVM buffer is
/// successfully allocated. Otherwise, like malloc, it returns a NULL pointer value" —
/// which is also the answer for an invalid context.
pub fn svm_alloc(
    context: cl_context,
    flags: cl_svm_mem_flags,
    size: usize,
    alignment: cl_uint,
) -> *mut c_void {
    let Ok(ctx) = check_context(context) else {
        return std::ptr::null_mut();
    };
    let c = ctx.get();
    let Some(f) = c.inner.vt.clSVMAlloc else {
        return std::ptr::null_mut();
    };
    // Counted first, like a buffer; a refusal is the NULL of a failed allocation.
    let Ok(charges) = memory::charge(c, size, "an SVM allocation") else {
        return std::ptr::null_mut();
    };
    // SAFETY: the vendor's allocator on its own context; the other arguments are values.
    let ptr = unsafe { f(c.inner.h, flags, size, alignment) };
    if !ptr.is_null() {
        svm_table().insert(
            ptr as usize,
            SvmRecord {
                ptr,
                size,
                context: ctx.hold(),
                charges,
            },
        );
    }
    ptr
}

/// "If a NULL pointer is passed in svm_pointer, no action occurs." A bad context, or a
/// pointer that is not an allocation of this context, cannot be reported (the function
/// returns void); both are dropped here rather than handed to the vendor, whose behaviour
/// on them is undefined.
pub fn svm_free(context: cl_context, svm_pointer: *mut c_void) {
    let Ok(ctx) = check_context(context) else {
        tracing::debug!("softpreempt: clSVMFree with an invalid context ignored");
        return;
    };
    if svm_pointer.is_null() {
        return;
    }
    let owned = svm_table()
        .get(&(svm_pointer as usize))
        .is_some_and(|r| std::ptr::eq::<Obj<Context>>(&*r.context, ctx));
    if !owned {
        tracing::debug!(
            "softpreempt: clSVMFree of a pointer this context did not allocate ignored"
        );
        return;
    }
    let c = ctx.get();
    let free = || -> CLResult<()> {
        vcall!(c.inner.vt, clSVMFree(c.inner.h, svm_pointer));
        Ok(())
    };
    if free().is_ok() {
        svm_forget(svm_pointer);
    }
}
