//! The names the analysis looks for.

/// Builtins whose value inside a slice differs from the whole launch's: a slice is a
/// launch of its own, with its own offset and size. `get_global_id`, `get_local_id`,
/// `get_local_size`, `get_enqueued_local_size` and `get_work_dim` keep their values,
/// because slices are cut at work-group boundaries and keep the local size (a partial
/// last group stays the last group of the last slice).
/// The order is the bit order of [`super::Geometry`].
pub const GEOMETRY: [&str; 5] = [
    "get_group_id",
    "get_num_groups",
    "get_global_size",
    "get_global_offset",
    "get_global_linear_id",
];

/// Names that make a kernel depend on how its range is cut into work-groups, so a launch
/// with a NULL local size may only be sliced if the local size is pinned for every slice.
const WORK_GROUP_NAMES: &[&str] = &[
    "get_local_id",
    "get_local_size",
    "get_local_linear_id",
    "get_enqueued_local_size",
    "get_group_id",
    "get_num_groups",
    "get_num_sub_groups",
    "get_max_sub_group_size",
    "get_enqueued_num_sub_groups",
    "barrier",
    "wait_group_events",
    "local",
    "__local",
];

const WORK_GROUP_PREFIXES: &[&str] = &[
    "work_group_",
    "sub_group_",
    "get_sub_group_",
    "async_work_group_",
    "intel_sub_group_",
];

/// Names through which a kernel could read the geometry without the builtins: inline
/// assembly (NVIDIA's OpenCL takes PTX, whose `%ctaid` is the group id) and compiler
/// builtins.
const OPAQUE_NAMES: &[&str] = &["asm", "__asm", "__asm__"];
const OPAQUE_PREFIXES: &[&str] = &["__builtin_"];

/// Builtins that only the yielding rewrite replaces: inside a persistent group the real
/// `get_global_id` answers for the persistent grid, not for the virtual group. Their bits
/// follow [`GEOMETRY`]'s.
pub const YIELD_ONLY: [&str; 1] = ["get_global_id"];

/// The bits of [`GEOMETRY`]: what slicing changes.
pub const SLICING: u8 = (1 << GEOMETRY.len()) - 1;
/// The bits of [`GEOMETRY`] and [`YIELD_ONLY`]: what a persistent group changes.
pub const YIELDING: u8 = (1 << (GEOMETRY.len() + YIELD_ONLY.len())) - 1;

pub fn geometry_bit(name: &str) -> Option<u8> {
    GEOMETRY
        .iter()
        .chain(&YIELD_ONLY)
        .position(|g| *g == name)
        .map(|i| 1 << i)
}

/// Names whose calls every work-item of a group must reach together (barriers, work-group
/// and sub-group collectives, asynchronous copies): a persistent group may not let some of
/// its items start the next virtual group while others still wait in one of them.
const SYNC_NAMES: &[&str] = &["barrier", "wait_group_events"];
const SYNC_PREFIXES: &[&str] = &[
    "work_group_",
    "sub_group_",
    "async_work_group_",
    "intel_sub_group_",
];

pub fn is_sync(name: &str) -> bool {
    SYNC_NAMES.contains(&name) || SYNC_PREFIXES.iter().any(|p| name.starts_with(p))
}

pub fn is_work_group_dependent(name: &str) -> bool {
    WORK_GROUP_NAMES.contains(&name) || WORK_GROUP_PREFIXES.iter().any(|p| name.starts_with(p))
}

pub fn is_opaque(name: &str) -> bool {
    OPAQUE_NAMES.contains(&name) || OPAQUE_PREFIXES.iter().any(|p| name.starts_with(p))
}

pub fn is_kernel_keyword(name: &str) -> bool {
    matches!(name, "kernel" | "__kernel")
}

/// C keywords that may precede a parenthesis without naming a function.
pub fn is_keyword(name: &str) -> bool {
    matches!(
        name,
        "if" | "while"
            | "for"
            | "switch"
            | "return"
            | "sizeof"
            | "vec_step"
            | "_Alignof"
            | "__alignof__"
            | "_Static_assert"
            | "__attribute__"
            | "__attribute"
            | "typeof"
            | "__typeof__"
            | "_Generic"
    )
}

/// C++ for OpenCL keywords: such sources (namespaces, classes, templates) are not parsed.
pub fn is_cplusplus(name: &str) -> bool {
    matches!(
        name,
        "namespace" | "template" | "class" | "operator" | "typename" | "using"
    )
}
