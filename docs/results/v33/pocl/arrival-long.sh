# The linear_id arrival LP for longer (15 s, two pairs: the first with PoCL's cache cold),
# the final build (new3) and head in turns, twice: the HP's p99 next to an LP whose
# launches go straight to the vendor.
PY=${PY:-python3}; V="$(head -n1 /etc/OpenCL/vendors/pocl.icd)"; D=$(dirname "$0")
for i in 1 2; do for L in new3 head; do
  echo "== $L $i"; $PY benches/lp_arrival.py --lib /tmp/libs/$L.so --vendor-lib "$V" --kernel linear_id --scale 4 --pairs 2 --duration 15 --json "$D/arrival-long-$L-$i.json" 2>&1 | tail -1
done; done
