# The arrival LP rows (benches/lp_arrival.py) with this session's final build (new3) and
# main's head at the session's start (head), in turns; each invocation's first pair runs
# with PoCL's kernel cache cold (a fresh XDG_CACHE_HOME), the later ones warm.
PY=${PY:-python3}; V="$(head -n1 /etc/OpenCL/vendors/pocl.icd)"; D=$(dirname "$0")
for k in "linear_id --scale 4 --pairs 3" "mandel --scale 8 --pairs 2" "groups_2d --pairs 2"; do
  for L in new3 head; do
    n=$(echo $k | cut -d' ' -f1)
    echo "== $n $L"; $PY benches/lp_arrival.py --lib /tmp/libs/$L.so --vendor-lib "$V" --kernel $k --duration 5 --json "$D/arrival-$n-$L.json" 2>&1 | tail -1
  done
done
