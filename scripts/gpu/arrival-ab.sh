#!/usr/bin/env bash
# Builds side by side on the GPU machine (after scripts/gpu/pack-yield.sh): the preemption
# benchmark's lone LP and an HP arriving next to it, with the [sched] settings of SCHED
# (KEY=VALUE words, TOML values: default `yielding="never"`, launches that are cut or
# sent whole, not yielding ones; `SCHED=-` for the defaults), for
# the rows of ROWS (default "compute gemm") and the builds of LIBS (default "- s35":
# carry/bin/libsoftpreempt.so and carry/bin/libsoftpreempt-NAME.so), alternating, REPS
# times. What cutting a lone LP's launches into pieces buys an arriving HP, and costs the
# LP. Results: printed, and $OUT/arrival.tgz.
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu-env.sh
R=$(mktemp -d)/arrival; mkdir -p "$R"
mapfile -t rows < <(matrix_rows "${ROWS:-compute gemm}")
sched=()
for kv in ${SCHED:-yielding=\"never\"}; do [ "$kv" = - ] || sched+=(--sched "$kv"); done
for i in $(seq "${REPS:-1}"); do
  for row in "${rows[@]}"; do
    name=${row%%|*} flags=${row#*|}
    for v in ${LIBS:-- s35}; do
      lib=$ROOT/carry/bin/libsoftpreempt-$v.so; [ "$v" = - ] && lib=$ROOT/carry/bin/libsoftpreempt.so
      # shellcheck disable=SC2086
      SOFTPREEMPT_LIB=$lib timeout 150 carry/bin/preempt $flags "${sched[@]}" \
        --lp-ms 50 --hp-us 450 --hp-burst 1 --gap-ms 20 \
        --modes hp-alone,arrival-bare,arrival-sp,lp-bare,lp-sp --duration 3 \
        --label "$name-$v" --json "$R/$name-$v-$i.json" > "$R/$name-$v-$i.txt" 2>&1
      echo "== $name $v $i rc=$?"; grep -E "^(hp-alone|arrival|lp-)" "$R/$name-$v-$i.txt"
    done
  done
done
tar czf "$OUT/arrival.tgz" -C "$(dirname "$R")" arrival
