// What waiting costs the host on NVIDIA's OpenCL: the CPU time a thread spends in
// clWaitForEvents over a launch of about 20 ms (does the driver spin or sleep?), and how
// long a 4-byte write of a second queue takes to return, blocking against non-blocking
// with a flush (the yield word's write). Build: gcc -O2 -o carry/probe/waitcpu
// scripts/gpu/waitcpu.c -lOpenCL (with CUDA's OpenCL loader on the GPU machine).
#define _GNU_SOURCE
#include "probe.h"
#include <sys/resource.h>

static double thread_cpu_us(void) {
  struct rusage u;
  getrusage(RUSAGE_THREAD, &u);
  return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e6 + u.ru_utime.tv_usec + u.ru_stime.tv_usec;
}

int main(void) {
  cl_device_id dev;
  cl_context ctx;
  cl_command_queue q, side;
  probe_gpu(&dev, &ctx, &q, &side);
  cl_int err;
  size_t items = 1 << 20;
  cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, items * 4, NULL, &err);
  CHECK(err);
  cl_mem w = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64, NULL, &err);
  CHECK(err);
  cl_kernel k = probe_kernel(ctx, dev);
  CHECK(clSetKernelArg(k, 0, sizeof a, &a));
  calibrate(q, k, items, NULL, 20.0);
  double wall = 0, cpu = 0;
  for (int i = 0; i < 20; i++) {
    cl_event e;
    CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &items, NULL, 0, NULL, &e));
    CHECK(clFlush(q));
    double t0 = now_us(), c0 = thread_cpu_us();
    CHECK(clWaitForEvents(1, &e));
    wall += now_us() - t0;
    cpu += thread_cpu_us() - c0;
    CHECK(clReleaseEvent(e));
  }
  printf("clWaitForEvents over 20 launches: %.1f ms wall, %.1f ms CPU (%.0f%%)\n", wall / 1e3,
         cpu / 1e3, 100 * cpu / wall);
  enum { N = 400 };
  static double blocking[N], nonblocking[N];
  static unsigned vals[N];
  for (int i = 0; i < N; i++) {
    vals[i] = i;
    double t0 = now_us();
    CHECK(clEnqueueWriteBuffer(side, w, CL_TRUE, 0, 4, &vals[i], 0, NULL, NULL));
    blocking[i] = now_us() - t0;
    usleep(500);
    t0 = now_us();
    CHECK(clEnqueueWriteBuffer(side, w, CL_FALSE, 0, 4, &vals[i], 0, NULL, NULL));
    CHECK(clFlush(side));
    nonblocking[i] = now_us() - t0;
    CHECK(clFinish(side));
    usleep(500);
  }
  probe_pct("4-byte write, blocking, returns after", blocking, N);
  probe_pct("4-byte write, non-blocking + flush, returns after", nonblocking, N);
  return 0;
}
