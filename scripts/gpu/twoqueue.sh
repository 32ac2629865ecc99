#!/usr/bin/env bash
# The two-queue LP beside a paced HP on the GPU machine (after scripts/gpu/pack-yield.sh and
# `gcc -O2 -o carry/probe/twoqueue scripts/gpu/twoqueue.c -lOpenCL -lpthread` here): the HP
# alone (bare), then the pair bare, through the packed library, and through each library of
# LIBS (carry/bin/libsoftpreempt-NAME.so), DURATION s each (default 6). The LP launches
# about 50 ms kernels on one queue while a second thread reads, blocking, on another queue
# of the same context: without `api::enqueue::Wait` the reads hold NVIDIA's context, and
# the yield-word write with it. Prints the HP's p50/p99 and the LP's launches a second;
# results in $OUT/twoqueue.txt.
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu-env.sh
T=$ROOT/carry/probe/twoqueue
D=${DURATION:-6}
W=$(mktemp -d)
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib SOFTPREEMPT_VENDORS=$NV
pair() {  # NAME LIB (empty: bare; "hp": the HP alone, bare)
  local name=$1 lib=$2 plat=NVIDIA files=$NV
  if [ -n "$lib" ] && [ "$lib" != hp ]; then plat=SoftPreempt files=$lib:$NV; fi
  mkdir -p "$W/$name/shm"
  printf 'version = 1\n[sched]\nshm_dir = "%s"\n' "$W/$name/shm" > "$W/$name/sp.toml"
  export SOFTPREEMPT_CONFIG=$W/$name/sp.toml OCL_ICD_FILENAMES=$files
  local lp=
  if [ "$lib" != hp ]; then
    SOFTPREEMPT_PRIORITY=low timeout $((D + 60)) "$T" lp "$plat" $((D + 3)) > "$W/$name/lp.txt" 2>&1 &
    lp=$!
    until grep -q ready "$W/$name/lp.txt" 2>/dev/null || ! kill -0 $lp 2>/dev/null; do sleep 0.2; done
    sleep 1
  fi
  SOFTPREEMPT_PRIORITY=high timeout $((D + 60)) "$T" hp "$plat" "$D" > "$W/$name/hp.txt" 2>&1
  [ -n "$lp" ] && wait $lp
  echo "== $name: $(grep -h '^hp' "$W/$name/hp.txt") $(grep -h '^lp' "$W/$name/lp.txt" 2>/dev/null)"
}
{
  pair hp-alone hp
  pair bare ""
  pair sp "$SOFTPREEMPT_LIB"
  for v in ${LIBS:-}; do pair "sp-$v" "$ROOT/carry/bin/libsoftpreempt-$v.so"; done
} | tee "$OUT/twoqueue.txt"
