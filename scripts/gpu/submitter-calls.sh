#!/usr/bin/env bash
# The submitter's cost per piece on the GPU machine, step by step: the OpenCV pair's
# scenarios SCEN (default: the LP next to an idle registered HP, then the co-run) through a
# diagnostic build with the cargo feature `calltime` (carry/bin/libsoftpreempt-calltime.so:
# `cargo build --release -p softpreempt-icd --features calltime`), DURATION s each (default
# 10). CT_LIBS (default "calltime") names the builds to compare, each
# carry/bin/libsoftpreempt-NAME.so, run in turn per scenario. Prints, for the process with
# the most pieces, each timed step (count, mean µs). Results: $OUT/submitter-calls.tgz.
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu-env.sh
R=$(mktemp -d)/subcalls; mkdir -p "$R"
for s in ${SCEN:-corun-sp-idle corun-sp}; do
  for lib in ${CT_LIBS:-calltime}; do
    mkdir -p "$R/$s-$lib"
    SOFTPREEMPT_CALLTIME=$R/$s-$lib/ python3 benches/opencv_pair.py \
      --lib "$PWD/carry/bin/libsoftpreempt-$lib.so" --vendor-lib "$NV" \
      --runtime /usr/local/cuda/targets/x86_64-linux/lib/libOpenCL.so.1 --device-type GPU \
      --bare-platform 'NVIDIA CUDA' --duration "${DURATION:-10}" --scenarios "$s" 2> /dev/null | sed -n 2p
  done
done
python3 - "$R" <<'PY'
import glob, json, os, sys
for d in sorted(glob.glob(sys.argv[1] + "/*/")):
    files = [json.load(open(f)) for f in glob.glob(d + "calltime-*.json")]
    t = max(files, key=lambda t: t.get("submitter.process", [0])[0], default={})
    print(f"== {os.path.basename(d[:-1])}")
    for name, (n, tot, mx) in sorted(t.items(), key=lambda kv: -kv[1][1])[:16]:
        print(f"  {name:<36} {n:>8} {tot / n / 1e3:>9.2f} µs mean  {tot / 1e6:>9.1f} ms")
PY
tar czf "$OUT/submitter-calls.tgz" -C "$(dirname "$R")" subcalls
