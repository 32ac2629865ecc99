#!/usr/bin/env bash
# The high-priority path on the GPU machine (issue 24): a lone OpenCV HP (plain cv2.UMat
# code, warm binary cache) bare, through SoftPreempt, and through SoftPreempt with slicing
# off, each with every OpenCL call timed by libcltime.so (scripts/gpu/cltime.py), plus a
# Chrome trace of the layer's own spans; then the per-command pipeline benchmark and the
# OpenCV pair. Carry carry/bin (libsoftpreempt.so, the softpreempt command and the
# pipeline benchmark's binary) and carry/cltime (libcltime.so). Results: one archive,
# $OUT/hp-path.tgz (the device tool brings back few files), and the printed tables.
set -u
cd "$(dirname "$0")/../.."
FINAL=${OUT:-$PWD/gpu-out}; OUT=$(mktemp -d)/hp-path; mkdir -p "$OUT"
NV=/lib/libnvidia-opencl.so.1
RT=${OPENCV_RUNTIME:-/usr/local/cuda/targets/x86_64-linux/lib/libOpenCL.so.1}
LIB=$PWD/carry/bin/libsoftpreempt.so
W=$(mktemp -d); mkdir -p "$W/shm" vendors; echo $NV > vendors/nvidia.icd
printf 'version = 1\n[sched]\nshm_dir = "%s"\n' "$W/shm" > "$W/default.toml"
printf 'version = 1\n[sched]\nshm_dir = "%s"\nslice = "never"\n' "$W/shm" > "$W/never.toml"
hp() { # $1 mode, $2 device, $3 config, $4 cltime output, $5 an extra variable
  # v4: the build before issue 24, if carried; ct: a diagnostic build (cargo feature
  # calltime) that also times its own vendor calls; ctnr: the same, without the rewrite.
  local lib=$LIB extra=()
  case $1 in
    v4) lib=${LIB%.so}-v4.so;;
    ct|ctnr) lib=${LIB%.so}-calltime.so; extra=(SOFTPREEMPT_CALLTIME=${4%.json}-vendor.json);;
  esac
  [ "$1" = ctnr ] && extra+=(SOFTPREEMPT_CALLTIME_NO_REWRITE=1)
  env "${extra[@]}" OPENCV_OPENCL_RUNTIME=$PWD/carry/cltime/libcltime.so CLTIME_REAL=$RT CLTIME_OUT=$4 \
    OCL_ICD_FILENAMES=$lib:$NV SOFTPREEMPT_VENDORS=$NV SOFTPREEMPT_CONFIG=$3 SOFTPREEMPT_PRIORITY=high \
    OPENCV_OPENCL_DEVICE="$2" OPENCV_OPENCL_CACHE_DIR=$W/cache-$1 PAIR_PLATFORM=x PAIR_DURATION=${HP_SECONDS:-4} \
    PAIR_GAP_MS=10 ${5:-} python3 benches/opencv_pair.py --role hp
}
for round in 1 2; do
  for m in ${MODES:-bare sp never $([ -e ${LIB%.so}-v4.so ] && echo v4)}; do
    case $m in bare) d='NVIDIA CUDA:GPU:'; c=$W/default.toml;; never) d='SoftPreempt:GPU:'; c=$W/never.toml;; *) d='SoftPreempt:GPU:'; c=$W/default.toml;; esac
    hp $m "$d" $c /dev/null > /dev/null  # warms the binary cache
    hp $m "$d" $c $OUT/cltime-$m-$round.json > $OUT/hp-$m-$round.json
  done
done
[ "${TRACE:-1}" = 1 ] && hp trace 'SoftPreempt:GPU:' $W/default.toml /dev/null > /dev/null
mkdir -p $W/trace
if [ "${TRACE:-1}" = 1 ]; then
  hp trace 'SoftPreempt:GPU:' $W/default.toml $OUT/cltime-traced.json "SOFTPREEMPT_TRACE=$W/trace" > $OUT/hp-traced.json
  carry/bin/softpreempt trace merge $W/trace -o $OUT/trace.json 2>&1 | tail -2
fi
python3 - "$OUT" <<'PY'
import json, sys, glob, os
out = sys.argv[1]
def pct(v, p):
    s = sorted(v); return s[min(len(s) - 1, int(p / 100 * len(s)))]
for f in sorted(glob.glob(out + "/hp-*.json")):
    lat = json.loads(open(f).read().strip().splitlines()[-1])["lat"]
    print(f"{os.path.basename(f):<18} n={len(lat)} p50={pct(lat,50):.3f} p90={pct(lat,90):.3f} p99={pct(lat,99):.3f} ms")
rows = {}
for f in sorted(glob.glob(out + "/cltime-*-2.json")) + glob.glob(out + "/cltime-traced.json") + sorted(glob.glob(out + "/cltime-*-2-vendor.json")):
    rows[os.path.basename(f)[7:-5].replace("-2", "")] = json.load(open(f))
names = sorted(set().union(*[r.keys() for r in rows.values()]), key=lambda n: -max(r.get(n, [0, 0])[1] for r in rows.values()))
print(f"{'call':<30}" + "".join(f"{m[:11]:>17}" for m in rows))
for n in names[:24]:
    print(f"{n:<30}" + "".join(f"{r.get(n,[0,0])[0]:>7}{(r.get(n,[0,0])[1]/max(1,r.get(n,[1])[0])/1e3):>10.2f}" for r in rows.values()))
PY
[ "${PIPELINE:-1}" = 1 ] && SOFTPREEMPT_LIB=$LIB SOFTPREEMPT_TEST_ICD=$PWD/vendors/nvidia.icd SOFTPREEMPT_TEST_VENDOR="NVIDIA CUDA" SOFTPREEMPT_TEST_FILENAMES=1 \
  timeout 200 carry/bin/pipeline --json $OUT/pipeline.json 2>&1 | tail -9
[ "${PAIR:-1}" = 1 ] && python3 benches/opencv_pair.py --lib $LIB --vendor-lib $NV --runtime $RT --device-type GPU \
  --bare-platform 'NVIDIA CUDA' --json $OUT/opencv-pair.json 2>&1 | tail -8
if command -v perf >/dev/null; then
  hp perf 'SoftPreempt:GPU:' $W/default.toml /dev/null > /dev/null
  export -f hp; export W LIB NV RT
  perf record -q -F 20000 -g -o $W/perf.data -- bash -c "hp perf 'SoftPreempt:GPU:' $W/default.toml /dev/null" > /dev/null 2>&1
  perf report -i $W/perf.data --no-children --sort dso,sym --stdio 2>/dev/null | grep -v "^$" | head -80 > $OUT/perf-sp.txt
  perf report -i $W/perf.data --no-children --dso libsoftpreempt.so --sort sym --stdio 2>/dev/null | grep "%" | head -40 > $OUT/perf-sp-layer.txt
  head -30 $OUT/perf-sp-layer.txt
fi
tar czf "$FINAL/hp-path.tgz" -C "$(dirname "$OUT")" hp-path
