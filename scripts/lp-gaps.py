#!/usr/bin/env python3
"""Where a low-priority client's device time goes next to a higher priority, from
SoftPreempt's Chrome traces (`SOFTPREEMPT_TRACE=DIR`; one file per process).

For the LP process (the one whose queue says [low]): its pieces' device intervals, the
idle gaps between them, and each gap classified:
  - "yield": a higher priority's handshake began inside it (or just before it), so the gap
    is the hand-over: split into LP off the device -> the HP submits (handshake end),
    HP submit -> the LP's next grant, grant -> the LP's next piece on the device;
  - "other": a gap with no handshake (a piece boundary: slicing, a yielding run's
    round trip, the submitter's own latency).
Prints totals per second of span, counts and medians. Usage: lp-gaps.py DIR [--from S]
(--from: skip the first S seconds of the LP's span, warm-up).
"""
import glob
import json
import statistics
import sys


def load(path):
    d = json.load(open(path))
    return d["traceEvents"] if isinstance(d, dict) else d


def queue_priorities(events):
    return {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}


def pct(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    args = sys.argv[1:]
    skip_s = 0.0
    if "--from" in args:
        i = args.index("--from")
        skip_s = float(args[i + 1])
        del args[i : i + 2]
    lp, hps = [], []
    for f in sorted(glob.glob(args[0] + "/*.json")):
        ev = load(f)
        names = " ".join(queue_priorities(ev).values())
        (lp if "[low]" in names else hps).append(ev)
    if not lp:
        sys.exit("no trace with a [low] queue")
    for ev in lp:
        pieces = sorted(
            (e["ts"], e["ts"] + e["dur"], e.get("args", {}))
            for e in ev
            if e.get("cat") == "slice" and e.get("ph") == "X"
        )
        grants = sorted(e["ts"] for e in ev if e.get("name") == "grant" and e.get("ph") == "i")
        if not pieces:
            continue
        t0 = pieces[0][0] + skip_s * 1e6
        pieces = [p for p in pieces if p[0] >= t0]
        hs = sorted(
            (e["ts"], e["ts"] + e["dur"], e["args"].get("expired", False))
            for h in hps
            for e in h
            if e.get("name") == "yield handshake"
        )
        span = pieces[-1][1] - pieces[0][0]
        # Union of device intervals (pieces may overlap when several are in flight).
        busy, cur_s, cur_e = 0.0, pieces[0][0], pieces[0][1]
        gaps = []
        for s, e, a in pieces[1:]:
            if s > cur_e:
                busy += cur_e - cur_s
                gaps.append((cur_e, s, a))
                cur_s, cur_e = s, e
            else:
                cur_e = max(cur_e, e)
        busy += cur_e - cur_s
        yields, other = [], []
        hi = 0
        for ge, gs, a in gaps:
            # a handshake that started within 1 ms before the gap's start or inside the gap
            while hi < len(hs) and hs[hi][1] < ge - 1000:
                hi += 1
            h = next((x for x in hs[hi:] if x[0] <= gs and x[1] >= ge - 1000), None)
            if h:
                g = next((t for t in grants if t >= h[1]), None)
                yields.append(
                    dict(
                        gap=gs - ge,
                        off_to_submit=max(0.0, h[1] - ge),
                        submit_to_grant=(g - h[1]) if g and g <= gs else float("nan"),
                        grant_to_start=(gs - g) if g and g <= gs else float("nan"),
                        expired=h[2],
                        asked_before_off=h[0] <= ge,
                    )
                )
            else:
                other.append((gs - ge, a))
        per_s = 1e6 / span
        print(f"{args[0]}: LP span {span / 1e6:.2f} s, {len(pieces)} pieces, device busy "
              f"{busy / span:.4f} of the span; handshakes {len(hs)}")
        yg = [y["gap"] for y in yields]
        print(f"  gaps with a handshake: {len(yields)} ({len(yields) * per_s:.1f}/s), "
              f"{sum(yg) * per_s / 1e3:.1f} ms/s idle; gap p50 {pct(yg, .5):.0f} µs "
              f"p90 {pct(yg, .9):.0f} µs")
        for k in ("off_to_submit", "submit_to_grant", "grant_to_start"):
            xs = [y[k] for y in yields if y[k] == y[k]]
            if xs:
                print(f"    {k:16s} p50 {pct(xs, .5):7.0f} µs  p90 {pct(xs, .9):7.0f}  "
                      f"mean {statistics.mean(xs):7.0f}  ({len(xs)})")
        print(f"    expired {sum(y['expired'] for y in yields)}; HP asked before the LP "
              f"left: {sum(y['asked_before_off'] for y in yields)}")
        og = [g for g, _ in other]
        print(f"  gaps without one: {len(other)} ({len(other) * per_s:.1f}/s), "
              f"{sum(og) * per_s / 1e3:.1f} ms/s idle; p50 {pct(og, .5):.0f} µs "
              f"p90 {pct(og, .9):.0f} µs p99 {pct(og, .99):.0f} µs")
        kinds = {}
        for g, a in other:
            k = "yielding run" if "yielding_run" in a else "slice"
            kinds.setdefault(k, []).append(g)
        for k, xs in kinds.items():
            print(f"    next piece a {k}: {len(xs)}, {sum(xs) * per_s / 1e3:.1f} ms/s, "
                  f"p50 {pct(xs, .5):.0f} µs")
        sizes = [e - s for s, e, _ in pieces]
        print(f"  pieces: p50 {pct(sizes, .5) / 1e3:.2f} ms, p10 {pct(sizes, .1) / 1e3:.2f} "
              f"ms, {len(pieces) * per_s:.1f}/s")


if __name__ == "__main__":
    main()
