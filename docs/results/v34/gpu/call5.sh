# Session 55's fifth GPU call: what makes NVIDIA's own enqueue dearer in a process
# (call 4: the vendor's clEnqueueNDRangeKernel took 1.8 µs more inside the layer, for a
# kernel the layer does not rewrite too). lc.c, bare NVIDIA with each PRE, and this build,
# in turns, 3 processes each, K2 (not rewritten), with and without an event.
set -u
. scripts/gpu-env.sh
for m in e n; do for i in 1 2 3; do
  for p in none cb q2 thr evs; do PRE=$p OCL_ICD_FILENAMES=$NV carry/bin/lc NVIDIA K2 $m | sed "s/^/bare /"; done
  SOFTPREEMPT_VENDORS=$NV SOFTPREEMPT_PRIORITY=high OCL_ICD_FILENAMES=$PWD/carry/bin/libsoftpreempt.so carry/bin/lc SoftPreempt K2 $m | sed "s/^/sp   /"
done; done 2>&1 | sort -k2,5 | tee $OUT/lc-pre.txt
