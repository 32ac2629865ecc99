#!/usr/bin/env bash
# The tinygrad pair's warm-up and a short co-run, with libraries carry/bin/libsoftpreempt-X.so
# named in LIBS, under carry/src/segv.c (a native backtrace of a crash, and a line when the
# process calls exit). Printed: the crash lines and the co-run's row.
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu-env.sh
gcc -O1 -shared -fPIC -o /tmp/segv.so carry/src/segv.c -ldl || exit 1
site=$(mktemp -d)/site; python3 -m zipfile -e carry/wheels/tinygrad-*.whl "$site"
for lib in ${LIBS:-B}; do
  echo "=== lib $lib"
  PYTHONPATH=$site LD_PRELOAD=/tmp/segv.so timeout 250 python3 benches/tinygrad_pair.py \
    --lib "carry/bin/libsoftpreempt-$lib.so" --vendor-lib "$NV" \
    --runtime /usr/local/cuda/targets/x86_64-linux/lib/libOpenCL.so.1 --scenarios corun-sp --duration 3 2>&1 |
    grep -v "warning" | grep -E "^\*\*\*|nvvm|ptxjit|failed|corun-sp|warmed" | head -12
done
