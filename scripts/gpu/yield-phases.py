#!/usr/bin/env python3
"""The yield's phases from SoftPreempt's Chrome traces (SOFTPREEMPT_TRACE), per directory.

Usage: python3 scripts/gpu/yield-phases.py TRACE_DIR...  (e.g. the trace-ROW-LIB-REP
directories of `TRACE=1 bash scripts/gpu/ab-rows.sh`). For each directory: the LP's yield
phases ("yield: ..." slices: from the HP's request to the word's write, the write, and from
it to the run seen off the device) and the HP's handshake waits ("yield handshake"), as
p50/p90/p99 in µs, with how many waits reached their bound.
"""
import collections
import glob
import json
import sys


def load(path):
    text = open(path).read().rstrip()
    if not text.endswith("}"):  # a process that was killed leaves the list open
        text += "]}"
    return json.loads(text)["traceEvents"]


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * len(values)))] if values else float("nan")


def line(name, values, extra=""):
    return (f"  {name:40s} n={len(values):4d} p50={pct(values, 50):7.1f} "
            f"p90={pct(values, 90):7.1f} p99={pct(values, 99):7.1f} us{extra}")


for d in sys.argv[1:]:
    print("==", d)
    phases = collections.defaultdict(list)
    waits = []
    for f in glob.glob(d + "/*.json"):
        for e in load(f):
            if e.get("ph") != "X":
                continue
            if e["name"].startswith("yield:"):
                phases[e["name"]].append(e["dur"])
            elif e["name"] == "yield handshake":
                waits.append((e["dur"], bool(e["args"].get("expired"))))
    for name, values in phases.items():
        print(line(name, values))
    expired = sum(1 for _, x in waits if x)
    print(line("HP handshake wait", [w for w, _ in waits], f" expired={expired}"))
