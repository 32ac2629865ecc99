#!/usr/bin/env python3
"""A real ML co-run with tinygrad: two unmodified tinygrad processes (`DEV=CL`) share one device.

The LP trains an MLP (--in-dim, --hidden twice, 10 classes; Adam, cross-entropy) on one
random batch of --lp-batch rows, step after step, each step a TinyJit replay and a
`.item()` of the loss (as a training loop that logs it does): reported as steps/s while the
HP is measured (each step's completion time, `pair_common.lp_rate`). The HP
answers inference requests through an initialised MLP of the same shape: a batch of
--hp-batch rows in (a host copy), a TinyJit forward, `.numpy()` out (a blocking read),
at Poisson-spaced times (mean gap --gap-ms); reported per request, over its first second
(its arrival next to an LP already running) and after it (steady state).

Scenarios, side by side in one invocation: HP alone (bare), HP alone (SoftPreempt, at
priority high), HP + LP (bare), HP + LP (SoftPreempt, HP high, LP low), LP alone (bare),
and, on request, LP alone (SoftPreempt: lp-alone-sp) and the LP next to a registered HP that
sends nothing (corun-sp-idle: what a registered higher priority alone costs the LP).
Each platform's tinygrad cache (CACHEDB) and vendor kernel cache (XDG_CACHE_HOME) are
private and warmed once before anything is measured, so measured runs load their kernels
from tinygrad's binary cache (clCreateProgramWithBinary), as users' second runs do.

    python3 benches/tinygrad_pair.py --lib target/release/libsoftpreempt.so \\
        --vendor-lib "$(head -n1 /etc/OpenCL/vendors/pocl.icd)" --small

Run it with a Python that has tinygrad and numpy. tinygrad opens the FIRST platform the
loader lists, so the SoftPreempt scenarios' loader sees SoftPreempt alone, which wraps the
vendor named in SOFTPREEMPT_VENDORS; the bare ones see the vendor alone. tinygrad finds
libOpenCL itself; --runtime sets it (tinygrad's OPENCL_PATH). Both loaders are supported:
ocl-icd (reads OCL_ICD_VENDORS) and CUDA's (reads OCL_ICD_FILENAMES); both variables are
set. --json FILE writes every figure.
"""
import argparse
import json
import os
import sys
import time

from pair_common import (Work, cell as f, entry, finish, hp_figures, interleaved, lp_rate,
                         scenario as run_scenario, serve)


def platform_name(dev):
    """The name of the OpenCL platform tinygrad opened, so the driver can check it."""
    import ctypes

    from tinygrad.runtime.autogen import opencl as cl

    pid = cl.cl_platform_id()
    cl.clGetDeviceInfo(dev.cl_dev, cl.CL_DEVICE_PLATFORM, ctypes.sizeof(pid), ctypes.byref(pid),
                       None)
    buf = ctypes.create_string_buffer(256)
    cl.clGetPlatformInfo(pid, cl.CL_PLATFORM_NAME, 256, buf, None)
    return buf.value.decode()


def role_main(role):
    # The driver reads "ready" and one JSON line from stdout; whatever tinygrad prints goes
    # to stderr instead.
    proto = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    import numpy as np
    from tinygrad import Context, Device, Tensor, TinyJit, nn
    from tinygrad.nn.state import get_parameters

    d_in, hidden = int(os.environ["PAIR_IN"]), int(os.environ["PAIR_HIDDEN"])
    warm_only = os.environ.get("PAIR_WARM_ONLY") == "1"
    stop = os.environ.get("PAIR_STOP", "")
    Tensor.manual_seed(1 if role == "hp" else 0)
    layers = [nn.Linear(d_in, hidden), Tensor.relu, nn.Linear(hidden, hidden), Tensor.relu,
              nn.Linear(hidden, 10)]

    def model(x):
        return x.sequential(layers)

    dev = Device[Device.DEFAULT]
    plat = {"platform": platform_name(dev), "device": dev.device_name}
    if role == "hp":
        batch = int(os.environ["PAIR_HP_BATCH"])
        rng = np.random.default_rng(7)
        inputs = [rng.random((batch, d_in), dtype=np.float32) for _ in range(16)]
        infer = TinyJit(lambda x: model(x).realize())

        def request(i):
            return infer(Tensor(inputs[i % len(inputs)])).numpy()

        for i in range(20):  # warm-up: kernels from the cache, JIT capture, buffers
            request(i)
        if warm_only:
            print("ready", flush=True, file=proto)
            print(json.dumps(plat), file=proto, flush=True)
            return
        # SoftPreempt forgets a high-priority client 500 ms after its last work: after this
        # pause the first measured request is an arrival next to a running LP.
        time.sleep(1.0)
        print("ready", flush=True, file=proto)
        # CLOCK_MONOTONIC is system-wide: the LP's completion times are read against it.
        t0 = time.monotonic()
        if os.environ.get("PAIR_HP_IDLE"):
            # Registered at its priority, with its kernels and buffers, but sending
            # nothing: what a registered higher priority alone costs the LP.
            time.sleep(float(os.environ["PAIR_DURATION"]))
            lat, at = [], []
        else:
            lat, at = serve(request, float(os.environ["PAIR_GAP_MS"]),
                            float(os.environ["PAIR_DURATION"]))
        print(json.dumps({"lat": lat, "at": at, "window": [t0, time.monotonic()], **plat}),
              file=proto, flush=True)
        return
    batch = int(os.environ["PAIR_LP_BATCH"])
    opt = nn.optim.Adam(get_parameters(layers), lr=1e-4)
    x = Tensor.randn(batch, d_in).realize()
    y = Tensor.randint(batch, high=10).realize()

    @TinyJit
    def step(x, y):
        with Context(TRAINING=1):
            opt.zero_grad()
            loss = model(x).sparse_categorical_crossentropy(y).backward()
            opt.step()
        return loss.realize()

    # The JIT captures on the second call and replays from the third. The warm run takes
    # more steps: through SoftPreempt a kernel runs as a yielding launch from its third
    # launch on, and its persistent entry's first launches pay the vendor's compile (PoCL:
    # up to half a second a kernel), which the warm run leaves in the caches, as a long
    # training run leaves it behind its first seconds.
    for _ in range(12 if warm_only else 3):
        step(x, y).item()
    print("ready", flush=True, file=proto)
    done, loss, done_at = 0, 0.0, []
    start = time.perf_counter()
    while not warm_only and not os.path.exists(stop):
        loss = step(x, y).item()
        done += 1
        done_at.append(time.monotonic())
    print(json.dumps({"steps": done, "seconds": time.perf_counter() - start, "loss": loss,
                      "done_at": done_at, **plat}), file=proto, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True, help="libsoftpreempt.so")
    ap.add_argument("--vendor-lib", required=True, help="the vendor's ICD library")
    ap.add_argument("--runtime", help="the OpenCL loader tinygrad opens (default: its own search)")
    ap.add_argument("--small", action="store_true",
                    help="CPU sizes (PoCL): --hidden 256 --lp-batch 256 --hp-batch 4")
    ap.add_argument("--in-dim", type=int, default=784)
    ap.add_argument("--hidden", type=int)
    ap.add_argument("--lp-batch", type=int)
    ap.add_argument("--hp-batch", type=int)
    ap.add_argument("--gap-ms", type=float, default=20.0)
    ap.add_argument("--duration", type=float, default=8.0)
    ap.add_argument("--warm-runs", type=int, default=1,
                    help="warm runs per platform before anything is measured (default 1)")
    ap.add_argument("--scenarios", default="hp-alone,hp-alone-sp,corun-bare,corun-sp,lp-alone",
                    help="comma-separated; also lp-alone-sp, corun-sp-idle, and hp-ab: the "
                         "HP alone on both platforms at once, in turns of --slot-ms (the bare "
                         "one in even slots), so that the machine's drift hits both alike "
                         "(rows hp-ab-bare and hp-ab-sp; hp-ab-sp's ratios are ÷ hp-ab-bare)")
    ap.add_argument("--slot-ms", type=float, default=500.0,
                    help="hp-ab: each platform's turn, ms")
    ap.add_argument("--profile", action="store_true",
                    help="SoftPreempt's per-kernel statistics (SOFTPREEMPT_PROFILE) of the "
                         "measured SoftPreempt scenarios: which kernels were sliced, how long "
                         "their pieces ran")
    ap.add_argument("--sched", default="",
                    help="more [sched] lines for SoftPreempt (TOML text; default: none, the "
                         "defaults)")
    ap.add_argument("--json")
    a = ap.parse_args()
    # GPU sizes: each training step's matrix products are millions of work-items.
    for k, gpu, cpu in (("hidden", 2048, 256), ("lp_batch", 8192, 256), ("hp_batch", 16, 4)):
        if getattr(a, k) is None:
            setattr(a, k, cpu if a.small else gpu)
    w = Work("tinygrad-pair-", a.lib, a.vendor_lib, sp_alone=True, sched=a.sched)
    work, conf = w.dir, w.conf

    def env(platform, priority=None, **kw):
        e = dict(os.environ)
        kw.update(DEV="CL", OCL_ICD_VENDORS=w.vendors[platform][0],
                  OCL_ICD_FILENAMES=w.vendors[platform][1],
                  CACHEDB=os.path.join(work, f"tinygrad-{platform}.db"),
                  XDG_CACHE_HOME=os.path.join(work, "xdg-" + platform),
                  SOFTPREEMPT_CONFIG=conf, SOFTPREEMPT_VENDORS=a.vendor_lib,
                  PAIR_IN=a.in_dim, PAIR_HIDDEN=a.hidden, PAIR_LP_BATCH=a.lp_batch,
                  PAIR_HP_BATCH=a.hp_batch, PAIR_GAP_MS=a.gap_ms)
        if a.runtime:
            kw["OPENCL_PATH"] = a.runtime
        if priority:
            kw["SOFTPREEMPT_PRIORITY"] = priority
        e.update({k: str(v) for k, v in kw.items()})
        return e

    def scenario(hp_plat, lp_plat, seconds, profile=None, idle=False, **kw):
        stop = os.path.join(work, f"stop-{time.monotonic_ns()}")
        if profile and "sp" in (hp_plat, lp_plat):
            kw["SOFTPREEMPT_PROFILE"] = profile
        lp_env = lp_plat and env(lp_plat, "low" if lp_plat == "sp" else None, PAIR_STOP=stop,
                                 **kw)
        hp_env = hp_plat and env(hp_plat, "high" if hp_plat == "sp" else None, PAIR_STOP=stop,
                                 PAIR_DURATION=seconds, **({"PAIR_HP_IDLE": 1} if idle else {}),
                                 **kw)
        res = run_scenario(__file__, stop, lp_env, hp_env, seconds, 1.0)
        for role, plat in (("hp", hp_plat), ("lp", lp_plat)):
            if plat and (res[role]["platform"] == "SoftPreempt") != (plat == "sp"):
                sys.exit(f"the {role} opened platform {res[role]['platform']!r}, not {plat}")
        if profile and os.path.exists(profile):
            with open(profile) as f:
                res["profile"] = [json.loads(line) for line in f if line.strip()]
        return res

    def turns(seconds):
        stop = os.path.join(work, f"stop-{time.monotonic_ns()}")
        r = interleaved(__file__, {
            p: env(p, "high" if p == "sp" else None, PAIR_STOP=stop, PAIR_DURATION=seconds,
                   PAIR_SLOT=f"{i}/2/{a.slot_ms}")
            for i, p in enumerate(("bare", "sp"))})
        for p in r:
            if (r[p]["platform"] == "SoftPreempt") != (p == "sp"):
                sys.exit(f"the {p} HP opened platform {r[p]['platform']!r}")
        return r

    # (HP, LP) platforms; hp-ab's are its two HPs'.
    plan = {"hp-alone": ("bare", None), "hp-alone-sp": ("sp", None),
            "corun-bare": ("bare", "bare"), "corun-sp": ("sp", "sp"), "lp-alone": (None, "bare"),
            "lp-alone-sp": (None, "sp"), "corun-sp-idle": ("sp", "sp"), "hp-ab": ("bare", "sp")}
    names = a.scenarios.split(",")
    # Warm runs per platform fill its caches with both roles' kernels (--warm-runs: a
    # second one also finds what the first stored, as a user's third run does).
    for plat in sorted({p for n in names for p in plan[n] if p}):
        for _ in range(a.warm_runs):
            t = time.perf_counter()
            scenario(plat, plat, 0, PAIR_WARM_ONLY=1)
            print(f"warmed {plat} ({time.perf_counter() - t:.0f} s)", file=sys.stderr,
                  flush=True)
    rows = {}
    for name in names:
        if name == "hp-ab":
            r = turns(a.duration)
            rows["hp-ab-bare"], rows["hp-ab-sp"] = {"hp": r["bare"]}, {"hp": r["sp"]}
            print(f"ran {name}", file=sys.stderr, flush=True)
            continue
        rows[name] = scenario(*plan[name], a.duration,
                              profile=a.profile and os.path.join(work, f"profile-{name}.jsonl"),
                              idle=name == "corun-sp-idle")
        print(f"ran {name}", file=sys.stderr, flush=True)

    def figures(r):
        line = hp_figures(r["hp"]["lat"], r["hp"]["at"]) if "hp" in r else {}
        if "lp" in r:
            line["lp_rate"] = lp_rate(r["lp"]["done_at"], r.get("hp", {}).get("window"))
        return line

    table = {name: figures(r) for name, r in rows.items()}
    alone = table.get("hp-alone", {})
    co_base = table.get("corun-bare", {}).get("lp_rate")
    lp_base = table.get("lp-alone", {}).get("lp_rate")
    first = next(iter(rows.values()))
    print(f"device: {(first.get('hp') or first['lp'])['device']}; MLP {a.in_dim}-{a.hidden}-"
          f"{a.hidden}-10; LP batch {a.lp_batch}, HP batch {a.hp_batch}, HP mean gap "
          f"{a.gap_ms} ms")
    print(f"{'scenario':<12} {'HP p50 ms':>10} {'HP p99 ms':>10} {'p50/alone':>10} "
          f"{'p99/alone':>10} {'1st-s p50':>10} {'1st-s p99':>10} {'1st/alone':>10} "
          f"{'LP step/s':>10} {'LP/co-bare':>10} {'LP/alone':>9}")
    for name, line in table.items():
        g = line.get
        ratio = lambda k, base: g(k) / base if g(k) is not None and base else None
        # The HPs in turns are compared with each other.
        hp_base = table["hp-ab-bare"] if name.startswith("hp-ab") else alone
        print(f"{name:<12} {f(g('hp_p50'), '10.3f')} {f(g('hp_p99'), '10.3f')} "
              f"{f(ratio('hp_p50', hp_base.get('hp_p50')), '10.3f')} "
              f"{f(ratio('hp_p99', hp_base.get('hp_p99')), '10.2f')} "
              f"{f(g('first_p50'), '10.3f')} {f(g('first_p99'), '10.3f')} "
              f"{f(ratio('first_p99', hp_base.get('first_p99')), '10.2f')} "
              f"{f(g('lp_rate'), '10.2f')} {f(ratio('lp_rate', co_base), '10.3f')} "
              f"{f(ratio('lp_rate', lp_base), '9.3f')}")
    print("HP figures after its first second (steady); 1st-s: within it (its arrival). "
          "Ratios: HP ÷ HP alone on the bare driver (hp-ab rows: ÷ hp-ab-bare); LP ÷ the "
          "bare co-run's LP, ÷ LP alone")
    for name, r in rows.items():
        if r.get("profile"):
            print(f"SoftPreempt's kernels in {name} (pieces: launches sent in slices; "
                  "times in µs):")
            print(f"  {'kernel':<36} {'priority':<8} {'launches':>8} {'pieces':>8} "
                  f"{'mean':>9} {'max piece':>9} {'yields':>7} {'not asked':>9}")
            for k in sorted(r["profile"], key=lambda k: -k["total_device_ns"]):
                print(f"  {k['kernel'][:36]:<36} {k['priority']:<8} {k['launches']:>8} "
                      f"{k['slices']:>8} {k['mean_device_ns'] / 1e3:>9.1f} "
                      f"{k['max_piece_ns'] / 1e3:>9.1f} {k.get('yields', 0):>7} "
                      f"{k.get('not_asked', 0):>9}")
    finish(a.json, options=vars(a), rows=rows, table=table)


if __name__ == "__main__":
    entry(role_main, main)
