# Session 53's third GPU call: the OpenCV pair's LP at the defaults, in longer turns (two
# runs of 110 s) than call 1's 60 s, whose two runs at the defaults gave 1.007 ± 0.035 and
# 0.961 ± 0.014 of bare.
set -u
. scripts/gpu-env.sh
echo "### opencv"
JOBS='- corun-ab 110; - corun-ab 110' timeout 585 bash scripts/gpu/opencv-turns.sh 2>&1 | tail -12
