# NOT RUN in session 55: no machine was lent for it (the session's device time ran out
# while machines were refused). Ready for the next session.
# Session 55's eighth GPU call: more of what makes NVIDIA's later enqueues dearer in a
# process (lc.c's PRE: ue, uew, thq, clone, bar, def; none and cb again for reference), bare, K2 with an
# event per launch and without, 3 processes each in turns.
set -u
. scripts/gpu-env.sh
for m in e n; do for i in 1 2 3; do
  for p in none cb ue uew thq clone bar def; do PRE=$p OCL_ICD_FILENAMES=$NV carry/bin/lc NVIDIA K2 $m | sed "s/^/bare /"; done
done; done 2>&1 | sort -k2,5 | tee $OUT/lc-pre2.txt
