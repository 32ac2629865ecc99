#!/usr/bin/env bash
# Where the OpenCV pair's LP spends its time, call by call (after scripts/gpu/pack-yield.sh and
# scripts/gpu/cltime.py --out carry/cltime): the pair's scenarios SCEN (default: the bare
# co-run, the SoftPreempt co-run, and the LP next to a registered idle HP), each with every
# OpenCL call of both processes timed by libcltime.so, DURATION s each (default 15), for each
# library of LIBS (default "cur": carry/bin/libsoftpreempt.so; X: carry/bin/libsoftpreempt-X.so),
# ROUNDS times (default 1), interleaved. Prints the LP's rate and busiest calls per run
# (count, total ms, mean µs); results in $OUT/calls.tgz.
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu-env.sh
R=$(mktemp -d)/calls; mkdir -p "$R"
RT=/usr/local/cuda/targets/x86_64-linux/lib/libOpenCL.so.1
for round in $(seq "${ROUNDS:-1}"); do
  for lib in ${LIBS:-cur}; do
    path=$SOFTPREEMPT_LIB; [ "$lib" = cur ] || path=$PWD/carry/bin/libsoftpreempt-$lib.so
    for s in ${SCEN:-corun-bare corun-sp corun-sp-idle}; do
      d=$R/$round-$lib-$s; mkdir -p "$d"
      CLTIME_REAL=$RT CLTIME_OUT=$d/ python3 benches/opencv_pair.py --lib "$path" \
        --vendor-lib "$NV" --runtime "$PWD/carry/cltime/libcltime.so" --device-type GPU \
        --bare-platform 'NVIDIA CUDA' --duration "${DURATION:-15}" --scenarios "$s" \
        --json "$d/pair.json" ${SCHED:+--sched "$SCHED"} 2> "$d/err.txt" > /dev/null
    done
  done
done
python3 - "$R" <<'PY'
import glob, json, os, sys
r = sys.argv[1]
for d in sorted(glob.glob(r + "/*/")):
    files = [json.load(open(f)) for f in glob.glob(d + "cltime-*.json")]
    lp = max(files, key=lambda t: t.get("clEnqueueNDRangeKernel", [0])[0], default={})
    row = next(iter(json.load(open(d + "pair.json"))["table"].values()))
    figs = " ".join(f"{k} {v:.3f}" for k, v in row.items() if isinstance(v, float))
    print(f"== {os.path.basename(d[:-1])}: {figs}")
    for name, (n, tot, mx) in sorted(lp.items(), key=lambda kv: -kv[1][1])[:int(os.environ.get("TOP", "6"))]:
        print(f"  {name:<28} {n:>8} {tot / 1e6:>10.1f} ms {tot / n / 1e3:>9.2f} µs  max {mx / 1e3:>9.0f} µs")
PY
tar czf "$OUT/calls.tgz" -C "$(dirname "$R")" calls
