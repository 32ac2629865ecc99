# Session 53's GPU call: the OpenCV pair's LP kept 0.95-0.96 of bare (session 52). Its
# profile showed nearly every LP launch sent direct and no yields, so the LP loses what the
# HP's requests hold it off for: their whole wall time (host gaps between the commands
# included) and the linger after. Measured in turns, as issue 24's rows: the defaults, then
# hp_linger_us = 0 and 500 (the LP's loss and the HP's p99 at each).
set -u
. scripts/gpu-env.sh
echo "### opencv"
JOBS='- corun-ab 60; - corun-ab 60 hp_linger_us = 0; - corun-ab 60 hp_linger_us = 500; - corun-ab 60' \
  timeout 560 bash scripts/gpu/opencv-turns.sh 2>&1 | tail -24
