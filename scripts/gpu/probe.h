// What the GPU probes (evcost.c, waitlock.c) share: the OpenCL headers, a monotonic clock
// in µs, a check that exits on the first failed call, and their kernel (each item runs
// `n` dependent multiply-adds, so `n` sets a launch's length).
#ifndef SOFTPREEMPT_PROBE_H
#define SOFTPREEMPT_PROBE_H
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static inline double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

#define CHECK(x)                                                       \
  do {                                                                 \
    cl_int rc_ = (x);                                                  \
    if (rc_ != CL_SUCCESS) {                                           \
      fprintf(stderr, "%s:%d %s = %d\n", __FILE__, __LINE__, #x, rc_); \
      exit(1);                                                         \
    }                                                                  \
  } while (0)

static const char *SRC =
    "__kernel void k(__global float *a, int n) { int i = get_global_id(0);"
    " float v = a[i]; for (int j = 0; j < n; j++) v = v * 1.0001f + 0.5f; a[i] = v; }";
#endif
