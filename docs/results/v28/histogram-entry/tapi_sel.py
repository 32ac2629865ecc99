"""An OpenCV T-API (cv2.UMat) workload: one or more operations per OpenCV module that has
an OpenCL path, on fixed pseudo-random inputs. Writes every output (as numpy arrays) to an
.npz file and, per operation, its CLOCK_MONOTONIC window to a JSON file, so that
clients_compare.py can compare two runs bit for bit and tell, from a SoftPreempt trace,
which OpenCL kernels each operation ran.

Run by scripts/clients.sh; OPENCV_OPENCL_RUNTIME / OPENCV_OPENCL_DEVICE / OCL_ICD_VENDORS
choose the platform, and the script refuses to run if OpenCL is off.
"""
import json
import sys, os
import time

import cv2
import numpy as np

# Operations left out on purpose, and why:
# - Canny: its OpenCL path (hysteresis with a global stack and atomics) gives
#   different edge maps from one run to the next on the bare PoCL driver.
# - objdetect: OpenCV 5 has no CascadeClassifier/HOGDescriptor any more (the modules with
#   OpenCL kernels moved out); QR/ArUco detection has no OpenCL path.
# - dnn: its OpenCL target needs a network file; none is shipped in the wheel.
# - Laplacian: OpenCV 5 runs it on the CPU even for a UMat (no kernel reaches the driver).
# - calib, geometry, ptcloud, flann, highgui, imgcodecs, videoio: no OpenCL paths.


def now_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def image(rng, h, w, c):
    # Smooth structure plus noise, so filters, flows and detectors have something to find.
    y, x = np.mgrid[0:h, 0:w]
    base = 127 + 60 * np.sin(x / 17.0) * np.cos(y / 23.0)
    chans = [base + 40 * np.sin((x + 31 * k) / (9.0 + k)) for k in range(c)]
    img = np.stack(chans, axis=-1) + rng.normal(0, 12, (h, w, c))
    return np.clip(img, 0, 255).astype(np.uint8).squeeze()


def ops(rng):
    """(module, name, function returning one UMat/array or a tuple/list of them)."""
    bgr = image(rng, 480, 640, 3)
    gray = cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)
    shifted = np.roll(gray, (2, 3), axis=(0, 1))
    u_bgr, u_gray, u_shift = cv2.UMat(bgr), cv2.UMat(gray), cv2.UMat(shifted)
    f32 = rng.standard_normal((256, 256)).astype(np.float32)
    g32 = rng.standard_normal((256, 256)).astype(np.float32)
    u_f, u_g = cv2.UMat(f32), cv2.UMat(g32)
    templ = cv2.UMat(gray[100:132, 200:248].copy())
    rot = cv2.getRotationMatrix2D((320, 240), 17.0, 0.9)
    kernel = np.ones((5, 5), np.uint8)

    def mog2():
        sub = cv2.createBackgroundSubtractorMOG2(history=20, detectShadows=True)
        masks = []
        for k in range(4):
            frame = cv2.UMat(np.roll(bgr, 4 * k, axis=1))
            masks.append(sub.apply(frame, learningRate=0.1))
        return masks

    def fast():
        kps = cv2.FastFeatureDetector_create(threshold=30).detect(u_gray)
        return np.array(sorted((k.pt[0], k.pt[1], k.response) for k in kps), np.float64)

    def orb():
        kps = cv2.ORB_create(nfeatures=300).detect(u_gray)
        return np.array(sorted((k.pt[0], k.pt[1], k.response, k.angle) for k in kps),
                        np.float64)

    def stereo_bm():
        # OpenCV takes its OpenCL path only without texture, uniqueness and speckle
        # filtering (those are CPU-only post-passes).
        bm = cv2.StereoBM_create(numDisparities=32, blockSize=15)
        bm.setTextureThreshold(0)
        bm.setUniquenessRatio(0)
        bm.setSpeckleWindowSize(0)
        return bm.compute(u_gray, u_shift)

    def pyr_lk():
        pts = cv2.UMat(np.float32([[x, y] for x in range(80, 600, 60)
                                   for y in range(60, 440, 60)]).reshape(-1, 1, 2))
        nxt, st, err = cv2.calcOpticalFlowPyrLK(u_gray, u_shift, pts, None)
        return [nxt, st, err]

    map_x = cv2.UMat(rng.uniform(0, 639, (480, 640)).astype(np.float32))
    map_y = cv2.UMat(rng.uniform(0, 479, (480, 640)).astype(np.float32))

    return [
        ("imgproc", "cvtColor", lambda: cv2.cvtColor(u_bgr, cv2.COLOR_BGR2GRAY)),
        ("imgproc", "cvtColor_hsv", lambda: cv2.cvtColor(u_bgr, cv2.COLOR_BGR2HSV)),
        ("imgproc", "GaussianBlur", lambda: cv2.GaussianBlur(u_bgr, (7, 7), 1.5)),
        ("imgproc", "resize", lambda: cv2.resize(u_bgr, (333, 250), interpolation=cv2.INTER_LINEAR)),
        ("imgproc", "resize_area", lambda: cv2.resize(u_gray, (160, 120), interpolation=cv2.INTER_AREA)),
        ("imgproc", "Sobel", lambda: cv2.Sobel(u_gray, cv2.CV_16S, 1, 0, ksize=3)),
        ("imgproc", "matchTemplate", lambda: cv2.matchTemplate(u_gray, templ, cv2.TM_CCOEFF_NORMED)),
        ("imgproc", "warpAffine", lambda: cv2.warpAffine(u_bgr, rot, (640, 480))),
        ("imgproc", "morphologyEx", lambda: cv2.morphologyEx(u_gray, cv2.MORPH_GRADIENT, kernel)),
        ("imgproc", "equalizeHist", lambda: cv2.equalizeHist(u_gray)),
        ("imgproc", "cornerHarris", lambda: cv2.cornerHarris(cv2.UMat(np.float32(gray)), 2, 3, 0.04)),
        ("imgproc", "pyrDown", lambda: cv2.pyrDown(u_bgr)),
        ("imgproc", "threshold", lambda: cv2.threshold(u_gray, 127, 255, cv2.THRESH_BINARY)[1]),
        ("imgproc", "medianBlur", lambda: cv2.medianBlur(u_gray, 5)),
        ("imgproc", "bilateralFilter", lambda: cv2.bilateralFilter(u_gray, 9, 50, 50)),
        ("imgproc", "remap", lambda: cv2.remap(u_gray, map_x, map_y, cv2.INTER_LINEAR)),
        # Without a C matrix OpenCV's gemm takes its CPU path.
        ("core", "gemm", lambda: cv2.gemm(u_f, u_g, 1.0, u_g, 0.5)),
        ("core", "dft", lambda: cv2.dft(u_f, flags=cv2.DFT_COMPLEX_OUTPUT)),
        ("core", "add_weighted", lambda: cv2.addWeighted(u_bgr, 0.7, cv2.UMat(np.flip(bgr, 0).copy()), 0.3, 5)),
        ("core", "transpose", lambda: cv2.transpose(u_gray)),
        ("core", "normalize", lambda: cv2.normalize(u_f, None, 0, 1, cv2.NORM_MINMAX)),
        ("video", "calcOpticalFlowFarneback",
         lambda: cv2.calcOpticalFlowFarneback(u_gray, u_shift, None, 0.5, 3, 15, 3, 5, 1.2, 0)),
        ("video", "calcOpticalFlowPyrLK", pyr_lk),
        ("video", "BackgroundSubtractorMOG2", mog2),
        ("photo", "fastNlMeansDenoising", lambda: cv2.fastNlMeansDenoising(u_gray, None, 10, 7, 21)),
        ("features", "FastFeatureDetector", fast),
        ("features", "ORB", orb),
        ("stereo", "StereoBM", stereo_bm),
    ]


def to_arrays(value):
    if isinstance(value, (list, tuple)):
        return [a for v in value for a in to_arrays(v)]
    if isinstance(value, cv2.UMat):
        return [value.get()]
    return [np.asarray(value)]


def main():
    out_npz, out_json = sys.argv[1], sys.argv[2]
    if not cv2.ocl.haveOpenCL() or not cv2.ocl.useOpenCL():
        sys.exit("opencv_tapi: OpenCV has no usable OpenCL (haveOpenCL/useOpenCL false)")
    dev = cv2.ocl.Device.getDefault()
    info = {
        "opencv": cv2.__version__,
        "device": dev.name(),
        "device_version": dev.version(),
        "driver_version": dev.driverVersion(),
        "ops": [],
    }
    rng = np.random.default_rng(1234)
    arrays = {}
    sel = os.environ.get("OPS")
    for idx, (module, name, fn) in enumerate(ops(rng)):
        if sel is not None and str(idx) not in sel.split(","):
            continue
        cv2.ocl.finish()
        t0 = now_ns()
        outs = to_arrays(fn())
        cv2.ocl.finish()
        t1 = now_ns()
        for i, a in enumerate(outs):
            arrays[f"{name}#{i}"] = a
        info["ops"].append({"module": module, "name": name, "start_ns": t0, "end_ns": t1,
                            "outputs": len(outs)})
    np.savez(out_npz, **arrays)
    with open(out_json, "w") as f:
        json.dump(info, f, indent=1)


if __name__ == "__main__":
    main()
