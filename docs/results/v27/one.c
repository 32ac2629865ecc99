#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>
#include <unistd.h>
static void* idle(void*a){pause();return 0;}
static const char *SRC =
"__kernel void plain(__global int *a) { a[get_global_id(0)] += 1; }\n"
"__kernel void geom(__global int *a) { a[get_global_id(0)] += (int)(get_group_id(0) + get_num_groups(0)); }\n";
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
int main(int argc,char**argv){
  if(getenv("IDLE_THREAD")){pthread_t t;pthread_create(&t,0,idle,0);}
  const char *want = argv[1]; int reqs = atoi(argv[2]); const char* mode=argv[3];
  cl_platform_id ps[8]; cl_uint np; clGetPlatformIDs(8,ps,&np); cl_platform_id p=0;
  for(cl_uint i=0;i<np;i++){char n[256];clGetPlatformInfo(ps[i],CL_PLATFORM_NAME,256,n,0); if(strstr(n,want)) p=ps[i];}
  cl_device_id d; clGetDeviceIDs(p,CL_DEVICE_TYPE_ALL,1,&d,0); cl_int e;
  cl_context c=clCreateContext(0,1,&d,0,0,&e); cl_command_queue q=clCreateCommandQueueWithProperties(c,d,0,&e);
  cl_program pr=clCreateProgramWithSource(c,1,&SRC,0,&e); clBuildProgram(pr,1,&d,"",0,0);
  cl_kernel k[2]={clCreateKernel(pr,"plain",&e),clCreateKernel(pr,"geom",&e)};
  size_t items=1024; cl_mem b=clCreateBuffer(c,CL_MEM_READ_WRITE,items*4,0,&e);
  for(int i=0;i<2;i++) clSetKernelArg(k[i],0,sizeof b,&b);
  static int host[1024]; int pat=7; double best=1e18;
  for(int rep=0;rep<7;rep++){
   double t0=now();
   for(int r=0;r<reqs;r++){
    for(int i=0;i<15;i++){
      switch(mode[0]){case 'f': clEnqueueFillBuffer(q,b,&pat,4,0,items*4,0,0,0);break;
      case 'r': clEnqueueReadBuffer(q,b,CL_FALSE,0,items*4,host,0,0,0);break;
      case 'p': clEnqueueNDRangeKernel(q,k[0],1,0,&items,0,0,0,0); break;
      case 'g': clEnqueueNDRangeKernel(q,k[1],1,0,&items,0,0,0,0); break;}
    }
    clEnqueueReadBuffer(q,b,CL_TRUE,0,4,host,0,0,0);
   }
   double t=(now()-t0)/reqs/16; if(t<best)best=t;}
  printf("%-12s %s %.1f ns/cmd\n",want,mode,best);
  return 0;
}
