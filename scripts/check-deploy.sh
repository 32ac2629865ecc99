#!/usr/bin/env bash
# Checks the cluster manifests (deploy/kubernetes): every resource against the Kubernetes
# API schemas with kubernetes-validate from PyPI (--strict: unknown fields fail too), the
# kustomizations' resource lists, and the ConfigMap's softpreempt.toml with
# `softpreempt config check`. A deliberately broken copy must fail, so the check itself is
# known to work. Then the ConfigMap's node-install.sh (the DaemonSet's installer) runs
# twice in a sandbox, as on a restarted node, and an OpenCL application given a pod's
# environment must see the SoftPreempt platform and only it. Called by scripts/test.sh
# after the build; the validator's venv is cached per machine.
set -euo pipefail
cd "$(dirname "$0")/.."
VALIDATOR="kubernetes-validate==1.37.0"
cache=${XDG_CACHE_HOME:-$HOME/.cache}/softpreempt-deploy/$(echo "$VALIDATOR" | sha256sum | cut -c1-16)
if [ ! -x "$cache/venv/bin/kubernetes-validate" ]; then
  echo "check-deploy: installing $VALIDATOR into $cache" >&2
  rm -rf "$cache" && mkdir -p "$cache"
  python3 -m venv "$cache/venv"
  "$cache/venv/bin/pip" install -q --disable-pip-version-check "$VALIDATOR"
fi
kv=$cache/venv/bin/kubernetes-validate
py=$cache/venv/bin/python
softpreempt=${SOFTPREEMPT_BIN:-target/debug/softpreempt}
lib=${SOFTPREEMPT_LIB:-target/debug/libsoftpreempt.so}

mapfile -t manifests < <(find deploy/kubernetes -name '*.yaml' ! -name kustomization.yaml | sort)
echo "check-deploy: validating ${#manifests[@]} manifests" >&2
"$kv" --strict "${manifests[@]}"

# Every kustomization names files that exist, and every manifest is named by one.
for k in $(find deploy/kubernetes -name kustomization.yaml); do
  d=$(dirname "$k")
  "$py" - "$k" "$d" <<'PY'
import os, sys, yaml
k, d = sys.argv[1], sys.argv[2]
res = yaml.safe_load(open(k))["resources"]
missing = [r for r in res if not os.path.exists(os.path.join(d, r))]
unnamed = [f for f in os.listdir(d) if f.endswith(".yaml") and f != "kustomization.yaml" and f not in res]
if missing or unnamed:
    sys.exit(f"{k}: missing {missing}, not listed {unnamed}")
PY
done

# The configuration the DaemonSet installs is one the layer accepts.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" -c 'import sys, yaml; sys.stdout.write(yaml.safe_load(open(sys.argv[1]))["data"]["softpreempt.toml"])' \
  deploy/kubernetes/configmap.yaml > "$tmp/softpreempt.toml"
"$softpreempt" config check "$tmp/softpreempt.toml" >/dev/null

# The validator rejects a manifest with a wrong type and one with an unknown field.
sed 's/containerPort: 9863/containerPort: "nine"/' deploy/kubernetes/daemonset.yaml > "$tmp/bad-type.yaml"
sed 's/imagePullPolicy: IfNotPresent/imagePullPolicy: IfNotPresent\n          pullImagePolicy: Always/' \
  deploy/kubernetes/daemonset.yaml > "$tmp/bad-field.yaml"
for bad in "$tmp/bad-type.yaml" "$tmp/bad-field.yaml"; do
  if "$kv" --strict "$bad" >/dev/null 2>&1; then
    echo "check-deploy: the validator accepted the broken $(basename "$bad")" >&2
    exit 1
  fi
done

# The installer, twice (a restarted node agent), in a sandbox; `softpreempt` on its PATH.
cm() {
  "$py" -c 'import sys, yaml; sys.stdout.write(yaml.safe_load(open(sys.argv[1]))["data"][sys.argv[2]])' \
    deploy/kubernetes/configmap.yaml "$1"
}
cm node-install.sh > "$tmp/node-install.sh"
mkdir -p "$tmp/bin" && ln -s "$PWD/$softpreempt" "$tmp/bin/softpreempt"
for run in 1 2; do
  PATH=$tmp/bin:$PATH PREFIX=$tmp/opt/softpreempt ARBITER_DIR=$tmp/run/softpreempt \
    SHARE_GID=$(id -g) LIB=$PWD/$lib CONFIG_SRC=$tmp/softpreempt.toml \
    sh "$tmp/node-install.sh" > "$tmp/install-$run.log"
  (cd "$tmp/opt" && find . -type f | sort > "$tmp/tree-$run")
done
cmp -s "$tmp/tree-1" "$tmp/tree-2" || { echo "check-deploy: a second install left another tree" >&2; diff "$tmp/tree-1" "$tmp/tree-2" >&2; exit 1; }
[ "$(stat -c %a "$tmp/run/softpreempt")" = 2770 ] || { echo "check-deploy: arbiter directory mode $(stat -c %a "$tmp/run/softpreempt")" >&2; exit 1; }
# A pod's view: only the SoftPreempt platform, wrapping the node's vendor.
platforms=$(OCL_ICD_VENDORS=$tmp/opt/softpreempt/etc/OpenCL/vendors \
  SOFTPREEMPT_CONFIG=$tmp/opt/softpreempt/etc/softpreempt.toml \
  SOFTPREEMPT_SHM_DIR=$tmp/run/softpreempt clinfo -l 2>&1)
if ! grep -q "Platform #0: SoftPreempt" <<<"$platforms" || grep -q "Platform #1" <<<"$platforms"; then
  echo "check-deploy: a pod would see: $platforms" >&2
  exit 1
fi
echo "check-deploy: node-install.sh twice in a sandbox: same tree; a pod sees:" >&2
echo "$platforms" | sed 's/^/  /' >&2
echo "check-deploy: manifests, kustomizations and the ConfigMap's config are valid" >&2
