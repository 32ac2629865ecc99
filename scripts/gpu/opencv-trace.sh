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
# Traced runs of TRACE_SCEN (default corun-sp): the defaults, `yielding = "never"` with
# TRACED=1, and with TRACED=ab the library LIB_B too, TRACE_REPS times (default 1) in turn.
# `scripts/ocv-blocks.py $R/trace-*` reads them per matchTemplate block.
traced() {
  local tag=$1 lib=$2 sched=$3
  SOFTPREEMPT_TRACE=$R/trace-$tag SOFTPREEMPT_PROFILE=$R/prof-$tag.jsonl \
    SOFTPREEMPT_LOG=softpreempt=debug SOFTPREEMPT_LOG_FILE=$R/log-$tag.txt \
    pair "traced-$tag" --scenarios "${TRACE_SCEN:-corun-sp}" --lib "$lib" --sched "$sched"
}
for i in $(seq "${TRACE_REPS:-1}"); do
  sfx=$([ "${TRACE_REPS:-1}" = 1 ] || echo "-$i")
  case ${TRACED:-1} in
    1) traced "auto$sfx" "$SOFTPREEMPT_LIB" ""
       traced "never$sfx" "$SOFTPREEMPT_LIB" 'yielding = "never"' ;;
    auto) traced "auto$sfx" "$SOFTPREEMPT_LIB" "" ;;
    ab) traced "auto$sfx" "$SOFTPREEMPT_LIB" ""
        traced "$LIB_B$sfx" "$PWD/carry/bin/libsoftpreempt-$LIB_B.so" "" ;;
  esac
done
[ "${TRACED:-1}" = 0 ] || python3 scripts/ocv-blocks.py "$R"/trace-* | tee "$R/blocks.md"
gzip -q "$R"/log-*.txt 2>/dev/null
tar czf "$OUT/ocv.tgz" -C "$(dirname "$R")" ocv
