__kernel void E_512_32_4(__global float* data0_65536) {
  int gidx0 = get_group_id(0); /* 512 */
  int lidx0 = get_local_id(0); /* 32 */
  *((__global float4*)((data0_65536+((gidx0<<7)+(lidx0<<2))))) = (float4)(0.0f,0.0f,0.0f,0.0f);
}
