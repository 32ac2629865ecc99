#!/usr/bin/env bash
# What a paced client's request costs in the layer's cold caches, exactly (cachegrind, no
# timing): scripts/gpu/ocvlike.c's OpenCV-like request (19 calls) with 16 MB written between
# requests, so each meets the caches cold as a client sending a request every 20 ms does.
# For the bare PoCL platform and each library given (default target/release), the
# difference of 80 and 40 requests ÷ 40: instructions, last-level instruction misses and
# data read/write misses per request, and what each library adds to bare. About 2 minutes
# a library on the 2-core development machine.
#   bash scripts/cold-cost.sh [LIB...]
set -eu
cd "$(dirname "$0")/.."
probe=carry/probe/ocvlike
[ -x "$probe" ] || { mkdir -p carry/probe; gcc -O2 -o "$probe" scripts/gpu/ocvlike.c -lOpenCL; }
pocl=$(head -n1 /etc/OpenCL/vendors/pocl.icd)
W=$(mktemp -d)
run() {  # NAME PLATFORM [LIB]
  local name=$1 plat=$2 lib=${3:-}
  mkdir -p "$W/$name"
  echo "$pocl" > "$W/$name/pocl.icd"
  [ -n "$lib" ] && realpath "$lib" > "$W/$name/softpreempt.icd"
  for n in 40 80; do
    OCL_ICD_VENDORS=$W/$name SOFTPREEMPT_PRIORITY=high POCL_DEVICES=basic \
      valgrind --tool=cachegrind --cache-sim=yes --LL=8388608,16,64 \
      --cachegrind-out-file="$W/$name/$n.out" "$probe" "$n" "$plat" 0 16 > /dev/null 2>&1
  done
  cg_diff "$W/$name/40.out" "$W/$name/80.out" 2> /dev/null |
    sed -n 's/^summary: *//p' > "$W/$name/sum"
}
# cachegrind's events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw
per_req() { awk '{printf "%8.0f %8.1f %8.1f %8.1f", $1/40, $3/40, $6/40, $9/40}' "$1"; }
run bare Portable
printf '%-40s %8s %8s %8s %8s\n' "per request" Ir ILmiss DLrmiss DLwmiss
printf '%-40s %s\n' bare "$(per_req "$W/bare/sum")"
i=0
for lib in "${@:-target/release/libsoftpreempt.so}"; do
  i=$((i + 1)); run "lib$i" SoftPreempt "$lib"
  printf '%-40s %s\n' "$lib" "$(per_req "$W/lib$i/sum")"
  paste "$W/lib$i/sum" "$W/bare/sum" | awk '{printf "%-40s %8.0f %8.1f %8.1f %8.1f\n", "  added", ($1-$10)/40, ($3-$12)/40, ($6-$15)/40, ($9-$18)/40}'
done
rm -rf "$W"
