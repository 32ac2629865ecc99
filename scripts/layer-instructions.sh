#!/usr/bin/env bash
# The layer's own instructions per command, counted exactly (no timing noise): the
# overhead benchmark's command rows under valgrind's callgrind, which collects only inside
# SoftPreempt's clEnqueue* entry points (the bare vendor's calls are not counted). Each row
# runs twice, 3 and 6 rounds of 256 calls, and the difference is divided by the calls it
# adds, so one-off work (lazy set-up, a kernel's first launches through the FIFO) cancels.
# Printed per call: instructions in libsoftpreempt itself, in libc/ld.so (the vendor's
# allocations and locks, and any the layer makes), in the vendor. Pieces are 1 s long
# (`sched.piece_us`): under callgrind a kernel runs tens of times slower, and at the
# default 8 ms its launches would no longer count as short, so the kernel row would
# measure the planned path instead of the direct one.
#
# Usage: bash scripts/layer-instructions.sh [LIBRARY] [ROW...]
#   LIBRARY: the libsoftpreempt.so to count (default: target/release's; the name must
#   hold "softpreempt"). ROW: overhead rows by name, one row each (`--only` matches a
#   part of a name; default: every command row).
# IDLE_LP=1: next to an idle low-priority queue of another process (registered, idle past
# the 500 ms window), the case where the layer asks whether a lower client is busy.
# Needs: valgrind, and `cargo build --release -p softpreempt-icd` done. Takes about 6 min.
set -euo pipefail
cd "$(dirname "$0")/.."
lib=$(realpath "${1:-target/release/libsoftpreempt.so}")
shift || true
rows=("$@")
[ ${#rows[@]} -eq 0 ] && rows=("clEnqueueNDRangeKernel(empty)" "clEnqueueNDRangeKernel(geometry"
  "clEnqueueFillBuffer" "clEnqueueWriteBuffer"
  "clEnqueueReadBuffer(64 B)" "clEnqueueReadBuffer(64 B, blocking)" "clEnqueueMarkerWithWaitList")
bin=$(cargo bench --bench overhead --no-run 2>&1 | sed -n 's/.*Executable .*(\(.*\))$/\1/p')
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
batch=256
printf '%-40s %10s %10s %10s\n' "row (instructions per call)" layer libc vendor
for row in "${rows[@]}"; do
  for r in 3 6; do
    SOFTPREEMPT_LIB=$lib valgrind --tool=callgrind --toggle-collect='softpreempt::slots::clEnqueue*' \
      --callgrind-out-file="$out/$r.out" "$bin" --only "$row" --batch $batch --rounds $r \
      --sched "piece_us = 1000000" ${IDLE_LP:+--with-idle-lp} >/dev/null 2>&1
  done
  python3 - "$row" "$out" $batch <<'PY'
import re, subprocess, sys
row, out, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
def by_object(path):
    text = subprocess.run(['callgrind_annotate', '--inclusive=no', '--threshold=100', '--auto=no', path],
                          capture_output=True, text=True, check=True).stdout
    sums = {}
    for line in text.split('\n'):
        m = re.match(r'\s*([\d,]+) .*\[(.*)\]\s*$', line)
        if m:
            obj = m.group(2).rsplit('/', 1)[-1]
            kind = 'layer' if 'softpreempt' in obj else 'libc' if re.search(r'libc|vdso|ld-linux', obj) else 'vendor'
            sums[kind] = sums.get(kind, 0) + int(m.group(1).replace(',', ''))
    return sums
a, b = by_object(f'{out}/3.out'), by_object(f'{out}/6.out')
calls = 3 * batch
print(f'{row:<40}' + ''.join(f' {(b.get(k, 0) - a.get(k, 0)) / calls:10.1f}' for k in ['layer', 'libc', 'vendor']))
PY
done
