#!/usr/bin/env python3
"""Reads the launch times that `softpreempt demo` children write when
SOFTPREEMPT_DEMO_TIMELINE names a directory (`hp-bare-PID.txt`, `lp-layered-PID.txt`, ...:
one `start_ns end_ns` line per launch) and says, for each co-run, how the HP's latency
depends on how long before it the LP's latest launch began.

On NVIDIA's driver an HP kernel launched within about 2.5 ms of a new LP submission waits
until about 2.5 ms after it (session 39's bare-driver probe), and so does one launched
within about 2.5 ms of the end of the HP's previous request, when the driver gave the
device back to the LP (session 40). This tells whether a run's tail is those launches (and
how many there were, bare against layered), or something else.

Usage: scripts/demo-timeline.py DIR [--window-ms 2.6] [--top 12]
"""
import argparse
import bisect
import glob
import os
import sys


def read(path):
    with open(path) as f:
        return [tuple(int(x) for x in line.split()) for line in f if line.strip()]


def pct(xs, p):
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def runs(d):
    """(label, hp launches, lp launches or None), in the order the runs were made."""
    files = {"hp": [], "lp": []}
    for p in glob.glob(os.path.join(d, "*.txt")):
        role, label, _pid = os.path.basename(p)[:-4].split("-", 2)
        rows = read(p)
        if rows and role in files:
            files[role].append((label, rows))
    out = []
    for label, hp in sorted(files["hp"], key=lambda x: x[1][0][0]):
        lp = [rows for lb, rows in files["lp"] if lb == label and rows[0][0] < hp[-1][0] and rows[-1][1] > hp[0][0]]
        out.append((label, hp, lp[0] if lp else None))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--window-ms", type=float, default=2.6)
    ap.add_argument("--top", type=int, default=12)
    a = ap.parse_args()
    found = runs(a.dir)
    if not found:
        sys.exit(f"{a.dir}: no demo timeline files")
    for label, hp, lp in found:
        lat = [(e - s) / 1e6 for s, e in hp]
        head = f"{label}{' + LP' if lp else ' alone'}: {len(hp)} HP launches, p50 {pct(lat, 50):.3f} p99 {pct(lat, 99):.3f} max {max(lat):.3f} ms"
        if not lp:
            print(head)
            continue
        starts = [s for s, _ in lp]
        gaps = [(lp[i + 1][0] - lp[i][1]) / 1e3 for i in range(len(lp) - 1)]
        durs = [(e - s) / 1e6 for s, e in lp]
        rows = []
        prev_end = None
        for (s, e), ms in zip(hp, lat):
            i = bisect.bisect_right(starts, s) - 1
            since = (s - starts[i]) / 1e6 if i >= 0 else float("inf")
            # An LP launch that began while this HP launch was in flight.
            j = bisect.bisect_right(starts, s)
            during = j < len(starts) and starts[j] < e
            after_hp = (s - prev_end) / 1e6 if prev_end is not None else float("inf")
            prev_end = e
            rows.append((ms, since, during, after_hp))
        w = a.window_ms
        groups = [
            (f"within {w} ms after an LP launch began", [r for r in rows if r[1] < w]),
            (f"within {w} ms after the HP's previous launch ended", [r for r in rows if r[1] >= w and r[3] < w]),
            ("neither", [r for r in rows if r[1] >= w and r[3] >= w]),
        ]
        print(head)
        print(
            f"  LP: {len(lp)} launches, {pct(durs, 50):.2f} ms each (p50), gap between p50 {pct(gaps, 50):.0f} µs p99 {pct(gaps, 99):.0f} µs; "
            f"an LP launch began during {sum(r[2] for r in rows)} HP launches"
        )
        for name, g in groups:
            ms = [r[0] for r in g]
            print(
                f"  HP launches {name}: {len(g)} ({100 * len(g) / len(rows):.1f}%), latency p50 {pct(ms, 50):.3f} "
                f"p99 {pct(ms, 99):.3f} max {max(ms, default=float('nan')):.3f} ms"
            )
        if a.top:
            print(f"  slowest {a.top}: latency ms (ms since the LP's latest launch began; since the HP's previous ended)")
            for ms, since, during, after_hp in sorted(rows, reverse=True)[: a.top]:
                print(f"    {ms:7.3f}  ({since:8.3f}{', an LP launch began during' if during else ''}; {after_hp:8.3f})")

if __name__ == "__main__":
    main()
