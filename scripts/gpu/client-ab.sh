#!/usr/bin/env bash
# Real clients whose LPs ask no vendor times (OpenCV's T-API pair, tinygrad's pair) at the
# defaults against a setting (SCHED, TOML [sched] lines; default yielding = "never"), ROUNDS
# rounds alternating, each round a bare co-run beside both, so that the machine's drift hits
# all alike. Results: printed, and $OUT/client-ab.tgz.
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu-env.sh
R=$(mktemp -d)/client-ab; mkdir -p "$R"
SCHED=${SCHED:-yielding = \"never\"}
RT=/usr/local/cuda/targets/x86_64-linux/lib/libOpenCL.so.1
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib
site=$(dirname "$R")/site
python3 -m zipfile -e carry/wheels/tinygrad-*.whl "$site"
for i in $(seq "${ROUNDS:-3}"); do
  for c in ${CLIENTS:-opencv tinygrad}; do
    for v in def alt; do
      sched=""; sc=corun-sp; [ "$v" = alt ] && sched=$SCHED
      [ "$v" = def ] && sc=corun-bare,corun-sp
      if [ "$c" = opencv ]; then
        timeout 200 python3 benches/opencv_pair.py --lib "$SOFTPREEMPT_LIB" --vendor-lib "$NV" \
          --runtime $RT --device-type GPU --bare-platform 'NVIDIA CUDA' --duration "${DURATION:-8}" \
          --scenarios $sc --sched "$sched" --json "$R/$c-$v-$i.json" > "$R/$c-$v-$i.txt" 2>&1
      else
        PYTHONPATH=$site timeout 300 python3 benches/tinygrad_pair.py --lib "$SOFTPREEMPT_LIB" \
          --vendor-lib "$NV" --runtime $RT --duration "${DURATION:-8}" --scenarios $sc \
          --sched "$sched" --json "$R/$c-$v-$i.json" > "$R/$c-$v-$i.txt" 2>&1
      fi
      echo "== $c $v $i rc=$?"; grep -E "^(corun)" "$R/$c-$v-$i.txt"
    done
  done
done
tar czf "$OUT/client-ab.tgz" -C "$(dirname "$R")" client-ab
