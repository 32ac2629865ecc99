// twoqueue: an LP with a second queue beside a paced HP, for the case where a blocking
// transfer of one queue holds NVIDIA's context while a yielding launch of the other runs
// (`docs/design.md`, control words; `api::enqueue::Wait`). Two roles, each its own process:
//   twoqueue lp PLATFORM SECONDS  launches of about 50 ms on queue A, back to back, each
//                                 waited for, while a second thread reads 4 MiB from
//                                 queue B of the same context, blocking, over and over;
//                                 prints its launches a second
//   twoqueue hp PLATFORM SECONDS  a launch of about 0.4 ms every 20 ms, each waited for;
//                                 prints its latency p50 and p99 (ms)
// PLATFORM: a substring of the platform's name (the first that matches). The LP's kernel
// has a known local size (256) and runs long enough to be a yielding launch from its third
// launch on. scripts/gpu/twoqueue.sh runs the pair bare and through SoftPreempt.
//
// Build here: gcc -O2 -o carry/probe/twoqueue scripts/gpu/twoqueue.c -lOpenCL -lpthread
#include "probe.h"

static cl_context ctx;
static cl_device_id dev;
static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 4) {
    fprintf(stderr, "usage: twoqueue lp|hp PLATFORM SECONDS\n");
    return 2;
  }
  int lp = strcmp(argv[1], "lp") == 0;
  double seconds = atof(argv[3]);
  cl_platform_id ps[8];
  cl_uint np = 0;
  CHECK(clGetPlatformIDs(8, ps, &np));
  cl_platform_id plat = NULL;
  for (cl_uint i = 0; i < np && !plat; i++) {
    char name[256];
    CHECK(clGetPlatformInfo(ps[i], CL_PLATFORM_NAME, sizeof name, name, NULL));
    if (strstr(name, argv[2])) plat = ps[i];
  }
  if (!plat) {
    fprintf(stderr, "no platform matches %s\n", argv[2]);
    return 1;
  }
  CHECK(clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL));
  cl_int err;
  ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  CHECK(err);
  cl_command_queue q = clCreateCommandQueueWithProperties(ctx, dev, NULL, &err);
  CHECK(err);
  cl_kernel k = probe_kernel(ctx, dev);
  size_t items = lp ? (size_t)1 << 24 : (size_t)1 << 20;
  size_t local[1] = {256};
  cl_mem buf = clCreateBuffer(ctx, CL_MEM_READ_WRITE, items * 4, NULL, &err);
  CHECK(err);
  CHECK(clSetKernelArg(k, 0, sizeof buf, &buf));
  calibrate(q, k, items, lp ? local : NULL, lp ? 50 : 0.4);
  printf("ready\n");
  double end = now_us() + seconds * 1e6;
  if (lp) {
    struct reader r = {.ctx = ctx, .dev = dev, .running = 1};
    pthread_t th;
    pthread_create(&th, NULL, reader, &r);
    long launches = 0;
    double t0 = now_us();
    while (now_us() < end) {
      CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &items, local, 0, NULL, NULL));
      CHECK(clFinish(q));
      launches++;
    }
    double took = (now_us() - t0) / 1e6;
    r.running = 0;
    pthread_join(th, NULL);
    printf("lp %.2f launches/s, %ld reads\n", launches / took, r.reads);
  } else {
    int cap = (int)(seconds * 60) + 16, n = 0;
    double *lat = malloc(cap * sizeof *lat);
    while (now_us() < end && n < cap) {
      usleep(20000);
      double t0 = now_us();
      CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &items, NULL, 0, NULL, NULL));
      CHECK(clFinish(q));
      lat[n++] = (now_us() - t0) / 1e3;
    }
    qsort(lat, n, sizeof *lat, cmp);
    printf("hp %d requests, p50 %.3f ms, p99 %.3f ms\n", n, lat[n / 2], lat[n * 99 / 100]);
    free(lat);
  }
  return 0;
}
