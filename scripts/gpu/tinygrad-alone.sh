#!/usr/bin/env bash
# The tinygrad LP alone, bare against SoftPreempt (no higher priority anywhere), on the GPU
# machine (after scripts/gpu/pack-yield.sh, with carry/wheels/tinygrad-*.whl): what the lone
# LP's path costs it, at the defaults and with each [sched] line of VARIANTS (one per line;
# default: slicing off, pieces off while alone, yielding off), REPS times in turn, DURATION s
# a scenario. Each invocation runs `lp-alone,lp-alone-sp` with --profile. Results:
# $OUT/tg-alone.tgz; the table on stdout.
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu-env.sh
R=$(mktemp -d)/tg-alone; mkdir -p "$R"
site=$(dirname "$R")/site
python3 -m zipfile -e carry/wheels/tinygrad-*.whl "$site"
export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
VARIANTS=${VARIANTS:-$'slice = "never"\npiece_us = 1000000\nyielding = "never"'}
run() {
  local tag=$1 sched=$2
  timeout 200 python3 benches/tinygrad_pair.py --lib "$SOFTPREEMPT_LIB" --vendor-lib "$NV" \
    --runtime /usr/local/cuda/targets/x86_64-linux/lib/libOpenCL.so.1 \
    --duration "${DURATION:-8}" --json "$R/$tag.json" --scenarios "${SCEN:-lp-alone,lp-alone-sp}" \
    --profile --sched "$sched" 2> "$R/$tag.err" > "$R/$tag.txt"
  echo "== $tag: ${sched:-defaults}"; sed -n '/^scenario/,/^HP figures/p' "$R/$tag.txt" | grep -v "^HP figures"
}
for i in $(seq "${REPS:-1}"); do
  run "defaults-$i" ""
  n=0
  while IFS= read -r v; do
    n=$((n + 1)); run "v$n-$i" "$v"
  done <<< "$VARIANTS"
done
tar czf "$OUT/tg-alone.tgz" -C "$(dirname "$R")" tg-alone
