// What the GPU probes (evcost.c, waitlock.c, twoqueue.c) share: the OpenCL headers, a
// monotonic clock in µs, a check that exits on the first failed call, their kernel (each
// item runs `n` dependent multiply-adds, so `n` sets a launch's length), how it is built,
// its calibration, and a thread that reads 4 MiB over and over on a queue of its own.
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

// The kernel `k` of SRC, built for `dev` in `ctx`.
static inline cl_kernel probe_kernel(cl_context ctx, cl_device_id dev) {
  cl_int err;
  cl_program p = clCreateProgramWithSource(ctx, 1, &SRC, NULL, &err);
  CHECK(err);
  CHECK(clBuildProgram(p, 1, &dev, "", NULL, NULL));
  cl_kernel k = clCreateKernel(p, "k", &err);
  CHECK(err);
  CHECK(clReleaseProgram(p));
  return k;
}

// Sets the kernel's `n` (argument 1) so that one launch of `items` items (`local`: the
// local size, or NULL) takes about `ms` on `q`, and returns it.
static inline int calibrate(cl_command_queue q, cl_kernel k, size_t items, const size_t *local,
                            double ms) {
  int iters = 1000;
  for (int c = 0; c < 6; c++) {
    CHECK(clSetKernelArg(k, 1, sizeof iters, &iters));
    double t0 = now_us();
    CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &items, local, 0, NULL, NULL));
    CHECK(clFinish(q));
    double took = now_us() - t0;
    iters = (int)(iters * (ms * 1e3 / (took > 1 ? took : 1)));
    if (iters < 1) iters = 1;
  }
  CHECK(clSetKernelArg(k, 1, sizeof iters, &iters));
  return iters;
}

// What a reader thread (`reader`) reads with, and what it did.
struct reader {
  cl_context ctx;
  cl_device_id dev;
  volatile int running;  // cleared to stop it
  int with_events;       // non-blocking reads, each waited for with clWaitForEvents
  long reads;
  double us;             // total µs in its reads
};

// A thread (`pthread_create(&t, NULL, reader, &r)`) that reads 4 MiB from a buffer on a
// queue of its own of `r->ctx`, blocking (or, `with_events`, non-blocking and waiting for
// the read's event) until `running` is cleared: an application's thread beside another.
static inline void *reader(void *arg) {
  struct reader *r = arg;
  cl_int err;
  cl_command_queue q = clCreateCommandQueueWithProperties(r->ctx, r->dev, NULL, &err);
  CHECK(err);
  size_t size = 4 << 20;
  cl_mem big = clCreateBuffer(r->ctx, CL_MEM_READ_WRITE, size, NULL, &err);
  CHECK(err);
  void *host = malloc(size);
  r->reads = 0;
  r->us = 0;
  while (r->running) {
    double t0 = now_us();
    if (r->with_events) {
      cl_event e;
      CHECK(clEnqueueReadBuffer(q, big, CL_FALSE, 0, size, host, 0, NULL, &e));
      CHECK(clWaitForEvents(1, &e));
      CHECK(clReleaseEvent(e));
    } else {
      CHECK(clEnqueueReadBuffer(q, big, CL_TRUE, 0, size, host, 0, NULL, NULL));
    }
    r->us += now_us() - t0;
    r->reads++;
  }
  free(host);
  CHECK(clReleaseMemObject(big));
  CHECK(clReleaseCommandQueue(q));
  return NULL;
}
// The first GPU of the first platform, a context on it and two queues of that context.
static inline void probe_gpu(cl_device_id *dev, cl_context *ctx, cl_command_queue *q,
                             cl_command_queue *side) {
  cl_platform_id plat;
  cl_int err;
  CHECK(clGetPlatformIDs(1, &plat, NULL));
  CHECK(clGetDeviceIDs(plat, CL_DEVICE_TYPE_GPU, 1, dev, NULL));
  *ctx = clCreateContext(NULL, 1, dev, NULL, NULL, &err);
  CHECK(err);
  *q = clCreateCommandQueueWithProperties(*ctx, *dev, NULL, &err);
  CHECK(err);
  *side = clCreateCommandQueueWithProperties(*ctx, *dev, NULL, &err);
  CHECK(err);
}

static inline int probe_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

// Prints p50, p90 and p99 of `n` samples in µs (sorts them).
static inline void probe_pct(const char *what, double *v, int n) {
  qsort(v, n, sizeof *v, probe_cmp);
  printf("  %-44s p50 %7.1f  p90 %7.1f  p99 %7.1f us (n=%d)\n", what, v[n / 2], v[n * 9 / 10],
         v[n * 99 / 100], n);
}
#endif
