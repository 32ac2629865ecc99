/* Builds the OpenCL C behind the PTX fixtures of platform/src/core/ptx/fixtures on the first
 * GPU of the first platform and writes each program's binary (NVIDIA's PTX) to
 * OUTDIR/<name>.ptx, so the hand-written fixtures can be replaced by the compiler's own.
 * Usage: ptx-dump OUTDIR   (link with -lOpenCL) */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>

static const char *VADD =
    "kernel void vadd(global const float* a, global const float* b, global float* c, int n) {\n"
    "    int i = get_global_id(0); if (i < n) c[i] = a[i] + b[i]; }\n";
static const char *GEOMETRY =
    "kernel void group_ids(global uint* o) { o[get_global_id(0)] = get_group_id(0); }\n"
    "kernel void num_groups(global uint* o) { o[get_global_id(0)] = get_num_groups(0); }\n"
    "kernel void global_size(global uint* o) { o[get_global_id(0)] = get_global_size(0); }\n"
    "kernel void global_offset(global uint* o) { o[get_global_id(0)] = get_global_offset(0); }\n"
    "kernel void plain_2d(global float* o, int w) {\n"
    "    o[get_global_id(1) * w + get_global_id(0)] *= 2.0f; }\n";
static const char *REDUCE =
    "int helper_gid(void) { return get_global_id(0); }\n"
    "__attribute__((noinline)) uint block(void) { return get_group_id(0); }\n"
    "kernel void block_sum(global const int* in, global int* out, local int* tmp) {\n"
    "    size_t l = get_local_id(0); tmp[l] = in[helper_gid()];\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    if (l == 0) { int s = 0; for (size_t i = 0; i < get_local_size(0); i++) s += tmp[i];\n"
    "                  atomic_add(out, s); } }\n"
    "kernel void per_block(global uint* o) { o[get_global_id(0)] = block(); }\n";

static int dump(cl_context ctx, cl_device_id dev, const char *name, const char *src,
                const char *dir) {
    cl_int err;
    cl_program p = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    if (err) return fprintf(stderr, "%s: create %d\n", name, err), 1;
    err = clBuildProgram(p, 1, &dev, "", NULL, NULL);
    if (err) {
        char log[16384] = {0};
        clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
        return fprintf(stderr, "%s: build %d\n%s\n", name, err, log), 1;
    }
    size_t size = 0;
    clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, NULL);
    unsigned char *bin = malloc(size);
    clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.ptx", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return perror(path), 1;
    fwrite(bin, 1, size, f);
    fclose(f);
    printf("%s: %zu bytes\n", path, size);
    free(bin);
    clReleaseProgram(p);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2) return fprintf(stderr, "usage: ptx-dump OUTDIR\n"), 2;
    cl_platform_id plat;
    cl_device_id dev;
    cl_int err;
    if (clGetPlatformIDs(1, &plat, NULL) || clGetDeviceIDs(plat, CL_DEVICE_TYPE_GPU, 1, &dev, NULL))
        return fprintf(stderr, "no GPU\n"), 1;
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    if (err) return fprintf(stderr, "context %d\n", err), 1;
    return dump(ctx, dev, "vadd", VADD, argv[1]) | dump(ctx, dev, "geometry", GEOMETRY, argv[1]) |
           dump(ctx, dev, "reduce", REDUCE, argv[1]);
}
