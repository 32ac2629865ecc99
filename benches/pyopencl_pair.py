#!/usr/bin/env python3
"""A real-client co-run: two unmodified pyopencl processes share one device.

The LP keeps two long launches queued back to back; the HP launches one short kernel at
Poisson-spaced times and waits for it. Each scenario runs once to warm pyopencl's binary
cache (one XDG_CACHE_HOME per platform) and is then measured, so the measured run loads
its programs from the cache, as users' second runs do.

Scenarios, side by side in one invocation: HP alone (bare), HP + LP (bare), HP + LP
(both through SoftPreempt, HP at priority high, LP at low), LP alone (bare). Printed:
HP p50/p99 and their ratio to HP alone, over the HP's first second (its arrival next to an
LP already running for at least a second) and in steady state (after that second), the
preemption latency (HP kernel queued to start, from profiling), LP launches/s and the share
it keeps. The LP's rate is counted inside the HP's measured window (`pair_common.lp_rate`:
launches completed between its first and last completion there ÷ the time between them),
not over the LP's whole run, which includes its time alone before the HP came and after it
left; LP alone: over its whole run.

    python3 benches/pyopencl_pair.py --lib target/release/libsoftpreempt.so \\
        --vendor-lib "$(head -n1 /etc/OpenCL/vendors/pocl.icd)" [--lp-ms 50] [--lp-waves N]

pyopencl's wheel carries its own ocl-icd loader, which reads OCL_ICD_VENDORS: each
platform gets a vendors folder of its own. --json FILE writes every figure.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import time

from pair_common import Work, lp_rate, pct, scenario as run_scenario

SRC = """
__kernel void spin(__global float *out, uint iters, uint mask) {
    size_t i = get_global_id(0);
    float x = (float)(i & 1023) * 1e-3f;
    for (uint k = 0; k < iters; ++k) x = x * 0.999f + 0.5f;
    out[i & mask] = x;
}
"""


def role_main(role):
    import numpy as np
    import pyopencl as cl

    want = os.environ["PAIR_PLATFORM"]
    plat = next(p for p in cl.get_platforms() if (p.name == "SoftPreempt") == (want == "sp"))
    dev = plat.get_devices()[0]
    ctx = cl.Context([dev])
    profiling = cl.command_queue_properties.PROFILING_ENABLE
    # The HP opens its measured queue only when it arrives (below).
    q = None if role == "hp" else cl.CommandQueue(ctx, properties=profiling)
    prg = cl.Program(ctx, SRC).build()
    spin = prg.spin
    out = cl.Buffer(ctx, cl.mem_flags.WRITE_ONLY, 4 * 65536)
    items = int(os.environ["PAIR_ITEMS"])
    gpu = bool(dev.type & cl.device_type.GPU)

    def launch(iters, queue=None):
        return spin(q if queue is None else queue, (items,), None, out, np.uint32(iters), np.uint32(65535))

    if role == "calibrate":
        target = float(os.environ["PAIR_TARGET_MS"])
        iters = 16
        while True:
            launch(iters).wait()
            t = time.perf_counter()
            launch(iters).wait()
            dt = (time.perf_counter() - t) * 1e3
            if dt > target / 4 or iters > 1 << 28:
                break
            iters *= 4
        iters = max(1, int(iters * target / dt))
        launch(iters).wait()
        t = time.perf_counter()
        for _ in range(3):
            launch(iters).wait()
        dt = (time.perf_counter() - t) * 1e3 / 3
        print(json.dumps({"iters": iters, "ms": dt, "device": dev.name, "gpu": gpu,
                          "cus": dev.max_compute_units}))
        return
    iters = int(os.environ["PAIR_ITERS"])
    stop = os.environ["PAIR_STOP"]
    duration = float(os.environ["PAIR_DURATION"])
    if role == "hp":
        # The HP's arrival is measured: its warm-up (lazily compiled code, first touch)
        # runs on a queue of its own that is released before measuring; then the LP runs
        # alone for a second (SoftPreempt forgets a high-priority client 500 ms after its
        # last work), and the first measured request is really next to a running LP.
        warm = cl.CommandQueue(ctx)
        launch(iters, warm).wait()
        warm.finish()
        del warm
        time.sleep(1.0)
        q = cl.CommandQueue(ctx, properties=profiling)
    print("ready", flush=True)
    if role == "lp":
        pending = [launch(iters), launch(iters)]
        done = 0
        # Each launch's completion on CLOCK_MONOTONIC, which the HP's window is read on.
        done_at = []
        start = time.perf_counter()
        while not os.path.exists(stop):
            pending.pop(0).wait()
            done += 1
            done_at.append(time.monotonic())
            pending.append(launch(iters))
        elapsed = time.perf_counter() - start
        for e in pending:
            e.wait()
        print(json.dumps({"launches": done, "seconds": elapsed, "done_at": done_at}))
    else:
        rng = random.Random(7)
        gap = float(os.environ["PAIR_GAP_MS"]) / 1e3
        lat, at, q2s = [], [], []
        # CLOCK_MONOTONIC is system-wide: the LP's completion times are read against it.
        t0 = time.monotonic()
        start = time.perf_counter()
        end = start + duration
        while time.perf_counter() < end:
            time.sleep(rng.expovariate(1 / gap))
            t = time.perf_counter()
            ev = launch(iters)
            ev.wait()
            lat.append((time.perf_counter() - t) * 1e3)
            at.append(t - start)
            q2s.append((ev.profile.start - ev.profile.queued) / 1e6)
        print(json.dumps({"lat": lat, "at": at, "q2s": q2s, "window": [t0, time.monotonic()]}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True, help="libsoftpreempt.so")
    ap.add_argument("--vendor-lib", required=True, help="the vendor's ICD library")
    ap.add_argument("--lp-ms", type=float, default=50.0)
    ap.add_argument("--lp-waves", type=int, default=0,
                    help="long-thread LP: this many device waves, each work-item looping")
    ap.add_argument("--hp-us", type=float, default=450.0)
    ap.add_argument("--gap-ms", type=float, default=20.0)
    ap.add_argument("--duration", type=float, default=8.0)
    ap.add_argument("--json")
    a = ap.parse_args()
    w = Work("pyopencl-pair-", a.lib, a.vendor_lib)
    work, conf = w.dir, w.conf
    vendors = {k: v[0] for k, v in w.vendors.items()}

    def env(platform, priority=None, **kw):
        e = dict(os.environ)
        e.update(OCL_ICD_VENDORS=vendors[platform], PAIR_PLATFORM=platform,
                 XDG_CACHE_HOME=os.path.join(work, "cache-" + platform),
                 SOFTPREEMPT_CONFIG=conf)
        e.pop("OCL_ICD_FILENAMES", None)
        if priority:
            e["SOFTPREEMPT_PRIORITY"] = priority
        e.update({k: str(v) for k, v in kw.items()})
        return e

    def run(role, platform, **kw):
        out = subprocess.run([sys.executable, __file__, "--role", role],
                             env=env(platform, **kw), capture_output=True, text=True,
                             check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])

    # Sizes: a GPU needs many work-items to be busy; a CPU device few.
    probe = run("calibrate", "bare", PAIR_ITEMS=64, PAIR_TARGET_MS=1)
    gpu = probe["gpu"]
    wave = probe["cus"] * (2048 if gpu else 128)
    lp_items = wave * a.lp_waves if a.lp_waves else (wave * 64 if gpu else 8192)
    hp_items = wave if gpu else 256
    lp = run("calibrate", "bare", PAIR_ITEMS=lp_items, PAIR_TARGET_MS=a.lp_ms)
    hp = run("calibrate", "bare", PAIR_ITEMS=hp_items, PAIR_TARGET_MS=a.hp_us / 1e3)
    print(f"device: {lp['device']}; LP {lp_items} items x {lp['iters']} iters = "
          f"{lp['ms']:.2f} ms; HP {hp_items} items x {hp['iters']} iters = {hp['ms']:.3f} ms; "
          f"HP mean gap {a.gap_ms} ms", flush=True)

    def scenario(hp_plat, lp_plat, seconds):
        stop = os.path.join(work, f"stop-{time.monotonic_ns()}")
        lp_env = lp_plat and env(lp_plat, "low" if lp_plat == "sp" else None,
                                 PAIR_ITEMS=lp_items, PAIR_ITERS=lp["iters"], PAIR_STOP=stop,
                                 PAIR_DURATION=seconds)
        hp_env = hp_plat and env(hp_plat, "high" if hp_plat == "sp" else None,
                                 PAIR_ITEMS=hp_items, PAIR_ITERS=hp["iters"], PAIR_STOP=stop,
                                 PAIR_DURATION=seconds, PAIR_GAP_MS=a.gap_ms)
        return run_scenario(__file__, stop, lp_env, hp_env, seconds,
                            max(0.5, 3 * lp["ms"] / 1e3))

    rows = {}
    for name, hp_plat, lp_plat in (("hp-alone", "bare", None), ("corun-bare", "bare", "bare"),
                                   ("corun-sp", "sp", "sp"), ("lp-alone", None, "bare")):
        scenario(hp_plat, lp_plat, 2.0)  # warms the binary caches
        rows[name] = scenario(hp_plat, lp_plat, a.duration)
        print(f"ran {name}", file=sys.stderr, flush=True)
    table = {}
    for name, r in rows.items():
        h = r.get("hp")
        line = {"lp_rate": lp_rate(r["lp"]["done_at"], h and h["window"]) if "lp" in r
                else None}
        if h:
            # Steady state: after the HP's first second; first: within it.
            first = [i for i, t in enumerate(h["at"]) if t < 1.0]
            steady = [i for i, t in enumerate(h["at"]) if t >= 1.0] or first
            for keys, idx in ((("hp_p50", "hp_p99", "q2s_p99"), steady),
                              (("first_p50", "first_p99", "first_q2s_p99"), first)):
                lat = [h["lat"][i] for i in idx]
                q2s = [h["q2s"][i] for i in idx]
                line.update(zip(keys, (pct(lat, 50), pct(lat, 99), pct(q2s, 99))))
        table[name] = line
    alone = table["hp-alone"]
    base = table["lp-alone"]["lp_rate"]
    print(f"{'scenario':<12} {'HP p50 ms':>10} {'HP p99 ms':>10} {'p99/alone':>10} "
          f"{'1st-s p99':>10} {'1st/alone':>10} {'q2s p99':>8} {'LP launch/s':>12} "
          f"{'LP kept':>8}")
    for name, line in table.items():
        f = lambda v, fmt: format(v, fmt) if v is not None else "-"
        g = line.get
        print(f"{name:<12} {f(g('hp_p50'), '10.3f')} {f(g('hp_p99'), '10.3f')} "
              f"{f(g('hp_p99') and g('hp_p99') / alone['hp_p99'], '10.2f')} "
              f"{f(g('first_p99'), '10.3f')} "
              f"{f(g('first_p99') and g('first_p99') / alone['first_p99'], '10.2f')} "
              f"{f(g('q2s_p99'), '8.3f')} {f(g('lp_rate'), '12.2f')} "
              f"{f(g('lp_rate') and base and g('lp_rate') / base, '8.3f')}")
    print("steady: the HP after its first second; 1st-s: its first second (one arrival)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"options": vars(a), "lp": lp, "hp": hp, "rows": rows, "table": table},
                      f)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--role":
        role_main(sys.argv[2])
    else:
        main()
