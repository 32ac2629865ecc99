// Whether PoCL builds programs concurrently: 20 distinct two-kernel programs on one thread,
// then 2 x 20 on two threads in two contexts and in one context (docs/benchmarks.md,
// session 33). gcc -O2 -o /tmp/cb scripts/pocl-concurrent-builds.c -lOpenCL -lpthread &&
// POCL_CACHE_DIR=$(mktemp -d) /tmp/cb
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static cl_device_id dev; static cl_context ctx[2];
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
static int N=20;
struct job{int ctxi; int base;};
static void *work(void *a){ struct job *j=a; char src[4096];
  for(int i=0;i<N;i++){ snprintf(src,sizeof src,
   "__kernel void k%d(__global float*x,int n){int i=get_global_id(0); float v=x[i]; for(int j=0;j<n;j++) v=sin(v)*%d.5f+cos(v*%d.25f); x[i]=v;}"
   "__kernel void q%d(__global int*x){x[get_global_id(0)] ^= %d;}", j->base+i, j->base+i, i, j->base+i, i);
   const char*s=src; cl_int e; cl_program p=clCreateProgramWithSource(ctx[j->ctxi],1,&s,NULL,&e);
   if(clBuildProgram(p,1,&dev,"",NULL,NULL)) {printf("build fail\n"); exit(1);} clReleaseProgram(p);} return NULL;}
int main(int argc,char**argv){ cl_platform_id p; clGetPlatformIDs(1,&p,NULL); clGetDeviceIDs(p,CL_DEVICE_TYPE_ALL,1,&dev,NULL);
  cl_int e; ctx[0]=clCreateContext(NULL,1,&dev,NULL,NULL,&e); ctx[1]=clCreateContext(NULL,1,&dev,NULL,NULL,&e);
  struct job a={0,1000},b={1,2000},c={0,3000};
  double t=now(); work(&a); printf("sequential one thread: %.2f s for %d\n",now()-t,N);
  pthread_t t1,t2; t=now(); pthread_create(&t1,NULL,work,&b); pthread_create(&t2,NULL,work,&c); pthread_join(t1,NULL); pthread_join(t2,NULL);
  printf("two threads, two contexts: %.2f s for %d each\n",now()-t,N);
  struct job f={0,5000},g={0,6000};
  t=now(); pthread_create(&t1,NULL,work,&f); pthread_create(&t2,NULL,work,&g); pthread_join(t1,NULL); pthread_join(t2,NULL);
  printf("two threads, one context: %.2f s for %d each\n",now()-t,N);
  return 0;}
