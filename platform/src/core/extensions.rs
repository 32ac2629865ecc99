//! Which extensions SoftPreempt advertises, and which extension functions it answers for.
//!
//! An extension stays in the lists when everything it adds is either kernel-language
//! only, plain enums on queries we forward unchanged, or entry points we forward. An
//! extension with entry points we do not forward is dropped: advertising it would send the
//! application to functions that bypass the layer (a leaked inner handle in disguise).

/// Added by the layer to the platform's list.
pub const PLATFORM_OURS: &[&str] = &["cl_khr_icd", "cl_khr_priority_hints"];
/// Added by the layer to every device's list (priorities are honoured for every device).
pub const DEVICE_OURS: &[&str] = &["cl_khr_priority_hints"];

/// Extensions whose API entry points are NOT forwarded (or that make no sense through a
/// layer); dropped from every list.
const NOT_FORWARDED: &[&str] = &[
    "cl_khr_gl_sharing",
    "cl_khr_gl_event",
    "cl_khr_egl_image",
    "cl_khr_egl_event",
    "cl_khr_d3d10_sharing",
    "cl_khr_d3d11_sharing",
    "cl_khr_dx9_media_sharing",
    "cl_khr_terminate_context",
    "cl_khr_command_buffer",
    "cl_khr_command_buffer_multi_device",
    "cl_khr_command_buffer_mutable_dispatch",
    "cl_khr_semaphore",
    "cl_khr_external_semaphore",
    "cl_khr_external_semaphore_sync_fd",
    "cl_khr_external_semaphore_opaque_fd",
    "cl_khr_external_memory",
    "cl_khr_external_memory_opaque_fd",
    "cl_khr_external_memory_dma_buf",
    "cl_khr_external_memory_dx",
    "cl_khr_gl_msaa_sharing",
    "cl_khr_gl_depth_images",
];

/// Vendor extensions known to add only enums or kernel-language features.
const VENDOR_ENUM_ONLY: &[&str] = &[
    "cl_nv_device_attribute_query",
    "cl_nv_pragma_unroll",
    "cl_nv_compiler_options",
    "cl_amd_device_attribute_query",
    "cl_ext_float_atomics",
    "cl_ext_atomic_counters_32",
    "cl_ext_atomic_counters_64",
    "cl_ext_cxx_for_opencl",
    "cl_ext_image_raw10_raw12",
    "cl_ext_image_unorm_int_2_101010",
    "cl_intel_subgroups",
    "cl_intel_subgroups_short",
    "cl_intel_subgroups_char",
    "cl_intel_subgroups_long",
    "cl_intel_required_subgroup_size",
    "cl_intel_spirv_subgroups",
    "cl_intel_unified_shared_memory_preview_disabled",
    "cl_arm_integer_dot_product_int8",
    "cl_arm_printf",
    "cl_arm_non_uniform_work_group_size",
];

/// Whether an inner extension is kept in SoftPreempt's lists.
pub fn keep(name: &str) -> bool {
    if NOT_FORWARDED.contains(&name) {
        return false;
    }
    // Khronos extensions not listed above add language features or enums only.
    name.starts_with("cl_khr_") || VENDOR_ENUM_ONLY.contains(&name)
}

/// A space-separated inner list, filtered, with `add` appended where missing.
pub fn filter_list(inner: &str, add: &[&'static str]) -> String {
    let mut v: Vec<&str> = inner.split_ascii_whitespace().filter(|e| keep(e)).collect();
    for a in add {
        if !v.contains(a) {
            v.push(a);
        }
    }
    v.join(" ")
}

/// Extension entry points we answer for in `clGetExtensionFunctionAddress*`, each with
/// the dispatch slot that implements it.
pub const FUNCTIONS: &[(&str, &str)] = &[
    ("clIcdGetPlatformIDsKHR", ""),
    ("clGetKernelSubGroupInfoKHR", "clGetKernelSubGroupInfoKHR"),
    ("clCreateSubDevicesEXT", "clCreateSubDevicesEXT"),
    ("clRetainDeviceEXT", "clRetainDeviceEXT"),
    ("clReleaseDeviceEXT", "clReleaseDeviceEXT"),
    (
        "clCreateCommandQueueWithPropertiesKHR",
        "clCreateCommandQueueWithProperties",
    ),
    ("clCreateProgramWithILKHR", "clCreateProgramWithIL"),
    (
        "clGetKernelSuggestedLocalWorkSizeKHR",
        "clGetKernelSuggestedLocalWorkSize",
    ),
];

/// The extension that must be present for a function to be answered.
pub fn extension_of(func: &str) -> Option<&'static str> {
    Some(match func {
        "clIcdGetPlatformIDsKHR" => "cl_khr_icd",
        "clGetKernelSubGroupInfoKHR" => "cl_khr_subgroups",
        "clCreateSubDevicesEXT" | "clRetainDeviceEXT" | "clReleaseDeviceEXT" => {
            "cl_ext_device_fission"
        }
        "clCreateCommandQueueWithPropertiesKHR" => "cl_khr_create_command_queue",
        "clCreateProgramWithILKHR" => "cl_khr_il_program",
        "clGetKernelSuggestedLocalWorkSizeKHR" => "cl_khr_suggested_local_work_size",
        _ => return None,
    })
}
