# Session 54's third GPU call: call 1 showed this session's build's compute and memory
# rows with slower yields (p99 2.0 and 1.0 ms against 0.13) and more expired bounds than
# head and every earlier run. The two rows again, in turns, with the final build (`-`:
# whole launches cap a model's prediction at twice the latest; a recent piece's work
# compared without the fixed cost; the slow-start floor over profiled rows) and head.
# Traced.
set -u
. scripts/gpu-env.sh
echo "### matrix"; ROWS="compute memory" LIBS="- head" REPS=3 DURATION=5 TRACE=1 timeout 420 bash scripts/gpu/ab-rows.sh 2>&1 | grep -E "^==|^(hp-alone|corun)"
