__kernel void k(__global uint* out) {
  size_t l = get_global_linear_id();
  out[l] = (uint)(l * 2654435761u) ^ (uint)get_group_id(0);
}
