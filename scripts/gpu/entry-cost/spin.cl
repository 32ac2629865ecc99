__kernel void spin(__global float *out, uint iters, uint omask) {
    size_t i = get_global_id(0);
    float a = (float)(i & 1023) * 1e-3f;
    float b = 1.0f - a * 1e-6f;
    for (uint k = 0; k < iters; ++k)
        a = fma(a, b, 1e-7f);
    out[i & omask] = a;
}
