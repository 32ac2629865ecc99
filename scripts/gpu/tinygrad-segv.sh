#!/usr/bin/env bash
# The tinygrad pair's warm-up with a native backtrace of a crash (carry/src/segv.c,
# preloaded; the GPU machine has gcc, no gdb). Everything printed.
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu-env.sh
gcc -O1 -g -shared -fPIC -o /tmp/segv.so carry/src/segv.c || exit 1
site=$(mktemp -d)/site; python3 -m zipfile -e carry/wheels/tinygrad-*.whl "$site"
for i in ${RUNS:-1 2}; do
  echo "=== run $i"
  PYTHONPATH=$site LD_PRELOAD=/tmp/segv.so SOFTPREEMPT_LOG=softpreempt=debug SOFTPREEMPT_LOG_FILE=$OUT/log-$i.txt \
    timeout 250 python3 benches/tinygrad_pair.py --lib "$SOFTPREEMPT_LIB" --vendor-lib "$NV" \
    --runtime /usr/local/cuda/targets/x86_64-linux/lib/libOpenCL.so.1 --scenarios corun-sp --duration 3 2>&1 |
    grep -v "warning" | tail -60
  gzip -f $OUT/log-$i.txt
done
