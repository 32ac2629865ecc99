/* The high-priority holder: a registered HP queue that never runs anything more. */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
int main(void) {
  cl_platform_id ps[8]; cl_uint n = 0;
  clGetPlatformIDs(8, ps, &n);
  for (cl_uint i = 0; i < n; i++) {
    char name[256] = {0};
    clGetPlatformInfo(ps[i], CL_PLATFORM_NAME, sizeof name, name, NULL);
    if (strcmp(name, "SoftPreempt")) continue;
    cl_device_id d; cl_int e;
    clGetDeviceIDs(ps[i], CL_DEVICE_TYPE_ALL, 1, &d, NULL);
    cl_context c = clCreateContext(NULL, 1, &d, NULL, NULL, &e);
    cl_command_queue q = clCreateCommandQueueWithProperties(c, d, NULL, &e);
    cl_mem b = clCreateBuffer(c, CL_MEM_READ_WRITE, 4, NULL, &e);
    int v = 1;
    clEnqueueWriteBuffer(q, b, CL_TRUE, 0, 4, &v, 0, NULL, NULL);
    clFinish(q);
    printf("ready\n"); fflush(stdout);
    for (;;) pause();
  }
  fprintf(stderr, "no SoftPreempt platform\n");
  return 1;
}
