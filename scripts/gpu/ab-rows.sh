#!/usr/bin/env bash
# Two builds of the library side by side on the GPU machine: the preemption benchmark's
# rows (default: compute, memory, GEMM) at the defaults, builds alternating per row, REPS
# times, so a machine's drift hits both alike. Carry carry/bin/libsoftpreempt-A.so and
# libsoftpreempt-B.so (and carry/bin/preempt). Results: printed, and $OUT/ab.tgz.
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu-env.sh
R=$(mktemp -d)/ab; mkdir -p "$R"
ROWS=("compute|" "memory|--lp-kernel memory" "gemm|--lp-kernel gemm")
for i in $(seq "${REPS:-2}"); do
  for row in "${ROWS[@]}"; do
    name=${row%%|*} flags=${row#*|}
    for v in A B; do
      # shellcheck disable=SC2086
      SOFTPREEMPT_LIB=$ROOT/carry/bin/libsoftpreempt-$v.so timeout 120 carry/bin/preempt $flags \
        --lp-ms 50 --hp-us 450 --hp-burst 1 --gap-ms 20 --modes hp-alone,corun-bare,corun-sp \
        --duration 3 --label "$name-$v" --json "$R/$name-$v-$i.json" > "$R/$name-$v-$i.txt" 2>&1
      echo "== $name $v $i rc=$?"; grep -E "^(hp-alone|corun)" "$R/$name-$v-$i.txt"
    done
  done
done
tar czf "$OUT/ab.tgz" -C "$(dirname "$R")" ab
