// Build here: gcc -O2 -o carry/probe/hpevent scripts/gpu/hpevent.c -lOpenCL -lpthread; run on
// the GPU machine: LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib
// OCL_ICD_FILENAMES=/lib/libnvidia-opencl.so.1 carry/probe/hpevent [SAMPLES] [LP_MS] [MODES]
//   [LP_MODES]
// hpevent: does what either process asks of the driver around its launches change how soon
// NVIDIA gives the device to a high-priority process next to another one's long kernels?
// Bare driver, two processes: an LP child (this program again, exec'd) launching LP_MS
// kernels back to back, and the HP (this process) launching a 0.45 ms kernel every 20 ms,
// then clFinish, timing each. For each LP mode a fresh LP child:
//   f  no event, clFinish                         (an application's plain loop)
//   e  an event, clFlush, clWaitForEvents         (SoftPreempt's submitter)
//   g  an event, clFinish
//   t  e, the launch enqueued and flushed by a second thread while the first waits for
//      its event (the application's thread and the submitter)
//   c  an event with a CL_COMPLETE callback that signals a condition variable, waited for
//   p  an event, clFlush, its status polled every 100 µs
//   m  no event; a marker after it with an event, clFlush, clWaitForEvents(marker)
//   b  as m with a barrier (clEnqueueBarrierWithWaitList) instead of the marker
//   r  no event; a 4-byte non-blocking read after it with an event, waited for
//   k  no event; a 1-item kernel after it with an event, waited for
//   q  no event, clFlush, clFinish on a second thread while the first joins it
//   w  f, and a thread of its own with a second queue that writes a 4-byte word of a
//      buffer (non-blocking, flushed, then waited for) each time the HP signals (a
//      SoftPreempt yield request written by a vendor call, to a kernel that ignores it)
// The HP signals the LP's writer (mode w) before every launch: at once (HP modes N, E, ...)
// or, HP mode D, 200 µs before its enqueue (a handshake that expired).
// The HP's modes, SAMPLES launches each, next to each LP mode:
//   N  no event                                   (an application's plain launch)
//   E  an event asked for, released after clFinish
//   C  E + clSetEventCallback(CL_COMPLETE) with an empty callback
//   Q  E + clGetEventInfo(EXECUTION_STATUS) right after the enqueue
//   F  N + clFlush right after the enqueue
//   W  E, waited for with clWaitForEvents instead of clFinish
//   A  N, the HP's kernel on 64 items instead of 65536 (a tiny kernel)
//   S  N, launched 100, 400, 700 or 1000 µs (in turn) after the LP's next submission
//      (the LP child reports each one; one HP launch per LP launch): what a submission in
//      the low context just before the HP's launch costs it
// Prints each mode's HP p50/p99 (µs, enqueue to clFinish return) and the LP's launches.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include "probe.h"

static void CL_CALLBACK nothing(cl_event e, cl_int st, void *data) {
  (void)e;
  (void)st;
  (void)data;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

// A context on `dev` (`*ctx`), its queue (`*q`), and the probe kernel with a buffer of
// `items` floats (`*buf`) as its argument 0.
static cl_kernel probe_setup(cl_device_id dev, size_t items, cl_context *ctx, cl_command_queue *q,
                             cl_mem *buf) {
  cl_int err;
  *ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  CHECK(err);
  *q = clCreateCommandQueueWithProperties(*ctx, dev, NULL, &err);
  CHECK(err);
  cl_kernel k = probe_kernel(*ctx, dev);
  *buf = clCreateBuffer(*ctx, CL_MEM_READ_WRITE, items * 4, NULL, &err);
  CHECK(err);
  CHECK(clSetKernelArg(k, 0, sizeof *buf, buf));
  return k;
}

static cl_device_id first_device(void) {
  cl_platform_id plat;
  cl_device_id dev;
  CHECK(clGetPlatformIDs(1, &plat, NULL));
  CHECK(clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL));
  return dev;
}

// The LP child: back-to-back LP_MS launches until killed; writes its launch count to `fd`.
static volatile sig_atomic_t lp_stop = 0;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int done_flag;
static void CL_CALLBACK signal_done(cl_event e, cl_int st, void *data) {
  (void)e;
  (void)st;
  (void)data;
  pthread_mutex_lock(&mu);
  done_flag = 1;
  pthread_cond_signal(&cv);
  pthread_mutex_unlock(&mu);
}
struct lp_job {
  cl_command_queue q;
  cl_kernel k;
  size_t items;
  cl_event ev;
};
static void *finish_on_thread(void *arg) {
  CHECK(clFinish(((struct lp_job *)arg)->q));
  return NULL;
}
static void *enqueue_on_thread(void *arg) {
  struct lp_job *j = arg;
  CHECK(clEnqueueNDRangeKernel(j->q, j->k, 1, NULL, &j->items, NULL, 0, NULL, &j->ev));
  CHECK(clFlush(j->q));
  return NULL;
}
static void on_term(int s) {
  (void)s;
  lp_stop = 1;
}

// Mode w's writer: a word written in the LP's context for each byte read from `sig_fd`.
struct writer_job {
  cl_context ctx;
  cl_device_id dev;
  int sig_fd;
};
static void *writer(void *arg) {
  struct writer_job *w = arg;
  cl_int err;
  cl_command_queue q2 = clCreateCommandQueueWithProperties(w->ctx, w->dev, NULL, &err);
  CHECK(err);
  cl_mem word = clCreateBuffer(w->ctx, CL_MEM_READ_WRITE, 4, NULL, &err);
  CHECK(err);
  static cl_uint v = 0;
  char c;
  while (read(w->sig_fd, &c, 1) == 1) {
    v++;
    cl_event e;
    CHECK(clEnqueueWriteBuffer(q2, word, CL_FALSE, 0, 4, &v, 0, NULL, &e));
    CHECK(clFlush(q2));
    CHECK(clWaitForEvents(1, &e));
    CHECK(clReleaseEvent(e));
  }
  return NULL;
}

static int sig_read_fd = -1;
// Mode S: the LP child writes a byte here after each submission (non-blocking).
static int sub_write_fd = -1;
static void submitted(void) {
  if (sub_write_fd >= 0 && write(sub_write_fd, "x", 1) < 0) {
  }
}

static void lp_child(char mode, double ms, int fd) {
  signal(SIGTERM, on_term);
  cl_device_id dev = first_device();
  cl_int err;
  cl_context ctx;
  cl_command_queue q;
  cl_mem buf;
  size_t items = 1 << 22;
  cl_kernel k = probe_setup(dev, items, &ctx, &q, &buf);
  int iters = calibrate(q, k, items, NULL, ms);
  // The completion kernel of mode k: the same kernel, one item, few iterations.
  cl_kernel k1 = clCloneKernel(k, &err);
  CHECK(err);
  int few = 1;
  CHECK(clSetKernelArg(k1, 1, sizeof few, &few));
  (void)iters;
  size_t one = 1;
  float word;
  long n = 0;
  if (mode == 'w') {
    static struct writer_job wj;
    wj.ctx = ctx;
    wj.dev = dev;
    wj.sig_fd = sig_read_fd;
    pthread_t th;
    pthread_create(&th, NULL, writer, &wj);
  }
  if (write(fd, "r", 1) != 1) exit(1);
  while (!lp_stop) {
    cl_event ev = NULL;
    if (mode == 'f' || mode == 'w') {
      CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &items, NULL, 0, NULL, NULL));
      CHECK(clFlush(q));
      submitted();
      CHECK(clFinish(q));
    } else if (strchr("mbrk", mode)) {
      CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &items, NULL, 0, NULL, NULL));
      if (mode == 'm') CHECK(clEnqueueMarkerWithWaitList(q, 0, NULL, &ev));
      if (mode == 'b') CHECK(clEnqueueBarrierWithWaitList(q, 0, NULL, &ev));
      if (mode == 'r') CHECK(clEnqueueReadBuffer(q, buf, CL_FALSE, 0, 4, &word, 0, NULL, &ev));
      if (mode == 'k') CHECK(clEnqueueNDRangeKernel(q, k1, 1, NULL, &one, NULL, 0, NULL, &ev));
      CHECK(clFlush(q));
      submitted();
      CHECK(clWaitForEvents(1, &ev));
    } else if (mode == 'q') {
      CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &items, NULL, 0, NULL, NULL));
      CHECK(clFlush(q));
      struct lp_job j = {q, k, items, NULL};
      pthread_t th;
      pthread_create(&th, NULL, finish_on_thread, &j);
      pthread_join(th, NULL);
    } else if (mode == 't') {
      struct lp_job j = {q, k, items, NULL};
      pthread_t th;
      pthread_create(&th, NULL, enqueue_on_thread, &j);
      pthread_join(th, NULL);
      ev = j.ev;
      CHECK(clWaitForEvents(1, &ev));
    } else {
      CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &items, NULL, 0, NULL, &ev));
      if (mode == 'g') {
        CHECK(clFinish(q));
      } else if (mode == 'c') {
        done_flag = 0;
        CHECK(clSetEventCallback(ev, CL_COMPLETE, signal_done, NULL));
        CHECK(clFlush(q));
        pthread_mutex_lock(&mu);
        while (!done_flag) pthread_cond_wait(&cv, &mu);
        pthread_mutex_unlock(&mu);
      } else if (mode == 'p') {
        CHECK(clFlush(q));
        cl_int st = CL_QUEUED;
        while (st != CL_COMPLETE) {
          usleep(100);
          CHECK(clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
        }
      } else {
        CHECK(clFlush(q));
        submitted();
        CHECK(clWaitForEvents(1, &ev));
      }
    }
    if (ev) CHECK(clReleaseEvent(ev));
    n++;
  }
  dprintf(fd, "%ld\n", n);
  exit(0);
}

// Starts an LP child of `mode` (this program, exec'd: NVIDIA's driver does not survive a
// fork of a process that used it); returns the read end of its pipe once it runs.
static int start_lp(char **argv, char mode, double lp_ms, pid_t *pid, int *sig_write,
                    int *sub_read) {
  int p[2], sig[2], sub[2];
  if (pipe(p) != 0 || pipe(sig) != 0 || pipe(sub) != 0) exit(1);
  *pid = fork();
  if (*pid == 0) {
    close(p[0]);
    close(sig[1]);
    close(sub[0]);
    char m[2] = {mode, 0}, ms[32], fd[16], sfd[16], ufd[16];
    snprintf(ms, sizeof ms, "%f", lp_ms);
    snprintf(fd, sizeof fd, "%d", p[1]);
    snprintf(sfd, sizeof sfd, "%d", sig[0]);
    snprintf(ufd, sizeof ufd, "%d", sub[1]);
    execl("/proc/self/exe", argv[0], "--lp", m, ms, fd, sfd, ufd, (char *)NULL);
    exit(1);
  }
  close(p[1]);
  close(sig[0]);
  close(sub[1]);
  fcntl(sub[0], F_SETFL, O_NONBLOCK);
  *sub_read = sub[0];
  *sig_write = sig[1];
  char c;
  if (read(p[0], &c, 1) != 1) exit(1);  // the LP is calibrated and running
  return p[0];
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc == 7 && strcmp(argv[1], "--lp") == 0) {
    sig_read_fd = atoi(argv[5]);
    sub_write_fd = atoi(argv[6]);
    fcntl(sub_write_fd, F_SETFL, O_NONBLOCK);
    lp_child(argv[2][0], atof(argv[3]), atoi(argv[4]));
  }
  int samples = argc > 1 ? atoi(argv[1]) : 100;
  double lp_ms = argc > 2 ? atof(argv[2]) : 130;
  const char *modes = argc > 3 ? argv[3] : "NECQFWA";
  const char *lp_modes = argc > 4 ? argv[4] : "f";
  cl_device_id dev = first_device();
  char name[256];
  CHECK(clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof name, name, NULL));
  cl_context ctx;
  cl_command_queue q;
  cl_mem buf;
  size_t items = 65536, tiny = 64;
  cl_kernel k = probe_setup(dev, items, &ctx, &q, &buf);
  calibrate(q, k, items, NULL, 0.45);
  printf("device: %s, LP %.0f ms launches, %d HP launches per mode every 20 ms\n", name, lp_ms,
         samples);
  double *t = malloc(sizeof(double) * samples);
  for (const char *lm = lp_modes; *lm; lm++) {
  pid_t lp;
  int sig, sub;
  int rd = start_lp(argv, *lm, lp_ms, &lp, &sig, &sub);
  for (const char *m = modes; *m; m++) {
    for (int i = 0; i < samples; i++) {
      if (*m == 'S') {
        // The LP's next submission: drain the old reports, wait for a new one.
        char junk[64];
        while (read(sub, junk, sizeof junk) > 0) {
        }
        struct pollfd pf = {sub, POLLIN, 0};
        if (poll(&pf, 1, 2000) != 1) exit(1);
        usleep(100 + 300 * (i % 4));
      } else {
        usleep(20000);
      }
      cl_event ev = NULL;
      cl_event *evp = strchr("NFADS", *m) ? NULL : &ev;
      size_t *g = *m == 'A' ? &tiny : &items;
      double t0 = now_us();
      if (write(sig, "s", 1) != 1) exit(1);
      if (*m == 'D') usleep(200);
      CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, g, NULL, 0, NULL, evp));
      if (*m == 'C') CHECK(clSetEventCallback(ev, CL_COMPLETE, nothing, NULL));
      if (*m == 'Q') {
        cl_int st;
        CHECK(clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
      }
      if (*m == 'F') CHECK(clFlush(q));
      if (*m == 'W') {
        CHECK(clFlush(q));
        CHECK(clWaitForEvents(1, &ev));
      } else {
        CHECK(clFinish(q));
      }
      t[i] = now_us() - t0;
      if (ev) CHECK(clReleaseEvent(ev));
    }
    if (*m == 'S') {
      for (int b = 0; b < 4; b++) {
        double sum = 0, mx = 0;
        int n = 0;
        for (int i = b; i < samples; i += 4, n++) {
          sum += t[i];
          mx = t[i] > mx ? t[i] : mx;
        }
        printf("LP %c HP S  %4d us after the LP's submission: mean %8.1f us  max %8.1f us\n",
               *lm, 100 + 300 * b, n ? sum / n : 0, mx);
      }
    }
    qsort(t, samples, sizeof(double), cmp);
    printf("LP %c HP %c  p50 %8.1f us  p99 %8.1f us  max %8.1f us\n", *lm, *m, t[samples / 2],
           t[samples * 99 / 100], t[samples - 1]);
  }
  close(sig);
  close(sub);
  kill(lp, SIGTERM);
  char buf2[64] = {0};
  ssize_t r = read(rd, buf2, sizeof buf2 - 1);
  waitpid(lp, NULL, 0);
  close(rd);
  printf("LP %c launches: %s", *lm, r > 0 ? buf2 : "?\n");
  }
  return 0;
}
