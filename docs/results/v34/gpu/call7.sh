# Session 55's seventh GPU call: kcprobe.py through this build ran at bare's speed in its
# first process and 2.7-4.2 µs a launch dearer in the next ones (call 6). Three processes
# in a row with the layer's debug log, then two with pyopencl's binary cache off, then
# bare twice.
set -u
. scripts/gpu-env.sh
PY=$(mktemp -d); for w in carry/wheels/{pyopencl,pytools,platformdirs,siphash24,typing_extensions}-*.whl; do python3 -m zipfile -e "$w" "$PY" >/dev/null; done
VB=$OUT/vb; VS=$OUT/vs; mkdir -p $VB $VS; echo $NV > $VB/nv.icd; echo $PWD/carry/bin/libsoftpreempt.so > $VS/sp.icd
export SOFTPREEMPT_VENDORS=$NV SOFTPREEMPT_PRIORITY=high PYTHONPATH=$PY XDG_CACHE_HOME=$OUT/xdg
for i in 1 2 3; do SOFTPREEMPT_LOG=softpreempt=debug SOFTPREEMPT_LOG_FILE=$OUT/log-$i.txt OCL_ICD_VENDORS=$VS python3 docs/results/v34/gpu/kcprobe.py 2>/dev/null | sed "s/^/sp $i /"; done
for i in 1 2; do PYOPENCL_NO_CACHE=1 OCL_ICD_VENDORS=$VS python3 docs/results/v34/gpu/kcprobe.py 2>/dev/null | sed "s/^/sp nocache $i /"; done
for i in 1 2; do OCL_ICD_VENDORS=$VB python3 docs/results/v34/gpu/kcprobe.py 2>/dev/null | sed "s/^/bare $i /"; done
for i in 1 2 3; do echo "== log $i"; sed 's/softpreempt\[[0-9]*\]: //' $OUT/log-$i.txt | cut -c1-160 | sort | uniq -c | sort -rn | head -25; done
