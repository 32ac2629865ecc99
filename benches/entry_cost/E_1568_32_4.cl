__kernel void E_1568_32_4(__global float* data0_200704, __global float* data1_401408) {
  int gidx0 = get_group_id(0); /* 1568 */
  int lidx0 = get_local_id(0); /* 32 */
  int alu0 = ((gidx0<<7)+(lidx0<<2));
  float4 val0 = (*((__global float4*)((data1_401408+(alu0+200704)))));
  float4 val1 = (*((__global float4*)((data1_401408+alu0))));
  *((__global float4*)((data0_200704+alu0))) = (float4)((sin((1.5707963705062866f+(val1.x*-6.2831854820251465f)))*sqrt((log2((1.0f-val0.x))*-1.3862943649291992f))),(sin((1.5707963705062866f+(val1.y*-6.2831854820251465f)))*sqrt((log2((1.0f-val0.y))*-1.3862943649291992f))),(sin((1.5707963705062866f+(val1.z*-6.2831854820251465f)))*sqrt((log2((1.0f-val0.z))*-1.3862943649291992f))),(sin((1.5707963705062866f+(val1.w*-6.2831854820251465f)))*sqrt((log2((1.0f-val0.w))*-1.3862943649291992f))));
}
