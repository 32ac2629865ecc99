__kernel void r_256_16_16(__global float* data0_256, __global float* data1_65536) {
  float buf0[1];
  float buf1[1];
  __attribute__ ((aligned (16))) __local float buf2[16];
  int gidx0 = get_group_id(0); /* 256 */
  int lidx0 = get_local_id(0); /* 16 */
  *(buf0+0) = 0.0f;
  for (int Ridx0 = 0; Ridx0 < 16; Ridx0++) {
    float val0 = (*(data1_65536+(gidx0+(lidx0<<12)+(Ridx0<<8))));
    *(buf0+0) = ((*(buf0+0))+val0);
  }
  *(buf2+lidx0) = (*(buf0+0));
  barrier(CLK_LOCAL_MEM_FENCE);
  *(buf1+0) = 0.0f;
  for (int Ridx102 = 0; Ridx102 < 16; Ridx102++) {
    float val1 = (*(buf2+Ridx102));
    *(buf1+0) = ((*(buf1+0))+val1);
  }
  if ((lidx0==0)) {
    *(data0_256+gidx0) = (*(buf1+0));
  }
}
