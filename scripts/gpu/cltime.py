#!/usr/bin/env python3
"""Writes and builds `libcltime.so`: an OpenCL library that forwards every core API call
to a real OpenCL library and times it, ltrace-style, for finding where an application's
time goes per call, bare against layered.

Point an application at it instead of its OpenCL loader (OpenCV: OPENCV_OPENCL_RUNTIME;
it opens the library by path and looks up each function in it, which LD_PRELOAD would not
see). CLTIME_REAL names the real loader; CLTIME_OUT is the file that per-function counts
and times are written to when the process exits (one JSON object); a CLTIME_OUT that ends
in '/' is a folder, and each process writes its own cltime-PID.json there.

    python3 scripts/gpu/cltime.py --header /usr/include/CL/cl.h --out DIR   # DIR/libcltime.so

The wrappers are generated from the header's prototypes at build time, so nothing
generated is kept in the repository.
"""
import argparse
import os
import re
import subprocess

PROTO = re.compile(
    r"extern\s+CL_API_ENTRY\s+(?:CL_API_PREFIX\w*\s+)?([\w\s\*]+?)\s*CL_API_CALL\s+(cl\w+)\s*\((.*?)\)\s*CL_API_SUFFIX\w*;",
    re.S)


def split_params(params):
    depth, cur, out = 0, "", []
    for ch in params:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def param_name(p):
    m = re.search(r"\(\s*CL_CALLBACK\s*\*\s*(\w+)\s*\)", p) or re.search(r"\(\s*\*\s*(\w+)\s*\)", p)
    if m:
        return m.group(1)
    return re.findall(r"\w+", p.replace("[]", ""))[-1]


def generate(header):
    text = re.sub(r"/\*.*?\*/", "", open(header).read(), flags=re.S)
    funcs = []
    for ret, name, params in PROTO.findall(text):
        ps = split_params(" ".join(params.split()))
        if ps == ["void"]:
            ps = []
        funcs.append((" ".join(ret.split()), name, ps))
    out = ["#define CL_TARGET_OPENCL_VERSION 300", "#define CL_USE_DEPRECATED_OPENCL_1_0_APIS",
           "#define CL_USE_DEPRECATED_OPENCL_1_1_APIS", "#define CL_USE_DEPRECATED_OPENCL_1_2_APIS",
           "#define CL_USE_DEPRECATED_OPENCL_2_0_APIS", "#include <CL/cl.h>",
           "#include <dlfcn.h>", "#include <stdio.h>", "#include <stdlib.h>", "#include <time.h>",
           "#include <stdatomic.h>", "#include <string.h>", "#include <unistd.h>",
           f"#define NFUNCS {len(funcs)}",
           "static const char *names[NFUNCS] = {" + ",".join(f'"{f[1]}"' for f in funcs) + "};",
           "static _Atomic unsigned long long calls[NFUNCS], total_ns[NFUNCS], max_ns[NFUNCS];",
           "static void *real;",
           "static void *sym(const char *n) {",
           "  if (!real) { const char *p = getenv(\"CLTIME_REAL\");",
           "    real = dlopen(p ? p : \"libOpenCL.so.1\", RTLD_NOW | RTLD_LOCAL);",
           "    if (!real) { fprintf(stderr, \"cltime: %s\\n\", dlerror()); abort(); } }",
           "  return dlsym(real, n); }",
           "static unsigned long long now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);",
           "  return (unsigned long long)t.tv_sec * 1000000000ull + t.tv_nsec; }",
           "static void note(int i, unsigned long long t0) { unsigned long long d = now() - t0;",
           "  calls[i]++; total_ns[i] += d; unsigned long long m = max_ns[i]; while (d > m && !atomic_compare_exchange_weak(&max_ns[i], &m, d)) {} }",
           "__attribute__((destructor)) static void dump(void) {",
           "  const char *p = getenv(\"CLTIME_OUT\"); if (!p) return; char path[4096];",
           "  size_t n = strlen(p); if (n && p[n - 1] == '/') { snprintf(path, sizeof path, \"%scltime-%d.json\", p, (int)getpid()); p = path; }",
           "  FILE *f = fopen(p, \"w\"); if (!f) return;",
           "  fprintf(f, \"{\"); int first = 1;",
           "  for (int i = 0; i < NFUNCS; i++) if (calls[i]) { fprintf(f, \"%s\\\"%s\\\": [%llu, %llu, %llu]\", first ? \"\" : \", \", names[i], calls[i], total_ns[i], max_ns[i]); first = 0; }",
           "  fprintf(f, \"}\\n\"); fclose(f); }"]
    for i, (ret, name, ps) in enumerate(funcs):
        args = ", ".join(param_name(p) for p in ps)
        decl = ", ".join(ps) or "void"
        out.append(f"CL_API_ENTRY {ret} CL_API_CALL {name}({decl}) {{")
        out.append(f"  static __typeof__(&{name}) f; if (!f) f = (__typeof__(&{name}))sym(\"{name}\");")
        if ret == "void":
            out.append(f"  unsigned long long t0 = now(); f({args}); note({i}, t0); }}")
        else:
            out.append(f"  unsigned long long t0 = now(); {ret} r = f({args}); note({i}, t0); return r; }}")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--header", default="/usr/include/CL/cl.h")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    c = os.path.join(a.out, "cltime.c")
    with open(c, "w") as f:
        f.write(generate(a.header))
    inc = os.path.dirname(os.path.dirname(a.header))
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-w", "-I", inc, "-o",
                    os.path.join(a.out, "libcltime.so"), c, "-ldl"], check=True)


if __name__ == "__main__":
    main()
