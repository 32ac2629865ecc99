// Build here: gcc -O2 -o carry/probe/evcost scripts/gpu/evcost.c -lOpenCL -lpthread; run on the GPU
// machine: LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib
// OCL_ICD_FILENAMES=/lib/libnvidia-opencl.so.1 carry/probe/evcost 3000 65536 [MODES]
// (MODES: letters, default all; EVCOST_BOTH=1 prints the first, warm-up round too)
// evcost: what the submitter's vendor calls cost per piece, pattern by pattern, on the
// bare driver (no SoftPreempt). Each mode runs N short launches one after another and prints
// the mean µs of each call.
//   A  enqueue(kernel, &ev), flush, wait, release            (a plain client)
//   B  A + clSetEventCallback(ev) that sets a user event      (the submitter's last piece)
//   C  B, but each event released 1 ms after its wait         (deferred release)
//   D  B with a fresh clCloneKernel per launch                 (the submitter's clone)
//   E  D, the clone made and its arg set on another thread     (clone on the app thread)
//   F  A with a wait list of one completed event              (a dependency)
//   G  D, the clone released right after its enqueue          (the event holds its last
//      reference, as the submitter's launch does: is the release the clone's destruction?)
//   H  B on one of 4 clones made once, its args set again     (a pool of spare clones:
//      each launch                                             is the 2x enqueue a first
//                                                              launch's cost?)
//   I  A while another thread does blocking 4 MiB reads on its own queue of the context
//      (the OpenCV LP's application thread beside its submitter)
//   J  B, with that reader too
//   K  A while the other thread reads as in I, but non-blocking, then waits for the read's
//      event (clWaitForEvents): does a blocking transfer's own wait, rather than the
//      transfer, hold the context's other threads? (what the layer could do with an LP
//      application's blocking transfers). I, J and K also print the reader's reads and
//      mean µs a read.
// A mode stops after 5 s, and says how many launches it ran.
// "krel" is clReleaseKernel on the clone after the wait (D, E), "clone" in H the arg sets.
#include "probe.h"

static void CL_CALLBACK on_done(cl_event e, cl_int st, void *data) {
  (void)e;
  (void)st;
  clSetUserEventStatus((cl_event)data, CL_COMPLETE);
}



static cl_context ctx;
static cl_command_queue q;
static cl_kernel kern;
static cl_mem buf;
static int iters = 20;

struct clone_job {
  cl_kernel out;
};

static cl_kernel pool[4];
static struct reader rd_state;

static void *make_clone(void *arg) {
  struct clone_job *j = arg;
  cl_int err;
  j->out = clCloneKernel(kern, &err);
  CHECK(err);
  CHECK(clSetKernelArg(j->out, 1, sizeof(int), &iters));
  return NULL;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int n = argc > 1 ? atoi(argv[1]) : 2000;
  size_t items = argc > 2 ? (size_t)atol(argv[2]) : 65536;
  cl_platform_id plats[8];
  cl_uint np = 0;
  CHECK(clGetPlatformIDs(8, plats, &np));
  cl_device_id dev = NULL;
  for (cl_uint i = 0; i < np && !dev; i++)
    if (clGetDeviceIDs(plats[i], CL_DEVICE_TYPE_ALL, 1, &dev, NULL) != CL_SUCCESS) dev = NULL;
  char name[256];
  CHECK(clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof name, name, NULL));
  printf("device: %s, %d launches of %zu items per mode\n", name, n, items);
  cl_int err;
  ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  CHECK(err);
  q = clCreateCommandQueueWithProperties(ctx, dev, NULL, &err);
  CHECK(err);
  kern = probe_kernel(ctx, dev);
  buf = clCreateBuffer(ctx, CL_MEM_READ_WRITE, items * 4, NULL, &err);
  CHECK(err);
  CHECK(clSetKernelArg(kern, 0, sizeof buf, &buf));
  CHECK(clSetKernelArg(kern, 1, sizeof(int), &iters));
  cl_event done;
  CHECK(clEnqueueMarkerWithWaitList(q, 0, NULL, &done));
  CHECK(clFinish(q));
  for (int i = 0; i < 4; i++) {
    pool[i] = clCloneKernel(kern, &err);
    CHECK(err);
  }
  const char *modes = argc > 3 ? argv[3] : "ABCDEFGHIJK";
  for (int round = 0; round < 2; round++) {
    for (const char *m = modes; *m; m++) {
      double t_clone = 0, t_enq = 0, t_cb = 0, t_flush = 0, t_wait = 0, t_rel = 0, t_krel = 0;
      cl_event pending[64];
      double pending_at[64];
      int np_ = 0;
      pthread_t rd;
      int with_reader = *m == 'I' || *m == 'J' || *m == 'K';
      if (with_reader) {
        rd_state = (struct reader){.ctx = ctx, .dev = dev, .running = 1, .with_events = *m == 'K'};
        pthread_create(&rd, NULL, reader, &rd_state);
      }
      double start = now_us();
      int i;
      for (i = 0; i < n && now_us() - start < 5e6; i++) {
        cl_kernel k = kern;
        double t0 = now_us();
        if (*m == 'D' || *m == 'G') {
          k = clCloneKernel(kern, &err);
          CHECK(err);
        } else if (*m == 'H') {
          k = pool[i % 4];
          CHECK(clSetKernelArg(k, 0, sizeof buf, &buf));
          CHECK(clSetKernelArg(k, 1, sizeof(int), &iters));
        } else if (*m == 'E') {
          pthread_t th;
          struct clone_job j;
          pthread_create(&th, NULL, make_clone, &j);
          pthread_join(th, NULL);
          k = j.out;
        }
        double t1 = now_us();
        cl_event ev;
        CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &items, NULL, *m == 'F' ? 1 : 0,
                                     *m == 'F' ? &done : NULL, &ev));
        double t2 = now_us();
        cl_event user = NULL;
        if (*m == 'G') {
          CHECK(clReleaseKernel(k));
          k = kern;
        }
        if (*m != 'A' && *m != 'F' && *m != 'I' && *m != 'K') {
          user = clCreateUserEvent(ctx, &err);
          CHECK(err);
          CHECK(clSetEventCallback(ev, CL_COMPLETE, on_done, user));
        }
        double t3 = now_us();
        CHECK(clFlush(q));
        double t4 = now_us();
        CHECK(clWaitForEvents(1, &ev));
        double t5 = now_us();
        if (*m == 'C') {
          pending[np_] = ev;
          pending_at[np_++] = t5;
          // Release those retired 1 ms ago (or the oldest when full).
          int keep = 0;
          for (int j = 0; j < np_; j++) {
            if (t5 - pending_at[j] >= 1000 || np_ == 64) {
              CHECK(clReleaseEvent(pending[j]));
            } else {
              pending[keep] = pending[j];
              pending_at[keep++] = pending_at[j];
            }
          }
          np_ = keep;
        } else {
          CHECK(clReleaseEvent(ev));
        }
        double t6 = now_us();
        if (k != kern && *m != 'H') CHECK(clReleaseKernel(k));
        t_krel += now_us() - t6;
        if (user) {
          CHECK(clWaitForEvents(1, &user));
          CHECK(clReleaseEvent(user));
        }
        t_clone += t1 - t0;
        t_enq += t2 - t1;
        t_cb += t3 - t2;
        t_flush += t4 - t3;
        t_wait += t5 - t4;
        t_rel += t6 - t5;
      }
      for (int j = 0; j < np_; j++) CHECK(clReleaseEvent(pending[j]));
      if (with_reader) {
        rd_state.running = 0;
        pthread_join(rd, NULL);
      }
      int ran = i > 0 ? i : 1;
      if (round == 1 || getenv("EVCOST_BOTH"))
        printf("%c %5d  clone %7.2f  enqueue %7.2f  callback %6.2f  flush %6.2f  wait %7.2f  "
               "release %7.2f  krel %7.2f  (µs mean)\n",
               *m, i, t_clone / ran, t_enq / ran, t_cb / ran, t_flush / ran, t_wait / ran,
               t_rel / ran, t_krel / ran);
      if (with_reader && (round == 1 || getenv("EVCOST_BOTH")))
        printf("  the reader: %ld reads, %.1f µs a read\n", rd_state.reads,
               rd_state.reads ? rd_state.us / rd_state.reads : 0.0);
    }
  }
  return 0;
}
