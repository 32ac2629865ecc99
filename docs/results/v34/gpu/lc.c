// Per-launch cost of back-to-back 2-D launches (benches/kernel_cost.py's groups_2d shape:
// 1024x1024 items, 16x16 groups), bare or through SoftPreempt, to tell apart what the
// layer adds: K1 reads group ids and counts (the layer runs its geometry rewrite), K2 the
// same work from get_global_id only (not rewritten). Mode "e": an event asked for and
// released per launch, as pyopencl does; "n": none. Prints the median of 9 rounds of 100.
// PRE (environment) does something first, to see what makes the vendor's later calls
// dearer: "cb" a completion callback on one launch's event, "q2" a second queue of the
// context with a launch on it, "thr" a host thread that waits on a condition forever,
// "evs" 20 launches whose events are kept (not released) until the end, "ue" a user
// event created, set and released, "uew" a launch that waits on a user event set after
// it, "thq" 20 launches (with events, released) from a second thread on the same queue,
// "clone" 20 launches of clones of the kernel (clCloneKernel), "bar" 20 launches each
// followed by a barrier with an event, waited for and released, "def" all of these as a
// deferred launch does them (a clone launched from a second thread, a user event set
// after the launch's event is waited for there).
// Build: gcc -O2 -o lc lc.c -lOpenCL -lpthread.  Run: ./lc PLATFORM-SUBSTRING K1|K2 e|n
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>
#include <unistd.h>
static void CL_CALLBACK done(cl_event e, cl_int s, void *u) { (void)e; (void)s; (void)u; }
static void *idle(void *a) { (void)a; for (;;) pause(); return 0; }
struct job { cl_command_queue q; cl_kernel k; size_t *g, *l; };
static void *deferred(void *a) { struct job *j = a; cl_event x; clEnqueueNDRangeKernel(j->q,j->k,2,0,j->g,j->l,0,0,&x); clFlush(j->q); clWaitForEvents(1,&x); clReleaseEvent(x); return 0; }
static void *launches(void *a) { struct job *j = a; for (int i = 0; i < 20; i++) { cl_event x; clEnqueueNDRangeKernel(j->q,j->k,2,0,j->g,j->l,0,0,&x); clReleaseEvent(x); } clFinish(j->q); return 0; }
static const char *SRC =
"__kernel void K1(__global float* out, __global const float* in) {\n"
"  size_t gx = get_group_id(0), gy = get_group_id(1);\n"
"  size_t i = get_global_id(1) * get_global_size(0) + get_global_id(0);\n"
"  float acc = in[i];\n"
"  for (int r = 0; r < 32; r++) acc = acc * 0.999f + (float)(gx * get_num_groups(1) + gy);\n"
"  out[i] = acc;\n}\n"
"__kernel void K2(__global float* out, __global const float* in) {\n"
"  size_t gx = get_global_id(0) >> 4, gy = get_global_id(1) >> 4;\n"
"  size_t i = get_global_id(1) * 1024 + get_global_id(0);\n"
"  float acc = in[i];\n"
"  for (int r = 0; r < 32; r++) acc = acc * 0.999f + (float)(gx * 64 + gy);\n"
"  out[i] = acc;\n}\n";
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
  if(argc<4){fprintf(stderr,"usage: lc PLATFORM K1|K2 e|n\n");return 2;}
  cl_platform_id ps[8]; cl_uint np; clGetPlatformIDs(8,ps,&np); cl_platform_id p=0;
  for(cl_uint i=0;i<np;i++){char n[256];clGetPlatformInfo(ps[i],CL_PLATFORM_NAME,256,n,0); if(strstr(n,argv[1])) p=ps[i];}
  if(!p){fprintf(stderr,"no platform %s\n",argv[1]);return 1;}
  cl_device_id d; clGetDeviceIDs(p,CL_DEVICE_TYPE_ALL,1,&d,0); cl_int e;
  cl_context c=clCreateContext(0,1,&d,0,0,&e); cl_command_queue q=clCreateCommandQueueWithProperties(c,d,0,&e);
  cl_program pr=clCreateProgramWithSource(c,1,&SRC,0,&e);
  if(clBuildProgram(pr,1,&d,"",0,0)){fprintf(stderr,"build failed\n");return 1;}
  cl_kernel k=clCreateKernel(pr,argv[2],&e);
  size_t n=1024*1024; cl_mem a=clCreateBuffer(c,CL_MEM_READ_WRITE,n*4,0,&e), b=clCreateBuffer(c,CL_MEM_READ_WRITE,n*4,0,&e);
  clSetKernelArg(k,0,sizeof a,&a); clSetKernelArg(k,1,sizeof b,&b);
  size_t g[2]={1024,1024}, l[2]={16,16}; int ev=argv[3][0]=='e';
  for(int i=0;i<20;i++) clEnqueueNDRangeKernel(q,k,2,0,g,l,0,0,0);
  clFinish(q);
  const char *pre = getenv("PRE"); cl_event kept[20] = {0};
  if (pre && !strcmp(pre, "cb")) { cl_event x; clEnqueueNDRangeKernel(q,k,2,0,g,l,0,0,&x); clSetEventCallback(x, CL_COMPLETE, done, 0); clFinish(q); clReleaseEvent(x); }
  if (pre && !strcmp(pre, "q2")) { cl_command_queue q2=clCreateCommandQueueWithProperties(c,d,0,&e); clEnqueueNDRangeKernel(q2,k,2,0,g,l,0,0,0); clFinish(q2); }
  if (pre && !strcmp(pre, "thr")) { pthread_t t; pthread_create(&t, 0, idle, 0); }
  if (pre && !strcmp(pre, "evs")) { for (int i = 0; i < 20; i++) clEnqueueNDRangeKernel(q,k,2,0,g,l,0,0,&kept[i]); clFinish(q); }
  if (pre && !strcmp(pre, "ue")) { cl_event u = clCreateUserEvent(c, &e); clSetUserEventStatus(u, CL_COMPLETE); clReleaseEvent(u); }
  if (pre && !strcmp(pre, "uew")) { cl_event u = clCreateUserEvent(c, &e); clEnqueueNDRangeKernel(q,k,2,0,g,l,1,&u,0); clFlush(q); clSetUserEventStatus(u, CL_COMPLETE); clFinish(q); clReleaseEvent(u); }
  if (pre && !strcmp(pre, "thq")) { struct job j = {q, k, g, l}; pthread_t t; pthread_create(&t, 0, launches, &j); pthread_join(t, 0); }
  if (pre && !strcmp(pre, "clone")) { for (int i = 0; i < 20; i++) { cl_kernel kc = clCloneKernel(k, &e); clEnqueueNDRangeKernel(q,kc,2,0,g,l,0,0,0); clFinish(q); clReleaseKernel(kc); } }
  if (pre && !strcmp(pre, "bar")) { for (int i = 0; i < 20; i++) { cl_event x; clEnqueueNDRangeKernel(q,k,2,0,g,l,0,0,0); clEnqueueBarrierWithWaitList(q,0,0,&x); clFlush(q); clWaitForEvents(1,&x); clReleaseEvent(x); } }
  if (pre && !strcmp(pre, "def")) { for (int i = 0; i < 20; i++) { cl_event u = clCreateUserEvent(c, &e); struct job j = {q, clCloneKernel(k, &e), g, l}; pthread_t t; pthread_create(&t, 0, deferred, &j); pthread_join(t, 0); clSetUserEventStatus(u, CL_COMPLETE); clReleaseEvent(u); clReleaseKernel(j.k); } }
  double per[9];
  for(int r=0;r<9;r++){ double t0=now();
    for(int i=0;i<100;i++){ cl_event x=0; clEnqueueNDRangeKernel(q,k,2,0,g,l,0,0,ev?&x:0); if(x) clReleaseEvent(x); }
    clFinish(q); per[r]=(now()-t0)/100/1e3; }
  qsort(per,9,sizeof(double),cmp);
  printf("%-12s %s %c %-4s %.2f us/launch\n",argv[1],argv[2],argv[3][0],pre?pre:"-",per[4]);
  return 0;
}
