#!/usr/bin/env bash
# Issue 24's direct path that asks the vendor for nothing (demand ended by the
# application's synchronisation) against the build before it (OLD, a name X for
# carry/bin/libsoftpreempt-X.so; default s40), after scripts/gpu/pack-yield.sh: the
# per-command pipeline benchmark (alone, idle LP, active LP) with each library, then the
# OpenCV pair and the tinygrad pair (lone HP and co-run, bare in every run) ROUNDS times,
# the libraries alternating. Results: printed, and $OUT/sync-ab.tgz.
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu-env.sh
R=$(mktemp -d)/sync-ab; mkdir -p "$R"
OLD=carry/bin/libsoftpreempt-${OLD:-s40}.so
NEW=carry/bin/libsoftpreempt.so
RT=/usr/local/cuda/targets/x86_64-linux/lib/libOpenCL.so.1
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib
site=$(dirname "$R")/site
python3 -m zipfile -e carry/wheels/tinygrad-*.whl "$site"
if [ "${PIPELINE:-1}" = 1 ]; then
  for v in old new; do
    lib=$NEW; [ "$v" = old ] && lib=$OLD
    echo "== pipeline $v ($lib)"
    SOFTPREEMPT_LIB=$PWD/$lib timeout "${PIPE_TIMEOUT:-150}" carry/bin/pipeline --requests "${REQ:-40}" \
      --json "$R/pipeline-$v.json" > "$R/pipeline-$v.txt" 2>&1
    tail -20 "$R/pipeline-$v.txt"
  done
fi
for i in $(seq "${ROUNDS:-2}"); do
  for v in new old; do
    lib=$NEW; [ "$v" = old ] && lib=$OLD
    for c in ${CLIENTS:-opencv tinygrad}; do
      [ "$c" = tinygrad ] && [ "$i" -gt "${TG_ROUNDS:-1}" ] && continue
      sc=hp-alone,hp-alone-sp,corun-bare,corun-sp
      if [ "$c" = opencv ]; then
        timeout 120 python3 benches/opencv_pair.py --lib "$PWD/$lib" --vendor-lib "$NV" \
          --runtime $RT --device-type GPU --bare-platform 'NVIDIA CUDA' --duration "${DURATION:-8}" \
          --scenarios $sc --json "$R/$c-$v-$i.json" > "$R/$c-$v-$i.txt" 2>&1
      else
        PYTHONPATH=$site timeout 150 python3 benches/tinygrad_pair.py --lib "$PWD/$lib" \
          --vendor-lib "$NV" --runtime $RT --duration "${DURATION:-8}" --scenarios $sc \
          --json "$R/$c-$v-$i.json" > "$R/$c-$v-$i.txt" 2>&1
      fi
      echo "== $c $v $i rc=$?"; grep -E "^(hp-alone|corun)" "$R/$c-$v-$i.txt"
    done
  done
done
tar czf "$OUT/sync-ab.tgz" -C "$(dirname "$R")" sync-ab
