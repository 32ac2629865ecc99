// waitlock: does a thread waiting for a kernel hold back another thread's small write on
// the same context? The layer asks a yielding launch to stop by writing its yield word
// through a second queue of the launch's context, from its watcher thread, while the
// application's thread is often inside clWaitForEvents on that launch (or a blocking
// read). scripts/gpu/evcost.c showed NVIDIA serializing a context's calls behind another
// thread's blocking reads; this measures the yield's case. Each round: the main thread
// launches a kernel of about KERNEL_MS and waits for it as MODE says; 2 ms in, a second
// thread enqueues a 4-byte write on its own queue, flushes, and waits for that write.
// Printed per mode: how long the write's enqueue, flush and completion took (mean and
// max, µs), and how long before the kernel's own end the write completed (negative: after).
//   w  the main thread blocks in clWaitForEvents (the benchmark LPs, pyopencl's .wait())
//   p  the main thread polls the event's status every 50 µs (no blocking call)
//   r  the main thread blocks in a blocking read queued after the kernel (OpenCV, tinygrad)
//   e  r made non-blocking, then a clWaitForEvents on the read's event (what the layer
//      could turn an LP application's blocking transfers into)
//
// Build here: gcc -O2 -o carry/probe/waitlock scripts/gpu/waitlock.c -lOpenCL -lpthread
// Run on the GPU machine: LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib
//   OCL_ICD_FILENAMES=/lib/libnvidia-opencl.so.1 carry/probe/waitlock 20 20 [MODES]
// (rounds, KERNEL_MS; MODES default "wpre").
#include "probe.h"


static cl_context ctx;
static cl_command_queue q2;
static cl_mem word;

struct writer {
  double start_at, enq, flush, done;  // absolute start; durations in µs
};

static void *write_word(void *arg) {
  struct writer *w = arg;
  while (now_us() < w->start_at) usleep(50);
  int v = 1;
  cl_event e;
  double t0 = now_us();
  CHECK(clEnqueueWriteBuffer(q2, word, CL_FALSE, 0, sizeof v, &v, 0, NULL, &e));
  double t1 = now_us();
  CHECK(clFlush(q2));
  double t2 = now_us();
  CHECK(clWaitForEvents(1, &e));
  double t3 = now_us();
  CHECK(clReleaseEvent(e));
  w->enq = t1 - t0;
  w->flush = t2 - t1;
  w->done = t3;
  return NULL;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int rounds = argc > 1 ? atoi(argv[1]) : 20;
  double kernel_ms = argc > 2 ? atof(argv[2]) : 20;
  const char *modes = argc > 3 ? argv[3] : "wpre";
  cl_platform_id plat;
  cl_device_id dev;
  CHECK(clGetPlatformIDs(1, &plat, NULL));
  CHECK(clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL));
  char name[256];
  CHECK(clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof name, name, NULL));
  cl_int err;
  ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  CHECK(err);
  cl_command_queue q = clCreateCommandQueueWithProperties(ctx, dev, NULL, &err);
  CHECK(err);
  q2 = clCreateCommandQueueWithProperties(ctx, dev, NULL, &err);
  CHECK(err);
  cl_kernel k = probe_kernel(ctx, dev);
  size_t items = 1 << 16;
  cl_mem buf = clCreateBuffer(ctx, CL_MEM_READ_WRITE, items * 4, NULL, &err);
  CHECK(err);
  word = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4, NULL, &err);
  CHECK(err);
  float *host = malloc(items * 4);
  CHECK(clSetKernelArg(k, 0, sizeof buf, &buf));
  calibrate(q, k, items, NULL, kernel_ms);
  printf("device: %s, %d rounds, kernel about %.1f ms\n", name, rounds, kernel_ms);
  for (const char *m = modes; *m; m++) {
    double sum[4] = {0}, max[4] = {0};
    for (int r = 0; r < rounds; r++) {
      cl_event ev;
      struct writer w = {.start_at = now_us() + 2000};
      pthread_t th;
      CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &items, NULL, 0, NULL, &ev));
      CHECK(clFlush(q));
      pthread_create(&th, NULL, write_word, &w);
      if (*m == 'w') {
        CHECK(clWaitForEvents(1, &ev));
      } else if (*m == 'p') {
        cl_int st = CL_QUEUED;
        while (st != CL_COMPLETE) {
          usleep(50);
          CHECK(clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
        }
      } else if (*m == 'e') {
        cl_event re;
        CHECK(clEnqueueReadBuffer(q, buf, CL_FALSE, 0, items * 4, host, 0, NULL, &re));
        CHECK(clFlush(q));
        CHECK(clWaitForEvents(1, &re));
        CHECK(clReleaseEvent(re));
      } else {
        CHECK(clEnqueueReadBuffer(q, buf, CL_TRUE, 0, items * 4, host, 0, NULL, NULL));
      }
      double ended = now_us();
      pthread_join(th, NULL);
      CHECK(clReleaseEvent(ev));
      double v[4] = {w.enq, w.flush, w.done - w.start_at, ended - w.done};
      for (int i = 0; i < 4; i++) {
        sum[i] += v[i];
        if (r == 0 || v[i] > max[i]) max[i] = v[i];
      }
    }
    printf("%c  write enqueue %8.1f (max %8.1f)  flush %8.1f (max %8.1f)  done after %8.1f "
           "(max %8.1f)  before the kernel's end by %8.1f (max %8.1f)  µs\n",
           *m, sum[0] / rounds, max[0], sum[1] / rounds, max[1], sum[2] / rounds, max[2],
           sum[3] / rounds, max[3]);
  }
  free(host);
  return 0;
}
