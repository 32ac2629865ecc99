# Session 53's second GPU call: tinygrad's HP p99 was above bare's in 2 of session 52's 4
# runs (7.57 and 7.61 ms against 6.99 and 6.91). Its pair at the defaults against
# `yielding = "never"`, interleaved three times (8 s each), then one traced co-run at the
# defaults (Chrome traces, profiles, debug logs): is the yielding path what the HP pays for?
set -u
. scripts/gpu-env.sh
REPS=3 DURATION=8 SCEN=hp-alone,corun-bare,corun-sp timeout 560 bash scripts/gpu/tinygrad-trace.sh 2>&1 | tail -40
