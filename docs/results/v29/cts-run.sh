#!/usr/bin/env bash
# usage: run.sh MODE dir:bin[:subtests]...   MODE a: bare PoCL; d: SoftPreempt at low
# beside a registered high holder, slice = "always", yielding = "chaos"; e: as d with
# yielding = "never" (slices only); b: SoftPreempt at the defaults, no holder.
set -u
MODE=$1; shift
R=/work/cts-run/$MODE; mkdir -p "$R"
unset OCL_ICD_FILENAMES
case $MODE in
  a) export OCL_ICD_VENDORS=/work/cts-vendors/a SOFTPREEMPT_CONFIG=/dev/null ;;
  b|d|e)
    export OCL_ICD_VENDORS=/work/cts-vendors/sp
    shm=/work/cts-shm/$MODE store=/work/cts-store/$MODE
    rm -rf "$shm" "$store"; mkdir -p "$shm" "$store"
    extra=""
    [ "$MODE" = d ] && extra=$'slice = "always"\nyielding = "chaos"'
    [ "$MODE" = e ] && extra=$'slice = "always"\nyielding = "never"'
    printf 'version = 1\nvendors = ["libpocl.so.2.10.0"]\n[sched]\nshm_dir = "%s"\n%s\n[store]\ndir = "%s"\n' \
      "$shm" "$extra" "$store" > "$R/config.toml"
    export SOFTPREEMPT_CONFIG=$R/config.toml SOFTPREEMPT_PROFILE=$R/profile.jsonl ;;
esac
holder=""
if [ "$MODE" = d ] || [ "$MODE" = e ]; then
  SOFTPREEMPT_PRIORITY=high /work/cts-run/hold > "$R/hold.out" 2>&1 & holder=$!
  for _ in $(seq 100); do grep -q ready "$R/hold.out" && break; sleep 0.1; done
  grep -q ready "$R/hold.out" || { echo "holder not ready"; cat "$R/hold.out"; exit 1; }
  export SOFTPREEMPT_PRIORITY=low
fi
for spec in "$@"; do
  IFS=: read -r dir bin subs <<< "$spec"
  # shellcheck disable=SC2086
  (cd /work/cts-build/test_conformance/$dir && timeout 1500 nice -n 10 ./$bin $subs) > "$R/$bin.log" 2>&1
  rc=$?
  echo "== $bin rc=$rc passed=$(grep -c ' passed' "$R/$bin.log") FAILED=$(grep -c 'FAILED' "$R/$bin.log") $(grep -E 'PASSED [0-9]+ of|FAILED [0-9]+ of|SKIPPED' "$R/$bin.log" | tail -1)"
done
[ -n "$holder" ] && kill "$holder"
exit 0
