"""What the real-client pair benchmarks (pyopencl_pair.py, opencv_pair.py, tinygrad_pair.py)
share: a private work folder with one loader vendors folder per platform ("bare": the vendor
alone, "sp": SoftPreempt and the vendor, or SoftPreempt alone with `sp_alone` for clients
that take the first platform) and a SoftPreempt configuration whose arbiter directory is
private, so nothing else on the machine takes part; and percentiles."""
import os
import tempfile


class Work:
    def __init__(self, prefix, lib, vendor_lib, sp_alone=False, sched=""):
        self.dir = tempfile.mkdtemp(prefix=prefix)
        # A relative path in a vendors folder would be resolved against each client's working
        # directory; a bare name (for dlopen's search) stays as it is.
        lib, vendor_lib = (os.path.abspath(p) if os.sep in p else p for p in (lib, vendor_lib))
        # platform -> (vendors folder for ocl-icd, library list for CUDA's loader)
        self.vendors = {}
        # With `sp_alone` the loader sees SoftPreempt only, which finds the vendor it wraps in
        # SOFTPREEMPT_VENDORS (the caller sets it to `vendor_lib`).
        sp_libs = [lib] if sp_alone else [lib, vendor_lib]
        for name, libs in (("bare", [vendor_lib]), ("sp", sp_libs)):
            d = os.path.join(self.dir, "vendors-" + name)
            os.makedirs(d)
            for i, path in enumerate(libs):
                with open(os.path.join(d, f"{i}-{name}.icd"), "w") as f:
                    f.write(path + "\n")
            self.vendors[name] = (d, ":".join(libs))
        self.conf = os.path.join(self.dir, "softpreempt.toml")
        self.shm = os.path.join(self.dir, "shm")
        os.makedirs(self.shm)
        with open(self.conf, "w") as f:
            # `sched`: more [sched] lines (a setting under study; the default is none).
            f.write(f'version = 1\n[sched]\nshm_dir = "{self.shm}"\n{sched}\n')

    def path(self, name):
        return os.path.join(self.dir, name)


def cell(v, spec):
    """`v` formatted by `spec` (such as "10.3f"), or "-" in the same width where absent."""
    return format(v, spec) if v is not None else format("-", ">" + spec.split(".")[0])


def finish(path, **figures):
    """Writes `figures` as JSON to `path` (the --json option), when given."""
    import json
    if path:
        with open(path, "w") as f:
            json.dump(figures, f)


def entry(role_main, main):
    """A pair script's entry point: `--role NAME` runs one client process, else the driver."""
    import sys
    if len(sys.argv) == 3 and sys.argv[1] == "--role":
        role_main(sys.argv[2])
    else:
        main()


class Slot:
    """A client's turns ("K/N/MS" or "K/N/MS/GUARD", as the PAIR_SLOT variable): the K-th
    of every N slots of MS milliseconds of CLOCK_MONOTONIC (system-wide). With GUARD (ms),
    a slot's first GUARD ms are its settling part: an HP sends nothing then, so the other
    pair's LP can finish the piece it began in its own slot (`corun-ab`)."""

    def __init__(self, spec):
        f = [float(x) for x in spec.split("/")]
        self.k, n, ms = f[:3]
        self.width = ms / 1e3
        self.period = n * self.width
        self.guard = (f[3] if len(f) > 3 else 0.0) / 1e3

    def pos(self, t):
        """Seconds since the start of this client's slot in the current period (≥ width:
        outside it)."""
        return (t - self.k * self.width) % self.period

    def wait(self, start=0.0, end_margin=0.0):
        """Sleeps until the monotonic clock is inside [start, width - end_margin) of this
        client's slot (start: seconds after the slot begins)."""
        import time
        pos = self.pos(time.monotonic())
        if pos >= self.width - end_margin:
            time.sleep(self.period - pos + start)
        elif pos < start:
            time.sleep(start - pos)

    def active(self, t):
        """Whether monotonic time `t` lies in this slot's measured part (after the guard)."""
        return self.guard <= self.pos(t) < self.width

    def span(self, t):
        """Which period `t` lies in (the same for two times in one slot)."""
        return int((t - self.k * self.width) // self.period)


def serve(request, gap_ms, duration, seed=11, slot=None):
    """The HP's measured part: `request(i)` at Poisson-spaced times (mean gap `gap_ms`) for
    `duration` seconds. Returns each request's latency (ms) and start (s from the first).

    `slot` (a `Slot` spec, default the PAIR_SLOT variable): requests only in this client's
    slots, after their guard and none within 5 ms of their end. Two clients of one machine
    so take turns (`hp-ab`, `corun-ab`): their drift, which moved a lone OpenCV HP's 2 s
    medians by ±15% on an H100, hits both alike, and neither's requests overlap the
    other's."""
    import random
    import time
    slot = slot or os.environ.get("PAIR_SLOT")
    slot = Slot(slot) if slot else None
    r = random.Random(seed)
    lat, at = [], []
    start = time.perf_counter()
    end = start + duration
    while time.perf_counter() < end:
        time.sleep(r.expovariate(1e3 / gap_ms))
        if slot:
            slot.wait(slot.guard, 5e-3)
        t = time.perf_counter()
        request(len(lat))
        lat.append((time.perf_counter() - t) * 1e3)
        at.append(t - start)
    return lat, at


def _turn_intervals(done_at, slot):
    """The intervals between consecutive completions of an LP that both lie in the
    measured part of one of its slots (`Slot.active`), by period (`Slot.span`): {period:
    (count, total seconds)}. Its pieces that spill into the other pair's slot, and the
    other pair's that spill into its own, fall outside."""
    slot = Slot(slot)
    per = {}
    for a, b in zip(done_at, done_at[1:]):
        if slot.active(a) and slot.active(b) and slot.span(a) == slot.span(b):
            n, total = per.get(slot.span(a), (0, 0.0))
            per[slot.span(a)] = (n + 1, total + b - a)
    return per


def slot_rate(done_at, slot):
    """An LP's rate (units per second) in its slots' measured parts: the intervals counted
    ÷ their total length (`_turn_intervals`). None with no such interval."""
    per = _turn_intervals(done_at, slot).values()
    n, total = sum(p[0] for p in per), sum(p[1] for p in per)
    return n / total if n else None


def period_rates(done_at, slot):
    """An LP's rate in each of its slots' measured parts, by period."""
    return {k: n / total for k, (n, total) in _turn_intervals(done_at, slot).items()}


def paired_ratios(base, other):
    """`other`'s rate ÷ `base`'s, per period both measured (`period_rates`' keys: a slot
    and the next of the other pair share a period), in period order."""
    return [other[k] / base[k] for k in sorted(base) if k in other]


def mean_se(v):
    """Mean and standard error of `v` (the error 0 for fewer than two values)."""
    import statistics
    m = statistics.fmean(v)
    return m, (statistics.stdev(v) / len(v) ** 0.5 if len(v) > 1 else 0.0)


def pct(v, p):
    s = sorted(v)
    return s[min(len(s) - 1, int(p / 100 * len(s)))]


def lp_rate(done_at, window=None):
    """An LP's rate, in its own units (pipelines, steps) per second, from the times its
    units completed (CLOCK_MONOTONIC, s): units between its first and last completion
    inside `window` (the HP's measured span, [start, end]) ÷ the time between them. Counting
    whole units over the whole run instead loses the unfinished last one and counts the LP's
    time alone before the HP came: with pipelines of half a second, one run's rate moved by
    up to a tenth from that alone. None when fewer than two completed in the window."""
    lo, hi = window or (float("-inf"), float("inf"))
    t = [x for x in done_at if lo <= x <= hi]
    if len(t) < 2 or t[-1] <= t[0]:
        return None
    return (len(t) - 1) / (t[-1] - t[0])


def hp_figures(lat, at):
    """HP latency percentiles (ms) in steady state (requests after the HP's first second) and
    over its first second (its arrival next to an LP already running)."""
    first = [v for v, t in zip(lat, at) if t < 1.0]
    steady = [v for v, t in zip(lat, at) if t >= 1.0] or first
    out = {"n": len(lat)}
    for prefix, vals in (("hp", steady), ("first", first)):
        if vals:
            out.update({f"{prefix}_p50": pct(vals, 50), f"{prefix}_p99": pct(vals, 99)})
    return out


def interleaved(script, envs):
    """Runs `script`'s HP role once per environment of `envs` (name -> environment, each
    with its own PAIR_SLOT) at the same time, so they take turns on the device; returns
    each one's last output line, parsed as JSON, by name."""
    import json
    import sys
    procs = {k: role(script, "hp", e) for k, e in envs.items()}
    res = {}
    for k, p in procs.items():
        o = p.communicate()[0]
        if p.returncode:
            sys.exit(f"hp {k} failed ({p.returncode})")
        res[k] = json.loads(o.strip().splitlines()[-1])
    return res


def scenario(script, stop, lp_env, hp_env, seconds, settle):
    """Runs one co-run of `script`'s roles: the LP (when `lp_env` is given) starts first and
    runs alone for `settle` seconds; then the HP (when `hp_env` is given) runs until it
    reports, or nothing runs for `seconds`; then the stop file ends the LP. Returns each
    role's last output line, parsed as JSON."""
    import time
    procs, out = {}, {}
    if lp_env:
        procs["lp"] = role(script, "lp", lp_env)
        procs["lp"].stdout.readline()
        time.sleep(settle)
    if hp_env:
        procs["hp"] = role(script, "hp", hp_env)
        procs["hp"].stdout.readline()
        out["hp"] = procs["hp"].communicate()[0]
    else:
        time.sleep(seconds)
    return stop_and_collect(stop, procs, out)


def role(script, name, env):
    """Starts `script`'s client role `name` ("lp" or "hp") in `env`, its output piped."""
    import subprocess
    import sys
    return subprocess.Popen([sys.executable, script, "--role", name], stdout=subprocess.PIPE,
                            text=True, env=env)


def stop_and_collect(stop, procs, out):
    """Creates the stop file (which ends the LPs), then waits for every process of `procs`
    (key -> process; `out` holds the output of those already waited for) and returns each
    one's last output line parsed as JSON, by key; exits if one failed."""
    import json
    import sys
    open(stop, "w").close()
    res = {}
    for k, p in procs.items():
        o = out.get(k) or p.communicate()[0]
        if p.returncode:
            sys.exit(f"{k} failed ({p.returncode})")
        res[k] = json.loads(o.strip().splitlines()[-1])
    return res


def turns_scenario(script, stop, lp_envs, hp_envs, settle):
    """Two co-runs in turns (`corun-ab`): every pair's LP (`lp_envs`, name -> environment
    with its PAIR_SLOT) starts and works in its own slots only; after `settle` seconds every
    pair's HP (`hp_envs`, the same names and slots, with a guard) starts; when the HPs
    report, the stop file ends the LPs. Returns {name: {"lp": ..., "hp": ...}}, each role's
    last output line parsed as JSON."""
    import time
    procs = {("lp", k): role(script, "lp", e) for k, e in lp_envs.items()}
    for p in procs.values():
        p.stdout.readline()
    time.sleep(settle)
    procs.update({("hp", k): role(script, "hp", e) for k, e in hp_envs.items()})
    out = {key: procs[key].communicate()[0] for key in procs if key[0] == "hp"}
    res = {}
    for (r, k), v in stop_and_collect(stop, procs, out).items():
        res.setdefault(k, {})[r] = v
    return res
