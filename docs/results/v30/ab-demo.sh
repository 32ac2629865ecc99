#!/bin/bash
# The PoCL demo with builds in alternate runs: ROUNDS x LIBS (each /tmp/libs/NAME.so);
# `softpreempt demo --samples SAMPLES` (default 400) per run, one line per run from its
# table: the four scenarios' HP p50/p99, and the LP kept (layered ÷ bare co-run).
cd "$(dirname "$0")/../../.."
ROUNDS=${ROUNDS:-3}; LIBS=${LIBS:-"head new"}
for r in $(seq 1 "$ROUNDS"); do for lib in $LIBS; do
  out=$(SOFTPREEMPT_LIB=/tmp/libs/$lib.so ./target/release/softpreempt demo --samples "${SAMPLES:-400}" 2>/dev/null)
  echo "$out" | python3 -c '
import sys
lib, r = sys.argv[1:]
rows = {}
def ms(v, u): return float(v) / (1000 if u == "µs" else 1)
for l in sys.stdin:
    for name in ("HP alone, bare vendor", "HP + LP, bare vendor", "HP alone, through SoftPreempt", "HP + LP, through SoftPreempt"):
        if l.startswith(name):
            f = l[len(name):].split()
            rows[name] = (ms(f[0], f[1]), ms(f[2], f[3]), None if f[4] == "-" else float(f[4]))
a, b, la, l = (rows[n] for n in ("HP alone, bare vendor", "HP + LP, bare vendor", "HP alone, through SoftPreempt", "HP + LP, through SoftPreempt"))
print(f"{lib:6} r{r} alone p50 {a[0]:.2f} p99 {a[1]:.2f} | layered alone p50 {la[0]:.2f} ({la[0]/a[0]:.3f}x) p99 {la[1]:.2f} | co-run p99 bare {b[1]:.2f} -> layered {l[1]:.2f} ({l[1]/a[1]:.2f}x alone), p50 {b[0]:.2f} -> {l[0]:.2f} | LP {l[2]/b[2]:.3f}", flush=True)
' "$lib" "$r"
done; done
