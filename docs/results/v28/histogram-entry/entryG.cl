#ifndef kercn
#define kercn 1
#endif

#ifndef T
#define T uchar
#endif

#define noconvert

_Pragma("clang diagnostic ignored \"-Wunknown-warning-option\"") _Pragma("clang diagnostic ignored \"-Wpsabi\"") size_t __sp_group_id_yf474c185d080606c(ulong16, uint); size_t __sp_num_groups_yf474c185d080606c(ulong16, uint); size_t __sp_global_size_yf474c185d080606c(ulong16, uint); size_t __sp_global_offset_yf474c185d080606c(ulong16, uint); size_t __sp_global_linear_id_yf474c185d080606c(ulong16); size_t __sp_global_id_yf474c185d080606c(ulong16, uint); __kernel void calculate_histogram(__global const uchar * src, int src_step, int src_offset, int src_rows, int src_cols,
                                  __global uchar * histptr, int total, ulong16 __sp_geom)
{
    int lid = get_local_id(0);
    int id = __sp_global_id_yf474c185d080606c(__sp_geom, 0) * kercn;
    int gid = __sp_group_id_yf474c185d080606c(__sp_geom, 0);

    __local int localhist[BINS];

    #pragma unroll
    for (int i = lid; i < BINS; i += WGS)
        localhist[i] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);

    int src_index;

    for (int grain = HISTS_COUNT * WGS * kercn; id < total; id += grain)
    {
#ifdef HAVE_SRC_CONT
        src_index = id;
#else
        src_index = mad24(id / src_cols, src_step, src_offset + id % src_cols);
#endif

#if kercn == 1
        atomic_inc(localhist + convert_int(src[src_index]));
#elif kercn == 4
        int value = *(__global const int *)(src + src_index);
        atomic_inc(localhist + (value & 0xff));
        atomic_inc(localhist + ((value >> 8) & 0xff));
        atomic_inc(localhist + ((value >> 16) & 0xff));
        atomic_inc(localhist + ((value >> 24) & 0xff));
#endif
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    __global int * hist = (__global int *)(histptr + gid * BINS * (int)sizeof(int));
    #pragma unroll
    for (int i = lid; i < BINS; i += WGS)
        hist[i] = localhist[i];
}

_Pragma("clang diagnostic ignored \"-Wunknown-warning-option\"") _Pragma("clang diagnostic ignored \"-Wpsabi\"") 
/* SoftPreempt: the builtins of a virtual group of a yielding launch. */
size_t __sp_global_offset_yf474c185d080606c(ulong16 g, uint d) { return (size_t)(d == 0u ? g.s0 : d == 1u ? g.s1 : d == 2u ? g.s2 : 0ul); }
size_t __sp_global_size_yf474c185d080606c(ulong16 g, uint d) { return (size_t)(d == 0u ? g.s3 : d == 1u ? g.s4 : d == 2u ? g.s5 : 1ul); }
ulong __sp_local_size_yf474c185d080606c(ulong16 g, uint d) { return d == 0u ? g.s6 : d == 1u ? g.s7 : d == 2u ? g.s8 : 1ul; }
size_t __sp_num_groups_yf474c185d080606c(ulong16 g, uint d) { ulong l = __sp_local_size_yf474c185d080606c(g, d); return (size_t)(((ulong)__sp_global_size_yf474c185d080606c(g, d) + l - 1ul) / l); }
size_t __sp_group_id_yf474c185d080606c(ulong16 g, uint d) { return (size_t)(d == 0u ? g.sd : d == 1u ? g.se : d == 2u ? g.sf : 0ul); }
size_t __sp_global_id_yf474c185d080606c(ulong16 g, uint d) { return d < 3u ? (size_t)((ulong)__sp_global_offset_yf474c185d080606c(g, d) + (ulong)__sp_group_id_yf474c185d080606c(g, d) * __sp_local_size_yf474c185d080606c(g, d) + (ulong)get_local_id(d)) : (size_t)0; }
size_t __sp_global_linear_id_yf474c185d080606c(ulong16 g) { return (size_t)((((ulong)__sp_global_id_yf474c185d080606c(g, 2u) - (ulong)__sp_global_offset_yf474c185d080606c(g, 2u)) * (ulong)__sp_global_size_yf474c185d080606c(g, 1u) + ((ulong)__sp_global_id_yf474c185d080606c(g, 1u) - (ulong)__sp_global_offset_yf474c185d080606c(g, 1u))) * (ulong)__sp_global_size_yf474c185d080606c(g, 0u) + ((ulong)__sp_global_id_yf474c185d080606c(g, 0u) - (ulong)__sp_global_offset_yf474c185d080606c(g, 0u))); }

/* SoftPreempt: the entry of kernel `calculate_histogram` (a yielding launch, one virtual group a group). */
__kernel void __sp_y_calculate_histogram(__global const uchar * src, int src_step, int src_offset, int src_rows, int src_cols,
                                  __global uchar * histptr, int total, ulong16 __sp_yg, __global uint* __sp_yc)
{
    __local int localhist[BINS];
    __local uint __sp_yt[4];
    if (get_local_id(0) == 0 && get_local_id(1) == 0 && get_local_id(2) == 0) {
        const uint __sp_nx = (uint)__sp_num_groups_yf474c185d080606c(__sp_yg, 0u);
        const uint __sp_ny = (uint)__sp_num_groups_yf474c185d080606c(__sp_yg, 1u);
        const uint __sp_n = __sp_nx * __sp_ny * (uint)__sp_num_groups_yf474c185d080606c(__sp_yg, 2u);
        const uint __sp_w = *(volatile __global uint*)(__sp_yc + 0);
        const uint __sp_f = (int)(__sp_w - (uint)__sp_yg.sa) >= 0 ? 0xffffffffu : atomic_add(__sp_yc + 1, 1u) - (uint)__sp_yg.sb;
        __sp_yt[0] = __sp_f < __sp_n ? 1u : 0u;
        if (__sp_f < __sp_n) {
            __sp_yt[1] = __sp_f % __sp_nx;
            __sp_yt[2] = __sp_f / __sp_nx % __sp_ny;
            __sp_yt[3] = __sp_f / (__sp_nx * __sp_ny);
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint __sp_i = 0u; __sp_i < __sp_yt[0]; ++__sp_i) {
    ulong16 __sp_geom = __sp_yg;
    __sp_geom.sd = __sp_yt[1];
    __sp_geom.se = __sp_yt[2];
    __sp_geom.sf = __sp_yt[3];
{
    int lid = get_local_id(0);
    int id = __sp_global_id_yf474c185d080606c(__sp_geom, 0) * kercn;
    int gid = __sp_group_id_yf474c185d080606c(__sp_geom, 0);

    

    #pragma unroll
    for (int i = lid; i < BINS; i += WGS)
        localhist[i] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);

    int src_index;

    for (int grain = HISTS_COUNT * WGS * kercn; id < total; id += grain)
    {
#ifdef HAVE_SRC_CONT
        src_index = id;
#else
        src_index = mad24(id / src_cols, src_step, src_offset + id % src_cols);
#endif

#if kercn == 1
        atomic_inc(localhist + convert_int(src[src_index]));
#elif kercn == 4
        int value = *(__global const int *)(src + src_index);
        atomic_inc(localhist + (value & 0xff));
        atomic_inc(localhist + ((value >> 8) & 0xff));
        atomic_inc(localhist + ((value >> 16) & 0xff));
        atomic_inc(localhist + ((value >> 24) & 0xff));
#endif
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    __global int * hist = (__global int *)(histptr + gid * BINS * (int)sizeof(int));
    #pragma unroll
    for (int i = lid; i < BINS; i += WGS)
        hist[i] = localhist[i];
}
    }
}
