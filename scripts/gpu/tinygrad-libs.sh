#!/usr/bin/env bash
# The tinygrad pair with two or more builds of the library in alternate rounds, so that the
# machine's drift hits each alike: LIBS names them (default "- s44": `-` is
# carry/bin/libsoftpreempt.so, X carry/bin/libsoftpreempt-X.so), REPS rounds (default 2),
# each round one run per build of SCENARIOS (default corun-bare,corun-sp: the bare co-run
# is measured beside each build's) for DURATION s a scenario (default 10). The first round
# starts with hp-alone and lp-alone once, for the ratios. Results: printed, and
# $OUT/tinygrad-libs.tgz.
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu-env.sh
R=$(mktemp -d)/tinygrad-libs; mkdir -p "$R"
site=$(dirname "$R")/site; python3 -m zipfile -e carry/wheels/tinygrad-*.whl "$site"
export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
LIBS=${LIBS:-- s44}
for i in $(seq "${REPS:-2}"); do
  for lib in $LIBS; do
    path=carry/bin/libsoftpreempt.so; [ "$lib" = - ] || path=carry/bin/libsoftpreempt-$lib.so
    sc=${SCENARIOS:-corun-bare,corun-sp}
    [ "$i" = 1 ] && [ "$lib" = "${LIBS%% *}" ] && sc=hp-alone,$sc,lp-alone
    tag=${lib/-/new}-$i
    timeout 280 python3 benches/tinygrad_pair.py --lib "$path" --vendor-lib "$NV" \
      --runtime /usr/local/cuda/targets/x86_64-linux/lib/libOpenCL.so.1 --scenarios "$sc" \
      --duration "${DURATION:-10}" --json "$R/$tag.json" > "$R/$tag.txt" 2> "$R/$tag.err"
    echo "== $lib round $i rc=$?"; grep -E "^(hp-alone|corun|lp-alone)" "$R/$tag.txt"
  done
done
tar czf "$OUT/tinygrad-libs.tgz" -C "$(dirname "$R")" tinygrad-libs
