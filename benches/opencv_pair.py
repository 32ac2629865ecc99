#!/usr/bin/env python3
"""A real-client co-run with OpenCV's T-API: two unmodified `cv2.UMat` processes share one device.

The HP is a small image pipeline, a request every --gap-ms (Poisson): a 256x256 7x7
GaussianBlur, a Sobel and a blocking read of the result (`.get()`), so each request is
several small kernels, buffer operations and a blocking read. The LP is a large pipeline
back to back: an N x N blur, resize, Sobel and matchTemplate.

Scenarios, side by side in one invocation: HP alone (bare), HP alone (SoftPreempt, at
priority high), HP + LP (bare), HP + LP (SoftPreempt, HP high, LP low), LP alone (bare);
on request (--scenarios) also LP alone through SoftPreempt at priority low (lp-alone-sp),
and the LP next to a registered HP that sends nothing (corun-sp-idle: what a registered
higher priority alone costs the LP), and hp-ab: the HP alone on both platforms at once, in
turns of --slot-ms (the bare one in even slots), so that the machine's drift hits both alike
(its rows hp-ab-bare and hp-ab-sp; hp-ab-sp's ratios are ÷ hp-ab-bare); and corun-ab: a bare
pair and a SoftPreempt pair at once, taking turns of --turn-ms (the bare pair in even turns):
each LP begins pipelines in its own turns only, each HP sends requests in its own turns after
the first --guard-ms (while the other pair's LP finishes its last pipeline), and each LP's
rate is taken from pipelines that began and ended in the measured part of one of its turns
(rows corun-ab-bare and corun-ab-sp; LP kept ÷ corun-ab-bare, and per pair of adjacent
turns, with the mean's standard error). An LP's rate moved ±12% between sequential co-runs
on one H100, so sequential runs cannot resolve a few percent; turns can.
Each scenario first runs briefly to warm OpenCV's binary cache (one cache folder per
platform), then is measured, so measured runs load their programs from the cache, as users'
second runs do. Printed: HP p50/p90/p99 per request (ms) and p99 / bare-alone p99, LP
pipelines/s and the share of the bare co-run it keeps.

    python3 benches/opencv_pair.py --lib target/release/libsoftpreempt.so \\
        --vendor-lib "$(head -n1 /etc/OpenCL/vendors/pocl.icd)" \\
        --runtime /usr/lib/x86_64-linux-gnu/libOpenCL.so.1

--runtime is the OpenCL loader OpenCV opens (OPENCV_OPENCL_RUNTIME). Both loaders are
supported: ocl-icd (reads OCL_ICD_VENDORS) and CUDA's (reads OCL_ICD_FILENAMES); both
variables are set. --json FILE writes every figure.
"""
import argparse
import json
import os
import sys
import time

from pair_common import (Slot, Work, interleaved, lp_rate, mean_se, paired_ratios, pct,
                         period_rates, scenario as run_scenario, serve, slot_rate,
                         turns_scenario)


def role_main(role):
    import cv2
    import numpy as np

    if not cv2.ocl.haveOpenCL():
        sys.exit("OpenCL is off in this OpenCV")
    cv2.ocl.setUseOpenCL(True)
    rng = np.random.default_rng(7)
    stop = os.environ.get("PAIR_STOP", "")
    duration = float(os.environ.get("PAIR_DURATION", "1"))
    if role == "hp":
        src = cv2.UMat(rng.integers(0, 255, (256, 256), dtype=np.uint8))

        def request():
            b = cv2.GaussianBlur(src, (7, 7), 1.5)
            s = cv2.Sobel(b, cv2.CV_16S, 1, 0)
            return s.get()

        for _ in range(20):  # warm-up: programs, buffers
            request()
        time.sleep(1.0)
        print("ready", flush=True)
        # CLOCK_MONOTONIC is system-wide: the LP's completion times are read against it.
        t0 = time.monotonic()
        if os.environ.get("PAIR_HP_IDLE"):
            # Registered at its priority, with its programs and buffers, but sending nothing:
            # what a registered higher priority alone costs the LP.
            time.sleep(duration)
            lat, at = [], []
        else:
            lat, at = serve(lambda _: request(), float(os.environ["PAIR_GAP_MS"]), duration)
        print(json.dumps({"lat": lat, "at": at, "window": [t0, time.monotonic()]}))
        return
    n = int(os.environ["PAIR_LP_SIZE"])
    big = cv2.UMat(rng.integers(0, 255, (n, n), dtype=np.uint8))
    templ = cv2.UMat(rng.integers(0, 255, (32, 32), dtype=np.uint8))

    def pipeline():
        b = cv2.blur(big, (5, 5))
        r = cv2.resize(b, (n // 2, n // 2))
        s = cv2.Sobel(r, cv2.CV_32F, 1, 1)
        m = cv2.matchTemplate(r, templ, cv2.TM_CCORR_NORMED)
        cv2.ocl.finish()
        return s, m

    pipeline()
    print("ready", flush=True)
    slot = os.environ.get("PAIR_SLOT")
    slot = Slot(slot) if slot else None
    done = 0
    start = time.perf_counter()
    done_at = []
    while not os.path.exists(stop):
        if slot:
            slot.wait()  # begins pipelines in its own turns only (corun-ab)
        pipeline()
        done += 1
        done_at.append(time.monotonic())
    print(json.dumps({"pipelines": done, "seconds": time.perf_counter() - start,
                      "done_at": done_at}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True, help="libsoftpreempt.so")
    ap.add_argument("--vendor-lib", required=True, help="the vendor's ICD library")
    ap.add_argument("--runtime", required=True, help="the OpenCL loader OpenCV opens")
    ap.add_argument("--device-type", default="", help="OPENCV_OPENCL_DEVICE's type: GPU, CPU or empty")
    ap.add_argument("--bare-platform", required=True,
                    help="the vendor platform's name, as OPENCV_OPENCL_DEVICE matches it")
    ap.add_argument("--lp-size", type=int, default=8192)
    ap.add_argument("--gap-ms", type=float, default=20.0)
    ap.add_argument("--duration", type=float, default=8.0)
    ap.add_argument("--scenarios", default="hp-alone,hp-alone-sp,corun-bare,corun-sp,lp-alone")
    ap.add_argument("--sched", default="",
                    help="more [sched] lines for SoftPreempt (TOML text; default: none, the "
                         "default configuration)")
    ap.add_argument("--slot-ms", type=float, default=500.0,
                    help="hp-ab: each platform's turn, ms")
    ap.add_argument("--turn-ms", type=float, default=4000.0,
                    help="corun-ab: each pair's turn, ms")
    ap.add_argument("--guard-ms", type=float, default=1200.0,
                    help="corun-ab: the part of a turn the HP leaves to the other pair's LP "
                         "to finish its last pipeline, ms")
    ap.add_argument("--json")
    a = ap.parse_args()
    w = Work("opencv-pair-", a.lib, a.vendor_lib, sched=a.sched)
    work, conf, shm, vendors = w.dir, w.conf, w.shm, w.vendors

    def env(platform, priority=None, **kw):
        e = dict(os.environ)
        plat_name = "SoftPreempt" if platform == "sp" else a.bare_platform
        e.update(OCL_ICD_VENDORS=vendors[platform][0], OCL_ICD_FILENAMES=vendors[platform][1],
                 PAIR_PLATFORM=platform, OPENCV_OPENCL_RUNTIME=a.runtime,
                 OPENCV_OPENCL_DEVICE=f"{plat_name}:{a.device_type}:",
                 OPENCV_OPENCL_CACHE_DIR=os.path.join(work, "cache-" + platform),
                 XDG_CACHE_HOME=os.path.join(work, "xdg-" + platform),
                 SOFTPREEMPT_CONFIG=conf, SOFTPREEMPT_VENDORS=a.vendor_lib)
        if priority:
            e["SOFTPREEMPT_PRIORITY"] = priority
        e.update({k: str(v) for k, v in kw.items()})
        return e

    def scenario(hp_plat, lp_plat, seconds, idle=False):
        stop = os.path.join(work, f"stop-{time.monotonic_ns()}")
        lp_env = lp_plat and env(lp_plat, "low" if lp_plat == "sp" else None,
                                 PAIR_LP_SIZE=a.lp_size, PAIR_STOP=stop)
        hp_env = hp_plat and env(hp_plat, "high" if hp_plat == "sp" else None, PAIR_STOP=stop,
                                 PAIR_DURATION=seconds, PAIR_GAP_MS=a.gap_ms,
                                 **({"PAIR_HP_IDLE": 1} if idle else {}))
        return run_scenario(__file__, stop, lp_env, hp_env, seconds, 1.0)

    def turns(seconds):
        stop = os.path.join(work, f"stop-{time.monotonic_ns()}")
        return interleaved(__file__, {
            p: env(p, "high" if p == "sp" else None, PAIR_STOP=stop, PAIR_DURATION=seconds,
                   PAIR_GAP_MS=a.gap_ms, PAIR_SLOT=f"{i}/2/{a.slot_ms}")
            for i, p in enumerate(("bare", "sp"))})

    def corun_turns(seconds):
        stop = os.path.join(work, f"stop-{time.monotonic_ns()}")
        slot = {p: f"{i}/2/{a.turn_ms}" for i, p in enumerate(("bare", "sp"))}
        lp = {p: env(p, "low" if p == "sp" else None, PAIR_LP_SIZE=a.lp_size, PAIR_STOP=stop,
                     PAIR_SLOT=slot[p]) for p in slot}
        hp = {p: env(p, "high" if p == "sp" else None, PAIR_STOP=stop, PAIR_DURATION=seconds,
                     PAIR_GAP_MS=a.gap_ms, PAIR_SLOT=f"{slot[p]}/{a.guard_ms}") for p in slot}
        r = turns_scenario(__file__, stop, lp, hp, 1.0)
        for p in slot:
            r[p]["slot"] = f"{slot[p]}/{a.guard_ms}"
        return r

    plan = {"hp-alone": ("bare", None), "hp-alone-sp": ("sp", None),
            "corun-bare": ("bare", "bare"), "corun-sp": ("sp", "sp"), "lp-alone": (None, "bare"),
            "lp-alone-sp": (None, "sp"), "corun-sp-idle": ("sp", "sp")}
    rows = {}
    for name in a.scenarios.split(","):
        if name == "hp-ab":
            turns(2.0)  # warms both binary caches
            r = turns(a.duration)
            rows["hp-ab-bare"], rows["hp-ab-sp"] = {"hp": r["bare"]}, {"hp": r["sp"]}
            if not os.listdir(shm):
                sys.exit(f"{name}: OpenCV did not use the SoftPreempt platform")
            print(f"ran {name}", file=sys.stderr, flush=True)
            continue
        if name == "corun-ab":
            corun_turns(2 * a.turn_ms / 1e3)  # warms both binary caches
            r = corun_turns(a.duration)
            rows["corun-ab-bare"], rows["corun-ab-sp"] = r["bare"], r["sp"]
            if not os.listdir(shm):
                sys.exit(f"{name}: OpenCV did not use the SoftPreempt platform")
            print(f"ran {name}", file=sys.stderr, flush=True)
            continue
        hp_plat, lp_plat = plan[name]
        idle = name == "corun-sp-idle"
        scenario(hp_plat, lp_plat, 2.0)  # warms the binary caches
        rows[name] = scenario(hp_plat, lp_plat, a.duration, idle)
        # OPENCV_OPENCL_DEVICE chose the platform: a SoftPreempt run leaves its device's
        # arbiter segment behind, a bare run none.
        if (hp_plat == "sp" or lp_plat == "sp") and not os.listdir(shm):
            sys.exit(f"{name}: OpenCV did not use the SoftPreempt platform")
        print(f"ran {name}", file=sys.stderr, flush=True)
    table = {}
    for name, r in rows.items():
        line = {}
        if "lp" in r and "slot" in r:
            line["lp_rate"] = slot_rate(r["lp"]["done_at"], r["slot"])
            line["lp_periods"] = period_rates(r["lp"]["done_at"], r["slot"])
        elif "lp" in r:
            line["lp_rate"] = lp_rate(r["lp"]["done_at"], r.get("hp", {}).get("window"))
        if r.get("hp", {}).get("lat"):
            lat = r["hp"]["lat"]
            line.update(hp_p50=pct(lat, 50), hp_p90=pct(lat, 90), hp_p99=pct(lat, 99), n=len(lat))
        table[name] = line
    alone = table.get("hp-alone", {})
    lp_base = table.get("corun-bare", {}).get("lp_rate")
    turns = table.get("corun-ab-bare"), table.get("corun-ab-sp")
    print(f"{'scenario':<12} {'HP p50 ms':>10} {'HP p90 ms':>10} {'HP p99 ms':>10} "
          f"{'p50/alone':>10} {'p99/alone':>10} {'LP pipe/s':>10} {'LP kept':>8}")
    for name, line in table.items():
        alone = table["hp-ab-bare"] if name.startswith("hp-ab") else table.get("hp-alone", {})
        f = lambda v, fmt: format(v, fmt) if v is not None else "-"
        g = line.get
        ratio = lambda k: g(k) / alone[k] if g(k) is not None and alone.get(k) else None
        base = turns[0].get("lp_rate") if name.startswith("corun-ab") else lp_base
        kept = g("lp_rate") / base if g("lp_rate") and base else None
        print(f"{name:<12} {f(g('hp_p50'), '10.3f')} {f(g('hp_p90'), '10.3f')} "
              f"{f(g('hp_p99'), '10.3f')} {f(ratio('hp_p50'), '10.3f')} "
              f"{f(ratio('hp_p99'), '10.2f')} {f(g('lp_rate'), '10.3f')} {f(kept, '8.3f')}")
    print("ratios: ÷ the HP alone on the bare driver (hp-ab rows: ÷ hp-ab-bare, the same "
          "run's turns); LP kept: ÷ the bare co-run's LP (corun-ab-sp: ÷ corun-ab-bare, the "
          "same run's turns)")
    if all(turns):
        paired = paired_ratios(turns[0]["lp_periods"], turns[1]["lp_periods"])
        if paired:
            m, se = mean_se(paired)
            table["corun-ab-sp"]["lp_paired"] = {"ratios": paired, "mean": m, "se": se}
            print(f"corun-ab LP, SoftPreempt ÷ bare per pair of adjacent turns: mean {m:.3f} "
                  f"± {se:.3f} (standard error), {len(paired)} pairs")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"options": vars(a), "rows": rows, "table": table}, f)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--role":
        role_main(sys.argv[2])
    else:
        main()
