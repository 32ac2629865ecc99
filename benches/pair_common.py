"""What the real-client pair benchmarks (pyopencl_pair.py, opencv_pair.py) share: a private
work folder with one loader vendors folder per platform ("bare": the vendor alone, "sp":
SoftPreempt and the vendor) and a SoftPreempt configuration whose arbiter directory is
private, so nothing else on the machine takes part; and percentiles."""
import os
import tempfile


class Work:
    def __init__(self, prefix, lib, vendor_lib):
        self.dir = tempfile.mkdtemp(prefix=prefix)
        # platform -> (vendors folder for ocl-icd, library list for CUDA's loader)
        self.vendors = {}
        for name, libs in (("bare", [vendor_lib]), ("sp", [lib, vendor_lib])):
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
            f.write(f'version = 1\n[sched]\nshm_dir = "{self.shm}"\n')

    def path(self, name):
        return os.path.join(self.dir, name)


def pct(v, p):
    s = sorted(v)
    return s[min(len(s) - 1, int(p / 100 * len(s)))]


def scenario(script, stop, lp_env, hp_env, seconds, settle):
    """Runs one co-run of `script`'s roles: the LP (when `lp_env` is given) starts first and
    runs alone for `settle` seconds; then the HP (when `hp_env` is given) runs until it
    reports, or nothing runs for `seconds`; then the stop file ends the LP. Returns each
    role's last output line, parsed as JSON."""
    import json
    import subprocess
    import sys
    import time
    procs, out = {}, {}
    if lp_env:
        procs["lp"] = subprocess.Popen([sys.executable, script, "--role", "lp"],
                                       stdout=subprocess.PIPE, text=True, env=lp_env)
        procs["lp"].stdout.readline()
        time.sleep(settle)
    if hp_env:
        procs["hp"] = subprocess.Popen([sys.executable, script, "--role", "hp"],
                                       stdout=subprocess.PIPE, text=True, env=hp_env)
        procs["hp"].stdout.readline()
        out["hp"] = procs["hp"].communicate()[0]
    else:
        time.sleep(seconds)
    open(stop, "w").close()
    res = {}
    for k, p in procs.items():
        o = out.get(k) or p.communicate()[0]
        if p.returncode:
            sys.exit(f"{k} failed ({p.returncode})")
        res[k] = json.loads(o.strip().splitlines()[-1])
    return res
