#!/usr/bin/env python3
"""The OpenCV pair's HP request (benches/opencv_pair.py) in a plain loop: N requests back to
back after 50 to warm up, printing the mean µs a request on stderr. For quick A/Bs of the
layer against the bare platform (and for perf), with OpenCV's binary cache warm after the
first run. On PoCL's `basic` device, bare, then through SoftPreempt at priority high:

  export POCL_DEVICES=basic OPENCV_OPENCL_RUNTIME=/usr/lib/x86_64-linux-gnu/libOpenCL.so.1 \\
         OPENCV_OPENCL_CACHE_DIR=/tmp/ocvcache
  OPENCV_OPENCL_DEVICE=Portable:CPU: python3 scripts/ocv-hp-loop.py 2000
  OCL_ICD_VENDORS=DIR SOFTPREEMPT_VENDORS=$(head -n1 /etc/OpenCL/vendors/pocl.icd) \\
    SOFTPREEMPT_PRIORITY=high OPENCV_OPENCL_DEVICE=SoftPreempt:CPU: python3 scripts/ocv-hp-loop.py 2000

(DIR: a vendors directory holding softpreempt.icd, naming target/release/libsoftpreempt.so.)
"""
import sys
import time

import cv2
import numpy as np

cv2.ocl.setUseOpenCL(True)
src = cv2.UMat(np.random.default_rng(7).integers(0, 255, (256, 256), dtype=np.uint8))


def request():
    b = cv2.GaussianBlur(src, (7, 7), 1.5)
    s = cv2.Sobel(b, cv2.CV_16S, 1, 0)
    return s.get()


for _ in range(50):
    request()
n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
t = time.perf_counter()
for _ in range(n):
    request()
print(f"{cv2.ocl.Device.getDefault().name()}: {(time.perf_counter() - t) / n * 1e6:.1f} µs a request",
      file=sys.stderr)
