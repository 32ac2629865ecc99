#!/usr/bin/env bash
# The tinygrad pair's warm-up and a short co-run under scripts/gpu/segv.c (preloaded: a
# native backtrace of the thread that crashes, and a line when the process calls exit; the
# GPU machine has gcc, no gdb), once per library named in LIBS: `-` for
# carry/bin/libsoftpreempt.so (the default), X for carry/bin/libsoftpreempt-X.so, so two
# builds can run side by side. SOFTPREEMPT_LOG and SOFTPREEMPT_LOG_FILE pass through.
# Printed: the crash lines and the co-run's row.
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu-env.sh
gcc -O1 -g -shared -fPIC -o /tmp/segv.so scripts/gpu/segv.c -ldl || exit 1
site=$(mktemp -d)/site; python3 -m zipfile -e carry/wheels/tinygrad-*.whl "$site"
for lib in ${LIBS:--}; do
  path=carry/bin/libsoftpreempt.so; [ "$lib" = - ] || path=carry/bin/libsoftpreempt-$lib.so
  echo "=== $path"
  PYTHONPATH=$site LD_PRELOAD=/tmp/segv.so timeout 250 python3 benches/tinygrad_pair.py \
    --lib "$path" --vendor-lib "$NV" \
    --runtime /usr/local/cuda/targets/x86_64-linux/lib/libOpenCL.so.1 --scenarios corun-sp --duration 3 2>&1 |
    grep -v "warning" | grep -E "^\*\*\*|nvvm|ptxjit|libsoftpreempt|failed|corun-sp|warmed" | head -40
done
