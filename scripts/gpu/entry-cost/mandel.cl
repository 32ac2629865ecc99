__kernel void mandel(__global uint *out, uint iters, uint omask, uint width) {
    size_t x = get_global_id(0), y = get_global_id(1);
    float cr = -2.0f + 2.5f * (float)x / (float)width;
    float ci = -1.25f + 2.5f * (float)y / (float)width;
    float zr = 0.0f, zi = 0.0f;
    uint i = 0;
    while (i < iters && zr * zr + zi * zi < 4.0f) {
        float t = zr * zr - zi * zi + cr; zi = 2.0f * zr * zi + ci; zr = t; i++; }
    out[(y * width + x) & omask] = i; }
