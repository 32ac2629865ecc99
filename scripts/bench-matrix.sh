#!/usr/bin/env bash
# The benchmark matrix of issue 12 in one command, on the default device at the default
# configuration (no [sched] settings): every row's report (JSON and the printed table), a
# combined markdown table (matrix.md) and plots, in one output folder.
#
# Usage: bash scripts/bench-matrix.sh [--quick] [--out DIR] [--preempt PATH]
#          [--pyopencl PYTHON] [--rows LIST] [-- more preempt flags for every row]
#   --quick          short runs and shorter kernels: a smoke check of the whole matrix
#   --out DIR        where everything goes (default target/bench-matrix)
#   --preempt PATH   the preempt benchmark binary (default: built here with cargo, else
#                    carry/bin/preempt, as scripts/pack-gpu.sh leaves it for the GPU machine)
#   --pyopencl PY    also run benches/pyopencl_pair.py (both processes on pyopencl) with
#                    this Python, which must have pyopencl and numpy (scripts/clients.sh
#                    --python prints such a one here)
#   --rows LIST      only these rows (comma-separated names, see ROWS below)
# On the GPU machine: bash scripts/gpu-matrix.sh (it points everything at NVIDIA's driver).
# Plots need a TrueType font; where there is none (the GPU machine) they are skipped and can
# be drawn elsewhere: preempt --matrix DIR --plots DIR/plots.
set -u
cd "$(dirname "$0")/.."
quick=0 out=target/bench-matrix preempt= py= only= extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --out) out=$2; shift ;;
    --preempt) preempt=$2; shift ;;
    --pyopencl) py=$2; shift ;;
    --rows) only=$2; shift ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "bench-matrix: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

if [ -z "$preempt" ]; then
  if command -v cargo >/dev/null && [ -f Cargo.toml ]; then
    cargo build --release -p softpreempt-icd >&2 || exit 1
    preempt=$(cargo bench --bench preempt --no-run 2>&1 | sed -n 's/.*Executable .*(\(.*\))/\1/p' | tail -n1)
  elif [ -x carry/bin/preempt ]; then
    preempt=carry/bin/preempt
  fi
fi
[ -x "$preempt" ] || { echo "bench-matrix: no preempt binary (--preempt PATH)" >&2; exit 1; }
# The library the children load: as the benchmark finds it, unless already set.
if [ -z "${SOFTPREEMPT_LIB:-}" ]; then
  for l in target/release/libsoftpreempt.so carry/bin/libsoftpreempt.so; do
    [ -f "$l" ] && { export SOFTPREEMPT_LIB=$PWD/$l; break; }
  done
fi

# Every row's flags. Lengths: full runs as in docs/benchmarks.md; --quick shortens the LP
# kernels and the runs. HP1 is the issue's single 0.45 ms kernel every 20 ms on average;
# BURST its bursts of 5 x 0.5 ms.
if [ $quick = 1 ]; then
  T=(--duration 1 --arrival-reps 1); LP=10; LONG=(--lp-ms 40 --lp-waves 4); PYDUR=2
else
  T=(--duration 4 --arrival-reps 3); LP=50; LONG=(--lp-ms 250 --lp-waves 16); PYDUR=8
fi
HP1=(--hp-us 450 --hp-burst 1 --gap-ms 20)
BURST=(--hp-us 500 --hp-burst 5 --gap-ms 20)
CO=hp-alone,corun-bare,corun-sp,arrival-bare,arrival-sp,lp-bare
ROWS=(
  "compute|--lp-ms $LP ${HP1[*]} --modes $CO,lp-sp,lp-sp-idle-hp"
  "burst|--lp-ms $LP ${BURST[*]} --modes $CO"
  "memory|--lp-kernel memory --lp-ms $LP ${HP1[*]} --modes $CO"
  "gemm|--lp-kernel gemm --lp-ms $LP ${HP1[*]} --modes $CO"
  "longthread|${LONG[*]} ${HP1[*]} --modes $CO"
  "mandel|--lp-kernel mandel --lp-ms $LP ${HP1[*]} --modes $CO"
  "short|--lp-ms 0.1 ${HP1[*]} --modes lp-bare,lp-sp,lp-sp-idle-hp"
  "multi|--lp-ms $LP ${HP1[*]} --modes hp-alone,multi-bare,multi-sp,lp-bare"
)

mkdir -p "$out"
rm -f "$out"/*.json
status=0 i=0
for row in "${ROWS[@]}"; do
  name=${row%%|*} flags=${row#*|}
  i=$((i + 1))
  if [ -n "$only" ] && ! [[ ",$only," == *",$name,"* ]]; then continue; fi
  tag=$(printf '%02d-%s' "$i" "$name")
  echo "== $name: preempt $flags ${T[*]} ${extra[*]}" >&2
  # shellcheck disable=SC2086 # $flags is a word list by design
  timeout "${ROW_LIMIT:-900}" "$preempt" $flags "${T[@]}" --label "$name" \
    --json "$out/$tag.json" "${extra[@]}" > "$out/$tag.txt"
  rc=$?
  cat "$out/$tag.txt"
  [ $rc = 0 ] || { echo "bench-matrix: row $name failed (rc=$rc)" >&2; status=1; }
done

if [ -n "$py" ] && { [ -z "$only" ] || [[ ",$only," == *",pyopencl,"* ]]; }; then
  icd=${SOFTPREEMPT_TEST_ICD:-/etc/OpenCL/vendors/pocl.icd}
  vendor=$(head -n1 "$icd")
  echo "== pyopencl: $py benches/pyopencl_pair.py" >&2
  timeout "${ROW_LIMIT:-900}" "$py" benches/pyopencl_pair.py --lib "$SOFTPREEMPT_LIB" \
    --vendor-lib "$vendor" --duration $PYDUR --lp-ms $LP --json "$out/90-pyopencl.json" \
    > "$out/90-pyopencl.txt"
  rc=$?
  cat "$out/90-pyopencl.txt"
  [ $rc = 0 ] || { echo "bench-matrix: pyopencl row failed (rc=$rc)" >&2; status=1; }
fi

# The combined table, then the plots (per row, and the matrix's bars): a machine without a
# font still gets every table.
"$preempt" --matrix "$out" || status=1
for j in "$out"/[0-8]*.json; do
  [ -f "$j" ] || continue
  "$preempt" --plot-from "$j" --plots "$out/plots/$(basename "$j" .json)" 2>/dev/null ||
    { echo "bench-matrix: no plots for $j (no font?)" >&2; break; }
done
"$preempt" --matrix "$out" --plots "$out/plots" >/dev/null 2>&1 ||
  echo "bench-matrix: matrix plots not drawn; elsewhere: preempt --matrix $out --plots $out/plots" >&2
echo "bench-matrix: $out/matrix.md" >&2
exit $status
