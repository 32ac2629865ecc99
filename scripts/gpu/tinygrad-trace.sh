#!/usr/bin/env bash
# The tinygrad pair's LP loss on the GPU machine (after scripts/gpu/pack-yield.sh): the co-run
# bare against SoftPreempt at the defaults and a variant B, interleaved REPS times (DURATION s
# each): with LIB_B="X Y", the packed library and carry/bin/libsoftpreempt-X.so, -Y.so at the
# defaults; else the packed library at the defaults and with SCHED_B's [sched] lines (default
# `yielding = "never"`). Then once (TRACED=1, the default: the packed library; TRACED=X:
# libsoftpreempt-X.so; TRACED=0: not) with Chrome traces,
# profiles and both processes' debug logs. Results: $OUT/tg.tgz.
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu-env.sh
R=$(mktemp -d)/tg; mkdir -p "$R"
site=$(dirname "$R")/site
python3 -m zipfile -e carry/wheels/tinygrad-*.whl "$site"
export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
pair() {
  local tag=$1; shift
  timeout 300 python3 benches/tinygrad_pair.py --lib "$SOFTPREEMPT_LIB" --vendor-lib "$NV" \
    --runtime /usr/local/cuda/targets/x86_64-linux/lib/libOpenCL.so.1 \
    --duration "${DURATION:-8}" --json "$R/$tag.json" "$@" 2> "$R/$tag.err" > "$R/$tag.txt"
  echo "== $tag"; sed -n '/^scenario/,/^HP figures/p' "$R/$tag.txt" | grep -v "^HP figures"
}
for i in $(seq "${REPS:-2}"); do
  if [ -n "${LIB_B:-}" ]; then
    for v in - $LIB_B; do
      lib=$SOFTPREEMPT_LIB; [ "$v" = - ] || lib=carry/bin/libsoftpreempt-$v.so
      pair "$v-$i" --scenarios "${SCEN:-corun-bare,corun-sp}" --profile --lib "$lib"
    done
  else
    pair "auto-$i" --scenarios "${SCEN:-corun-bare,corun-sp}" --profile
    pair "b-$i" --scenarios "${SCEN:-corun-bare,corun-sp}" --sched "${SCHED_B:-yielding = \"never\"}"
  fi
done
if [ "${TRACED:-1}" != 0 ]; then
  lib=$SOFTPREEMPT_LIB; [ "${TRACED:-1}" = 1 ] || lib=carry/bin/libsoftpreempt-$TRACED.so
  SOFTPREEMPT_TRACE=$R/trace SOFTPREEMPT_PROFILE=$R/prof.jsonl \
    SOFTPREEMPT_LOG=softpreempt=debug SOFTPREEMPT_LOG_FILE=$R/log.txt \
    pair traced --scenarios corun-sp --lib "$lib"
fi
gzip -q "$R"/log*.txt 2>/dev/null
tar czf "$OUT/tg.tgz" -C "$(dirname "$R")" tg
