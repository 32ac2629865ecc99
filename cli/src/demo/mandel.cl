__kernel void mandel(__global uint *out, int width, int iters) {
    int x = get_global_id(0), y = get_global_id(1);
    float cr = -2.0f + 2.5f * x / width, ci = -1.25f + 2.5f * y / width;
    float zr = 0.0f, zi = 0.0f;
    int i = 0;
    while (i < iters && zr * zr + zi * zi < 4.0f) {
        float t = zr * zr - zi * zi + cr;
        zi = 2.0f * zr * zi + ci;
        zr = t;
        i++;
    }
    out[y * width + x] = i;
}
