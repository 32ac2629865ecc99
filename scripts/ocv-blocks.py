#!/usr/bin/env python3
"""The OpenCV pair's LP per matchTemplate block, from SoftPreempt's Chrome traces
(`SOFTPREEMPT_TRACE=DIR`, one file per process; `scripts/gpu/opencv-trace.sh` keeps them).

The LP is the process with the most "direct launch" events. A block is one launch of
`mulAndScaleSpectrums` (one per matchTemplate block, whether it went direct or through the
FIFO). Per block: launches through the FIFO, drains (the application waiting for its FIFO
to reach the vendor) and their time, grant waits, and blocks per second of the trace.
A rate the machine's noise swamps (the pair's LP pipelines/s) becomes counts the layer
controls. Usage: ocv-blocks.py DIR [DIR...] (one row per directory).
"""
import glob
import json
import statistics
import sys

BLOCK_KERNEL = "mulAndScaleSpectrums"


def load(path):
    d = json.load(open(path))
    return d["traceEvents"] if isinstance(d, dict) else d


def lp_events(directory):
    best = None
    for f in glob.glob(directory + "/*.json"):
        ev = load(f)
        n = sum(1 for e in ev if e.get("name") == "direct launch")
        if best is None or n > best[0]:
            best = (n, ev)
    return best[1] if best else []


def row(directory):
    ev = lp_events(directory)
    direct = [e for e in ev if e.get("name") == "direct launch"]
    pieces = [e for e in ev if e.get("ph") == "X" and e.get("cat") not in ("drain", "grant")
              and e.get("name") not in ("drain", "wait for grant")]
    drains = [e["dur"] for e in ev if e.get("name") == "drain"]
    grants = [e["dur"] for e in ev if e.get("name") == "wait for grant"]
    blocks = sum(1 for e in direct if e["args"].get("kernel") == BLOCK_KERNEL)
    blocks += sum(1 for e in pieces if e["name"] == BLOCK_KERNEL)
    stamps = [e["ts"] for e in ev if "ts" in e and e.get("ph") != "M"]
    span_s = (max(stamps) - min(stamps)) / 1e6 if stamps else 0
    b = max(blocks, 1)
    return {
        "dir": directory,
        "blocks": blocks,
        "blocks/s": blocks / span_s if span_s else 0,
        "fifo/block": len(pieces) / b,
        "drains/block": len(drains) / b,
        "drain us/block": sum(drains) / b,
        "drain p50 us": statistics.median(drains) if drains else 0,
        "grant wait us/block": sum(grants) / b,
    }


def main():
    rows = [row(d) for d in sys.argv[1:]]
    keys = [k for k in rows[0] if k != "dir"] if rows else []
    print("| trace | " + " | ".join(keys) + " |")
    print("|---|" + "---:|" * len(keys))
    for r in rows:
        cells = [f"{r[k]:.0f}" if k == "blocks" else f"{r[k]:.2f}" for k in keys]
        print(f"| {r['dir']} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
