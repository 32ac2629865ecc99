//! `libsoftpreempt.so`: the installable OpenCL ICD and the layer's only C ABI.
//!
//! It exports exactly `clIcdGetPlatformIDsKHR`, `clGetExtensionFunctionAddress` and
//! `clGetPlatformInfo`. Everything else is reached through the dispatch table that every
//! SoftPreempt object carries. The table and the thin `extern "C"` entry points are built
//! from the single [`cl_dispatch!`] list below; each entry catches panics and calls into
//! `softpreempt_platform::api`, where arguments are checked and the work is done.

#![allow(non_snake_case)]
// The entry points take raw pointers by nature; `api` narrows them in checked helpers.
#![allow(clippy::not_unsafe_ptr_arg_deref, clippy::too_many_arguments)]

mod entry;

use opencl_sys::cl_icd::*;
use opencl_sys::*;
use std::ffi::{c_char, c_void};

entry::cl_dispatch! {
    int clGetPlatformIDs(num_entries: cl_uint, platforms: *mut cl_platform_id, num_platforms: *mut cl_uint) -> cl_int => platform::get_platform_ids;
    int clGetPlatformInfo(platform: cl_platform_id, param_name: cl_platform_info, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize) -> cl_int => platform::get_platform_info;
    int clGetDeviceIDs(platform: cl_platform_id, device_type: cl_device_type, num_entries: cl_uint, devices: *mut cl_device_id, num_devices: *mut cl_uint) -> cl_int => device::get_device_ids;
    int clGetDeviceInfo(device: cl_device_id, param_name: cl_device_info, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize) -> cl_int => device::get_device_info;
    obj clCreateContext(properties: *const cl_context_properties, num_devices: cl_uint, devices: *const cl_device_id, pfn_notify: Option< unsafe extern "C" fn( errinfo: *const c_char, private_info: *const c_void, cb: usize, user_data: *mut c_void, ), >, user_data: *mut c_void) -> cl_context => context::create_context;
    obj clCreateContextFromType(properties: *const cl_context_properties, device_type: cl_device_type, pfn_notify: Option< unsafe extern "C" fn( errinfo: *const c_char, private_info: *const c_void, cb: usize, user_data: *mut c_void, ), >, user_data: *mut c_void) -> cl_context => context::create_context_from_type;
    int clRetainContext(context: cl_context) -> cl_int => context::retain_context;
    int clReleaseContext(context: cl_context) -> cl_int => context::release_context;
    int clGetContextInfo(context: cl_context, param_name: cl_context_info, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize) -> cl_int => context::get_context_info;
    obj clCreateCommandQueue(context: cl_context, device: cl_device_id, properties: cl_command_queue_properties) -> cl_command_queue => queue::create_command_queue;
    int clRetainCommandQueue(command_queue: cl_command_queue) -> cl_int => queue::retain_command_queue;
    int clReleaseCommandQueue(command_queue: cl_command_queue) -> cl_int => queue::release_command_queue;
    int clGetCommandQueueInfo(command_queue: cl_command_queue, param_name: cl_command_queue_info, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize) -> cl_int => queue::get_command_queue_info;
    int clSetCommandQueueProperty(command_queue: cl_command_queue, properties: cl_command_queue_properties, enable: cl_bool, old_properties: *mut cl_command_queue_properties) -> cl_int => queue::set_command_queue_property;
    obj clCreateBuffer(context: cl_context, flags: cl_mem_flags, size: usize, host_ptr: *mut c_void) -> cl_mem => mem::create_buffer;
    obj clCreateImage2D(context: cl_context, flags: cl_mem_flags, image_format: *const cl_image_format, image_width: usize, image_height: usize, image_row_pitch: usize, host_ptr: *mut c_void) -> cl_mem => mem::create_image_2d;
    obj clCreateImage3D(context: cl_context, flags: cl_mem_flags, image_format: *const cl_image_format, image_width: usize, image_height: usize, image_depth: usize, image_row_pitch: usize, image_slice_pitch: usize, host_ptr: *mut c_void) -> cl_mem => mem::create_image_3d;
    int clRetainMemObject(memobj: cl_mem) -> cl_int => mem::retain_mem_object;
    int clReleaseMemObject(memobj: cl_mem) -> cl_int => mem::release_mem_object;
    int clGetSupportedImageFormats(context: cl_context, flags: cl_mem_flags, image_type: cl_mem_object_type, num_entries: cl_uint, image_formats: *mut cl_image_format, num_image_formats: *mut cl_uint) -> cl_int => mem::get_supported_image_formats;
    int clGetMemObjectInfo(memobj: cl_mem, param_name: cl_mem_info, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize) -> cl_int => mem::get_mem_object_info;
    int clGetImageInfo(image: cl_mem, param_name: cl_image_info, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize) -> cl_int => mem::get_image_info;
    obj clCreateSampler(context: cl_context, normalized_coords: cl_bool, addressing_mode: cl_addressing_mode, filter_mode: cl_filter_mode) -> cl_sampler => sampler::create_sampler;
    int clRetainSampler(sampler: cl_sampler) -> cl_int => sampler::retain_sampler;
    int clReleaseSampler(sampler: cl_sampler) -> cl_int => sampler::release_sampler;
    int clGetSamplerInfo(sampler: cl_sampler, param_name: cl_sampler_info, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize) -> cl_int => sampler::get_sampler_info;
    obj clCreateProgramWithSource(context: cl_context, count: cl_uint, strings: *mut *const c_char, lengths: *const usize) -> cl_program => program::create_program_with_source;
    obj clCreateProgramWithBinary(context: cl_context, num_devices: cl_uint, device_list: *const cl_device_id, lengths: *const usize, binaries: *mut *const ::core::ffi::c_uchar, binary_status: *mut cl_int) -> cl_program => program::create_program_with_binary;
    int clRetainProgram(program: cl_program) -> cl_int => program::retain_program;
    int clReleaseProgram(program: cl_program) -> cl_int => program::release_program;
    int clBuildProgram(program: cl_program, num_devices: cl_uint, device_list: *const cl_device_id, options: *const c_char, pfn_notify: Option<unsafe extern "C" fn(program: cl_program, user_data: *mut c_void)>, user_data: *mut c_void) -> cl_int => program::build_program;
    int clUnloadCompiler() -> cl_int => platform::unload_compiler;
    int clGetProgramInfo(program: cl_program, param_name: cl_program_info, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize) -> cl_int => program::get_program_info;
    int clGetProgramBuildInfo(program: cl_program, device: cl_device_id, param_name: cl_program_build_info, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize) -> cl_int => program::get_program_build_info;
    obj clCreateKernel(program: cl_program, kernel_name: *const c_char) -> cl_kernel => kernel::create_kernel;
    int clCreateKernelsInProgram(program: cl_program, num_kernels: cl_uint, kernels: *mut cl_kernel, num_kernels_ret: *mut cl_uint) -> cl_int => program::create_kernels_in_program;
    int clRetainKernel(kernel: cl_kernel) -> cl_int => kernel::retain_kernel;
    int clReleaseKernel(kernel: cl_kernel) -> cl_int => kernel::release_kernel;
    int clSetKernelArg(kernel: cl_kernel, arg_index: cl_uint, arg_size: usize, arg_value: *const c_void) -> cl_int => kernel::set_kernel_arg;
    int clGetKernelInfo(kernel: cl_kernel, param_name: cl_kernel_info, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize) -> cl_int => kernel::get_kernel_info;
    int clGetKernelWorkGroupInfo(kernel: cl_kernel, device: cl_device_id, param_name: cl_kernel_work_group_info, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize) -> cl_int => kernel::get_kernel_work_group_info;
    int clWaitForEvents(num_events: cl_uint, event_list: *const cl_event) -> cl_int => event::wait_for_events;
    int clGetEventInfo(event: cl_event, param_name: cl_event_info, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize) -> cl_int => event::get_event_info;
    int clRetainEvent(event: cl_event) -> cl_int => event::retain_event;
    int clReleaseEvent(event: cl_event) -> cl_int => event::release_event;
    int clGetEventProfilingInfo(event: cl_event, param_name: cl_profiling_info, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize) -> cl_int => event::get_event_profiling_info;
    int clFlush(command_queue: cl_command_queue) -> cl_int => queue::flush;
    int clFinish(command_queue: cl_command_queue) -> cl_int => queue::finish;
    int clEnqueueReadBuffer(command_queue: cl_command_queue, buffer: cl_mem, blocking_read: cl_bool, offset: usize, size: usize, ptr: *mut c_void, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> cl_int => enqueue::enqueue_read_buffer;
    int clEnqueueWriteBuffer(command_queue: cl_command_queue, buffer: cl_mem, blocking_write: cl_bool, offset: usize, size: usize, ptr: *const c_void, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> cl_int => enqueue::enqueue_write_buffer;
    int clEnqueueCopyBuffer(command_queue: cl_command_queue, src_buffer: cl_mem, dst_buffer: cl_mem, src_offset: usize, dst_offset: usize, size: usize, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> cl_int => enqueue::enqueue_copy_buffer;
    int clEnqueueReadImage(command_queue: cl_command_queue, image: cl_mem, blocking_read: cl_bool, origin: *const usize, region: *const usize, row_pitch: usize, slice_pitch: usize, ptr: *mut c_void, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> cl_int => enqueue::enqueue_read_image;
    int clEnqueueWriteImage(command_queue: cl_command_queue, image: cl_mem, blocking_write: cl_bool, origin: *const usize, region: *const usize, input_row_pitch: usize, input_slice_pitch: usize, ptr: *const c_void, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> cl_int => enqueue::enqueue_write_image;
    int clEnqueueCopyImage(command_queue: cl_command_queue, src_image: cl_mem, dst_image: cl_mem, src_origin: *const usize, dst_origin: *const usize, region: *const usize, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> cl_int => enqueue::enqueue_copy_image;
    int clEnqueueCopyImageToBuffer(command_queue: cl_command_queue, src_image: cl_mem, dst_buffer: cl_mem, src_origin: *const usize, region: *const usize, dst_offset: usize, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> cl_int => enqueue::enqueue_copy_image_to_buffer;
    int clEnqueueCopyBufferToImage(command_queue: cl_command_queue, src_buffer: cl_mem, dst_image: cl_mem, src_offset: usize, dst_origin: *const usize, region: *const usize, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> cl_int => enqueue::enqueue_copy_buffer_to_image;
    obj clEnqueueMapBuffer(command_queue: cl_command_queue, buffer: cl_mem, blocking_map: cl_bool, map_flags: cl_map_flags, offset: usize, size: usize, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> *mut c_void => enqueue::enqueue_map_buffer;
    obj clEnqueueMapImage(command_queue: cl_command_queue, image: cl_mem, blocking_map: cl_bool, map_flags: cl_map_flags, origin: *const usize, region: *const usize, image_row_pitch: *mut usize, image_slice_pitch: *mut usize, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> *mut c_void => enqueue::enqueue_map_image;
    int clEnqueueUnmapMemObject(command_queue: cl_command_queue, memobj: cl_mem, mapped_ptr: *mut c_void, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> cl_int => enqueue::enqueue_unmap_mem_object;
    int clEnqueueNDRangeKernel(command_queue: cl_command_queue, kernel: cl_kernel, work_dim: cl_uint, global_work_offset: *const usize, global_work_size: *const usize, local_work_size: *const usize, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> cl_int => enqueue::enqueue_ndrange_kernel;
    int clEnqueueTask(command_queue: cl_command_queue, kernel: cl_kernel, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> cl_int => enqueue::enqueue_task;
    int clEnqueueNativeKernel(command_queue: cl_command_queue, user_func: Option<unsafe extern "C" fn(arg1: *mut c_void)>, args: *mut c_void, cb_args: usize, num_mem_objects: cl_uint, mem_list: *const cl_mem, args_mem_loc: *mut *const c_void, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> cl_int => enqueue::enqueue_native_kernel;
    int clEnqueueMarker(command_queue: cl_command_queue, event: *mut cl_event) -> cl_int => enqueue::enqueue_marker;
    int clEnqueueWaitForEvents(command_queue: cl_command_queue, num_events: cl_uint, event_list: *const cl_event) -> cl_int => enqueue::enqueue_wait_for_events;
    int clEnqueueBarrier(command_queue: cl_command_queue) -> cl_int => enqueue::enqueue_barrier;
    ptr clGetExtensionFunctionAddress(func_name: *const c_char) -> *mut c_void => platform::get_extension_function_address;
    obj clCreateFromGLBuffer(context: cl_context, flags: cl_mem_flags, bufobj: cl_GLuint) -> cl_mem => interop::create_from_gl_buffer;
    obj clCreateFromGLTexture2D(context: cl_context, flags: cl_mem_flags, target: cl_GLenum, miplevel: cl_GLint, texture: cl_GLuint) -> cl_mem => interop::create_from_gl_texture_2d;
    obj clCreateFromGLTexture3D(context: cl_context, flags: cl_mem_flags, target: cl_GLenum, miplevel: cl_GLint, texture: cl_GLuint) -> cl_mem => interop::create_from_gl_texture_3d;
    obj clCreateFromGLRenderbuffer(context: cl_context, flags: cl_mem_flags, renderbuffer: cl_GLuint) -> cl_mem => interop::create_from_gl_renderbuffer;
    int clGetGLObjectInfo(memobj: cl_mem, gl_object_type: *mut cl_gl_object_type, gl_object_name: *mut cl_GLuint) -> cl_int => interop::get_gl_object_info;
    int clGetGLTextureInfo(memobj: cl_mem, param_name: cl_gl_texture_info, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize) -> cl_int => interop::get_gl_texture_info;
    int clEnqueueAcquireGLObjects(command_queue: cl_command_queue, num_objects: cl_uint, mem_objects: *const cl_mem, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> cl_int => interop::enqueue_acquire_gl_objects;
    int clEnqueueReleaseGLObjects(command_queue: cl_command_queue, num_objects: cl_uint, mem_objects: *const cl_mem, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> cl_int => interop::enqueue_release_gl_objects;
    int clGetGLContextInfoKHR(properties: *const cl_context_properties, param_name: cl_gl_context_info, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize) -> cl_int => interop::get_gl_context_info_khr;
    int clGetDeviceIDsFromD3D10KHR(platform: cl_platform_id, d3d_device_source: cl_d3d10_device_source_khr, d3d_object: *mut c_void, d3d_device_set: cl_d3d10_device_set_khr, num_entries: cl_uint, devices: *mut cl_device_id, num_devices: *mut cl_uint) -> cl_int => interop::get_device_ids_from_d3d10_khr;
    obj clCreateFromD3D10BufferKHR(context: cl_context, flags: cl_mem_flags, resource: ID3D10Buffer_ptr) -> cl_mem => interop::create_from_d3d10_buffer_khr;
    obj clCreateFromD3D10Texture2DKHR(context: cl_context, flags: cl_mem_flags, resource: ID3D10Texture2D_ptr, subresource: cl_uint) -> cl_mem => interop::create_from_d3d10_texture_2d_khr;
    obj clCreateFromD3D10Texture3DKHR(context: cl_context, flags: cl_mem_flags, resource: ID3D10Texture3D_ptr, subresource: cl_uint) -> cl_mem => interop::create_from_d3d10_texture_3d_khr;
    int clEnqueueAcquireD3D10ObjectsKHR(command_queue: cl_command_queue, num_objects: cl_uint, mem_objects: *const cl_mem, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> cl_int => interop::enqueue_acquire_d3d10_objects_khr;
    int clEnqueueReleaseD3D10ObjectsKHR(command_queue: cl_command_queue, num_objects: cl_uint, mem_objects: *const cl_mem, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> cl_int => interop::enqueue_release_d3d10_objects_khr;
    int clSetEventCallback(event: cl_event, command_exec_callback_type: cl_int, pfn_notify: Option< unsafe extern "C" fn( event: cl_event, event_command_status: cl_int, user_data: *mut c_void, ), >, user_data: *mut c_void) -> cl_int => event::set_event_callback;
    obj clCreateSubBuffer(buffer: cl_mem, flags: cl_mem_flags, buffer_create_type: cl_buffer_create_type, buffer_create_info: *const c_void) -> cl_mem => mem::create_sub_buffer;
    int clSetMemObjectDestructorCallback(memobj: cl_mem, pfn_notify: Option<unsafe extern "C" fn(memobj: cl_mem, user_data: *mut c_void)>, user_data: *mut c_void) -> cl_int => mem::set_mem_object_destructor_callback;
    obj clCreateUserEvent(context: cl_context) -> cl_event => event::create_user_event;
    int clSetUserEventStatus(event: cl_event, execution_status: cl_int) -> cl_int => event::set_user_event_status;
    int clEnqueueReadBufferRect(command_queue: cl_command_queue, buffer: cl_mem, blocking_read: cl_bool, buffer_origin: *const usize, host_origin: *const usize, region: *const usize, buffer_row_pitch: usize, buffer_slice_pitch: usize, host_row_pitch: usize, host_slice_pitch: usize, ptr: *mut c_void, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> cl_int => enqueue::enqueue_read_buffer_rect;
    int clEnqueueWriteBufferRect(command_queue: cl_command_queue, buffer: cl_mem, blocking_write: cl_bool, buffer_origin: *const usize, host_origin: *const usize, region: *const usize, buffer_row_pitch: usize, buffer_slice_pitch: usize, host_row_pitch: usize, host_slice_pitch: usize, ptr: *const c_void, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> cl_int => enqueue::enqueue_write_buffer_rect;
    int clEnqueueCopyBufferRect(command_queue: cl_command_queue, src_buffer: cl_mem, dst_buffer: cl_mem, src_origin: *const usize, dst_origin: *const usize, region: *const usize, src_row_pitch: usize, src_slice_pitch: usize, dst_row_pitch: usize, dst_slice_pitch: usize, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> cl_int => enqueue::enqueue_copy_buffer_rect;
    int clCreateSubDevicesEXT(in_device: cl_device_id, properties: *const cl_device_partition_property_ext, num_entries: cl_uint, out_devices: *mut cl_device_id, num_devices: *mut cl_uint) -> cl_int => device::create_sub_devices_ext;
    int clRetainDeviceEXT(device: cl_device_id) -> cl_int => device::retain_device_ext;
    int clReleaseDeviceEXT(device: cl_device_id) -> cl_int => device::release_device_ext;
    obj clCreateEventFromGLsyncKHR(context: cl_context, sync: cl_GLsync) -> cl_event => interop::create_event_from_gl_sync_khr;
    int clCreateSubDevices(in_device: cl_device_id, properties: *const cl_device_partition_property, num_devices: cl_uint, out_devices: *mut cl_device_id, num_devices_ret: *mut cl_uint) -> cl_int => device::create_sub_devices;
    int clRetainDevice(device: cl_device_id) -> cl_int => device::retain_device;
    int clReleaseDevice(device: cl_device_id) -> cl_int => device::release_device;
    obj clCreateImage(context: cl_context, flags: cl_mem_flags, image_format: *const cl_image_format, image_desc: *const cl_image_desc, host_ptr: *mut c_void) -> cl_mem => mem::create_image;
    obj clCreateProgramWithBuiltInKernels(context: cl_context, num_devices: cl_uint, device_list: *const cl_device_id, kernel_names: *const c_char) -> cl_program => program::create_program_with_built_in_kernels;
    int clCompileProgram(program: cl_program, num_devices: cl_uint, device_list: *const cl_device_id, options: *const c_char, num_input_headers: cl_uint, input_headers: *const cl_program, header_include_names: *mut *const c_char, pfn_notify: Option<unsafe extern "C" fn(program: cl_program, user_data: *mut c_void)>, user_data: *mut c_void) -> cl_int => program::compile_program;
    obj clLinkProgram(context: cl_context, num_devices: cl_uint, device_list: *const cl_device_id, options: *const c_char, num_input_programs: cl_uint, input_programs: *const cl_program, pfn_notify: Option<unsafe extern "C" fn(program: cl_program, user_data: *mut c_void)>, user_data: *mut c_void) -> cl_program => program::link_program;
    int clUnloadPlatformCompiler(platform: cl_platform_id) -> cl_int => platform::unload_platform_compiler;
    int clGetKernelArgInfo(kernel: cl_kernel, arg_index: cl_uint, param_name: cl_kernel_arg_info, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize) -> cl_int => kernel::get_kernel_arg_info;
    int clEnqueueFillBuffer(command_queue: cl_command_queue, buffer: cl_mem, pattern: *const c_void, pattern_size: usize, offset: usize, size: usize, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> cl_int => enqueue::enqueue_fill_buffer;
    int clEnqueueFillImage(command_queue: cl_command_queue, image: cl_mem, fill_color: *const c_void, origin: *const usize, region: *const usize, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> cl_int => enqueue::enqueue_fill_image;
    int clEnqueueMigrateMemObjects(command_queue: cl_command_queue, num_mem_objects: cl_uint, mem_objects: *const cl_mem, flags: cl_mem_migration_flags, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> cl_int => enqueue::enqueue_migrate_mem_objects;
    int clEnqueueMarkerWithWaitList(command_queue: cl_command_queue, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> cl_int => enqueue::enqueue_marker_with_wait_list;
    int clEnqueueBarrierWithWaitList(command_queue: cl_command_queue, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> cl_int => enqueue::enqueue_barrier_with_wait_list;
    ptr clGetExtensionFunctionAddressForPlatform(platform: cl_platform_id, func_name: *const c_char) -> *mut c_void => platform::get_extension_function_address_for_platform;
    obj clCreateFromGLTexture(context: cl_context, flags: cl_mem_flags, target: cl_GLenum, miplevel: cl_GLint, texture: cl_GLuint) -> cl_mem => interop::create_from_gl_texture;
    int clGetDeviceIDsFromD3D11KHR(platform: cl_platform_id, d3d_device_source: cl_d3d11_device_source_khr, d3d_object: *mut c_void, d3d_device_set: cl_d3d11_device_set_khr, num_entries: cl_uint, devices: *mut cl_device_id, num_devices: *mut cl_uint) -> cl_int => interop::get_device_ids_from_d3d11_khr;
    obj clCreateFromD3D11BufferKHR(context: cl_context, flags: cl_mem_flags, resource: ID3D11Buffer_ptr) -> cl_mem => interop::create_from_d3d11_buffer_khr;
    obj clCreateFromD3D11Texture2DKHR(context: cl_context, flags: cl_mem_flags, resource: ID3D11Texture2D_ptr, subresource: cl_uint) -> cl_mem => interop::create_from_d3d11_texture_2d_khr;
    obj clCreateFromD3D11Texture3DKHR(context: cl_context, flags: cl_mem_flags, resource: ID3D11Texture3D_ptr, subresource: cl_uint) -> cl_mem => interop::create_from_d3d11_texture_3d_khr;
    obj clCreateFromDX9MediaSurfaceKHR(context: cl_context, flags: cl_mem_flags, adapter_type: cl_dx9_media_adapter_type_khr, surface_info: *mut c_void, plane: cl_uint) -> cl_mem => interop::create_from_dx9_media_surface_khr;
    int clEnqueueAcquireD3D11ObjectsKHR(command_queue: cl_command_queue, num_objects: cl_uint, mem_objects: *const cl_mem, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> cl_int => interop::enqueue_acquire_d3d11_objects_khr;
    int clEnqueueReleaseD3D11ObjectsKHR(command_queue: cl_command_queue, num_objects: cl_uint, mem_objects: *const cl_mem, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> cl_int => interop::enqueue_release_d3d11_objects_khr;
    int clGetDeviceIDsFromDX9MediaAdapterKHR(platform: cl_platform_id, num_media_adapters: cl_uint, media_adapter_type: *mut cl_dx9_media_adapter_type_khr, media_adapters: *mut c_void, media_adapter_set: cl_dx9_media_adapter_set_khr, num_entries: cl_uint, devices: *mut cl_device_id, num_devices: *mut cl_uint) -> cl_int => interop::get_device_ids_from_dx9_media_adapter_khr;
    int clEnqueueAcquireDX9MediaSurfacesKHR(command_queue: cl_command_queue, num_objects: cl_uint, mem_objects: *const cl_mem, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> cl_int => interop::enqueue_acquire_dx9_media_surfaces_khr;
    int clEnqueueReleaseDX9MediaSurfacesKHR(command_queue: cl_command_queue, num_objects: cl_uint, mem_objects: *const cl_mem, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> cl_int => interop::enqueue_release_dx9_media_surfaces_khr;
    obj clCreateFromEGLImageKHR(context: cl_context, egldisplay: CLeglDisplayKHR, egl_image: CLeglImageKHR, flags: cl_mem_flags, properties: *const cl_egl_image_properties_khr) -> cl_mem => interop::create_from_eglimage_khr;
    int clEnqueueAcquireEGLObjectsKHR(command_queue: cl_command_queue, num_objects: cl_uint, mem_objects: *const cl_mem, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> cl_int => interop::enqueue_acquire_egl_objects_khr;
    int clEnqueueReleaseEGLObjectsKHR(command_queue: cl_command_queue, num_objects: cl_uint, mem_objects: *const cl_mem, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> cl_int => interop::enqueue_release_egl_objects_khr;
    obj clCreateEventFromEGLSyncKHR(context: cl_context, sync: CLeglSyncKHR, display: CLeglDisplayKHR) -> cl_event => interop::create_event_from_egl_sync_khr;
    obj clCreateCommandQueueWithProperties(context: cl_context, device: cl_device_id, properties: *const cl_queue_properties) -> cl_command_queue => queue::create_command_queue_with_properties;
    obj clCreatePipe(context: cl_context, flags: cl_mem_flags, pipe_packet_size: cl_uint, pipe_max_packets: cl_uint, properties: *const cl_pipe_properties) -> cl_mem => mem::create_pipe;
    int clGetPipeInfo(pipe: cl_mem, param_name: cl_pipe_info, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize) -> cl_int => mem::get_pipe_info;
    ptr clSVMAlloc(context: cl_context, flags: cl_svm_mem_flags, size: usize, alignment: cl_uint) -> *mut c_void => mem::svm_alloc;
    void clSVMFree(context: cl_context, svm_pointer: *mut c_void) -> () => mem::svm_free;
    int clEnqueueSVMFree(command_queue: cl_command_queue, num_svm_pointers: cl_uint, svm_pointers: *mut *mut c_void, pfn_free_func: Option< unsafe extern "C" fn( queue: cl_command_queue, num_svm_pointers: cl_uint, svm_pointers: *mut *mut c_void, user_data: *mut c_void, ), >, user_data: *mut c_void, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> cl_int => enqueue::enqueue_svm_free;
    int clEnqueueSVMMemcpy(command_queue: cl_command_queue, blocking_copy: cl_bool, dst_ptr: *mut c_void, src_ptr: *const c_void, size: usize, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> cl_int => enqueue::enqueue_svm_memcpy;
    int clEnqueueSVMMemFill(command_queue: cl_command_queue, svm_ptr: *mut c_void, pattern: *const c_void, pattern_size: usize, size: usize, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> cl_int => enqueue::enqueue_svm_mem_fill;
    int clEnqueueSVMMap(command_queue: cl_command_queue, blocking_map: cl_bool, flags: cl_map_flags, svm_ptr: *mut c_void, size: usize, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> cl_int => enqueue::enqueue_svm_map;
    int clEnqueueSVMUnmap(command_queue: cl_command_queue, svm_ptr: *mut c_void, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> cl_int => enqueue::enqueue_svm_unmap;
    obj clCreateSamplerWithProperties(context: cl_context, sampler_properties: *const cl_sampler_properties) -> cl_sampler => sampler::create_sampler_with_properties;
    int clSetKernelArgSVMPointer(kernel: cl_kernel, arg_index: cl_uint, arg_value: *const c_void) -> cl_int => kernel::set_kernel_arg_svm_pointer;
    int clSetKernelExecInfo(kernel: cl_kernel, param_name: cl_kernel_exec_info, param_value_size: usize, param_value: *const c_void) -> cl_int => kernel::set_kernel_exec_info;
    int clGetKernelSubGroupInfoKHR(in_kernel: cl_kernel, in_device: cl_device_id, param_name: cl_kernel_sub_group_info, input_value_size: usize, input_value: *const c_void, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize) -> cl_int => kernel::get_kernel_sub_group_info_khr;
    obj clCloneKernel(source_kernel: cl_kernel) -> cl_kernel => kernel::clone_kernel;
    obj clCreateProgramWithIL(context: cl_context, il: *const c_void, length: usize) -> cl_program => program::create_program_with_il;
    int clEnqueueSVMMigrateMem(command_queue: cl_command_queue, num_svm_pointers: cl_uint, svm_pointers: *mut *const c_void, sizes: *const usize, flags: cl_mem_migration_flags, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> cl_int => enqueue::enqueue_svm_migrate_mem;
    int clGetDeviceAndHostTimer(device: cl_device_id, device_timestamp: *mut cl_ulong, host_timestamp: *mut cl_ulong) -> cl_int => device::get_device_and_host_timer;
    int clGetHostTimer(device: cl_device_id, host_timestamp: *mut cl_ulong) -> cl_int => device::get_host_timer;
    int clGetKernelSubGroupInfo(kernel: cl_kernel, device: cl_device_id, param_name: cl_kernel_sub_group_info, input_value_size: usize, input_value: *const c_void, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize) -> cl_int => kernel::get_kernel_sub_group_info;
    int clSetDefaultDeviceCommandQueue(context: cl_context, device: cl_device_id, command_queue: cl_command_queue) -> cl_int => queue::set_default_device_command_queue;
    int clSetProgramReleaseCallback(program: cl_program, pfn_notify: Option<unsafe extern "C" fn(program: cl_program, user_data: *mut c_void)>, user_data: *mut c_void) -> cl_int => program::set_program_release_callback;
    int clSetProgramSpecializationConstant(program: cl_program, spec_id: cl_uint, spec_size: usize, spec_value: *const c_void) -> cl_int => program::set_program_specialization_constant;
    obj clCreateBufferWithProperties(context: cl_context, properties: *const cl_mem_properties, flags: cl_mem_flags, size: usize, host_ptr: *mut c_void) -> cl_mem => mem::create_buffer_with_properties;
    obj clCreateImageWithProperties(context: cl_context, properties: *const cl_mem_properties, flags: cl_mem_flags, image_format: *const cl_image_format, image_desc: *const cl_image_desc, host_ptr: *mut c_void) -> cl_mem => mem::create_image_with_properties;
    int clSetContextDestructorCallback(context: cl_context, pfn_notify: Option<unsafe extern "C" fn(context: cl_context, user_data: *mut c_void)>, user_data: *mut c_void) -> cl_int => context::set_context_destructor_callback;
    int clGetKernelSuggestedLocalWorkSize(command_queue: cl_command_queue, kernel: cl_kernel, work_dim: cl_uint, global_work_offset: *const usize, global_work_size: *const usize, suggested_local_work_size: *mut usize) -> cl_int => kernel::get_kernel_suggested_local_work_size;
}

/// The ICD loader's entry point (cl_khr_icd). Vendors are discovered here, at the loader's
/// start-up, without calling back into the loader.
///
/// # Safety
/// Called by the ICD loader with the pointers cl_khr_icd specifies.
#[no_mangle]
pub unsafe extern "C" fn clIcdGetPlatformIDsKHR(
    num_entries: cl_uint,
    platforms: *mut cl_platform_id,
    num_platforms: *mut cl_uint,
) -> cl_int {
    entry::install();
    slots::clGetPlatformIDs(num_entries, platforms, num_platforms)
}

/// Exported for loaders that resolve it by name; the same function as the table's slot.
///
/// # Safety
/// `func_name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn clGetExtensionFunctionAddress(func_name: *const c_char) -> *mut c_void {
    entry::install();
    slots::clGetExtensionFunctionAddress(func_name)
}

/// Exported because ocl-icd asks the library for it directly (for the ICD suffix).
///
/// # Safety
/// The OpenCL contract of `clGetPlatformInfo`.
#[no_mangle]
pub unsafe extern "C" fn clGetPlatformInfo(
    platform: cl_platform_id,
    param_name: cl_platform_info,
    param_value_size: usize,
    param_value: *mut c_void,
    param_value_size_ret: *mut usize,
) -> cl_int {
    entry::install();
    slots::clGetPlatformInfo(
        platform,
        param_name,
        param_value_size,
        param_value,
        param_value_size_ret,
    )
}
