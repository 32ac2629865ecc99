_Pragma("clang diagnostic ignored \"-Wunknown-warning-option\"") _Pragma("clang diagnostic ignored \"-Wpsabi\"") size_t __sp_group_id_y4118712ec7fc4088(ulong16, uint); size_t __sp_num_groups_y4118712ec7fc4088(ulong16, uint); size_t __sp_global_size_y4118712ec7fc4088(ulong16, uint); size_t __sp_global_offset_y4118712ec7fc4088(ulong16, uint); size_t __sp_global_linear_id_y4118712ec7fc4088(ulong16); size_t __sp_global_id_y4118712ec7fc4088(ulong16, uint); __kernel void k(__global uint* out, ulong16 __sp_geom) {
  size_t l = __sp_global_linear_id_y4118712ec7fc4088(__sp_geom);
  out[l] = (uint)(l * 2654435761u) ^ (uint)__sp_group_id_y4118712ec7fc4088(__sp_geom, 0);
}

_Pragma("clang diagnostic ignored \"-Wunknown-warning-option\"") _Pragma("clang diagnostic ignored \"-Wpsabi\"") 
/* SoftPreempt: the builtins of a virtual group of a yielding launch. */
size_t __sp_global_offset_y4118712ec7fc4088(ulong16 g, uint d) { return (size_t)(d == 0u ? g.s0 : d == 1u ? g.s1 : d == 2u ? g.s2 : 0ul); }
size_t __sp_global_size_y4118712ec7fc4088(ulong16 g, uint d) { return (size_t)(d == 0u ? g.s3 : d == 1u ? g.s4 : d == 2u ? g.s5 : 1ul); }
ulong __sp_local_size_y4118712ec7fc4088(ulong16 g, uint d) { return d == 0u ? g.s6 : d == 1u ? g.s7 : d == 2u ? g.s8 : 1ul; }
size_t __sp_num_groups_y4118712ec7fc4088(ulong16 g, uint d) { ulong l = __sp_local_size_y4118712ec7fc4088(g, d); return (size_t)(((ulong)__sp_global_size_y4118712ec7fc4088(g, d) + l - 1ul) / l); }
size_t __sp_group_id_y4118712ec7fc4088(ulong16 g, uint d) { return (size_t)(d == 0u ? g.sd : d == 1u ? g.se : d == 2u ? g.sf : 0ul); }
size_t __sp_global_id_y4118712ec7fc4088(ulong16 g, uint d) { return d < 3u ? (size_t)((ulong)__sp_global_offset_y4118712ec7fc4088(g, d) + (ulong)__sp_group_id_y4118712ec7fc4088(g, d) * __sp_local_size_y4118712ec7fc4088(g, d) + (ulong)get_local_id(d)) : (size_t)0; }
size_t __sp_global_linear_id_y4118712ec7fc4088(ulong16 g) { return (size_t)((((ulong)__sp_global_id_y4118712ec7fc4088(g, 2u) - (ulong)__sp_global_offset_y4118712ec7fc4088(g, 2u)) * (ulong)__sp_global_size_y4118712ec7fc4088(g, 1u) + ((ulong)__sp_global_id_y4118712ec7fc4088(g, 1u) - (ulong)__sp_global_offset_y4118712ec7fc4088(g, 1u))) * (ulong)__sp_global_size_y4118712ec7fc4088(g, 0u) + ((ulong)__sp_global_id_y4118712ec7fc4088(g, 0u) - (ulong)__sp_global_offset_y4118712ec7fc4088(g, 0u))); }

/* SoftPreempt: the entry of kernel `k` (a yielding launch, one virtual group a group). */
__kernel void __sp_y_k(__global uint* out, ulong16 __sp_yg, __global uint* __sp_yc) {
    __local uint __sp_yt[4];
    const uint __sp_chunk = 16u;
    if (get_local_id(0) == 0 && get_local_id(1) == 0 && get_local_id(2) == 0) {
        const uint __sp_nx = (uint)__sp_num_groups_y4118712ec7fc4088(__sp_yg, 0u);
        const uint __sp_ny = (uint)__sp_num_groups_y4118712ec7fc4088(__sp_yg, 1u);
        const uint __sp_n = __sp_nx * __sp_ny * (uint)__sp_num_groups_y4118712ec7fc4088(__sp_yg, 2u);
        const uint __sp_w = *(volatile __global uint*)(__sp_yc + 0);
        const uint __sp_f = (int)(__sp_w - (uint)__sp_yg.sa) >= 0 ? 0xffffffffu : atomic_add(__sp_yc + 1, __sp_chunk) - (uint)__sp_yg.sb;
        __sp_yt[0] = __sp_f < __sp_n ? min(__sp_n - __sp_f, __sp_chunk) : 0u;
        if (__sp_f < __sp_n) {
            __sp_yt[1] = __sp_f % __sp_nx;
            __sp_yt[2] = __sp_f / __sp_nx % __sp_ny;
            __sp_yt[3] = __sp_f / (__sp_nx * __sp_ny);
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    const uint __sp_c = __sp_yt[0];
    ulong16 __sp_geom = __sp_yg;
    __sp_geom.sd = __sp_yt[1];
    __sp_geom.se = __sp_yt[2];
    __sp_geom.sf = __sp_yt[3];
    for (uint __sp_k = 0u; __sp_k < __sp_c && get_local_id(0) < get_local_size(0); __sp_k++) {
        if (__sp_k > 0u && ++__sp_geom.sd == (ulong)__sp_num_groups_y4118712ec7fc4088(__sp_yg, 0u)) {
            __sp_geom.sd = 0ul;
            if (++__sp_geom.se == (ulong)__sp_num_groups_y4118712ec7fc4088(__sp_yg, 1u)) { __sp_geom.se = 0ul; __sp_geom.sf++; }
        }
{
  size_t l = __sp_global_linear_id_y4118712ec7fc4088(__sp_geom);
  out[l] = (uint)(l * 2654435761u) ^ (uint)__sp_group_id_y4118712ec7fc4088(__sp_geom, 0);
}
    }
}
