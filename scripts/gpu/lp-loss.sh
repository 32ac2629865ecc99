#!/usr/bin/env bash
# Where an LP loses device time next to a yielding HP on the GPU machine (after
# scripts/gpu/pack-yield.sh): for each row of ROWS (default "compute mandel"), the preemption
# benchmark's HP alone, co-run bare and through SoftPreempt, LP alone (DURATION s each,
# default 3), then the SoftPreempt co-run again with Chrome traces and profiles, analysed by
# scripts/lp-gaps.py (the LP's idle gaps, with and without a handover). VARIANTS="name|--sched
# k=v ..." adds co-runs with other settings. Results: printed, and $OUT/lploss.tgz.
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu-env.sh
R=$(mktemp -d)/lploss; mkdir -p "$R"
while IFS= read -r row <&3; do
  name=${row%%|*} flags=${row#*|}
  common="$flags --lp-ms 50 --hp-us 450 --hp-burst 1 --gap-ms 20 --duration ${DURATION:-3}"
  # shellcheck disable=SC2086
  timeout 150 carry/bin/preempt $common --modes hp-alone,corun-bare,corun-sp,lp-bare \
    --label "$name" --json "$R/$name.json" > "$R/$name.txt" 2>&1
  echo "== $name rc=$?"; grep -A5 "^mode" "$R/$name.txt" | cut -c1-150
  # shellcheck disable=SC2086
  SOFTPREEMPT_TRACE=$R/$name-trace SOFTPREEMPT_PROFILE=$R/$name-prof.jsonl \
    timeout 100 carry/bin/preempt $common --modes corun-sp > "$R/$name-traced.txt" 2>&1
  grep -A1 "^mode" "$R/$name-traced.txt" | tail -1 | cut -c1-150
  python3 scripts/lp-gaps.py "$R/$name-trace" --from 0.5
  for v in ${VARIANTS:-}; do
    vn=${v%%|*} vf=${v#*|}
    # shellcheck disable=SC2086
    SOFTPREEMPT_TRACE=$R/$name-$vn-trace timeout 100 carry/bin/preempt $common --modes corun-sp \
      ${vf//,/ } > "$R/$name-$vn.txt" 2>&1
    echo "-- variant $vn: $vf"; grep -A1 "^mode" "$R/$name-$vn.txt" | tail -1 | cut -c1-150
    python3 scripts/lp-gaps.py "$R/$name-$vn-trace" --from 0.5
  done
done 3< <(matrix_rows "${ROWS:-compute mandel}")
tar czf "$OUT/lploss.tgz" -C "$(dirname "$R")" lploss
