# Session 52's second GPU call: issue 24's rows with main's head: the lone OpenCV HP in
# turns with a bare twin (two 30 s runs), the OpenCV pair in turns, and the request of N
# commands (benches/pipeline.rs).
set -u
. scripts/gpu-env.sh
echo "### opencv"; JOBS='- hp-ab 30; - corun-ab 60; - hp-ab 30' timeout 330 bash scripts/gpu/opencv-turns.sh 2>&1 | tail -14
echo "### pipeline"; timeout 200 carry/bin/pipeline --requests 100 --json "$OUT/pipeline.json" 2>&1 | tail -30
