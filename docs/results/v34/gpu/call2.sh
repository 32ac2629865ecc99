# Session 55's second GPU call: what a lone HP's tiny 2-D launches pay through the layer
# (kernel_cost.py's groups_2d paid +4.6 µs a launch in call 1, linear_id nothing).
# docs/results/v34/gpu/lc.c: K1 (rewritten: reads group ids) and K2 (the same work from
# get_global_id, not rewritten), an event per launch (e) or none (n); bare, this build
# (new) and this build with slicing and yielding off (off), 3 processes each, in turns.
set -u
. scripts/gpu-env.sh
printf 'version = 1\n[sched]\nslice = "never"\nyielding = "never"\n' > $OUT/off.toml
for kk in K1 K2; do for m in n e; do for i in 1 2 3; do
  OCL_ICD_FILENAMES=$NV carry/bin/lc NVIDIA $kk $m | sed "s/^/bare /"
  SOFTPREEMPT_PROFILE=$OUT/prof-$kk-$m.jsonl SOFTPREEMPT_VENDORS=$NV SOFTPREEMPT_PRIORITY=high OCL_ICD_FILENAMES=$PWD/carry/bin/libsoftpreempt.so carry/bin/lc SoftPreempt $kk $m | sed "s/^/new  /"
  SOFTPREEMPT_CONFIG=$OUT/off.toml SOFTPREEMPT_VENDORS=$NV SOFTPREEMPT_PRIORITY=high OCL_ICD_FILENAMES=$PWD/carry/bin/libsoftpreempt.so carry/bin/lc SoftPreempt $kk $m | sed "s/^/off  /"
done; done; done 2>&1 | tee $OUT/lc.txt
