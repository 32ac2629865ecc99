#!/usr/bin/env bash
# Why the demo's HP waits next to its LP on the GPU (session 38): the bare-driver probe of
# what an HP asks of NVIDIA around its launch (scripts/gpu/hpevent.c), then the demo with
# settings and libraries from DEMOS ("label|lib|config|env", lib a carry/bin suffix or "-"),
# each traced into $OUT (TRACE=0: not traced; DEMO_ARGS: more arguments, e.g. --samples
# 1000), each launch's times in tl-LABEL (SOFTPREEMPT_DEMO_TIMELINE; read them with
# scripts/demo-timeline.py). Results: printed, and $OUT/why.tgz.
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu-env.sh
R=$(mktemp -d)/why; mkdir -p "$R"
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib
if [ "${PROBE:-1}" = 1 ]; then
  OCL_ICD_FILENAMES=$NV timeout 120 carry/probe/hpevent "${SAMPLES:-100}" 130 "${MODES:-NECQFWA}" "${LPMODES:-f}" 2>&1 | tee "$R/hpevent.txt"
fi
printf '[sched]\nslice = "never"\nyielding = "never"\n' > "$R/never.toml"
: > "$R/default.toml"
printf "[sched]\nyield_wait_us = 0\n" > "$R/nowait.toml"
printf "[sched]\nyielding = \"never\"\n" > "$R/noyield.toml"
while IFS='|' read -r label lib cfg envs <&3; do
  [ -n "$label" ] || continue
  L=$ROOT/carry/bin/libsoftpreempt.so; [ "$lib" = "-" ] || L=$ROOT/carry/bin/libsoftpreempt-$lib.so
  mkdir -p "$R/tl-$label"
  trace=
  if [ "${TRACE:-1}" = 1 ]; then mkdir -p "$R/trace-$label"; trace=SOFTPREEMPT_TRACE=$R/trace-$label; fi
  echo "== $label ($lib, $cfg, $envs)"
  # shellcheck disable=SC2086
  env $envs $trace SOFTPREEMPT_LIB=$L SOFTPREEMPT_CONFIG=$R/$cfg.toml \
    SOFTPREEMPT_DEMO_TIMELINE=$R/tl-$label \
    OCL_ICD_FILENAMES=$NV timeout 400 carry/bin/softpreempt demo ${DEMO_ARGS:-} > "$R/demo-$label.txt" 2>&1
  tail -6 "$R/demo-$label.txt"
  python3 scripts/demo-timeline.py "$R/tl-$label" || true
done 3< <(echo "${DEMOS:-}" | tr ';' '\n')
tar czf "$OUT/why.tgz" -C "$(dirname "$R")" why
