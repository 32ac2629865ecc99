#!/usr/bin/env bash
# Builds of the library side by side on the GPU machine: the preemption benchmark's rows
# (ROWS, default "compute memory gemm") at the defaults, DURATION s a mode (default 3), builds alternating per row, REPS
# times, so a machine's drift hits all alike. LIBS names the builds (default "A B"): carry
# carry/bin/libsoftpreempt-NAME.so for each ("-" is carry/bin/libsoftpreempt.so), and
# carry/bin/preempt. MODES: the benchmark's modes (default hp-alone,corun-bare,corun-sp);
# TRACE=1: each run traced (SOFTPREEMPT_TRACE) into trace-ROW-NAME-REP/, so that what the
# arbiter and the LP did can be compared build by build. Results: printed, and $OUT/ab.tgz.
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu-env.sh
R=$(mktemp -d)/ab; mkdir -p "$R"
mapfile -t rows < <(matrix_rows "${ROWS:-compute memory gemm}")
for i in $(seq "${REPS:-2}"); do
  for row in "${rows[@]}"; do
    name=${row%%|*} flags=${row#*|}
    for v in ${LIBS:-A B}; do
      lib=$ROOT/carry/bin/libsoftpreempt-$v.so; [ "$v" = - ] && lib=$ROOT/carry/bin/libsoftpreempt.so
      t=; [ "${TRACE:-0}" = 1 ] && { t=$R/trace-$name-$v-$i; mkdir -p "$t"; }
      # shellcheck disable=SC2086
      SOFTPREEMPT_TRACE=$t SOFTPREEMPT_LIB=$lib timeout 120 carry/bin/preempt $flags \
        --lp-ms 50 --hp-us 450 --hp-burst 1 --gap-ms 20 \
        --modes "${MODES:-hp-alone,corun-bare,corun-sp}" \
        --duration "${DURATION:-3}" --label "$name-$v" --json "$R/$name-$v-$i.json" > "$R/$name-$v-$i.txt" 2>&1
      echo "== $name $v $i rc=$?"; grep -E "^(hp-alone|corun)" "$R/$name-$v-$i.txt"
    done
  done
done
tar czf "$OUT/ab.tgz" -C "$(dirname "$R")" ab
