#!/usr/bin/env bash
# Issue 24's OpenCV goals measured in turns, so that the machine's drift hits bare and
# SoftPreempt alike: the lone HP (hp-ab: bare and layered HPs in alternate 500 ms slots) and
# the co-run (corun-ab: a bare pair and a layered pair in alternate --turn-ms turns, each
# pair's LP working in its own turns only; LP kept is paired turn by turn). JOBS lists the
# runs, separated by ';', each "LIB SCENARIO SECONDS [SCHED]": LIB "-" is
# carry/bin/libsoftpreempt.so, a name X carry/bin/libsoftpreempt-X.so; SCHED, extra [sched]
# lines for the layered processes (a setting under study). Default: this build and s40, each
# hp-ab for 30 s and corun-ab for 100 s. The layered processes append per-kernel profiles
# (SOFTPREEMPT_PROFILE). After scripts/gpu/pack-yield.sh. Results: printed, and
# $OUT/opencv-turns.tgz.
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu-env.sh
R=$(mktemp -d)/opencv-turns; mkdir -p "$R"
RT=/usr/local/cuda/targets/x86_64-linux/lib/libOpenCL.so.1
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib
JOBS=${JOBS:-"- hp-ab 30; - corun-ab 100; s40 hp-ab 30; s40 corun-ab 100"}
n=0
IFS=';' read -ra jobs <<< "$JOBS"
for job in "${jobs[@]}"; do
  read -r v sc d sched <<< "$job"
  n=$((n + 1))
  lib=carry/bin/libsoftpreempt.so; [ "$v" = - ] || lib=carry/bin/libsoftpreempt-$v.so
  tag=$n-${v/-/new}-$sc
  echo "$job" > "$R/$tag.job"
  SOFTPREEMPT_PROFILE=$R/$tag.profile.jsonl timeout $((d * 2 + 120)) python3 \
    benches/opencv_pair.py --lib "$PWD/$lib" --vendor-lib "$NV" --runtime $RT \
    --device-type GPU --bare-platform 'NVIDIA CUDA' --duration "$d" --scenarios "$sc" \
    --sched "${sched//\\n/$'\n'}" --json "$R/$tag.json" > "$R/$tag.txt" 2>&1
  echo "== $tag ${sched:+[$sched] }rc=$?"; grep -E "^(hp-ab|corun-ab)" "$R/$tag.txt"
done
tar czf "$OUT/opencv-turns.tgz" -C "$(dirname "$R")" opencv-turns
