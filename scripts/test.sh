#!/usr/bin/env bash
# The README's test command: set everything up, build, and run every test through the real
# ICD loader with PoCL underneath.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
# What setup --test installed is required, not optional, in the tests below: promtool
# checks the exporter's output; unshare runs arbiter clients in IPC namespaces of their
# own (required where the system permits namespaces, as root or with user namespaces).
export SOFTPREEMPT_REQUIRE_PROMTOOL=1
if unshare --ipc true 2>/dev/null || unshare --user --map-root-user --ipc true 2>/dev/null; then
  export SOFTPREEMPT_REQUIRE_UNSHARE=1
fi
cargo build --workspace --all-targets
# The preemption benchmark's smoke mode: every mode for about a second on PoCL, plots
# included, so the harness never rots (it exits non-zero if any mode fails).
cargo test --bench preempt -- --smoke --json target/smoke/preempt.json --plots target/smoke
# The reliability soak's smoke mode: every scenario briefly (kill -9, many processes, a
# hostile segment, bad API input, bad config, fork); exits non-zero on any crash, hang or
# wrong result. The full run is `cargo bench --bench soak` (docs/reliability.md).
cargo test --bench soak -- --smoke
# The client venv first (cached per machine): the pyopencl test below needs it.
SOFTPREEMPT_TEST_PYTHON=$(bash scripts/clients.sh --python)
export SOFTPREEMPT_TEST_PYTHON SOFTPREEMPT_TEST_REQUIRE_PYOPENCL=1
cargo test --workspace -- --test-threads=2
# The cluster manifests against the Kubernetes schemas (kubernetes-validate from PyPI).
bash scripts/check-deploy.sh
# Real clients through the loader: pyopencl's own test suite and an OpenCV T-API workload,
# bare PoCL against SoftPreempt (docs/compatibility.md). The two run side by side, each with
# its own arbiter, caches and output folder (target/clients/pyopencl, .../opencv): their
# cold runs are mostly one core's compiles (the other core idle), and one after the other
# they took 25 of the test command's 33 minutes on two cores.
mkdir -p target/clients
clients() {
  CLIENTS_OUT=$PWD/target/clients/$1 bash scripts/clients.sh --only "$1" \
    > "target/clients/$1.log" 2>&1
}
clients pyopencl & pyopencl_pid=$!
clients opencv & opencv_pid=$!
rc=0
wait "$pyopencl_pid" || rc=1
wait "$opencv_pid" || rc=1
cat target/clients/pyopencl.log target/clients/opencv.log
exit "$rc"
