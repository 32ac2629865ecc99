#!/usr/bin/env bash
# Issue 24's open item on the GPU machine (after scripts/gpu/pack-yield.sh): the OpenCV pair
# at the defaults against SCHED_B's [sched] lines (default `yielding = "never"`; with LIB_B=X: the library
# carry/bin/libsoftpreempt-X.so at the defaults), interleaved REPS times, then once each with
# Chrome traces, profiles and the LP's debug log, so the LP's loss at the defaults can be
# traced (TRACED=auto: the defaults only; 0: none). Results: $OUT/ocv.tgz.
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu-env.sh
R=$(mktemp -d)/ocv; mkdir -p "$R"
pair() {
  local tag=$1; shift
  python3 benches/opencv_pair.py --lib "$SOFTPREEMPT_LIB" --vendor-lib "$NV" \
    --runtime /usr/local/cuda/targets/x86_64-linux/lib/libOpenCL.so.1 --device-type GPU \
    --bare-platform 'NVIDIA CUDA' --duration "${DURATION:-6}" --json "$R/$tag.json" "$@" \
    2> "$R/$tag.err" | tail -8 > "$R/$tag.txt"
  echo "== $tag"; cat "$R/$tag.txt"
}
for i in $(seq "${REPS:-2}"); do
  pair "auto-$i" --scenarios "${SCEN:-corun-bare,corun-sp,lp-alone,lp-alone-sp}"
  if [ -n "${LIB_B:-}" ]; then
    pair "$LIB_B-$i" --scenarios "${SCEN:-corun-bare,corun-sp,lp-alone,lp-alone-sp}" \
      --lib "$PWD/carry/bin/libsoftpreempt-$LIB_B.so"
  else
    pair "b-$i" --scenarios "${SCEN:-corun-bare,corun-sp,lp-alone,lp-alone-sp}" \
      --sched "${SCHED_B:-yielding = \"never\"}"
  fi
done
for mode in $([ "${TRACED:-1}" = 1 ] && echo auto never; [ "${TRACED:-1}" = auto ] && echo auto); do
  sched=""; [ $mode = never ] && sched='yielding = "never"'
  SOFTPREEMPT_TRACE=$R/trace-$mode SOFTPREEMPT_PROFILE=$R/prof-$mode.jsonl \
    SOFTPREEMPT_LOG=softpreempt=debug SOFTPREEMPT_LOG_FILE=$R/log-$mode.txt \
    pair "traced-$mode" --scenarios corun-sp --sched "$sched"
done
gzip -q "$R"/log-*.txt 2>/dev/null
tar czf "$OUT/ocv.tgz" -C "$(dirname "$R")" ocv
