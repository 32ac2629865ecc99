#!/usr/bin/env bash
# Installs what SoftPreempt needs on a fresh Debian/Ubuntu machine: the ocl-icd loader,
# OpenCL headers, PoCL (the default CPU device) and clinfo, and python3 with venv and pip
# when python3 lacks them. Idempotent; needs root (or sudo).
# --test: also what only the tests use: promtool (Debian's prometheus package), which
# checks the exporter's output, and unshare (util-linux), for the IPC namespace test.
set -euo pipefail
pkgs=(ocl-icd-libopencl1 ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo)
[ "${1:-}" = --test ] && pkgs+=(prometheus util-linux)
# scripts/clients.sh runs pyopencl and OpenCV from a venv of python3's.
python3 -c 'import venv, ensurepip' 2>/dev/null || pkgs+=(python3 python3-venv python3-pip)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing ${missing[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
command -v cargo >/dev/null || { echo "setup: a Rust toolchain (cargo) is required: https://rustup.rs" >&2; exit 1; }
