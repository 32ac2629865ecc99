//! `enqueue` entry points.

use crate::core::cl::*;
use std::ffi::c_void;

use crate::core::error::CLResult;

/// clEnqueueReadBuffer: STUB, not yet forwarded.
pub fn enqueue_read_buffer(_command_queue: cl_command_queue, _buffer: cl_mem, _blocking_read: cl_bool, _offset: usize, _size: usize, _ptr: *mut c_void, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueWriteBuffer: STUB, not yet forwarded.
pub fn enqueue_write_buffer(_command_queue: cl_command_queue, _buffer: cl_mem, _blocking_write: cl_bool, _offset: usize, _size: usize, _ptr: *const c_void, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueCopyBuffer: STUB, not yet forwarded.
pub fn enqueue_copy_buffer(_command_queue: cl_command_queue, _src_buffer: cl_mem, _dst_buffer: cl_mem, _src_offset: usize, _dst_offset: usize, _size: usize, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueReadImage: STUB, not yet forwarded.
pub fn enqueue_read_image(_command_queue: cl_command_queue, _image: cl_mem, _blocking_read: cl_bool, _origin: *const usize, _region: *const usize, _row_pitch: usize, _slice_pitch: usize, _ptr: *mut c_void, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueWriteImage: STUB, not yet forwarded.
pub fn enqueue_write_image(_command_queue: cl_command_queue, _image: cl_mem, _blocking_write: cl_bool, _origin: *const usize, _region: *const usize, _input_row_pitch: usize, _input_slice_pitch: usize, _ptr: *const c_void, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueCopyImage: STUB, not yet forwarded.
pub fn enqueue_copy_image(_command_queue: cl_command_queue, _src_image: cl_mem, _dst_image: cl_mem, _src_origin: *const usize, _dst_origin: *const usize, _region: *const usize, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueCopyImageToBuffer: STUB, not yet forwarded.
pub fn enqueue_copy_image_to_buffer(_command_queue: cl_command_queue, _src_image: cl_mem, _dst_buffer: cl_mem, _src_origin: *const usize, _region: *const usize, _dst_offset: usize, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueCopyBufferToImage: STUB, not yet forwarded.
pub fn enqueue_copy_buffer_to_image(_command_queue: cl_command_queue, _src_buffer: cl_mem, _dst_image: cl_mem, _src_offset: usize, _dst_origin: *const usize, _region: *const usize, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueMapBuffer: STUB, not yet forwarded.
pub fn enqueue_map_buffer(_command_queue: cl_command_queue, _buffer: cl_mem, _blocking_map: cl_bool, _map_flags: cl_map_flags, _offset: usize, _size: usize, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<*mut c_void> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueMapImage: STUB, not yet forwarded.
pub fn enqueue_map_image(_command_queue: cl_command_queue, _image: cl_mem, _blocking_map: cl_bool, _map_flags: cl_map_flags, _origin: *const usize, _region: *const usize, _image_row_pitch: *mut usize, _image_slice_pitch: *mut usize, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<*mut c_void> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueUnmapMemObject: STUB, not yet forwarded.
pub fn enqueue_unmap_mem_object(_command_queue: cl_command_queue, _memobj: cl_mem, _mapped_ptr: *mut c_void, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueNDRangeKernel: STUB, not yet forwarded.
pub fn enqueue_ndrange_kernel(_command_queue: cl_command_queue, _kernel: cl_kernel, _work_dim: cl_uint, _global_work_offset: *const usize, _global_work_size: *const usize, _local_work_size: *const usize, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueTask: STUB, not yet forwarded.
pub fn enqueue_task(_command_queue: cl_command_queue, _kernel: cl_kernel, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueNativeKernel: STUB, not yet forwarded.
pub fn enqueue_native_kernel(_command_queue: cl_command_queue, _user_func: Option<unsafe extern "C" fn(arg1: *mut c_void)>, _args: *mut c_void, _cb_args: usize, _num_mem_objects: cl_uint, _mem_list: *const cl_mem, _args_mem_loc: *mut *const c_void, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueMarker: STUB, not yet forwarded.
pub fn enqueue_marker(_command_queue: cl_command_queue, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueWaitForEvents: STUB, not yet forwarded.
pub fn enqueue_wait_for_events(_command_queue: cl_command_queue, _num_events: cl_uint, _event_list: *const cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueBarrier: STUB, not yet forwarded.
pub fn enqueue_barrier(_command_queue: cl_command_queue) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueReadBufferRect: STUB, not yet forwarded.
pub fn enqueue_read_buffer_rect(_command_queue: cl_command_queue, _buffer: cl_mem, _blocking_read: cl_bool, _buffer_origin: *const usize, _host_origin: *const usize, _region: *const usize, _buffer_row_pitch: usize, _buffer_slice_pitch: usize, _host_row_pitch: usize, _host_slice_pitch: usize, _ptr: *mut c_void, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueWriteBufferRect: STUB, not yet forwarded.
pub fn enqueue_write_buffer_rect(_command_queue: cl_command_queue, _buffer: cl_mem, _blocking_write: cl_bool, _buffer_origin: *const usize, _host_origin: *const usize, _region: *const usize, _buffer_row_pitch: usize, _buffer_slice_pitch: usize, _host_row_pitch: usize, _host_slice_pitch: usize, _ptr: *const c_void, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueCopyBufferRect: STUB, not yet forwarded.
pub fn enqueue_copy_buffer_rect(_command_queue: cl_command_queue, _src_buffer: cl_mem, _dst_buffer: cl_mem, _src_origin: *const usize, _dst_origin: *const usize, _region: *const usize, _src_row_pitch: usize, _src_slice_pitch: usize, _dst_row_pitch: usize, _dst_slice_pitch: usize, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueFillBuffer: STUB, not yet forwarded.
pub fn enqueue_fill_buffer(_command_queue: cl_command_queue, _buffer: cl_mem, _pattern: *const c_void, _pattern_size: usize, _offset: usize, _size: usize, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueFillImage: STUB, not yet forwarded.
pub fn enqueue_fill_image(_command_queue: cl_command_queue, _image: cl_mem, _fill_color: *const c_void, _origin: *const usize, _region: *const usize, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueMigrateMemObjects: STUB, not yet forwarded.
pub fn enqueue_migrate_mem_objects(_command_queue: cl_command_queue, _num_mem_objects: cl_uint, _mem_objects: *const cl_mem, _flags: cl_mem_migration_flags, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueMarkerWithWaitList: STUB, not yet forwarded.
pub fn enqueue_marker_with_wait_list(_command_queue: cl_command_queue, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueBarrierWithWaitList: STUB, not yet forwarded.
pub fn enqueue_barrier_with_wait_list(_command_queue: cl_command_queue, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueSVMFree: STUB, not yet forwarded.
pub fn enqueue_svm_free(_command_queue: cl_command_queue, _num_svm_pointers: cl_uint, _svm_pointers: *mut *mut c_void, _pfn_free_func: Option< unsafe extern "C" fn( queue: cl_command_queue, _num_svm_pointers: cl_uint, _svm_pointers: *mut *mut c_void, _user_data: *mut c_void, ), >, _user_data: *mut c_void, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueSVMMemcpy: STUB, not yet forwarded.
pub fn enqueue_svm_memcpy(_command_queue: cl_command_queue, _blocking_copy: cl_bool, _dst_ptr: *mut c_void, _src_ptr: *const c_void, _size: usize, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueSVMMemFill: STUB, not yet forwarded.
pub fn enqueue_svm_mem_fill(_command_queue: cl_command_queue, _svm_ptr: *mut c_void, _pattern: *const c_void, _pattern_size: usize, _size: usize, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueSVMMap: STUB, not yet forwarded.
pub fn enqueue_svm_map(_command_queue: cl_command_queue, _blocking_map: cl_bool, _flags: cl_map_flags, _svm_ptr: *mut c_void, _size: usize, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueSVMUnmap: STUB, not yet forwarded.
pub fn enqueue_svm_unmap(_command_queue: cl_command_queue, _svm_ptr: *mut c_void, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}

/// clEnqueueSVMMigrateMem: STUB, not yet forwarded.
pub fn enqueue_svm_migrate_mem(_command_queue: cl_command_queue, _num_svm_pointers: cl_uint, _svm_pointers: *mut *const c_void, _sizes: *const usize, _flags: cl_mem_migration_flags, _num_events_in_wait_list: cl_uint, _event_wait_list: *const cl_event, _event: *mut cl_event) -> CLResult<()> {
    Err(CL_INVALID_OPERATION)
}
