// ocvlike: the OpenCV pair's HP request pattern in C, each call timed (mean µs per call),
// to compare the layer's cost per call with OpenCV's own (scripts/gpu/opencv-calls.sh)
// without Python or OpenCV. Per request: two buffers made, a kernel object of 12
// arguments (two buffers and ten scalars, as OpenCV's image kernels take) made and its
// arguments set, a launch, a blocking read, then the kernel and the buffers released.
//
// Build here: gcc -O2 -o carry/probe/ocvlike scripts/gpu/ocvlike.c -lOpenCL
// Run: ocvlike N PLATFORM-SUBSTRING [GAP_MS [EVICT_MB]] (the first platform whose name
// contains it). Between requests: a sleep of GAP_MS (default 0; negative: a busy wait of
// that long, the core kept awake), then EVICT_MB of memory written (default 0). A paced
// client such as the pair's HP (a request every 20 ms) meets the layer's code and data
// cold at each request; a loop back to back meets them warm. E.g. on
// the GPU machine, bare and through SoftPreempt:
//   export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib
//   export SOFTPREEMPT_VENDORS=/lib/libnvidia-opencl.so.1 SOFTPREEMPT_PRIORITY=high
//   OCL_ICD_FILENAMES=/lib/libnvidia-opencl.so.1 carry/probe/ocvlike 5000 NVIDIA
//   OCL_ICD_FILENAMES=$PWD/carry/bin/libsoftpreempt.so:/lib/libnvidia-opencl.so.1
//     carry/probe/ocvlike 5000 SoftPreempt   (the two lines as one command)
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static const char *SRC =
    "__kernel void k(__global const float *a, int as, int ao, int ar, int ac,"
    " __global float *b, int bs, int bo, int br, int bc, float s, float t) {"
    " int i = get_global_id(0); if (i < ar * ac) b[i] = a[i] * s + t; }";

enum { CREATE_BUF, CREATE_KERNEL, SET_ARG, LAUNCH, READ, RELEASE_KERNEL, RELEASE_BUF, CALLS };
static const char *NAMES[CALLS] = {"clCreateBuffer",         "clCreateKernel",
                                   "clSetKernelArg",         "clEnqueueNDRangeKernel",
                                   "clEnqueueReadBuffer",    "clReleaseKernel",
                                   "clReleaseMemObject"};
static double spent[CALLS];
static long calls[CALLS];

// Times one call into spent[] and calls[].
#define TIMED(which, call)           \
  do {                               \
    double t0_ = now_ns();           \
    call;                            \
    spent[which] += now_ns() - t0_;  \
    calls[which]++;                  \
  } while (0)

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 20000;
  const char *want = argc > 2 ? argv[2] : "";
  double gap_ms = argc > 3 ? atof(argv[3]) : 0;
  size_t evict = argc > 4 ? (size_t)atol(argv[4]) << 20 : 0;
  char *junk = evict ? malloc(evict) : NULL;
  cl_platform_id plats[8];
  cl_uint np = 0;
  if (clGetPlatformIDs(8, plats, &np) != CL_SUCCESS || np == 0) {
    fprintf(stderr, "ocvlike: no OpenCL platform\n");
    return 1;
  }
  cl_platform_id plat = plats[0];
  char name[128];
  for (cl_uint i = 0; i < np; i++) {
    clGetPlatformInfo(plats[i], CL_PLATFORM_NAME, sizeof name, name, NULL);
    if (strstr(name, want)) {
      plat = plats[i];
      break;
    }
  }
  clGetPlatformInfo(plat, CL_PLATFORM_NAME, sizeof name, name, NULL);
  cl_device_id dev;
  cl_int err;
  if (clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL) != CL_SUCCESS) {
    fprintf(stderr, "ocvlike: no device on %s\n", name);
    return 1;
  }
  cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  cl_command_queue q = clCreateCommandQueueWithProperties(ctx, dev, NULL, &err);
  cl_program prog = clCreateProgramWithSource(ctx, 1, &SRC, NULL, &err);
  if (clBuildProgram(prog, 1, &dev, "", NULL, NULL) != CL_SUCCESS) {
    fprintf(stderr, "ocvlike: build failed on %s\n", name);
    return 1;
  }
  size_t items = 4096;
  float *host = malloc(items * sizeof(float));
  int dim = 64;
  float scale = 1.0f;
  for (int r = 0; r < n; r++) {
    if (gap_ms > 0) usleep((useconds_t)(gap_ms * 1000));
    if (gap_ms < 0) {
      double until = now_ns() - gap_ms * 1e6;
      while (now_ns() < until) {
      }
    }
    if (junk) memset(junk, r, evict);
    cl_mem a, b;
    cl_kernel k;
    TIMED(CREATE_BUF, a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, items * 4, NULL, &err));
    TIMED(CREATE_BUF, b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, items * 4, NULL, &err));
    TIMED(CREATE_KERNEL, k = clCreateKernel(prog, "k", &err));
    TIMED(SET_ARG, clSetKernelArg(k, 0, sizeof a, &a));
    for (int j = 1; j < 5; j++) TIMED(SET_ARG, clSetKernelArg(k, j, sizeof dim, &dim));
    TIMED(SET_ARG, clSetKernelArg(k, 5, sizeof b, &b));
    for (int j = 6; j < 10; j++) TIMED(SET_ARG, clSetKernelArg(k, j, sizeof dim, &dim));
    TIMED(SET_ARG, clSetKernelArg(k, 10, sizeof scale, &scale));
    TIMED(SET_ARG, clSetKernelArg(k, 11, sizeof scale, &scale));
    TIMED(LAUNCH, clEnqueueNDRangeKernel(q, k, 1, NULL, &items, NULL, 0, NULL, NULL));
    TIMED(READ, clEnqueueReadBuffer(q, b, CL_TRUE, 0, items * 4, host, 0, NULL, NULL));
    TIMED(RELEASE_KERNEL, clReleaseKernel(k));
    TIMED(RELEASE_BUF, clReleaseMemObject(a));
    TIMED(RELEASE_BUF, clReleaseMemObject(b));
  }
  for (int i = 0; i < CALLS; i++)
    printf("%s %-24s %8.3f us\n", name[0] == 'S' ? "SP  " : "bare", NAMES[i],
           spent[i] / calls[i] / 1e3);
  free(host);
  free(junk);
  return 0;
}
