#!/usr/bin/env bash
# The per-command benchmark (benches/pipeline.rs) on the GPU machine at the defaults and with
# one mechanism off at a time, to localise an added cost: results in $OUT/pipe-*.{txt,json}.
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu-env.sh
for mode in ${MODES:-default slice-never yielding-never}; do
  cfg=$(mktemp); echo "version = 1" > "$cfg"
  case $mode in
    slice-never) printf '[sched]\nslice = "never"\n' >> "$cfg" ;;
    yielding-never) printf '[sched]\nyielding = "never"\n' >> "$cfg" ;;
  esac
  echo "== $mode"
  SOFTPREEMPT_CONFIG=$cfg timeout 250 carry/bin/pipeline --json "$OUT/pipe-$mode.json" 2>&1 | tail -13 | tee "$OUT/pipe-$mode.txt"
done
