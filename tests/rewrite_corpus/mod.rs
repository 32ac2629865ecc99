//! OpenCL C kernels that read the launch geometry, in the shapes real code uses. Shared by
//! `platform/tests/kernel_rewrite.rs` (the rewrite run directly on the vendor) and
//! `tests/managed_rewrite.rs` (through SoftPreempt, sliced, against the bare vendor).
#![allow(dead_code)]

pub const REDUCE: &str = "
kernel void reduce(global const float* in, global float* out, local float* scratch) {
    size_t lid = get_local_id(0);
    scratch[lid] = in[get_global_id(0) - get_global_offset(0)];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (size_t s = get_local_size(0) / 2; s > 0; s >>= 1) {
        if (lid < s)
            scratch[lid] += scratch[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0)
        out[get_group_id(0)] = scratch[0];
}";

pub const GEMM: &str = "
#define TS 4
kernel void gemm(global const float* A, global const float* B, global float* C, int K) {
    const size_t row = get_local_id(1), col = get_local_id(0);
    const size_t N = get_num_groups(0) * TS; /* columns of C and B */
    const size_t gr = get_group_id(1) * TS + row, gc = get_group_id(0) * TS + col;
    local float As[TS][TS], Bs[TS][TS];
    float acc = 0.0f;
    for (int t = 0; t < K / TS; t++) {
        As[row][col] = A[gr * K + t * TS + col];
        Bs[row][col] = B[(t * TS + row) * N + gc];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TS; k++)
            acc += As[row][k] * Bs[k][col];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    C[gr * N + gc] = acc;
}";

pub const BLUR: &str = "
kernel void blur(global const float* in, global float* out) {
    int x = get_global_id(0) - get_global_offset(0), y = get_global_id(1) - get_global_offset(1);
    int w = get_global_size(0), h = get_global_size(1);
    float s = 0.0f;
    for (int dy = -1; dy <= 1; dy++)
        for (int dx = -1; dx <= 1; dx++)
            s += in[clamp(y + dy, 0, h - 1) * w + clamp(x + dx, 0, w - 1)];
    out[y * w + x] = s;
}";

pub const HEAT: &str = "
kernel void heat(global const float* in, global float* out) {
    size_t x = get_global_id(0) - get_global_offset(0);
    size_t y = get_global_id(1) - get_global_offset(1);
    size_t z = get_global_id(2) - get_global_offset(2);
    size_t nx = get_global_size(0), ny = get_global_size(1), nz = get_global_size(2);
    size_t i = (z * ny + y) * nx + x;
    float c = in[i];
    float xm = x > 0 ? in[i - 1] : c, xp = x + 1 < nx ? in[i + 1] : c;
    float ym = y > 0 ? in[i - nx] : c, yp = y + 1 < ny ? in[i + nx] : c;
    float zm = z > 0 ? in[i - nx * ny] : c, zp = z + 1 < nz ? in[i + nx * ny] : c;
    out[i] = c + 0.125f * (xm + xp + ym + yp + zm + zp - 6.0f * c);
}";

pub const HIST: &str = "
kernel void hist(global const uint* data, uint n, global uint* bins) {
    for (size_t i = get_global_id(0) - get_global_offset(0); i < n; i += get_global_size(0))
        atomic_inc(&bins[data[i] % 16]);
}";

pub const HELPERS: &str = "
#define GID(d) get_group_id(d)
#define ROW_OF(x) group_row(x)
size_t group_row(uint d) { return GID(d) * get_num_groups(0); }
size_t linear_group(void);
size_t pure_helper(size_t x) { return x * 3; }
kernel void helpers(global ulong* out) {
    size_t x = get_global_id(0) - get_global_offset(0), y = get_global_id(1) - get_global_offset(1);
    out[y * get_global_size(0) + x] = linear_group() * 1000 + pure_helper(get_local_id(0));
}
kernel void outer(global ulong* out) { helpers(out); }
size_t linear_group(void) { return ROW_OF(1) + get_group_id(0); }
";

pub const LINEAR: &str = "
kernel void linear(global uint* out) {
    size_t l = get_global_linear_id();
    out[l] = (uint)l ^ ((uint)get_global_id(2) << 16);
}";

pub const DIMS: &str = "
kernel void dims(global ulong* out, uint a, uint b) {
    size_t i = get_global_id(0) - get_global_offset(0);
    out[i * 8 + 0] = get_group_id(0) + 100 * get_num_groups(0);
    out[i * 8 + 1] = get_global_size(0) + 100000 * get_global_offset(0);
    out[i * 8 + 2] = get_group_id(a) + 10 * get_num_groups(a) + 100 * get_global_size(a) + 1000 * get_global_offset(a);
    out[i * 8 + 3] = get_group_id(b) + 10 * get_num_groups(b) + 100 * get_global_size(b) + 1000 * get_global_offset(b);
    out[i * 8 + 4] = get_group_id(1) + 10 * get_num_groups(2) + 100 * get_global_size(1) + 1000 * get_global_offset(2);
    out[i * 8 + 5] = get_work_dim();
    out[i * 8 + 6] = get_global_id(0);
    out[i * 8 + 7] = get_local_id(0);
}";

pub const ATTRS: &str = "
__kernel __attribute__((reqd_work_group_size(8, 1, 1))) void attrs(__global int* o);
size_t later(void);

__kernel __attribute__((reqd_work_group_size(8, 1, 1))) void attrs(__global int* o) {
    o[get_global_id(0) - get_global_offset(0)] = (int)later();
}
kernel void attrs_after(global int* o) __attribute__((reqd_work_group_size(8, 1, 1))) {
    o[get_global_id(0) - get_global_offset(0)] = get_group_id(0) + 100;
}
size_t later(void) { return get_group_id(0) * 7 + get_num_groups(0); }
";

pub const MACROS: &str = "
#define HUNDRED(x) ((x) * 100)
#define NG \\
    get_num_groups(0)
#define GID(d) get_group_id(d)
#define BOTH GID(0) + NG
kernel void macros(global uint* o) {
    // get_global_size(0) in a comment is no use of it
    o[get_global_id(0) - get_global_offset(0)] = HUNDRED(get_group_id(0)) + BOTH + sizeof(\"get_global_size(0)\");
}";

pub const WITH_HEADER: &str = "
#include \"geom.h\"
#include \"geom.h\"
kernel void with_header(global uint* o) {
    o[get_global_id(0) - get_global_offset(0)] = (uint)header_helper(0);
}";
pub const GEOM_H: &str = "
#ifndef GEOM_H
#define GEOM_H
size_t header_helper(uint d) { return get_group_id(d) * 1000 + get_global_size(d); }
#endif
";

pub const NON_UNIFORM: &str = "
kernel void non_uniform(global uint* o) {
    size_t i = get_global_id(0) - get_global_offset(0);
    o[i] = get_group_id(0) * 100 + get_num_groups(0) * 10 + get_local_size(0) + 10000 * get_enqueued_local_size(0);
}";

pub const REDUCE_INT: &str = "
kernel void reduce_int(global const uint* in, global uint* out, local uint* s) {
    size_t l = get_local_id(0);
    s[l] = in[get_global_id(0)];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (size_t k = get_local_size(0) / 2; k > 0; k >>= 1) {
        if (l < k)
            s[l] += s[l + k];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l == 0)
        out[get_group_id(0)] = s[0];
}";

pub const SCAN: &str = "
kernel void scan_group(global const uint* in, global uint* out, local uint* t) {
    size_t l = get_local_id(0), n = get_local_size(0), g = get_global_id(0);
    t[l] = in[g];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (size_t d = 1; d < n; d <<= 1) {
        uint v = l >= d ? t[l - d] : 0u;
        barrier(CLK_LOCAL_MEM_FENCE);
        t[l] += v;
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    out[g] = t[l] + (uint)get_group_id(0) * 1000000u + (uint)get_num_groups(0);
}";

pub const GEMM_INT: &str = "
#define TSI 8
kernel void gemm_int(global const int* A, global const int* B, global int* C, int K) {
    const size_t row = get_local_id(1), col = get_local_id(0);
    const size_t N = get_num_groups(0) * TSI;
    const size_t gr = get_group_id(1) * TSI + row, gc = get_group_id(0) * TSI + col;
    local int As[TSI][TSI], Bs[TSI][TSI];
    int acc = 0;
    for (int t = 0; t < K / TSI; t++) {
        As[row][col] = A[gr * K + t * TSI + col];
        Bs[row][col] = B[(t * TSI + row) * N + gc];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TSI; k++)
            acc += As[row][k] * Bs[k][col];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    C[gr * N + gc] = acc;
}";

pub const TRANSPOSE: &str = "
#define T 8
kernel void transpose(global const uint* in, global uint* out, uint w, uint h) {
    local uint tile[T][T + 1];
    size_t lx = get_local_id(0), ly = get_local_id(1);
    size_t bx = get_group_id(0) * T, by = get_group_id(1) * T;
    tile[ly][lx] = in[(by + ly) * w + bx + lx];
    barrier(CLK_LOCAL_MEM_FENCE);
    out[(bx + ly) * h + by + lx] = tile[lx][ly];
}";

pub const STENCIL_1D: &str = "
kernel void stencil1d(global const int* in, global int* out) {
    int n = (int)get_global_size(0);
    int i = (int)(get_global_id(0) - get_global_offset(0));
    int l = in[max(i - 1, 0)], c = in[i], r = in[min(i + 1, n - 1)];
    out[i] = l - 2 * c + r;
}";

pub const LOCAL_HIST: &str = "
kernel void local_hist(global const uint* data, uint n, global uint* bins) {
    local uint lb[16];
    size_t l = get_local_id(0);
    if (l < 16)
        lb[l] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    size_t stride = get_num_groups(0) * get_local_size(0);
    for (size_t i = get_group_id(0) * get_local_size(0) + l; i < n; i += stride)
        atomic_inc(&lb[data[i] % 16]);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (l < 16)
        atomic_add(&bins[l], lb[l]);
}";

pub const GRID_STRIDE: &str = "
kernel void grid_stride(global const int* x, global int* y, int a, uint n) {
    for (size_t i = get_global_id(0) - get_global_offset(0); i < n; i += get_global_size(0))
        y[i] = a * x[i] + y[i];
}";

pub const GROUP_ATOMIC: &str = "
kernel void group_atomic_sum(global const int* in, global int* out) {
    atomic_add(&out[get_group_id(0)], in[get_global_id(0)]);
}";

pub const BLOCK_ID_2D: &str = "
kernel void block_id_2d(global uint* out, uint w) {
    size_t x = get_global_id(0) - get_global_offset(0), y = get_global_id(1) - get_global_offset(1);
    out[y * w + x] = (uint)(get_group_id(1) * get_num_groups(0) + get_group_id(0));
}";

pub const CHAIN: &str = "
size_t chain_c(uint d) { return get_num_groups(d); }
size_t chain_b(uint d) { return chain_c(d) * 100 + get_group_id(d); }
size_t chain_a(void) { return chain_b(0) + chain_b(1) * 10000; }
kernel void chain(global ulong* out) {
    size_t i = (get_global_id(1) - get_global_offset(1)) * get_global_size(0) + get_global_id(0) - get_global_offset(0);
    out[i] = chain_a();
}";

pub const MACRO_GROUP: &str = "
#define LINEAR_GROUP (get_group_id(1) * get_num_groups(0) + get_group_id(0))
#define IDX(x, y) ((y) * get_global_size(0) + (x))
kernel void macro_group(global uint* out) {
    size_t x = get_global_id(0) - get_global_offset(0), y = get_global_id(1) - get_global_offset(1);
    out[IDX(x, y)] = (uint)LINEAR_GROUP * 7u + (uint)get_local_id(0);
}";

pub const MULTI: &str = "
kernel void multi_plain(global uint* o) { o[get_global_id(0)] = (uint)get_global_id(0) * 3u; }
kernel void multi_gid(global uint* o) { o[get_global_id(0)] = (uint)get_group_id(0); }
kernel void multi_size(global uint* o) { o[get_global_id(0)] = (uint)(get_global_size(0) + get_global_offset(0)); }
";

pub const REQD16: &str = "
__kernel __attribute__((reqd_work_group_size(16, 1, 1)))
void reqd16(__global uint* o) {
    o[get_global_id(0)] = (uint)(get_group_id(0) * 16 + get_local_id(0)) ^ ((uint)get_num_groups(0) << 20);
}";

pub const OFFSETS: &str = "
kernel void offsets(global uint* o) {
    o[get_global_id(0)] = (uint)(get_global_offset(0) * 1000 + get_global_id(0));
}";

pub const COORDS: &str = "
kernel void coords(global float* o) {
    size_t x = get_global_id(0) - get_global_offset(0), y = get_global_id(1) - get_global_offset(1);
    float u = (float)x / (float)get_global_size(0);
    float v = (float)y / (float)get_global_size(1);
    o[y * get_global_size(0) + x] = u * 2.0f - v;
}";

pub const MANDEL: &str = "
kernel void mandel(global uint* o) {
    size_t x = get_global_id(0) - get_global_offset(0), y = get_global_id(1) - get_global_offset(1);
    size_t w = get_global_size(0), h = get_global_size(1);
    float cr = -2.0f + 3.0f * (float)x / (float)w, ci = -1.5f + 3.0f * (float)y / (float)h;
    float zr = 0.0f, zi = 0.0f;
    uint it = 0;
    while (it < 64u && zr * zr + zi * zi < 4.0f) {
        float t = zr * zr - zi * zi + cr;
        zi = 2.0f * zr * zi + ci;
        zr = t;
        it++;
    }
    o[y * w + x] = it;
}";

pub const GROUP_SORT: &str = "
kernel void group_sort(global const uint* in, global uint* out, local uint* t) {
    size_t l = get_local_id(0), n = get_local_size(0);
    t[l] = in[get_global_id(0)];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (size_t p = 0; p < n; p++) {
        if ((l & 1) == (p & 1) && l + 1 < n) {
            uint a = t[l], b = t[l + 1];
            if (a > b) {
                t[l] = b;
                t[l + 1] = a;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    out[get_group_id(0) * n + l] = t[l] + (uint)get_num_groups(0);
}";

pub const ROW_SUM: &str = "
kernel void row_sum(global const int* m, global int* out, int cols) {
    size_t r = get_global_id(0) - get_global_offset(0);
    int s = 0;
    for (int c = 0; c < cols; c++)
        s += m[r * cols + c];
    out[r] = s * (int)get_global_size(0);
}";

pub const LINEAR_2D: &str = "
kernel void linear2d(global uint* out) {
    size_t l = get_global_linear_id();
    out[l] = (uint)l * 3u + (uint)get_global_id(1);
}";

pub const GROUPS_3D: &str = "
kernel void groups3d(global uint* out) {
    size_t x = get_global_id(0) - get_global_offset(0), y = get_global_id(1) - get_global_offset(1), z = get_global_id(2) - get_global_offset(2);
    size_t i = (z * get_global_size(1) + y) * get_global_size(0) + x;
    out[i] = (uint)(((get_group_id(2) * get_num_groups(1) + get_group_id(1)) * get_num_groups(0) + get_group_id(0)) * 64
        + get_local_id(0) + get_local_id(1) * 4 + get_local_id(2) * 16);
}";

pub const MATVEC: &str = "
kernel void matvec(global const int* m, global const int* v, global int* out, int cols, local int* s) {
    size_t row = get_group_id(0), l = get_local_id(0), n = get_local_size(0);
    int acc = 0;
    for (size_t c = l; c < (size_t)cols; c += n)
        acc += m[row * cols + c] * v[c];
    s[l] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (l == 0) {
        int t = 0;
        for (size_t i = 0; i < n; i++)
            t += s[i];
        out[row] = t;
    }
}";

pub const WITH_STRUCT: &str = "
typedef struct { int scale; int bias; } params_t;
int apply(params_t p, int x) { return x * p.scale + p.bias + (int)get_num_groups(0); }
kernel void with_struct(global int* o, params_t p) {
    o[get_global_id(0) - get_global_offset(0)] = apply(p, (int)get_group_id(0));
}";

pub const VEC4: &str = "
kernel void vec4(global uint4* o) {
    size_t i = get_global_id(0) - get_global_offset(0);
    o[i] = (uint4)((uint)get_group_id(0), (uint)get_num_groups(0), (uint)get_global_size(0), (uint)i);
}";

/// Builds natively, but its rewrite does not: the macro turns the hidden `ulong16`
/// parameter into a `float`, which has no `.s9`. (Legal if odd: `ulong16` is a type name,
/// not a keyword.)
pub const FALLBACK: &str = "
#define ulong16 float
kernel void fallback(global uint* o) {
    o[get_global_id(0)] = (uint)(get_group_id(0) * 1000 + get_num_groups(0));
}";

/// [`FALLBACK`] without the macro.
pub const FALLBACK_CONTROL: &str = "
kernel void fallback(global uint* o) {
    o[get_global_id(0)] = (uint)(get_group_id(0) * 1000 + get_num_groups(0));
}";

/// Compiled with the header [`GROUPS_H`] (`clCompileProgram`), then linked.
pub const COMPILED: &str = "
#include \"groups.h\"
kernel void compiled(global uint* o) {
    o[get_global_id(0) - get_global_offset(0)] = (uint)(GROUP_LINEAR * 10u + SIZE0);
}";
pub const GROUPS_H: &str = "
#define GROUP_LINEAR (get_group_id(1) * get_num_groups(0) + get_group_id(0))
#define SIZE0 get_global_size(0)
";

/// A program with a deliberate error on line 7 that reads the geometry (through a macro
/// and a helper), so it would be rewritten: build logs must name the same line either way.
pub const BROKEN: &str = "#define G \\\n  get_group_id(0)\n\nsize_t h(void) { return G; }\nkernel void broken(global int* o) {\n    o[0] = h();\n    o[1] = undefined_name;\n}\n";

/// The line of the first error in a build log (`<source>:LINE:COL: error: ...`).
pub fn error_line(log: &str) -> usize {
    let line = log
        .lines()
        .find(|l| l.contains("error"))
        .unwrap_or_else(|| panic!("no error in the build log:\n{log}"));
    line.split(':')
        .find_map(|f| f.trim().parse().ok())
        .unwrap_or_else(|| panic!("no line number in: {line}"))
}
