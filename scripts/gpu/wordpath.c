// How fast a word written by the host reaches a running kernel on NVIDIA's OpenCL, by
// way of the call that writes it: the kernel's items spin until a flag equals the
// sample's value, and the host, polling the kernel's event as the submitter does, writes
// the flag 2 ms after the launch by one of several paths, then times the call's return
// and the launch's end (from the call's start). Build: gcc -O2 -o carry/probe/wordpath
// scripts/gpu/wordpath.c -lOpenCL (with CUDA's OpenCL loader on the GPU machine).
#include "probe.h"

static const char *SPIN =
    "__kernel void spin(volatile __global int *flag, __global int *out, int target) {"
    " int i = 0; while (flag[0] != target && i < 200000000) i++;"
    " out[get_global_id(0)] = i; }";

static void poll_end(cl_event e) {
  for (;;) {
    cl_int s;
    CHECK(clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof s, &s, NULL));
    if (s <= CL_COMPLETE) return;
  }
}

int main(void) {
  cl_device_id dev;
  cl_context ctx;
  cl_command_queue q, side;
  probe_gpu(&dev, &ctx, &q, &side);
  cl_int err;
  cl_program p = clCreateProgramWithSource(ctx, 1, &SPIN, NULL, &err);
  CHECK(err);
  CHECK(clBuildProgram(p, 1, &dev, "", NULL, NULL));
  cl_kernel k = clCreateKernel(p, "spin", &err);
  CHECK(err);
  cl_uint cus;
  CHECK(clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cus, &cus, NULL));
  size_t local = 256, items = local * cus * 4;
  cl_mem flag = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64, NULL, &err);
  CHECK(err);
  cl_mem out = clCreateBuffer(ctx, CL_MEM_READ_WRITE, items * 4, NULL, &err);
  CHECK(err);
  cl_mem staging = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64, NULL, &err);
  CHECK(err);
  cl_mem pinbuf = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, 64, NULL, &err);
  CHECK(err);
  int *pinned = clEnqueueMapBuffer(side, pinbuf, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, 64, 0,
                                   NULL, NULL, &err);
  CHECK(err);
  CHECK(clSetKernelArg(k, 0, sizeof flag, &flag));
  CHECK(clSetKernelArg(k, 1, sizeof out, &out));
  const char *names[] = {"write, non-blocking", "write, blocking", "write from pinned",
                         "copy from a device word", "write behind a user event"};
  enum { N = 150 };
  static double call[N], end[N];
  static int src[N * 8];
  int value = 1;
  for (int m = 0; m < 5; m++) {
    for (int s = 0; s < N; s++, value++) {
      int zero = 0;
      CHECK(clEnqueueWriteBuffer(q, flag, CL_TRUE, 0, 4, &zero, 0, NULL, NULL));
      CHECK(clSetKernelArg(k, 2, sizeof value, &value));
      src[value % (N * 8)] = value;
      cl_event ue = NULL;
      if (m == 3) CHECK(clEnqueueWriteBuffer(side, staging, CL_TRUE, 0, 4, &src[value % (N * 8)], 0, NULL, NULL));
      if (m == 4) {
        ue = clCreateUserEvent(ctx, &err);
        CHECK(err);
        CHECK(clEnqueueWriteBuffer(side, flag, CL_FALSE, 0, 4, &src[value % (N * 8)], 1, &ue, NULL));
        CHECK(clFlush(side));
      }
      cl_event e;
      CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &items, &local, 0, NULL, &e));
      CHECK(clFlush(q));
      double t = now_us();
      while (now_us() - t < 2000) {
        cl_int st;
        CHECK(clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
      }
      double t0 = now_us();
      switch (m) {
        case 0:
          CHECK(clEnqueueWriteBuffer(side, flag, CL_FALSE, 0, 4, &src[value % (N * 8)], 0, NULL, NULL));
          CHECK(clFlush(side));
          break;
        case 1:
          CHECK(clEnqueueWriteBuffer(side, flag, CL_TRUE, 0, 4, &src[value % (N * 8)], 0, NULL, NULL));
          break;
        case 2:
          *pinned = value;
          CHECK(clEnqueueWriteBuffer(side, flag, CL_FALSE, 0, 4, pinned, 0, NULL, NULL));
          CHECK(clFlush(side));
          break;
        case 3:
          CHECK(clEnqueueCopyBuffer(side, staging, flag, 0, 0, 4, 0, NULL, NULL));
          CHECK(clFlush(side));
          break;
        case 4:
          CHECK(clSetUserEventStatus(ue, CL_COMPLETE));
          break;
      }
      call[s] = now_us() - t0;
      poll_end(e);
      end[s] = now_us() - t0;
      CHECK(clReleaseEvent(e));
      if (ue) CHECK(clReleaseEvent(ue));
      CHECK(clFinish(side));
    }
    printf("%s:\n", names[m]);
    probe_pct("call returned", call, N);
    probe_pct("launch seen ended", end, N);
  }
  return 0;
}
